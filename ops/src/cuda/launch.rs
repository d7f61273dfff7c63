//! The launch machinery: the per-device module cache, the [`CudaKernel`] adapter to the
//! engine's `Kernel` trait, and [`DevLay`], an operand's layout as the device kernels take it.

use crate::Layout;
use cudarc::driver::{CudaFunction, CudaModule, result, sys};
use cudarc::nvrtc::{CompileOptions, Ptx, compile_ptx_with_opts};
use eddy_vm::alloc::{Allocation, DeviceAllocator};
use eddy_vm::instruction::{ComputeCtx, Kernel};
use eddy_vm::stream::cuda::{CudaDevice, CudaStream};
pub use eddy_vm::stream::cuda_error::CudaError;
use eddy_vm::{Blob, Counted};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, OnceLock};

/// The device kernels' source, compiled at run time by NVRTC: the files of `kernels/`, the
/// prelude (types, layouts, dtypes and the elementwise arithmetic) first.
pub const SOURCE: &str = concat!(
    include_str!("kernels/prelude.cu"),
    include_str!("kernels/elementwise.cu"),
    include_str!("kernels/reduce.cu"),
    include_str!("kernels/index.cu"),
    include_str!("kernels/sort.cu"),
    include_str!("kernels/linalg.cu"),
);

/// The most dims a device layout holds (`kernels/prelude.cu`'s `Lay`).
pub const MAX_DIMS: usize = 8;

/// The helpers at the top of [`SOURCE`] (its types, layouts and the unary and binary ops),
/// which merged elementwise kernels are compiled with.
pub fn prelude() -> &'static str {
    let end = SOURCE
        .find("// ---- The helpers above")
        .expect("kernels/prelude.cu marks the end of its helpers");
    &SOURCE[..end]
}

/// Compiles `source` for `arch` (e.g. `"sm_90"`) to PTX; NVRTC needs no GPU.
///
/// # Errors
///
/// As [`compile`].
pub fn compile_source(source: &str, arch: &'static str) -> Result<Ptx, CudaError> {
    // SAFETY: only tries to load the library.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(CudaError::NoCompiler);
    }
    // No fused multiply-adds: every product and sum rounds on its own, as on the CPU, and a
    // merged kernel (whose values stay in registers) computes the bits separate kernels do.
    let opts = CompileOptions {
        arch: Some(arch),
        fmad: Some(false),
        options: vec!["--std=c++17".into()],
        ..Default::default()
    };
    compile_ptx_with_opts(source, opts).map_err(|e| CudaError::Compile(e.to_string()))
}

/// The architecture of `device` as NVRTC names it (`"sm_90"`), kept for the process.
///
/// # Errors
///
/// The driver's error.
pub fn arch_of(device: &CudaDevice) -> Result<&'static str, CudaError> {
    static ARCHS: OnceLock<Mutex<HashMap<(i32, i32), &'static str>>> = OnceLock::new();
    let (major, minor) = device
        .context()
        .compute_capability()
        .map_err(|e| CudaError::driver("reading the compute capability", e))?;
    let mut a = ARCHS.get_or_init(Default::default).lock();
    // NVRTC takes a `'static` name: one per distinct architecture.
    Ok(*a
        .entry((major, minor))
        .or_insert_with(|| Box::leak(format!("sm_{major}{minor}").into_boxed_str())))
}

/// Compiles [`SOURCE`] for `arch` (e.g. `"sm_90"`) to PTX; NVRTC needs no GPU.
///
/// # Errors
///
/// NVRTC's log, with line and message, for a kernel that does not compile, or a line saying
/// the NVRTC library is missing.
///
/// # Examples
///
/// ```no_run
/// let ptx = eddy_ops::cuda::compile("sm_90").expect("the kernels compile");
/// ```
pub fn compile(arch: &'static str) -> Result<Ptx, CudaError> {
    compile_source(SOURCE, arch)
}

