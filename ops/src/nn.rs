//! Row-wise network ops: the kernel for the operands' device.

use crate::device::{Device, pick};
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
