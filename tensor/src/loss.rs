//! Losses: `nll_loss`, `cross_entropy` (with PyTorch's defaults and target kinds) and
//! `mse_loss`.

use crate::{DType, Error, Result, Tensor};
use eddy_ops::nn as kn;

impl Tensor {
    /// Negative log-likelihood, as PyTorch's `F.nll_loss` with its defaults (mean over the
    /// batch, `ignore_index = -100`): `self` holds log-probabilities `[N, C]` and `target`
    /// class indices `[N]` (`i64` or `u8`), or unbatched, `[C]` against a 0-d index, or over K
    /// dims, `[N, C, d1, …]` against `[N, d1, …]` (the mean over every position). Targets
    /// equal to -100 are left out of the sum and the count (NaN if none is left). Any other
    /// target outside `0..C` (a negative one included) fails at the call where the target's
    /// values are known on the host, else at the next sync with a message naming it.
    ///
    /// # Errors
    ///
    /// `ShapeMismatch`, `UnsupportedDType` (log-probabilities that are not floats, or a
    /// target that is not `i64` or `u8`; PyTorch refuses `i32` too), `IndexOutOfRange`,
    /// `DeviceMismatch`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let logp = Tensor::from_vec(vec![-1f32, -2., -3., -4.], [2, 2])?;
    /// let target = Tensor::from_vec(vec![1i64, 0], [2])?;
    /// assert_eq!(logp.nll_loss(&target)?.item::<f32>()?, 2.5); // -(-2 + -3) / 2
    /// let ignored = Tensor::from_vec(vec![1i64, -100], [2])?;
    /// assert_eq!(logp.nll_loss(&ignored)?.item::<f32>()?, 2.0); // the second row is left out
    /// assert!(logp.nll_loss(&target.to_dtype(eddy_tensor::DType::F32)?).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn nll_loss(&self, target: &Tensor) -> Result<Tensor> {
        const OP: &str = "nll_loss";
        if self.is_global() || target.is_global() {
            return self.global_nll_loss(target);
        }
        if self.rank() == 1 && target.rank() == 0 {
            // Unbatched: a batch of one, whose mean is its loss.
            return self.unsqueeze(0)?.nll_loss(&target.unsqueeze(0)?);
        }
        if let Some((x, t)) = self.k_dims(OP, target, false)? {
            return x.nll_loss(&t);
        }
        let range = self.check_class_targets(OP, target)?;
        self.nll_of(OP, target, range)
    }

    /// The K-dimensional form of a class loss, as PyTorch's (segmentation's `[N, C, d1, …]`
    /// scores against `[N, d1, …]` class indices, or `[N, C, d1, …]` probabilities where
    /// `probs`): the scores with the class dim moved last and every position a row
    /// (`[N·d1·…, C]`), and the target likewise, so that the mean is over every position.
    /// `None` for a rank other than 3 or more; `ShapeMismatch` for a target that does not fit.
    #[track_caller]
    fn k_dims(
        &self,
        op: &'static str,
        target: &Tensor,
        probs: bool,
    ) -> Result<Option<(Tensor, Tensor)>> {
        let Some(positions) = kn::class_positions(op, self.dims(), target.dims(), probs)? else {
            return Ok(None);
        };
        let dims = self.dims();
        let rank = self.rank() as isize;
        let last: Vec<isize> = std::iter::once(0)
            .chain(2..rank)
            .chain(std::iter::once(1))
            .collect();
        let c = dims[1];
        let x = self
            .permute(&last)?
            .reshape([positions.iter().product::<usize>(), c])?;
        let t = if probs {
            target.permute(&last)?.reshape([x.dims()[0], c])?
        } else {
            target.reshape([x.dims()[0]])?
        };
        Ok(Some((x, t)))
    }

    /// The checks of a class-index target for `op` on `self`, `[N, C]`, run before anything
    /// is enqueued; returns the target's range where its values are known on the host.
    #[track_caller]
    fn check_class_targets(&self, op: &'static str, target: &Tensor) -> Result<Option<(i64, i64)>> {
        kn::check_class_targets(
            op,
            (self.dims(), self.dtype()),
            (target.dims(), target.dtype()),
        )?;
        self.same_device(op, target)?;
        let range = target.known_range();
        if let Some(r) = range {
            kn::check_class_range(op, self.dims()[1], r)?;
        }
        Ok(range)
    }

    /// `nll_loss` of the log-probabilities `self` against checked class targets whose known
    /// range is `range`, as op `op`.
    #[track_caller]
    fn nll_of(
        &self,
        op: &'static str,
        target: &Tensor,
        range: Option<(i64, i64)>,
    ) -> Result<Tensor> {
        if let Some(loss) = self.nll_fused(op, target)? {
            return Ok(loss);
        }
        let target = &target.cast(DType::I64)?;
        if range.is_some_and(|(lo, _)| lo >= 0) {
            // Known, and none ignored: the plain gather, whose kernel checks nothing new.
            return self
                .gather_impl(op, 1, &target.unsqueeze(1)?)?
                .mean_all()?
                .neg();
        }
        // Some targets may be -100 (known so, or computed): those are gathered at class 0 and
        // weighed 0, and the mean is over the others: the mean over all, scaled by N / kept
        // (NaN if none is kept). With none ignored the scale is exactly 1, so the loss and its
        // gradient are the plain path's bit for bit (a compiled graph, whose targets are never
        // known, takes this path). The gather's kernel checks the other targets, so a computed
        // one out of range fails at the next sync.
        let keep = target.ne_scalar(kn::IGNORE_INDEX as f64)?;
        let safe = keep.where_(target, &target.zeros_like()?)?;
        let picked = self.gather_impl(op, 1, &safe.unsqueeze(1)?)?.squeeze(1)?;
        let w = keep.to_dtype(self.dtype())?;
        let scale = (picked.numel() as f64 / &w.sum_all()?)?;
        picked.mul(&w)?.mean_all()?.mul(&scale)?.neg()
    }

    /// [`nll_of`](Self::nll_of) as one kernel, and its gradient as another, on devices that
    /// have them (`None` elsewhere). The kernels check the targets and leave out the -100s
    /// themselves, so a known target and a computed one take the same two instructions.
    #[track_caller]
    fn nll_fused(&self, op: &'static str, target: &Tensor) -> Result<Option<Tensor>> {
        let dev = self.device();
        let mut d = kn::ClassDims {
            dtype: self.dtype(),
            idx_dtype: target.dtype(),
            offset: 0,
            idx_offset: 0,
            rows: self.dims()[0],
            cols: self.dims()[1],
        };
        if kn::nll_loss(dev, op, d).is_none() {
            return Ok(None);
        }
        let (lp, t) = (self.contiguous()?, target.contiguous()?);
        (d.offset, d.idx_offset) = (lp.layout().offset, t.layout().offset);
        let k = kernel!(op, dev, kn::nll_loss(dev, op, d));
        let loss = lp.empty_like_shape(crate::Shape::default(), d.dtype)?;
        Tensor::launch(k, &[&lp, &t], &[&loss])?;
        let saved = t.clone();
        Ok(Some(loss.record_saving(
            op,
            &[&lp],
            &[&saved],
            false,
            move |g, _, _| {
                let gx = g.empty_like_shape(crate::Shape::from([d.rows, d.cols]), g.dtype())?;
                let d = kn::ClassDims {
                    dtype: g.dtype(),
                    offset: g.layout().offset,
                    ..d
                };
                let k = kernel!(op, g.device(), kn::nll_loss_backward(g.device(), op, d));
                Tensor::launch(k, &[g, &t], &[&gx])?;
                Ok(vec![Some(gx)])
            },
        )))
    }

    /// Cross-entropy of logits, as PyTorch's `F.cross_entropy` with its defaults (mean over
    /// the batch, `ignore_index = -100`):
    ///
    /// - logits `[N, C]` against class indices `[N]` (`i64` or `u8`): `nll_loss(log_softmax)`,
    ///   targets equal to -100 left out (NaN if all are), whether they are known on the host
    ///   or computed;
    /// - against class probabilities `[N, C]` (a float target): `-(p · log_softmax).sum(1).mean()`;
    /// - unbatched: logits `[C]` against a 0-d index or `[C]` probabilities;
    /// - over K dims (segmentation): logits `[N, C, d1, …]` against indices `[N, d1, …]` or
    ///   probabilities `[N, C, d1, …]`, the mean over every position.
    ///
    /// # Errors
    ///
    /// `ShapeMismatch` for other shapes; `UnsupportedDType` for an index target that is not
    /// `i64` or `u8` (PyTorch refuses `i32` too); `IndexOutOfRange` for a known index outside
    /// `0..C` other than -100 (computed ones fail at the next sync); `DeviceMismatch`.
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
        if self.is_global() || target.is_global() {
            return self.global_cross_entropy(target);
        }
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
        if let Some((x, t)) = self.k_dims(OP, target, target.dtype().is_float())? {
            return x.cross_entropy(&t);
        }
        if target.dtype().is_float() {
            if self.rank() != 2 {
                return Err(mismatch());
            }
            kn::check_same_shape(OP, self.dims(), target.dims())?;
            self.same_device(OP, target)?;
            let lp = self.log_softmax(1)?;
            return lp
                .mul(&target.cast(lp.dtype())?)?
                .sum(&[1], false)?
                .mean_all()?
                .neg();
        }
        let range = self.check_class_targets(OP, target)?;
        self.log_softmax(-1)?.nll_of(OP, target, range)
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
        kn::check_same_shape("mse_loss", self.dims(), target.dims())?;
        self.sub(target)?.square()?.mean_all()
    }
}
