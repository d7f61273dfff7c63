//! The [`Module`](super::Module) trait, the parameter [`Init`](super::Init) schemes, and [`Linear`](super::Linear), which modules can
//! be asked for (`Module::as_linear`).

use crate::{DType, Result, Tensor};

/// Something with a forward pass and parameters.
///
/// # Examples
///
/// A parameter-free module: only `forward` is required.
///
/// ```
/// use eddy_tensor::{nn::Module, Result, Tensor};
/// struct Double;
/// impl Module for Double {
///     fn forward(&self, x: &Tensor) -> Result<Tensor> {
///         x.mul_scalar(2.0)
///     }
/// }
/// let x = Tensor::from_vec(vec![1f32, 2.], [2])?;
/// assert_eq!(Double.forward(&x)?.to_vec::<f32>()?, [2., 4.]);
/// assert!(Double.parameters().is_empty()); // the defaults: no parameters
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
pub trait Module: Send + Sync {
    /// Runs the module.
    ///
    /// # Errors
    ///
    /// The errors of the ops it runs.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::{Linear, Module}, Tensor};
    /// let w = Tensor::from_vec(vec![1f32, 2., 3., 4.], [2, 2])?;
    /// let l = Linear { weight: w, bias: None };
    /// let y = l.forward(&Tensor::from_vec(vec![1f32, 1.], [1, 2])?)?; // x Wᵀ
    /// assert_eq!(y.to_vec::<f32>()?, [3., 7.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Result<Tensor>;
    /// The trainable tensors, in a stable order.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::{Linear, Module}, DType};
    /// let l = Linear::new(3, 2, true, DType::F32)?;
    /// let dims: Vec<Vec<usize>> = l.parameters().iter().map(|p| p.dims().to_vec()).collect();
    /// assert_eq!(dims, [vec![2, 3], vec![2]]); // weight, then bias
    /// assert!(l.parameters().iter().all(|p| p.requires_grad()));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    fn parameters(&self) -> Vec<Tensor> {
        Vec::new()
    }
    /// The trainable tensors with their names, in the order of
    /// [`parameters`](Self::parameters): PyTorch's `state_dict` keys (`weight`, `bias`, and
    /// `0.weight`, `2.bias`, … inside a [`Sequential`](super::Sequential)). [`save`](super::save) and [`load`](super::load) use them. The
    /// default names a module's parameters by their positions.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::{LayerNorm, Module}, DType};
    /// let ln = LayerNorm::new(&[4], 1e-5, true, DType::F32)?;
    /// let names: Vec<String> = ln.named_parameters().into_iter().map(|(n, _)| n).collect();
    /// assert_eq!(names, ["weight", "bias"]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        (self.parameters().into_iter().enumerate())
            .map(|(i, t)| (i.to_string(), t))
            .collect()
    }
    /// The module's state that is not trained, with its `state_dict` names: PyTorch's
    /// buffers, as a [`BatchNorm2d`](super::BatchNorm2d)'s running statistics. [`save`](super::save) and
    /// [`load`](super::load) write and read them after the parameters. None by default.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::{BatchNorm2d, Linear, Module, Sequential}, DType};
    /// assert!(Linear::new(3, 2, true, DType::F32)?.named_buffers().is_empty());
    /// let net = Sequential::new().add(BatchNorm2d::new(4, DType::F32)?);
    /// let names: Vec<String> = net.named_buffers().into_iter().map(|(n, _)| n).collect();
    /// assert_eq!(names, ["0.running_mean", "0.running_var", "0.num_batches_tracked"]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        Vec::new()
    }
    /// Switches between training and evaluation behaviour, as PyTorch's `model.train()` and
    /// `model.eval()`: [`Dropout`](super::Dropout) drops only while training. Modules start in training mode;
    /// the default does nothing (most modules behave the same in both).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::{Dropout, Module}, Tensor, DType};
    /// let d = Dropout::new(0.9)?;
    /// d.set_training(false); // eval mode: the input passes unchanged
    /// let x = Tensor::ones([8], DType::F32)?;
    /// assert_eq!(d.forward(&x)?.to_vec::<f32>()?, vec![1.0; 8]);
    /// assert!(!d.is_training());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    fn set_training(&self, training: bool) {
        let _ = training;
    }
    /// This module as a [`Linear`](super::Linear), if it is one. [`Sequential`](super::Sequential) runs a `Linear` followed by
    /// [`Relu`](super::Relu) as one [`Tensor::linear_relu`] instruction. `None` by default.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::{Linear, Module, Relu}, DType};
    /// assert!(Linear::new(3, 2, true, DType::F32)?.as_linear().is_some());
    /// assert!(Relu.as_linear().is_none());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    fn as_linear(&self) -> Option<&Linear> {
        None
    }
    /// This module followed by ReLU, as one op where the module has such a form: a
    /// [`Linear`](super::Linear) as [`Tensor::linear_relu`], a [`Conv2d`](super::Conv2d) as its convolution with the
    /// activation in the product's instruction. [`Sequential`](super::Sequential) runs a module and the
    /// [`Relu`](super::Relu) after it this way: the same values and gradients in one instruction. `None`
    /// where there is none (the default, but for a module that is a [`Linear`](super::Linear) through
    /// [`as_linear`](Self::as_linear)).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::{Conv2d, ConvOptions, Module, Relu}, Tensor, DType};
    /// let conv = Conv2d::new(2, 3, 3, ConvOptions::default(), DType::F32)?;
    /// let x = Tensor::randn([1, 2, 5, 5], 0.0, 1.0, DType::F32)?;
    /// let fused = conv.forward_relu(&x).expect("a fused form")?;
    /// assert_eq!(fused.to_vec::<f32>()?, conv.forward(&x)?.relu()?.to_vec::<f32>()?);
    /// assert!(Relu.forward_relu(&x).is_none());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    fn forward_relu(&self, x: &Tensor) -> Option<Result<Tensor>> {
        self.as_linear()
            .map(|l| x.linear_relu(&l.weight, l.bias.as_ref()))
    }
    /// Whether this module is [`Relu`](super::Relu), which [`Sequential`](super::Sequential) fuses into a [`Linear`](super::Linear) before
    /// it (see [`as_linear`](Self::as_linear)). `false` by default.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::{Func, Module, Relu}, Tensor};
    /// assert!(Relu.is_relu());
    /// assert!(!Func::new(Tensor::relu).is_relu()); // a closure is opaque: not fused
    /// ```
    fn is_relu(&self) -> bool {
        false
    }
}

