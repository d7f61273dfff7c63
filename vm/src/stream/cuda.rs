//! CUDA devices through the driver API (feature `cuda`): one in-order compute stream per
//! device, events, and the probe that turns a missing driver into a typed error.
//!
//! A [`CudaStream`]'s `compute` only *launches* work, so its instructions are done when
//! launched (`done_means_launched`): the stream's own order keeps later launches after them.
//! A consumer on another stream or on the host waits for a recorded [`CudaEvent`]; another
//! CUDA stream waits on the device (`cuStreamWaitEvent`), so the host never blocks in between.
//! Each recorded event also enqueues a host function that wakes the engine when the device
//! reaches it, so an engine waiting for device work sleeps instead of polling.
//!
//! The driver library is loaded at run time: a build with the feature runs on machines without
//! CUDA, and [`device_count`] / [`CudaDevice::open`] report its absence as
//! [`Error::DeviceUnavailable`] instead of panicking.

use super::{Device, Event, Exec, StreamPolicy};
use crate::error::{Error, Result};
use cudarc::driver::{CudaContext, result, sys};
use parking_lot::Mutex;
use std::any::Any;
use std::ffi::c_void;
use std::sync::Arc;

fn unavailable(op: &str, device: &str, reason: impl Into<String>) -> Error {
    Error::DeviceUnavailable {
        at: crate::error::Caller::UNKNOWN,
        op: op.into(),
        device: device.into(),
        reason: reason.into(),
    }
}

/// Whether the CUDA driver library can be loaded on this machine.
///
/// # Examples
///
/// ```
/// // On a machine without the driver this is false, and nothing panics.
/// let _present: bool = eddy_vm::stream::cuda::driver_present();
/// ```
pub fn driver_present() -> bool {
    // SAFETY: only tries to load the library; no CUDA call is made.
    unsafe { sys::is_culib_present() }
}

/// How many CUDA devices the machine has.
///
/// # Errors
///
/// `DeviceUnavailable` if the driver library is missing or fails to initialise.
///
/// # Examples
///
/// ```
/// match eddy_vm::stream::cuda::device_count() {
///     Ok(n) => println!("{n} CUDA devices"),
///     Err(e) => println!("no CUDA here: {e}"),
/// }
/// ```
pub fn device_count() -> Result<u32> {
    if !driver_present() {
        return Err(unavailable(
            "cuda",
            "cuda",
            "no CUDA driver library (libcuda.so) on this machine",
        ));
    }
    result::init().map_err(|e| unavailable("cuda", "cuda", format!("cuInit failed: {e}")))?;
    let n = result::device::get_count()
        .map_err(|e| unavailable("cuda", "cuda", format!("cuDeviceGetCount failed: {e}")))?;
    Ok(n.max(0) as u32)
}

/// The devices opened so far, by ordinal.
fn opened() -> &'static Mutex<std::collections::HashMap<u32, std::sync::Weak<CudaDevice>>> {
    static OPENED: std::sync::OnceLock<
        Mutex<std::collections::HashMap<u32, std::sync::Weak<CudaDevice>>>,
    > = std::sync::OnceLock::new();
    OPENED.get_or_init(Default::default)
}

/// One CUDA device: its primary context, and the engine's waker once an engine uses it.
pub struct CudaDevice {
    ordinal: u32,
    ctx: Arc<CudaContext>,
    waker: Mutex<Option<Arc<dyn Fn() + Send + Sync>>>,
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

    /// A new compute stream on the device, named `name`.
    ///
    /// # Errors
    ///
    /// `DeviceUnavailable` if the driver cannot create the stream.
    pub fn stream(self: &Arc<Self>, name: &str) -> Result<CudaStream> {
        self.bind()?;
        let raw = result::stream::create(result::stream::StreamKind::NonBlocking)
            .map_err(|e| unavailable("stream", name, e.to_string()))?;
        Ok(CudaStream {
            name: name.to_string(),
            device: self.clone(),
            raw,
        })
    }

