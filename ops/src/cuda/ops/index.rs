//! Index kernels: `index_select`, `gather`, `index_add`, `scatter_add`.

use super::{arg, dev_layout};
use crate::cuda::launch::{CudaKernel, DevLay, Launch, dptr};
use crate::kinds::IndexDims;
use crate::{DType, Layout};
use eddy_vm::instruction::Kernel;
use eddy_vm::{Blob, Counted};

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
