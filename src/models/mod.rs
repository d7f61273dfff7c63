//! Models the CLI and the benchmarks train, and the training loop they share.

use crate::tensor::nn::{
    Conv2d, ConvOptions, Flatten, Func, Linear, MaxPool2d, Module, Relu, Sequential,
};
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
    mlp_with(sizes, |_, l| Ok(l))
}

/// [`mlp`] with each `Linear` passed through `lay` (given its index) before it joins the
/// model: to lay the layers out on devices, say. The layers are made in the same order, so a
/// seed gives the same initial values.
///
/// # Errors
///
/// Engine errors, and `lay`'s.
///
/// # Examples
///
/// ```
/// use eddy::tensor::global::{DeviceKind, Placement, Sbp};
/// use eddy::tensor::nn::Module;
/// let vm = eddy::Vm::builder().cpu_devices(2).build()?;
/// eddy::tensor::with_engine(&vm, || {
///     let p = Placement::new(DeviceKind::Cpu, [0, 1])?;
///     let b = [Sbp::Broadcast];
///     let m = eddy::models::mlp_with(&[4, 8, 3], |_, l| l.to_global(&p, &b, &b))?;
///     assert!(m.parameters().iter().all(|t| t.is_global()));
///     Ok::<(), eddy::Error>(())
/// })?;
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn mlp_with(
    sizes: &[usize],
    lay: impl Fn(usize, Linear) -> Result<Linear>,
) -> Result<Sequential> {
    let mut s = Sequential::new();
    for (i, w) in sizes.windows(2).enumerate() {
        s = s.add(lay(i, Linear::new(w[0], w[1], true, DType::F32)?)?);
        if i + 2 < sizes.len() {
            s = s.add(Relu);
        }
    }
    Ok(s)
}

/// A small convolutional classifier of `side × side` single-channel images, given as rows of
/// `side²` features or as `[batch, 1, side, side]`: conv(1→16, 3×3, padding 1), ReLU, 2×2 max pool, conv(16→32, 3×3,
/// padding 1), ReLU, 2×2 max pool, flatten, Linear to `classes`. Its `state_dict` names are
/// PyTorch's for the same `nn.Sequential` after an `nn.Unflatten` (`1.weight`, `4.weight`,
/// `8.weight`, …).
///
/// # Errors
///
/// `InvalidArgument` for a side below 4 (two poolings need it); engine errors.
///
/// # Examples
///
/// ```
/// use eddy::tensor::nn::Module;
/// use eddy::{DType, Tensor};
/// let m = eddy::models::cnn(8, 10)?;
/// let y = m.forward(&Tensor::ones([5, 64], DType::F32)?)?; // 5 images of 8×8, as rows
/// assert_eq!(y.dims(), &[5, 10]);
/// assert!(eddy::models::cnn(2, 10).is_err());
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn cnn(side: usize, classes: usize) -> Result<Sequential> {
    if side < 4 {
        return Err(crate::Error::invalid(
            "cnn",
            format!("expects images of at least 4×4, got {side}×{side}"),
        ));
    }
    let same = ConvOptions::default().padding(1);
    let pooled = (side / 2) / 2;
    Ok(Sequential::new()
        .add(Func::new(move |x: &Tensor| {
            x.reshape([x.dims().first().copied().unwrap_or(1), 1, side, side])
        }))
        .add(Conv2d::new(1, 16, 3, same, DType::F32)?)
        .add(Relu)
        .add(MaxPool2d::new(2))
        .add(Conv2d::new(16, 32, 3, same, DType::F32)?)
        .add(Relu)
        .add(MaxPool2d::new(2))
        .add(Flatten::default())
        .add(Linear::new(
            32 * pooled * pooled,
            classes,
            true,
            DType::F32,
        )?))
}

/// One training step: forward, cross-entropy, backward, update. Returns the loss tensor
/// (not synced: reading it is the caller's choice).
///
/// # Errors
///
/// The errors of the ops it runs.
///
/// # Examples
///
/// ```
/// use eddy::models::{mlp, train_step};
/// use eddy::tensor::{nn::Module, optim::Sgd};
/// use eddy::Tensor;
/// eddy::tensor::manual_seed(0);
/// let model = mlp(&[2, 8, 2])?;
/// let mut opt = Sgd::new(model.parameters(), 0.5)?;
/// let x = Tensor::from_vec(vec![0.0f32, 1.0, 1.0, 0.0, 0.1, 0.9, 0.9, 0.1], [4, 2])?;
/// let y = Tensor::from_vec(vec![1i64, 0, 1, 0], [4])?;
/// let first = train_step(&model, &mut opt, &x, &y)?.item::<f32>()?;
/// let mut last = first;
/// for _ in 0..20 {
///     last = train_step(&model, &mut opt, &x, &y)?.item::<f32>()?;
/// }
/// assert!(last < first, "{first} -> {last}");
/// # Ok::<(), eddy::Error>(())
/// ```
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
///
/// # Examples
///
/// ```
/// use eddy::tensor::nn::Func;
/// use eddy::Tensor;
/// // A "model" that passes its input through: it predicts the larger column.
/// let identity = Func::new(|x: &Tensor| Ok(x.clone()));
/// let x = Tensor::from_vec(vec![0.9f32, 0.1, 0.2, 0.8, 0.6, 0.4], [3, 2])?;
/// let acc = eddy::models::accuracy(&identity, &x, &[0, 1, 1])?;
/// assert!((acc - 2.0 / 3.0).abs() < 1e-12);
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn accuracy(model: &dyn Module, x: &Tensor, labels: &[i64]) -> Result<f64> {
    let _g = crate::no_grad();
    let pred = model.forward(x)?.argmax(-1, false)?.to_vec::<i64>()?;
    let hits = pred.iter().zip(labels).filter(|(a, b)| a == b).count();
    Ok(hits as f64 / labels.len().max(1) as f64)
}

mod transformer;
pub use transformer::{CharTransformer, TransformerConfig};
