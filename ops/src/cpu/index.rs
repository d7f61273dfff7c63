//! Indexing kernels: `index_select` and its backward `index_add`, `gather` and its backward
//! `scatter_add`. Indices are read on the stream; one out of range fails the kernel with a
//! message naming it (surfaced at the next sync).

use crate::kernel::{input, output, walk, FnKernel};
use crate::{dispatch, DType, Elem, Layout};
use eddy_vm::Counted;
use eddy_vm::{instruction::Kernel, Blob};

/// Reads the index blob (`i64` or `i32`, contiguous at `offset`, `n` entries) as `i64`s,
/// checking each against `size` (negative indices count from the end, as in PyTorch).
fn indices(
    op: &str,
    b: &Blob,
    dtype: DType,
    offset: usize,
    n: usize,
    size: usize,
) -> Result<Vec<usize>, String> {
    let raw: Vec<i64> = match dtype {
        // SAFETY: the index blob is an input of the calling kernel.
        DType::I64 => (unsafe { input::<i64>(b) })[offset..offset + n].to_vec(),
        // SAFETY: as above.
        DType::I32 => (unsafe { input::<i32>(b) })[offset..offset + n]
            .iter()
            .map(|&v| v as i64)
            .collect(),
        d => return Err(format!("{op}: indices must be i64 or i32, not {d}")),
    };
    raw.into_iter()
        .map(|i| {
            // In i128: a dim may have 2^63 elements or more when another is 0.
            let j = if i < 0 {
                i as i128 + size as i128
            } else {
                i as i128
            };
            if j < 0 || j >= size as i128 {
                Err(format!(
                    "{op}: index {i} out of range for a dim of size {size}"
                ))
            } else {
                Ok(j as usize)
            }
        })
        .collect()
}

/// `out[o, j, q] = src[o, idx[j], q]`: input 0 contiguous `[outer, size, inner]` at `offset`,
/// input 1 the `nidx` indices (contiguous at `idx_offset`), output 0 `[outer, nidx, inner]`.
#[allow(clippy::too_many_arguments)]
pub fn index_select(
    dtype: DType,
    idx_dtype: DType,
    offset: usize,
    idx_offset: usize,
    outer: usize,
    size: usize,
    inner: usize,
    nidx: usize,
) -> impl Kernel {
    FnKernel::new(
        "index_select",
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let idx = indices("index_select", &ins[1], idx_dtype, idx_offset, nidx, size)?;
            dispatch!(dtype, T => {
                // SAFETY: inputs are read, output 0 written; the output is a fresh blob.
                let (a, o) = unsafe { (input::<T>(&ins[0]), output::<T>(&outs[0])) };
                for oo in 0..outer {
                    for (j, &ix) in idx.iter().enumerate() {
                        let s = offset + (oo * size + ix) * inner;
                        let d = (oo * nidx + j) * inner;
                        o[d..d + inner].copy_from_slice(&a[s..s + inner]);
                    }
                }
            });
            Ok(())
        },
    )
}

/// `out = 0; out[o, idx[j], q] += src[o, j, q]`: input 0 contiguous `[outer, nidx, inner]` at
/// `offset`, input 1 the indices, output 0 `[outer, size, inner]`. Any dtype (integers wrap).
#[allow(clippy::too_many_arguments)]
pub fn index_add(
    dtype: DType,
    idx_dtype: DType,
    offset: usize,
    idx_offset: usize,
    outer: usize,
    size: usize,
    inner: usize,
    nidx: usize,
) -> impl Kernel {
    FnKernel::new(
        "index_add",
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let idx = indices("index_add", &ins[1], idx_dtype, idx_offset, nidx, size)?;
            dispatch!(dtype, T => {
                // SAFETY: inputs are read, output 0 written; the output is a fresh blob.
                let (a, o) = unsafe { (input::<T>(&ins[0]), output::<T>(&outs[0])) };
                let o = &mut o[..outer * size * inner];
                o.fill(T::ZERO);
                for oo in 0..outer {
                    for (j, &ix) in idx.iter().enumerate() {
                        let s = offset + (oo * nidx + j) * inner;
                        let d = (oo * size + ix) * inner;
                        for q in 0..inner {
                            o[d + q] = o[d + q].acc_add(a[s + q]);
                        }
                    }
                }
            });
            Ok(())
        },
    )
}

/// `out[i] = src[pos(i) with dim replaced by idx[i]]`: input 0 the source in layout `ls`
/// restricted to the index's shape with `stride_dim` taken out (stride 0 at `dim`), input 1 the
/// index, contiguous, of that shape; output 0 contiguous. `size` is the source's dim size.
pub fn gather(
    dtype: DType,
    idx_dtype: DType,
    ls: Layout,
    stride_dim: usize,
    size: usize,
    idx_offset: usize,
) -> impl Kernel {
    FnKernel::new(
        "gather",
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let n = ls.numel();
            let idx = indices("gather", &ins[1], idx_dtype, idx_offset, n, size)?;
            dispatch!(dtype, T => {
                // SAFETY: inputs are read, output 0 written; the output is a fresh blob.
                let (a, o) = unsafe { (input::<T>(&ins[0]), output::<T>(&outs[0])) };
                walk(ls.dims(), [&ls.strides], [ls.offset], 0, n, |i, [off]| {
                    o[i] = a[off + idx[i] * stride_dim];
                });
            });
            Ok(())
        },
    )
}

/// `out = 0; out[pos(i) with dim replaced by idx[i]] += src[i]`: input 0 the source (contiguous
/// at `offset`, the index's shape), input 1 the index; output 0 contiguous of `out_dims`, viewed
/// through `lo` (the index's shape, the output's strides, 0 at `dim`) plus `idx * stride_dim`.
// The op definition's inferred layout pieces, passed as they are rather than bundled for one call.
#[allow(clippy::too_many_arguments)]
pub fn scatter_add(
    dtype: DType,
    idx_dtype: DType,
    offset: usize,
    lo: Layout,
    stride_dim: usize,
    size: usize,
    out_numel: usize,
    idx_offset: usize,
) -> impl Kernel {
    FnKernel::new(
        "scatter_add",
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let n = lo.numel();
            let idx = indices("scatter_add", &ins[1], idx_dtype, idx_offset, n, size)?;
            dispatch!(dtype, T => {
                // SAFETY: inputs are read, output 0 written; the output is a fresh blob.
                let (a, o) = unsafe { (input::<T>(&ins[0]), output::<T>(&outs[0])) };
                let o = &mut o[..out_numel];
                o.fill(T::ZERO);
                walk(lo.dims(), [&lo.strides], [0], 0, n, |i, [off]| {
                    let d = off + idx[i] * stride_dim;
                    o[d] = o[d].acc_add(a[offset + i]);
                });
            });
            Ok(())
        },
    )
}
