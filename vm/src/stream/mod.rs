//! Streams: where instructions run.
//!
//! A stream is a (device, kind) pair with a [`StreamPolicy`]. Each stream runs its instructions
//! in submission order (FIFO). [`cpu::CpuStream`] runs compute inline on the scheduler thread or
//! on a worker thread (the scheduler's `worker` module); [`async_device`] is a test-only device whose work completes later
//! under the test's control, with the semantics of a CUDA stream (done means launched; events
//! for cross-stream and host-visible completion).

pub mod async_device;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "cuda")]
pub mod cuda_error;
#[cfg(feature = "cuda")]
pub mod cuda_memory;
#[cfg(feature = "cuda")]
mod cuda_probe;
#[cfg(feature = "cuda")]
mod cuda_timing;
pub mod transport;

use std::any::Any;
use std::fmt;
use std::sync::Arc;

/// A device: where a blob's memory lives and its kernels run.
///
/// Several devices of one kind are normal. Every engine has `cpu:0`; more CPU devices
/// ([`VmBuilder::cpu_devices`](crate::VmBuilder::cpu_devices)) each have their own compute
/// stream and allocator, over the same host memory and kernels.
///
/// # Examples
///
/// ```
/// use eddy_vm::{Device, Vm};
/// assert_eq!(Device::CPU, Device::Cpu(0));
/// assert_eq!(Device::Cpu(1).to_string(), "cpu:1");
/// assert_eq!(Device::Cuda(1).to_string(), "cuda:1");
/// let vm = Vm::builder().cpu_devices(2).build().unwrap();
/// assert!(vm.allocator(Device::CPU).is_some());
/// assert!(vm.device_stream(Device::Cpu(1)).is_some());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Device {
    /// Host memory and CPU threads: CPU device `n`.
    Cpu(u32),
    /// A CUDA device (reserved for the CUDA backend).
    Cuda(u32),
    /// The test-only asynchronous device `n`.
    Test(u32),
}

impl Device {
    /// The first CPU device, `cpu:0`, which every engine has.
    pub const CPU: Device = Device::Cpu(0);

    /// Whether the device's memory is host memory (every CPU device).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::Device;
    /// assert!(Device::Cpu(3).is_cpu());
    /// assert!(!Device::Cuda(0).is_cpu());
    /// ```
    #[inline]
    pub fn is_cpu(self) -> bool {
        matches!(self, Device::Cpu(_))
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu(n) => write!(f, "cpu:{n}"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
            Device::Test(n) => write!(f, "test:{n}"),
        }
    }
}

/// The kind of work a stream carries.
///
/// # Examples
///
/// ```
/// use eddy_vm::stream::{cpu::CpuStream, Exec, StreamKind, StreamPolicy};
/// assert_eq!(CpuStream::new("cpu", Exec::Inline).kind(), StreamKind::Compute);
/// ```
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
    /// The collectives of global tensors' boxing (one per CPU device of an engine with
    /// several): their own lane, beside the device's kernels.
    Collective,
    /// Collectives between processes, handed to a communication thread (see
    /// [`transport`]).
    Transport,
}

/// Where a stream's `compute` calls run.
///
/// # Examples
///
/// ```
/// use eddy_vm::{stream::Exec, StreamId, Vm};
/// let vm = Vm::builder().cpu_exec(Exec::Worker).build().unwrap();
/// assert_eq!(vm.stream_policy(StreamId::CPU).unwrap().exec(), Exec::Worker);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exec {
    /// On the scheduler thread: no hand-off, best for cheap work and for asynchronous launches.
    Inline,
    /// On the stream's own worker thread; the scheduler learns of completion through the
    /// completion list.
    Worker,
}

/// An index into the engine's streams.
///
/// # Examples
///
/// ```
/// use eddy_vm::{stream::{cpu::CpuStream, Exec}, StreamId, Vm};
/// let mut b = Vm::builder();
/// let side = b.add_stream(std::sync::Arc::new(CpuStream::new("side", Exec::Worker)));
/// assert_eq!((StreamId::CPU, side), (StreamId(0), StreamId(1)));
/// assert_eq!(side.to_string(), "stream1");
/// assert_eq!(b.build().unwrap().stream_count(), 2);
/// ```
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
///
/// # Examples
///
/// ```
/// use eddy_vm::stream::Event;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// /// Completes when a device callback sets the flag.
/// struct Flag(AtomicBool);
/// impl Event for Flag {
///     fn is_complete(&self) -> bool { self.0.load(Ordering::Acquire) }
/// }
/// let e = Flag(AtomicBool::new(false));
/// assert!(!e.is_complete());
/// e.0.store(true, Ordering::Release);
/// assert!(e.is_complete());
/// ```
pub trait Event: Send + Sync + 'static {
    /// Whether the work recorded before the event has finished.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::{async_device::AsyncDevice, Event, StreamPolicy};
    /// let dev = AsyncDevice::new(0);
    /// let s = dev.stream("compute");
    /// let e = s.record_event().unwrap();
    /// assert!(!e.is_complete());
    /// dev.run_all();
    /// assert!(e.is_complete());
    /// ```
    fn is_complete(&self) -> bool;

    /// The error the device reported for the event's work, once [`is_complete`](Self::is_complete)
    /// has returned true: the engine poisons what the waiting instruction writes with it.
    /// Default: none.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::{async_device::AsyncDevice, StreamPolicy};
    /// let dev = AsyncDevice::new(0);
    /// let e = dev.stream("compute").record_event().unwrap();
    /// dev.run_all();
    /// assert!(e.is_complete() && e.failure().is_none());
    /// ```
    fn failure(&self) -> Option<crate::Error> {
        None
    }

    /// The event as `Any`, so a stream of the same device kind can recognise its own events
    /// and wait for them on the device. The default (`()`) recognises nothing: such an event
    /// is waited for on the host.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::{async_device::AsyncEvent, Event};
    /// assert!(AsyncEvent::default().as_any_event().downcast_ref::<AsyncEvent>().is_none());
    /// ```
    fn as_any_event(&self) -> &dyn Any {
        &()
    }
}

