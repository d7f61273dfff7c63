//! Losses: `nll_loss`, `cross_entropy` (with PyTorch's defaults and target kinds) and
//! `mse_loss`.

use crate::{DType, Error, Result, Tensor};

/// The target value `cross_entropy` ignores, PyTorch's default `ignore_index`.
const IGNORE_INDEX: i64 = -100;

impl Tensor {
    /// Negative log-likelihood: `self` holds log-probabilities `[N, C]`, `target` class
    /// indices `[N]` (`i64`); the mean over the batch. A target out of `0..C` (a negative one
    /// included) fails at the call where the target's values are known on the host, else at
    /// the next sync with a message naming it.
    ///
    /// # Errors
    ///
    /// `ShapeMismatch`, `UnsupportedDType` (target must be `i64` or `i32`), `IndexOutOfRange`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let logp = Tensor::from_vec(vec![-1f32, -2., -3., -4.], [2, 2])?;
    /// let target = Tensor::from_vec(vec![1i64, 0], [2])?;
    /// assert_eq!(logp.nll_loss(&target)?.item::<f32>()?, 2.5); // -(-2 + -3) / 2
    /// assert!(logp.nll_loss(&target.to_dtype(eddy_tensor::DType::F32)?).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn nll_loss(&self, target: &Tensor) -> Result<Tensor> {
        self.check_nll("nll_loss", target)?;
        self.gather_impl("nll_loss", 1, &target.unsqueeze(1)?)?
            .mean_all()?
            .neg()
    }

    /// The argument checks of `nll_loss`, run before anything is enqueued.
    #[track_caller]
    fn check_nll(&self, op: &'static str, target: &Tensor) -> Result<()> {
        if self.rank() != 2 || target.rank() != 1 || target.dims()[0] != self.dims()[0] {
            return Err(Error::ShapeMismatch {
                at: crate::Caller::here(),
                op,
                lhs: self.dims().to_vec(),
                rhs: target.dims().to_vec(),
            });
        }
        Tensor::check_index(op, target)?;
        Tensor::check_index_values(op, target, self.dims()[1])?;
        self.same_device(op, target)
    }

    /// Cross-entropy of logits, as PyTorch's `F.cross_entropy` with its defaults (mean over
    /// the batch, `ignore_index = -100`):
    ///
    /// - logits `[N, C]` against class indices `[N]` (`i64` or `u8`): `nll_loss(log_softmax)`
    ///   over the targets that are not -100 (NaN if all are);
    /// - against class probabilities `[N, C]` (a float target): `-(p · log_softmax).sum(1).mean()`;
    /// - unbatched: logits `[C]` against a 0-d index or `[C]` probabilities.
    ///
    /// # Errors
    ///
    /// `ShapeMismatch` for other shapes; `UnsupportedDType` for an index target that is not
    /// `i64` or `u8` (PyTorch refuses `i32` too); `IndexOutOfRange` for a known index outside
    /// `0..C` other than -100 (computed ones fail at the next sync: -100 is ignored in targets
    /// whose values are known on the host, made by `from_vec`); `DeviceMismatch`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let logits = Tensor::from_vec(vec![0f32, 0.], [1, 2])?;
    /// let loss = logits.cross_entropy(&Tensor::from_vec(vec![1i64], [1])?)?;
    /// assert!((loss.item::<f32>()? - 2f32.ln()).abs() < 1e-6);
    /// let two = Tensor::from_vec(vec![0f32, 0., 5., 0.], [2, 2])?;
    /// let ignored = two.cross_entropy(&Tensor::from_vec(vec![1i64, -100], [2])?)?;
    /// assert_eq!(ignored.item::<f32>()?, loss.item::<f32>()?); // the second row is ignored
    /// let soft = logits.cross_entropy(&Tensor::from_vec(vec![0.5f32, 0.5], [1, 2])?)?;
    /// assert!((soft.item::<f32>()? - 2f32.ln()).abs() < 1e-6);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn cross_entropy(&self, target: &Tensor) -> Result<Tensor> {
        const OP: &str = "cross_entropy";
        let at = crate::Caller::here(); // outside the closure, which `#[track_caller]` misses
        let mismatch = || Error::ShapeMismatch {
            at,
            op: OP,
            lhs: self.dims().to_vec(),
            rhs: target.dims().to_vec(),
        };
        if self.rank() == 1 {
            // Unbatched: a batch of one, whose mean is its loss.
            // A 0-d class index, or `[C]` class probabilities.
            let want = usize::from(target.dtype().is_float());
            if target.rank() != want {
                return Err(mismatch());
            }
            return self.unsqueeze(0)?.cross_entropy(&target.unsqueeze(0)?);
        }
        if target.dtype().is_float() {
            if self.rank() != 2 || target.dims() != self.dims() {
                return Err(mismatch());
            }
            self.same_device(OP, target)?;
            let lp = self.log_softmax(1)?;
            return lp
                .mul(&target.cast(lp.dtype())?)?
                .sum(&[1], false)?
                .mean_all()?
                .neg();
        }
        if !matches!(target.dtype(), DType::I64 | DType::U8) {
            return Err(Error::UnsupportedDType {
                at: crate::Caller::here(),
                op: OP,
                dtype: target.dtype(),
            });
        }
        if self.rank() != 2 || target.rank() != 1 || target.dims()[0] != self.dims()[0] {
            return Err(mismatch());
        }
        self.same_device(OP, target)?;
        let classes = i64::try_from(self.dims()[1]).unwrap_or(i64::MAX);
        let range = target.known_range();
        let target = &target.cast(DType::I64)?;
        match range {
            Some((lo, hi)) if hi >= classes || (lo < 0 && lo != IGNORE_INDEX) => {
                return Err(Error::IndexOutOfRange {
                    at: crate::Caller::here(),
                    op: OP,
                    index: if hi >= classes { hi } else { lo },
                    size: self.dims()[1],
                });
            }
            Some((lo, _)) if lo == IGNORE_INDEX => {}
            // No target ignored (host-known), or computed targets: the plain path, whose
            // kernel checks each index (a computed -100 is out of range there, not ignored:
            // the masked path costs a training step a dozen more ops).
            _ => return self.log_softmax(-1)?.nll_loss(target),
        }
        // Targets equal to -100 are ignored: gathered at class 0 and weighed 0, and the mean
        // is over the others (0 / 0, NaN, if none is left).
        let keep = target.ne_scalar(IGNORE_INDEX as f64)?;
        let safe = keep.where_(target, &target.zeros_like()?)?;
        let lp = self.log_softmax(-1)?;
        let picked = lp.gather_impl(OP, 1, &safe.unsqueeze(1)?)?.squeeze(1)?;
        let w = keep.to_dtype(lp.dtype())?;
        picked.mul(&w)?.sum_all()?.div(&w.sum_all()?)?.neg()
    }

    /// Mean squared error against `target` (same shape).
    ///
    /// # Errors
    ///
    /// `ShapeMismatch`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let y = Tensor::from_vec(vec![1f32, 2., 3.], [3])?;
    /// let t = Tensor::from_vec(vec![1f32, 2., 5.], [3])?;
    /// assert!((y.mse_loss(&t)?.item::<f32>()? - 4.0 / 3.0).abs() < 1e-6);
    /// assert!(y.mse_loss(&t.reshape([3, 1])?).is_err()); // shapes must match
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn mse_loss(&self, target: &Tensor) -> Result<Tensor> {
        if self.dims() != target.dims() {
            return Err(Error::ShapeMismatch {
                at: crate::Caller::here(),
                op: "mse_loss",
                lhs: self.dims().to_vec(),
                rhs: target.dims().to_vec(),
            });
        }
        self.sub(target)?.square()?.mean_all()
    }
}
