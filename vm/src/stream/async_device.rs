//! A test-only asynchronous device with CUDA-shaped semantics, driven by the test.
//!
//! Each [`AsyncStream`] is an in-order queue. `compute` on such a stream only *launches* work
//! ([`AsyncStream::launch`]); the work runs when the test calls [`AsyncDevice::run_next`] or
//! [`AsyncDevice::run_all`]. Events mark a point in a queue; a queue can be made to wait for an
//! event of another queue (device-side wait). This lets tests prove the soft-sync rules without a
//! GPU: a consumer on another stream must never see a producer's work before it ran.

use super::{Device, Event, Exec, StreamPolicy};
use parking_lot::Mutex;
use std::any::Any;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

enum Item {
    Work(Box<dyn FnOnce() + Send>),
    Record(Arc<AsyncEvent>),
    Wait(Arc<dyn Event>),
}

/// An event on the test device.
///
/// # Examples
///
/// ```
/// use eddy_vm::stream::{async_device::AsyncEvent, Event};
/// assert!(!AsyncEvent::default().is_complete(), "complete once the device reaches it");
/// ```
#[derive(Default, Debug)]
pub struct AsyncEvent {
    done: AtomicBool,
    /// The device's fault when the event was reached, if it had faulted.
    failed: Mutex<Option<String>>,
}

impl Event for AsyncEvent {
    fn is_complete(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }
    fn failure(&self) -> Option<crate::Error> {
        let m = self.failed.lock().clone()?;
        Some(crate::Error::kernel("device", m))
    }
}

/// The test device: a set of in-order queues.
///
/// # Examples
///
/// ```
/// use eddy_vm::{stream::async_device::AsyncDevice, testing::{DeviceOp, Log}, Vm};
/// let dev = AsyncDevice::new(0);
/// let mut b = Vm::builder();
/// let q = b.add_stream(std::sync::Arc::new(dev.stream("compute")));
/// let vm = b.build()?;
/// let log = Log::default();
/// let l = log.clone();
/// vm.run(q, DeviceOp::new(vec![], vec![], move || l.lock().push(1)))?;
/// vm.sync()?; // done on the stream means launched
/// assert!(log.lock().is_empty());
/// dev.run_all();
/// assert_eq!(*log.lock(), vec![1]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub struct AsyncDevice {
    index: u32,
    queues: Mutex<Vec<VecDeque<Item>>>,
    waker: Mutex<Option<Box<dyn Fn() + Send + Sync>>>,
    fault: Mutex<Option<String>>,
}

impl AsyncDevice {
    /// A device `Device::Test(index)`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::{async_device::AsyncDevice, Device, StreamPolicy};
    /// let dev = AsyncDevice::new(1);
    /// assert_eq!(dev.stream("compute").device(), Device::Test(1));
    /// ```
    pub fn new(index: u32) -> Arc<Self> {
        Arc::new(AsyncDevice {
            index,
            queues: Mutex::new(Vec::new()),
            waker: Mutex::new(None),
            fault: Mutex::new(None),
        })
    }

    /// Makes the device fault, as a GPU does on an illegal address: every event it reaches
    /// from now on reports `message` as its failure ([`Event::failure`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::{async_device::AsyncDevice, StreamPolicy};
    /// let dev = AsyncDevice::new(0);
    /// let e = dev.stream("compute").record_event().unwrap();
    /// dev.fault("illegal address");
    /// dev.run_all();
    /// assert!(e.is_complete());
    /// assert!(e.failure().unwrap().to_string().contains("illegal address"));
    /// ```
    pub fn fault(&self, message: &str) {
        *self.fault.lock() = Some(message.to_string());
    }

