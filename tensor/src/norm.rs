//! Normalisation over channels: `batch_norm` (batch statistics while training, running ones
//! in evaluation) and `group_norm`. Both are composed from reductions and elementwise ops, so
//! their gradients are those ops' gradients.

use crate::{Error, Result, Tensor};

impl Tensor {
    /// Batch normalisation, PyTorch's `F.batch_norm(x, running_mean, running_var, weight,
    /// bias, training, momentum, eps)`: `self` is `[batch, channels, ..]`, every other tensor
    /// `[channels]`. While `training`, each channel is normalised by the mean and (biased)
    /// variance over the batch and spatial dims, and the running statistics, when given, move
    /// towards them in place, `running = (1 − momentum)·running + momentum·batch` (the
    /// variance unbiased, as PyTorch's). Otherwise the running statistics normalise. Then
    /// `weight` scales and `bias` shifts each channel.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for input of fewer than 2 dims, missing running statistics in
    /// evaluation, or a single value per channel while training; `ShapeMismatch` for a
    /// statistic or affine term that is not `[channels]`; `DTypeMismatch`, `DeviceMismatch`;
    /// `UnsupportedDType` for integers and `bool`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let x = Tensor::from_vec(vec![1f32, 3., 5., 7.], [4, 1])?;
    /// let (mean, var) = (Tensor::zeros([1], DType::F32)?, Tensor::ones([1], DType::F32)?);
    /// let y = x.batch_norm(Some(&mean), Some(&var), None, None, true, 0.5, 0.0)?;
    /// let y = y.to_vec::<f32>()?; // mean 4, variance 5
    /// assert!((y[0] + 3.0 / 5f32.sqrt()).abs() < 1e-6);
    /// assert_eq!(mean.to_vec::<f32>()?, [2.0]);  // halfway to 4
    /// assert!((var.to_vec::<f32>()?[0] - (0.5 + 0.5 * 20.0 / 3.0)).abs() < 1e-5); // unbiased 20/3
    /// let e = x.batch_norm(Some(&mean), Some(&var), None, None, false, 0.1, 0.0)?; // evaluation
    /// assert!((e.to_vec::<f32>()?[0] + 1.0 / var.to_vec::<f32>()?[0].sqrt()).abs() < 1e-6);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub fn batch_norm(
        &self,
        running_mean: Option<&Tensor>,
        running_var: Option<&Tensor>,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        training: bool,
        momentum: f64,
        eps: f64,
    ) -> Result<Tensor> {
        let op = "batch_norm";
        let c = self.channels(op)?;
        let terms = [running_mean, running_var, weight, bias];
        self.check_channel_terms(op, c, &terms)?;
        // Statistics over every dim but the channels', kept for broadcasting.
        let dims: Vec<isize> = (0..self.rank() as isize).filter(|&d| d != 1).collect();
        let mut bshape = vec![1; self.rank()];
        bshape[1] = c;
        let per = |t: &Tensor| t.reshape(bshape.clone());
        let count = self.numel() / c.max(1);
        let y = if training {
            if count <= 1 {
                return Err(Error::invalid(
                    op,
                    format!(
                        "expects more than one value per channel while training, got input of shape {:?}",
                        self.dims()
                    ),
                ));
            }
            let mean = self.mean(&dims, true)?;
            let xc = self.sub(&mean)?;
            let var = xc.square()?.mean(&dims, true)?;
            {
                let _g = crate::no_grad();
                let m = momentum;
                if let Some(rm) = running_mean {
                    let new = mean.reshape([c])?.mul_scalar(m)?;
                    rm.mul_scalar_(1.0 - m)?.add_(&new)?;
                }
                if let Some(rv) = running_var {
                    let unbiased = count as f64 / (count - 1) as f64;
                    let new = var.reshape([c])?.mul_scalar(m * unbiased)?;
                    rv.mul_scalar_(1.0 - m)?.add_(&new)?;
                }
            }
            xc.mul(&var.add_scalar(eps)?.rsqrt()?)?
        } else {
            let (Some(rm), Some(rv)) = (running_mean, running_var) else {
                return Err(Error::invalid(
                    op,
                    "needs the running mean and variance in evaluation (training false)",
                ));
            };
            let inv = rv.add_scalar(eps)?.rsqrt()?;
            self.sub(&per(rm)?)?.mul(&per(&inv)?)?
        };
        let y = match weight {
            Some(w) => y.mul(&per(w)?)?,
            None => y,
        };
        match bias {
            Some(b) => y.add(&per(b)?),
            None => Ok(y),
        }
    }

    /// The channels (dim 1) of `[batch, channels, ..]` input to `op`.
    #[track_caller]
    fn channels(&self, op: &'static str) -> Result<usize> {
        match self.dims() {
            [_, c, ..] => Ok(*c),
            d => Err(Error::invalid(
                op,
                format!(
                    "expects input of at least 2 dims ([batch, channels, ..]), got shape {d:?}"
                ),
            )),
        }
    }

    /// Checks that every given term is `[channels]` of `self`'s dtype and device, and `self`
    /// a float.
    #[track_caller]
    fn check_channel_terms(
        &self,
        op: &'static str,
        channels: usize,
        terms: &[Option<&Tensor>],
    ) -> Result<()> {
        if !self.dtype().is_float() {
            return Err(Error::UnsupportedDType {
                at: crate::Caller::here(),
                op,
                dtype: self.dtype(),
            });
        }
        for t in terms.iter().flatten() {
            self.same_device(op, t)?;
            self.same_dtype(op, t)?;
            if t.dims() != [channels] {
                return Err(Error::ShapeMismatch {
                    at: crate::Caller::here(),
                    op,
                    lhs: t.dims().to_vec(),
                    rhs: vec![channels],
                });
            }
        }
        Ok(())
    }

    /// Group normalisation, PyTorch's `F.group_norm(x, num_groups, weight, bias, eps)`:
    /// `self` is `[batch, channels, ..]`; the channels fall into `groups` consecutive groups,
    /// each normalised over its channels and the spatial dims by its own mean and (biased)
    /// variance, then `weight` scales and `bias` shifts each channel (`[channels]` each).
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for input of fewer than 2 dims or channels that do not divide into
    /// `groups`; `ShapeMismatch` for affine terms that are not `[channels]`; `DTypeMismatch`,
    /// `DeviceMismatch`; `UnsupportedDType` for integers and `bool`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![1f32, 3., 10., 30.], [1, 4])?;
    /// let y = x.group_norm(2, None, None, 0.0)?.to_vec::<f32>()?; // {1, 3} and {10, 30}
    /// assert!(y.iter().zip([-1., 1., -1., 1.]).all(|(a, b)| (a - b).abs() < 1e-6));
    /// assert!(x.group_norm(3, None, None, 1e-5).is_err()); // 4 channels in 3 groups
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn group_norm(
        &self,
        groups: usize,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Result<Tensor> {
        let op = "group_norm";
        let (n, c) = (
            self.dims().first().copied().unwrap_or(0),
            self.channels(op)?,
        );
        if groups == 0 || !c.is_multiple_of(groups) {
            return Err(Error::invalid(
                op,
                format!("expects the {c} channels to divide into groups, got {groups} groups"),
            ));
        }
        self.check_channel_terms(op, c, &[weight, bias])?;
        let per_group = self.numel() / (n * groups).max(1);
        let g = self.reshape([n, groups, per_group])?;
        let mean = g.mean(&[-1], true)?;
        let xc = g.sub(&mean)?;
        let var = xc.square()?.mean(&[-1], true)?;
        let y = xc
            .mul(&var.add_scalar(eps)?.rsqrt()?)?
            .reshape(self.shape().clone())?;
        let mut bshape = vec![1; self.rank()];
        bshape[1] = c;
        let y = match weight {
            Some(w) => y.mul(&w.reshape(bshape.clone())?)?,
            None => y,
        };
        match bias {
            Some(b) => y.add(&b.reshape(bshape)?),
            None => Ok(y),
        }
    }
}
