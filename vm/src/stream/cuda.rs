//! CUDA devices through the driver API (feature `cuda`): three in-order streams per device
//! (compute, host-to-device, device-to-host), events, a thread per stream that wakes the
//! engine when an event it waits for completes, the fault bookkeeping, and the probe that
//! turns a missing driver into a typed error.
//!
//! A [`CudaStream`]'s `compute` only *launches* work, so its instructions are done when
//! launched (`done_means_launched`): the stream's own order keeps later launches after them.
//! A consumer on another stream or on the host waits for a recorded [`CudaEvent`]; another
//! CUDA stream waits on the device (`cuStreamWaitEvent`), so the host never blocks in between.
//! When the engine itself must learn that an event completed (a host consumer, a deferred
//! free), the stream's event thread waits for it in the driver (`cuEventSynchronize` on a
//! blocking-sync event, asleep, not spinning) and wakes the engine: nothing is added to the
//! device's streams, and a sleeping engine is not polled.
//!
//! Launches are asynchronous, so a device fault (an illegal address, a trap) surfaces at some
//! later driver call. Each device keeps a log of the launches not yet confirmed by a completed
//! event; the first fault seen is kept with the first of them, and every later launch or copy
//! on the device fails with that [`Error::DeviceFault`] instead of running on a broken context.
//!
//! The driver library is loaded at run time: a build with the feature runs on machines without
//! CUDA, and [`device_count`] / [`CudaDevice::open`] report its absence as
//! [`Error::DeviceUnavailable`] instead of panicking.

use super::cuda_error::CudaError;
use super::{Device, Event, Exec, StreamKind, StreamPolicy};
use crate::alloc::{Allocation, DeviceAllocator};
use crate::error::{Error, Result};
use cudarc::driver::{CudaContext, result, sys};
use parking_lot::{Condvar, Mutex};
use std::any::Any;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use super::cuda_probe::unavailable;
pub use super::cuda_probe::{device_count, driver_present};

/// The devices opened so far, by ordinal.
fn opened() -> &'static Mutex<std::collections::HashMap<u32, std::sync::Weak<CudaDevice>>> {
    static OPENED: std::sync::OnceLock<
        Mutex<std::collections::HashMap<u32, std::sync::Weak<CudaDevice>>>,
    > = std::sync::OnceLock::new();
    OPENED.get_or_init(Default::default)
}

/// How many unconfirmed launches a device remembers for naming a fault's first suspect.
const LAUNCH_LOG: usize = 4096;

/// One CUDA device: its primary context, the engine's waker once an engine uses it, its
/// fault bookkeeping, and its pinned host memory.
pub struct CudaDevice {
    ordinal: u32,
    ctx: Arc<CudaContext>,
    waker: Mutex<Option<Arc<dyn Fn() + Send + Sync>>>,
    /// Set once the device has faulted; `fault` then holds the report.
    faulted: AtomicBool,
    fault: Mutex<Option<Fault>>,
    launches: Mutex<LaunchLog>,
    pinned: OnceLock<Arc<DeviceAllocator>>,
    extension: OnceLock<Arc<dyn Any + Send + Sync>>,
}

/// What the first fault of a device said, and the earliest instruction that can have caused it.
#[derive(Clone, Debug)]
struct Fault {
    message: String,
    first_unconfirmed: String,
}

/// Launches since the last completed event: `(sequence number, instruction id, op name)`.
#[derive(Default)]
struct LaunchLog {
    next: u64,
    dropped: bool,
    log: VecDeque<(u64, u64, &'static str)>,
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaDevice(cuda:{})", self.ordinal)
    }
}

