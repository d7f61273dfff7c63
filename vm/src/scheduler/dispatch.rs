//! Step 4: dispatch — prepare (with the out-of-memory path), then compute inline or hand the
//! unit to the stream's worker.

use super::Scheduler;
use crate::blob::Blob;
use crate::error::Error;
use crate::error::panic_message;
use crate::exec::{ExecEnv, run_unit};
use crate::instruction::{InstrAdapter, InstrList, Instruction, PrepareCtx, PrepareError};
use crate::stream::Exec;
use smallvec::SmallVec;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

impl Scheduler {
    /// Dispatches, per stream, every unit at the head of its FIFO that has no in-edges.
    pub(super) fn dispatch_ready(&mut self) -> bool {
        let mut any = false;
        for s in 0..self.streams.len() {
            while let Some(&slot) = self.streams[s].waiting.front() {
                if self.slots[slot as usize].in_degree > 0 || self.hands_over() {
                    break;
                }
                self.streams[s].waiting.pop_front();
                self.dispatch(s, slot);
                any = true;
            }
            self.flush_worker_batch(s);
        }
        any
    }

    fn flush_worker_batch(&mut self, s: usize) {
        let st = &mut self.streams[s];
        if let Some(w) = st.worker.as_ref()
            && !st.worker_batch.is_empty()
        {
            w.queue.push(st.worker_batch.take());
        }
    }

    fn dispatch(&mut self, s: usize, slot: u32) {
        crate::fail_point!("vm::dispatch");
        let mut node = self.slots[slot as usize]
            .node
            .take()
            .expect("a waiting unit owns its node");
        self.prepare_unit(s, &mut node);
        let members = self.slots[slot as usize].members as u64;
        self.streams[s].running.push_back(slot);
        self.counts.dispatched += members;
        match self.streams[s].exec {
            Exec::Inline => {
                let st = &self.streams[s];
                let env = ExecEnv {
                    stream_id: node.stream,
                    policy: &*st.policy,
                    allocator: &st.allocator,
                    shared: &self.shared,
                };
                // Submitters of cheap ops do not wait for a pass that computes this.
                let heavy = !node.flags.cheap;
                if heavy {
                    self.shared.heavy.store(true, Relaxed);
                }
                run_unit(&mut node, &env);
                if heavy {
                    self.shared.heavy.store(false, Relaxed);
                }
                self.complete(node);
            }
            Exec::Worker => self.streams[s].worker_batch.push_back(node),
        }
    }

    /// Records that a unit's compute returned (inline, or reported by a worker).
    pub(super) fn complete(&mut self, mut node: Box<Instruction>) {
        let sl = &mut self.slots[node.slot as usize];
        sl.event = node.completion.take();
        sl.done = sl.event.is_none();
        sl.node = Some(node);
    }

    fn prepare_unit(&mut self, s: usize, node: &mut Instruction) {
        let failed = self.prepare_member(s, node, &[], None);
        if node.followers.is_empty() {
            return;
        }
        // The outputs of members that failed to prepare, or were skipped as dependents of a
        // failure: a later member reading one is a dependent too (its input is poisoned only
        // when the unit runs).
        let mut dead: SmallVec<[*const Blob; 4]> = SmallVec::new();
        let note = |m: &Instruction, failed: bool, dead: &mut SmallVec<[*const Blob; 4]>| {
            if failed {
                dead.extend(m.p().outputs().iter().map(|b| &**b as *const Blob));
            }
        };
        note(node, failed, &mut dead);
        let mut rest = node.followers.take();
        let mut back = InstrList::new(InstrAdapter::new());
        while let Some(mut m) = rest.pop_front() {
            let failed = self.prepare_member(s, &mut m, &dead, Some((&*node, &back)));
            note(&m, failed, &mut dead);
            back.push_back(m);
        }
        node.followers = back;
    }

    fn try_prepare(&self, s: usize, m: &mut Instruction) -> Result<(), PrepareError> {
        let mut ctx = PrepareCtx {
            allocator: &self.streams[s].allocator,
        };
        match catch_unwind(AssertUnwindSafe(|| m.p_mut().prepare(&mut ctx))) {
            Ok(r) => r,
            Err(p) => Err(PrepareError::Other(Error::KernelPanic {
                at: m.p().caller(),
                op: m.p().name().to_string(),
                instr_id: m.id,
                message: panic_message(&*p),
            })),
        }
    }

