//! Optimizers: [`Sgd`] (momentum, weight decay) and [`Adam`] (with decoupled weight decay:
//! AdamW). Updates are in-place ops on the parameters, run as engine instructions under
//! `no_grad`. [`lr_scheduler`] changes an optimizer's learning rate from epoch to epoch.

pub mod lr_scheduler;

use crate::nn::check_params;
use crate::{DType, Error, Result, Shape, Tensor, no_grad};
use eddy_ops::optim::AdamStep;

/// What every optimizer does.
///
/// # Examples
///
/// Code written against the trait drives any optimizer:
///
/// ```
/// use eddy_tensor::{optim::{Optimizer, Sgd}, Result, Tensor};
/// fn train_step(opt: &mut dyn Optimizer, w: &Tensor) -> Result<()> {
///     opt.zero_grad();
///     w.square()?.sum_all()?.backward()?; // grad 2w
///     opt.step()
/// }
/// let w = Tensor::from_vec(vec![1f32], [1])?.requires_grad_(true)?;
/// let mut opt = Sgd::new(vec![w.clone()], 0.25)?;
/// train_step(&mut opt, &w)?;
/// assert_eq!(w.to_vec::<f32>()?, [0.5]);
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
pub trait Optimizer {
    /// Applies one update from the parameters' accumulated gradients.
    ///
    /// # Errors
    ///
    /// Engine errors.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{optim::{Optimizer, Sgd}, Tensor};
    /// let w = Tensor::from_vec(vec![1f32, 2.], [2])?.requires_grad_(true)?;
    /// let mut opt = Sgd::new(vec![w.clone()], 0.5)?;
    /// opt.step()?; // no gradient yet: nothing moves
    /// assert_eq!(w.to_vec::<f32>()?, [1., 2.]);
    /// w.sum_all()?.backward()?; // grad [1, 1]
    /// opt.step()?;
    /// assert_eq!(w.to_vec::<f32>()?, [0.5, 1.5]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    fn step(&mut self) -> Result<()>;
    /// The parameters.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{optim::{Adam, Optimizer}, Tensor, DType};
    /// let (a, b) = (Tensor::zeros([2], DType::F32)?, Tensor::zeros([3], DType::F32)?);
    /// let opt = Adam::new(vec![a.requires_grad_(true)?, b.requires_grad_(true)?], 1e-3)?;
    /// let dims: Vec<&[usize]> = opt.params().iter().map(|p| p.dims()).collect();
    /// assert_eq!(dims, [&[2][..], &[3][..]]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    fn params(&self) -> &[Tensor];
    /// Clears the gradients.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{optim::{Optimizer, Sgd}, Tensor};
    /// let w = Tensor::from_vec(vec![1f32], [1])?.requires_grad_(true)?;
    /// let opt = Sgd::new(vec![w.clone()], 0.1)?;
    /// w.sum_all()?.backward()?;
    /// assert!(w.grad().is_some());
    /// opt.zero_grad();
    /// assert!(w.grad().is_none());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    fn zero_grad(&self) {
        for p in self.params() {
            p.set_grad(None);
        }
    }
    /// The learning rate.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{optim::{Optimizer, Sgd}, Tensor, DType};
    /// let w = Tensor::zeros([1], DType::F32)?.requires_grad_(true)?;
    /// assert_eq!(Sgd::new(vec![w], 0.01)?.lr(), 0.01);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    fn lr(&self) -> f64;
    /// Sets the learning rate (what a [`lr_scheduler::Scheduler`] does at each step); a rate
    /// that is negative or not finite makes the next [`step`](Self::step) fail.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{optim::{Optimizer, Sgd}, Error, Tensor, DType};
    /// let w = Tensor::zeros([1], DType::F32)?.requires_grad_(true)?;
    /// let mut opt = Sgd::new(vec![w], 0.01)?;
    /// opt.set_lr(0.1);
    /// assert_eq!(opt.lr(), 0.1);
    /// opt.set_lr(-1.0);
    /// assert!(matches!(opt.step(), Err(Error::InvalidArgument { .. })));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    fn set_lr(&mut self, lr: f64);
}

