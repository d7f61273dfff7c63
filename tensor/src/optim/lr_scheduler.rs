//! Learning-rate schedules, as PyTorch's `optim.lr_scheduler`: a [`Scheduler`] remembers the
//! optimizer's learning rate when it is made (the base rate) and, at each
//! [`step`](Scheduler::step), sets the rate its [`Schedule`] gives for the next epoch.
//!
//! Rates come from each schedule's closed form (PyTorch's `_get_closed_form_lr`), so they do
//! not drift over many steps, and [`Scheduler::lr_at`] tells any epoch's rate without stepping.
//!
//! # Examples
//!
//! ```
//! use eddy_tensor::optim::lr_scheduler::{Schedule, Scheduler};
//! use eddy_tensor::optim::{Optimizer, Sgd};
//! use eddy_tensor::Tensor;
//! let w = Tensor::from_vec(vec![1f32], [1])?.requires_grad_(true)?;
//! let mut opt = Sgd::new(vec![w.clone()], 0.1)?;
//! let mut sched = Scheduler::new(&mut opt, Schedule::Step { step_size: 2, gamma: 0.5 })?;
//! let mut rates = vec![opt.lr()];
//! for _epoch in 0..5 {
//!     // ... the epoch's optimizer steps ...
//!     sched.step(&mut opt);
//!     rates.push(opt.lr());
//! }
//! assert_eq!(rates, [0.1, 0.1, 0.05, 0.05, 0.025, 0.025]);
//! # Ok::<(), eddy_tensor::Error>(())
//! ```

use super::Optimizer;
use crate::{Error, Result};

/// How the learning rate follows the epoch `t` (0 before the first [`Scheduler::step`]), from
/// the base rate `lr₀`.
///
/// # Examples
///
/// ```
/// use eddy_tensor::optim::lr_scheduler::{Schedule, Scheduler};
/// use eddy_tensor::optim::Sgd;
/// use eddy_tensor::Tensor;
/// let w = Tensor::zeros([1], eddy_tensor::DType::F32)?.requires_grad_(true)?;
/// let mut opt = Sgd::new(vec![w], 1.0)?;
/// let multi = Schedule::MultiStep { milestones: vec![2, 4], gamma: 0.1 };
/// let s = Scheduler::new(&mut opt, multi)?;
/// let rates: Vec<f64> = (0..6).map(|t| s.lr_at(t)).collect();
/// assert_eq!(rates[..2], [1.0, 1.0]);
/// assert!((rates[2] - 0.1).abs() < 1e-12 && (rates[5] - 0.01).abs() < 1e-12);
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum Schedule {
    /// `lr₀ · gamma^⌊t / step_size⌋` (PyTorch's `StepLR`).
    Step {
        /// Epochs between decays, at least 1.
        step_size: usize,
        /// The decay factor, finite and positive.
        gamma: f64,
    },
    /// `lr₀ · gamma^k`, `k` the number of milestones at or before `t` (a milestone listed twice
    /// counts twice) (PyTorch's `MultiStepLR`).
    MultiStep {
        /// The epochs at which the rate decays.
        milestones: Vec<usize>,
        /// The decay factor, finite and positive.
        gamma: f64,
    },
    /// `lr₀ · gamma^t` (PyTorch's `ExponentialLR`).
    Exponential {
        /// The decay factor, finite and positive.
        gamma: f64,
    },
    /// `eta_min + (lr₀ − eta_min) · (1 + cos(π t / t_max)) / 2`: half a cosine from `lr₀` down
    /// to `eta_min` over `t_max` epochs, then back up, and so on (PyTorch's
    /// `CosineAnnealingLR`).
    CosineAnnealing {
        /// Epochs from the base rate to `eta_min`, at least 1.
        t_max: usize,
        /// The lowest rate, finite and at least 0.
        eta_min: f64,
    },
    /// `lr₀ · (start + (end − start) · min(t, total_iters) / total_iters)`: a linear ramp,
    /// typically a warm-up from a fraction of the base rate (PyTorch's `LinearLR`).
    Linear {
        /// The factor at epoch 0, in `(0, 1]`.
        start_factor: f64,
        /// The factor from epoch `total_iters` on, in `[0, 1]`.
        end_factor: f64,
        /// Epochs the ramp lasts, at least 1.
        total_iters: usize,
    },
}

