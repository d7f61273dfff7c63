//! The CPU stream policy.

use super::{Device, Exec, StreamKind, StreamPolicy};
use std::any::Any;

/// Runs compute on the host, inline on the scheduler thread or on a worker thread.
///
/// Inline is the default for the engine's main CPU stream: on a 2-core machine a third busy
/// thread only competes with the user thread, and `vm_chain` measured the hand-off to a worker
/// at several times the cost of the whole inline path (see the book's benchmarks chapter).
/// Use [`Exec::Worker`] for a second stream whose long kernels must not stall scheduling.
#[derive(Debug, Clone)]
pub struct CpuStream {
    name: String,
    exec: Exec,
    kind: StreamKind,
}

impl CpuStream {
    /// A CPU compute stream.
    pub fn new(name: impl Into<String>, exec: Exec) -> Self {
        CpuStream {
            name: name.into(),
            exec,
            kind: StreamKind::Compute,
        }
    }
}

impl StreamPolicy for CpuStream {
    fn name(&self) -> &str {
        &self.name
    }
    fn device(&self) -> Device {
        Device::Cpu
    }
    fn kind(&self) -> StreamKind {
        self.kind
    }
    fn exec(&self) -> Exec {
        self.exec
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
