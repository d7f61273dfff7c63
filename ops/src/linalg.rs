//! Matrix products: the kernel for the operands' device.

use crate::device::{Device, pick};
use crate::{DType, Layout, cpu};
use eddy_vm::instruction::Kernel;

/// The kernel of `out = a @ b` (batched; layouts give the batch, rows and columns), on
/// `device`.
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`](crate::Error::Unsupported)).
///
/// # Examples
///
/// ```
/// use eddy_ops::{linalg::matmul, DType, Device, Layout};
/// let (a, b) = (Layout::contiguous([2, 3]), Layout::contiguous([3, 4]));
/// assert!(matmul(Device::CPU, DType::F32, a, b).is_some());
/// ```
pub fn matmul(device: Device, dtype: DType, la: Layout, lb: Layout) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::matmul::matmul(dtype, la, lb),
        crate::cuda::ops::matmul(dtype, la, lb)
    )
}

/// The kernel of `out = a @ b + c` (PyTorch's `addmm`, `c` a bias broadcast over the rows),
/// on `device`.
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`](crate::Error::Unsupported)).
///
/// # Examples
///
/// ```
/// use eddy_ops::{linalg::matmul_bias, DType, Device, Layout};
/// let (a, b, c) = (Layout::contiguous([2, 3]), Layout::contiguous([3, 4]), Layout::contiguous([4]));
/// assert!(matmul_bias(Device::CPU, DType::F32, a, b, c).is_some());
/// ```
pub fn matmul_bias(
    device: Device,
    dtype: DType,
    la: Layout,
    lb: Layout,
    lc: Layout,
) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::matmul::matmul_bias(dtype, la, lb, lc),
        crate::cuda::ops::matmul_bias(dtype, la, lb, lc, false)
    )
}

/// The kernel of `out = relu(a @ b + c)` (PyTorch's `_addmm_activation`), on `device`.
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`](crate::Error::Unsupported)).
///
/// # Examples
///
/// ```
/// use eddy_ops::{linalg::matmul_bias_relu, DType, Device, Layout};
/// let (a, b, c) = (Layout::contiguous([2, 3]), Layout::contiguous([3, 4]), Layout::contiguous([4]));
/// assert!(matmul_bias_relu(Device::CPU, DType::F32, a, b, c).is_some());
/// ```
pub fn matmul_bias_relu(
    device: Device,
    dtype: DType,
    la: Layout,
    lb: Layout,
    lc: Layout,
) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::matmul::matmul_bias_relu(dtype, la, lb, lc),
        crate::cuda::ops::matmul_bias(dtype, la, lb, lc, true)
    )
}