/// One device's compiled kernels and its cuBLAS handle.
pub struct DeviceModule {
    _module: Arc<CudaModule>,
    functions: HashMap<String, CudaFunction>,
    blas: Mutex<Option<BlasHandle>>,
}

struct BlasHandle(cudarc::cublas::sys::cublasHandle_t);
// SAFETY: a cuBLAS handle may be used from any thread, one at a time: it sits behind a mutex.
unsafe impl Send for BlasHandle {}

/// The kernels of `device`, compiled on first use and cached for the life of the process.
///
/// # Errors
///
/// NVRTC's or the driver's message if the module cannot be built or loaded.
pub fn module_for(device: &CudaDevice) -> Result<Arc<DeviceModule>, CudaError> {
    // The device's own slot first: no lock on a launch's path.
    if let Some(m) = device.extension().get()
        && let Ok(m) = m.clone().downcast::<DeviceModule>()
    {
        return Ok(m);
    }
    static CACHE: OnceLock<Mutex<HashMap<u32, Arc<DeviceModule>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(m) = cache.lock().get(&device.ordinal()) {
        let _ = device.extension().set(m.clone());
        return Ok(m.clone());
    }
    let ctx = device.context();
    let ptx = compile(arch_of(device)?)?;
    let module = ctx
        .load_module(ptx)
        .map_err(|e| CudaError::driver("loading the kernels", e))?;
    let mut functions = HashMap::new();
    for name in kernel_names() {
        let f = module
            .load_function(name)
            .map_err(|e| CudaError::driver(format!("kernel {name}"), e))?;
        functions.insert(name.to_string(), f);
    }
    let m = Arc::new(DeviceModule {
        _module: module,
        functions,
        blas: Mutex::new(None),
    });
    cache.lock().insert(device.ordinal(), m.clone());
    let _ = device.extension().set(m.clone());
    Ok(m)
}

/// The `extern "C"` kernels of [`SOURCE`] (each declared on a line of its own, with or
/// without `__launch_bounds__`).
pub(crate) fn kernel_names() -> impl Iterator<Item = &'static str> {
    SOURCE.lines().filter_map(|l| {
        let rest = l.strip_prefix("extern \"C\" __global__ void ")?;
        let rest = match rest.strip_prefix("__launch_bounds__(") {
            Some(bounded) => bounded.split_once(") ")?.1,
            None => rest,
        };
        rest.split('(').next()
    })
}

/// Whether `EDDY_LAUNCH_BLOCKING=1`: every launch waits for its kernel, so a device fault is
/// reported by the op that caused it.
pub fn launch_blocking() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("EDDY_LAUNCH_BLOCKING").is_ok_and(|v| v.trim() == "1"))
}

/// What a kernel body launches with: the stream, the device's kernels and the stream's
/// allocator.
pub struct Launch<'a> {
    stream: &'a CudaStream,
    module: &'a DeviceModule,
    allocator: &'a Arc<DeviceAllocator>,
}

