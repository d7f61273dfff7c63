//! Streams: where instructions run.
//!
//! A stream is a (device, kind) pair with a [`StreamPolicy`]. Each stream runs its instructions
//! in submission order (FIFO). [`cpu::CpuStream`] runs compute inline on the scheduler thread or
//! on a worker [`thread_ctx`]; [`async_device`] is a test-only device whose work completes later
//! under the test's control, with the semantics of a CUDA stream (done means launched; events
//! for cross-stream and host-visible completion).

pub mod async_device;
pub mod cpu;
pub(crate) mod thread_ctx;

use std::any::Any;
use std::fmt;
use std::sync::Arc;

/// A device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Device {
    /// Host memory and CPU threads.
    Cpu,
    /// A CUDA device (reserved for the CUDA backend).
    Cuda(u32),
    /// The test-only asynchronous device `n`.
    Test(u32),
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
            Device::Test(n) => write!(f, "test:{n}"),
        }
    }
}

/// The kind of work a stream carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamKind {
    /// Kernels.
    Compute,
    /// Copies host → device.
    Host2Device,
    /// Copies device → host.
    Device2Host,
    /// Lazy-job launches.
    LazyJobLauncher,
}

/// Where a stream's `compute` calls run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exec {
    /// On the scheduler thread: no hand-off, best for cheap work and for asynchronous launches.
    Inline,
    /// On the stream's own worker thread; the scheduler learns of completion through the
    /// completion list.
    Worker,
}

/// An index into the engine's streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u32);

impl StreamId {
    /// The default CPU compute stream every engine has.
    pub const CPU: StreamId = StreamId(0);
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "stream{}", self.0)
    }
}

/// Device-side completion of work queued on a stream.
pub trait Event: Send + Sync + 'static {
    /// Whether the work recorded before the event has finished.
    fn is_complete(&self) -> bool;
}

/// How a stream runs instructions and reports completion.
pub trait StreamPolicy: Send + Sync + 'static {
    /// A name for traces and dumps.
    fn name(&self) -> &str;
    /// The stream's device.
    fn device(&self) -> Device;
    /// The stream's kind.
    fn kind(&self) -> StreamKind {
        StreamKind::Compute
    }
    /// Where `compute` runs.
    fn exec(&self) -> Exec;
    /// Whether an instruction counts as done once `compute` returned even though the device
    /// may still be working (a CUDA-like in-order queue). Cross-stream consumers then need
    /// events (soft sync).
    fn done_means_launched(&self) -> bool {
        false
    }
    /// Whether this stream can wait device-side for an event of another stream of its device.
    fn supports_stream_wait(&self) -> bool {
        false
    }
    /// Whether fusion of consecutive fusable instructions is allowed on this stream.
    fn fusion(&self) -> bool {
        true
    }
    /// Records an event after everything launched so far; `None` if that work is already
    /// complete (synchronous streams).
    fn record_event(&self) -> Option<Arc<dyn Event>> {
        None
    }
    /// Makes later work on this stream wait for `event` (device-side).
    fn wait_event(&self, _event: &Arc<dyn Event>) {}
    /// For downcasting by device kernels.
    fn as_any(&self) -> &dyn Any;
}
