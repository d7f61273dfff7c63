//! Step 3: take a window of received instructions, fuse, give slots, build edges.

use super::{Scheduler, Slot};
use crate::Counted;
use crate::blob::Blob;
use crate::dependence::Access;
use crate::instruction::{InstrAdapter, InstrList, Instruction};
use smallvec::SmallVec;

/// How many instructions of other streams fusion may step over to reach a follower.
const LOOK_AHEAD: usize = 16;

/// The blobs that the stepped-over instructions read and write, with a one-word filter for
/// each set so that most candidates are cleared without a scan.
#[derive(Default)]
struct Footprint {
    count: usize,
    read_bits: u64,
    write_bits: u64,
    reads: SmallVec<[*const Blob; 16]>,
    writes: SmallVec<[*const Blob; 16]>,
}

fn bit(p: *const Blob) -> u64 {
    // Blobs are separate allocations of over 256 bytes: bits 8.. of their addresses differ.
    1 << ((p as usize >> 8) & 63)
}

impl Footprint {
    fn add(&mut self, n: &Instruction) {
        n.for_each_member(|m| {
            for b in m.p().inputs() {
                self.read_bits |= bit(Counted::as_ptr(b));
                self.reads.push(Counted::as_ptr(b));
            }
            for b in m.p().outputs() {
                self.write_bits |= bit(Counted::as_ptr(b));
                self.writes.push(Counted::as_ptr(b));
            }
        });
        self.count += 1;
    }

    /// Whether `n` must stay after the stepped-over instructions: it reads a blob they write,
    /// or writes one they read or write.
    fn orders(&self, n: &Instruction) -> bool {
        if self.count == 0 {
            return false;
        }
        let p = n.p();
        let hit = |bits: u64, set: &[*const Blob], b: &Counted<Blob>| {
            bits & bit(Counted::as_ptr(b)) != 0 && set.contains(&Counted::as_ptr(b))
        };
        p.inputs()
            .iter()
            .any(|b| hit(self.write_bits, &self.writes, b))
            || p.outputs().iter().any(|b| {
                hit(self.write_bits, &self.writes, b) || hit(self.read_bits, &self.reads, b)
            })
    }
}

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
            self.number(&mut head);
            if head.flags.barrier {
                let epoch = self.first_epoch + self.epochs.len() as u64 - 1;
                self.barriers.push_back((epoch, head));
                self.counts.inserted += 1;
                self.epochs.push_back(0);
                continue;
            }
            let s = head.stream.0 as usize;
            if self.streams[s].fusion && head.flags.fusable && !head.flags.frees_memory {
                let n = self.fuse_into(&mut head, window - taken);
                taken += n;
                fused += n;
            }
            self.insert(head);
        }
        self.counts.fused += fused as u64;
        taken > 0
    }

    /// Gives `node` its id, in submission order, unless a look-ahead already did.
    fn number(&mut self, node: &mut Instruction) {
        if node.id == 0 {
            node.id = self.next_id;
            self.next_id += 1;
        }
    }

    /// Moves into `head.followers` at most `room` of the received instructions that may run
    /// as part of it, and returns how many it moved.
    ///
    /// A follower is fusable, on `head`'s stream, and comes before any barrier, any
    /// instruction that is not fusable, and any same-stream instruction that may not join (so
    /// each stream still runs in submission order). An instruction that frees memory is a unit's
    /// last member and is never stepped over. Fusable instructions of other streams in
    /// between are stepped over (at most [`LOOK_AHEAD`]) and stay queued, in order, if they
    /// share no blob with the follower in a way that orders them (one writes what the other
    /// reads or writes): then running the follower before them is what the edges allow anyway.
    /// Without the look-ahead, ops alternating between two streams never fused at all.
    fn fuse_into(&mut self, head: &mut Instruction, room: usize) -> usize {
        let mut moved = 0;
        let mut stepped = InstrList::new(InstrAdapter::new());
        let mut over = Footprint::default();
        while moved < room {
            let Some(n) = self.local.front().get() else {
                break;
            };
            if n.flags.barrier || !n.flags.fusable {
                break;
            }
            if n.stream == head.stream {
                if over.orders(n) {
                    break;
                }
                let mut m = self.local.pop_front().expect("front exists");
                self.number(&mut m);
                let last = m.flags.frees_memory;
                head.followers.push_back(m);
                moved += 1;
                if last {
                    break; // a free ends the unit: what follows may need its memory
                }
            } else {
                // A free stepped over would run after the follower, which may need its memory.
                if over.count == LOOK_AHEAD || n.flags.frees_memory {
                    break;
                }
                let mut m = self.local.pop_front().expect("front exists");
                self.number(&mut m);
                over.add(&m);
                stepped.push_back(m);
            }
        }
        if !stepped.is_empty() {
            self.local.front_mut().splice_before(stepped);
        }
        moved
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
        // On a stream whose instructions may complete out of order, each access counts as
        // on a stream of its own (a tag no real stream has), so accesses on it get the edges
        // of accesses on two streams.
        let tag = if self.out_of_order.checked_shr(stream).unwrap_or(0) & 1 == 0 {
            stream
        } else {
            u32::MAX - slot
        };
        let access = Access { slot, stream: tag };
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