impl Launch<'_> {
    /// `bytes` of device memory for this body's launches alone (a sort's keys, say), from the
    /// stream's allocator. Dropping it returns the memory to the stream's cache at once: the
    /// stream runs in order, so whatever reuses it runs after these launches.
    ///
    /// # Errors
    ///
    /// `OutOfMemory` naming the size when the device's memory runs out.
    pub fn scratch(&self, bytes: usize) -> Result<Allocation, CudaError> {
        self.allocator
            .allocate(bytes.max(1))
            .map_err(|e| CudaError::OutOfMemory {
                requested: bytes,
                in_use: e.in_use,
                cached: e.cached,
            })
    }

    /// The raw stream.
    pub fn stream(&self) -> sys::CUstream {
        self.stream.raw()
    }

    /// The device the stream belongs to (its context is bound to this thread).
    pub fn device(&self) -> &CudaDevice {
        self.stream.cuda_device()
    }

    /// Launches `f` (a function of a module of this device other than the crate's kernels:
    /// a merged elementwise kernel) on `grid` blocks of `block` threads.
    ///
    /// # Errors
    ///
    /// The driver's message.
    ///
    /// # Safety
    ///
    /// `params` must point to values of `f`'s parameter types, in order, alive for the call,
    /// and the device addresses in them must be memory the launching instruction may use.
    pub unsafe fn launch_function(
        &self,
        f: &CudaFunction,
        grid: u32,
        block: u32,
        params: &mut [*mut c_void],
    ) -> Result<(), CudaError> {
        // SAFETY: forwarded to the caller.
        unsafe {
            result::launch_kernel(
                f.cu_function(),
                (grid.max(1), 1, 1),
                (block, 1, 1),
                0,
                self.stream.raw(),
                params,
            )
        }
        .map_err(|e| CudaError::driver("launching a merged kernel", e))
    }

    /// Launches kernel `name` over `n` elements (a grid-stride loop) with `params`, each a
    /// pointer to one argument in the kernel's order.
    ///
    /// # Errors
    ///
    /// The driver's error (a launch failure, or an earlier fault); `NoKernel` for an unknown
    /// kernel.
    ///
    /// # Safety
    ///
    /// As [`grid`](Self::grid).
    pub unsafe fn elementwise(
        &self,
        name: &str,
        n: usize,
        params: &mut [*mut c_void],
    ) -> Result<(), CudaError> {
        if n == 0 {
            return Ok(());
        }
        let block = 256u32;
        let grid = n.div_ceil(block as usize).min(65_535 * 8) as u32;
        // SAFETY: forwarded to the caller.
        unsafe { self.grid(name, grid, block, 0, params) }
    }

    /// Launches kernel `name` on `grid` blocks of `block` threads with `shared` bytes of shared
    /// memory.
    ///
    /// # Errors
    ///
    /// As [`elementwise`](Self::elementwise).
    ///
    /// # Safety
    ///
    /// `params` must hold one pointer for each parameter of kernel `name` (its signature in
    /// `kernels/`), in order, each to a value of that parameter's type, alive for the call;
    /// the device addresses in them must be memory the launching instruction may use as the
    /// kernel does (its operands, or scratch it holds), large enough for what the kernel
    /// reads and writes given the other arguments.
    pub unsafe fn grid(
        &self,
        name: &str,
        grid: u32,
        block: u32,
        shared: u32,
        params: &mut [*mut c_void],
    ) -> Result<(), CudaError> {
        let f = self
            .module
            .functions
            .get(name)
            .ok_or_else(|| CudaError::NoKernel(name.into()))?;
        // SAFETY: `f` is a live function of this device's module; the parameters are as this
        // function's contract requires of its caller; the stream is in order, so the memory
        // they name stays the instruction's until the kernel has run.
        unsafe {
            result::launch_kernel(
                f.cu_function(),
                (grid.max(1), 1, 1),
                (block, 1, 1),
                shared,
                self.stream.raw(),
                params,
            )
        }
        .map_err(|e| CudaError::driver(format!("launching {name}"), e))
    }

    /// Copies `src` from host memory to device address `dst`, in stream order (through pinned
    /// staging when it is large; see `CudaStream::copy_from_host`).
    ///
    /// # Errors
    ///
    /// The driver's message.
    ///
    /// # Safety
    ///
    /// `dst` must be an output of the launching instruction with at least `src.len()` bytes.
    pub unsafe fn copy_from_host(&self, dst: u64, src: &[u8]) -> Result<(), CudaError> {
        // SAFETY: forwarded; the engine gives the instruction exclusive use of its outputs,
        // in stream order.
        unsafe { self.stream.copy_from_host(dst, src) }
    }

    /// Runs `f` with the device's cuBLAS handle, bound to this stream.
    ///
    /// # Errors
    ///
    /// cuBLAS's message if the handle cannot be made.
    pub fn blas<R>(
        &self,
        f: impl FnOnce(cudarc::cublas::sys::cublasHandle_t) -> Result<R, CudaError>,
    ) -> Result<R, CudaError> {
        let mut slot = self.module.blas.lock();
        if slot.is_none() {
            let h = cudarc::cublas::result::create_handle().map_err(|e| CudaError::Blas {
                what: "making a handle".into(),
                status: format!("{e:?}"),
            })?;
            *slot = Some(BlasHandle(h));
        }
        let h = slot.as_ref().expect("just made").0;
        // SAFETY: both handles are live; the stream belongs to the bound context.
        unsafe { cudarc::cublas::result::set_stream(h, self.stream.raw() as _) }.map_err(|e| {
            CudaError::Blas {
                what: "binding the stream".into(),
                status: format!("{e:?}"),
            }
        })?;
        f(h)
    }
}

