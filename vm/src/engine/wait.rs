//! Waiting: `sync`, `barrier`, the passes a waiting thread runs itself, the deadlock watch,
//! `dump`, and the root errors.
use super::{Mode, Vm};
use crate::error::{Error, Result};
use crate::exec::{EngineScope, in_engine};
use crate::instruction::{Barrier, InstructionPolicy};
use crate::scheduler::Scheduler;
use crate::stream::StreamId;
use crate::wait::Waiter;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long a waiting thread spins (for its signal, or for the scheduler) before it blocks.
const WAIT_SPIN: Duration = Duration::from_micros(50);

impl Vm {
    /// In synchronous mode, lets the scheduler make progress (device events may have completed).
    pub(super) fn drive(&self) {
        if let Mode::Sync(s) = &self.inner.mode {
            let _ = self.run_sync_passes(&mut s.lock());
        }
    }

    /// Runs synchronous-mode passes on this thread until nothing moves.
    pub(super) fn run_sync_passes(&self, s: &mut Scheduler) -> Result<()> {
        self.run_passes_here(s, || false)
    }

    /// Runs passes on this thread (the scheduler thread is asleep) until `w` is signalled or
    /// nothing moves. Work left behind (on a worker, on a device, or submitted meanwhile)
    /// goes back to the scheduler thread, which is woken for it.
    pub(super) fn run_passes_until(&self, s: &mut Scheduler, w: &Waiter) -> Result<()> {
        let r = self.run_passes_here(s, || w.is_done());
        // After a failure the scheduler thread must see it and exit; otherwise it takes over
        // whatever is left.
        if r.is_err() || !s.is_idle() {
            self.wake();
        }
        r
    }

    /// Runs passes on this thread, as engine code, until `stop()` or nothing moves. A panic of
    /// the engine itself (not of a kernel: those are caught per instruction) fails the engine,
    /// as on the scheduler thread.
    pub(super) fn run_passes_here(&self, s: &mut Scheduler, stop: impl Fn() -> bool) -> Result<()> {
        self.engine_step(s, |s| while !stop() && s.pass() {})
    }

