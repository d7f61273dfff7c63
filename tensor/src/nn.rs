//! A small `nn` module: the [`Module`] trait, [`Linear`], activations, [`Sequential`], and init
//! schemes. Parameters are leaf tensors that require grad.

use crate::{DType, Error, Result, Tensor};

/// Something with a forward pass and parameters.
pub trait Module: Send + Sync {
    /// Runs the module.
    ///
    /// # Errors
    ///
    /// The errors of the ops it runs.
    fn forward(&self, x: &Tensor) -> Result<Tensor>;
    /// The trainable tensors, in a stable order.
    fn parameters(&self) -> Vec<Tensor> {
        Vec::new()
    }
}

/// Weight initialisation.
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
    pub fn new(inp: usize, out: usize, bias: bool, dtype: DType) -> Result<Linear> {
        Linear::with_init(inp, out, bias, Init::KaimingUniform, dtype)
    }

    /// A layer with weights from `init` (the bias uses PyTorch's default).
    ///
    /// # Errors
    ///
    /// Engine errors.
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
        let y = x.matmul(&self.weight.t()?)?;
        match &self.bias {
            Some(b) => y.add(b),
            None => Ok(y),
        }
    }
    fn parameters(&self) -> Vec<Tensor> {
        std::iter::once(self.weight.clone())
            .chain(self.bias.clone())
            .collect()
    }
}

/// A parameter-free module from a function (activations: `Func::new(Tensor::relu)`).
pub struct Func(Box<FuncFn>);

/// The function a [`Func`] applies.
type FuncFn = dyn Fn(&Tensor) -> Result<Tensor> + Send + Sync;

impl Func {
    /// Wraps `f`.
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
/// use eddy_tensor::{nn::{Func, Linear, Module, Sequential}, Tensor, DType};
/// let mlp = Sequential::new()
///     .add(Linear::new(4, 8, true, DType::F32)?)
///     .add(Func::new(Tensor::relu))
///     .add(Linear::new(8, 2, true, DType::F32)?);
/// assert_eq!(mlp.forward(&Tensor::ones([1, 4], DType::F32)?)?.dims(), &[1, 2]);
/// assert_eq!(mlp.parameters().len(), 4);
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
#[derive(Default)]
pub struct Sequential(Vec<Box<dyn Module>>);

impl Sequential {
    /// An empty sequence.
    pub fn new() -> Sequential {
        Sequential(Vec::new())
    }
    /// Appends a module.
    #[allow(clippy::should_implement_trait)]
    pub fn add(mut self, m: impl Module + 'static) -> Sequential {
        self.0.push(Box::new(m));
        self
    }
    /// The number of modules.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Module for Sequential {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut y = x.clone();
        for m in &self.0 {
            y = m.forward(&y)?;
        }
        Ok(y)
    }
    fn parameters(&self) -> Vec<Tensor> {
        self.0.iter().flat_map(|m| m.parameters()).collect()
    }
}

/// Checks that `params` are leaves that require grad (for optimizers).
pub(crate) fn check_params(op: &'static str, params: &[Tensor]) -> Result<()> {
    if let Some(p) = params.iter().find(|p| !p.requires_grad() || !p.is_leaf()) {
        return Err(Error::invalid(
            op,
            format!("{p:?} is not a leaf that requires grad"),
        ));
    }
    Ok(())
}
