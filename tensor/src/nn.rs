//! A small `nn` module: the [`Module`] trait, [`Linear`], [`Embedding`], [`LayerNorm`],
//! [`Dropout`], activations ([`Relu`], [`Func`]), [`Sequential`], init schemes, [`save`]/[`load`] of
//! named parameters, and gradient clipping ([`clip_grad_norm`], [`clip_grad_value`]).
//! Parameters are leaf tensors that require grad.

use crate::{DType, Error, Result, Tensor};
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

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
    /// `0.weight`, `2.bias`, … inside a [`Sequential`]). [`save`] and [`load`] use them. The
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
    /// Switches between training and evaluation behaviour, as PyTorch's `model.train()` and
    /// `model.eval()`: [`Dropout`] drops only while training. Modules start in training mode;
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
    /// This module as a [`Linear`], if it is one. [`Sequential`] runs a `Linear` followed by
    /// [`Relu`] as one [`Tensor::linear_relu`] instruction. `None` by default.
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
    /// Whether this module is [`Relu`], which [`Sequential`] fuses into a [`Linear`] before
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
    pub fn new(inp: usize, out: usize, bias: bool, dtype: DType) -> Result<Linear> {
        Linear::with_init(inp, out, bias, Init::KaimingUniform, dtype)
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
    pub fn with_init(
        inp: usize,
        out: usize,
        bias: bool,
        init: Init,
        dtype: DType,
    ) -> Result<Linear> {
        let weight = init
            .tensor(&[out, inp], inp, out, dtype)?
            .requires_grad_(true);
        let bias = if bias {
            Some(
                Init::KaimingUniform
                    .tensor(&[out], inp, out, dtype)?
                    .requires_grad_(true),
            )
        } else {
            None
        };
        Ok(Linear { weight, bias })
    }
}

impl Module for Linear {
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

/// PyTorch's `nn.ReLU`: `max(x, 0)`, as [`Tensor::relu`]. After a [`Linear`] in a
/// [`Sequential`], the two run as one instruction ([`Tensor::linear_relu`]).
///
/// # Examples
///
/// ```
/// use eddy_tensor::{nn::{Module, Relu}, Tensor};
/// let y = Relu.forward(&Tensor::from_vec(vec![-1f32, 2.], [2])?)?;
/// assert_eq!(y.to_vec::<f32>()?, [0., 2.]);
/// assert!(Relu.parameters().is_empty());
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Relu;

impl Module for Relu {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.relu()
    }
    fn is_relu(&self) -> bool {
        true
    }
}

/// A parameter-free module from a function (activations: `Func::new(Tensor::gelu)`).
///
/// # Examples
///
/// ```
/// use eddy_tensor::{nn::{Func, Module}, Tensor};
/// let relu = Func::new(Tensor::relu);
/// let y = relu.forward(&Tensor::from_vec(vec![-1f32, 2.], [2])?)?;
/// assert_eq!(y.to_vec::<f32>()?, [0., 2.]);
/// assert!(relu.parameters().is_empty());
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
pub struct Func(Box<FuncFn>);

/// The function a [`Func`] applies.
type FuncFn = dyn Fn(&Tensor) -> Result<Tensor> + Send + Sync;

impl Func {
    /// Wraps `f`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::{Func, Module}, Tensor};
    /// let scale = Func::new(|x: &Tensor| x.mul_scalar(3.0));
    /// let y = scale.forward(&Tensor::from_vec(vec![1f32, -2.], [2])?)?;
    /// assert_eq!(y.to_vec::<f32>()?, [3., -6.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn new(f: impl Fn(&Tensor) -> Result<Tensor> + Send + Sync + 'static) -> Func {
        Func(Box::new(f))
    }
}

impl Module for Func {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        (self.0)(x)
    }
}

/// Modules applied in order.
///
/// # Examples
///
/// ```
/// use eddy_tensor::{nn::{Linear, Module, Relu, Sequential}, Tensor, DType};
/// let mlp = Sequential::new()
///     .add(Linear::new(4, 8, true, DType::F32)?)
///     .add(Relu) // runs inside the Linear before it: one instruction for the pair
///     .add(Linear::new(8, 2, true, DType::F32)?);
/// assert_eq!(mlp.forward(&Tensor::ones([1, 4], DType::F32)?)?.dims(), &[1, 2]);
/// assert_eq!(mlp.parameters().len(), 4);
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
#[derive(Default)]
pub struct Sequential(Vec<Box<dyn Module>>);

