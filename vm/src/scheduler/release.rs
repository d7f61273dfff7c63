//! Steps 1 and 2: release finished units (strictly from the front of each stream's running
//! list) and run barriers whose epoch has drained.

use super::Scheduler;
use crate::error::panic_message;
use crate::exec::ExecEnv;
use crate::instruction::{ComputeCtx, InstrAdapter, InstrList, Instruction};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering::{Relaxed, SeqCst};

/// The scheduler's counters: kept locally and published once per pass, so the submitting
/// threads' cache lines are not written per instruction.
#[derive(Default)]
pub(super) struct Counts {
    pub inserted: u64,
    pub erased: u64,
    pub fused: u64,
    pub dispatched: u64,
    pub inlined: u64,
    pub unpublished_releases: usize,
}

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
                            // The device reported a fault for the awaited work: what the
                            // instruction writes (a host copy's destination) is not valid.
                            if let (Some(e), Some(node)) = (ev.failure(), &sl.node) {
                                node.for_each_member(|m| {
                                    for b in m.p().outputs() {
                                        b.poison_with(&e);
                                    }
                                });
                            }
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
        self.publish();
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
            for b in m.p().inputs().iter().chain(m.p().outputs()) {
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
        self.recycle_node(node);
        self.counts.erased += members;
        self.counts.unpublished_releases += members as usize;
    }

    /// Empties a released node and its fused followers and keeps them for the pool.
    fn recycle_node(&mut self, node: Box<Instruction>) {
        let mut rest = InstrList::new(InstrAdapter::new());
        rest.push_back(node);
        // A policy's drop glue is user code: a panic there must not take the scheduler down.
        // One guard for the whole unit; after a panic, the nodes left get a new one.
        loop {
            let Scheduler {
                recycle,
                deferred,
                deferred_recent,
                deferred_next,
                defer_drops,
                pooled,
                pooled_deferred,
                ..
            } = self;
            let r = catch_unwind(AssertUnwindSafe(|| {
                while let Some(mut n) = rest.pop_front() {
                    // The followers first, onto `rest`: if the policy's drop panics, the node
                    // unwinding out of this loop takes no other node with it.
                    rest.cursor_mut().splice_after(n.followers.take());
                    n.id = 0; // unnumbered: `ingest` numbers it when it comes back
                    *pooled += 1;
                    if *defer_drops && n.flags.deferred_drop {
                        n.clear_keeping_policy();
                        // The hint: the node put here a few nodes before, which the pool's
                        // walk from the back reaches that many steps later.
                        let i = *deferred_next;
                        n.pending_hint = std::mem::replace(
                            &mut deferred_recent[i],
                            &*n as *const Instruction as usize,
                        );
                        *deferred_next = (i + 1) % deferred_recent.len();
                        *pooled_deferred += 1;
                        deferred.push_back(n);
                    } else {
                        n.clear();
                        recycle.push_back(n);
                    }
                }
            }));
            match r {
                Ok(()) => return,
                // The node whose drop panicked is freed (its policy already dropped, or
                // partly, by the unwinding); the rest are recycled as usual.
                Err(p) => tracing::error!("an instruction's drop panicked: {}", panic_message(&*p)),
            }
        }
    }

    /// Drops the policies of every released node left for the submitting threads (see
    /// `InstructionPolicy::deferred_drop`), those not yet handed over and those waiting in the
    /// engine's list; the emptied nodes go to the pool at the next `publish`. A node a
    /// submitting thread has already taken has its policy dropped by that thread.
    pub(crate) fn sweep_deferred(&mut self) {
        let mut all = std::mem::replace(&mut self.deferred, InstrList::new(InstrAdapter::new()));
        if !self.shared.deferred_nodes.is_empty() {
            self.shared.deferred_count.store(0, Relaxed);
            all.back_mut()
                .splice_after(self.shared.deferred_nodes.take());
        }
        crate::pool::drop_policies(&mut all, &mut self.recycle);
        self.pooled_deferred = 0; // now on `recycle` (still counted in `pooled`)
    }

    /// Publishes the counters and the in-flight count; wakes submitters blocked on back-pressure.
    /// Hands released nodes to the pool once [`POOL_BATCH`](crate::pool::POOL_BATCH) have
    /// gathered: each hand-over takes locked instructions on lines the submitting threads
    /// share, and per pass they were 7 % of the scheduler's time in `vm_chain`.
    pub(super) fn publish(&mut self) {
        self.publish_with(false);
    }

    /// [`publish`](Self::publish), handing every released node to the pool (before the
    /// scheduler lets go of its work: a barrier, the end of its passes).
    pub(crate) fn publish_all(&mut self) {
        self.publish_with(true);
    }

    fn publish_with(&mut self, all: bool) {
        self.publish_counters();
        if all || self.pooled >= crate::pool::POOL_BATCH {
            self.hand_over_nodes();
        }
        if self.counts.unpublished_releases > 0 {
            self.shared
                .in_flight
                // SeqCst, as `wake_submitters`' load of the waiter count: see there.
                .fetch_sub(self.counts.unpublished_releases, SeqCst);
            self.counts.unpublished_releases = 0;
            self.shared.wake_submitters();
        }
    }

    /// Moves the released nodes to the engine's lists, for the submitting threads.
    fn hand_over_nodes(&mut self) {
        let (deferred, free) = (self.pooled_deferred, self.pooled - self.pooled_deferred);
        (self.pooled, self.pooled_deferred) = (0, 0);
        if !self.deferred.is_empty() {
            if self.shared.deferred_count.load(Relaxed) < crate::pool::POOL_CAP {
                self.shared.deferred_count.fetch_add(deferred, Relaxed);
                self.shared.deferred_nodes.push(self.deferred.take());
            } else {
                // The submitting threads are not taking them: drop the policies here.
                let mut d = self.deferred.take();
                crate::pool::drop_policies(&mut d, &mut self.recycle);
            }
        }
        if !self.recycle.is_empty() {
            if self.shared.free_count.load(Relaxed) < crate::pool::POOL_CAP {
                self.shared.free_count.fetch_add(free, Relaxed);
                self.shared.free_nodes.push(self.recycle.take());
            } else {
                self.recycle.clear(); // frees the nodes: the pool is full
            }
        }
    }

    /// Publishes the counters.
    pub(super) fn publish_counters(&self) {
        let st = &self.shared.stats;
        st.inserted.store(self.counts.inserted, Relaxed);
        st.fused.store(self.counts.fused, Relaxed);
        st.dispatched.store(self.counts.dispatched, Relaxed);
        st.erased.store(self.counts.erased, Relaxed);
        st.inlined.store(self.counts.inlined, Relaxed);
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
            // Everything before the barrier is released: drop the policies left for the
            // submitting threads, so that a `sync` it wakes finds them dropped.
            self.sweep_deferred();
            // Count the barrier as released before its callback runs, so a `sync` it wakes sees
            // counters that include everything before it and the barrier itself.
            self.counts.erased += 1;
            self.counts.unpublished_releases += 1;
            self.publish_all();
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
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| b.p_mut().compute(&mut ctx))) {
                tracing::error!("a barrier callback panicked: {}", panic_message(&*p));
            }
            self.recycle_node(b);
            any = true;
        }
        any
    }
}
