//! Indexing kernels: `index_select` and its backward `index_add`, `gather` and its backward
//! `scatter_add`. Indices are read on the stream; one out of range fails the kernel with a
//! message naming it (surfaced at the next sync).

use crate::kernel::{FnKernel, input, output, walk};
use crate::kinds::IndexDims;
use crate::{DType, Elem, Layout, dispatch};
use eddy_vm::Counted;
use eddy_vm::{Blob, instruction::Kernel};

/// Reads the index blob (`i64` or `i32`, contiguous at `offset`, `n` entries) as `i64`s,
/// checking each against `0..size`. A negative index is out of range, as in PyTorch's
/// `index_select`, `gather` and `embedding`.
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
            // In u128: a dim may have 2^63 elements or more when another is 0.
            if i < 0 || i as u128 >= size as u128 {
                Err(format!(
                    "{op}: index {i} out of range for a dim of size {size}"
                ))
            } else {
                Ok(i as usize)
            }
        })
        .collect()
}

/// `out[o, j, q] = src[o, idx[j], q]`: input 0 contiguous `[outer, size, inner]` at `offset`,
/// input 1 the `nidx` indices (contiguous at `idx_offset`), output 0 `[outer, nidx, inner]`.
///
/// # Examples
///
/// ```
/// use eddy_ops::{cpu::index::index_select, index::IndexDims};
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (src, idx, out) = (vm.new_blob(4 * 4), vm.new_blob(3 * 8), vm.new_blob(6 * 4));
/// vm.run_op(StreamId::CPU, from_host(vec![1.0f32, 2.0, 3.0, 4.0]), &[], &[&src], false)?;
/// vm.run_op(StreamId::CPU, from_host(vec![1i64, 0, 1]), &[], &[&idx], false)?;
/// // Rows 1, 0 and 1 of a [2, 2] source: outer 1, size 2, inner 2.
/// let d = IndexDims { dtype: DType::F32, idx_dtype: DType::I64, offset: 0, idx_offset: 0,
///                     outer: 1, size: 2, inner: 2, nidx: 3 };
/// let k = index_select(d);
/// vm.run_op(StreamId::CPU, k, &[&src, &idx], &[&out], false)?;
/// let l = Layout::contiguous([3, 2]);
/// let v = vm.read_blob(&out, move |m| gather_host::<f32>(m, &l))?;
/// assert_eq!(v, [3.0, 4.0, 1.0, 2.0, 3.0, 4.0]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn index_select(d: IndexDims) -> impl Kernel {
    let IndexDims {
        dtype,
        idx_dtype,
        offset,
        idx_offset,
        outer,
        size,
        inner,
        nidx,
    } = d;
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
///
/// # Examples
///
/// ```
/// use eddy_ops::{cpu::index::index_add, index::IndexDims};
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (src, idx, out) = (vm.new_blob(3 * 8), vm.new_blob(3 * 8), vm.new_blob(3 * 8));
/// vm.run_op(StreamId::CPU, from_host(vec![1i64, 10, 100]), &[], &[&src], false)?;
/// vm.run_op(StreamId::CPU, from_host(vec![0i64, 2, 0]), &[], &[&idx], false)?;
/// // out[idx[j]] += src[j] into 3 slots: outer 1, size 3, inner 1, 3 indices.
/// let d = IndexDims { dtype: DType::I64, idx_dtype: DType::I64, offset: 0, idx_offset: 0,
///                     outer: 1, size: 3, inner: 1, nidx: 3 };
/// let k = index_add(d);
/// vm.run_op(StreamId::CPU, k, &[&src, &idx], &[&out], false)?;
/// let l = Layout::contiguous([3]);
/// assert_eq!(vm.read_blob(&out, move |m| gather_host::<i64>(m, &l))?, [101, 0, 10]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn index_add(d: IndexDims) -> impl Kernel {
    let IndexDims {
        dtype,
        idx_dtype,
        offset,
        idx_offset,
        outer,
        size,
        inner,
        nidx,
    } = d;
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
/// A negative index, or one `>= size`, fails the kernel as out of range; `op` names the kernel
/// and its errors (`gather`, or `nll_loss` for its class targets).
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::index::gather;
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (src, idx, out) = (vm.new_blob(6 * 4), vm.new_blob(4 * 4), vm.new_blob(4 * 4));
/// let rows = vec![10.0f32, 11.0, 12.0, 13.0, 14.0, 15.0]; // [2, 3]
/// vm.run_op(StreamId::CPU, from_host(rows), &[], &[&src], false)?;
/// vm.run_op(StreamId::CPU, from_host(vec![2i32, 0, 1, 1]), &[], &[&idx], false)?;
/// // Along dim 1 with a [2, 2] index: the source's strides [3, 1] with dim 1's set to 0.
/// let mut ls = Layout::contiguous([2, 2]);
/// ls.strides[..].copy_from_slice(&[3, 0]);
/// let k = gather("gather", DType::F32, DType::I32, ls, 1, 3, 0);
/// vm.run_op(StreamId::CPU, k, &[&src, &idx], &[&out], false)?;
/// let l = Layout::contiguous([4]);
/// let v = vm.read_blob(&out, move |m| gather_host::<f32>(m, &l))?;
/// assert_eq!(v, [12.0, 10.0, 14.0, 14.0]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
// The op definition's inferred layout pieces, passed as they are rather than bundled for one call.
#[allow(clippy::too_many_arguments)]
pub fn gather(
    op: &'static str,
    dtype: DType,
    idx_dtype: DType,
    ls: Layout,
    stride_dim: usize,
    size: usize,
    idx_offset: usize,
) -> impl Kernel {
    FnKernel::new(op, move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
        let n = ls.numel();
        let idx = indices(op, &ins[1], idx_dtype, idx_offset, n, size)?;
        dispatch!(dtype, T => {
            // SAFETY: inputs are read, output 0 written; the output is a fresh blob.
            let (a, o) = unsafe { (input::<T>(&ins[0]), output::<T>(&outs[0])) };
            walk(ls.dims(), [&ls.strides], [ls.offset], 0, n, |i, [off]| {
                o[i] = a[off + idx[i] * stride_dim];
            });
        });
        Ok(())
    })
}

/// `out = 0; out[pos(i) with dim replaced by idx[i]] += src[i]`: input 0 the source (contiguous
/// at `offset`, the index's shape), input 1 the index; output 0 contiguous of `out_dims`, viewed
/// through `lo` (the index's shape, the output's strides, 0 at `dim`) plus `idx * stride_dim`.
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::index::scatter_add;
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (src, idx, out) = (vm.new_blob(4 * 4), vm.new_blob(4 * 8), vm.new_blob(6 * 4));
/// vm.run_op(StreamId::CPU, from_host(vec![1.0f32, 2.0, 3.0, 4.0]), &[], &[&src], false)?;
/// vm.run_op(StreamId::CPU, from_host(vec![0i64, 0, 2, 1]), &[], &[&idx], false)?;
/// // Into a [2, 3] output along dim 1, index [2, 2]: the output's strides [3, 1], dim 1's 0.
/// let mut lo = Layout::contiguous([2, 2]);
/// lo.strides[..].copy_from_slice(&[3, 0]);
/// let k = scatter_add(DType::F32, DType::I64, 0, lo, 1, 3, 6, 0);
/// vm.run_op(StreamId::CPU, k, &[&src, &idx], &[&out], false)?;
/// let l = Layout::contiguous([6]);
/// let v = vm.read_blob(&out, move |m| gather_host::<f32>(m, &l))?;
/// assert_eq!(v, [3.0, 0.0, 0.0, 0.0, 4.0, 3.0]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
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