/// `InvalidArgument` for `op` unless `value` (the hyperparameter `name`) is finite and not
/// negative. PyTorch's constructors refuse the same values ("Invalid learning rate: -1"),
/// except that they take an infinite one.
#[track_caller]
fn check_non_negative(op: &'static str, name: &str, value: f64) -> Result<()> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(Error::invalid(
            op,
            format!("invalid {name}: {value} (must be finite and at least 0)"),
        ))
    }
}

/// `InvalidArgument` for `op` unless both of Adam's `betas` are in `[0, 1)`.
#[track_caller]
fn check_betas(op: &'static str, betas: (f64, f64)) -> Result<()> {
    for (i, b) in [betas.0, betas.1].into_iter().enumerate() {
        if !(0.0..1.0).contains(&b) {
            return Err(Error::invalid(
                op,
                format!("invalid beta parameter at index {i}: {b} (must be in [0, 1))"),
            ));
        }
    }
    Ok(())
}

/// Stochastic gradient descent, as PyTorch's `SGD` (dampening 0, no Nesterov).
///
/// # Examples
///
/// ```
/// use eddy_tensor::{optim::{Optimizer, Sgd}, Tensor};
/// let w = Tensor::from_vec(vec![1f32], [1])?.requires_grad_(true)?;
/// let mut opt = Sgd::new(vec![w.clone()], 0.5)?;
/// w.square()?.sum_all()?.backward()?; // grad 2
/// opt.step()?;
/// assert_eq!(w.to_vec::<f32>()?, vec![0.0]);
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
pub struct Sgd {
    params: Vec<Tensor>,
    /// The learning rate.
    pub lr: f64,
    /// The momentum factor (0 for none).
    pub momentum: f64,
    /// L2 penalty added to the gradient.
    pub weight_decay: f64,
    velocity: Vec<Option<Tensor>>,
}

impl Sgd {
    /// Plain SGD with learning rate `lr`.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if a parameter is not a leaf requiring grad, or is listed twice, or
    /// `lr` is negative or not finite.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{optim::Sgd, Error, Tensor};
    /// let w = Tensor::from_vec(vec![1f32], [1])?.requires_grad_(true)?;
    /// let opt = Sgd::new(vec![w.clone()], 0.1)?;
    /// assert_eq!((opt.lr, opt.momentum, opt.weight_decay), (0.1, 0.0, 0.0));
    /// let not_leaf = w.mul_scalar(2.0)?; // made by an op: not a parameter
    /// assert!(matches!(Sgd::new(vec![not_leaf], 0.1), Err(Error::InvalidArgument { .. })));
    /// for bad in [-0.1, f64::NAN, f64::INFINITY] {
    ///     assert!(matches!(Sgd::new(vec![w.clone()], bad), Err(Error::InvalidArgument { .. })));
    /// }
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn new(params: Vec<Tensor>, lr: f64) -> Result<Sgd> {
        check_non_negative("Sgd", "learning rate", lr)?;
        check_params("Sgd", &params)?;
        let n = params.len();
        Ok(Sgd {
            params,
            lr,
            momentum: 0.0,
            weight_decay: 0.0,
            velocity: vec![None; n],
        })
    }
    /// Sets the momentum.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if `m` is negative or not finite.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{optim::{Optimizer, Sgd}, Tensor};
    /// let w = Tensor::from_vec(vec![1f32], [1])?.requires_grad_(true)?;
    /// let mut opt = Sgd::new(vec![w.clone()], 0.1)?.momentum(0.9)?;
    /// for _ in 0..2 {
    ///     opt.zero_grad();
    ///     w.sum_all()?.backward()?; // grad 1; velocity 1, then 0.9·1 + 1
    ///     opt.step()?;
    /// }
    /// assert!((w.item::<f32>()? - (1.0 - 0.1 - 0.19)).abs() < 1e-6);
    /// assert!(Sgd::new(vec![w], 0.1)?.momentum(-0.5).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn momentum(mut self, m: f64) -> Result<Sgd> {
        check_non_negative("Sgd", "momentum value", m)?;
        self.momentum = m;
        Ok(self)
    }
    /// Sets the weight decay.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if `wd` is negative or not finite.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{optim::{Optimizer, Sgd}, Tensor};
    /// let w = Tensor::from_vec(vec![2f32], [1])?.requires_grad_(true)?;
    /// let mut opt = Sgd::new(vec![w.clone()], 0.1)?.weight_decay(0.5)?;
    /// w.mul_scalar(0.0)?.sum_all()?.backward()?; // grad 0, plus 0.5·w from the decay
    /// opt.step()?;
    /// assert!((w.item::<f32>()? - 1.9).abs() < 1e-6);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn weight_decay(mut self, wd: f64) -> Result<Sgd> {
        check_non_negative("Sgd", "weight_decay value", wd)?;
        self.weight_decay = wd;
        Ok(self)
    }
}

