//! Submission: `run`, `run_op` and `release`, the at-once path on an idle engine (with its
//! catch-up of queued cheap work), and back-pressure.
use super::{Mode, Vm};
use crate::Counted;
use crate::blob::Blob;
use crate::error::{Caller, Result};
use crate::exec::in_engine;
use crate::instruction::op_call::{KernelCall, SHALLOW_MAX, Shallow};
use crate::instruction::{InstrList, InstructionPolicy, Kernel, OpCall};
use crate::pending::PendingStack;
use crate::scheduler::Scheduler;
use crate::shared::{SUBMIT_DEVICE, SUBMIT_SLOW};
use crate::stream::StreamId;
use std::sync::atomic::Ordering;

impl Vm {
    /// Submits one instruction.
    ///
    /// # Errors
    ///
    /// As [`InstructionsBuilder::push`](crate::InstructionsBuilder::push) and
    /// [`InstructionsBuilder::submit`](crate::InstructionsBuilder::submit).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::{Log, Record}, StreamId, Vm};
    /// let vm = Vm::builder().build()?;
    /// let (log, x) = (Log::default(), vm.new_blob(4));
    /// vm.run(StreamId::CPU, Record::new(1, vec![], vec![x.clone()], &log))?;
    /// vm.run(StreamId::CPU, Record::new(2, vec![x.clone()], vec![], &log))?;
    /// vm.sync()?;
    /// assert_eq!(*log.lock(), vec![1, 2], "the reader ran after the writer");
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    #[track_caller]
    pub fn run<P: InstructionPolicy>(&self, stream: StreamId, mut policy: P) -> Result<()> {
        // Errors name the policy's caller if it knows one, else this call's.
        let at = match policy.caller() {
            at if at.is_known() => at,
            _ => Caller::here(),
        };
        let sh = self.shared();
        if sh.divert_flags.load(Ordering::Acquire) & crate::shared::PROMOTION_HOLDING != 0 {
            // Op calls held for a plan run first.
            self.promotion_interrupt();
        }
        if policy.is_barrier()
            || sh.any_async_stream
                && crate::builder::needs_soft_sync(sh, stream, policy.inputs(), policy.outputs())
        {
            // The builder inserts the soft sync an asynchronous stream may need.
            let mut b = self.instructions();
            b.push(stream, policy).map_err(|e| e.at(at))?;
            return b.submit().map_err(|e| e.at(at));
        }
        // Synchronous-completion streams (no soft sync can be needed): check and track the
        // operands in one pass; then at once on an idle engine if cheap, else one node.
        crate::builder::check_and_track(
            sh,
            policy.name(),
            stream,
            policy.inputs(),
            policy.outputs(),
        )
        .map_err(|e| e.at(at))?;
        if policy.cheap() && self.run_now(stream, &mut policy).map_err(|e| e.at(at))? {
            crate::scheduler::drop_policy(policy);
            return Ok(());
        }
        self.submit_checked(stream, policy).map_err(|e| e.at(at))
    }

