//! The CUDA kernels of each op family, as the op layer asks for them.

use super::launch::{CudaKernel, DevLay, Launch, dptr};
use crate::elementwise::{BinaryOp, CmpOp, UnaryOp};
use crate::index::IndexDims;
use crate::random::{Distribution, mantissa_digits, random_value};
use crate::reduce::ReduceOp;
use crate::{DType, Elem, FnKernel, Lay, Layout};
use cudarc::cublas::sys::cublasOperation_t;
use cudarc::driver::result;
use eddy_vm::instruction::Kernel;
use eddy_vm::stream::cuda::CudaDevice;
use eddy_vm::{Blob, Counted};
use std::ffi::c_void;

/// A pointer to one kernel argument.
fn arg<T>(x: &mut T) -> *mut c_void {
    (x as *mut T).cast()
}

/// `la` over an output of `n` elements.
fn dev_lay(la: &Lay, n: usize) -> Result<DevLay, String> {
    match la {
        Lay::Dense(off) => Ok(DevLay::flat(*off, n, 1)),
        Lay::Splat(off) => Ok(DevLay::flat(*off, n, 0)),
        Lay::Strided(l) => DevLay::of(l).ok_or_else(|| "more than 8 dims".to_string()),
    }
}

fn dev_layout(l: &Layout) -> Result<DevLay, String> {
    DevLay::of(l).ok_or_else(|| "more than 8 dims".to_string())
}

/// The kernel's code for a unary op and its two scalars (`kernels.cu`'s `unary_op`).
fn unary_code(op: UnaryOp) -> Option<(i32, f32, f32)> {
    use UnaryOp::*;
    Some(match op {
        Neg => (0, 0.0, 0.0),
        Abs => (1, 0.0, 0.0),
        Exp => (2, 0.0, 0.0),
        Log => (3, 0.0, 0.0),
        Sqrt => (4, 0.0, 0.0),
        Rsqrt => (5, 0.0, 0.0),
        Sin => (6, 0.0, 0.0),
        Cos => (7, 0.0, 0.0),
        Tanh => (8, 0.0, 0.0),
        Sigmoid => (9, 0.0, 0.0),
        Relu => (10, 0.0, 0.0),
        Gelu => (11, 0.0, 0.0),
        Silu => (12, 0.0, 0.0),
        Recip => (13, 0.0, 0.0),
        Square => (14, 0.0, 0.0),
        Sign => (15, 0.0, 0.0),
        GeluGrad => (16, 0.0, 0.0),
        SiluGrad => (17, 0.0, 0.0),
        AddScalar(c) => (18, c as f32, 0.0),
        MulScalar(c) => (19, c as f32, 0.0),
        DivScalar(c) => (20, c as f32, 0.0),
        RSubScalar(c) => (21, c as f32, 0.0),
        RDivScalar(c) => (22, c as f32, 0.0),
        PowScalar(c) => (23, c as f32, 0.0),
        RPowScalar(c) => (24, c as f32, 0.0),
        Clamp(lo, hi) => (25, lo as f32, hi as f32),
        Floor => (26, 0.0, 0.0),
        Ceil => (27, 0.0, 0.0),
        Round => (28, 0.0, 0.0),
        Trunc => (29, 0.0, 0.0),
        Log1p => (30, 0.0, 0.0),
        Expm1 => (31, 0.0, 0.0),
        Log2 => (32, 0.0, 0.0),
        Log10 => (33, 0.0, 0.0),
        Tan => (34, 0.0, 0.0),
        Atan => (35, 0.0, 0.0),
        Erf => (36, 0.0, 0.0),
        LeakyRelu(s) => (37, s as f32, 0.0),
        Elu(a) => (38, a as f32, 0.0),
        Softplus(b, t) => (39, b as f32, t as f32),
    })
}