impl Optimizer for Sgd {
    /// # Errors
    ///
    /// `InvalidArgument` (op `Sgd`), before any parameter changes, if `lr`, `momentum` or
    /// `weight_decay` is negative or not finite; engine errors.
    #[track_caller]
    fn step(&mut self) -> Result<()> {
        // Again here: the fields are public, and `set_lr` takes any value.
        check_non_negative("Sgd", "learning rate", self.lr)?;
        check_non_negative("Sgd", "momentum value", self.momentum)?;
        check_non_negative("Sgd", "weight_decay value", self.weight_decay)?;
        let _g = no_grad();
        for (p, v) in self.params.iter().zip(&mut self.velocity) {
            let Some(mut g) = p.grad() else { continue };
            if self.weight_decay != 0.0 {
                g = g.add(&p.mul_scalar(self.weight_decay)?)?;
            }
            if self.momentum != 0.0 {
                g = match v {
                    Some(buf) => {
                        buf.mul_scalar_(self.momentum)?;
                        buf.add_(&g)?
                    }
                    None if crate::graph::is_tracing() => {
                        // Made here, the buffer would be made again at every run of the plan.
                        return Err(Error::invalid(
                            "Sgd",
                            "the momentum buffers are made by the first step: take one eager \
                             step before compiling a graph that steps",
                        ));
                    }
                    None => {
                        let buf = g.contiguous()?.mul_scalar(1.0)?;
                        *v = Some(buf.clone());
                        buf
                    }
                };
            }
            p.add_scaled_(&g, -self.lr)?;
        }
        Ok(())
    }
    fn params(&self) -> &[Tensor] {
        &self.params
    }
    fn lr(&self) -> f64 {
        self.lr
    }
    fn set_lr(&mut self, lr: f64) {
        self.lr = lr;
    }
}

/// Adam, or AdamW when `decoupled` weight decay is set.
///
/// # Examples
///
/// ```
/// use eddy_tensor::{optim::{Adam, Optimizer}, Tensor};
/// let w = Tensor::from_vec(vec![1f32], [1])?.requires_grad_(true)?;
/// let mut opt = Adam::new(vec![w.clone()], 0.1)?;
/// w.square()?.sum_all()?.backward()?;
/// opt.step()?;
/// assert!((w.to_vec::<f32>()?[0] - 0.9).abs() < 1e-5); // the first step moves by lr
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
pub struct Adam {
    params: Vec<Tensor>,
    /// The learning rate.
    pub lr: f64,
    /// Decay rates of the first and second moments.
    pub betas: (f64, f64),
    /// Added to the denominator.
    pub eps: f64,
    /// Weight decay: L2 in the gradient (Adam), or decoupled (AdamW).
    pub weight_decay: f64,
    /// Whether weight decay is decoupled (AdamW).
    pub decoupled: bool,
    /// Per parameter, from its first step with a gradient: the moments and its own step count
    /// (PyTorch's `state['step']`), which a parameter skipped for want of a gradient does not
    /// advance. The count is a 0-d `f64` tensor beside the parameter, and the bias corrections
    /// are computed from it there: a compiled graph's runs then count their own steps (PyTorch's
    /// `capturable` Adam).
    state: Vec<Option<(Tensor, Tensor, Tensor)>>,
}