    /// Runs `f` on the scheduler on this thread, as engine code (see `run_passes_here`).
    pub(super) fn engine_step<R>(
        &self,
        s: &mut Scheduler,
        f: impl FnOnce(&mut Scheduler) -> R,
    ) -> Result<R> {
        let sh = self.shared();
        if let Some(e) = sh.failed.lock().clone() {
            return Err(e);
        }
        let scope = EngineScope::enter();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(s)));
        drop(scope);
        r.map_err(|p| sh.fail(&*p))
    }

    /// Wakes the scheduler (for devices that complete work outside the engine).
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().build()?;
    /// vm.wake(); // harmless on an idle engine: the scheduler finds nothing to do
    /// vm.sync()?;
    /// assert_eq!(vm.stats().in_flight, 0);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn wake(&self) {
        self.shared().pending.notifier.notify();
    }

    /// A function that wakes the scheduler; give it to a device's completion callback.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{stream::async_device::AsyncDevice, testing::DeviceOp, Vm};
    /// use std::sync::{atomic::{AtomicBool, Ordering}, Arc};
    /// let dev = AsyncDevice::new(0);
    /// let mut b = Vm::builder();
    /// let s = b.add_stream(Arc::new(dev.stream("dev")));
    /// let vm = b.build()?;
    /// dev.set_waker(vm.waker()); // the device's progress re-polls the scheduler
    /// let ran = Arc::new(AtomicBool::new(false));
    /// let r = ran.clone();
    /// vm.run(s, DeviceOp::new(vec![], vec![], move || r.store(true, Ordering::Release)))?;
    /// vm.sync()?; // done means launched
    /// assert!(!ran.load(Ordering::Acquire));
    /// assert_eq!(dev.run_all(), 1);
    /// assert!(ran.load(Ordering::Acquire));
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn waker(&self) -> impl Fn() + Send + Sync + 'static + use<> {
        let sh = Arc::downgrade(&self.inner.shared);
        move || {
            if let Some(s) = sh.upgrade() {
                s.pending.notifier.notify();
            }
        }
    }

    /// Waits for `w`, failing with `Deadlock` if nothing is released for a whole timeout.
    pub(crate) fn wait(&self, w: &Waiter, op: &str) -> Result<()> {
        if in_engine() {
            return Err(Error::ReentrantWait {
                at: crate::error::Caller::UNKNOWN,
                op: op.to_string(),
            });
        }
        let mut spun = false;
        if let Mode::Threaded { sched, .. } = &self.inner.mode {
            // Run the passes here rather than wait for the scheduler thread: it is out of
            // work (it holds `sched` whenever it runs passes), and waking it costs tens of
            // microseconds on an idle machine; or it lets go when asked.
            let taken = match sched.try_lock() {
                Some(s) => Some(s),
                None => {
                    spun = true;
                    self.take_scheduler(sched, w, WAIT_SPIN)
                }
            };
            if let Some(mut s) = taken {
                let busy = &self.shared().waiter_in_passes;
                busy.store(true, Ordering::Relaxed);
                let r = self.run_passes_until(&mut s, w);
                busy.store(false, Ordering::Relaxed);
                r?;
            }
        }
        if w.is_done() || !spun && w.spin(WAIT_SPIN) {
            return Ok(());
        }
        let sh = self.shared();
        let timeout = sh.config.timeout;
        let mut last_erased = sh.stats.erased.load(Ordering::Acquire);
        let mut last_progress = Instant::now();
        loop {
            self.drive();
            if w.wait_for(Duration::from_millis(20).min(timeout)) {
                return Ok(());
            }
            if *sh.sched_exited.lock() {
                return if w.is_done() {
                    Ok(())
                } else {
                    Err(self.shut_down_error())
                };
            }
            let erased = sh.stats.erased.load(Ordering::Acquire);
            if erased != last_erased {
                last_erased = erased;
                last_progress = Instant::now();
            } else if last_progress.elapsed() >= timeout {
                return Err(Error::Deadlock {
                    timeout_ms: timeout.as_millis() as u64,
                    dump: self.request_dump(),
                });
            }
        }
    }

    /// Asks the scheduler thread, which is running passes, to let go of the scheduler after
    /// the instruction it is running, and takes it when it does; `None` once `w` is signalled
    /// or `patience` has passed (a long kernel: the caller then waits as before).
    ///
    /// Why: on a machine with as many cores as kernel threads, a user thread that spins
    /// while the scheduler thread computes makes three busy threads, and the kernel pool's
    /// helper shares a core with one of them. Linux keeps waking the helper onto that core,
    /// so the state lasts: a batch-1 forward took three times as long in such a process.
    /// Running the passes here keeps the threads at two, as in the synchronous mode.
    fn take_scheduler<'a>(
        &self,
        sched: &'a parking_lot::Mutex<Scheduler>,
        w: &Waiter,
        patience: Duration,
    ) -> Option<parking_lot::MutexGuard<'a, Scheduler>> {
        let wanting = &self.shared().waiters_wanting;
        wanting.fetch_add(1, Ordering::Relaxed);
        let t0 = Instant::now();
        let taken = loop {
            if let Some(s) = sched.try_lock() {
                break Some(s);
            }
            if w.is_done() || t0.elapsed() >= patience {
                break None;
            }
            std::hint::spin_loop();
        };
        wanting.fetch_sub(1, Ordering::SeqCst);
        if taken.is_none() {
            // The scheduler thread may have let go after this thread stopped trying and gone
            // to sleep with work left: the notification brings it back (it is consumed by
            // the sleep that follows its hand-over, or finds it awake and costs nothing).
            self.wake();
        }
        taken
    }

    /// Asks the scheduler for a dump of the live instructions.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{stream::{cpu::CpuStream, Exec}, testing::{Gate, Noop}, StreamId, VmBuilder};
    /// use std::sync::Arc;
    /// let mut b = VmBuilder::new();
    /// let side = b.add_stream(Arc::new(CpuStream::new("side", Exec::Worker)));
    /// let vm = b.build()?;
    /// let (gate, x) = (Gate::new(), vm.new_blob(4));
    /// vm.run(side, gate.hold(vec![x.clone()]))?; // blocks the side stream's worker
    /// vm.run(StreamId::CPU, Noop::new(vec![x.clone()], vec![]))?;
    /// while vm.stats().inserted < 2 {
    ///     std::thread::yield_now(); // until the scheduler has taken both in
    /// }
    /// let dump = vm.dump();
    /// gate.open();
    /// vm.sync()?;
    /// assert!(dump.contains("noop on stream 0 (cpu): waiting, 1 unmet"), "{dump}");
    /// assert!(dump.contains("on stream 1 (side): running"), "{dump}");
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn dump(&self) -> String {
        self.request_dump()
    }

    pub(super) fn request_dump(&self) -> String {
        let sh = self.shared();
        if let Mode::Sync(s) = &self.inner.mode {
            return match s.try_lock() {
                Some(s) => s.dump(),
                None => "  (the scheduler is busy on another thread)\n".into(),
            };
        }
        *sh.dump.lock() = None;
        sh.dump_request.store(true, Ordering::Release);
        self.wake();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(500) {
            if let Some(d) = sh.dump.lock().take() {
                return d;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        "  (the scheduler did not answer: it may be blocked inside an inline kernel)\n".into()
    }

    /// Waits until every instruction received before this call is released; then returns the
    /// first asynchronous error (by submission order) since the last [`clear_errors`], if any.
    ///
    /// # Errors
    ///
    /// The sticky root error; `Deadlock`; `ReentrantWait` from inside a kernel; `EngineShutDown`.
    ///
    /// [`clear_errors`]: Self::clear_errors
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::Fail, StreamId, Vm};
    /// let vm = Vm::builder().build()?;
    /// vm.run(StreamId::CPU, Fail::new(vec![], vec![vm.new_blob(4)]))?;
    /// let e = vm.sync().unwrap_err();
    /// assert_eq!(e.op(), Some("fail_op"));
    /// vm.clear_errors();
    /// vm.sync()?;
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn sync(&self) -> Result<()> {
        self.barrier()?;
        match self.first_error() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Waits until every instruction received before this call is released (errors aside).
    ///
    /// # Errors
    ///
    /// `Deadlock`, `ReentrantWait`, `EngineShutDown`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::Fail, StreamId, Vm};
    /// let vm = Vm::builder().build()?;
    /// vm.run(StreamId::CPU, Fail::new(vec![], vec![vm.new_blob(4)]))?;
    /// vm.barrier()?; // waits, but does not report the failure
    /// assert_eq!(vm.stats().in_flight, 0);
    /// assert!(vm.sync().is_err());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn barrier(&self) -> Result<()> {
        if in_engine() {
            return Err(Error::ReentrantWait {
                at: crate::error::Caller::UNKNOWN,
                op: "sync".into(),
            });
        }
        let held = self.access_begins();
        let mut held = held.or_else(|| self.try_sched());
        if held.as_mut().is_some_and(|s| s.pass_idle_barrier()) {
            drop(held);
            self.access_done();
            return Ok(()); // nothing received is still live
        }
        let w = Arc::new(Waiter::new());
        let w2 = w.clone();
        let barrier = Barrier::new(move || w2.signal());
        self.run_then_wait(held, StreamId::CPU, barrier, &w, "sync")?;
        self.access_done();
        Ok(())
    }

    /// A host access or barrier begins: automatic promotion ends the window, and returns the
    /// scheduler if it took it to run the window's plan (see `Vm::promotion_boundary`).
    #[inline]
    pub(super) fn access_begins(&self) -> Option<super::promotion::SchedGuard<'_>> {
        match &self.inner.promotion {
            Some(promotion) => self.promotion_boundary(promotion),
            None => None,
        }
    }

    /// A host access or barrier returned: automatic promotion times the window it ended.
    #[inline]
    pub(super) fn access_done(&self) {
        if let Some(promotion) = &self.inner.promotion {
            self.promotion_done(promotion);
        }
    }

    /// Submits `policy`, whose completion signals `w`, and waits for it (`op` names the wait).
    ///
    /// If this thread holds the scheduler (`held`, else it tries to take it) and the engine
    /// is busy, the scheduler thread runs no pass: queue `policy` behind everything received
    /// and run the passes here, without letting go. Letting go and pushing would wake the
    /// scheduler thread (the work before was pushed, so it is waking already), which would
    /// then often take the scheduler first while this thread waits for it: a hand-off to a
    /// thread that is still waking up. Otherwise (idle: `run` may run it at once; synchronous
    /// mode, whose `receive` runs the passes itself; or the scheduler thread in a pass) it is
    /// an ordinary `run` and `wait`.
    pub(super) fn run_then_wait<P: InstructionPolicy>(
        &self,
        held: Option<parking_lot::MutexGuard<'_, Scheduler>>,
        stream: StreamId,
        policy: P,
        w: &Waiter,
        op: &str,
    ) -> Result<()> {
        let threaded = matches!(self.inner.mode, Mode::Threaded { .. });
        let held = if threaded {
            held.or_else(|| self.try_sched())
        } else {
            drop(held); // synchronous mode's `receive` takes the scheduler
            None
        };
        let Some(mut s) = held.filter(|s| !s.is_idle()) else {
            self.run(stream, policy)?;
            return self.wait(w, op);
        };
        let mut b = self.instructions();
        b.push(stream, policy)?;
        let (list, n) = b.into_list();
        let sh = self.shared();
        if sh.shutdown.load(Ordering::Acquire) {
            return Err(self.shut_down_error()); // `list` drops here
        }
        sh.in_flight.fetch_add(n, Ordering::AcqRel);
        s.push_after_pending(list);
        self.run_passes_until(&mut s, w)?;
        drop(s);
        if w.is_done() {
            Ok(())
        } else {
            self.wait(w, op)
        }
    }

    /// The first root error by submission order since the last `clear_errors`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::Fail, StreamId, Vm};
    /// let vm = Vm::builder().build()?;
    /// assert_eq!(vm.first_error(), None);
    /// vm.run(StreamId::CPU, Fail::new(vec![], vec![vm.new_blob(4)]))?;
    /// vm.barrier()?;
    /// assert_eq!(vm.first_error().unwrap().op(), Some("fail_op"));
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn first_error(&self) -> Option<Error> {
        self.shared()
            .errors
            .lock()
            .iter()
            .min_by_key(|(id, _)| *id)
            .map(|(_, e)| e.clone())
    }

    /// Every root error since the last `clear_errors`, in submission order.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::Fail, StreamId, Vm};
    /// let vm = Vm::builder().build()?;
    /// vm.run(StreamId::CPU, Fail::new(vec![], vec![vm.new_blob(4)]))?;
    /// vm.run(StreamId::CPU, Fail::new(vec![], vec![vm.new_blob(4)]))?;
    /// vm.barrier()?;
    /// assert_eq!(vm.errors().len(), 2);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn errors(&self) -> Vec<Error> {
        let mut v = self.shared().errors.lock().clone();
        v.sort_by_key(|(id, _)| *id);
        v.into_iter().map(|(_, e)| e).collect()
    }

    /// Forgets the root errors (poisoned blobs stay poisoned until overwritten or released).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::Fail, StreamId, Vm};
    /// let vm = Vm::builder().build()?;
    /// vm.run(StreamId::CPU, Fail::new(vec![], vec![vm.new_blob(4)]))?;
    /// assert!(vm.sync().is_err());
    /// vm.clear_errors();
    /// assert!(vm.errors().is_empty());
    /// vm.sync()?;
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn clear_errors(&self) {
        self.shared().errors.lock().clear();
    }
}