fn binary_code(op: BinaryOp) -> i32 {
    match op {
        BinaryOp::Add => 0,
        BinaryOp::Sub => 1,
        BinaryOp::Mul => 2,
        BinaryOp::Div => 3,
        BinaryOp::Pow => 4,
        BinaryOp::Maximum => 5,
        BinaryOp::Minimum => 6,
        BinaryOp::ReluBackward => 7,
    }
}

fn numel(b: &Blob, elem: usize) -> usize {
    b.bytes() / elem
}

/// `out = op(x)`, f32.
pub fn unary(op: UnaryOp, dtype: DType, la: Lay) -> Option<impl Kernel + use<>> {
    let (code, c, d) = unary_code(op)?;
    (dtype == DType::F32).then(|| {
        CudaKernel::new(
            op.name(),
            move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
                let n = numel(&outs[0], 4);
                let (mut code, mut c, mut d) = (code, c, d);
                let mut lx = dev_lay(&la, n)?;
                let (mut x, mut y, mut n64) =
                    (dptr::<f32>(&ins[0], 0), dptr::<f32>(&outs[0], 0), n as i64);
                l.elementwise(
                    "unary_f32",
                    n,
                    &mut [
                        arg(&mut code),
                        arg(&mut c),
                        arg(&mut d),
                        arg(&mut x),
                        arg(&mut lx),
                        arg(&mut y),
                        arg(&mut n64),
                    ],
                )
            },
        )
    })
}

/// `out = a op b`, f32.
pub fn binary(op: BinaryOp, dtype: DType, la: Lay, lb: Lay) -> Option<impl Kernel + use<>> {
    (dtype == DType::F32).then(|| {
        CudaKernel::new(
            op.name(),
            move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
                let n = numel(&outs[0], 4);
                let mut code = binary_code(op);
                let (mut a, mut b) = (dptr::<f32>(&ins[0], 0), dptr::<f32>(&ins[1], 0));
                let (mut da, mut db) = (dev_lay(&la, n)?, dev_lay(&lb, n)?);
                let (mut y, mut n64) = (dptr::<f32>(&outs[0], 0), n as i64);
                l.elementwise(
                    "binary_f32",
                    n,
                    &mut [
                        arg(&mut code),
                        arg(&mut a),
                        arg(&mut da),
                        arg(&mut b),
                        arg(&mut db),
                        arg(&mut y),
                        arg(&mut n64),
                    ],
                )
            },
        )
    })
}

/// `out op= alpha * x` in place, f32.
pub fn binary_inplace(
    op: BinaryOp,
    dtype: DType,
    lo: Layout,
    lx: Layout,
    alpha: f64,
) -> Option<impl Kernel + use<>> {
    (dtype == DType::F32).then(|| {
        CudaKernel::new(
            op.name(),
            move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
                let n = lo.numel();
                let mut code = binary_code(op);
                let (mut o, mut x) = (dptr::<f32>(&outs[0], 0), dptr::<f32>(&ins[0], 0));
                let (mut dlo, mut dlx) = (dev_layout(&lo)?, dev_layout(&lx)?);
                let (mut alpha, mut n64) = (alpha as f32, n as i64);
                l.elementwise(
                    "binary_inplace_f32",
                    n,
                    &mut [
                        arg(&mut code),
                        arg(&mut o),
                        arg(&mut dlo),
                        arg(&mut x),
                        arg(&mut dlx),
                        arg(&mut alpha),
                        arg(&mut n64),
                    ],
                )
            },
        )
    })
}

/// `out = a cmp b` as bool, f32 or i64 operands.
pub fn compare(op: CmpOp, dtype: DType, la: Lay, lb: Lay) -> Option<impl Kernel + use<>> {
    let name = match dtype {
        DType::F32 => "compare_f32",
        DType::I64 => "compare_i64",
        _ => return None,
    };
    let code = op as i32;
    Some(CudaKernel::new(
        op.name(),
        move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let n = numel(&outs[0], 1);
            let mut code = code;
            let (mut a, mut b) = (dptr::<u8>(&ins[0], 0), dptr::<u8>(&ins[1], 0));
            let (mut da, mut db) = (dev_lay(&la, n)?, dev_lay(&lb, n)?);
            let (mut y, mut n64) = (dptr::<u8>(&outs[0], 0), n as i64);
            l.elementwise(
                name,
                n,
                &mut [
                    arg(&mut code),
                    arg(&mut a),
                    arg(&mut da),
                    arg(&mut b),
                    arg(&mut db),
                    arg(&mut y),
                    arg(&mut n64),
                ],
            )
        },
    ))
}

