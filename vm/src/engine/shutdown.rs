//! Shutting down: `shutdown_timeout`, the drop of the last handle, and the errors a shut-down
//! or failed engine gives.
use super::{Mode, Vm, VmInner};
use crate::error::{Error, Result};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

impl Vm {
    /// Stops accepting work and waits at most `d` for everything in flight to drain and the
    /// engine's threads to exit. On timeout the stuck threads are left behind (not joined).
    ///
    /// # Errors
    ///
    /// `ShutdownTimeout` with the number of instructions still live.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::Noop, Error, StreamId, Vm};
    /// use std::time::Duration;
    /// let vm = Vm::builder().build()?;
    /// vm.run(StreamId::CPU, Noop::new(vec![], vec![vm.new_blob(4)]))?;
    /// vm.shutdown_timeout(Duration::from_secs(10))?; // drains, then stops
    /// assert_eq!(vm.stats().in_flight, 0);
    /// assert_eq!(vm.run(StreamId::CPU, Noop::new(vec![], vec![])), Err(Error::EngineShutDown));
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn shutdown_timeout(&self, d: Duration) -> Result<()> {
        let sh = self.shared();
        sh.shutdown.store(true, Ordering::Release);
        self.wake();
        match &self.inner.mode {
            Mode::Sync(s) => {
                let mut s = s.lock();
                self.run_sync_passes(&mut s)?;
                if !s.is_idle() {
                    return Err(Error::ShutdownTimeout {
                        pending: sh.in_flight.load(Ordering::Acquire) as u64,
                    });
                }
                s.shutdown_workers();
                Ok(())
            }
            Mode::Threaded { handle: h, .. } => {
                let deadline = Instant::now() + d.min(crate::config::FOREVER);
                let mut g = sh.sched_exited.lock();
                while !*g {
                    if sh.sched_exited_cv.wait_until(&mut g, deadline).timed_out() && !*g {
                        sh.abandoned.store(true, Ordering::Release);
                        return Err(Error::ShutdownTimeout {
                            pending: sh.in_flight.load(Ordering::Acquire) as u64,
                        });
                    }
                }
                drop(g);
                if let Some(h) = h.lock().take() {
                    let _ = h.join();
                }
                Ok(())
            }
        }
    }

    /// Replaces an `EngineShutDown` by the engine's failure, if it failed.
    pub(super) fn or_failed<R>(&self, r: Result<R>) -> Result<R> {
        match r {
            Err(Error::EngineShutDown) => Err(self.shut_down_error()),
            r => r,
        }
    }

    /// `EngineFailed` if an engine thread failed, else `EngineShutDown`.
    pub(super) fn shut_down_error(&self) -> Error {
        self.shared()
            .failed
            .lock()
            .clone()
            .unwrap_or(Error::EngineShutDown)
    }

    /// Whether the engine is shutting down or shut down.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let vm = eddy_vm::Vm::builder().build()?;
    /// assert!(!vm.is_shut_down());
    /// vm.shutdown_timeout(Duration::from_secs(10))?;
    /// assert!(vm.is_shut_down());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn is_shut_down(&self) -> bool {
        self.shared().shutdown.load(Ordering::Acquire)
    }
}

impl Drop for VmInner {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::Release);
        self.shared.pending.notifier.notify();
        match &self.mode {
            Mode::Threaded { handle: h, .. } => {
                let stuck = self.shared.abandoned.load(Ordering::Acquire)
                    && !*self.shared.sched_exited.lock();
                // The last handle may go on an engine thread (a plan that held it, released
                // by the scheduler): that thread cannot join itself, nor the scheduler a
                // worker it waits for. The shutdown flag is set; the scheduler exits by itself.
                if let Some(h) = h.lock().take()
                    && !stuck
                    && !crate::exec::in_engine()
                    && h.thread().id() != std::thread::current().id()
                {
                    let _ = h.join();
                } // else: `shutdown_timeout` gave up on it; leave it behind, as documented
            }
            // Dropped inside a pass (which holds the state): that pass finishes the work.
            Mode::Sync(_) if crate::exec::in_engine() => {}
            Mode::Sync(s) => {
                let mut s = s.lock();
                if self.shared.failed.lock().is_none() {
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        s.run_until_stalled()
                    }));
                    if r.is_err() {
                        tracing::error!("the engine failed while draining at drop");
                    }
                }
                s.shutdown_workers();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::instruction::{ComputeCtx, InstructionPolicy};
    use crate::{Result, StreamId, Vm};
    use std::sync::mpsc;

    /// Holds a handle to the engine that runs it, and says when it is dropped.
    struct HoldsEngine(Option<Vm>, mpsc::Sender<()>);

    impl InstructionPolicy for HoldsEngine {
        fn name(&self) -> &str {
            "holds_engine"
        }
        fn compute(&mut self, _: &mut ComputeCtx<'_>) -> Result<()> {
            Ok(())
        }
    }

    impl Drop for HoldsEngine {
        fn drop(&mut self) {
            drop(self.0.take());
            let _ = self.1.send(());
        }
    }

    /// The last handle to an engine dropped on the engine's own scheduler thread (by an
    /// instruction that held it) shuts the engine down without joining that thread; in
    /// synchronous mode the same program drops it on the user's thread, as usual.
    #[test]
    fn the_last_handle_may_go_on_the_scheduler_thread() {
        for sync in [false, true] {
            let vm = Vm::builder().sync_mode(sync).build().unwrap();
            let (tx, rx) = mpsc::channel();
            vm.run(StreamId::CPU, HoldsEngine(Some(vm.clone()), tx))
                .unwrap();
            drop(vm);
            rx.recv_timeout(std::time::Duration::from_secs(30))
                .expect("the instruction was dropped, and with it the engine, without a panic");
        }
    }
}