/// The device address of a blob's memory (plus `elems` elements of `T`).
pub fn dptr<T>(b: &Blob, elems: usize) -> u64 {
    b.as_ptr() as u64 + (elems * std::mem::size_of::<T>()) as u64
}

/// An operand's layout as the device kernels take it (`kernels/prelude.cu`'s `Lay`): a rank, an
/// offset, and up to [`MAX_DIMS`] dims and strides, in elements.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct DevLay {
    rank: i32,
    pad: i32,
    off: i64,
    dims: [i64; MAX_DIMS],
    strides: [i64; MAX_DIMS],
}

impl DevLay {
    /// `l` as a device layout, or `None` past [`MAX_DIMS`] dims.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::{cuda::DevLay, Layout};
    /// assert!(DevLay::of(&Layout::contiguous([2, 3])).is_some());
    /// assert!(DevLay::of(&Layout::contiguous([1; 9])).is_none());
    /// ```
    pub fn of(l: &Layout) -> Option<DevLay> {
        let r = l.shape.rank();
        if r > MAX_DIMS {
            return None;
        }
        let mut d = DevLay {
            rank: r as i32,
            off: l.offset as i64,
            ..Default::default()
        };
        for k in 0..r {
            d.dims[k] = l.shape.dims()[k] as i64;
            d.strides[k] = l.strides[k] as i64;
        }
        Some(d)
    }

    /// `n` elements from `offset` with stride `stride` (1: dense, 0: one value repeated).
    pub fn flat(offset: usize, n: usize, stride: i64) -> DevLay {
        let mut d = DevLay {
            rank: 1,
            off: offset as i64,
            ..Default::default()
        };
        d.dims[0] = n.max(1) as i64;
        d.strides[0] = stride;
        d
    }
}

/// A device kernel: a name and a body that launches on the stream it is given.
pub struct CudaKernel<F> {
    name: &'static str,
    f: F,
}

