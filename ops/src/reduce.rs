//! Reductions and scans: the op descriptor and the kernel for the operands' device.

use crate::device::{Device, pick};
use crate::{DType, Layout, cpu};
use eddy_vm::instruction::Kernel;

pub use crate::kinds::ReduceOp;

/// The kernel reducing the trailing `r` elements of each output element's run of `la` (the
/// reduced dims permuted last) with `op`, on `device`.
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`](crate::Error::Unsupported)).
///
/// # Examples
///
/// ```
/// use eddy_ops::{reduce::{reduce, ReduceOp}, DType, Device, Layout};
/// assert!(reduce(Device::CPU, ReduceOp::Sum, DType::F32, Layout::contiguous([2, 3]), 3).is_some());
/// ```
pub fn reduce(
    device: Device,
    op: ReduceOp,
    dtype: DType,
    la: Layout,
    r: usize,
) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::reduce::reduce(op, dtype, la, r),
        crate::cuda::ops::reduce(op, dtype, la, r)
    )
}

/// The kernel summing the leading `rows` rows of a dense `[rows, cols]` input starting at
/// `offset` into `cols` outputs (a bias gradient), on `device`.
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`](crate::Error::Unsupported)).
///
/// # Examples
///
/// ```
/// use eddy_ops::{reduce::sum_leading, DType, Device};
/// assert!(sum_leading(Device::CPU, DType::F32, 0, 4, 8).is_some());
/// ```
pub fn sum_leading(
    device: Device,
    dtype: DType,
    offset: usize,
    rows: usize,
    cols: usize,
) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::reduce::sum_leading(dtype, offset, rows, cols),
        crate::cuda::ops::sum_leading(dtype, offset, rows, cols)
    )
}

/// The kernel of a cumulative product along the last dim of `la` into `lo`, on `device`
/// (see [`cpu::reduce::cumprod`]).
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`](crate::Error::Unsupported)).
///
/// # Examples
///
/// ```
/// use eddy_ops::{reduce::cumprod, DType, Device, Layout};
/// let l = Layout::contiguous([2, 3]);
/// assert!(cumprod(Device::CPU, DType::F32, l.clone(), l).is_some());
/// ```
pub fn cumprod(
    device: Device,
    dtype: DType,
    la: Layout,
    lo: Layout,
) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::reduce::cumprod(dtype, la, lo),
        crate::cuda::ops::cumprod(dtype, la, lo)
    )
}

/// The kernel of [`cumprod`]'s gradient over `rows` dense rows of `n` (see
/// [`cpu::reduce::cumprod_backward`]), on `device`.
///
/// `None` if `device` has no kernel for it.
///
/// # Examples
///
/// ```
/// use eddy_ops::{reduce::cumprod_backward, DType, Device};
/// assert!(cumprod_backward(Device::CPU, DType::F32, 2, 3, (0, 0)).is_some());
/// ```
pub fn cumprod_backward(
    device: Device,
    dtype: DType,
    rows: usize,
    n: usize,
    offsets: (usize, usize),
) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::reduce::cumprod_backward(dtype, rows, n, offsets),
        crate::cuda::ops::cumprod_backward(dtype, rows, n, offsets)
    )
}

/// The kernel of a cumulative sum along the last dim of `la` into `lo`, on `device`.
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`](crate::Error::Unsupported)).
///
/// # Examples
///
/// ```
/// use eddy_ops::{reduce::cumsum, DType, Device, Layout};
/// let l = Layout::contiguous([2, 3]);
/// assert!(cumsum(Device::CPU, DType::F32, l.clone(), l).is_some());
/// ```
pub fn cumsum(device: Device, dtype: DType, la: Layout, lo: Layout) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::reduce::cumsum(dtype, la, lo),
        crate::cuda::ops::cumsum(dtype, la, lo)
    )
}