/// How a stream runs instructions and reports completion.
///
/// # Examples
///
/// ```
/// use eddy_vm::{stream::{Device, Exec, StreamPolicy}, testing::Noop, Vm};
/// struct Side;
/// impl StreamPolicy for Side {
///     fn name(&self) -> &str { "side" }
///     fn device(&self) -> Device { Device::CPU }
///     fn exec(&self) -> Exec { Exec::Inline }
///     fn as_any(&self) -> &dyn std::any::Any { self }
/// }
/// let mut b = Vm::builder();
/// let side = b.add_stream(std::sync::Arc::new(Side));
/// let vm = b.build()?;
/// let x = vm.new_blob(8);
/// vm.run(side, Noop::new(vec![], vec![x.clone()]))?;
/// vm.sync()?;
/// assert!(x.is_allocated());
/// assert_eq!(vm.stream_policy(side).unwrap().name(), "side");
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub trait StreamPolicy: Send + Sync + 'static {
    /// A name for traces and dumps.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{StreamId, Vm};
    /// let vm = Vm::builder().build().unwrap();
    /// assert_eq!(vm.stream_policy(StreamId::CPU).unwrap().name(), "cpu");
    /// ```
    fn name(&self) -> &str;
    /// The stream's device.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::{async_device::AsyncDevice, cpu::CpuStream};
    /// use eddy_vm::stream::{Device, Exec, StreamPolicy};
    /// assert_eq!(CpuStream::new("cpu", Exec::Inline).device(), Device::CPU);
    /// assert_eq!(AsyncDevice::new(3).stream("compute").device(), Device::Test(3));
    /// ```
    fn device(&self) -> Device;
    /// The stream's kind.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::{async_device::AsyncDevice, StreamKind, StreamPolicy};
    /// assert_eq!(AsyncDevice::new(0).stream("compute").kind(), StreamKind::Compute);
    /// ```
    fn kind(&self) -> StreamKind {
        StreamKind::Compute
    }
    /// Where `compute` runs.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::{async_device::AsyncDevice, cpu::CpuStream, Exec, StreamPolicy};
    /// assert_eq!(CpuStream::new("worker", Exec::Worker).exec(), Exec::Worker);
    /// // Launches are cheap: they run on the scheduler thread.
    /// assert_eq!(AsyncDevice::new(0).stream("compute").exec(), Exec::Inline);
    /// ```
    fn exec(&self) -> Exec;
    /// Whether an instruction counts as done once `compute` returned even though the device
    /// may still be working (a CUDA-like in-order queue). Cross-stream consumers then need
    /// events (soft sync).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::{async_device::AsyncDevice, cpu::CpuStream, Exec, StreamPolicy};
    /// assert!(!CpuStream::new("cpu", Exec::Inline).done_means_launched());
    /// assert!(AsyncDevice::new(0).stream("compute").done_means_launched());
    /// ```
    fn done_means_launched(&self) -> bool {
        false
    }
    /// Whether the stream completes its instructions in the order it dispatches them (a CPU
    /// queue, a CUDA stream): the engine then needs no edges between accesses on it. A stream
    /// whose instructions end out of order (a lazy-job launcher whose plan runs end when their
    /// actors do) answers no, and the engine orders its accesses as it orders accesses on two
    /// streams. Default: yes.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::{cpu::CpuStream, Exec, StreamPolicy};
    /// assert!(CpuStream::new("cpu", Exec::Inline).completes_in_order());
    /// assert!(!CpuStream::new("lazy", Exec::Worker).launcher().completes_in_order());
    /// ```
    fn completes_in_order(&self) -> bool {
        true
    }
    /// Whether memory this stream frees may go to its later work at once, with no event.
    ///
    /// True for an in-order device stream whose allocator is its own (a CUDA stream): a block
    /// that a release on the stream returns to the stream's allocator is handed only to work
    /// launched later on the same stream, which the device runs after every earlier reader.
    /// Memory from another stream's allocator is still freed only once an event proves the
    /// device is done with it.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::{async_device::AsyncDevice, cpu::CpuStream, Exec, StreamPolicy};
    /// assert!(!CpuStream::new("cpu", Exec::Inline).orders_memory());
    /// assert!(!AsyncDevice::new(0).stream("compute").orders_memory());
    /// assert!(AsyncDevice::new(0).stream("compute").with_ordered_memory().orders_memory());
    /// ```
    fn orders_memory(&self) -> bool {
        false
    }
    /// The allocator for the outputs of work on this stream, if the stream has one of its own
    /// (a CUDA device's copy streams); `None`, the default, for the device's allocator.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::{cpu::CpuStream, Exec, StreamPolicy};
    /// assert!(CpuStream::new("cpu", Exec::Inline).allocator().is_none());
    /// ```
    fn allocator(&self) -> Option<Arc<crate::alloc::DeviceAllocator>> {
        None
    }
    /// Tells the stream whether the engine records its timeline from now on (at start, and at
    /// each [`Vm::set_trace`](crate::Vm::set_trace)): a device stream may then time its
    /// kernels on the device, for its lane of the timeline. Default: nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::{cpu::CpuStream, Exec, StreamPolicy};
    /// CpuStream::new("cpu", Exec::Inline).tracing_changed(true); // a CPU stream ignores it
    /// ```
    fn tracing_changed(&self, on: bool) {
        let _ = on;
    }
    /// Asks the stream to wake the engine when `event`, one of its own that an instruction
    /// waits for, completes. Default: nothing (the device wakes the engine itself, or the
    /// engine finds the event complete when it next looks).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::{async_device::AsyncDevice, StreamPolicy};
    /// let s = AsyncDevice::new(0).stream("compute");
    /// let e = s.record_event().unwrap();
    /// s.watch(&e); // the test device wakes its engine through its own waker
    /// ```
    fn watch(&self, _event: &Arc<dyn Event>) {}
    /// Whether this stream can wait device-side for an event of another stream of its device.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::{async_device::AsyncDevice, cpu::CpuStream, Exec, StreamPolicy};
    /// assert!(!CpuStream::new("cpu", Exec::Inline).supports_stream_wait());
    /// assert!(AsyncDevice::new(0).stream("compute").supports_stream_wait());
    /// ```
    fn supports_stream_wait(&self) -> bool {
        false
    }
    /// Whether fusion of consecutive fusable instructions is allowed on this stream.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::{async_device::AsyncDevice, cpu::CpuStream, Exec, StreamPolicy};
    /// assert!(CpuStream::new("cpu", Exec::Inline).fusion());
    /// assert!(!AsyncDevice::new(0).stream("compute").fusion());
    /// ```
    fn fusion(&self) -> bool {
        true
    }
    /// Records an event after everything launched so far; `None` if that work is already
    /// complete (synchronous streams).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::{async_device::AsyncDevice, cpu::CpuStream};
    /// use eddy_vm::stream::{Event, Exec, StreamPolicy};
    /// assert!(CpuStream::new("cpu", Exec::Inline).record_event().is_none()); // already done
    /// let dev = AsyncDevice::new(0);
    /// let s = dev.stream("compute");
    /// s.launch(|| {});
    /// let e = s.record_event().unwrap();
    /// assert!(!e.is_complete());
    /// assert_eq!(dev.run_all(), 2); // the launch, then the event
    /// assert!(e.is_complete());
    /// ```
    fn record_event(&self) -> Option<Arc<dyn Event>> {
        None
    }
    /// Makes later work on this stream wait for `event` (device-side).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::{async_device::AsyncDevice, StreamPolicy};
    /// let dev = AsyncDevice::new(0);
    /// let (s0, s1) = (dev.stream("compute"), dev.stream("copy"));
    /// let e = s0.record_event().unwrap();
    /// s1.wait_event(&e);
    /// assert!(!dev.run_next(s1.queue()), "the wait holds queue 1");
    /// assert!(dev.run_next(s0.queue()));
    /// assert!(dev.run_next(s1.queue()));
    /// ```
    fn wait_event(&self, _event: &Arc<dyn Event>) {}
    /// For downcasting by device kernels.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::{async_device::{AsyncDevice, AsyncStream}, StreamPolicy};
    /// let dev = AsyncDevice::new(0);
    /// let s: Box<dyn StreamPolicy> = Box::new(dev.stream("compute"));
    /// let concrete = s.as_any().downcast_ref::<AsyncStream>().expect("an async stream");
    /// assert_eq!(concrete.queue(), 0);
    /// ```
    fn as_any(&self) -> &dyn Any;
}