/// `out = cond ? a : b`, f32.
pub fn where_(dtype: DType, lc: Layout, la: Layout, lb: Layout) -> Option<impl Kernel + use<>> {
    (dtype == DType::F32).then(|| {
        CudaKernel::new(
            "where",
            move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
                let n = numel(&outs[0], 4);
                let (mut c, mut a, mut b) = (
                    dptr::<u8>(&ins[0], 0),
                    dptr::<f32>(&ins[1], 0),
                    dptr::<f32>(&ins[2], 0),
                );
                let (mut dc, mut da, mut db) =
                    (dev_layout(&lc)?, dev_layout(&la)?, dev_layout(&lb)?);
                let (mut y, mut n64) = (dptr::<f32>(&outs[0], 0), n as i64);
                l.elementwise(
                    "where_f32",
                    n,
                    &mut [
                        arg(&mut c),
                        arg(&mut dc),
                        arg(&mut a),
                        arg(&mut da),
                        arg(&mut b),
                        arg(&mut db),
                        arg(&mut y),
                        arg(&mut n64),
                    ],
                )
            },
        )
    })
}

/// Element i of `src` to element i of `dst` on the device: same dtype (f32, i64, bool, u8),
/// or bool / i64 to f32.
pub fn copy(
    src: Layout,
    src_dtype: DType,
    dst: Layout,
    dst_dtype: DType,
) -> Option<impl Kernel + use<>> {
    use DType::*;
    let name = match (src_dtype, dst_dtype) {
        (F32, F32) => "copy_f32",
        (I64, I64) => "copy_i64",
        (Bool, Bool) | (U8, U8) => "copy_u8",
        (Bool, F32) => "cast_u8_f32",
        (I64, F32) => "cast_i64_f32",
        _ => return None,
    };
    Some(CudaKernel::new(
        "copy",
        move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let n = src.numel();
            let (mut x, mut y) = (dptr::<u8>(&ins[0], 0), dptr::<u8>(&outs[0], 0));
            let (mut dx, mut dy) = (dev_layout(&src)?, dev_layout(&dst)?);
            let mut n64 = n as i64;
            l.elementwise(
                name,
                n,
                &mut [
                    arg(&mut x),
                    arg(&mut dx),
                    arg(&mut y),
                    arg(&mut dy),
                    arg(&mut n64),
                ],
            )
        },
    ))
}

/// Fills the elements of output 0 that `layout` covers with `value` (f32, i64, bool, u8).
pub fn fill(dtype: DType, layout: Layout, value: f64) -> Option<impl Kernel + use<>> {
    let name = match dtype {
        DType::F32 => "fill_f32",
        DType::I64 => "fill_i64",
        DType::Bool | DType::U8 => "fill_u8",
        _ => return None,
    };
    Some(CudaKernel::new(
        "fill",
        move |l: &Launch<'_>, _: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let n = layout.numel();
            let mut y = dptr::<u8>(&outs[0], 0);
            let mut dl = dev_layout(&layout)?;
            let mut n64 = n as i64;
            let (mut vf, mut vi, mut vb) = (value as f32, value as i64, (value != 0.0) as u8);
            let v = match dtype {
                DType::F32 => arg(&mut vf),
                DType::I64 => arg(&mut vi),
                _ => arg(&mut vb),
            };
            l.elementwise(name, n, &mut [arg(&mut y), arg(&mut dl), v, arg(&mut n64)])
        },
    ))
}

