//! Index ops (`index_select`, `index_add`, `gather`, `scatter_add`): the kernel for the
//! operands' device. Index values are checked by the kernel, which fails the op (an error at
//! the next sync) for one out of range.

use crate::device::{Device, pick};
use crate::{DType, Layout, cpu};
use eddy_vm::instruction::Kernel;

/// Where an index op's operands sit: the dtypes of the values and indices and their offsets,
/// and the `[outer, size, inner]` view of the source around the indexed dim, with `nidx`
/// indices.
///
/// # Examples
///
/// ```
/// use eddy_ops::{index::IndexDims, DType};
/// let d = IndexDims { dtype: DType::F32, idx_dtype: DType::I64, offset: 0, idx_offset: 0,
///                     outer: 1, size: 10, inner: 4, nidx: 3 };
/// assert_eq!(d.size, 10);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct IndexDims {
    /// The values' dtype.
    pub dtype: DType,
    /// The indices' dtype.
    pub idx_dtype: DType,
    /// The values' offset in their storage.
    pub offset: usize,
    /// The indices' offset in their storage.
    pub idx_offset: usize,
    /// The product of the dims before the indexed one.
    pub outer: usize,
    /// The indexed dim's size.
    pub size: usize,
    /// The product of the dims after it.
    pub inner: usize,
    /// How many indices.
    pub nidx: usize,
}

impl IndexDims {
    /// Indexing a tensor of `dims` along dim `d` with `nidx` indices: the values of `dtype`
    /// from element `offset`, the indices of `idx_dtype` from `idx_offset`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::{index::IndexDims, DType};
    /// let d = IndexDims::along(&[2, 10, 4], 1, 3, (DType::F32, 0), (DType::I64, 5));
    /// assert_eq!((d.outer, d.size, d.inner, d.nidx, d.idx_offset), (2, 10, 4, 3, 5));
    /// ```
    pub fn along(
        dims: &[usize],
        d: usize,
        nidx: usize,
        (dtype, offset): (DType, usize),
        (idx_dtype, idx_offset): (DType, usize),
    ) -> IndexDims {
        IndexDims {
            dtype,
            idx_dtype,
            offset,
            idx_offset,
            outer: crate::numel_of(&dims[..d]),
            size: dims[d],
            inner: crate::numel_of(&dims[d + 1..]),
            nidx,
        }
    }
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