/// Weight initialisation.
///
/// # Examples
///
/// ```
/// use eddy_tensor::{nn::{Init, Linear, Module}, Tensor, DType};
/// let l = Linear::with_init(3, 2, false, Init::Zeros, DType::F32)?;
/// let y = l.forward(&Tensor::ones([1, 3], DType::F32)?)?;
/// assert_eq!(y.to_vec::<f32>()?, [0., 0.]);
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Init {
    /// PyTorch's default for `Linear`: `U(-1/√fan_in, 1/√fan_in)` (kaiming uniform, a = √5).
    KaimingUniform,
    /// `N(0, 2/fan_in)`: He init for ReLU networks.
    KaimingNormal,
    /// Glorot uniform: `U(±√(6/(fan_in+fan_out)))`.
    XavierUniform,
    /// Zeros.
    Zeros,
}

impl Init {
    /// A fresh `[fan_out, fan_in]` (or `[fan_out]`) tensor drawn from this scheme.
    ///
    /// # Errors
    ///
    /// Engine errors.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::Init, DType};
    /// let w = Init::KaimingUniform.tensor(&[4, 3], 3, 4, DType::F32)?;
    /// assert_eq!(w.dims(), &[4, 3]);
    /// let bound = 1.0 / 3f32.sqrt(); // U(-1/√fan_in, 1/√fan_in)
    /// assert!(w.to_vec::<f32>()?.iter().all(|v| v.abs() <= bound));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn tensor(
        self,
        shape: &[usize],
        fan_in: usize,
        fan_out: usize,
        dtype: DType,
    ) -> Result<Tensor> {
        let fi = fan_in.max(1) as f64;
        match self {
            Init::KaimingUniform => {
                let b = 1.0 / fi.sqrt();
                Tensor::uniform(shape, -b, b, dtype)
            }
            Init::KaimingNormal => Tensor::randn(shape, 0.0, (2.0 / fi).sqrt(), dtype),
            Init::XavierUniform => {
                let b = (6.0 / (fi + fan_out.max(1) as f64)).sqrt();
                Tensor::uniform(shape, -b, b, dtype)
            }
            Init::Zeros => Tensor::zeros(shape, dtype),
        }
    }
}