/// Copies `bytes` (the storage of a contiguous tensor) into output `out`, on the stream.
fn upload_bytes(l: &Launch<'_>, out: &Blob, bytes: &[u8]) -> Result<(), String> {
    if bytes.is_empty() {
        return Ok(());
    }
    // SAFETY: the destination is `out`'s device memory, at least `bytes.len()` long (the
    // tensor's size); the host source is pageable, so the driver stages it before returning
    // and `bytes` may go when this returns.
    unsafe { result::memcpy_htod_async(dptr::<u8>(out, 0), bytes, l.stream()) }
        .map_err(|e| format!("host to device copy: {e}"))
}

/// Host values to device memory: output 0 gets `bytes`, copied on the stream.
fn upload(name: &'static str, bytes: Vec<u8>) -> impl Kernel {
    CudaKernel::new(
        name,
        move |l: &Launch<'_>, _: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            upload_bytes(l, &outs[0], &bytes)
        },
    )
}

/// The storage bytes of host values.
fn storage_bytes<T: Elem>(data: &[T]) -> Vec<u8> {
    if T::DTYPE == DType::Bool {
        return data.iter().map(|v| (v.to_f64() != 0.0) as u8).collect();
    }
    // SAFETY: `T` is a plain element type; its bytes are read as they are stored.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
        .to_vec()
}

/// `data` into a contiguous output 0 on the device.
pub fn from_host<T: Elem>(data: Vec<T>) -> impl Kernel {
    upload("from_vec", storage_bytes(&data))
}

/// Values `f(i)` computed on the host, in `dtype`, uploaded.
fn host_values(dtype: DType, n: usize, f: impl Fn(usize) -> f64) -> Vec<u8> {
    crate::dispatch!(dtype, T => {
        let v: Vec<T> = (0..n).map(|i| T::from_f64(f(i))).collect();
        storage_bytes(&v)
    })
}

/// `f(i)` into element i of output 0 (arange, linspace, eye, a dropout mask): computed on the
/// host, exactly as on a CPU device, and uploaded.
pub fn generate(
    name: &'static str,
    dtype: DType,
    f: impl Fn(usize) -> f64 + Send + Sync + 'static,
) -> impl Kernel {
    CudaKernel::new(
        name,
        move |l: &Launch<'_>, _: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let n = numel(&outs[0], dtype.size_in_bytes().max(1));
            upload_bytes(l, &outs[0], &host_values(dtype, n, &f))
        },
    )
}

/// Random values of `dist`: the same counter-based values as on a CPU device, uploaded.
pub fn random(dtype: DType, dist: Distribution, seed: u64, offset: u64) -> impl Kernel {
    let digits = mantissa_digits(dtype);
    generate("rand", dtype, move |i| {
        random_value(dist, seed, offset, i, digits)
    })
}

/// A contiguous device tensor (input 0, `src` a contiguous layout) to host memory (output 0,
/// contiguous), as a CPU kernel: the engine runs it after the device's writes of the source
/// have completed (the event a host consumer waits for), on the destination's CPU stream.
pub fn download(ordinal: u32, dtype: DType, src: Layout) -> impl Kernel {
    FnKernel::new(
        "to_device",
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let device =
                CudaDevice::opened(ordinal).ok_or_else(|| format!("cuda:{ordinal} is not open"))?;
            device.bind().map_err(|e| e.to_string())?;
            let size = dtype.size_in_bytes();
            let bytes = src.numel() * size;
            if bytes == 0 {
                return Ok(());
            }
            // SAFETY: output 0 is this instruction's fresh host blob of `bytes`; the engine gives
            // the kernel exclusive access to it.
            let out = unsafe { outs[0].bytes_mut() };
            // SAFETY: the source range is inside input 0's device memory (its layout is contiguous
            // from `offset`); the engine ordered this copy after the device finished writing it.
            unsafe {
                result::memcpy_dtoh_sync(&mut out[..bytes], dptr::<u8>(&ins[0], src.offset * size))
            }
            .map_err(|e| format!("device to host copy: {e}"))
        },
    )
}