    /// A new stream (queue) on this device.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::{async_device::AsyncDevice, StreamPolicy};
    /// let dev = AsyncDevice::new(0);
    /// let (a, b) = (dev.stream("compute"), dev.stream("copy"));
    /// assert_eq!((a.queue(), b.queue()), (0, 1));
    /// assert_eq!(b.name(), "copy");
    /// ```
    pub fn stream(self: &Arc<Self>, name: &str) -> AsyncStream {
        let mut q = self.queues.lock();
        q.push(VecDeque::new());
        AsyncStream {
            name: name.to_string(),
            device: self.clone(),
            queue: q.len() - 1,
            orders_memory: false,
            pool: None,
        }
    }

    /// Called after the device makes progress (tests set it to the engine's waker so the
    /// scheduler re-polls events).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::async_device::AsyncDevice;
    /// use std::sync::{Arc, atomic::{AtomicUsize, Ordering}};
    /// let dev = AsyncDevice::new(0);
    /// let wakes = Arc::new(AtomicUsize::new(0));
    /// let w = wakes.clone();
    /// dev.set_waker(move || { w.fetch_add(1, Ordering::SeqCst); });
    /// let s = dev.stream("compute");
    /// s.launch(|| {});
    /// s.launch(|| {});
    /// dev.run_all();
    /// assert_eq!(wakes.load(Ordering::SeqCst), 2);
    /// ```
    pub fn set_waker(&self, f: impl Fn() + Send + Sync + 'static) {
        *self.waker.lock() = Some(Box::new(f));
    }

    /// Runs the next item of queue `q` if it can run; returns whether something ran.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::async_device::AsyncDevice;
    /// let dev = AsyncDevice::new(0);
    /// let s = dev.stream("compute");
    /// assert!(!dev.run_next(0), "nothing queued");
    /// s.launch(|| {});
    /// assert!(dev.run_next(0));
    /// assert_eq!(dev.queued(0), 0);
    /// ```
    pub fn run_next(&self, q: usize) -> bool {
        let item = {
            let mut qs = self.queues.lock();
            let Some(front) = qs[q].front() else {
                return false;
            };
            if let Item::Wait(e) = front
                && !e.is_complete()
            {
                return false;
            }
            qs[q].pop_front().expect("front exists")
        };
        match item {
            Item::Work(f) => f(),
            Item::Record(e) => {
                *e.failed.lock() = self.fault.lock().clone();
                e.done.store(true, Ordering::Release);
            }
            Item::Wait(_) => {}
        }
        if let Some(w) = self.waker.lock().as_ref() {
            w();
        }
        true
    }

    /// Runs every queue until none can make progress; returns how many items ran.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::{async_device::AsyncDevice, StreamPolicy};
    /// let dev = AsyncDevice::new(0);
    /// let (s0, s1) = (dev.stream("compute"), dev.stream("copy"));
    /// s1.wait_event(&s0.record_event().unwrap()); // queue 1 waits for queue 0
    /// s1.launch(|| {});
    /// assert_eq!(dev.run_all(), 3);
    /// assert_eq!(dev.queued(1), 0);
    /// ```
    pub fn run_all(&self) -> usize {
        let mut n = 0;
        loop {
            let queues = self.queues.lock().len();
            let mut progressed = false;
            for q in 0..queues {
                while self.run_next(q) {
                    n += 1;
                    progressed = true;
                }
            }
            if !progressed {
                return n;
            }
        }
    }

    /// Items waiting in queue `q`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::async_device::AsyncDevice;
    /// let dev = AsyncDevice::new(0);
    /// let s = dev.stream("compute");
    /// s.launch(|| {});
    /// s.launch(|| {});
    /// assert_eq!(dev.queued(0), 2);
    /// ```
    pub fn queued(&self, q: usize) -> usize {
        self.queues.lock()[q].len()
    }
}

/// A stream of the [`AsyncDevice`]: launches are queued, not run.
///
/// # Examples
///
/// ```
/// use eddy_vm::stream::{async_device::AsyncDevice, StreamPolicy};
/// let dev = AsyncDevice::new(0);
/// let s = dev.stream("compute");
/// assert!(s.done_means_launched() && s.supports_stream_wait());
/// s.launch(|| {});
/// assert_eq!(dev.queued(s.queue()), 1);
/// ```
pub struct AsyncStream {
    name: String,
    device: Arc<AsyncDevice>,
    queue: usize,
    orders_memory: bool,
    pool: Option<Arc<crate::alloc::DeviceAllocator>>,
}