impl<F> CudaKernel<F>
where
    F: FnMut(&Launch<'_>, &[Counted<Blob>], &[Counted<Blob>]) -> Result<(), CudaError>
        + Send
        + 'static,
{
    /// A kernel named `name` running `f(launch, inputs, outputs)` on a CUDA stream.
    pub fn new(name: &'static str, f: F) -> Self {
        CudaKernel { name, f }
    }
}

impl<F> Kernel for CudaKernel<F>
where
    F: FnMut(&Launch<'_>, &[Counted<Blob>], &[Counted<Blob>]) -> Result<(), CudaError>
        + Send
        + 'static,
{
    fn name(&self) -> &str {
        self.name
    }

    fn compute(
        &mut self,
        inputs: &[Counted<Blob>],
        outputs: &[Counted<Blob>],
        ctx: &mut ComputeCtx<'_>,
    ) -> eddy_vm::Result<()> {
        let f = &mut self.f;
        with_launch(self.name, ctx, |l| f(l, inputs, outputs))
    }
}

/// Runs a device kernel's body `f` on the CUDA stream of `ctx`, as kernel `name`: binds the
/// device's context, refuses to launch on a faulted device, notes the launch for fault
/// reports, and tells a fault (this launch's or an earlier one's) from `f`'s own errors.
///
/// # Errors
///
/// `KernelFailed` naming `name` (not a CUDA stream, `f`'s error), `OutOfMemory` where `f`
/// ran out of device memory, or the device's fault: `f`'s [`CudaError`] is turned into the
/// engine's error here, once.
pub fn with_launch(
    name: &'static str,
    ctx: &mut ComputeCtx<'_>,
    f: impl FnOnce(&Launch<'_>) -> Result<(), CudaError>,
) -> eddy_vm::Result<()> {
    with_launch_as(name, name, ctx, f)
}

/// [`with_launch`], its launches named `label` on the device's lane of the trace (a merged
/// kernel's name, which is not `'static`).
///
/// # Errors
///
/// As [`with_launch`].
pub fn with_launch_as(
    name: &'static str,
    label: &str,
    ctx: &mut ComputeCtx<'_>,
    f: impl FnOnce(&Launch<'_>) -> Result<(), CudaError>,
) -> eddy_vm::Result<()> {
    let err = |m: String| eddy_vm::Error::kernel(name, m);
    let stream = ctx
        .stream()
        .as_any()
        .downcast_ref::<CudaStream>()
        .ok_or_else(|| {
            err(format!(
                "runs only on a CUDA stream, not {}",
                ctx.stream().name()
            ))
        })?;
    let device = stream.cuda_device();
    // A faulted context runs nothing more: every later launch reports the first fault.
    if let Some(e) = device.fault(name) {
        return Err(e);
    }
    if let Err(e) = device.bind() {
        return Err(device.check_fault(name).unwrap_or(e));
    }
    let module = module_for(device).map_err(|e| e.into_error(name))?;
    let launch = Launch {
        stream,
        module: &module,
        allocator: ctx.allocator(),
    };
    device.note_launch(ctx.instr_id(), name);
    let launched = if stream.tracing() {
        stream.timed(ctx.instr_id(), label, || f(&launch))
    } else {
        f(&launch)
    };
    let r = launched.and_then(|()| {
        if launch_blocking() {
            stream.synchronize()
        } else {
            Ok(())
        }
    });
    match r {
        Ok(()) => Ok(()),
        // A launch also reports faults of earlier work: tell those from this call's own
        // errors.
        Err(e) => Err(device
            .check_fault(name)
            .unwrap_or_else(|| e.into_error(name))),
    }
}

#[cfg(test)]
mod tests {
    /// Every kernel of the source compiles for the H100/H200 architecture. NVRTC needs no GPU:
    /// CI installs its library, so a typo in a kernel fails there; without it the test says it
    /// skips.
    #[test]
    fn the_kernels_compile_for_hopper() {
        match super::compile("sm_90") {
            Ok(ptx) => {
                let src = ptx.to_src();
                for name in super::kernel_names() {
                    assert!(
                        src.contains(&format!(".entry {name}(")),
                        "{name} missing from the PTX"
                    );
                }
                assert!(super::kernel_names().count() >= 20);
                // The f32 kernels compute in f32: a math overload that fell back to double
                // would be slower and round differently from the CPU. (`sinf`, `cosf` and
                // `tanf` reduce huge arguments with three f64 instructions each.)
                for name in ["unary_f32", "binary_f32", "binary_inplace_f32"] {
                    let body = src.split(&format!(".entry {name}(")).nth(1).unwrap_or("");
                    let body = body.split(".entry ").next().unwrap_or("");
                    let f64_ops = body
                        .lines()
                        .filter(|l| l.contains(".f64") && !l.contains(".reg"))
                        .count();
                    assert!(
                        f64_ops <= 9,
                        "{name} computes in f64 ({f64_ops} instructions)"
                    );
                }
            }
            Err(e @ super::CudaError::NoCompiler) => eprintln!("SKIPPED: {e}"),
            Err(e) => panic!("{e}"),
        }
    }
}
