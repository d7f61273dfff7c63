//! Index ops (`index_select`, `index_add`, `gather`, `scatter_add`, `embedding`): their inference and the
//! kernel for the operands' device. Index values are checked by the kernel, which fails the op
//! (an error at the next sync) for one out of range.

use crate::device::{Device, pick};
use crate::error::{Error, Result};
use crate::{DType, Layout, cpu, norm_dim};
use eddy_vm::instruction::Kernel;

pub use crate::kinds::IndexDims;

/// Checks that indices of `dtype` can index (`i64` or `i32`, as PyTorch's index ops take).
///
/// # Errors
///
/// `UnsupportedDType` naming `op`.
///
/// # Examples
///
/// ```
/// use eddy_ops::{index::check_index_dtype, DType};
/// assert!(check_index_dtype("gather", DType::I32).is_ok());
/// assert!(check_index_dtype("gather", DType::F32).is_err());
/// ```
#[track_caller]
pub fn check_index_dtype(op: &'static str, dtype: DType) -> Result<()> {
    if !matches!(dtype, DType::I64 | DType::I32) {
        return Err(Error::UnsupportedDType {
            at: crate::Caller::here(),
            op,
            dtype,
        });
    }
    Ok(())
}

/// Infers `embedding` of a weight of `weight` dims (`[rows, width]`) by ids of `ids` dims and
/// `ids_dtype`: the output's shape, the ids' with `width` appended.
///
/// # Errors
///
/// `InvalidArgument` for a weight that is not 2-D; `UnsupportedDType` for ids that cannot
/// index.
///
/// # Examples
///
/// ```
/// use eddy_ops::{index::infer_embedding, DType};
/// assert_eq!(infer_embedding(&[10, 4], &[2, 3], DType::I64)?.dims(), &[2, 3, 4]);
/// assert!(infer_embedding(&[10], &[2], DType::I64).is_err());
/// assert!(infer_embedding(&[10, 4], &[2], DType::F32).is_err());
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[track_caller]
pub fn infer_embedding(weight: &[usize], ids: &[usize], ids_dtype: DType) -> Result<crate::Shape> {
    if weight.len() != 2 {
        return Err(Error::invalid(
            "embedding",
            format!("weight must be 2-D, got {weight:?}"),
        ));
    }
    check_index_dtype("embedding", ids_dtype)?;
    let mut shape = crate::Shape::from(ids);
    shape.0.push(weight[1]);
    Ok(shape)
}

/// Infers `index_select` of a source of `src` dims along `dim` by a 1-D index of `index`
/// dims: the dim, normalised (the output is `src` with the index's length along it).
///
/// # Errors
///
/// `ShapeMismatch` for an index that is not 1-D; `InvalidDim`.
///
/// # Examples
///
/// ```
/// use eddy_ops::index::infer_index_select;
/// assert_eq!(infer_index_select(&[3, 4], -1, &[2])?, 1);
/// assert!(infer_index_select(&[3, 4], 0, &[2, 1]).is_err());
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[track_caller]
pub fn infer_index_select(src: &[usize], dim: isize, index: &[usize]) -> Result<usize> {
    if index.len() != 1 {
        return Err(Error::ShapeMismatch {
            at: crate::Caller::here(),
            op: "index_select",
            lhs: src.to_vec(),
            rhs: index.to_vec(),
        });
    }
    norm_dim("index_select", dim, src.len())
}

/// Infers `index_add` into a tensor of `dst` dims (rank 1 or more) along `dim`, at a 1-D
/// index of `index` dims, of a source of `src` dims: `dst`'s shape with the index's length
/// along `dim`. Returns the dim, normalised.
///
/// # Errors
///
/// `InvalidDim`; `ShapeMismatch` naming the source's expected and actual shapes (or the
/// index's, if it is not 1-D).
///
/// # Examples
///
/// ```
/// use eddy_ops::index::infer_index_add;
/// assert_eq!(infer_index_add(&[5, 3], 0, &[2], &[2, 3])?, 0);
/// assert!(infer_index_add(&[5, 3], 0, &[2], &[3, 3]).is_err());
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[track_caller]
pub fn infer_index_add(dst: &[usize], dim: isize, index: &[usize], src: &[usize]) -> Result<usize> {
    let d = norm_dim("index_add", dim, dst.len())?;
    let mut want = dst.to_vec();
    if index.len() == 1 {
        want[d] = index[0];
    }
    if index.len() != 1 || src != want.as_slice() {
        return Err(Error::ShapeMismatch {
            at: crate::Caller::here(),
            op: "index_add",
            lhs: want,
            rhs: if index.len() == 1 {
                src.to_vec()
            } else {
                index.to_vec()
            },
        });
    }
    Ok(d)
}

/// Infers `gather` (as op `op`) of a source of `src` dims along `dim` by an index of `index`
/// dims: the same rank, and each dim of the index but `dim` at most the source's. Returns the
/// dim, normalised; the output has the index's shape.
///
/// # Errors
///
/// `InvalidDim`; `ShapeMismatch` naming both shapes.
///
/// # Examples
///
/// ```
/// use eddy_ops::index::infer_gather;
/// assert_eq!(infer_gather("gather", &[3, 4], -1, &[2, 9])?, 1);
/// assert!(infer_gather("gather", &[3, 4], 1, &[4, 1]).is_err());
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[track_caller]
pub fn infer_gather(op: &'static str, src: &[usize], dim: isize, index: &[usize]) -> Result<usize> {
    let d = norm_dim(op, dim, src.len())?;
    let fits = index.len() == src.len()
        && (index.iter().zip(src).enumerate()).all(|(i, (a, b))| i == d || a <= b);
    if !fits {
        return Err(Error::ShapeMismatch {
            at: crate::Caller::here(),
            op,
            lhs: src.to_vec(),
            rhs: index.to_vec(),
        });
    }
    Ok(d)
}