    /// Submits an op call of `kernel` reading `inputs` and writing `outputs`: what
    /// `run(stream, OpCall::new(kernel, inputs, outputs).with_cheap(cheap))` does, except
    /// that a call run at once (cheap, on an idle engine) takes no new handles to the blobs.
    /// The tensor layer submits every op this way.
    ///
    /// # Errors
    ///
    /// As [`run`](Self::run).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Blob, Counted, Result, StreamId, Vm, instruction::{ComputeCtx, Kernel}};
    /// struct Fill(u8);
    /// impl Kernel for Fill {
    ///     fn name(&self) -> &str { "fill" }
    ///     fn compute(&mut self, _: &[Counted<Blob>], outs: &[Counted<Blob>], _: &mut ComputeCtx<'_>) -> Result<()> {
    ///         // SAFETY: the engine runs this kernel with exclusive access to its outputs.
    ///         unsafe { outs[0].bytes_mut().fill(self.0) };
    ///         Ok(())
    ///     }
    /// }
    /// let vm = Vm::builder().build()?;
    /// let b = vm.new_blob(4);
    /// vm.run_op(StreamId::CPU, Fill(7), &[], &[&b], true)?;
    /// assert_eq!(vm.read_blob(&b, |bytes| bytes.to_vec())?, vec![7; 4]);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    #[track_caller]
    // Inlined into each op, whatever the inliner would decide (see "Fast paths" in
    // `engine/mod.rs`).
    #[inline(always)]
    pub fn run_op<K: Kernel>(
        &self,
        stream: StreamId,
        // `mut` here rather than a `let mut` copy below: the kernel stays where the caller
        // built it. The copy read it back in 16-byte pieces right after the caller's narrower
        // stores, a store-forwarding stall.
        mut kernel: K,
        inputs: &[&Counted<Blob>],
        outputs: &[&Counted<Blob>],
        cheap: bool,
    ) -> Result<()> {
        // Where the user's code called the op (through `#[track_caller]` functions): kept with
        // the instruction, named by its errors, synchronous or at a later sync.
        let at = Caller::here();
        let owned = |bs: &[&Counted<Blob>]| bs.iter().map(|&b| b.clone()).collect();
        // Owned handles unless the call may run at once with borrowed copies (cheap, no
        // asynchronous stream, few enough operands for `Shallow`); `run` still runs a cheap
        // call at once on an idle engine.
        let borrowable = inputs.len() <= SHALLOW_MAX && outputs.len() <= SHALLOW_MAX;
        let flags = self.shared().submit_flags.load(Ordering::Relaxed);
        if !cheap || flags & SUBMIT_SLOW != 0 || !borrowable {
            // Captures and automatic promotion: one word, zero when neither is on.
            if self.shared().divert_flags.load(Ordering::Relaxed) > 0 {
                match self.divert(stream, kernel, inputs, outputs, at)? {
                    None => return Ok(()),
                    Some(k) => kernel = k,
                }
            }
            // A call handed back (noted, not held: nothing is held now) takes the fast path
            // below like any other.
            if !cheap || !borrowable {
                let call = OpCall::new(kernel, owned(inputs), owned(outputs)).with_cheap(cheap);
                return self.run(stream, call);
            }
        }
        let (mut ins, mut outs) = (Shallow::EMPTY, Shallow::EMPTY);
        // SAFETY: the copies stay in this frame, which holds the borrows of `inputs` and
        // `outputs`; they are gone before it returns.
        unsafe { ins.fill(inputs) };
        // SAFETY: as above.
        unsafe { outs.fill(outputs) };
        if flags & SUBMIT_DEVICE != 0
            && crate::builder::needs_soft_sync(
                self.shared(),
                stream,
                ins.as_slice(),
                outs.as_slice(),
            )
        {
            // Device work, or host work after it: the builder adds the cross-stream sync.
            let call = OpCall::new(kernel, owned(inputs), owned(outputs)).with_cheap(cheap);
            return self.run(stream, call);
        }
        let mut call = KernelCall {
            kernel: &mut kernel,
            inputs: ins.as_slice(),
            outputs: outs.as_slice(),
            at,
        };
        crate::builder::check_and_track(
            self.shared(),
            call.kernel.name(),
            stream,
            call.inputs,
            call.outputs,
        )
        .map_err(|e| e.at(at))?;
        if self.run_now(stream, &mut call).map_err(|e| e.at(at))? {
            crate::scheduler::drop_policy(kernel);
            return Ok(());
        }
        // Not idle: queue an ordinary call with its own handles (already checked).
        let call = OpCall::new(kernel, owned(inputs), owned(outputs)).with_cheap(true);
        self.submit_checked(stream, call).map_err(|e| e.at(at))
    }

    /// Queues a checked and tracked policy as one node (no soft sync can be needed).
    pub(super) fn submit_checked<P: InstructionPolicy>(
        &self,
        stream: StreamId,
        policy: P,
    ) -> Result<()> {
        let sh = self.shared();
        let mut node = crate::pool::take_node(sh);
        node.set(stream, policy);
        if let Mode::Sync(_) = self.inner.mode {
            let mut list = InstrList::new(crate::instruction::InstrAdapter::new());
            list.push_back(node);
            return self.receive(list, 1);
        }
        self.enqueue(1, |p| p.push_one(node))
    }