impl CudaDevice {
    /// Opens device `ordinal` (its primary context).
    ///
    /// # Errors
    ///
    /// `DeviceUnavailable` without a driver, for an ordinal past the device count, or when the
    /// driver refuses the context.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::cuda::{device_count, CudaDevice};
    /// if device_count().unwrap_or(0) == 0 {
    ///     assert!(CudaDevice::open(0).is_err()); // typed, never a panic
    /// }
    /// ```
    pub fn open(ordinal: u32) -> Result<Arc<CudaDevice>> {
        let name = format!("cuda:{ordinal}");
        let n = device_count().map_err(|e| match e {
            Error::DeviceUnavailable { reason, .. } => unavailable("open", &name, reason),
            e => e,
        })?;
        if ordinal >= n {
            return Err(unavailable(
                "open",
                &name,
                format!("the machine has {n} CUDA devices"),
            ));
        }
        let ctx = CudaContext::new(ordinal as usize)
            .map_err(|e| unavailable("open", &name, format!("no context: {e}")))?;
        // The engine orders work itself: cudarc's per-buffer event tracking would only add
        // events to launches it never sees.
        // SAFETY: no cudarc buffer or stream of this context exists yet.
        unsafe { ctx.disable_event_tracking() };
        let d = Arc::new(CudaDevice {
            ordinal,
            ctx,
            waker: Mutex::new(None),
            faulted: AtomicBool::new(false),
            fault: Mutex::new(None),
            launches: Mutex::new(LaunchLog::default()),
            pinned: OnceLock::new(),
            extension: OnceLock::new(),
        });
        opened().lock().insert(ordinal, Arc::downgrade(&d));
        Ok(d)
    }

    /// A device an engine has open, for work outside its streams (a host-side copy).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::cuda::CudaDevice;
    /// if eddy_vm::stream::cuda::device_count().unwrap_or(0) == 0 {
    ///     assert!(CudaDevice::opened(0).is_none());
    /// }
    /// ```
    pub fn opened(ordinal: u32) -> Option<Arc<CudaDevice>> {
        opened().lock().get(&ordinal)?.upgrade()
    }

    /// The device's ordinal.
    pub fn ordinal(&self) -> u32 {
        self.ordinal
    }

    /// The device's context (cudarc), for loading modules and reading properties.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// A slot for what a layer above keeps per device (the op layer's compiled kernels), set
    /// once, so that a launch finds it without a lookup.
    pub fn extension(&self) -> &OnceLock<Arc<dyn Any + Send + Sync>> {
        &self.extension
    }

