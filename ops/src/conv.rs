//! Sliding-window ops over the last two dims: the geometry of a window (kernel, stride,
//! padding, dilation) and its inference, and the kernels convolutions and pooling are built on:
//! `im2col` (PyTorch's `unfold`), its adjoint `col2im` (`fold`) and `max_pool2d`.

use crate::device::{Device, pick};
use crate::{DType, cpu};
use eddy_vm::instruction::Kernel;

pub use crate::window::{Pair, Window2d};

/// The kernel of `im2col` (PyTorch's `unfold`): contiguous float input `[batch, channels, h,
/// w]` of `dtype` at `offset` to `[batch, channels · taps, positions]`, row `c · taps + tap`
/// holding what tap `tap` of each window position reads from plane `c` (zero in the padding).
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`]).
///
/// # Examples
///
/// ```
/// use eddy_ops::{conv::{im2col, Window2d}, DType, Device};
/// let w = Window2d::new("unfold", [1, 1, 4, 4], 2.into(), 1.into(), 0.into(), 1.into(), false)?;
/// assert!(im2col(Device::CPU, DType::F32, w, 0).is_some());
/// # Ok::<(), eddy_ops::Error>(())
/// ```
pub fn im2col(
    device: Device,
    dtype: DType,
    w: Window2d,
    offset: usize,
) -> Option<impl Kernel + use<>> {
    pick!(device, cpu::conv::im2col(dtype, w, offset))
}

/// The kernel of a convolution of one group for inference, on the CPU: contiguous images
/// `[batch, channels, h, w]` of `dtype` (`f32` or `f64`) at `offsets[0]`, the weight `[out,
/// channels · taps]` at `offsets[1]` and, when `bias`, the bias `[out]` at `offsets[2]`, to
/// `[batch, out, positions]`, then ReLU when `relu`. Each block of positions is unfolded and
/// multiplied while it is in cache; no columns are kept for a gradient.
///
/// `None` if `device` has no kernel for it (the caller takes `im2col` and a product).
///
/// # Examples
///
/// ```
/// use eddy_ops::{conv::{conv2d_blocked, Window2d}, DType, Device};
/// let w = Window2d::new("conv2d", [1, 3, 8, 8], 3.into(), 1.into(), 1.into(), 1.into(), false)?;
/// assert!(conv2d_blocked(Device::CPU, DType::F32, w, 4, [0; 3], true, false).is_some());
/// # Ok::<(), eddy_ops::Error>(())
/// ```
pub fn conv2d_blocked(
    device: Device,
    dtype: DType,
    w: Window2d,
    out_channels: usize,
    offsets: [usize; 3],
    bias: bool,
    relu: bool,
) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::conv_blocked::conv2d_blocked(dtype, w, out_channels, offsets, bias, relu)
    )
}

/// The kernel of `col2im` (PyTorch's `fold`), the adjoint of [`im2col`]: contiguous columns
/// `[batch, channels · taps, positions]` of `dtype` at `offset` to `[batch, channels, h, w]`,
/// each element the sum of every column entry that reads it.
///
/// `None` if `device` has no kernel for it.
///
/// # Examples
///
/// ```
/// use eddy_ops::{conv::{col2im, Window2d}, DType, Device};
/// let w = Window2d::new("fold", [1, 1, 4, 4], 2.into(), 1.into(), 0.into(), 1.into(), false)?;
/// assert!(col2im(Device::CPU, DType::F32, w, 0).is_some());
/// # Ok::<(), eddy_ops::Error>(())
/// ```
pub fn col2im(
    device: Device,
    dtype: DType,
    w: Window2d,
    offset: usize,
) -> Option<impl Kernel + use<>> {
    pick!(device, cpu::conv::col2im(dtype, w, offset))
}

/// The kernel of `max_pool2d`: contiguous float input `[batch, channels, h, w]` of `dtype` at
/// `offset` to the window maxima (output 0, `[batch, channels, out_h, out_w]`) and their
/// positions in the plane, `row · w + col` (output 1, `i64`); padding never wins, NaN does.
///
/// `None` if `device` has no kernel for it.
///
/// # Examples
///
/// ```
/// use eddy_ops::{conv::{max_pool2d, Window2d}, DType, Device};
/// let w = Window2d::new("max_pool2d", [1, 1, 4, 4], 2.into(), 2.into(), 0.into(), 1.into(), false)?;
/// assert!(max_pool2d(Device::CPU, DType::F32, w, 0).is_some());
/// # Ok::<(), eddy_ops::Error>(())
/// ```
pub fn max_pool2d(
    device: Device,
    dtype: DType,
    w: Window2d,
    offset: usize,
) -> Option<impl Kernel + use<>> {
    pick!(device, cpu::conv::max_pool2d(dtype, w, offset))
}

/// The kernel of `max_pool2d`'s gradient: the output's gradient (contiguous `[planes,
/// positions]` of `dtype` at `offset`) added at the positions of the maxima (`i64`, at
/// `idx_offset`) into `[planes, h · w]`.
///
/// `None` if `device` has no kernel for it.
///
/// # Examples
///
/// ```
/// use eddy_ops::{conv::{max_pool2d_backward, Window2d}, DType, Device};
/// let w = Window2d::new("max_pool2d", [1, 1, 4, 4], 2.into(), 2.into(), 0.into(), 1.into(), false)?;
/// assert!(max_pool2d_backward(Device::CPU, DType::F32, w, 0, 0).is_some());
/// # Ok::<(), eddy_ops::Error>(())
/// ```
pub fn max_pool2d_backward(
    device: Device,
    dtype: DType,
    w: Window2d,
    offset: usize,
    idx_offset: usize,
) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::conv::max_pool2d_backward(dtype, w, offset, idx_offset)
    )
}