    /// Releases a blob: its memory is freed once every earlier access, on every stream, is done.
    ///
    /// # Errors
    ///
    /// `TensorReleased` if it was released before; `ForeignBlob` if it belongs to another engine.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Error, Vm};
    /// let vm = Vm::builder().build()?;
    /// let b = vm.new_blob(16);
    /// vm.write_blob(&b, |bytes| bytes.fill(1))?;
    /// vm.release(&b)?;
    /// vm.sync()?;
    /// assert!(!b.is_allocated());
    /// assert!(matches!(vm.release(&b), Err(Error::TensorReleased { .. })));
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn release(&self, blob: &Counted<Blob>) -> Result<()> {
        if self.shared().submit_flags.load(Ordering::Relaxed) & SUBMIT_SLOW != 0
            && self.promotion_release(blob, false)
        {
            return Ok(()); // held, with the calls before it
        }
        let stream = crate::builder::mark_released(self.shared(), blob, false)?;
        self.release_marked(stream, blob)
    }

    /// [`release`](Self::release) for the caller whose [`Blob::unhold`] just returned `true`:
    /// the last of the blob's holders, so no other holder can release it at the same time.
    /// Marking it released then needs no locked instruction (one per dropped tensor).
    ///
    /// Called while another thread releases the same blob through [`release`](Self::release)
    /// (a caller that mixes the two protocols), both calls may succeed; the second release
    /// then frees nothing, as the memory is freed once.
    ///
    /// # Errors
    ///
    /// As [`release`](Self::release).
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().build().unwrap();
    /// let b = vm.new_blob(16);
    /// if b.unhold() {
    ///     vm.release_unheld(&b)?; // the creator was the only holder
    /// }
    /// assert!(b.is_released());
    /// assert!(vm.release_unheld(&b).is_err(), "released twice");
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn release_unheld(&self, blob: &Counted<Blob>) -> Result<()> {
        if self.shared().submit_flags.load(Ordering::Relaxed) & SUBMIT_SLOW != 0
            && self.promotion_release(blob, true)
        {
            return Ok(()); // held, with the calls before it
        }
        let stream = crate::builder::mark_released(self.shared(), blob, true)?;
        self.release_marked(stream, blob)
    }

    /// The rest of a release once `blob` is marked released: free it at once, or queue it.
    pub(super) fn release_marked(&self, stream: StreamId, blob: &Counted<Blob>) -> Result<()> {
        let sh = self.shared();
        // Inline memory has nothing to free: it goes with the blob, whose last handle drops
        // only after every instruction that uses it is released. So no instruction and no lock.
        if blob.has_inline_memory() {
            return Ok(());
        }
        // At once on an idle engine: every earlier access is done, so free the memory now.
        // One test of a constant flag on an engine without a device stream.
        let device_stream = sh.any_async_stream && sh.is_async(stream.0);
        if !device_stream
            && let Some(mut s) = self.try_sched()
            && (s.is_idle() || self.catch_up(&mut s)?)
            && s.try_release_now(stream, blob)
        {
            return Ok(());
        }
        let policy = crate::instruction::ReleaseTensor::new(blob.clone());
        if device_stream || matches!(self.inner.mode, Mode::Sync(_)) {
            let mut b = self.instructions();
            b.push_release(stream, policy);
            return b.submit();
        }
        // The fast path, as in `run`: one node, one push (no soft sync can be needed).
        let mut node = crate::pool::take_node(sh);
        node.set(stream, policy);
        self.enqueue(1, |p| p.push_one(node))
    }

