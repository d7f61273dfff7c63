//! Row-wise network ops: the kernel for the operands' device.

use crate::device::{Device, pick};
pub use crate::kinds::ClassDims;
use crate::{DType, cpu};
use eddy_vm::instruction::Kernel;

/// The kernel of softmax (or log-softmax when `log`) over the last dim of a dense
/// `[rows, cols]` input from `offset`, on `device`.
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`](crate::Error::Unsupported)).
///
/// # Examples
///
/// ```
/// use eddy_ops::{nn::softmax, DType, Device};
/// assert!(softmax(Device::CPU, DType::F32, 0, 2, 10, true).is_some());
/// ```
pub fn softmax(
    device: Device,
    dtype: DType,
    offset: usize,
    rows: usize,
    cols: usize,
    log: bool,
) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::nn::softmax(dtype, offset, rows, cols, log),
        crate::cuda::ops::softmax(dtype, offset, rows, cols, log)
    )
}

/// The kernel of the gradient of softmax (or log-softmax when `log`) over the last dim of
/// dense `[rows, cols]` operands (see [`cpu::nn::softmax_backward`]) on `device`.
///
/// `None` if `device` has no kernel for it: the tensor layer then composes the gradient from
/// elementwise ops and a row sum.
///
/// # Examples
///
/// ```
/// use eddy_ops::{nn::softmax_backward, DType, Device};
/// assert!(softmax_backward(Device::CPU, DType::F32, 0, 0, 2, 10, true).is_some());
/// ```
pub fn softmax_backward(
    device: Device,
    dtype: DType,
    g_offset: usize,
    y_offset: usize,
    rows: usize,
    cols: usize,
    log: bool,
) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::nn::softmax_backward(dtype, g_offset, y_offset, rows, cols, log)
    )
}

/// The kernel of the mean negative log-likelihood of class targets (see
/// [`cpu::nn::nll_loss`]) on `device`, failing as `op`.
///
/// `None` if `device` has no kernel for it: the tensor layer then composes the loss from
/// `gather` and reductions.
///
/// # Examples
///
/// ```
/// use eddy_ops::{nn::{nll_loss, ClassDims}, DType, Device};
/// let d = ClassDims { dtype: DType::F32, idx_dtype: DType::I64, offset: 0, idx_offset: 0,
///                     rows: 128, cols: 10 };
/// assert!(nll_loss(Device::CPU, "nll_loss", d).is_some());
/// ```
pub fn nll_loss(device: Device, op: &'static str, d: ClassDims) -> Option<impl Kernel + use<>> {
    pick!(device, cpu::nn::nll_loss(op, d))
}

/// The kernel of [`nll_loss`]'s gradient (see [`cpu::nn::nll_loss_backward`]) on `device`,
/// `d.offset` locating the loss's gradient.
///
/// `None` if `device` has no kernel for it.
///
/// # Examples
///
/// ```
/// use eddy_ops::{nn::{nll_loss_backward, ClassDims}, DType, Device};
/// let d = ClassDims { dtype: DType::F32, idx_dtype: DType::I64, offset: 0, idx_offset: 0,
///                     rows: 128, cols: 10 };
/// assert!(nll_loss_backward(Device::CPU, "nll_loss", d).is_some());
/// ```
pub fn nll_loss_backward(
    device: Device,
    op: &'static str,
    d: ClassDims,
) -> Option<impl Kernel + use<>> {
    pick!(device, cpu::nn::nll_loss_backward(op, d))
}
