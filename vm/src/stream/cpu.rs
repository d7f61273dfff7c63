//! The CPU stream policy.

use super::{Device, Exec, StreamKind, StreamPolicy};
use std::any::Any;

/// Runs compute on the host, inline on the scheduler thread or on a worker thread.
///
/// Inline is the default for the engine's main CPU stream: on a 2-core machine a third busy
/// thread only competes with the user thread, and `vm_chain` measured the hand-off to a worker
/// at several times the cost of the whole inline path (see the book's benchmarks chapter).
/// Use [`Exec::Worker`] for a second stream whose long kernels must not stall scheduling.
///
/// # Examples
///
/// ```
/// use eddy_vm::stream::{cpu::CpuStream, Exec, StreamPolicy};
/// use eddy_vm::testing::{Log, Record};
/// let worker = CpuStream::new("worker", Exec::Worker);
/// assert_eq!((worker.name(), worker.exec()), ("worker", Exec::Worker));
/// let mut b = eddy_vm::Vm::builder();
/// let w = b.add_stream(std::sync::Arc::new(worker));
/// let vm = b.build()?;
/// let log = Log::default();
/// vm.run(w, Record::new(1, vec![], vec![], &log))?;
/// vm.sync()?;
/// assert_eq!(*log.lock(), vec![1]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct CpuStream {
    name: String,
    exec: Exec,
    kind: StreamKind,
    device: Device,
}

impl CpuStream {
    /// A CPU compute stream.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::{cpu::CpuStream, Exec, StreamKind, StreamPolicy};
    /// let s = CpuStream::new("cpu", Exec::Inline);
    /// assert_eq!((s.name(), s.exec(), s.kind()), ("cpu", Exec::Inline, StreamKind::Compute));
    /// ```
    pub fn new(name: impl Into<String>, exec: Exec) -> Self {
        CpuStream {
            name: name.into(),
            exec,
            kind: StreamKind::Compute,
            device: Device::CPU,
        }
    }

    /// The same stream on CPU device `n` (`cpu:0` by default): the engine gives each device
    /// its own allocator.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Device, stream::{cpu::CpuStream, Exec, StreamPolicy}};
    /// let s = CpuStream::new("cpu:1", Exec::Inline).on_device(1);
    /// assert_eq!(s.device(), Device::Cpu(1));
    /// ```
    pub fn on_device(mut self, n: u32) -> Self {
        self.device = Device::Cpu(n);
        self
    }

    /// Marks the stream as a device's collective stream (kind `Collective`), where boxing's
    /// collectives go.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::{cpu::CpuStream, Exec, StreamKind, StreamPolicy};
    /// let s = CpuStream::new("cpu:0:collective", Exec::Inline).collective();
    /// assert_eq!(s.kind(), StreamKind::Collective);
    /// ```
    pub fn collective(mut self) -> Self {
        self.kind = StreamKind::Collective;
        self
    }

    /// This stream as a lazy-job launcher (kind `LazyJobLauncher`): where plan runs go.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::{cpu::CpuStream, Exec, StreamKind, StreamPolicy};
    /// let s = CpuStream::new("lazy", Exec::Worker).launcher();
    /// assert_eq!(s.kind(), StreamKind::LazyJobLauncher);
    /// ```
    pub fn launcher(mut self) -> Self {
        self.kind = StreamKind::LazyJobLauncher;
        self
    }
}

impl StreamPolicy for CpuStream {
    fn name(&self) -> &str {
        &self.name
    }
    fn device(&self) -> Device {
        self.device
    }
    fn kind(&self) -> StreamKind {
        self.kind
    }
    fn exec(&self) -> Exec {
        self.exec
    }
    /// A launcher's plan runs may end after `compute` returns, when their actors do.
    fn completes_in_order(&self) -> bool {
        self.kind != StreamKind::LazyJobLauncher
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