impl Schedule {
    /// PyTorch's class name, for errors.
    fn name(&self) -> &'static str {
        match self {
            Schedule::Step { .. } => "StepLR",
            Schedule::MultiStep { .. } => "MultiStepLR",
            Schedule::Exponential { .. } => "ExponentialLR",
            Schedule::CosineAnnealing { .. } => "CosineAnnealingLR",
            Schedule::Linear { .. } => "LinearLR",
        }
    }

    /// `InvalidArgument` naming the first parameter out of its range.
    #[track_caller]
    fn check(&self) -> Result<()> {
        let op = self.name();
        let bad = |what: String| Err(Error::invalid(op, what));
        if let Schedule::Step { gamma, .. }
        | Schedule::MultiStep { gamma, .. }
        | Schedule::Exponential { gamma } = *self
            && !(gamma.is_finite() && gamma > 0.0)
        {
            return bad(format!("gamma must be finite and positive, got {gamma}"));
        }
        match *self {
            Schedule::Step { step_size: 0, .. } => {
                return bad("step_size must be at least 1, got 0".into());
            }
            Schedule::Step { .. } | Schedule::MultiStep { .. } | Schedule::Exponential { .. } => {}
            Schedule::CosineAnnealing { t_max, eta_min } => {
                if t_max == 0 {
                    return bad("t_max must be at least 1, got 0".into());
                }
                if !(eta_min.is_finite() && eta_min >= 0.0) {
                    return bad(format!(
                        "eta_min must be finite and at least 0, got {eta_min}"
                    ));
                }
            }
            Schedule::Linear {
                start_factor,
                end_factor,
                total_iters,
            } => {
                if !(start_factor > 0.0 && start_factor <= 1.0) {
                    return bad(format!(
                        "start_factor must be in (0, 1], got {start_factor}"
                    ));
                }
                if !(0.0..=1.0).contains(&end_factor) {
                    return bad(format!("end_factor must be in [0, 1], got {end_factor}"));
                }
                if total_iters == 0 {
                    return bad("total_iters must be at least 1, got 0".into());
                }
            }
        }
        Ok(())
    }

    /// The rate at epoch `t` from the base rate `base`.
    fn lr(&self, base: f64, t: usize) -> f64 {
        // Exponents beyond i32 only happen after billions of epochs; saturate rather than wrap.
        let powi = |g: f64, k: usize| g.powi(i32::try_from(k).unwrap_or(i32::MAX));
        match self {
            Schedule::Step { step_size, gamma } => base * powi(*gamma, t / step_size),
            Schedule::MultiStep { milestones, gamma } => {
                base * powi(*gamma, milestones.iter().filter(|&&m| m <= t).count())
            }
            Schedule::Exponential { gamma } => base * powi(*gamma, t),
            Schedule::CosineAnnealing { t_max, eta_min } => {
                let phase = std::f64::consts::PI * t as f64 / *t_max as f64;
                eta_min + (base - eta_min) * (1.0 + phase.cos()) / 2.0
            }
            Schedule::Linear {
                start_factor,
                end_factor,
                total_iters,
            } => {
                let done = t.min(*total_iters) as f64 / *total_iters as f64;
                base * (start_factor + (end_factor - start_factor) * done)
            }
        }
    }
}

/// Drives an optimizer's learning rate along a [`Schedule`], one epoch per
/// [`step`](Self::step). See the [module docs](self) for an example.
///
/// # Examples
///
/// ```
/// use eddy_tensor::optim::lr_scheduler::{Schedule, Scheduler};
/// use eddy_tensor::optim::{Optimizer, Sgd};
/// use eddy_tensor::Tensor;
/// let w = Tensor::zeros([1], eddy_tensor::DType::F32)?.requires_grad_(true)?;
/// let mut opt = Sgd::new(vec![w], 1.0)?;
/// let mut sched = Scheduler::new(&mut opt, Schedule::Exponential { gamma: 0.5 })?;
/// sched.step(&mut opt);
/// sched.step(&mut opt);
/// assert_eq!(opt.lr(), 0.25);
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Scheduler {
    schedule: Schedule,
    base_lr: f64,
    epoch: usize,
}