impl Sequential {
    /// An empty sequence.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::{Module, Sequential}, Tensor};
    /// let id = Sequential::new();
    /// assert!(id.is_empty());
    /// let x = Tensor::from_vec(vec![1f32, 2.], [2])?;
    /// assert_eq!(id.forward(&x)?.to_vec::<f32>()?, [1., 2.]); // no modules: the input itself
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn new() -> Sequential {
        Sequential(Vec::new())
    }
    /// Appends a module.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::{Func, Module, Sequential}, Tensor};
    /// let s = Sequential::new()
    ///     .add(Func::new(|x: &Tensor| x.add_scalar(1.0)))
    ///     .add(Func::new(|x: &Tensor| x.mul_scalar(10.0))); // applied in the order added
    /// assert_eq!(s.len(), 2);
    /// assert_eq!(s.forward(&Tensor::from_vec(vec![1f32], [1])?)?.to_vec::<f32>()?, [20.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[allow(clippy::should_implement_trait)]
    pub fn add(mut self, m: impl Module + 'static) -> Sequential {
        self.0.push(Box::new(m));
        self
    }
    /// The number of modules.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::{Func, Linear, Sequential}, Tensor, DType};
    /// let s = Sequential::new()
    ///     .add(Linear::new(2, 2, true, DType::F32)?)
    ///     .add(Func::new(Tensor::relu));
    /// assert_eq!(s.len(), 2);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// Whether there are none.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::{Func, Sequential}, Tensor};
    /// assert!(Sequential::new().is_empty());
    /// assert!(!Sequential::new().add(Func::new(Tensor::relu)).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Module for Sequential {
    /// Each module in turn, except that a [`Linear`] followed by [`Relu`] runs as one
    /// [`Tensor::linear_relu`]: the same values and gradients in one instruction.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut y = x.clone();
        let mut i = 0;
        while let Some(m) = self.0.get(i) {
            match (m.as_linear(), self.0.get(i + 1)) {
                (Some(l), Some(next)) if next.is_relu() => {
                    y = y.linear_relu(&l.weight, l.bias.as_ref())?;
                    i += 2;
                }
                _ => {
                    y = m.forward(&y)?;
                    i += 1;
                }
            }
        }
        Ok(y)
    }
    /// Each parameter once, at its first place: a tensor shared by two layers (tied weights)
    /// is not listed, and so not updated, twice (as PyTorch's `parameters()`).
    fn parameters(&self) -> Vec<Tensor> {
        let mut seen = std::collections::HashSet::new();
        (self.0.iter().flat_map(|m| m.parameters()))
            .filter(|t| seen.insert(t.id()))
            .collect()
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut all = Vec::new();
        for (i, m) in self.0.iter().enumerate() {
            let named = m.named_parameters().into_iter();
            all.extend(named.map(|(n, t)| (format!("{i}.{n}"), t)));
        }
        all
    }
    fn set_training(&self, training: bool) {
        for m in &self.0 {
            m.set_training(training);
        }
    }
}

/// Dropout as a module (PyTorch's `nn.Dropout`): [`Tensor::dropout`] with probability `p`
/// while training, the input itself after `set_training(false)`.
///
/// # Examples
///
/// ```
/// use eddy_tensor::{nn::{Dropout, Module}, Tensor, DType};
/// let d = Dropout::new(0.5)?;
/// let x = Tensor::ones([64], DType::F32)?;
/// let y = d.forward(&x)?.to_vec::<f32>()?;
/// assert!(y.iter().all(|&v| v == 0.0 || v == 2.0) && y.contains(&0.0));
/// d.set_training(false);
/// assert_eq!(d.forward(&x)?.to_vec::<f32>()?, vec![1.0; 64]);
/// assert!(Dropout::new(1.5).is_err());
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
#[derive(Debug)]
pub struct Dropout {
    p: f64,
    training: AtomicBool,
}

