//! The layers of a convolutional network, with PyTorch's parameter names and `state_dict`
//! layout: [`Conv1d`](super::Conv1d), [`Conv2d`](super::Conv2d), [`BatchNorm2d`](super::BatchNorm2d), [`GroupNorm`](super::GroupNorm), [`MaxPool2d`](super::MaxPool2d), [`AvgPool2d`](super::AvgPool2d),
//! [`AdaptiveAvgPool2d`](super::AdaptiveAvgPool2d) and [`Flatten`](super::Flatten).

use super::module::{Init, Module};
use crate::{DType, Error, Pair, Result, Tensor};
use std::sync::atomic::{AtomicBool, Ordering};

/// The options of a convolution layer beside its channels and kernel, with PyTorch's defaults
/// (stride 1, padding 0, dilation 1, one group, a bias).
///
/// # Examples
///
/// ```
/// use eddy_tensor::{nn::ConvOptions, Pair};
/// let o = ConvOptions::default().stride(2).padding(1).groups(4).bias(false);
/// assert_eq!((o.stride, o.padding, o.groups, o.bias), (Pair([2, 2]), Pair([1, 1]), 4, false));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvOptions {
    /// The step between two windows.
    pub stride: Pair,
    /// Zeros added on each side of each spatial dim.
    pub padding: Pair,
    /// The spacing of the window's taps.
    pub dilation: Pair,
    /// Channel groups: each sees `in / groups` inputs and gives `out / groups` outputs.
    pub groups: usize,
    /// Whether the layer adds a learned bias.
    pub bias: bool,
}

impl Default for ConvOptions {
    fn default() -> ConvOptions {
        ConvOptions {
            stride: Pair([1, 1]),
            padding: Pair([0, 0]),
            dilation: Pair([1, 1]),
            groups: 1,
            bias: true,
        }
    }
}

impl ConvOptions {
    /// With `stride`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::ConvOptions, Pair};
    /// assert_eq!(ConvOptions::default().stride((1, 2)).stride, Pair([1, 2]));
    /// ```
    pub fn stride(self, stride: impl Into<Pair>) -> ConvOptions {
        ConvOptions {
            stride: stride.into(),
            ..self
        }
    }
    /// With `padding`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::ConvOptions, Pair};
    /// assert_eq!(ConvOptions::default().padding(1).padding, Pair([1, 1]));
    /// ```
    pub fn padding(self, padding: impl Into<Pair>) -> ConvOptions {
        ConvOptions {
            padding: padding.into(),
            ..self
        }
    }
    /// With `dilation`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::ConvOptions, Pair};
    /// assert_eq!(ConvOptions::default().dilation(2).dilation, Pair([2, 2]));
    /// ```
    pub fn dilation(self, dilation: impl Into<Pair>) -> ConvOptions {
        ConvOptions {
            dilation: dilation.into(),
            ..self
        }
    }
    /// With `groups`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::nn::ConvOptions;
    /// assert_eq!(ConvOptions::default().groups(2).groups, 2);
    /// ```
    pub fn groups(self, groups: usize) -> ConvOptions {
        ConvOptions { groups, ..self }
    }
    /// With or without a bias.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::nn::ConvOptions;
    /// assert!(!ConvOptions::default().bias(false).bias);
    /// ```
    pub fn bias(self, bias: bool) -> ConvOptions {
        ConvOptions { bias, ..self }
    }

    /// The weight of `shape` (`[out, in / groups, ..kernel]`) and bias of a new layer, as
    /// PyTorch initialises them: `U(±1/√fan_in)`, `fan_in = in / groups · taps`.
    #[track_caller]
    fn parameters(
        &self,
        op: &'static str,
        inp: usize,
        shape: &[usize],
        dtype: DType,
    ) -> Result<(Tensor, Option<Tensor>)> {
        let out = shape[0];
        if self.groups == 0 || !inp.is_multiple_of(self.groups) || !out.is_multiple_of(self.groups)
        {
            return Err(Error::invalid(
                op,
                format!(
                    "expects in ({inp}) and out ({out}) channels that divide into groups, got {} groups",
                    self.groups
                ),
            ));
        }
        let fan_in: usize = shape[1..].iter().product();
        let weight = Init::KaimingUniform
            .tensor(shape, fan_in, out, dtype)?
            .requires_grad_(true)?;
        let bias = self
            .bias
            .then(|| Init::KaimingUniform.tensor(&[out], fan_in, out, dtype))
            .transpose()?
            .map(|b| b.requires_grad_(true))
            .transpose()?;
        Ok((weight, bias))
    }
}

