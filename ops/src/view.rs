//! Views: the inference of each view op, from the input's layout to the view's (shape,
//! strides, offset), with the op's checks. No data moves; the tensor layer keeps the storage
//! and records the gradient.

use crate::error::{Error, Result};
use crate::{DType, Layout, Shape, broadcasts_to, norm_dim};
use smallvec::SmallVec;

/// The contiguous layout of `to`, at `offset`, for a reshape of a tensor of `from` dims.
///
/// # Errors
///
/// `ElementCountMismatch` (named `op`) when the element counts differ.
///
/// # Examples
///
/// ```
/// use eddy_ops::{view::reshape, Shape};
/// let l = reshape("reshape", &[2, 3], Shape::from(&[3, 2][..]), 0)?;
/// assert_eq!(l.strides.as_slice(), &[2, 1]);
/// assert!(reshape("reshape", &[2, 3], Shape::from(&[4][..]), 0).is_err());
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[track_caller]
pub fn reshape(op: &'static str, from: &[usize], to: Shape, offset: usize) -> Result<Layout> {
    if to.checked_numel() != Some(crate::numel_of(from)) {
        return Err(Error::ElementCountMismatch {
            at: crate::Caller::here(),
            op,
            from: from.to_vec(),
            to: to.dims().to_vec(),
        });
    }
    Ok(Layout {
        strides: to.contiguous_strides(),
        shape: to,
        offset,
    })
}

/// `perm` (negative from the end) as dims of a rank-`rank` layout: each dim once.
///
/// # Errors
///
/// `InvalidDim`; `InvalidArgument` if `perm` is not a permutation.
///
/// # Examples
///
/// ```
/// use eddy_ops::view::permutation;
/// assert_eq!(permutation(&[-1, 0], 2)?.as_slice(), &[1, 0]);
/// assert!(permutation(&[0, 0], 2).is_err());
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[track_caller]
pub fn permutation(perm: &[isize], rank: usize) -> Result<SmallVec<[usize; 4]>> {
    let mut p = SmallVec::with_capacity(perm.len());
    for &d in perm {
        p.push(norm_dim("permute", d, rank)?);
    }
    let mut seen: SmallVec<[bool; 8]> = SmallVec::from_elem(false, rank);
    if p.len() != rank || p.iter().any(|&d| std::mem::replace(&mut seen[d], true)) {
        return Err(Error::invalid(
            "permute",
            format!("{perm:?} is not a permutation of {rank} dims"),
        ));
    }
    Ok(p)
}

/// Elements `start..start + len` of dim `dim` of `l`: the dim (normalised) and the view.
///
/// # Errors
///
/// `InvalidDim`; `IndexOutOfRange` (named `op`) if the range leaves the dim.
///
/// # Examples
///
/// ```
/// use eddy_ops::{view::narrow, Layout};
/// let (d, l) = narrow("narrow", &Layout::contiguous([4, 5]), -1, 1, 3)?;
/// assert_eq!((d, l.dims(), l.offset), (1, &[4, 3][..], 1));
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[track_caller]
pub fn narrow(
    op: &'static str,
    l: &Layout,
    dim: isize,
    start: usize,
    len: usize,
) -> Result<(usize, Layout)> {
    let d = norm_dim(op, dim, l.shape.rank())?;
    let size = l.dims()[d];
    if start.checked_add(len).is_none_or(|e| e > size) {
        return Err(Error::IndexOutOfRange {
            at: crate::Caller::here(),
            op,
            index: start.saturating_add(len) as i64,
            size,
        });
    }
    let mut v = l.clone();
    v.shape.0[d] = len;
    // A view without elements keeps its base's offset: the base's storage may itself be empty
    // (another dim is 0), and kernels slice `offset..offset + numel` of it.
    if !v.shape.0.contains(&0) {
        v.offset += start * v.strides[d];
    }
    Ok((d, v))
}