    /// The scheduler, for running work at once on this thread: if the engine is not shutting
    /// down, this is not engine code, and no thread holds it (the scheduler thread runs no
    /// passes; in synchronous mode no other thread is submitting).
    pub(super) fn try_sched(&self) -> Option<parking_lot::MutexGuard<'_, Scheduler>> {
        if self.shared().shutdown.load(Ordering::Acquire) || in_engine() {
            return None;
        }
        match &self.inner.mode {
            Mode::Threaded { sched, .. } => sched.try_lock(),
            Mode::Sync(s) => s.try_lock(),
        }
    }

    /// Runs a checked, cheap `policy` at once on this thread if the engine is idle and its
    /// scheduler free (see `scheduler/inline.rs`); returns whether it did (if not, the caller
    /// queues it).
    #[inline]
    pub(super) fn run_now<P: crate::instruction::Run + ?Sized>(
        &self,
        stream: StreamId,
        policy: &mut P,
    ) -> Result<bool> {
        let Some(mut s) = self.try_sched().or_else(|| self.sched_after_pass()) else {
            return Ok(false);
        };
        // Not idle, yet the scheduler thread runs no pass (this thread holds its state): if
        // all that is queued is cheap, run it here, then this one (see
        // `Scheduler::only_cheap_queued`). Otherwise the caller queues this one too, and the
        // scheduler thread, woken by the pushes, takes it all. (One call of `try_run_now`, so
        // that it inlines here.)
        if (!s.is_idle() && !self.catch_up(&mut s)?) || !s.try_run_now(stream, policy) {
            return Ok(false);
        }
        // A kernel that submitted work queued it; synchronous mode runs it now (the scheduler
        // thread was woken by the push).
        if matches!(self.inner.mode, Mode::Sync(_)) && !s.is_idle() {
            self.run_sync_passes(&mut s)?;
        }
        Ok(true)
    }

    /// The scheduler, once the scheduler thread's current pass ends, if that comes soon: on the
    /// threaded engine, while no instruction that is not cheap computes, a bounded spin
    /// (about a microsecond) on the lock.
    ///
    /// A submitter of a cheap op that finds the scheduler thread in a pass (over cheap work:
    /// queued ops, releases) waits for that pass instead of queueing its op behind it. Queueing
    /// would keep the engine busy for the next op too, and a loop of small ops would stay in
    /// the queued mode, at two to five times the cost per op, for good; waiting lets this
    /// thread catch up and return to running ops at once (`Scheduler::only_cheap_queued`).
    /// No blocking lock: the pass may run a callback that waits for this thread.
    #[cold]
    pub(super) fn sched_after_pass(&self) -> Option<parking_lot::MutexGuard<'_, Scheduler>> {
        const SPINS: u32 = 256;
        let Mode::Threaded { sched, .. } = &self.inner.mode else {
            return None;
        };
        let sh = self.shared();
        if in_engine() {
            return None;
        }
        for _ in 0..SPINS {
            if sh.heavy.load(Ordering::Relaxed) || sh.shutdown.load(Ordering::Relaxed) {
                return None;
            }
            if !sched.is_locked()
                && let Some(s) = sched.try_lock()
            {
                return Some(s);
            }
            std::hint::spin_loop();
        }
        None
    }

    /// On the threaded engine, with its scheduler held by this thread and work queued: runs
    /// that work here if all of it is cheap (see `Scheduler::only_cheap_queued`); returns
    /// whether the engine is idle afterwards.
    ///
    /// The passes are bounded by what was queued when this thread looked: work submitted
    /// meanwhile (by kernels, or by other threads while this one holds the scheduler) is
    /// taken too, but a stream of it must not keep this caller running other threads' work.
    /// A chain of `n` cheap instructions takes about `n + 2` passes (each pass releases the
    /// one that ran and dispatches the next), so `2n + 8` only stops a stream of new work.
    #[cold]
    #[inline(never)]
    pub(super) fn catch_up(&self, s: &mut Scheduler) -> Result<bool> {
        if !matches!(self.inner.mode, Mode::Threaded { .. }) {
            return Ok(false);
        }
        // Instructions done but still live: a sync returns once its barrier has run, and the
        // pass that releases what ran is left to the scheduler thread, which may not have
        // taken it yet. Released here, they keep nothing busy (no kernel runs).
        if s.has_live() {
            self.engine_step(s, Scheduler::release_finished)?;
            if s.is_idle() {
                return Ok(true);
            }
        }
        let Some(queued) = s.only_cheap_queued() else {
            return Ok(false);
        };
        let budget = std::cell::Cell::new(queued.saturating_mul(2).saturating_add(8));
        self.run_passes_here(s, || {
            let left = budget.get();
            budget.set(left.saturating_sub(1));
            left == 0
        })?;
        if s.is_idle() {
            return Ok(true);
        }
        // A queued kernel submitted more work, or an allocation failed: the scheduler thread
        // takes it from here.
        self.wake();
        Ok(false)
    }

    /// Hands a built list to the scheduler. Blocks above the high-water mark.
    pub(crate) fn receive(&self, list: InstrList, n: usize) -> Result<()> {
        match &self.inner.mode {
            // Submitted from a kernel or callback inside a synchronous pass: the pass holds the
            // scheduler and will take this from the pending list.
            Mode::Sync(_) if in_engine() => self.enqueue(n, |p| p.push(list)),
            Mode::Sync(s) => {
                self.enqueue(n, |_| ())?; // if refused, `list` drops here
                let mut s = s.lock();
                s.push_local(list);
                self.run_sync_passes(&mut s)
            }
            Mode::Threaded { .. } => self.enqueue(n, |p| p.push(list)),
        }
    }

    /// The common part of every submission: refuse work after shutdown (the unused `push`
    /// closure then drops what was built, whose drop glue tells any waiting callback), count it
    /// in flight, `push` it, and apply back-pressure on the threaded engine.
    pub(super) fn enqueue(&self, n: usize, push: impl FnOnce(&PendingStack)) -> Result<()> {
        let sh = self.shared();
        if sh.shutdown.load(Ordering::Acquire) {
            return Err(self.shut_down_error());
        }
        sh.in_flight.fetch_add(n, Ordering::AcqRel);
        push(&sh.pending);
        if matches!(self.inner.mode, Mode::Threaded { .. })
            && sh.in_flight.load(Ordering::Acquire) > sh.config.high_water
            && !in_engine()
            && !crate::exec::holds_scheduler()
        {
            sh.block_on_high_water();
        }
        Ok(())
    }
}