/// The named parameters `weight` and, if present, `bias`.
fn weight_and_bias(weight: &Tensor, bias: Option<&Tensor>) -> Vec<(String, Tensor)> {
    std::iter::once(("weight".to_string(), weight.clone()))
        .chain(bias.map(|b| ("bias".to_string(), b.clone())))
        .collect()
}

/// A 2-d convolution layer (PyTorch's `nn.Conv2d`): [`Tensor::conv2d`] by `weight` (`[out,
/// in / groups, kh, kw]`) and `bias` (`[out]`).
///
/// # Examples
///
/// ```
/// use eddy_tensor::{nn::{Conv2d, ConvOptions, Module}, Tensor, DType};
/// let conv = Conv2d::new(3, 8, 3, ConvOptions::default().padding(1), DType::F32)?;
/// let y = conv.forward(&Tensor::randn([2, 3, 16, 16], 0.0, 1.0, DType::F32)?)?;
/// assert_eq!(y.dims(), &[2, 8, 16, 16]);
/// let names: Vec<String> = conv.named_parameters().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["weight", "bias"]);
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
pub struct Conv2d {
    /// `[out, in / groups, kh, kw]`
    pub weight: Tensor,
    /// `[out]`
    pub bias: Option<Tensor>,
    /// Stride, padding, dilation and groups (the bias flag is `bias.is_some()`).
    pub options: ConvOptions,
}

impl Conv2d {
    /// A layer from `inp` to `out` channels with a `kernel` window, initialised as PyTorch's.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if the channels do not divide into the groups.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::{Conv2d, ConvOptions}, DType};
    /// let c = Conv2d::new(4, 6, (3, 1), ConvOptions::default().groups(2), DType::F32)?;
    /// assert_eq!(c.weight.dims(), &[6, 2, 3, 1]);
    /// assert!(Conv2d::new(4, 6, 3, ConvOptions::default().groups(4), DType::F32).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn new(
        inp: usize,
        out: usize,
        kernel: impl Into<Pair>,
        options: ConvOptions,
        dtype: DType,
    ) -> Result<Conv2d> {
        let k = kernel.into().0;
        let shape = [out, inp / options.groups.max(1), k[0], k[1]];
        let (weight, bias) = options.parameters("Conv2d", inp, &shape, dtype)?;
        Ok(Conv2d {
            weight,
            bias,
            options,
        })
    }
}

impl Module for Conv2d {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let o = &self.options;
        x.conv2d(
            &self.weight,
            self.bias.as_ref(),
            o.stride,
            o.padding,
            o.dilation,
            o.groups,
        )
    }
    #[track_caller]
    fn forward_relu(&self, x: &Tensor) -> Option<Result<Tensor>> {
        let o = &self.options;
        let pairs = [o.stride, o.padding, o.dilation];
        Some(x.conv2d_with(&self.weight, self.bias.as_ref(), pairs, o.groups, true))
    }
    fn parameters(&self) -> Vec<Tensor> {
        std::iter::once(self.weight.clone())
            .chain(self.bias.clone())
            .collect()
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        weight_and_bias(&self.weight, self.bias.as_ref())
    }
}

/// A 1-d convolution layer (PyTorch's `nn.Conv1d`): [`Tensor::conv1d`] by `weight` (`[out,
/// in / groups, k]`) and `bias` (`[out]`). Of the options' pairs, the second entry is used.
///
/// # Examples
///
/// ```
/// use eddy_tensor::{nn::{Conv1d, ConvOptions, Module}, Tensor, DType};
/// let conv = Conv1d::new(2, 4, 5, ConvOptions::default().stride(2), DType::F32)?;
/// assert_eq!(conv.weight.dims(), &[4, 2, 5]);
/// assert_eq!(conv.forward(&Tensor::ones([3, 2, 11], DType::F32)?)?.dims(), &[3, 4, 4]);
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
pub struct Conv1d {
    /// `[out, in / groups, k]`
    pub weight: Tensor,
    /// `[out]`
    pub bias: Option<Tensor>,
    /// Stride, padding, dilation (second entries) and groups.
    pub options: ConvOptions,
}