/// A contiguous host tensor (input 0 from `offset` elements) to device memory (output 0), on
/// the device's stream.
pub fn upload_tensor(dtype: DType, src: Layout) -> impl Kernel {
    CudaKernel::new(
        "to_device",
        move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let size = dtype.size_in_bytes();
            let bytes = src.numel() * size;
            if bytes == 0 {
                return Ok(());
            }
            // SAFETY: input 0 is a host blob the engine keeps readable during this instruction,
            // holding at least `offset + numel` elements.
            let host = unsafe { ins[0].bytes_ref() };
            let from = src.offset * size;
            // SAFETY: output 0's device memory holds `bytes`; the host range is pageable, so the
            // driver has copied it out before this returns.
            unsafe {
                result::memcpy_htod_async(
                    dptr::<u8>(&outs[0], 0),
                    &host[from..from + bytes],
                    l.stream(),
                )
            }
            .map_err(|e| format!("host to device copy: {e}"))
        },
    )
}

/// Reductions of runs of `r` elements of `la` (the reduced dims permuted last), f32.
pub fn reduce(op: ReduceOp, dtype: DType, la: Layout, r: usize) -> Option<impl Kernel + use<>> {
    if dtype != DType::F32 {
        return None;
    }
    let (name, code) = match op {
        ReduceOp::Sum => ("reduce_f32", 0),
        ReduceOp::Mean => ("reduce_f32", 1),
        ReduceOp::Prod => ("reduce_f32", 2),
        ReduceOp::Max => ("reduce_f32", 3),
        ReduceOp::Min => ("reduce_f32", 4),
        ReduceOp::ArgMax => ("argreduce_f32", 0),
        ReduceOp::ArgMin => ("argreduce_f32", 1),
    };
    Some(reduce_kernel(op.name(), name, code, la, r))
}

fn reduce_kernel(
    op: &'static str,
    name: &'static str,
    code: i32,
    la: Layout,
    r: usize,
) -> impl Kernel {
    CudaKernel::new(
        op,
        move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let nout = la.numel().checked_div(r).unwrap_or(0);
            if nout == 0 {
                return Ok(());
            }
            let mut code = code;
            let mut x = dptr::<f32>(&ins[0], 0);
            let mut dl = dev_layout(&la)?;
            let (mut y, mut nout64, mut r64) = (dptr::<u8>(&outs[0], 0), nout as i64, r as i64);
            let params = &mut [
                arg(&mut code),
                arg(&mut x),
                arg(&mut dl),
                arg(&mut y),
                arg(&mut nout64),
                arg(&mut r64),
            ];
            if name == "reduce_f32" {
                // One warp per output.
                let block = 256u32;
                let grid = (nout * 32).div_ceil(block as usize) as u32;
                l.grid(name, grid, block, 0, params)
            } else {
                l.elementwise(name, nout, params)
            }
        },
    )
}

/// Sums the leading `rows` rows of a dense `[rows, cols]` f32 input from `offset`.
pub fn sum_leading(
    dtype: DType,
    offset: usize,
    rows: usize,
    cols: usize,
) -> Option<impl Kernel + use<>> {
    if dtype != DType::F32 {
        return None;
    }
    // Output j sums elements j, j + cols, …: the layout [cols, rows] with strides [1, cols].
    let mut l = Layout::contiguous([cols, rows]);
    l.strides = [1, cols].into_iter().collect();
    l.offset = offset;
    Some(reduce_kernel("sum", "reduce_f32", 0, l, rows))
}

