//! Row-wise network ops: the kernel for the operands' device.

pub use crate::attention::{Attention, AttentionShape, MaskLayout, Rows, infer_attention};
use crate::device::{Device, pick};
pub use crate::kinds::{ClassDims, IGNORE_INDEX};
use crate::{DType, Error, Result, cpu};
use eddy_vm::instruction::Kernel;

/// The kernel of scaled dot-product attention (see [`cpu::attention::attention`]) on
/// `device`: queries, keys and values dense at `offsets`, an additive mask where `mask` says.
///
/// `None` if `device` has no kernel for it.
///
/// # Examples
///
/// ```
/// use eddy_ops::{nn::{attention, Attention, Rows}, DType, Device};
/// let g = Attention { batch: 1, l: 4, s: 4, e: 8, ev: 8, scale: 0.25, causal: true };
/// let d = Rows::dense(0, 4, 8);
/// assert!(attention(Device::CPU, DType::F32, g, [d; 4], None).is_some());
/// ```
pub fn attention(
    device: Device,
    dtype: DType,
    g: Attention,
    lays: [Rows; 4],
    mask: Option<MaskLayout>,
) -> Option<impl Kernel + use<>> {
    pick!(device, cpu::attention::attention(dtype, g, lays, mask))
}

/// The kernel of the gradient of scaled dot-product attention (see
/// [`cpu::attention::attention_backward`]) on `device`.
///
/// `None` if `device` has no kernel for it.
///
/// # Examples
///
/// ```
/// use eddy_ops::{nn::{attention_backward, Attention, Rows}, DType, Device};
/// let g = Attention { batch: 1, l: 4, s: 4, e: 8, ev: 8, scale: 0.25, causal: false };
/// let d = Rows::dense(0, 4, 8);
/// assert!(attention_backward(Device::CPU, DType::F32, g, [d; 8], None).is_some());
/// ```
pub fn attention_backward(
    device: Device,
    dtype: DType,
    g: Attention,
    lays: [Rows; 8],
    mask: Option<MaskLayout>,
) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::attention::attention_backward(dtype, g, lays, mask)
    )
}

/// The kernel of layer norm over the last dim (see [`cpu::norm::layer_norm`]) on `device`.
///
/// `None` if `device` has no kernel for it: the tensor layer then composes it.
///
/// # Examples
///
/// ```
/// use eddy_ops::{cpu::norm::NormLayout, nn::layer_norm, DType, Device};
/// let l = NormLayout { rows: 4, cols: 8, x: 0, weight: None, bias: None, eps: 1e-5 };
/// assert!(layer_norm(Device::CPU, DType::F32, l).is_some());
/// ```
pub fn layer_norm(
    device: Device,
    dtype: DType,
    l: cpu::norm::NormLayout,
) -> Option<impl Kernel + use<>> {
    pick!(device, cpu::norm::layer_norm(dtype, l))
}

/// The kernel of layer norm's gradient (see [`cpu::norm::layer_norm_backward`]) on `device`.
///
/// `None` if `device` has no kernel for it.
///
/// # Examples
///
/// ```
/// use eddy_ops::{cpu::norm::NormLayout, nn::layer_norm_backward, DType, Device};
/// let l = NormLayout { rows: 4, cols: 8, x: 0, weight: Some(0), bias: Some(0), eps: 1e-5 };
/// assert!(layer_norm_backward(Device::CPU, DType::F32, l, 0).is_some());
/// ```
pub fn layer_norm_backward(
    device: Device,
    dtype: DType,
    l: cpu::norm::NormLayout,
    x_offset: usize,
) -> Option<impl Kernel + use<>> {
    pick!(device, cpu::norm::layer_norm_backward(dtype, l, x_offset))
}

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

/// The checks of class-index targets of `target` (dims, dtype) for the scores `scores`
/// (`[N, C]`, a float dtype) in the loss `op`: `i64` or `u8` targets of shape `[N]`.
///
/// # Errors
///
/// `UnsupportedDType` for scores that are not floats or targets of another dtype;
/// `ShapeMismatch` naming both shapes.
///
/// # Examples
///
/// ```
/// use eddy_ops::{nn::check_class_targets, DType};
/// let ok = check_class_targets("nll_loss", (&[4, 10], DType::F32), (&[4], DType::I64));
/// assert!(ok.is_ok());
/// assert!(check_class_targets("nll_loss", (&[4, 10], DType::F32), (&[3], DType::I64)).is_err());
/// assert!(check_class_targets("nll_loss", (&[4, 10], DType::I64), (&[4], DType::I64)).is_err());
/// ```
#[track_caller]
pub fn check_class_targets(
    op: &'static str,
    scores: (&[usize], DType),
    target: (&[usize], DType),
) -> Result<()> {
    let refused = if !scores.1.is_float() {
        Some(scores.1)
    } else if !matches!(target.1, DType::I64 | DType::U8) {
        Some(target.1)
    } else {
        None
    };
    if let Some(dtype) = refused {
        return Err(Error::UnsupportedDType {
            at: crate::Caller::here(),
            op,
            dtype,
        });
    }
    if scores.0.len() != 2 || target.0.len() != 1 || target.0[0] != scores.0[0] {
        return Err(Error::ShapeMismatch {
            at: crate::Caller::here(),
            op,
            lhs: scores.0.to_vec(),
            rhs: target.0.to_vec(),
        });
    }
    Ok(())
}