impl Conv1d {
    /// A layer from `inp` to `out` channels with a window of `kernel`, initialised as
    /// PyTorch's.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if the channels do not divide into the groups.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::{Conv1d, ConvOptions}, DType};
    /// assert!(Conv1d::new(3, 6, 3, ConvOptions::default().groups(2), DType::F32).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn new(
        inp: usize,
        out: usize,
        kernel: usize,
        options: ConvOptions,
        dtype: DType,
    ) -> Result<Conv1d> {
        let shape = [out, inp / options.groups.max(1), kernel];
        let (weight, bias) = options.parameters("Conv1d", inp, &shape, dtype)?;
        Ok(Conv1d {
            weight,
            bias,
            options,
        })
    }
}

impl Module for Conv1d {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let o = &self.options;
        x.conv1d(
            &self.weight,
            self.bias.as_ref(),
            o.stride.0[1],
            o.padding.0[1],
            o.dilation.0[1],
            o.groups,
        )
    }
    fn parameters(&self) -> Vec<Tensor> {
        std::iter::once(self.weight.clone())
            .chain(self.bias.clone())
            .collect()
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        weight_and_bias(&self.weight, self.bias.as_ref())
    }
}

/// Batch normalisation over the channels of `[batch, channels, h, w]` input (PyTorch's
/// `nn.BatchNorm2d`, affine, tracking running statistics): [`Tensor::batch_norm`] with the
/// batch's statistics while training (updating the running ones) and the running ones in
/// evaluation. Its `state_dict` holds `weight`, `bias` and the buffers `running_mean`,
/// `running_var` and `num_batches_tracked`.
///
/// # Examples
///
/// ```
/// use eddy_tensor::{nn::{BatchNorm2d, Module}, Tensor, DType};
/// let bn = BatchNorm2d::new(3, DType::F32)?;
/// let x = Tensor::randn([4, 3, 5, 5], 2.0, 1.0, DType::F32)?;
/// let y = bn.forward(&x)?;
/// assert!(y.mean_all()?.item::<f32>()?.abs() < 1e-5);   // normalised by the batch
/// assert!(bn.running_mean.to_vec::<f32>()?.iter().all(|m| (m - 0.2).abs() < 0.05));
/// assert_eq!(bn.num_batches_tracked.item::<i64>()?, 1);
/// bn.set_training(false);
/// let z = bn.forward(&x)?;                                // now by the running statistics
/// assert!(z.mean_all()?.item::<f32>()? > 1.0);
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
pub struct BatchNorm2d {
    /// The scale, `[channels]`, ones at first.
    pub weight: Tensor,
    /// The shift, `[channels]`, zeros at first.
    pub bias: Tensor,
    /// The running mean, `[channels]`, zeros at first.
    pub running_mean: Tensor,
    /// The running (unbiased) variance, `[channels]`, ones at first.
    pub running_var: Tensor,
    /// Training batches seen, a 0-d `i64`.
    pub num_batches_tracked: Tensor,
    /// Added to the variance.
    pub eps: f64,
    /// How far the running statistics move towards each batch's.
    pub momentum: f64,
    training: AtomicBool,
}

impl BatchNorm2d {
    /// A layer over `channels`, with PyTorch's `eps` (1e-5) and `momentum` (0.1), training.
    ///
    /// # Errors
    ///
    /// Engine errors.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::{BatchNorm2d, Module}, DType};
    /// let bn = BatchNorm2d::new(2, DType::F32)?;
    /// assert_eq!(bn.parameters().len(), 2);
    /// let names: Vec<String> = bn.named_buffers().into_iter().map(|(n, _)| n).collect();
    /// assert_eq!(names, ["running_mean", "running_var", "num_batches_tracked"]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn new(channels: usize, dtype: DType) -> Result<BatchNorm2d> {
        Ok(BatchNorm2d {
            weight: Tensor::ones([channels], dtype)?.requires_grad_(true)?,
            bias: Tensor::zeros([channels], dtype)?.requires_grad_(true)?,
            running_mean: Tensor::zeros([channels], dtype)?,
            running_var: Tensor::ones([channels], dtype)?,
            num_batches_tracked: Tensor::zeros((), DType::I64)?,
            eps: 1e-5,
            momentum: 0.1,
            training: AtomicBool::new(true),
        })
    }

    /// Whether it normalises by the batch's statistics (training mode).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::{BatchNorm2d, Module}, DType};
    /// let bn = BatchNorm2d::new(2, DType::F32)?;
    /// bn.set_training(false);
    /// assert!(!bn.is_training());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn is_training(&self) -> bool {
        self.training.load(Ordering::Relaxed)
    }
}