impl Dropout {
    /// A dropout layer, in training mode.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if `p` is not in `[0, 1]`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::{Dropout, Module}, Error, Tensor, DType};
    /// let d = Dropout::new(0.0)?; // drops nothing, even while training
    /// let x = Tensor::ones([4], DType::F32)?;
    /// assert_eq!(d.forward(&x)?.to_vec::<f32>()?, [1.0; 4]);
    /// assert!(matches!(Dropout::new(-0.1), Err(Error::InvalidArgument { .. })));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn new(p: f64) -> Result<Dropout> {
        crate::nn_ops::check_probability("Dropout", p)?;
        Ok(Dropout {
            p,
            training: AtomicBool::new(true),
        })
    }

    /// Whether it drops (training mode).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::nn::{Dropout, Module};
    /// let d = Dropout::new(0.5)?;
    /// assert!(d.is_training()); // new modules train
    /// d.set_training(false);
    /// assert!(!d.is_training());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn is_training(&self) -> bool {
        self.training.load(Ordering::Relaxed)
    }
}

impl Module for Dropout {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.dropout(self.p, self.is_training())
    }
    fn set_training(&self, training: bool) {
        self.training.store(training, Ordering::Relaxed);
    }
}

/// A lookup table (PyTorch's `nn.Embedding`): row `i` of `weight` for every index `i` of the
/// input (`i64` or `i32`, any shape); the output has the input's shape plus `[dim]`.
///
/// # Examples
///
/// ```
/// use eddy_tensor::{nn::{Embedding, Module}, Tensor, DType};
/// let e = Embedding::new(10, 4, DType::F32)?;
/// let ids = Tensor::from_vec(vec![1i64, 7, 7], [3])?;
/// assert_eq!(e.forward(&ids)?.dims(), &[3, 4]);
/// assert!(e.forward(&Tensor::from_vec(vec![10i64], [1])?).is_err()); // out of range, at the call
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
pub struct Embedding {
    /// `[num, dim]`
    pub weight: Tensor,
}

impl Embedding {
    /// `num` rows of `dim` values drawn from `N(0, 1)`, as PyTorch initialises them.
    ///
    /// # Errors
    ///
    /// Engine errors.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::Embedding, DType};
    /// let e = Embedding::new(10, 4, DType::F32)?;
    /// assert_eq!(e.weight.dims(), &[10, 4]);
    /// assert!(e.weight.requires_grad());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn new(num: usize, dim: usize, dtype: DType) -> Result<Embedding> {
        let weight = Tensor::randn([num, dim], 0.0, 1.0, dtype)?.requires_grad_(true);
        Ok(Embedding { weight })
    }
}

impl Module for Embedding {
    fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        self.weight.embedding(ids)
    }
    fn parameters(&self) -> Vec<Tensor> {
        vec![self.weight.clone()]
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        vec![("weight".to_string(), self.weight.clone())]
    }
}

/// Layer normalisation over the trailing dims `shape` (PyTorch's `nn.LayerNorm`), with a
/// learned scale (`weight`, ones) and shift (`bias`, zeros) when `affine`.
///
/// # Examples
///
/// ```
/// use eddy_tensor::{nn::{LayerNorm, Module}, Tensor, DType};
/// let ln = LayerNorm::new(&[4], 1e-5, true, DType::F32)?;
/// let y = ln.forward(&Tensor::from_vec(vec![1f32, 2., 3., 4.], [1, 4])?)?;
/// assert!(y.mean_all()?.item::<f32>()?.abs() < 1e-6);
/// assert!(ln.forward(&Tensor::ones([2, 3], DType::F32)?).is_err()); // trailing dims differ
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
pub struct LayerNorm {
    shape: Vec<usize>,
    eps: f64,
    /// The scale, of `shape`, if affine.
    pub weight: Option<Tensor>,
    /// The shift, of `shape`, if affine.
    pub bias: Option<Tensor>,
}

