//! Index ops (`index_select`, `index_add`, `gather`, `scatter_add`): the kernel for the
//! operands' device. Index values are checked by the kernel, which fails the op (an error at
//! the next sync) for one out of range.

use crate::device::{Device, pick};
use crate::{DType, Layout, cpu};
use eddy_vm::instruction::Kernel;

pub use crate::kinds::IndexDims;

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
