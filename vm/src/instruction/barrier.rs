//! `Barrier`: a callback on the scheduler thread once everything received before it is released.

use super::policy::{ComputeCtx, InstructionPolicy};
use crate::error::Result;

/// Runs a callback after every instruction received before it has been released. It takes part
/// in no dependence, so it delays nothing submitted after it; barriers run in order.
///
/// # Examples
///
/// ```
/// use eddy_vm::{instruction::Barrier, testing::{Log, Record}, StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let log = Log::default();
/// vm.run(StreamId::CPU, Record::new(1, vec![], vec![], &log))?;
/// let l = log.clone();
/// vm.run(StreamId::CPU, Barrier::new(move || l.lock().push(2)))?;
/// vm.sync()?;
/// assert_eq!(*log.lock(), vec![1, 2]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub struct Barrier {
    callback: Option<Box<dyn FnOnce() + Send>>,
}

impl Barrier {
    /// A barrier that calls `f` on the scheduler thread.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{instruction::Barrier, StreamId, Vm};
    /// use std::sync::{Arc, atomic::{AtomicUsize, Ordering}};
    /// let vm = Vm::builder().build()?;
    /// let calls = Arc::new(AtomicUsize::new(0));
    /// let c = calls.clone();
    /// vm.run(StreamId::CPU, Barrier::new(move || { c.fetch_add(1, Ordering::SeqCst); }))?;
    /// vm.sync()?;
    /// assert_eq!(calls.load(Ordering::SeqCst), 1);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn new(f: impl FnOnce() + Send + 'static) -> Self {
        Barrier {
            callback: Some(Box::new(f)),
        }
    }
}

impl InstructionPolicy for Barrier {
    fn name(&self) -> &str {
        "barrier"
    }
    fn is_barrier(&self) -> bool {
        true
    }
    fn compute(&mut self, _ctx: &mut ComputeCtx<'_>) -> Result<()> {
        if let Some(f) = self.callback.take() {
            f();
        }
        Ok(())
    }
}