impl LayerNorm {
    /// Normalises the trailing dims `shape` (at least one) with `eps` added to the variance.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for an empty `shape` or an `eps` that is negative or not finite.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::{LayerNorm, Module}, DType};
    /// let ln = LayerNorm::new(&[2, 3], 1e-5, true, DType::F32)?;
    /// assert_eq!(ln.weight.as_ref().unwrap().to_vec::<f32>()?, [1.0; 6]); // scale starts at 1
    /// assert_eq!(ln.bias.as_ref().unwrap().to_vec::<f32>()?, [0.0; 6]); // shift at 0
    /// assert!(LayerNorm::new(&[3], 1e-5, false, DType::F32)?.parameters().is_empty());
    /// assert!(LayerNorm::new(&[], 1e-5, true, DType::F32).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn new(shape: &[usize], eps: f64, affine: bool, dtype: DType) -> Result<LayerNorm> {
        if shape.is_empty() || !(eps >= 0.0 && eps.is_finite()) {
            return Err(Error::invalid(
                "LayerNorm",
                format!("needs at least one dim and a finite eps >= 0, got {shape:?} and {eps}"),
            ));
        }
        let (weight, bias) = if affine {
            (
                Some(Tensor::ones(shape, dtype)?.requires_grad_(true)),
                Some(Tensor::zeros(shape, dtype)?.requires_grad_(true)),
            )
        } else {
            (None, None)
        };
        Ok(LayerNorm {
            shape: shape.to_vec(),
            eps,
            weight,
            bias,
        })
    }
}

impl Module for LayerNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let n = self.shape.len();
        if x.rank() < n || x.dims()[x.rank() - n..] != self.shape[..] {
            return Err(Error::ShapeMismatch {
                op: "LayerNorm",
                lhs: x.dims().to_vec(),
                rhs: self.shape.clone(),
            });
        }
        x.layer_norm(n, self.weight.as_ref(), self.bias.as_ref(), self.eps)
    }
    fn parameters(&self) -> Vec<Tensor> {
        self.weight.iter().chain(&self.bias).cloned().collect()
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let w = self
            .weight
            .iter()
            .map(|t| ("weight".to_string(), t.clone()));
        let b = self.bias.iter().map(|t| ("bias".to_string(), t.clone()));
        w.chain(b).collect()
    }
}

/// Writes `module`'s [named parameters](Module::named_parameters) to a safetensors file at
/// `path` (PyTorch's `save_file(model.state_dict(), path)`), which [`load`], candle and
/// `safetensors.torch` read back.
///
/// # Errors
///
/// As [`safetensors::save`](crate::safetensors::save).
///
/// # Examples
///
/// ```
/// use eddy_tensor::{nn::{self, Func, Linear, Module, Sequential}, Tensor, DType};
/// let path = std::env::temp_dir().join(format!("eddy-nn-doc-{}.safetensors", std::process::id()));
/// let mlp = || -> eddy_tensor::Result<Sequential> {
///     Ok(Sequential::new()
///         .add(Linear::new(4, 8, true, DType::F32)?)
///         .add(Func::new(Tensor::relu))
///         .add(Linear::new(8, 2, true, DType::F32)?))
/// };
/// let (a, b) = (mlp()?, mlp()?);                     // two different random inits
/// let names: Vec<String> = a.named_parameters().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["0.weight", "0.bias", "2.weight", "2.bias"]);
/// nn::save(&a, &path)?;
/// nn::load(&b, &path)?;                              // b now computes what a computes
/// let x = Tensor::randn([3, 4], 0.0, 1.0, DType::F32)?;
/// assert_eq!(a.forward(&x)?.to_vec::<f32>()?, b.forward(&x)?.to_vec::<f32>()?);
/// # std::fs::remove_file(&path).ok();
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
pub fn save(module: &dyn Module, path: impl AsRef<Path>) -> Result<()> {
    let named = module.named_parameters();
    crate::safetensors::save(named.iter().map(|(n, t)| (n.as_str(), t)), path)
}

