//! Steps 1 and 2: release finished units (strictly from the front of each stream's running
//! list) and run barriers whose epoch has drained.

use super::Scheduler;
use crate::exec::{panic_message, ExecEnv};
use crate::instruction::ComputeCtx;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::{AcqRel, Relaxed};

impl Scheduler {
    /// Takes the workers' completions and releases, per stream, every done unit at the front of
    /// its running list. Returns whether any unit was released.
    pub(crate) fn release_finished(&mut self) -> bool {
        let mut done = self.shared.completions.take();
        while let Some(node) = done.pop_front() {
            self.complete(node);
        }
        let mut any = false;
        for s in 0..self.streams.len() {
            while let Some(&front) = self.streams[s].running.front() {
                let sl = &mut self.slots[front as usize];
                if !sl.done {
                    match &sl.event {
                        Some(ev) if ev.is_complete() => {
                            sl.event = None;
                            sl.done = true;
                        }
                        _ => break,
                    }
                }
                self.streams[s].running.pop_front();
                self.release(front);
                any = true;
            }
        }
        if any {
            self.shared.wake_submitters();
        }
        any
    }

    /// Erases a unit's accesses and out-edges, readies its successors, drops its policies.
    fn release(&mut self, slot: u32) {
        let node = self.slots[slot as usize]
            .node
            .take()
            .expect("a done unit owns its node");
        let owner = &mut self.owner;
        node.for_each_member(|m| {
            for b in m.policy.inputs().iter().chain(m.policy.outputs()) {
                owner.rw(&b.access).remove(slot);
            }
        });
        let mut out = std::mem::take(&mut self.slots[slot as usize].out);
        for succ in out.drain(..) {
            self.slots[succ as usize].in_degree -= 1;
        }
        let sl = &mut self.slots[slot as usize];
        sl.out = out; // keep the edge buffer (a pool of one per slot)
        let members = sl.members as u64;
        let epoch = sl.epoch;
        self.epochs[(epoch - self.first_epoch) as usize] -= 1;
        self.live -= 1;
        self.free_slots.push(slot);
        // A policy's drop glue is user code: a panic there must not take the scheduler down.
        if let Err(p) = catch_unwind(AssertUnwindSafe(move || drop(node))) {
            tracing::error!("an instruction's drop panicked: {}", panic_message(&*p));
        }
        self.shared.stats.erased.fetch_add(members, Relaxed);
        self.shared.in_flight.fetch_sub(members as usize, AcqRel);
    }

    /// Runs, in order, every barrier whose earlier instructions are all released.
    pub(super) fn run_barriers(&mut self) -> bool {
        let mut any = false;
        while self
            .barriers
            .front()
            .is_some_and(|(e, _)| *e == self.first_epoch)
            && self.epochs[0] == 0
        {
            let (_, mut b) = self.barriers.pop_front().expect("front exists");
            self.epochs.pop_front();
            self.first_epoch += 1;
            let st = &self.streams[0];
            let env = ExecEnv {
                stream_id: b.stream,
                policy: &*st.policy,
                allocator: &st.allocator,
                shared: &self.shared,
            };
            let mut ctx = ComputeCtx {
                instr_id: b.id,
                stream_id: b.stream,
                stream: env.policy,
                allocator: env.allocator,
                completion: None,
            };
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| b.policy.compute(&mut ctx))) {
                tracing::error!("a barrier callback panicked: {}", panic_message(&*p));
            }
            if let Err(p) = catch_unwind(AssertUnwindSafe(move || drop(b))) {
                tracing::error!("a barrier's drop panicked: {}", panic_message(&*p));
            }
            self.shared.stats.erased.fetch_add(1, Relaxed);
            self.shared.in_flight.fetch_sub(1, AcqRel);
            any = true;
        }
        any
    }
}
