//! Sorting along the last dim: the kernel for the operands' device.

use crate::device::{Device, pick};
use crate::{DType, Layout, cpu};
use eddy_vm::instruction::Kernel;

/// The kernel sorting each row of `la` (its last dim) into values and indices laid out as
/// `lo`, on `device`.
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`](crate::Error::Unsupported)).
///
/// # Examples
///
/// ```
/// use eddy_ops::{sort::sort, DType, Device, Layout};
/// let l = Layout::contiguous([2, 5]);
/// assert!(sort(Device::CPU, DType::F32, l.clone(), l, false).is_some());
/// ```
pub fn sort(
    device: Device,
    dtype: DType,
    la: Layout,
    lo: Layout,
    descending: bool,
) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::sort::sort(dtype, la, lo, descending),
        crate::cuda::ops::sort(dtype, la, lo, descending)
    )
}

/// The inference of an ordering op (`sort`, `argsort`, `topk`, `kthvalue`, named `op`) along
/// `dim` of `dims` (rank 1 or more) keeping `k` values (all where `None`): the dim
/// (normalised) and the results' shape, `dims` with `k` along the dim.
///
/// # Errors
///
/// `InvalidDim`; `InvalidArgument` if `k` exceeds the dim's size.
///
/// # Examples
///
/// ```
/// use eddy_ops::sort::infer_sort;
/// let (d, shape) = infer_sort("topk", &[3, 5], -1, Some(2))?;
/// assert_eq!((d, shape.dims()), (1, &[3, 2][..]));
/// assert!(infer_sort("topk", &[3, 5], 1, Some(6)).is_err());
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[track_caller]
pub fn infer_sort(
    op: &'static str,
    dims: &[usize],
    dim: isize,
    k: Option<usize>,
) -> crate::Result<(usize, crate::Shape)> {
    let d = crate::norm_dim(op, dim, dims.len())?;
    let n = dims[d];
    let k = k.unwrap_or(n);
    if k > n {
        return Err(crate::Error::invalid(
            op,
            format!("k = {k} exceeds the size {n} of dim {d} of {dims:?}"),
        ));
    }
    let mut shape = crate::Shape::from(dims);
    shape.0[d] = k;
    Ok((d, shape))
}

/// The check of `kthvalue`'s `k` (counting from 1) along `dim` of `dims` (a 0-dim tensor
/// counts as one value).
///
/// # Errors
///
/// `InvalidDim`; `InvalidArgument` unless `1 ≤ k ≤` the size of `dim`.
///
/// # Examples
///
/// ```
/// use eddy_ops::sort::check_kth;
/// assert!(check_kth(&[4], 4, 0).is_ok());
/// assert!(check_kth(&[4], 0, 0).is_err());
/// assert!(check_kth(&[], 1, 0).is_ok());
/// ```
#[track_caller]
pub fn check_kth(dims: &[usize], k: usize, dim: isize) -> crate::Result<()> {
    let n = if dims.is_empty() {
        crate::norm_dim("kthvalue", dim, 1)?;
        1
    } else {
        dims[crate::norm_dim("kthvalue", dim, dims.len())?]
    };
    if k == 0 || k > n {
        return Err(crate::Error::invalid(
            "kthvalue",
            format!("k = {k} is out of range for a dim of size {n}"),
        ));
    }
    Ok(())
}