/// Dim `dim` of `l` removed if its size is 1 (a 0-dim layout, or another size, stays): the
/// dim (normalised, a 0-dim layout naming dim 0 or -1 as PyTorch lets it) and the view, or
/// `None` where nothing is removed.
///
/// # Errors
///
/// `InvalidDim`.
///
/// # Examples
///
/// ```
/// use eddy_ops::{view::squeeze, Layout};
/// let (d, l) = squeeze(&Layout::contiguous([2, 1, 3]), 1)?;
/// assert_eq!((d, l.map(|l| l.dims().to_vec())), (1, Some(vec![2, 3])));
/// assert!(squeeze(&Layout::contiguous([2, 3]), 0)?.1.is_none());
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[track_caller]
pub fn squeeze(l: &Layout, dim: isize) -> Result<(usize, Option<Layout>)> {
    let rank = l.shape.rank();
    let d = norm_dim("squeeze", dim, rank.max(1))?;
    if rank == 0 || l.dims()[d] != 1 {
        return Ok((d, None));
    }
    let mut v = l.clone();
    v.shape.0.remove(d);
    v.strides.remove(d);
    Ok((d, Some(v)))
}

/// A dim of size 1 inserted at `dim` of `l` (`0..=rank`, negative from the end).
///
/// # Errors
///
/// `InvalidDim`.
///
/// # Examples
///
/// ```
/// use eddy_ops::{view::unsqueeze, Layout};
/// assert_eq!(unsqueeze(&Layout::contiguous([2, 3]), -1)?.dims(), &[2, 3, 1]);
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[track_caller]
pub fn unsqueeze(l: &Layout, dim: isize) -> Result<Layout> {
    let rank = l.shape.rank();
    let d = norm_dim("unsqueeze", dim, rank + 1)?;
    let mut v = l.clone();
    // Saturating, as `contiguous_strides`: a zero-sized tensor may have huge other dims.
    let stride = if d < rank {
        v.strides[d].saturating_mul(v.shape.0[d])
    } else {
        1
    };
    v.shape.0.insert(d, 1);
    v.strides.insert(d, stride);
    Ok(v)
}

/// Dims `a` and `b` of a rank-`rank` layout, normalised (a 0-dim layout has one nameable
/// dim, as PyTorch's dim wrapping gives it).
///
/// # Errors
///
/// `InvalidDim`.
///
/// # Examples
///
/// ```
/// use eddy_ops::view::transposed_dims;
/// assert_eq!(transposed_dims(3, 0, -1)?, (0, 2));
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[track_caller]
pub fn transposed_dims(rank: usize, a: isize, b: isize) -> Result<(usize, usize)> {
    let r = rank.max(1);
    Ok((norm_dim("transpose", a, r)?, norm_dim("transpose", b, r)?))
}

/// Checks a broadcast of a tensor of `from` dims and `dtype` to `to` (named `op`): the
/// element count fits, and each dim of `from` is 1 or `to`'s (aligned from the end).
///
/// # Errors
///
/// `ShapeOverflow` where the view's bytes overflow; `ShapeMismatch` where `from` does not
/// broadcast.
///
/// # Examples
///
/// ```
/// use eddy_ops::{view::check_broadcast, DType, Shape};
/// assert!(check_broadcast(&Shape::from(&[3, 1][..]), &Shape::from(&[2, 3, 4][..]), DType::F32).is_ok());
/// assert!(check_broadcast(&Shape::from(&[3][..]), &Shape::from(&[2][..]), DType::F32).is_err());
/// ```
#[track_caller]
pub fn check_broadcast(from: &Shape, to: &Shape, dtype: DType) -> Result<()> {
    // A view's element count must not overflow either (nothing is allocated, but `numel`
    // and every kernel's index arithmetic would).
    to.checked_bytes(dtype)?;
    if !broadcasts_to(from, to) {
        return Err(Error::ShapeMismatch {
            at: crate::Caller::here(),
            op: "broadcast_to",
            lhs: from.dims().to_vec(),
            rhs: to.dims().to_vec(),
        });
    }
    Ok(())
}

/// What [`infer_cat`] found: the dim joined (normalised), the result's shape and its dtype
/// (the inputs' promoted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cat {
    /// The dim along which the inputs are joined.
    pub dim: usize,
    /// The result's shape: the first input's, with the sizes along `dim` added up.
    pub shape: Shape,
    /// The inputs' dtypes promoted (`i64` with `f32` gives `f32`, as in PyTorch).
    pub dtype: DType,
}