impl Adam {
    /// Adam with PyTorch's defaults (betas 0.9/0.999, eps 1e-8, no weight decay).
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if a parameter is not a leaf requiring grad, or is listed twice, or
    /// `lr` is negative or not finite.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{optim::Adam, Tensor, DType};
    /// let w = Tensor::zeros([3], DType::F32)?.requires_grad_(true)?;
    /// let opt = Adam::new(vec![w], 1e-3)?;
    /// assert_eq!((opt.betas, opt.eps), ((0.9, 0.999), 1e-8));
    /// assert_eq!((opt.weight_decay, opt.decoupled), (0.0, false));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn new(params: Vec<Tensor>, lr: f64) -> Result<Adam> {
        check_non_negative("Adam", "learning rate", lr)?;
        check_params("Adam", &params)?;
        let n = params.len();
        Ok(Adam {
            params,
            lr,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled: false,
            state: vec![None; n],
        })
    }
    /// AdamW: decoupled weight decay `wd` (PyTorch's default 0.01).
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new), and `InvalidArgument` if `wd` is negative or not finite.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{optim::{Adam, Optimizer}, Tensor};
    /// let w = Tensor::from_vec(vec![1f32], [1])?.requires_grad_(true)?;
    /// let mut opt = Adam::adamw(vec![w.clone()], 0.1, 0.5)?;
    /// assert!(opt.decoupled);
    /// w.mul_scalar(0.0)?.sum_all()?.backward()?; // a zero gradient: only the decay moves w
    /// opt.step()?;
    /// assert!((w.item::<f32>()? - (1.0 - 0.1 * 0.5)).abs() < 1e-6);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn adamw(params: Vec<Tensor>, lr: f64, wd: f64) -> Result<Adam> {
        check_non_negative("Adam", "weight_decay value", wd)?;
        let mut a = Adam::new(params, lr)?;
        a.weight_decay = wd;
        a.decoupled = true;
        Ok(a)
    }
    /// Sets the decay rates of the moments (PyTorch's `betas`).
    ///
    /// # Errors
    ///
    /// `InvalidArgument` unless both are in `[0, 1)`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{optim::Adam, Tensor, DType};
    /// let w = Tensor::zeros([3], DType::F32)?.requires_grad_(true)?;
    /// assert_eq!(Adam::new(vec![w.clone()], 1e-3)?.betas(0.8, 0.99)?.betas, (0.8, 0.99));
    /// assert!(Adam::new(vec![w], 1e-3)?.betas(1.0, 0.99).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn betas(mut self, beta1: f64, beta2: f64) -> Result<Adam> {
        check_betas("Adam", (beta1, beta2))?;
        self.betas = (beta1, beta2);
        Ok(self)
    }
    /// Sets the term added to the denominator.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if `eps` is negative or not finite.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{optim::Adam, Tensor, DType};
    /// let w = Tensor::zeros([3], DType::F32)?.requires_grad_(true)?;
    /// assert_eq!(Adam::new(vec![w.clone()], 1e-3)?.eps(1e-6)?.eps, 1e-6);
    /// assert!(Adam::new(vec![w], 1e-3)?.eps(-1.0).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn eps(mut self, eps: f64) -> Result<Adam> {
        check_non_negative("Adam", "epsilon value", eps)?;
        self.eps = eps;
        Ok(self)
    }
    /// Sets L2 weight decay (added to the gradient; [`adamw`](Self::adamw) decouples it).
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if `wd` is negative or not finite.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{optim::Adam, Tensor, DType};
    /// let w = Tensor::zeros([3], DType::F32)?.requires_grad_(true)?;
    /// let opt = Adam::new(vec![w.clone()], 1e-3)?.weight_decay(0.1)?;
    /// assert_eq!((opt.weight_decay, opt.decoupled), (0.1, false));
    /// assert!(Adam::new(vec![w], 1e-3)?.weight_decay(f64::NAN).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn weight_decay(mut self, wd: f64) -> Result<Adam> {
        check_non_negative("Adam", "weight_decay value", wd)?;
        self.weight_decay = wd;
        Ok(self)
    }
}