/// The check of class targets whose values are known to lie in `lo..=hi` against `classes`
/// classes: each is a class or [`IGNORE_INDEX`].
///
/// # Errors
///
/// `IndexOutOfRange` naming the target out of range.
///
/// # Examples
///
/// ```
/// use eddy_ops::nn::{check_class_range, IGNORE_INDEX};
/// assert!(check_class_range("nll_loss", 10, (IGNORE_INDEX, 9)).is_ok());
/// assert!(check_class_range("nll_loss", 10, (0, 10)).is_err());
/// assert!(check_class_range("nll_loss", 10, (-1, 3)).is_err());
/// ```
#[track_caller]
pub fn check_class_range(op: &'static str, classes: usize, (lo, hi): (i64, i64)) -> Result<()> {
    let c = i64::try_from(classes).unwrap_or(i64::MAX);
    if hi >= c || (lo < 0 && lo != IGNORE_INDEX) {
        return Err(Error::IndexOutOfRange {
            at: crate::Caller::here(),
            op,
            index: if hi >= c { hi } else { lo },
            size: classes,
        });
    }
    Ok(())
}

/// The K-dimensional form of a class loss `op`, as PyTorch's: scores `[N, C, d1, …]` against
/// class indices `[N, d1, …]` (or probabilities `[N, C, d1, …]` where `probs`). The positions'
/// dims (`[N, d1, …]`) for a rank of 3 or more, `None` for a lower rank.
///
/// # Errors
///
/// `ShapeMismatch` for a target that does not fit.
///
/// # Examples
///
/// ```
/// use eddy_ops::nn::class_positions;
/// assert_eq!(class_positions("nll_loss", &[2, 5, 3], &[2, 3], false)?, Some(vec![2, 3]));
/// assert_eq!(class_positions("nll_loss", &[2, 5], &[2], false)?, None);
/// assert!(class_positions("nll_loss", &[2, 5, 3], &[2, 5, 3], false).is_err());
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[track_caller]
pub fn class_positions(
    op: &'static str,
    scores: &[usize],
    target: &[usize],
    probs: bool,
) -> Result<Option<Vec<usize>>> {
    if scores.len() < 3 {
        return Ok(None);
    }
    let positions: Vec<usize> = (scores.iter().enumerate())
        .filter(|&(i, _)| i != 1)
        .map(|(_, &d)| d)
        .collect();
    let fits = if probs {
        target == scores
    } else {
        target == positions.as_slice()
    };
    if !fits {
        return Err(Error::ShapeMismatch {
            at: crate::Caller::here(),
            op,
            lhs: scores.to_vec(),
            rhs: target.to_vec(),
        });
    }
    Ok(Some(positions))
}

/// The check of a loss `op` whose operands have one shape (`mse_loss`, class probabilities
/// in `cross_entropy`).
///
/// # Errors
///
/// `ShapeMismatch` naming both shapes.
///
/// # Examples
///
/// ```
/// use eddy_ops::nn::check_same_shape;
/// assert!(check_same_shape("mse_loss", &[3], &[3]).is_ok());
/// assert!(check_same_shape("mse_loss", &[3], &[3, 1]).is_err());
/// ```
#[track_caller]
pub fn check_same_shape(op: &'static str, input: &[usize], target: &[usize]) -> Result<()> {
    if input != target {
        return Err(Error::ShapeMismatch {
            at: crate::Caller::here(),
            op,
            lhs: input.to_vec(),
            rhs: target.to_vec(),
        });
    }
    Ok(())
}

/// The inference of `softmax` or `log_softmax` (`op`) of a tensor of `dims` and `dtype` along
/// `dim`: the dim, normalised (a 0-dim tensor takes 0 or -1 and gives 0).
///
/// # Errors
///
/// `UnsupportedDType` for a dtype that is not a float; `InvalidDim`.
///
/// # Examples
///
/// ```
/// use eddy_ops::{nn::infer_softmax, DType};
/// assert_eq!(infer_softmax("softmax", &[2, 3], DType::F32, -1)?, 1);
/// assert!(infer_softmax("softmax", &[2, 3], DType::I64, -1).is_err());
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[track_caller]
pub fn infer_softmax(op: &'static str, dims: &[usize], dtype: DType, dim: isize) -> Result<usize> {
    if !dtype.is_float() {
        return Err(Error::UnsupportedDType {
            at: crate::Caller::here(),
            op,
            dtype,
        });
    }
    crate::norm_dim(op, dim, dims.len().max(1))
}

/// The checks of `layer_norm` over the last `normalized` dims of `dims`, with affine terms of
/// the shapes `affine` (each must be those dims).
///
/// # Errors
///
/// `InvalidArgument` unless `1 ≤ normalized ≤` the rank; `ShapeMismatch` for an affine term
/// of another shape.
///
/// # Examples
///
/// ```
/// use eddy_ops::nn::check_layer_norm;
/// assert!(check_layer_norm(&[4, 8], 1, &[&[8]]).is_ok());
/// assert!(check_layer_norm(&[4, 8], 1, &[&[4]]).is_err());
/// assert!(check_layer_norm(&[4, 8], 3, &[]).is_err());
/// ```
#[track_caller]
pub fn check_layer_norm(dims: &[usize], normalized: usize, affine: &[&[usize]]) -> Result<()> {
    if normalized == 0 || normalized > dims.len() {
        return Err(Error::invalid(
            "layer_norm",
            format!("cannot normalise {normalized} dims of {dims:?}"),
        ));
    }
    let tail = &dims[dims.len() - normalized..];
    for &t in affine {
        if t != tail {
            return Err(Error::ShapeMismatch {
                at: crate::Caller::here(),
                op: "layer_norm",
                lhs: tail.to_vec(),
                rhs: t.to_vec(),
            });
        }
    }
    Ok(())
}