    /// Prepares member `m` of a unit on stream `s`, where `dead` holds the outputs of the
    /// unit's earlier members that failed or were skipped, and `earlier` those members (the
    /// head and the followers prepared so far). Returns whether `m` failed or was skipped.
    fn prepare_member(
        &mut self,
        s: usize,
        m: &mut Instruction,
        dead: &[*const Blob],
        earlier: Option<(&Instruction, &InstrList)>,
    ) -> bool {
        // A dependent of a failure is skipped at compute (`exec::run_policy`): allocating its
        // outputs first would be wasted, and after an out-of-memory error each dependent would
        // run the whole OOM path again and report an OOM of its own instead of the root error.
        if !m.flags.handles_poison
            && m.p()
                .inputs()
                .iter()
                .any(|b| b.is_poisoned() || dead.contains(&(&**b as *const Blob)))
            && !may_be_clean(m, dead, earlier)
        {
            m.prep_error = None;
            return true;
        }
        let r = match self.try_prepare(s, m) {
            Err(PrepareError::OutOfMemory(_)) => {
                // The OOM path: free what can be freed, wait for the device's running work,
                // shrink the caches, retry once.
                self.oom_drain(s);
                // Frees whose memory goes with their policy (a device's `ReleaseTensor`, which
                // frees once its event completes) wait on the deferred list: drop them now.
                self.sweep_deferred();
                // What the engine keeps for work that may come back (promoted plans' arenas)
                // goes back to the allocators, then every allocator of the device shrinks:
                // its other streams' caches hold the same memory.
                let device = self.streams[s].device;
                self.shared.shed_caches(device);
                for (k, st) in self.streams.iter().enumerate() {
                    let first = self.streams[..k]
                        .iter()
                        .all(|o| !std::sync::Arc::ptr_eq(&o.allocator, &st.allocator));
                    if st.device == device && first {
                        st.allocator.shrink();
                    }
                }
                let r = self.try_prepare(s, m);
                let ok = r.is_ok();
                self.streams[s].allocator.note_retry(ok);
                if ok {
                    self.shared.stats.oom_retries.fetch_add(1, Relaxed);
                } else {
                    self.shared.stats.ooms.fetch_add(1, Relaxed);
                }
                r
            }
            r => r,
        };
        m.prep_error = match r {
            Ok(()) => None,
            Err(PrepareError::Other(e)) => Some(e.with_instr_id(m.id).at(m.p().caller())),
            Err(PrepareError::OutOfMemory(a)) => Some(Error::OutOfMemory {
                at: m.p().caller(),
                op: m.p().name().to_string(),
                requested: a.requested,
                in_use: a.in_use,
                cached: a.cached,
                capacity: a.capacity,
            }),
        };
        m.prep_error.is_some()
    }

    /// Waits until nothing dispatched on the device of stream `s` is still running: releases
    /// finished work, dispatches every ready unit of the other streams (their queued frees and
    /// the work those frees wait behind), and sleeps until workers report. Streams already being
    /// drained (an OOM inside this drain) are skipped, which keeps each stream FIFO. Gives up
    /// after the engine's timeout; the retry then reports the OOM.
    fn oom_drain(&mut self, s: usize) {
        let device = self.streams[s].device;
        let deadline = Instant::now() + self.shared.config.timeout;
        self.draining.push(s);
        loop {
            self.release_finished();
            for t in 0..self.streams.len() {
                if self.draining.contains(&t) {
                    // Dispatch nothing new here (FIFO), but units already dispatched this pass
                    // must reach the worker, or the stream would look busy forever.
                    self.flush_worker_batch(t);
                    continue;
                }
                while let Some(&slot) = self.streams[t].waiting.front() {
                    if self.slots[slot as usize].in_degree > 0 {
                        break;
                    }
                    self.streams[t].waiting.pop_front();
                    self.dispatch(t, slot);
                }
                self.flush_worker_batch(t);
            }
            let busy = self
                .streams
                .iter()
                .any(|st| st.device == device && !st.running.is_empty());
            if !busy || Instant::now() >= deadline {
                break;
            }
            self.shared
                .pending
                .notifier
                .wait(Some(Duration::from_micros(200)));
        }
        self.draining.pop();
    }
}

/// Whether every input of `m` that carries an error is written by an earlier member of its
/// unit (`earlier`: the head and the followers before `m`) that did not fail or get skipped
/// (its outputs are not in `dead`): a successful write clears the error, so `m` may compute
/// on clean values, and must be prepared. (It is skipped at compute if the error stays.)
#[cold]
#[inline(never)]
fn may_be_clean(
    m: &Instruction,
    dead: &[*const Blob],
    earlier: Option<(&Instruction, &InstrList)>,
) -> bool {
    let Some((head, rest)) = earlier else {
        return false;
    };
    let rewritten = |b: &Blob| {
        std::iter::once(head)
            .chain(rest.iter())
            .any(|e| e.p().outputs().iter().any(|o| std::ptr::eq(&**o, b)))
    };
    m.p().inputs().iter().all(|b| {
        let dead = dead.contains(&(&**b as *const Blob));
        !dead && (!b.is_poisoned() || rewritten(b))
    })
}