/// The source's layout as `gather`'s kernel reads it: `src` broadcast to the index's shape
/// with dim `d`'s stride taken out, and that stride (the kernel adds `index * stride`).
///
/// # Examples
///
/// ```
/// use eddy_ops::{index::gather_layout, Layout};
/// let (l, stride) = gather_layout(&Layout::contiguous([3, 4]), &[3, 2], 1);
/// assert_eq!((l.strides.as_slice(), stride), (&[4, 0][..], 1));
/// ```
pub fn gather_layout(src: &Layout, index: &[usize], d: usize) -> (Layout, usize) {
    let mut ls = src.clone();
    ls.shape = crate::Shape::from(index);
    let stride = std::mem::replace(&mut ls.strides[d], 0);
    (ls, stride)
}

/// Infers `scatter_add` (as op `op`) into a tensor of `dst` dims along `dim`, of a source of
/// `src` dims at an index of `index` dims: one rank, each dim of the index at most the
/// source's, and at most the destination's but along `dim`. Returns the dim, normalised.
///
/// # Errors
///
/// `InvalidDim`; `ShapeMismatch` naming the destination's and the index's shapes.
///
/// # Examples
///
/// ```
/// use eddy_ops::index::infer_scatter;
/// assert_eq!(infer_scatter("scatter_add", &[3, 4], 0, &[5, 2], &[5, 4])?, 0);
/// assert!(infer_scatter("scatter_add", &[3, 4], 0, &[5, 5], &[5, 5]).is_err());
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[track_caller]
pub fn infer_scatter(
    op: &'static str,
    dst: &[usize],
    dim: isize,
    index: &[usize],
    src: &[usize],
) -> Result<usize> {
    let r = dst.len();
    let d = norm_dim(op, dim, r.max(1))?;
    let fits = index.len() == r
        && src.len() == r
        && (0..r).all(|j| index[j] <= src[j] && (j == d || index[j] <= dst[j]));
    if !fits {
        return Err(Error::ShapeMismatch {
            at: crate::Caller::here(),
            op,
            lhs: dst.to_vec(),
            rhs: index.to_vec(),
        });
    }
    Ok(d)
}

/// The kernel of `index_select` on `device`.
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`](crate::Error::Unsupported)).
///
/// # Examples
///
/// ```
/// use eddy_ops::{index::{index_select, IndexDims}, DType, Device};
/// let d = IndexDims { dtype: DType::F32, idx_dtype: DType::I64, offset: 0, idx_offset: 0,
///                     outer: 1, size: 10, inner: 4, nidx: 3 };
/// assert!(index_select(Device::CPU, d).is_some());
/// ```
pub fn index_select(device: Device, d: IndexDims) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::index::index_select(d),
        crate::cuda::ops::index_select(d)
    )
}

/// The kernel of `index_add` on `device` (output 0 read and written).
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`](crate::Error::Unsupported)).
///
/// # Examples
///
/// ```
/// use eddy_ops::{index::{index_add, IndexDims}, DType, Device};
/// let d = IndexDims { dtype: DType::F32, idx_dtype: DType::I64, offset: 0, idx_offset: 0,
///                     outer: 1, size: 10, inner: 4, nidx: 3 };
/// assert!(index_add(Device::CPU, d).is_some());
/// ```
pub fn index_add(device: Device, d: IndexDims) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::index::index_add(d),
        crate::cuda::ops::index_add(d)
    )
}

/// The kernel of `gather` along a dim (named `op` in errors) on `device`: `ls` the source's
/// layout with the gathered dim's stride `stride_dim` and size `size`.
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`](crate::Error::Unsupported)).
///
/// # Examples
///
/// ```
/// use eddy_ops::{index::gather, DType, Device, Layout};
/// let ls = Layout::contiguous([2, 3]);
/// assert!(gather(Device::CPU, "gather", DType::F32, DType::I64, ls, 1, 3, 0).is_some());
/// ```
#[allow(clippy::too_many_arguments)] // the kernel's own parameters, passed through
pub fn gather(
    device: Device,
    op: &'static str,
    dtype: DType,
    idx_dtype: DType,
    ls: Layout,
    stride_dim: usize,
    size: usize,
    idx_offset: usize,
) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::index::gather(op, dtype, idx_dtype, ls, stride_dim, size, idx_offset),
        crate::cuda::ops::gather(op, dtype, idx_dtype, ls, stride_dim, size, idx_offset)
    )
}

/// The kernel of `scatter_add` on `device`.
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`](crate::Error::Unsupported)).
///
/// # Examples
///
/// ```
/// use eddy_ops::{index::scatter_add, DType, Device, Layout};
/// let lo = Layout::contiguous([2, 3]);
/// assert!(scatter_add(Device::CPU, DType::F32, DType::I64, 0, lo, 1, 3, 6, 0).is_some());
/// ```
#[allow(clippy::too_many_arguments)] // the kernel's own parameters, passed through
pub fn scatter_add(
    device: Device,
    dtype: DType,
    idx_dtype: DType,
    offset: usize,
    lo: Layout,
    stride_dim: usize,
    size: usize,
    out_numel: usize,
    idx_offset: usize,
) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::index::scatter_add(
            dtype, idx_dtype, offset, lo, stride_dim, size, out_numel, idx_offset,
        ),
        crate::cuda::ops::scatter_add(
            dtype, idx_dtype, offset, lo, stride_dim, size, out_numel, idx_offset,
        )
    )
}