/// Softmax or log-softmax over the last dim of a dense `[rows, cols]` f32 input.
pub fn softmax(
    dtype: DType,
    offset: usize,
    rows: usize,
    cols: usize,
    log: bool,
) -> Option<impl Kernel + use<>> {
    (dtype == DType::F32).then(|| {
        let op = if log { "log_softmax" } else { "softmax" };
        CudaKernel::new(
            op,
            move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
                let (mut x, mut off, mut y) = (
                    dptr::<f32>(&ins[0], 0),
                    offset as i64,
                    dptr::<f32>(&outs[0], 0),
                );
                let (mut rows64, mut cols64, mut lg) = (rows as i64, cols as i64, log as i32);
                let block = 256u32;
                l.grid(
                    "softmax_f32",
                    rows as u32,
                    block,
                    block * 4,
                    &mut [
                        arg(&mut x),
                        arg(&mut off),
                        arg(&mut y),
                        arg(&mut rows64),
                        arg(&mut cols64),
                        arg(&mut lg),
                    ],
                )
            },
        )
    })
}

/// `index_select` of f32 values by i64 indices.
pub fn index_select(d: IndexDims) -> Option<impl Kernel + use<>> {
    (d.dtype == DType::F32 && d.idx_dtype == DType::I64).then(|| {
        CudaKernel::new(
            "index_select",
            move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
                let n = d.outer * d.nidx * d.inner;
                let (mut s, mut off) = (dptr::<f32>(&ins[0], 0), d.offset as i64);
                let (mut idx, mut ioff) = (dptr::<i64>(&ins[1], 0), d.idx_offset as i64);
                let mut y = dptr::<f32>(&outs[0], 0);
                let (mut outer, mut size, mut inner, mut nidx) =
                    (d.outer as i64, d.size as i64, d.inner as i64, d.nidx as i64);
                let mut bad = 0u64;
                l.elementwise(
                    "index_select_f32",
                    n,
                    &mut [
                        arg(&mut s),
                        arg(&mut off),
                        arg(&mut idx),
                        arg(&mut ioff),
                        arg(&mut y),
                        arg(&mut outer),
                        arg(&mut size),
                        arg(&mut inner),
                        arg(&mut nidx),
                        arg(&mut bad),
                    ],
                )
            },
        )
    })
}

/// `gather` of f32 values by i64 indices.
pub fn gather(
    op: &'static str,
    dtype: DType,
    idx_dtype: DType,
    ls: Layout,
    stride_dim: usize,
    size: usize,
    idx_offset: usize,
) -> Option<impl Kernel + use<>> {
    (dtype == DType::F32 && idx_dtype == DType::I64).then(|| {
        CudaKernel::new(
            op,
            move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
                let n = ls.numel();
                let (mut s, mut dl) = (dptr::<f32>(&ins[0], 0), dev_layout(&ls)?);
                let (mut sd, mut size) = (stride_dim as i64, size as i64);
                let (mut idx, mut ioff) = (dptr::<i64>(&ins[1], 0), idx_offset as i64);
                let (mut y, mut n64, mut bad) = (dptr::<f32>(&outs[0], 0), n as i64, 0u64);
                l.elementwise(
                    "gather_f32",
                    n,
                    &mut [
                        arg(&mut s),
                        arg(&mut dl),
                        arg(&mut sd),
                        arg(&mut size),
                        arg(&mut idx),
                        arg(&mut ioff),
                        arg(&mut y),
                        arg(&mut n64),
                        arg(&mut bad),
                    ],
                )
            },
        )
    })
}

/// How cuBLAS reads one `rows × cols` operand stored with `strides` (row, col): as the
/// column-major transpose with leading dimension `ld` (`false`), or as itself (`true`).
fn mat_view(rows: usize, cols: usize, rs: usize, cs: usize) -> Option<(bool, usize)> {
    if cs == 1 || cols == 1 {
        // Row-major: column-major (cols × rows) with ld = rs.
        Some((false, rs.max(cols).max(1)))
    } else if rs == 1 || rows == 1 {
        Some((true, cs.max(rows).max(1)))
    } else {
        None
    }
}