/// Loads a file written by [`save`] (or any safetensors file with the same names) into
/// `module`'s parameters, in place, so that an optimizer holding them trains on from the
/// loaded values (PyTorch's `load_state_dict`, strict). Everything is checked before any
/// parameter changes: on an error the module is as it was.
///
/// # Errors
///
/// `InvalidArgument` naming the missing and unexpected names if the file's names are not
/// exactly the module's; `ShapeMismatch` (`lhs` the parameter's, `rhs` the file's) or
/// `DTypeMismatch` for a tensor that does not fit; the errors of
/// [`safetensors::load`](crate::safetensors::load).
///
/// # Examples
///
/// ```
/// use eddy_tensor::{nn::{self, Linear, Module}, Error, Tensor, DType};
/// let name = format!("eddy-nn-load-{}.safetensors", std::process::id());
/// let path = std::env::temp_dir().join(name);
/// let a = Linear::new(3, 2, true, DType::F32)?;
/// nn::save(&a, &path)?;
/// let b = Linear::new(3, 2, true, DType::F32)?;
/// nn::load(&b, &path)?;
/// assert_eq!(b.weight.to_vec::<f32>()?, a.weight.to_vec::<f32>()?);
/// let no_bias = Linear::new(3, 2, false, DType::F32)?; // the file has an unexpected "bias"
/// assert!(matches!(nn::load(&no_bias, &path), Err(Error::InvalidArgument { .. })));
/// # std::fs::remove_file(&path).ok();
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
pub fn load(module: &dyn Module, path: impl AsRef<Path>) -> Result<()> {
    let named = module.named_parameters();
    let file: HashMap<String, Tensor> = crate::safetensors::load(path)?.into_iter().collect();
    let missing: Vec<&str> = (named.iter().map(|(n, _)| n.as_str()))
        .filter(|n| !file.contains_key(*n))
        .collect();
    let mut unexpected: Vec<&str> = (file.keys().map(String::as_str))
        .filter(|k| !named.iter().any(|(n, _)| n == k))
        .collect();
    unexpected.sort_unstable();
    if !missing.is_empty() || !unexpected.is_empty() {
        return Err(Error::invalid(
            "nn::load",
            format!(
                "the file's names differ from the module's: missing {missing:?}, unexpected {unexpected:?}"
            ),
        ));
    }
    for (n, p) in &named {
        let src = &file[n];
        if src.dims() != p.dims() {
            return Err(Error::ShapeMismatch {
                op: "nn::load",
                lhs: p.dims().to_vec(),
                rhs: src.dims().to_vec(),
            });
        }
        if src.dtype() != p.dtype() {
            return Err(Error::DTypeMismatch {
                op: "nn::load",
                lhs: p.dtype(),
                rhs: src.dtype(),
            });
        }
    }
    let _g = crate::no_grad();
    for (n, p) in &named {
        p.copy_(&file[n])?;
    }
    Ok(())
}

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
/// let w = Tensor::from_vec(vec![1f32, 1.0], [2])?.requires_grad_(true);
/// w.mul_scalar(3.0)?.sum_all()?.backward()?; // grad [3, 3], of norm √18
/// let norm = nn::clip_grad_norm(&[w.clone()], 1.0, 2.0)?;
/// assert!((norm.item::<f32>()? - 18f32.sqrt()).abs() < 1e-5);
/// let g = w.grad().unwrap().to_vec::<f32>()?;
/// assert!((g[0] - 0.5f32.sqrt()).abs() < 1e-5 && g[0] == g[1]); // now of norm 1
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
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
    let factor = factor.clamp(None, Some(1.0))?;
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
/// let w = Tensor::from_vec(vec![1f32, -2.0], [2])?.requires_grad_(true);
/// w.mul(&Tensor::from_vec(vec![5f32, -0.5], [2])?)?.sum_all()?.backward()?; // grad [5, -0.5]
/// nn::clip_grad_value(&[w.clone()], 1.0)?;
/// assert_eq!(w.grad().unwrap().to_vec::<f32>()?, [1.0, -0.5]);
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
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
fn float_grads<'a>(op: &'static str, params: &'a [Tensor]) -> Result<Vec<(&'a Tensor, Tensor)>> {
    let grads: Vec<(&Tensor, Tensor)> = (params.iter())
        .filter_map(|p| Some((p, p.grad()?)))
        .collect();
    if let Some((_, g)) = grads.iter().find(|(_, g)| !g.dtype().is_float()) {
        return Err(Error::UnsupportedDType {
            op,
            dtype: g.dtype(),
        });
    }
    Ok(grads)
}

/// Checks that `params` are leaves that require grad (for optimizers).
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