impl Module for BatchNorm2d {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if x.rank() != 4 {
            return Err(Error::invalid(
                "BatchNorm2d",
                format!("expects 4-d input, got shape {:?}", x.dims()),
            ));
        }
        let training = self.is_training();
        let y = x.batch_norm(
            Some(&self.running_mean),
            Some(&self.running_var),
            Some(&self.weight),
            Some(&self.bias),
            training,
            self.momentum,
            self.eps,
        )?;
        if training {
            let _g = crate::no_grad();
            self.num_batches_tracked.add_scalar_(1)?;
        }
        Ok(y)
    }
    fn parameters(&self) -> Vec<Tensor> {
        vec![self.weight.clone(), self.bias.clone()]
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        weight_and_bias(&self.weight, Some(&self.bias))
    }
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        vec![
            ("running_mean".to_string(), self.running_mean.clone()),
            ("running_var".to_string(), self.running_var.clone()),
            (
                "num_batches_tracked".to_string(),
                self.num_batches_tracked.clone(),
            ),
        ]
    }
    fn set_training(&self, training: bool) {
        self.training.store(training, Ordering::Relaxed);
    }
}

/// Group normalisation (PyTorch's `nn.GroupNorm`): [`Tensor::group_norm`] with a learned
/// per-channel scale (`weight`) and shift (`bias`) when affine.
///
/// # Examples
///
/// ```
/// use eddy_tensor::{nn::{GroupNorm, Module}, Tensor, DType};
/// let gn = GroupNorm::new(2, 4, 1e-5, true, DType::F32)?;
/// let y = gn.forward(&Tensor::randn([3, 4, 5, 5], 1.0, 2.0, DType::F32)?)?;
/// assert!(y.mean_all()?.item::<f32>()?.abs() < 1e-5);
/// assert!(GroupNorm::new(3, 4, 1e-5, true, DType::F32).is_err());
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
pub struct GroupNorm {
    groups: usize,
    eps: f64,
    /// The scale, `[channels]`, if affine.
    pub weight: Option<Tensor>,
    /// The shift, `[channels]`, if affine.
    pub bias: Option<Tensor>,
}

impl GroupNorm {
    /// `channels` in `groups` groups.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if the channels do not divide into the groups or `eps` is negative or
    /// not finite.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::{GroupNorm, Module}, DType};
    /// assert!(GroupNorm::new(2, 4, 1e-5, false, DType::F32)?.parameters().is_empty());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn new(
        groups: usize,
        channels: usize,
        eps: f64,
        affine: bool,
        dtype: DType,
    ) -> Result<GroupNorm> {
        if groups == 0 || !channels.is_multiple_of(groups) || !(eps >= 0.0 && eps.is_finite()) {
            return Err(Error::invalid(
                "GroupNorm",
                format!(
                    "expects channels ({channels}) that divide into groups ({groups}) and a finite eps >= 0, got {eps}"
                ),
            ));
        }
        let (weight, bias) = if affine {
            (
                Some(Tensor::ones([channels], dtype)?.requires_grad_(true)?),
                Some(Tensor::zeros([channels], dtype)?.requires_grad_(true)?),
            )
        } else {
            (None, None)
        };
        Ok(GroupNorm {
            groups,
            eps,
            weight,
            bias,
        })
    }
}

impl Module for GroupNorm {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.group_norm(
            self.groups,
            self.weight.as_ref(),
            self.bias.as_ref(),
            self.eps,
        )
    }
    fn parameters(&self) -> Vec<Tensor> {
        self.weight.iter().chain(&self.bias).cloned().collect()
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        match &self.weight {
            Some(w) => weight_and_bias(w, self.bias.as_ref()),
            None => Vec::new(),
        }
    }
}

/// 2-d max pooling (PyTorch's `nn.MaxPool2d`): [`Tensor::max_pool2d`]; the stride defaults to
/// the kernel size.
///
/// # Examples
///
/// ```
/// use eddy_tensor::{nn::{MaxPool2d, Module}, Tensor, DType};
/// let pool = MaxPool2d::new(2);
/// assert_eq!(pool.forward(&Tensor::ones([1, 3, 8, 8], DType::F32)?)?.dims(), &[1, 3, 4, 4]);
/// let overlapping = MaxPool2d { stride: 1.into(), ..MaxPool2d::new(3) };
/// assert_eq!(overlapping.forward(&Tensor::ones([1, 3, 8, 8], DType::F32)?)?.dims(), &[1, 3, 6, 6]);
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxPool2d {
    /// The window.
    pub kernel: Pair,
    /// The step between windows.
    pub stride: Pair,
    /// Implicit `-∞` padding on each side.
    pub padding: Pair,
    /// The spacing of the window's taps.
    pub dilation: Pair,
    /// Whether the output size rounds up.
    pub ceil_mode: bool,
}