#[cfg(all(test, not(loom), not(shuttle)))]
mod catch_up_tests {
    //! A submitter that holds the scheduler while work is queued (`Vm::catch_up`): it runs
    //! the queued work itself only if all of it is cheap, and always in submission order.
    use super::*;
    use crate::testing::{Cheap, Log, Record};
    use parking_lot::Mutex;
    use std::time::{Duration, Instant};

    fn sched(vm: &Vm) -> &Mutex<Scheduler> {
        match &vm.inner.mode {
            Mode::Threaded { sched, .. } => sched,
            Mode::Sync(_) => unreachable!("a threaded engine"),
        }
    }

    #[test]
    fn a_submitter_runs_queued_cheap_work_then_its_own_in_order() {
        let vm = Vm::builder().build().unwrap();
        let (log, x) = (Log::default(), vm.new_blob(8));
        // Holding the scheduler, as a submitter that found it free does: the scheduler
        // thread runs no pass meanwhile, and `run` finds it taken, so it queues.
        let mut s = sched(&vm).lock();
        for tag in [1, 2] {
            let op = Cheap(Record::new(tag, vec![x.clone()], vec![x.clone()], &log));
            vm.run(StreamId::CPU, op).unwrap();
        }
        assert!(log.lock().is_empty(), "queued, not run");
        let mut third = Cheap(Record::new(3, vec![x.clone()], vec![], &log));
        assert!(!s.try_run_now(StreamId::CPU, &mut third), "not idle");
        assert!(vm.catch_up(&mut s).unwrap(), "idle after catching up");
        assert_eq!(*log.lock(), vec![1, 2], "the queued ones, in order");
        assert!(s.try_run_now(StreamId::CPU, &mut third));
        assert_eq!(*log.lock(), vec![1, 2, 3]);
        drop(s);
        vm.sync().unwrap();
        let st = vm.stats();
        assert_eq!((st.inserted, st.erased, st.in_flight), (4, 4, 0), "{st:?}");
    }