    /// Wakes the engine that uses this device when one of its events completes.
    pub fn set_waker(&self, waker: Arc<dyn Fn() + Send + Sync>) {
        *self.waker.lock() = Some(waker);
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
}

/// An in-order CUDA stream as an engine stream: compute launches; done means launched.
pub struct CudaStream {
    name: String,
    device: Arc<CudaDevice>,
    raw: sys::CUstream,
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

    /// Blocks the calling thread until everything launched so far has run.
    ///
    /// # Errors
    ///
    /// The first asynchronous fault of the device, as `KernelFailed`-style text.
    pub fn synchronize(&self) -> std::result::Result<(), String> {
        self.device.bind().map_err(|e| e.to_string())?;
        // SAFETY: `raw` is a live stream of the bound context.
        unsafe { result::stream::synchronize(self.raw) }.map_err(|e| e.to_string())
    }
}

impl Drop for CudaStream {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            // SAFETY: the stream is live and dropped once; pending work completes first
            // (the driver defers the destruction).
            let _ = unsafe { result::stream::destroy(self.raw) };
        }
    }
}

/// The host function an event's record enqueues: wakes the engine.
///
/// # Safety
///
/// `data` must be a `Box<Arc<dyn Fn() + Send + Sync>>` turned into a raw pointer, passed to
/// this function exactly once (the driver calls each enqueued host function once).
unsafe extern "C" fn wake_engine(data: *mut c_void) {
    // SAFETY: `data` is the `Box<Arc<dyn Fn>>` leaked in `record_event`, taken back once.
    let waker: Box<Arc<dyn Fn() + Send + Sync>> = unsafe { Box::from_raw(data.cast()) };
    waker();
}

impl StreamPolicy for CudaStream {
    fn name(&self) -> &str {
        &self.name
    }
    fn device(&self) -> Device {
        Device::Cuda(self.device.ordinal)
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
    fn fusion(&self) -> bool {
        false
    }
    fn record_event(&self) -> Option<Arc<dyn Event>> {
        self.device.bind().ok()?;
        let raw = result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING).ok()?;
        // SAFETY: both handles are live in the bound context.
        if unsafe { result::event::record(raw, self.raw) }.is_err() {
            // SAFETY: created above, never recorded or shared.
            let _ = unsafe { result::event::destroy(raw) };
            return None;
        }
        if let Some(w) = self.device.waker.lock().clone() {
            let data = Box::into_raw(Box::new(w)).cast::<c_void>();
            // SAFETY: `wake_engine` takes back `data` exactly once, when the stream reaches it;
            // it makes no CUDA call, as host functions must not.
            let r = unsafe { result::stream::launch_host_function(self.raw, wake_engine, data) };
            if r.is_err() {
                // SAFETY: the host function was not enqueued: `data` is still ours.
                drop(unsafe { Box::from_raw(data.cast::<Arc<dyn Fn() + Send + Sync>>()) });
            }
        }
        Some(Arc::new(CudaEvent {
            raw,
            device: self.device.clone(),
        }))
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

/// A point in a CUDA stream; complete when the device has run everything before it.
pub struct CudaEvent {
    raw: sys::CUevent,
    device: Arc<CudaDevice>,
}

// SAFETY: an event handle may be queried and destroyed from any thread with its context bound.
unsafe impl Send for CudaEvent {}
// SAFETY: as above; queries are thread-safe driver calls.
unsafe impl Sync for CudaEvent {}

impl Event for CudaEvent {
    fn is_complete(&self) -> bool {
        if self.device.bind().is_err() {
            return true; // a lost context has nothing left to wait for
        }
        // SAFETY: the event is live until drop.
        match unsafe { result::event::query(self.raw) } {
            Ok(()) => true,
            Err(e) => e.0 != sys::cudaError_enum::CUDA_ERROR_NOT_READY,
        }
    }
    fn as_any_event(&self) -> &dyn Any {
        self
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