impl MaxPool2d {
    /// Pooling over `kernel` windows with a stride of the kernel, no padding.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::MaxPool2d, Pair};
    /// assert_eq!(MaxPool2d::new(3).stride, Pair([3, 3]));
    /// ```
    pub fn new(kernel: impl Into<Pair>) -> MaxPool2d {
        let kernel = kernel.into();
        MaxPool2d {
            kernel,
            stride: kernel,
            padding: Pair([0, 0]),
            dilation: Pair([1, 1]),
            ceil_mode: false,
        }
    }
}

impl Module for MaxPool2d {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.max_pool2d(
            self.kernel,
            self.stride,
            self.padding,
            self.dilation,
            self.ceil_mode,
        )
    }
}

/// 2-d average pooling (PyTorch's `nn.AvgPool2d`): [`Tensor::avg_pool2d`]; the stride
/// defaults to the kernel size and the padding counts in the divisor.
///
/// # Examples
///
/// ```
/// use eddy_tensor::{nn::{AvgPool2d, Module}, Tensor, DType};
/// let y = AvgPool2d::new(2).forward(&Tensor::ones([1, 1, 4, 4], DType::F32)?)?;
/// assert_eq!(y.to_vec::<f32>()?, [1.0; 4]);
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AvgPool2d {
    /// The window.
    pub kernel: Pair,
    /// The step between windows.
    pub stride: Pair,
    /// Zero padding on each side.
    pub padding: Pair,
    /// Whether the output size rounds up.
    pub ceil_mode: bool,
    /// Whether the padding counts in the divisor.
    pub count_include_pad: bool,
    /// A divisor replacing the window's size.
    pub divisor_override: Option<usize>,
}

impl AvgPool2d {
    /// Pooling over `kernel` windows with a stride of the kernel, no padding.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::AvgPool2d, Pair};
    /// assert_eq!(AvgPool2d::new((2, 3)).stride, Pair([2, 3]));
    /// ```
    pub fn new(kernel: impl Into<Pair>) -> AvgPool2d {
        let kernel = kernel.into();
        AvgPool2d {
            kernel,
            stride: kernel,
            padding: Pair([0, 0]),
            ceil_mode: false,
            count_include_pad: true,
            divisor_override: None,
        }
    }
}

impl Module for AvgPool2d {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.avg_pool2d(
            self.kernel,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
        )
    }
}

/// Adaptive 2-d average pooling to a fixed output size (PyTorch's `nn.AdaptiveAvgPool2d`):
/// [`Tensor::adaptive_avg_pool2d`].
///
/// # Examples
///
/// ```
/// use eddy_tensor::{nn::{AdaptiveAvgPool2d, Module}, Tensor, DType};
/// let y = AdaptiveAvgPool2d(1.into()).forward(&Tensor::ones([2, 5, 7, 7], DType::F32)?)?;
/// assert_eq!(y.dims(), &[2, 5, 1, 1]);
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdaptiveAvgPool2d(pub Pair);

impl Module for AdaptiveAvgPool2d {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.adaptive_avg_pool2d(self.0)
    }
}

/// Flattens dims `start..=end` into one (PyTorch's `nn.Flatten`, by default every dim but the
/// batch's): [`Tensor::flatten`].
///
/// # Examples
///
/// ```
/// use eddy_tensor::{nn::{Flatten, Module}, Tensor, DType};
/// let y = Flatten::default().forward(&Tensor::ones([2, 3, 4, 4], DType::F32)?)?;
/// assert_eq!(y.dims(), &[2, 48]);
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flatten {
    /// The first dim flattened.
    pub start: isize,
    /// The last dim flattened (negative counts from the end).
    pub end: isize,
}

impl Default for Flatten {
    fn default() -> Flatten {
        Flatten { start: 1, end: -1 }
    }
}

impl Module for Flatten {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.flatten(self.start, self.end)
    }
}