impl Scheduler {
    /// A scheduler whose base rate is `opt`'s learning rate now. Like PyTorch's, it sets the
    /// rate of epoch 0 at once: the base rate, except for [`Schedule::Linear`], which starts
    /// at `start_factor` times it.
    ///
    /// # Errors
    ///
    /// `InvalidArgument`, with PyTorch's class name as the op (`StepLR`, `CosineAnnealingLR`,
    /// ...), for a schedule parameter out of its range or an optimizer whose rate is negative
    /// or not finite; `opt` is unchanged then.
    ///
    /// # Examples
    ///
    /// A linear warm-up from a tenth of the rate over 4 epochs:
    ///
    /// ```
    /// use eddy_tensor::optim::lr_scheduler::{Schedule, Scheduler};
    /// use eddy_tensor::optim::{Adam, Optimizer};
    /// use eddy_tensor::Tensor;
    /// let w = Tensor::zeros([3], eddy_tensor::DType::F32)?.requires_grad_(true)?;
    /// let mut opt = Adam::new(vec![w], 1e-3)?;
    /// let warm = Schedule::Linear { start_factor: 0.1, end_factor: 1.0, total_iters: 4 };
    /// let mut sched = Scheduler::new(&mut opt, warm)?;
    /// assert!((opt.lr() - 1e-4).abs() < 1e-12);
    /// for _ in 0..4 {
    ///     sched.step(&mut opt);
    /// }
    /// assert!((opt.lr() - 1e-3).abs() < 1e-12);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn new(opt: &mut dyn Optimizer, schedule: Schedule) -> Result<Scheduler> {
        schedule.check()?;
        let base_lr = opt.lr();
        if !(base_lr.is_finite() && base_lr >= 0.0) {
            return Err(Error::invalid(
                schedule.name(),
                format!("the optimizer's lr must be finite and at least 0, got {base_lr}"),
            ));
        }
        let s = Scheduler {
            schedule,
            base_lr,
            epoch: 0,
        };
        opt.set_lr(s.lr_at(0));
        Ok(s)
    }

    /// Advances one epoch and sets `opt`'s learning rate to that epoch's; returns it.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::optim::lr_scheduler::{Schedule, Scheduler};
    /// use eddy_tensor::optim::{Optimizer, Sgd};
    /// use eddy_tensor::Tensor;
    /// let w = Tensor::zeros([1], eddy_tensor::DType::F32)?.requires_grad_(true)?;
    /// let mut opt = Sgd::new(vec![w], 0.1)?;
    /// let mut sched = Scheduler::new(&mut opt, Schedule::Step { step_size: 1, gamma: 0.5 })?;
    /// assert_eq!(sched.step(&mut opt), 0.05);
    /// assert_eq!((opt.lr(), sched.epoch()), (0.05, 1));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn step(&mut self, opt: &mut dyn Optimizer) -> f64 {
        self.epoch += 1;
        let lr = self.lr_at(self.epoch);
        opt.set_lr(lr);
        lr
    }

    /// The rate the schedule gives for epoch `t` (0 is before the first step).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::optim::lr_scheduler::{Schedule, Scheduler};
    /// use eddy_tensor::optim::Sgd;
    /// use eddy_tensor::Tensor;
    /// let w = Tensor::zeros([1], eddy_tensor::DType::F32)?.requires_grad_(true)?;
    /// let mut opt = Sgd::new(vec![w], 1.0)?;
    /// let cos = Scheduler::new(&mut opt, Schedule::CosineAnnealing { t_max: 10, eta_min: 0.0 })?;
    /// assert_eq!(cos.lr_at(0), 1.0);
    /// assert!((cos.lr_at(5) - 0.5).abs() < 1e-12);
    /// assert!(cos.lr_at(10).abs() < 1e-12);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn lr_at(&self, t: usize) -> f64 {
        self.schedule.lr(self.base_lr, t)
    }

    /// The epochs stepped so far.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::optim::lr_scheduler::{Schedule, Scheduler};
    /// use eddy_tensor::optim::Sgd;
    /// use eddy_tensor::Tensor;
    /// let w = Tensor::zeros([1], eddy_tensor::DType::F32)?.requires_grad_(true)?;
    /// let mut opt = Sgd::new(vec![w], 0.1)?;
    /// let mut sched = Scheduler::new(&mut opt, Schedule::Exponential { gamma: 0.9 })?;
    /// assert_eq!(sched.epoch(), 0);
    /// sched.step(&mut opt);
    /// sched.step(&mut opt);
    /// assert_eq!(sched.epoch(), 2);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn epoch(&self) -> usize {
        self.epoch
    }

    /// The base rate: the optimizer's when the scheduler was made.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::optim::lr_scheduler::{Schedule, Scheduler};
    /// use eddy_tensor::optim::{Optimizer, Sgd};
    /// use eddy_tensor::Tensor;
    /// let w = Tensor::zeros([1], eddy_tensor::DType::F32)?.requires_grad_(true)?;
    /// let mut opt = Sgd::new(vec![w], 0.5)?;
    /// let warm = Schedule::Linear { start_factor: 0.5, end_factor: 1.0, total_iters: 2 };
    /// let sched = Scheduler::new(&mut opt, warm)?;
    /// assert_eq!((sched.base_lr(), opt.lr()), (0.5, 0.25)); // the warm-up starts below the base
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn base_lr(&self) -> f64 {
        self.base_lr
    }

    /// The schedule.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::optim::lr_scheduler::{Schedule, Scheduler};
    /// use eddy_tensor::optim::Sgd;
    /// use eddy_tensor::Tensor;
    /// let w = Tensor::zeros([1], eddy_tensor::DType::F32)?.requires_grad_(true)?;
    /// let mut opt = Sgd::new(vec![w], 0.1)?;
    /// let sched = Scheduler::new(&mut opt, Schedule::Exponential { gamma: 0.9 })?;
    /// assert_eq!(sched.schedule(), &Schedule::Exponential { gamma: 0.9 });
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }
}