    /// Makes the device's context current on the calling thread: every driver call needs it.
    ///
    /// # Errors
    ///
    /// `DeviceUnavailable` if the driver refuses.
    pub fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| unavailable("bind", &format!("cuda:{}", self.ordinal), e.to_string()))
    }

    /// A new stream of `kind` on the device, named `name`.
    ///
    /// # Errors
    ///
    /// `DeviceUnavailable` if the driver cannot create the stream.
    pub fn stream(self: &Arc<Self>, name: &str, kind: StreamKind) -> Result<CudaStream> {
        self.bind()?;
        let raw = result::stream::create(result::stream::StreamKind::NonBlocking)
            .map_err(|e| unavailable("stream", name, e.to_string()))?;
        Ok(CudaStream {
            name: name.to_string(),
            kind,
            device: self.clone(),
            raw,
            pool: None,
            watcher: OnceLock::new(),
            timeline: Mutex::default(),
            tracing: AtomicBool::new(false),
        })
    }

    /// The device's pool of page-locked host memory (made by `make` on first use, from this
    /// device's `PinnedBackend`): the device-to-host stream's outputs and the host-to-device
    /// stream's staging.
    pub fn pinned_pool(
        self: &Arc<Self>,
        make: impl FnOnce(&Arc<CudaDevice>) -> Arc<DeviceAllocator>,
    ) -> Arc<DeviceAllocator> {
        self.pinned.get_or_init(|| make(self)).clone()
    }

    /// Wakes the engine that uses this device when one of its events completes.
    pub fn set_waker(&self, waker: Arc<dyn Fn() + Send + Sync>) {
        *self.waker.lock() = Some(waker);
    }

    fn wake(&self) {
        let w = self.waker.lock().clone();
        if let Some(w) = w {
            w();
        }
    }

    /// Free and total device memory, in bytes.
    ///
    /// # Errors
    ///
    /// `DeviceUnavailable` if the driver refuses.
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        self.bind()?;
        result::mem_get_info()
            .map_err(|e| unavailable("mem_info", &format!("cuda:{}", self.ordinal), e.to_string()))
    }

    /// Notes that instruction `instr_id` (op `name`) launched work on the device.
    pub fn note_launch(&self, instr_id: u64, name: &'static str) {
        let mut l = self.launches.lock();
        let seq = l.next;
        l.next += 1;
        if l.log.len() == LAUNCH_LOG {
            l.log.pop_front();
            l.dropped = true;
        }
        l.log.push_back((seq, instr_id, name));
    }

    /// The sequence number the next launch will get: an event recorded now covers every
    /// launch numbered below it.
    fn launch_mark(&self) -> u64 {
        self.launches.lock().next
    }

    /// Every launch numbered below `mark` has completed.
    fn confirm(&self, mark: u64) {
        let mut l = self.launches.lock();
        while l.log.front().is_some_and(|&(seq, _, _)| seq < mark) {
            l.log.pop_front();
            l.dropped = false;
        }
    }

    /// The device's fault, if it has faulted, as the error `op` reports.
    ///
    /// # Examples
    ///
    /// ```
    /// if let Ok(d) = eddy_vm::stream::cuda::CudaDevice::open(0) {
    ///     assert!(d.fault("add").is_none(), "a fresh device has not faulted");
    /// }
    /// ```
    pub fn fault(&self, op: &str) -> Option<Error> {
        if !self.faulted.load(Ordering::Acquire) {
            return None;
        }
        let f = self.fault.lock().clone()?;
        Some(Error::DeviceFault {
            op: op.to_string(),
            device: format!("cuda:{}", self.ordinal),
            message: f.message,
            first_unconfirmed: f.first_unconfirmed,
            at: crate::error::Caller::UNKNOWN,
        })
    }

    /// After a driver call failed: whether the context itself is broken (a fault of earlier
    /// work, which every later call would report too). If so, it is recorded, with the first
    /// unconfirmed launch, and returned as the error `op` reports; a plain error of the call
    /// (an invalid argument) returns `None`.
    pub fn check_fault(&self, op: &str) -> Option<Error> {
        if let Some(e) = self.fault(op) {
            return Some(e);
        }
        // A context that cannot even be made current is broken too.
        let r = match self.ctx.bind_to_thread() {
            Err(e) => Err(e.to_string()),
            // SAFETY: the context is current; this waits for its work and reports a sticky
            // error of earlier work.
            Ok(()) => unsafe { sys::cuCtxSynchronize() }
                .result()
                .map_err(|e| e.to_string()),
        };
        self.record_fault(r.err()?);
        self.fault(op)
    }

    fn record_fault(&self, message: String) {
        let mut f = self.fault.lock();
        if f.is_some() {
            return; // the first report is the one that names the cause
        }
        let l = self.launches.lock();
        let first_unconfirmed = match l.log.front() {
            Some(&(_, id, name)) if !l.dropped => format!("`{name}` (instruction {id})"),
            Some(&(_, id, name)) => format!(
                "earlier than `{name}` (instruction {id}), the oldest of the last {LAUNCH_LOG} \
                 launches"
            ),
            None => "none: every launch was confirmed before the fault".into(),
        };
        *f = Some(Fault {
            message,
            first_unconfirmed,
        });
        self.faulted.store(true, Ordering::Release);
    }
}

/// An in-order CUDA stream as an engine stream: compute launches; done means launched.
pub struct CudaStream {
    name: String,
    kind: StreamKind,
    device: Arc<CudaDevice>,
    raw: sys::CUstream,
    pool: Option<Arc<DeviceAllocator>>,
    watcher: OnceLock<Arc<Watcher>>,
    timeline: Mutex<super::cuda_timing::Timeline>,
    /// Whether the engine records its timeline: kernels are then timed on the device.
    tracing: AtomicBool,
}

// SAFETY: a `CUstream` is a handle the driver lets any thread use (with the context bound);
// the engine launches on it from one thread at a time (its instructions are dispatched in
// order), and it is destroyed only on drop.
unsafe impl Send for CudaStream {}
// SAFETY: as above; `&CudaStream` only hands the handle to driver calls, which are thread-safe.
unsafe impl Sync for CudaStream {}

impl CudaStream {
    /// The raw stream handle, for launches and copies.
    pub fn raw(&self) -> sys::CUstream {
        self.raw
    }

    /// The device.
    pub fn cuda_device(&self) -> &Arc<CudaDevice> {
        &self.device
    }