/// `y = x Wᵀ + b`, with `W` of shape `[out, in]` as in PyTorch.
///
/// # Examples
///
/// ```
/// use eddy_tensor::{nn::{Linear, Module}, Tensor, DType};
/// let l = Linear::new(3, 2, true, DType::F32)?;
/// let y = l.forward(&Tensor::ones([4, 3], DType::F32)?)?;
/// assert_eq!(y.dims(), &[4, 2]);
/// assert_eq!(l.parameters().len(), 2);
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
pub struct Linear {
    /// `[out, in]`
    pub weight: Tensor,
    /// `[out]`
    pub bias: Option<Tensor>,
}

impl Linear {
    /// A layer initialised as PyTorch's `nn.Linear` (kaiming uniform weight and bias).
    ///
    /// # Errors
    ///
    /// Engine errors.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::Linear, DType};
    /// let l = Linear::new(3, 2, true, DType::F32)?;
    /// assert_eq!(l.weight.dims(), &[2, 3]); // [out, in]
    /// assert_eq!(l.bias.as_ref().map(|b| b.dims().to_vec()), Some(vec![2]));
    /// assert!(l.weight.requires_grad() && l.weight.is_leaf());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn new(inp: usize, out: usize, bias: bool, dtype: DType) -> Result<Linear> {
        Linear::with_init(inp, out, bias, Init::KaimingUniform, dtype)
    }

    /// The layer with its parameters laid out on `placement`: the weight (`[out, in]`) by
    /// `weight`, the bias (`[out]`) by `bias`; new trainable leaves holding the same values.
    /// `B` everywhere is data parallelism; a weight split along its output dim (`S(0)`, with
    /// an `S(0)` bias) or its input dim (`S(1)`, with a `B` bias) is tensor parallelism.
    ///
    /// # Errors
    ///
    /// As [`Tensor::to_global`].
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::{Linear, Module}, DType, global::{DeviceKind, Placement, Sbp}};
    /// let vm = eddy_vm::Vm::builder().cpu_devices(2).build()?;
    /// eddy_tensor::with_engine(&vm, || {
    ///     let p = Placement::new(DeviceKind::Cpu, [0, 1])?;
    ///     let l = Linear::new(4, 6, true, DType::F32)?.to_global(&p, &[Sbp::Split(0)], &[Sbp::Split(0)])?;
    ///     assert_eq!(l.weight.local_components()[1].dims(), &[3, 4]);
    ///     assert!(l.parameters().iter().all(|t| t.is_global() && t.requires_grad()));
    ///     Ok::<(), eddy_tensor::Error>(())
    /// })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn to_global(
        &self,
        placement: &crate::global::Placement,
        weight: &[crate::global::Sbp],
        bias: &[crate::global::Sbp],
    ) -> Result<Linear> {
        let _g = crate::no_grad();
        let lay = |t: &Tensor, s: &[crate::global::Sbp]| {
            t.to_global(placement, s)?.detach().requires_grad_(true)
        };
        Ok(Linear {
            weight: lay(&self.weight, weight)?,
            bias: self.bias.as_ref().map(|b| lay(b, bias)).transpose()?,
        })
    }

    /// A layer with weights from `init` (the bias uses PyTorch's default).
    ///
    /// # Errors
    ///
    /// Engine errors.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::{Init, Linear}, DType};
    /// let l = Linear::with_init(3, 2, false, Init::Zeros, DType::F32)?;
    /// assert_eq!(l.weight.to_vec::<f32>()?, [0.0; 6]);
    /// assert!(l.bias.is_none());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn with_init(
        inp: usize,
        out: usize,
        bias: bool,
        init: Init,
        dtype: DType,
    ) -> Result<Linear> {
        let weight = init
            .tensor(&[out, inp], inp, out, dtype)?
            .requires_grad_(true)?;
        let bias = if bias {
            Some(
                Init::KaimingUniform
                    .tensor(&[out], inp, out, dtype)?
                    .requires_grad_(true)?,
            )
        } else {
            None
        };
        Ok(Linear { weight, bias })
    }
}

impl Module for Linear {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.linear(&self.weight, self.bias.as_ref())
    }
    fn as_linear(&self) -> Option<&Linear> {
        Some(self)
    }
    fn parameters(&self) -> Vec<Tensor> {
        std::iter::once(self.weight.clone())
            .chain(self.bias.clone())
            .collect()
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        std::iter::once(("weight".to_string(), self.weight.clone()))
            .chain(self.bias.clone().map(|b| ("bias".to_string(), b)))
            .collect()
    }
}
