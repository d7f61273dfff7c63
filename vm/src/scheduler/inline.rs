//! Running a cheap instruction at once, on the submitting thread, when the engine is idle.
//!
//! A submitting thread that holds the scheduler (its mutex is free whenever the scheduler
//! thread sleeps) and finds nothing live or queued may run a cheap instruction itself: with no
//! earlier instruction alive there is nothing to order it against, so running it now is what
//! the scheduler would do next anyway, minus the hand-off between threads, which costs more
//! than the work. The instruction goes through the same steps (prepare, compute with its poison
//! checks, panic capture and error recording, release) and the same counters; it only skips
//! the slot, the access lists and the queues, which would be created and erased at once.

use super::Scheduler;
use crate::blob::Blob;
use crate::exec::{EngineScope, ExecEnv, run_policy};
use crate::instruction::{PrepareCtx, Run};
use crate::stream::StreamId;
use std::panic::{AssertUnwindSafe, catch_unwind};

impl Scheduler {
    /// Whether work on `stream` may run now, on this thread: nothing is live or queued, and
    /// the stream computes inline with synchronous completion.
    fn can_run_now(&self, stream: StreamId) -> bool {
        self.is_idle()
            && self
                .streams
                .get(stream.0 as usize)
                .is_some_and(|st| st.runs_now)
    }

    /// Runs `policy` now on this thread if the engine is idle, `stream` computes inline with
    /// synchronous completion, and `prepare` succeeds; returns whether it did. Otherwise the
    /// caller queues the policy as usual (a failing `prepare` then takes the scheduler's OOM
    /// path and errors). The caller drops the policy after a run (its drop glue is user code:
    /// drop it outside the scheduler, see [`drop_policy`]).
    pub(crate) fn try_run_now<P: Run + ?Sized>(
        &mut self,
        stream: StreamId,
        policy: &mut P,
    ) -> bool {
        if !self.can_run_now(stream) {
            return false;
        }
        let st = &self.streams[stream.0 as usize];
        let mut ctx = PrepareCtx {
            allocator: &st.allocator,
        };
        if !matches!(
            catch_unwind(AssertUnwindSafe(|| policy.prepare(&mut ctx))),
            Ok(Ok(()))
        ) {
            return false;
        }
        let id = self.next_id;
        self.next_id += 1;
        let env = ExecEnv {
            stream_id: stream,
            policy: &*st.policy,
            allocator: &st.allocator,
            shared: &self.shared,
        };
        // As on the scheduler thread: a kernel that waits on the engine gets `ReentrantWait`.
        let scope = EngineScope::enter();
        let handles_poison = policy.handles_poison();
        let completion = run_policy(policy, id, None, handles_poison, &env);
        if let Some(ev) = completion {
            // A synchronous stream's events are complete when recorded; a kernel may still
            // declare one of its own. Released means done: wait for it here.
            while !ev.is_complete() {
                std::thread::yield_now();
            }
        }
        drop(scope);
        self.count_inlined();
        true
    }

    /// Whether a submitting thread that holds the scheduler may catch up with the queued work
    /// by running passes itself: nothing is live (so nothing waits on a worker or a device)
    /// and everything received is cheap, on streams that compute inline with synchronous
    /// completion, and no barrier. Takes the pending list to look at it; what it took stays
    /// queued, in order, for whichever thread runs the next pass. Returns how many are queued
    /// if the thread may catch up, else `None`.
    ///
    /// Without this, one small op that finds the scheduler busy is queued, every later one
    /// must queue behind it (the engine is no longer idle), and a loop of small ops stays in
    /// that slower mode for good: the scheduler thread never quite catches up.
    pub(crate) fn only_cheap_queued(&mut self) -> Option<usize> {
        if self.live != 0 || !self.barriers.is_empty() {
            return None;
        }
        if self.local.is_empty() {
            self.local = self.shared.pending.take();
        } else if !self.shared.pending.is_empty() {
            // Received but not looked at (the local list is only refilled once empty): leave
            // it all to the scheduler thread rather than run what may not be cheap here. (A
            // submitter on another thread may still push after this look; the passes stay
            // correct on either thread, only slower here.)
            return None;
        }
        let mut queued = 0;
        let mut c = self.local.front();
        while let Some(n) = c.get() {
            let runs_now = self
                .streams
                .get(n.stream.0 as usize)
                .is_some_and(|st| st.runs_now);
            if !n.flags.cheap || n.flags.barrier || !runs_now {
                return None;
            }
            queued += 1;
            c.move_next();
        }
        Some(queued)
    }

    /// Frees `blob`'s memory now if the engine is idle and `stream`, its last user, computes
    /// inline with synchronous completion: what its `ReleaseTensor` would do, minus the
    /// instruction. Returns whether it did.
    pub(crate) fn try_release_now(&mut self, stream: StreamId, blob: &Blob) -> bool {
        if !self.can_run_now(stream) {
            return false;
        }
        let t0 = self.shared.trace_now();
        blob.free_memory();
        let id = self.next_id;
        self.next_id += 1;
        if let Some(t0) = t0 {
            self.shared.trace_record("release_tensor", id, stream, t0);
        }
        self.count_inlined();
        true
    }

    /// Counts one instruction run at once: inserted, dispatched and released in one go.
    fn count_inlined(&mut self) {
        let c = &mut self.counts;
        c.inserted += 1;
        c.dispatched += 1;
        c.erased += 1;
        c.inlined += 1;
        self.publish_counters();
    }

    /// Counts a barrier that found the engine idle: nothing to wait for.
    pub(crate) fn pass_idle_barrier(&mut self) -> bool {
        if !self.is_idle() {
            return false;
        }
        // As a queued barrier does (`run_barriers`): the policies left for the submitting
        // threads are dropped before the `sync` returns. Without this, a `sync` on an engine
        // that had just gone idle could return while a released policy still held a blob,
        // whose memory then outlived its last user handle.
        let sweep = !self.deferred.is_empty() || !self.shared.deferred_nodes.is_empty();
        if sweep {
            // Drop glue is user code: a wait inside it fails with `ReentrantWait`, as on the
            // scheduler thread, instead of waiting on the scheduler this thread holds.
            let _scope = crate::exec::EngineScope::enter();
            self.sweep_deferred();
        }
        self.next_id += 1;
        self.counts.inserted += 1;
        self.counts.erased += 1;
        if sweep {
            self.publish_all();
        } else {
            self.publish_counters();
        }
        true
    }
}

/// Drops a policy that ran at once. Its drop glue is user code (as in `recycle_node`): a panic
/// there is logged, not propagated.
#[inline]
pub(crate) fn drop_policy<P>(policy: P) {
    if let Err(p) = catch_unwind(AssertUnwindSafe(|| drop(policy))) {
        tracing::error!(
            "an instruction's drop panicked: {}",
            crate::error::panic_message(&*p)
        );
    }
}