/// The inference of `cat` (named `op`) of inputs of the given dims and dtypes along `dim`:
/// the same rank and the same size in every other dim.
///
/// # Errors
///
/// `InvalidArgument` for no input; `InvalidDim`; `ShapeMismatch` naming the first input and
/// the first that differs; `ShapeOverflow` when the result's size overflows.
///
/// # Examples
///
/// ```
/// use eddy_ops::{view::infer_cat, DType};
/// let c = infer_cat("cat", &[(&[1, 2], DType::I64), (&[3, 2], DType::F32)], 0)?;
/// assert_eq!((c.dim, c.shape.dims(), c.dtype), (0, &[4, 2][..], DType::F32));
/// assert!(infer_cat("cat", &[(&[1, 2], DType::F32), (&[1, 3], DType::F32)], 0).is_err());
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[track_caller]
pub fn infer_cat(op: &'static str, inputs: &[(&[usize], DType)], dim: isize) -> Result<Cat> {
    let Some(&(first, dtype)) = inputs.first() else {
        return Err(Error::invalid(op, "needs at least one tensor"));
    };
    let d = norm_dim(op, dim, first.len())?;
    let dtype = inputs.iter().fold(dtype, |d, &(_, t)| d.promote(t));
    let mut total = 0usize;
    for &(dims, _) in inputs {
        let fits = dims.len() == first.len()
            && (dims.iter().zip(first).enumerate()).all(|(i, (a, b))| i == d || a == b);
        if !fits {
            return Err(Error::ShapeMismatch {
                at: crate::Caller::here(),
                op,
                lhs: first.to_vec(),
                rhs: dims.to_vec(),
            });
        }
        total = total.checked_add(dims[d]).ok_or(Error::ShapeOverflow {
            at: crate::Caller::here(),
            shape: first.to_vec(),
            dtype,
        })?;
    }
    let mut shape = Shape::from(first);
    shape.0[d] = total;
    shape.checked_bytes(dtype)?;
    Ok(Cat {
        dim: d,
        shape,
        dtype,
    })
}

/// The checks of `split` into pieces of `size` along `dim` of `dims`: the dim (normalised).
///
/// # Errors
///
/// `InvalidDim`; `InvalidArgument` for `size` 0 on a non-empty dim.
///
/// # Examples
///
/// ```
/// use eddy_ops::view::check_split;
/// assert_eq!(check_split(&[4, 5], 2, -1)?, 1);
/// assert!(check_split(&[4, 5], 0, 1).is_err());
/// assert!(check_split(&[4, 0], 0, 1).is_ok()); // an empty dim is one empty piece
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[track_caller]
pub fn check_split(dims: &[usize], size: usize, dim: isize) -> Result<usize> {
    let d = norm_dim("split", dim, dims.len())?;
    let n = dims[d];
    if size == 0 && n > 0 {
        return Err(Error::invalid(
            "split",
            format!("piece size 0 for dim {d} of size {n}"),
        ));
    }
    Ok(d)
}

/// The checks of `split_sizes` of `dims` along `dim` into pieces of `sizes`, which add up to
/// the dim's size: the dim (normalised).
///
/// # Errors
///
/// `InvalidDim`; `InvalidArgument` if the sizes do not add up.
///
/// # Examples
///
/// ```
/// use eddy_ops::view::check_split_sizes;
/// assert_eq!(check_split_sizes(&[2, 3], &[1, 2], 1)?, 1);
/// assert!(check_split_sizes(&[2, 3], &[1, 1], 1).is_err());
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[track_caller]
pub fn check_split_sizes(dims: &[usize], sizes: &[usize], dim: isize) -> Result<usize> {
    let d = norm_dim("split_sizes", dim, dims.len())?;
    let n = dims[d];
    let total = sizes.iter().try_fold(0usize, |a, &s| a.checked_add(s));
    if total != Some(n) {
        return Err(Error::invalid(
            "split_sizes",
            format!("sizes {sizes:?} do not add up to the size {n} of dim {d}"),
        ));
    }
    Ok(d)
}

/// The checks of `chunk` of `dims` into `chunks` pieces along `dim`: the dim (normalised)
/// and the pieces' size `⌈n / chunks⌉` (0 for an empty dim, which gives `chunks` empty
/// pieces, as in PyTorch).
///
/// # Errors
///
/// `InvalidDim`; `InvalidArgument` for 0 chunks.
///
/// # Examples
///
/// ```
/// use eddy_ops::view::chunk_size;
/// assert_eq!(chunk_size(&[6], 4, 0)?, (0, 2));
/// assert!(chunk_size(&[6], 0, 0).is_err());
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[track_caller]
pub fn chunk_size(dims: &[usize], chunks: usize, dim: isize) -> Result<(usize, usize)> {
    let d = norm_dim("chunk", dim, dims.len())?;
    if chunks == 0 {
        return Err(Error::invalid("chunk", "0 chunks"));
    }
    Ok((d, dims[d].div_ceil(chunks)))
}
