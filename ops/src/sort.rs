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