    /// Whether the engine records its timeline (see [`CudaStream::timed`]).
    pub fn tracing(&self) -> bool {
        self.tracing.load(Ordering::Relaxed)
    }

    /// Runs `launch` (a kernel body that launches on this stream, the context bound)
    /// bracketed by timing events, kept to become trace event `name` (instruction `id`) on
    /// the stream's device lane. A failure to make the events leaves the launch untimed.
    pub fn timed<R>(&self, id: u64, name: &str, launch: impl FnOnce() -> R) -> R {
        self.timeline.lock().timed(self.raw(), id, name, launch)
    }

    /// The launches read back so far, as trace events (see `Timeline::device_events`).
    pub(crate) fn device_events(
        &self,
        stream: u32,
        origin: std::time::Instant,
        lane: &str,
        clear: bool,
    ) -> Vec<crate::trace::TraceEvent> {
        let mut t = self.timeline.lock();
        if t.is_empty() || self.cuda_device().bind().is_err() {
            return Vec::new();
        }
        t.device_events(stream, origin, lane, clear)
    }

    /// The stream's name.
    pub(crate) fn stream_name(&self) -> &str {
        &self.name
    }

    /// This stream with an allocator of its own for its outputs (see
    /// [`StreamPolicy::allocator`]).
    pub fn with_pool(mut self, pool: Arc<DeviceAllocator>) -> Self {
        self.pool = Some(pool);
        self
    }

    /// Blocks the calling thread until everything launched so far has run.
    ///
    /// # Errors
    ///
    /// The first asynchronous fault of the device.
    pub fn synchronize(&self) -> std::result::Result<(), CudaError> {
        self.device.bind()?;
        // SAFETY: `raw` is a live stream of the bound context.
        unsafe { result::stream::synchronize(self.raw) }
            .map_err(|e| CudaError::driver("synchronising the stream", e))
    }

    /// Copies `src` from host memory to device address `dst`, in stream order. The source is
    /// first copied into pinned memory, so that the device copy runs asynchronously and
    /// overlaps other streams' work; the stream's event thread returns the staging block to the
    /// pinned pool once the event after the copy completes. (From pageable memory the driver
    /// would first wait for everything queued on the stream: on the compute stream, every
    /// kernel launched so far.)
    ///
    /// # Errors
    ///
    /// The driver's message.
    ///
    /// # Safety
    ///
    /// `dst` must be device memory of this stream's device, at least `src.len()` bytes, that
    /// no other work uses until the copy completes (in stream order).
    pub unsafe fn copy_from_host(
        &self,
        dst: u64,
        src: &[u8],
    ) -> std::result::Result<(), CudaError> {
        if src.is_empty() {
            return Ok(());
        }
        let staging = self
            .device
            .pinned
            .get()
            .and_then(|p| p.allocate(src.len()).ok());
        let Some(block) = staging else {
            // Without pinned memory: the driver copies the pageable source out before this
            // returns, after the stream's earlier work.
            // SAFETY: forwarded.
            return unsafe { result::memcpy_htod_async(dst, src, self.raw) }
                .map_err(|e| CudaError::driver("host to device copy", e));
        };
        // SAFETY: `block` is a fresh pinned block of at least `src.len()` bytes, ours alone.
        let pinned = unsafe { std::slice::from_raw_parts_mut(block.ptr(), src.len()) };
        pinned.copy_from_slice(src);
        // SAFETY: forwarded for `dst`; the pinned source stays allocated (held by the event
        // thread) until the event recorded after the copy completes.
        unsafe { result::memcpy_htod_async(dst, &*pinned, self.raw) }
            .map_err(|e| CudaError::driver("host to device copy", e))?;
        let ev = self.new_event()?;
        let w = self.watcher();
        if w.threaded {
            w.push(Watched::Free(ev, block));
        } else {
            ev.wait(); // no event thread: the block goes back once the copy is done
        }
        Ok(())
    }

    /// The stream's event thread, started on first use.
    fn watcher(&self) -> &Arc<Watcher> {
        self.watcher.get_or_init(|| {
            Watcher::start(format!("eddy-{}-events", self.name))
                .unwrap_or_else(|| Arc::new(Watcher::idle()))
        })
    }

