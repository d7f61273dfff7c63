//! Models the CLI and the benchmarks train, and the training loop they share.

use crate::tensor::nn::{Func, Linear, Module, Sequential};
use crate::tensor::optim::Optimizer;
use crate::{DType, Result, Tensor};

/// A ReLU multi-layer perceptron with layer widths `sizes` (`[784, 512, 512, 10]`).
///
/// # Errors
///
/// Engine errors.
///
/// # Examples
///
/// ```
/// let m = eddy::models::mlp(&[4, 8, 3])?;
/// use eddy::tensor::nn::Module;
/// assert_eq!(m.parameters().len(), 4);
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn mlp(sizes: &[usize]) -> Result<Sequential> {
    let mut s = Sequential::new();
    for (i, w) in sizes.windows(2).enumerate() {
        s = s.add(Linear::new(w[0], w[1], true, DType::F32)?);
        if i + 2 < sizes.len() {
            s = s.add(Func::new(Tensor::relu));
        }
    }
    Ok(s)
}

/// One training step: forward, cross-entropy, backward, update. Returns the loss tensor
/// (not synced: reading it is the caller's choice).
///
/// # Errors
///
/// The errors of the ops it runs.
pub fn train_step(
    model: &dyn Module,
    opt: &mut dyn Optimizer,
    x: &Tensor,
    y: &Tensor,
) -> Result<Tensor> {
    opt.zero_grad();
    let loss = model.forward(x)?.cross_entropy(y)?;
    loss.backward()?;
    opt.step()?;
    Ok(loss)
}

/// The fraction of rows of `x` that `model` classifies as `labels`.
///
/// # Errors
///
/// Engine errors.
pub fn accuracy(model: &dyn Module, x: &Tensor, labels: &[i64]) -> Result<f64> {
    let _g = crate::no_grad();
    let pred = model.forward(x)?.argmax(-1, false)?.to_vec::<i64>()?;
    let hits = pred.iter().zip(labels).filter(|(a, b)| a == b).count();
    Ok(hits as f64 / labels.len().max(1) as f64)
}