impl AsyncStream {
    /// Queues `work` to run when the test advances this queue.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::async_device::AsyncDevice;
    /// use std::sync::{Arc, atomic::{AtomicBool, Ordering}};
    /// let dev = AsyncDevice::new(0);
    /// let s = dev.stream("compute");
    /// let ran = Arc::new(AtomicBool::new(false));
    /// let r = ran.clone();
    /// s.launch(move || r.store(true, Ordering::SeqCst));
    /// assert!(!ran.load(Ordering::SeqCst), "queued, not run");
    /// dev.run_next(s.queue());
    /// assert!(ran.load(Ordering::SeqCst));
    /// ```
    pub fn launch(&self, work: impl FnOnce() + Send + 'static) {
        self.device.queues.lock()[self.queue].push_back(Item::Work(Box::new(work)));
    }
    /// This stream's queue index on its device.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::async_device::AsyncDevice;
    /// let dev = AsyncDevice::new(0);
    /// let (_a, b) = (dev.stream("compute"), dev.stream("copy"));
    /// b.launch(|| {});
    /// assert_eq!(dev.queued(b.queue()), 1);
    /// assert_eq!(b.queue(), 1);
    /// ```
    pub fn queue(&self) -> usize {
        self.queue
    }

    /// This stream with stream-ordered memory, as a CUDA stream has: a release frees its own
    /// allocator's memory when it is launched, not when the device reaches it (see
    /// [`StreamPolicy::orders_memory`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::{async_device::AsyncDevice, StreamPolicy};
    /// let s = AsyncDevice::new(0).stream("compute").with_ordered_memory();
    /// assert!(s.orders_memory() && s.done_means_launched());
    /// ```
    pub fn with_ordered_memory(mut self) -> Self {
        self.orders_memory = true;
        self
    }

    /// This stream with an allocator of its own for its outputs, as a CUDA device's copy
    /// streams have (see [`StreamPolicy::allocator`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::alloc::{AllocMode, CpuBackend, DeviceAllocator};
    /// use eddy_vm::stream::{async_device::AsyncDevice, StreamPolicy};
    /// let pool = DeviceAllocator::new(Box::new(CpuBackend::new(None)), AllocMode::Caching);
    /// let s = AsyncDevice::new(0).stream("copy").with_allocator(pool.clone());
    /// assert!(std::sync::Arc::ptr_eq(&s.allocator().unwrap(), &pool));
    /// ```
    pub fn with_allocator(mut self, pool: Arc<crate::alloc::DeviceAllocator>) -> Self {
        self.pool = Some(pool);
        self
    }
}

impl StreamPolicy for AsyncStream {
    fn name(&self) -> &str {
        &self.name
    }
    fn device(&self) -> Device {
        Device::Test(self.device.index)
    }
    fn exec(&self) -> Exec {
        Exec::Inline
    }
    fn done_means_launched(&self) -> bool {
        true
    }
    fn supports_stream_wait(&self) -> bool {
        true
    }
    fn orders_memory(&self) -> bool {
        self.orders_memory
    }
    fn allocator(&self) -> Option<Arc<crate::alloc::DeviceAllocator>> {
        self.pool.clone()
    }
    fn fusion(&self) -> bool {
        false
    }
    fn record_event(&self) -> Option<Arc<dyn Event>> {
        let e = Arc::new(AsyncEvent::default());
        self.device.queues.lock()[self.queue].push_back(Item::Record(e.clone()));
        Some(e)
    }
    fn wait_event(&self, event: &Arc<dyn Event>) {
        self.device.queues.lock()[self.queue].push_back(Item::Wait(event.clone()));
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
