//! Sorting along the last dim: the kernel for the operands' device.

use crate::device::{Device, choose};
use crate::{DType, Layout, Result, cpu};
use eddy_vm::instruction::Kernel;

/// The kernel sorting each row of `la` (its last dim) into values and indices laid out as
/// `lo`, on `device`.
///
/// # Errors
///
/// `Unsupported` if `device` has no kernel for it.
///
/// # Examples
///
/// ```
/// use eddy_ops::{sort::sort, DType, Device, Layout};
/// let l = Layout::contiguous([2, 5]);
/// assert!(sort(Device::CPU, DType::F32, l.clone(), l, false).is_ok());
/// ```
pub fn sort(
    device: Device,
    dtype: DType,
    la: Layout,
    lo: Layout,
    descending: bool,
) -> Result<impl Kernel + use<>> {
    choose("sort", device, || {
        cpu::sort::sort(dtype, la, lo, descending)
    })
}