impl Optimizer for Adam {
    /// # Errors
    ///
    /// `InvalidArgument` (op `Adam`), before any parameter or state changes, if `lr`, `eps`
    /// or `weight_decay` is negative or not finite, or a beta is outside `[0, 1)`; engine
    /// errors.
    #[track_caller]
    fn step(&mut self) -> Result<()> {
        // Again here: the fields are public, and `set_lr` takes any value.
        check_non_negative("Adam", "learning rate", self.lr)?;
        check_non_negative("Adam", "epsilon value", self.eps)?;
        check_non_negative("Adam", "weight_decay value", self.weight_decay)?;
        check_betas("Adam", self.betas)?;
        let _g = no_grad();
        let (b1, b2) = self.betas;
        for (p, st) in self.params.iter().zip(&mut self.state) {
            let Some(mut g) = p.grad() else { continue };
            if st.is_none() {
                if crate::graph::is_tracing() {
                    // Made here, the state would be made again at every run of the plan.
                    return Err(Error::invalid(
                        "Adam",
                        "the moments are made by a parameter's first step: take one eager step \
                         before compiling a graph that steps",
                    ));
                }
                let count = p.new_filled(Shape::default(), DType::F64, 0.0)?;
                *st = Some((p.zeros_like()?, p.zeros_like()?, count));
            }
            let Some((m, v, t)) = st.as_mut() else {
                continue; // just set
            };
            let hyper = AdamStep {
                lr: self.lr,
                betas: self.betas,
                eps: self.eps,
                weight_decay: self.weight_decay,
                decoupled: self.decoupled,
            };
            if adam_in_one_kernel(p, &g, [m, v, t], hyper)? {
                continue;
            }
            if self.weight_decay != 0.0 {
                if self.decoupled {
                    p.mul_scalar_(1.0 - self.lr * self.weight_decay)?;
                } else {
                    g = g.add(&p.mul_scalar(self.weight_decay)?)?;
                }
            }
            t.add_scalar_(1.0)?;
            // 1 - beta^t and -lr / (1 - beta1^t), in f64 as a host would compute them.
            let power = |beta: f64| t.new_filled(Shape::default(), DType::F64, beta)?.pow(t);
            let bc1 = (1.0 - &power(b1)?)?;
            let bc2 = (1.0 - &power(b2)?)?.to_dtype(p.dtype())?;
            let step_size = (-self.lr / &bc1)?.to_dtype(p.dtype())?;
            m.mul_scalar_(b1)?;
            m.add_scaled_(&g, 1.0 - b1)?;
            v.mul_scalar_(b2)?;
            v.add_scaled_(&g.square()?, 1.0 - b2)?;
            let denom = v.div(&bc2)?.sqrt()?.add_scalar(self.eps)?;
            p.add_(&m.div(&denom)?.mul(&step_size)?)?;
        }
        Ok(())
    }
    fn params(&self) -> &[Tensor] {
        &self.params
    }
    fn lr(&self) -> f64 {
        self.lr
    }
    fn set_lr(&mut self, lr: f64) {
        self.lr = lr;
    }
}

/// One Adam step of `p` as a single instruction, where a kernel takes it: `p`, its gradient
/// `g` and its moments dense `f32` or `f64` tensors of one shape on a device with the kernel,
/// none of them global. Returns whether it ran; the composed ops take the other cases, with
/// the same values (the kernel rounds each op as they do).
#[track_caller]
fn adam_in_one_kernel(
    p: &Tensor,
    g: &Tensor,
    [m, v, t]: [&Tensor; 3],
    s: AdamStep,
) -> Result<bool> {
    let ops = [p, g, m, v];
    let dense = |x: &Tensor| x.layout().contiguous_range().is_some();
    if !matches!(p.dtype(), DType::F32 | DType::F64)
        || ops
            .iter()
            .any(|x| x.dtype() != p.dtype() || x.dims() != p.dims() || !dense(x) || x.is_global())
        || t.is_global()
        || ops.iter().any(|x| x.device() != p.device())
    {
        return Ok(false);
    }
    let offsets = [g, p, m, v].map(|x| x.layout().offset);
    let Some(k) = eddy_ops::optim::adam_step(p.device(), p.dtype(), p.numel(), offsets, s) else {
        return Ok(false);
    };
    Tensor::launch(k, &[g], &[p, m, v, t])?;
    for x in [p, m, v, t] {
        x.blob().bump_version();
    }
    Ok(true)
}