    /// An instruction that ran but is still live (the pass that releases it not yet run, as
    /// after a sync that returned once its barrier ran) does not keep the engine busy: the
    /// submitter releases it and runs its own op at once. (It used to queue its op, and a
    /// loop of small ops after each sync stayed queued.)
    #[test]
    fn work_done_but_not_yet_released_is_released_by_the_submitter() {
        let vm = Vm::builder().build().unwrap();
        let (log, x) = (Log::default(), vm.new_blob(8));
        let mut s = sched(&vm).lock();
        let op = Cheap(Record::new(1, vec![x.clone()], vec![x.clone()], &log));
        vm.run(StreamId::CPU, op).unwrap();
        vm.run_passes_here(&mut s, || !log.lock().is_empty())
            .unwrap();
        assert_eq!(*log.lock(), vec![1], "ran");
        assert!(s.has_live(), "not yet released");
        let mut second = Cheap(Record::new(2, vec![x.clone()], vec![], &log));
        assert!(!s.try_run_now(StreamId::CPU, &mut second), "not idle");
        assert!(vm.catch_up(&mut s).unwrap(), "idle once released");
        assert!(s.try_run_now(StreamId::CPU, &mut second));
        assert_eq!(*log.lock(), vec![1, 2]);
        drop(s);
        vm.sync().unwrap();
        assert_eq!(vm.stats().in_flight, 0);
    }

    /// A chain of cheap kernels, each submitting the next, as a stream of work from elsewhere:
    /// the thread catching up runs a bounded part of it and leaves the rest to the scheduler
    /// thread (it used to run all of it, however long, before returning to its own op).
    #[test]
    fn catching_up_stops_when_work_keeps_arriving() {
        fn link(vm: &Vm, log: &Log, x: &Counted<Blob>, left: u64) -> Cheap<Record> {
            let (v, l, b) = (vm.clone(), log.clone(), x.clone());
            let r = Record::new(left, vec![x.clone()], vec![x.clone()], log).with_body(move || {
                if left > 0 {
                    v.run(StreamId::CPU, link(&v, &l, &b, left - 1)).unwrap();
                }
            });
            Cheap(r)
        }
        const LEN: u64 = 2_000;
        let vm = Vm::builder().build().unwrap();
        let (log, x) = (Log::default(), vm.new_blob(8));
        let mut s = sched(&vm).lock();
        vm.run(StreamId::CPU, link(&vm, &log, &x, LEN)).unwrap();
        assert!(!vm.catch_up(&mut s).unwrap(), "stopped with work left");
        let ran = log.lock().len();
        assert!((1..100).contains(&ran), "ran {ran} of {} here", LEN + 1);
        drop(s);
        // A sync waits for what was submitted before it; each kernel submits its successor,
        // so sync until the chain is done.
        let deadline = Instant::now() + Duration::from_secs(60);
        while log.lock().len() as u64 <= LEN && Instant::now() < deadline {
            vm.sync().unwrap();
        }
        let want: Vec<u64> = (0..=LEN).rev().collect();
        assert_eq!(*log.lock(), want, "all of the chain, once each, in order");
    }

    /// A long chain queued while this thread held the scheduler is caught up in full: the
    /// bound leaves room for one instruction per pass.
    #[test]
    fn a_long_queued_chain_is_caught_up_in_full() {
        let vm = Vm::builder().build().unwrap();
        let (log, x) = (Log::default(), vm.new_blob(8));
        let mut s = sched(&vm).lock();
        for tag in 0..500 {
            let op = Record::new(tag, vec![x.clone()], vec![x.clone()], &log).fusable(false);
            vm.run(StreamId::CPU, Cheap(op)).unwrap();
        }
        assert!(vm.catch_up(&mut s).unwrap(), "idle after catching up");
        assert_eq!(*log.lock(), (0..500).collect::<Vec<u64>>());
        drop(s);
        vm.sync().unwrap();
    }

    #[test]
    fn work_that_is_not_cheap_stays_with_the_scheduler_thread() {
        let vm = Vm::builder().build().unwrap();
        let (log, x) = (Log::default(), vm.new_blob(8));
        let mut s = sched(&vm).lock();
        vm.run(StreamId::CPU, Record::new(1, vec![], vec![x.clone()], &log))
            .unwrap();
        let op = Cheap(Record::new(2, vec![x.clone()], vec![], &log));
        vm.run(StreamId::CPU, op).unwrap();
        assert!(!vm.catch_up(&mut s).unwrap(), "a queued op is not cheap");
        assert!(log.lock().is_empty(), "nothing ran on this thread");
        drop(s);
        vm.sync().unwrap(); // the scheduler thread (or this one, waiting) runs both
        assert_eq!(*log.lock(), vec![1, 2]);
    }
}
