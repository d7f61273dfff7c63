//! `Barrier`: a callback on the scheduler thread once everything received before it is released.

use super::policy::{ComputeCtx, InstructionPolicy};
use crate::error::Result;

/// Runs a callback after every instruction received before it has been released. It takes part
/// in no dependence, so it delays nothing submitted after it; barriers run in order.
pub struct Barrier {
    callback: Option<Box<dyn FnOnce() + Send>>,
}

impl Barrier {
    /// A barrier that calls `f` on the scheduler thread.
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
