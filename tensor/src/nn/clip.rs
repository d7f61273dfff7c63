//! Gradient clipping: [`clip_grad_norm`](super::clip_grad_norm), [`clip_grad_value`](super::clip_grad_value).

use crate::{DType, Error, Result, Tensor};

/// Scales the gradients of `params` so that their joint `norm_type`-norm (the norm of the
/// vector of every gradient element) is at most `max_norm`, and returns that norm as measured
/// before clipping: PyTorch's `nn.utils.clip_grad_norm_`. Parameters without a gradient are
/// skipped. `norm_type` is any `p > 0` or `f64::INFINITY` (the largest magnitude).
///
/// Nothing waits for the gradients: the norm and the scale factor
/// `min(1, max_norm / (norm + 1e-6))` are tensor ops, and every gradient is multiplied by the
/// factor (by 1 when it is under the bound), as PyTorch does. Each gradient is replaced by the
/// product, not scaled in place, so a gradient tensor that two parameters share is scaled once
/// for each. The norm is computed in `f64` if any gradient is `f64`, else in `f32`. As with
/// PyTorch's default (`error_if_nonfinite=False`), a non-finite norm is not an error: a NaN
/// norm makes every gradient NaN, and an infinite one makes the factor 0 (finite elements
/// become 0, infinite ones NaN).
///
/// # Errors
///
/// `InvalidArgument` (op `clip_grad_norm`) for a negative or non-finite `max_norm`, or a
/// `norm_type` that is NaN or not positive; `UnsupportedDType` for an integer gradient. Both
/// are found before any gradient changes.
///
/// # Examples
///
/// ```
/// use eddy_tensor::{nn, Tensor};
/// let w = Tensor::from_vec(vec![1f32, 1.0], [2])?.requires_grad_(true)?;
/// w.mul_scalar(3.0)?.sum_all()?.backward()?; // grad [3, 3], of norm √18
/// let norm = nn::clip_grad_norm(&[w.clone()], 1.0, 2.0)?;
/// assert!((norm.item::<f32>()? - 18f32.sqrt()).abs() < 1e-5);
/// let g = w.grad().unwrap().to_vec::<f32>()?;
/// assert!((g[0] - 0.5f32.sqrt()).abs() < 1e-5 && g[0] == g[1]); // now of norm 1
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
#[track_caller]
pub fn clip_grad_norm(params: &[Tensor], max_norm: f64, norm_type: f64) -> Result<Tensor> {
    const OP: &str = "clip_grad_norm";
    if !(max_norm.is_finite() && max_norm >= 0.0) {
        return Err(Error::invalid(
            OP,
            format!("max_norm must be finite and at least 0, got {max_norm}"),
        ));
    }
    if norm_type.is_nan() || norm_type <= 0.0 {
        return Err(Error::invalid(
            OP,
            format!("norm_type must be positive or infinite, got {norm_type}"),
        ));
    }
    let grads = float_grads(OP, params)?;
    let _g = crate::no_grad();
    if grads.is_empty() {
        return match params.first() {
            Some(p) => p.new_filled(crate::Shape::default(), DType::F32, 0.0),
            None => Tensor::scalar(0f32),
        };
    }
    let wide = if grads.iter().any(|(_, g)| g.dtype() == DType::F64) {
        DType::F64
    } else {
        DType::F32
    };
    let norms = (grads.iter())
        .map(|(_, g)| {
            g.flatten_all()?
                .norm(norm_type, &[0], false)?
                .to_dtype(wide)
        })
        .collect::<Result<Vec<Tensor>>>()?;
    let total = if norms.len() == 1 {
        norms[0].clone()
    } else {
        Tensor::stack(&norms.iter().collect::<Vec<_>>(), 0)?.norm(norm_type, &[0], false)?
    };
    let factor = (total.add_scalar(1e-6)?.pow_scalar(-1.0)?).mul_scalar(max_norm)?;
    let factor = factor.clamp_max(1.0)?;
    for (p, g) in &grads {
        p.set_grad(Some(g.mul(&factor.to_dtype(g.dtype())?)?));
    }
    Ok(total)
}

/// Clamps every gradient element of `params` into `[-clip_value, clip_value]`: PyTorch's
/// `nn.utils.clip_grad_value_`. Parameters without a gradient are skipped; each gradient is
/// replaced by its clamped copy.
///
/// # Errors
///
/// `InvalidArgument` (op `clip_grad_value`) for a negative or non-finite `clip_value`;
/// `UnsupportedDType` for an integer gradient; nothing changes on an error.
///
/// # Examples
///
/// ```
/// use eddy_tensor::{nn, Tensor};
/// let w = Tensor::from_vec(vec![1f32, -2.0], [2])?.requires_grad_(true)?;
/// w.mul(&Tensor::from_vec(vec![5f32, -0.5], [2])?)?.sum_all()?.backward()?; // grad [5, -0.5]
/// nn::clip_grad_value(&[w.clone()], 1.0)?;
/// assert_eq!(w.grad().unwrap().to_vec::<f32>()?, [1.0, -0.5]);
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
#[track_caller]
pub fn clip_grad_value(params: &[Tensor], clip_value: f64) -> Result<()> {
    const OP: &str = "clip_grad_value";
    if !(clip_value.is_finite() && clip_value >= 0.0) {
        return Err(Error::invalid(
            OP,
            format!("clip_value must be finite and at least 0, got {clip_value}"),
        ));
    }
    let grads = float_grads(OP, params)?;
    let _g = crate::no_grad();
    for (p, g) in &grads {
        p.set_grad(Some(g.clamp(Some(-clip_value), Some(clip_value))?));
    }
    Ok(())
}

/// The parameters that have a gradient, with it; `UnsupportedDType` for `op` if one of the
/// gradients is not a float tensor.
#[track_caller]
fn float_grads<'a>(op: &'static str, params: &'a [Tensor]) -> Result<Vec<(&'a Tensor, Tensor)>> {
    let grads: Vec<(&Tensor, Tensor)> = (params.iter())
        .filter_map(|p| Some((p, p.grad()?)))
        .collect();
    if let Some((_, g)) = grads.iter().find(|(_, g)| !g.dtype().is_float()) {
        return Err(Error::UnsupportedDType {
            at: crate::Caller::here(),
            op,
            dtype: g.dtype(),
        });
    }
    Ok(grads)
}

/// Checks that `params` are leaves that require grad (for optimizers).
#[track_caller]
pub(crate) fn check_params(op: &'static str, params: &[Tensor]) -> Result<()> {
    if let Some(p) = params.iter().find(|p| !p.requires_grad() || !p.is_leaf()) {
        return Err(Error::invalid(
            op,
            format!("{p:?} is not a leaf that requires grad"),
        ));
    }
    // A parameter listed twice would be updated twice per step.
    let mut seen = std::collections::HashMap::new();
    for (i, p) in params.iter().enumerate() {
        if let Some(first) = seen.insert(p.id(), i) {
            return Err(Error::invalid(
                op,
                format!("parameters {first} and {i} are the same tensor"),
            ));
        }
    }
    Ok(())
}