    /// Records a new event on the stream, after everything launched so far.
    fn new_event(&self) -> std::result::Result<CudaEvent, CudaError> {
        self.device.bind()?;
        let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32
            | sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC as u32;
        let mut raw = std::mem::MaybeUninit::uninit();
        // SAFETY: the context is current; `raw` receives a new event handle on success.
        unsafe { sys::cuEventCreate(raw.as_mut_ptr(), flags) }
            .result()
            .map_err(|e| CudaError::driver("creating an event", e))?;
        // SAFETY: initialised by the successful call above.
        let raw = unsafe { raw.assume_init() };
        let mark = self.device.launch_mark();
        // SAFETY: both handles are live in the bound context.
        if let Err(e) = unsafe { result::event::record(raw, self.raw) } {
            // SAFETY: created above, never recorded or shared.
            let _ = unsafe { result::event::destroy(raw) };
            return Err(CudaError::driver("recording an event", e));
        }
        Ok(CudaEvent {
            raw,
            device: self.device.clone(),
            mark,
            failed: OnceLock::new(),
        })
    }
}

impl Drop for CudaStream {
    fn drop(&mut self) {
        if let Some(w) = self.watcher.get() {
            w.stop();
        }
        if self.device.bind().is_ok() {
            self.timeline.lock().destroy();
            // SAFETY: the stream is live and destroyed once; the driver lets its pending work
            // (and the events after it, which the event thread still waits for) complete first.
            let _ = unsafe { result::stream::destroy(self.raw) };
        }
    }
}

/// What a stream's event thread waits for.
enum Watched {
    /// An event an instruction waits for: wake the engine when it completes.
    Wake(Arc<dyn Event>),
    /// The event after a staged copy: give the staging block back when it completes.
    Free(CudaEvent, Allocation),
}

/// A thread that waits, in the driver, for the events of one stream, in the order they were
/// recorded (the order they complete in): it wakes the engine after each event an instruction
/// waits for, and gives staging blocks back after their copies. It drains what it holds before
/// it stops.
struct Watcher {
    queue: Mutex<(VecDeque<Watched>, bool)>,
    cv: Condvar,
    /// Whether a thread serves the queue (see [`Watcher::idle`]).
    threaded: bool,
}

impl Watcher {
    fn start(name: String) -> Option<Arc<Watcher>> {
        let w = Arc::new(Watcher {
            queue: Mutex::new((VecDeque::new(), false)),
            cv: Condvar::new(),
            threaded: true,
        });
        let run = w.clone();
        std::thread::Builder::new()
            .name(name)
            .spawn(move || run.run())
            .ok()?;
        Some(w)
    }

    fn push(&self, w: Watched) {
        self.queue.lock().0.push_back(w);
        self.cv.notify_one();
    }

    fn stop(&self) {
        self.queue.lock().1 = true;
        self.cv.notify_one();
    }

    fn run(&self) {
        loop {
            let ev = {
                let mut q = self.queue.lock();
                loop {
                    if let Some(ev) = q.0.pop_front() {
                        break ev;
                    }
                    if q.1 {
                        return;
                    }
                    self.cv.wait(&mut q);
                }
            };
            match ev {
                Watched::Wake(ev) => {
                    if let Some(e) = ev.as_any_event().downcast_ref::<CudaEvent>() {
                        e.wait();
                        e.device.wake();
                    }
                }
                Watched::Free(e, block) => {
                    e.wait();
                    drop(block);
                }
            }
        }
    }
}

