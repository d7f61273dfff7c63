//! Optimizers: [`Sgd`] (momentum, weight decay) and [`Adam`] (with decoupled weight decay:
//! AdamW). Updates are in-place ops on the parameters, run as engine instructions under
//! `no_grad`. [`lr_scheduler`] changes an optimizer's learning rate from epoch to epoch.

pub mod lr_scheduler;

use crate::nn::check_params;
use crate::{no_grad, Error, Result, Tensor};

/// What every optimizer does.
pub trait Optimizer {
    /// Applies one update from the parameters' accumulated gradients.
    ///
    /// # Errors
    ///
    /// Engine errors.
    fn step(&mut self) -> Result<()>;
    /// The parameters.
    fn params(&self) -> &[Tensor];
    /// Clears the gradients.
    fn zero_grad(&self) {
        for p in self.params() {
            p.set_grad(None);
        }
    }
    /// The learning rate.
    fn lr(&self) -> f64;
    /// Sets the learning rate (what a [`lr_scheduler::Scheduler`] does at each step); a rate
    /// that is negative or not finite makes the next [`step`](Self::step) fail.
    fn set_lr(&mut self, lr: f64);
}

/// `InvalidArgument` for `op` unless `value` (the hyperparameter `name`) is finite and not
/// negative.
fn check_non_negative(op: &'static str, name: &str, value: f64) -> Result<()> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(Error::invalid(
            op,
            format!("{name} must be finite and at least 0, got {value}"),
        ))
    }
}

/// Stochastic gradient descent, as PyTorch's `SGD` (dampening 0, no Nesterov).
///
/// # Examples
///
/// ```
/// use eddy_tensor::{optim::{Optimizer, Sgd}, Tensor};
/// let w = Tensor::from_vec(vec![1f32], [1])?.requires_grad_(true);
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
    /// `InvalidArgument` if a parameter is not a leaf requiring grad.
    pub fn new(params: Vec<Tensor>, lr: f64) -> Result<Sgd> {
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
    pub fn momentum(mut self, m: f64) -> Sgd {
        self.momentum = m;
        self
    }
    /// Sets the weight decay.
    pub fn weight_decay(mut self, wd: f64) -> Sgd {
        self.weight_decay = wd;
        self
    }
}

impl Optimizer for Sgd {
    /// # Errors
    ///
    /// `InvalidArgument` (op `Sgd`), before any parameter changes, if `lr`, `momentum` or
    /// `weight_decay` is negative or not finite; engine errors.
    fn step(&mut self) -> Result<()> {
        check_non_negative("Sgd", "lr", self.lr)?;
        check_non_negative("Sgd", "momentum", self.momentum)?;
        check_non_negative("Sgd", "weight_decay", self.weight_decay)?;
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
/// let w = Tensor::from_vec(vec![1f32], [1])?.requires_grad_(true);
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
    t: i32,
    state: Vec<Option<(Tensor, Tensor)>>,
}

impl Adam {
    /// Adam with PyTorch's defaults (betas 0.9/0.999, eps 1e-8, no weight decay).
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if a parameter is not a leaf requiring grad.
    pub fn new(params: Vec<Tensor>, lr: f64) -> Result<Adam> {
        check_params("Adam", &params)?;
        let n = params.len();
        Ok(Adam {
            params,
            lr,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled: false,
            t: 0,
            state: vec![None; n],
        })
    }
    /// AdamW: decoupled weight decay `wd` (PyTorch's default 0.01).
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    pub fn adamw(params: Vec<Tensor>, lr: f64, wd: f64) -> Result<Adam> {
        let mut a = Adam::new(params, lr)?;
        a.weight_decay = wd;
        a.decoupled = true;
        Ok(a)
    }
}

impl Optimizer for Adam {
    /// # Errors
    ///
    /// `InvalidArgument` (op `Adam`), before any parameter or state changes, if `lr`, `eps`
    /// or `weight_decay` is negative or not finite, or a beta is outside `[0, 1)`; engine
    /// errors.
    fn step(&mut self) -> Result<()> {
        check_non_negative("Adam", "lr", self.lr)?;
        check_non_negative("Adam", "eps", self.eps)?;
        check_non_negative("Adam", "weight_decay", self.weight_decay)?;
        for (name, b) in [("betas.0", self.betas.0), ("betas.1", self.betas.1)] {
            if !(0.0..1.0).contains(&b) {
                return Err(Error::invalid(
                    "Adam",
                    format!("{name} must be in [0, 1), got {b}"),
                ));
            }
        }
        let _g = no_grad();
        self.t += 1;
        let (b1, b2) = self.betas;
        let bc1 = 1.0 - b1.powi(self.t);
        let bc2 = 1.0 - b2.powi(self.t);
        for (p, st) in self.params.iter().zip(&mut self.state) {
            let Some(mut g) = p.grad() else { continue };
            if self.weight_decay != 0.0 {
                if self.decoupled {
                    p.mul_scalar_(1.0 - self.lr * self.weight_decay)?;
                } else {
                    g = g.add(&p.mul_scalar(self.weight_decay)?)?;
                }
            }
            if st.is_none() {
                *st = Some((p.zeros_like()?, p.zeros_like()?));
            }
            let Some((m, v)) = st.as_mut() else {
                continue; // just set
            };
            m.mul_scalar_(b1)?;
            m.add_scaled_(&g, 1.0 - b1)?;
            v.mul_scalar_(b2)?;
            v.add_scaled_(&g.square()?, 1.0 - b2)?;
            let denom = v.div_scalar(bc2)?.sqrt()?.add_scalar(self.eps)?;
            p.add_scaled_(&m.div(&denom)?, -self.lr / bc1)?;
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
