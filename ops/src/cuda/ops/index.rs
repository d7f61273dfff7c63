//! Index kernels: `index_select`, `gather`, `index_add`, `scatter_add`.

use super::{arg, dev_layout};
use crate::cuda::launch::{CudaKernel, DevLay, Launch, dptr};
use crate::kinds::IndexDims;
use crate::{DType, Layout};
use eddy_vm::instruction::Kernel;
use eddy_vm::{Blob, Counted};

/// The kernel family's suffix for values of `dtype`: what gathers copy (any dtype the device
/// holds), by element size where the bits are all a copy needs (`u8` for `u8` and `bool`);
/// `f16` and `bf16` copy their bits too, and write their own NaN for an index out of range.
fn copy_suffix(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::I64 => "i64",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::U8 | DType::Bool => "u8",
        DType::I32 => return None,
    })
}

/// `index_select` of values of any dtype the device holds, by i64 indices.
pub fn index_select(d: IndexDims) -> Option<impl Kernel + use<>> {
    let name: &'static str = match copy_suffix(d.dtype)? {
        "f32" => "index_select_f32",
        "f64" => "index_select_f64",
        "i64" => "index_select_i64",
        "f16" => "index_select_f16",
        "bf16" => "index_select_bf16",
        _ => "index_select_u8",
    };
    (d.idx_dtype == DType::I64).then(|| {
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
                    name,
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

/// `gather` of values of any dtype the device holds, by i64 indices.
pub fn gather(
    op: &'static str,
    dtype: DType,
    idx_dtype: DType,
    ls: Layout,
    stride_dim: usize,
    size: usize,
    idx_offset: usize,
) -> Option<impl Kernel + use<>> {
    let name: &'static str = match copy_suffix(dtype)? {
        "f32" => "gather_f32",
        "f64" => "gather_f64",
        "i64" => "gather_i64",
        "f16" => "gather_f16",
        "bf16" => "gather_bf16",
        _ => "gather_u8",
    };
    (idx_dtype == DType::I64).then(|| {
        CudaKernel::new(
            op,
            move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
                let n = ls.numel();
                let (mut s, mut dl) = (dptr::<f32>(&ins[0], 0), dev_layout(&ls)?);
                let (mut sd, mut size) = (stride_dim as i64, size as i64);
                let (mut idx, mut ioff) = (dptr::<i64>(&ins[1], 0), idx_offset as i64);
                let (mut y, mut n64, mut bad) = (dptr::<f32>(&outs[0], 0), n as i64, 0u64);
                l.elementwise(
                    name,
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
/// Zeroes the first `n` elements of `out` (f32, or f64 with `f64`) on the stream.
fn zero(l: &Launch<'_>, out: &Blob, n: usize, f64: bool) -> Result<(), String> {
    let mut y = dptr::<u8>(out, 0);
    let mut dl = DevLay::flat(0, n, 1);
    let (mut v32, mut v64, mut n64) = (0.0f32, 0.0f64, n as i64);
    let (name, v) = if f64 {
        ("fill_f64", arg(&mut v64))
    } else {
        ("fill_f32", arg(&mut v32))
    };
    l.elementwise(name, n, &mut [arg(&mut y), arg(&mut dl), v, arg(&mut n64)])
}

/// Whether values of `dtype` are added up on the device (f32, f64): `Some(is f64)`.
fn adds(dtype: DType) -> Option<bool> {
    match dtype {
        DType::F32 => Some(false),
        DType::F64 => Some(true),
        _ => None,
    }
}

/// `out = 0; out[o, idx[j], q] += src[o, j, q]`, f32 or f64 values, i64 indices.
pub fn index_add(d: IndexDims) -> Option<impl Kernel + use<>> {
    let f64 = adds(d.dtype)?;
    let name = if f64 {
        "index_add_f64"
    } else {
        "index_add_f32"
    };
    (d.idx_dtype == DType::I64).then(|| {
        CudaKernel::new(
            "index_add",
            move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
                zero(l, &outs[0], d.outer * d.size * d.inner, f64)?;
                let (mut s, mut off) = (dptr::<f32>(&ins[0], 0), d.offset as i64);
                let (mut idx, mut ioff) = (dptr::<i64>(&ins[1], 0), d.idx_offset as i64);
                let mut y = dptr::<f32>(&outs[0], 0);
                let (mut outer, mut size, mut inner, mut nidx) =
                    (d.outer as i64, d.size as i64, d.inner as i64, d.nidx as i64);
                l.elementwise(
                    name,
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

/// `out = 0; out[pos(i) with dim replaced by idx[i]] += src[i]`, f32 or f64 values, i64
/// indices.
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
    let f64 = adds(dtype)?;
    let name = if f64 {
        "scatter_add_f64"
    } else {
        "scatter_add_f32"
    };
    (idx_dtype == DType::I64).then(|| {
        CudaKernel::new(
            "scatter_add",
            move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
                zero(l, &outs[0], out_numel, f64)?;
                let n = lo.numel();
                let (mut s, mut off, mut dl) =
                    (dptr::<f32>(&ins[0], 0), offset as i64, dev_layout(&lo)?);
                let (mut sd, mut size) = (stride_dim as i64, size as i64);
                let (mut idx, mut ioff) = (dptr::<i64>(&ins[1], 0), idx_offset as i64);
                let (mut y, mut n64) = (dptr::<f32>(&outs[0], 0), n as i64);
                l.elementwise(
                    name,
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
