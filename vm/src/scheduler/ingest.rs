//! Step 3: take a window of received instructions, fuse, give slots, build edges.

use super::{Scheduler, Slot};
use crate::dependence::Access;
use crate::instruction::Instruction;

impl Scheduler {
    /// Ingests at most one window of received instructions; returns whether any was taken.
    pub(super) fn ingest(&mut self) -> bool {
        let window = self.shared.config.window;
        let mut taken = 0;
        let mut fused = 0;
        while taken < window {
            let Some(mut head) = self.local.pop_front() else {
                break;
            };
            taken += 1;
            head.id = self.next_id;
            self.next_id += 1;
            if head.p().is_barrier() {
                let epoch = self.first_epoch + self.epochs.len() as u64 - 1;
                self.barriers.push_back((epoch, head));
                self.counts.inserted += 1;
                self.epochs.push_back(0);
                continue;
            }
            let s = head.stream.0 as usize;
            if self.streams[s].fusion && head.p().fusable() {
                while taken < window {
                    let fits = self.local.front().get().is_some_and(|n| {
                        n.stream == head.stream && n.p().fusable() && !n.p().is_barrier()
                    });
                    if !fits {
                        break;
                    }
                    let mut m = self.local.pop_front().expect("front exists");
                    m.id = self.next_id;
                    self.next_id += 1;
                    head.followers.push_back(m);
                    taken += 1;
                    fused += 1;
                }
            }
            self.insert(head);
        }
        self.counts.fused += fused;
        taken > 0
    }

    /// Gives `node` a slot, registers its accesses and edges, and queues it on its stream.
    fn insert(&mut self, mut node: Box<Instruction>) {
        let slot = match self.free_slots.pop() {
            Some(s) => s,
            None => {
                self.slots.push(Slot::empty());
                (self.slots.len() - 1) as u32
            }
        };
        let stream = node.stream.0;
        let members = node.members() as u32;
        node.slot = slot;
        let access = Access { slot, stream };
        let Scheduler { owner, slots, .. } = self;
        let mut in_degree = 0;
        node.for_each_member(|m| {
            let mut edge = |from: u32| {
                slots[from as usize].out.push(slot);
                in_degree += 1;
            };
            for b in m.p().inputs() {
                owner.rw(&b.access).read(access, &mut edge);
            }
            for b in m.p().outputs() {
                owner.rw(&b.access).write(access, &mut edge);
            }
        });
        let epoch = self.first_epoch + self.epochs.len() as u64 - 1;
        *self.epochs.back_mut().expect("an open epoch") += 1;
        let sl = &mut self.slots[slot as usize];
        sl.id = node.id;
        sl.stream = stream;
        sl.in_degree = in_degree;
        sl.epoch = epoch;
        sl.members = members;
        sl.done = false;
        sl.event = None;
        sl.node = Some(node);
        self.streams[stream as usize].waiting.push_back(slot);
        self.live += 1;
        self.counts.inserted += members as u64;
    }
}