/// One stride over the batch dims of `l` (all but the last two), if they collapse to one.
fn batch_stride(l: &Layout) -> Option<(usize, usize)> {
    let r = l.shape.rank();
    let dims = &l.shape.dims()[..r - 2];
    let strides = &l.strides[..r - 2];
    let count: usize = dims.iter().product();
    let mut stride: Option<usize> = None;
    let mut expect = 0usize;
    for (k, (&d, &s)) in dims.iter().zip(strides).enumerate().rev() {
        if d == 1 {
            continue;
        }
        match stride {
            None => {
                stride = Some(s);
                expect = s * d;
            }
            Some(st) if st == 0 && s == 0 => {}
            Some(_) if s == expect => expect = s * d,
            _ => return None,
        }
        let _ = k;
    }
    Some((count, stride.unwrap_or(0)))
}

/// The product `a @ b` (batched over broadcast batch dims) through cuBLAS, into a contiguous
/// output, optionally followed by a bias (`lc`, broadcast over the output) and a ReLU.
fn gemm(
    name: &'static str,
    la: Layout,
    lb: Layout,
    bias: Option<(Layout, bool)>,
) -> Option<impl Kernel + use<>> {
    let r = la.shape.rank();
    if r < 2 || lb.shape.rank() != r {
        return None;
    }
    let (m, k) = (la.shape.dims()[r - 2], la.shape.dims()[r - 1]);
    let n = lb.shape.dims()[r - 1];
    let (ta, lda) = mat_view(m, k, la.strides[r - 2], la.strides[r - 1])?;
    let (tb, ldb) = mat_view(k, n, lb.strides[r - 2], lb.strides[r - 1])?;
    let (batch, sa) = batch_stride(&la)?;
    let (_, sb) = batch_stride(&lb)?;
    let lim = i32::MAX as usize;
    if [m, n, k, lda, ldb, batch].iter().any(|&v| v > lim) {
        return None;
    }
    Some(CudaKernel::new(
        name,
        move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            if m == 0 || n == 0 || batch == 0 {
                return Ok(());
            }
            let a = dptr::<f32>(&ins[0], la.offset) as *const f32;
            let b = dptr::<f32>(&ins[1], lb.offset) as *const f32;
            let c = dptr::<f32>(&outs[0], 0) as *mut f32;
            let (alpha, beta) = (1.0f32, 0.0f32);
            let op = |t: bool| {
                if t {
                    cublasOperation_t::CUBLAS_OP_T
                } else {
                    cublasOperation_t::CUBLAS_OP_N
                }
            };
            // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: B is cuBLAS's first operand.
            l.blas(|h| {
                // SAFETY: the pointers are the operands' and output's device memory, laid out as the
                // views above describe (checked when the kernel was built); the scalars are host
                // values alive for the call; the handle is bound to this stream.
                unsafe {
                    cudarc::cublas::result::sgemm_strided_batched(
                        h,
                        op(tb),
                        op(ta),
                        n as i32,
                        m as i32,
                        k as i32,
                        &alpha,
                        b,
                        ldb as i32,
                        sb as i64,
                        a,
                        lda as i32,
                        sa as i64,
                        &beta,
                        c,
                        n as i32,
                        (m * n) as i64,
                        batch as i32,
                    )
                }
                .map_err(|e| format!("cuBLAS sgemm: {e:?}"))
            })?;
            if let Some((lc, relu)) = &bias {
                let total = batch * m * n;
                let (mut y, mut bp) = (c as u64, dptr::<f32>(&ins[2], 0));
                let mut dl = dev_layout(lc)?;
                let (mut n64, mut rl) = (total as i64, *relu as i32);
                l.elementwise(
                    "bias_act_f32",
                    total,
                    &mut [
                        arg(&mut y),
                        arg(&mut bp),
                        arg(&mut dl),
                        arg(&mut n64),
                        arg(&mut rl),
                    ],
                )?;
            }
            Ok(())
        },
    ))
}

/// `a @ b`, f32, through cuBLAS.
pub fn matmul(dtype: DType, la: Layout, lb: Layout) -> Option<impl Kernel + use<>> {
    if dtype != DType::F32 {
        return None;
    }
    gemm("matmul", la, lb, None)
}

