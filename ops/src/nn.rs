//! Row-wise network ops: the kernel for the operands' device.

use crate::device::{Device, choose};
use crate::{DType, Result, cpu};
use eddy_vm::instruction::Kernel;

/// The kernel of softmax (or log-softmax when `log`) over the last dim of a dense
/// `[rows, cols]` input from `offset`, on `device`.
///
/// # Errors
///
/// `Unsupported` if `device` has no kernel for it.
///
/// # Examples
///
/// ```
/// use eddy_ops::{nn::softmax, DType, Device};
/// assert!(softmax(Device::CPU, DType::F32, 0, 2, 10, true).is_ok());
/// ```
pub fn softmax(
    device: Device,
    dtype: DType,
    offset: usize,
    rows: usize,
    cols: usize,
    log: bool,
) -> Result<impl Kernel + use<>> {
    let op = if log { "log_softmax" } else { "softmax" };
    choose(op, device, || {
        cpu::nn::softmax(dtype, offset, rows, cols, log)
    })
}