impl StreamPolicy for CudaStream {
    fn name(&self) -> &str {
        &self.name
    }
    fn tracing_changed(&self, on: bool) {
        self.tracing.store(on, Ordering::Relaxed);
    }
    fn device(&self) -> Device {
        Device::Cuda(self.device.ordinal)
    }
    fn kind(&self) -> StreamKind {
        self.kind
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
        true
    }
    fn allocator(&self) -> Option<Arc<DeviceAllocator>> {
        self.pool.clone()
    }
    /// The compute stream fuses runs of small instructions into units, as the CPU's does: a
    /// unit of elementwise op calls is then one launch (`eddy_ops::cuda::unit_merge`). The
    /// copy streams do not.
    fn fusion(&self) -> bool {
        self.kind == StreamKind::Compute
    }
    fn record_event(&self) -> Option<Arc<dyn Event>> {
        match self.new_event() {
            Ok(e) => Some(Arc::new(e)),
            // On a faulted device, an event that reports the fault: whoever waits for the
            // stream's work learns it failed, instead of reading what it never wrote.
            Err(_) => Some(Arc::new(FailedEvent(
                self.device.check_fault("record_event")?,
            ))),
        }
    }
    fn watch(&self, event: &Arc<dyn Event>) {
        let w = self.watcher();
        if w.threaded {
            w.push(Watched::Wake(event.clone()));
        }
    }
    fn wait_event(&self, event: &Arc<dyn Event>) {
        let any: &dyn Any = event.as_ref().as_any_event();
        if let Some(e) = any.downcast_ref::<CudaEvent>()
            && e.device.ordinal == self.device.ordinal
            && self.device.bind().is_ok()
        {
            // SAFETY: both handles are live; the wait is enqueued on the device.
            if unsafe {
                result::stream::wait_event(
                    self.raw,
                    e.raw,
                    sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
                )
            }
            .is_ok()
            {
                return;
            }
        }
        // Another device's event: wait on the host.
        while !event.is_complete() {
            std::thread::yield_now();
        }
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Watcher {
    /// A watcher without a thread (none could be spawned): the engine then finds completed
    /// events when it next looks, as it does on every pass, and staged copies wait for their
    /// events before they return.
    fn idle() -> Watcher {
        Watcher {
            queue: Mutex::new((VecDeque::new(), true)),
            cv: Condvar::new(),
            threaded: false,
        }
    }
}

/// A point in a CUDA stream; complete when the device has run everything before it.
pub struct CudaEvent {
    raw: sys::CUevent,
    device: Arc<CudaDevice>,
    /// Every launch numbered below this was recorded before the event.
    mark: u64,
    /// Set if the driver reported a fault for the event's work.
    failed: OnceLock<String>,
}

// SAFETY: an event handle may be queried and destroyed from any thread with its context bound.
unsafe impl Send for CudaEvent {}
// SAFETY: as above; queries are thread-safe driver calls.
unsafe impl Sync for CudaEvent {}

impl CudaEvent {
    /// Waits for the event in the driver (asleep: the event is blocking-sync).
    fn wait(&self) {
        if let Err(e) = self.device.bind() {
            self.device.record_fault(e.to_string());
            let _ = self.failed.set(e.to_string());
            return;
        }
        // SAFETY: the event is live until drop.
        let r = unsafe { result::event::synchronize(self.raw) };
        self.settle(r);
    }

    /// Books the outcome of a query or wait that finished.
    fn settle(&self, r: std::result::Result<(), cudarc::driver::DriverError>) {
        match r {
            Ok(()) => self.device.confirm(self.mark),
            Err(e) => {
                self.device.record_fault(e.to_string());
                let _ = self.failed.set(e.to_string());
            }
        }
    }
}

impl Event for CudaEvent {
    fn is_complete(&self) -> bool {
        if self.failed.get().is_some() {
            return true;
        }
        if let Err(e) = self.device.bind() {
            // A lost context has nothing left to wait for, and nothing it did can be trusted.
            self.device.record_fault(e.to_string());
            let _ = self.failed.set(e.to_string());
            return true;
        }
        // SAFETY: the event is live until drop.
        match unsafe { result::event::query(self.raw) } {
            Err(e) if e.0 == sys::cudaError_enum::CUDA_ERROR_NOT_READY => false,
            r => {
                self.settle(r);
                true
            }
        }
    }
    fn failure(&self) -> Option<Error> {
        self.failed.get()?;
        self.device.fault("event")
    }
    fn as_any_event(&self) -> &dyn Any {
        self
    }
}

/// The event a faulted device gives instead of recording one: complete, with the fault.
struct FailedEvent(Error);

impl Event for FailedEvent {
    fn is_complete(&self) -> bool {
        true
    }
    fn failure(&self) -> Option<Error> {
        Some(self.0.clone())
    }
}

impl Drop for CudaEvent {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            // SAFETY: live, destroyed once.
            let _ = unsafe { result::event::destroy(self.raw) };
        }
    }
}