/// `relu?(a @ b + c)`, f32: the product through cuBLAS, then the bias (and ReLU) in one pass.
pub fn matmul_bias(
    dtype: DType,
    la: Layout,
    lb: Layout,
    lc: Layout,
    relu: bool,
) -> Option<impl Kernel + use<>> {
    if dtype != DType::F32 {
        return None;
    }
    gemm(
        if relu { "linear_relu" } else { "linear" },
        la,
        lb,
        Some((lc, relu)),
    )
}

/// Zeroes the first `n` f32 elements of `out` on the stream.
fn zero_f32(l: &Launch<'_>, out: &Blob, n: usize) -> Result<(), String> {
    let mut y = dptr::<f32>(out, 0);
    let mut dl = DevLay::flat(0, n, 1);
    let (mut v, mut n64) = (0.0f32, n as i64);
    l.elementwise(
        "fill_f32",
        n,
        &mut [arg(&mut y), arg(&mut dl), arg(&mut v), arg(&mut n64)],
    )
}

/// `out = 0; out[o, idx[j], q] += src[o, j, q]`, f32 values, i64 indices.
pub fn index_add(d: IndexDims) -> Option<impl Kernel + use<>> {
    (d.dtype == DType::F32 && d.idx_dtype == DType::I64).then(|| {
        CudaKernel::new(
            "index_add",
            move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
                zero_f32(l, &outs[0], d.outer * d.size * d.inner)?;
                let (mut s, mut off) = (dptr::<f32>(&ins[0], 0), d.offset as i64);
                let (mut idx, mut ioff) = (dptr::<i64>(&ins[1], 0), d.idx_offset as i64);
                let mut y = dptr::<f32>(&outs[0], 0);
                let (mut outer, mut size, mut inner, mut nidx) =
                    (d.outer as i64, d.size as i64, d.inner as i64, d.nidx as i64);
                l.elementwise(
                    "index_add_f32",
                    d.outer * d.nidx * d.inner,
                    &mut [
                        arg(&mut s),
                        arg(&mut off),
                        arg(&mut idx),
                        arg(&mut ioff),
                        arg(&mut y),
                        arg(&mut outer),
                        arg(&mut size),
                        arg(&mut inner),
                        arg(&mut nidx),
                    ],
                )
            },
        )
    })
}

/// `out = 0; out[pos(i) with dim replaced by idx[i]] += src[i]`, f32 values, i64 indices.
#[allow(clippy::too_many_arguments)] // the CPU kernel's parameters, passed through
pub fn scatter_add(
    dtype: DType,
    idx_dtype: DType,
    offset: usize,
    lo: Layout,
    stride_dim: usize,
    size: usize,
    out_numel: usize,
    idx_offset: usize,
) -> Option<impl Kernel + use<>> {
    (dtype == DType::F32 && idx_dtype == DType::I64).then(|| {
        CudaKernel::new(
            "scatter_add",
            move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
                zero_f32(l, &outs[0], out_numel)?;
                let n = lo.numel();
                let (mut s, mut off, mut dl) =
                    (dptr::<f32>(&ins[0], 0), offset as i64, dev_layout(&lo)?);
                let (mut sd, mut size) = (stride_dim as i64, size as i64);
                let (mut idx, mut ioff) = (dptr::<i64>(&ins[1], 0), idx_offset as i64);
                let (mut y, mut n64) = (dptr::<f32>(&outs[0], 0), n as i64);
                l.elementwise(
                    "scatter_add_f32",
                    n,
                    &mut [
                        arg(&mut s),
                        arg(&mut off),
                        arg(&mut dl),
                        arg(&mut sd),
                        arg(&mut size),
                        arg(&mut idx),
                        arg(&mut ioff),
                        arg(&mut y),
                        arg(&mut n64),
                    ],
                )
            },
        )
    })
}
