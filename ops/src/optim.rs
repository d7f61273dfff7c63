//! Optimizers' updates as single kernels: what one step of an optimizer does to one
//! parameter, its gradient and its state, in one pass over their elements.

use crate::device::{Device, pick};
use crate::{DType, cpu};
use eddy_vm::instruction::Kernel;

pub use crate::kinds::AdamStep;

/// The kernel of one Adam step of a parameter of `n` elements of `dtype` (`f32` or `f64`):
/// input 0 its gradient, outputs 0–2 the parameter and its first and second moments, all
/// dense at `offsets` (gradient, parameter, first, second moment), and output 3 the step
/// count (an `f64` scalar, incremented first). The same arithmetic, element by element and
/// rounding for rounding, as PyTorch's single-tensor Adam in the order of `optim::Adam`'s
/// composed ops.
///
/// `None` if `device` has no kernel for it (the caller runs the composed ops).
///
/// # Examples
///
/// ```
/// use eddy_ops::optim::{adam_step, AdamStep};
/// use eddy_ops::{DType, Device};
/// let s = AdamStep { lr: 1e-3, betas: (0.9, 0.999), eps: 1e-8, weight_decay: 0.0, decoupled: false };
/// assert!(adam_step(Device::CPU, DType::F32, 16, [0; 4], s).is_some());
/// ```
pub fn adam_step(
    device: Device,
    dtype: DType,
    n: usize,
    offsets: [usize; 4],
    step: AdamStep,
) -> Option<impl Kernel + use<>> {
    pick!(device, cpu::optim::adam_step(dtype, n, offsets, step))
}
