//! The layers beside [`Linear`](super::Linear)(super::Linear): [`Embedding`](super::Embedding), [`LayerNorm`](super::LayerNorm), [`Dropout`](super::Dropout), the activations
//! [`Relu`](super::Relu) and [`Func`](super::Func), and [`Sequential`](super::Sequential).

use super::module::Module;
use crate::{DType, Error, Result, Tensor};
use std::sync::atomic::{AtomicBool, Ordering};

/// PyTorch's `nn.ReLU`: `max(x, 0)`, as [`Tensor::relu`]. After a [`Linear`](super::Linear) in a
/// [`Sequential`](super::Sequential), the two run as one instruction ([`Tensor::linear_relu`]).
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
    #[track_caller]
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

/// The function a [`Func`](super::Func) applies.
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
    #[track_caller]
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
    /// Each module in turn, except that a module with a fused form followed by
    /// [`Relu`](super::Relu) runs as one op ([`Module::forward_relu`]: a [`Linear`](super::Linear) or a
    /// [`Conv2d`](super::Conv2d)): the same values and gradients in one instruction.
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut y = x.clone();
        let mut i = 0;
        while let Some(m) = self.0.get(i) {
            let fused = match self.0.get(i + 1) {
                Some(next) if next.is_relu() => m.forward_relu(&y),
                _ => None,
            };
            match fused {
                Some(z) => {
                    y = z?;
                    i += 2;
                }
                None => {
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
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        let mut all = Vec::new();
        for (i, m) in self.0.iter().enumerate() {
            let named = m.named_buffers().into_iter();
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
    #[track_caller]
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
    #[track_caller]
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
    #[track_caller]
    pub fn new(num: usize, dim: usize, dtype: DType) -> Result<Embedding> {
        let weight = Tensor::randn([num, dim], 0.0, 1.0, dtype)?.requires_grad_(true)?;
        Ok(Embedding { weight })
    }
}

impl Module for Embedding {
    #[track_caller]
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
    #[track_caller]
    pub fn new(shape: &[usize], eps: f64, affine: bool, dtype: DType) -> Result<LayerNorm> {
        if shape.is_empty() || !(eps >= 0.0 && eps.is_finite()) {
            return Err(Error::invalid(
                "LayerNorm",
                format!("needs at least one dim and a finite eps >= 0, got {shape:?} and {eps}"),
            ));
        }
        let (weight, bias) = if affine {
            (
                Some(Tensor::ones(shape, dtype)?.requires_grad_(true)?),
                Some(Tensor::zeros(shape, dtype)?.requires_grad_(true)?),
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
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let n = self.shape.len();
        if x.rank() < n || x.dims()[x.rank() - n..] != self.shape[..] {
            return Err(Error::ShapeMismatch {
                at: crate::Caller::here(),
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
