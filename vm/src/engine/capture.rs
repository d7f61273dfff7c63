//! Captures: a thread's op calls taken instead of run (see [`Vm::capture`]), for plans.

use super::Vm;
use crate::Counted;
use crate::blob::Blob;
use crate::captured::{CaptureState, Captured};
use crate::error::{Caller, Error, Result};
use crate::instruction::Kernel;
use crate::shared::{CAPTURES, Shared};
use crate::stream::StreamId;
use std::sync::atomic::Ordering;

impl Vm {
    /// Runs `f` with the op calls this thread makes on this engine through
    /// [`run_op`](Self::run_op) captured instead of run, and returns what `f` returned and the
    /// calls, in order. Other threads' calls run as usual. The operands are checked as for a
    /// run (a released or foreign blob is refused at the call), but nothing is tracked, queued
    /// or allocated: the blobs written are placeholders whose values never exist. A host read
    /// of any blob ([`read_blob`](Self::read_blob), [`write_blob`](Self::write_blob)) from this
    /// thread meanwhile is refused with `InvalidArgument`: the captured calls have not run,
    /// and a value read now could not change at a replay.
    ///
    /// Several threads may capture on one engine at once, each its own calls.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if this thread is capturing on this engine already.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{StreamId, Vm, testing::AddByte};
    /// let vm = Vm::builder().build()?;
    /// let (a, b) = (vm.new_blob(8), vm.new_blob(8));
    /// let ((), ops) = vm.capture(|| {
    ///     vm.run_op(StreamId::CPU, AddByte(1), &[&a], &[&b], true).unwrap();
    ///     assert!(vm.read_blob(&b, |_| ()).is_err(), "no host reads inside");
    /// })?;
    /// assert_eq!(ops.len(), 1);
    /// assert_eq!(vm.stats().inserted, 0, "nothing ran");
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    #[track_caller]
    pub fn capture<R>(&self, f: impl FnOnce() -> R) -> Result<(R, Vec<Captured>)> {
        let sh = self.shared();
        let me = std::thread::current().id();
        {
            let mut c = sh.capture.lock();
            if c.iter().any(|s| s.thread == me) {
                return Err(Error::InvalidArgument {
                    at: Caller::here(),
                    op: "capture".into(),
                    message: "this thread is capturing on this engine already".into(),
                });
            }
            c.push(CaptureState {
                thread: me,
                ops: Vec::new(),
            });
            sh.divert_flags.fetch_add(1, Ordering::SeqCst);
            sh.submit_flags
                .fetch_or(crate::shared::SUBMIT_SLOW, Ordering::SeqCst);
        }
        /// Ends this thread's capture, on return or unwind; returns what it took.
        struct End<'a>(&'a Shared, std::thread::ThreadId);
        impl End<'_> {
            fn take(&self) -> Vec<Captured> {
                let mut c = self.0.capture.lock();
                let Some(k) = c.iter().position(|s| s.thread == self.1) else {
                    return Vec::new();
                };
                let ops = c.swap_remove(k).ops;
                if self.0.divert_flags.fetch_sub(1, Ordering::SeqCst) & CAPTURES == 1
                    && !self.0.config.promotion
                {
                    self.0
                        .submit_flags
                        .fetch_and(!crate::shared::SUBMIT_SLOW, Ordering::SeqCst);
                }
                ops
            }
        }
        impl Drop for End<'_> {
            fn drop(&mut self) {
                self.take();
            }
        }
        let end = End(sh, me);
        let r = f();
        let ops = end.take();
        Ok((r, ops))
    }

    /// Whether this thread is capturing on this engine.
    pub(crate) fn capturing_here(&self) -> bool {
        let sh = self.shared();
        sh.divert_flags.load(Ordering::Relaxed) & CAPTURES > 0
            && sh
                .capture
                .lock()
                .iter()
                .any(|c| c.thread == std::thread::current().id())
    }

    /// Takes `kernel` into the capture if this thread is capturing: `Ok(None)`. Otherwise
    /// hands it back. The operands are checked as a run checks them.
    #[cold]
    pub(crate) fn try_capture<K: Kernel>(
        &self,
        stream: StreamId,
        kernel: K,
        inputs: &[&Counted<Blob>],
        outputs: &[&Counted<Blob>],
        at: Caller,
    ) -> Result<Option<K>> {
        let sh = self.shared();
        let me = std::thread::current().id();
        let mut c = sh.capture.lock();
        let Some(state) = c.iter_mut().find(|s| s.thread == me) else {
            return Ok(Some(kernel));
        };
        state
            .ops
            .push(Captured::checked(sh, stream, kernel, inputs, outputs, at)?);
        Ok(None)
    }

    /// `InvalidArgument` for a host access from a capturing thread.
    #[track_caller]
    pub(crate) fn refuse_in_capture(&self, op: &str) -> Result<()> {
        if self.shared().divert_flags.load(Ordering::Relaxed) & CAPTURES > 0
            && self.capturing_here()
        {
            return Err(Error::InvalidArgument {
                at: Caller::here(),
                op: op.into(),
                message: "a host access inside a capture (a graph being compiled): its values \
                          do not exist yet, and one read now could not change at a replay"
                    .into(),
            });
        }
        Ok(())
    }
}
