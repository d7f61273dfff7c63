//! Reductions composed of the others: `logsumexp`, vector norms, and the logical `any`/`all`.

use super::all;
use crate::{DType, Error, Result, Shape, Tensor};
use eddy_ops::norm_dim;
use eddy_ops::reduce::ReduceOp;

/// Reductions composed of the others: `logsumexp`, vector norms, and the logical `any`/`all`.
impl Tensor {
    /// `log Σ exp(x)` over `dims`, computed as `m + log Σ exp(x − m)` with `m` the maximum, so
    /// large values do not overflow; an infinite maximum is handled (all `-inf` gives `-inf`)
    /// and an empty reduction gives `-inf`, as PyTorch. Integers compute in `f32`.
    /// Differentiable (the gradient is the softmax over `dims`).
    ///
    /// # Errors
    ///
    /// `InvalidDim`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![1000f32, 1000.0], [2])?;
    /// let y = x.logsumexp(&[0], false)?.item::<f32>()?;
    /// assert!((y - (1000.0 + 2f32.ln())).abs() < 1e-3);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn logsumexp(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        let r = self.rank();
        let mut empty = false;
        for &d in dims {
            empty |= self.dims()[norm_dim("logsumexp", d, r)?] == 0;
        }
        if !self.dtype().is_float() {
            return self.to_dtype(crate::DType::F32)?.logsumexp(dims, keepdim);
        }
        if empty {
            // Σ over nothing is 0, and its log -inf.
            return self.sum(dims, keepdim)?.add_scalar(f64::NEG_INFINITY);
        }
        let m = {
            let _g = crate::no_grad();
            let m = self.reduce(ReduceOp::Max, dims, true)?;
            // An infinite maximum would make `x − m` NaN (∞ − ∞): shift by 0 there instead.
            let zero = m.new_filled(Shape::default(), m.dtype(), 0.0)?;
            m.abs()?.eq_scalar(f64::INFINITY)?.where_(&zero, &m)?
        };
        let s = self.sub(&m)?.exp()?.sum(dims, keepdim)?;
        s.log()?.add(&m.reshape(s.shape().clone())?)
    }

    /// The vector `p`-norm over `dims`: `(Σ |x|^p)^(1/p)`; `p = ∞` is the largest `|x|`,
    /// `−∞` the smallest, and `0` counts the non-zero elements, as PyTorch's
    /// `linalg.vector_norm`. Float tensors only. Differentiable; the 2-norm's gradient at a zero
    /// vector is 0 (not NaN), as PyTorch's.
    ///
    /// # Errors
    ///
    /// `InvalidDim`; `UnsupportedDType` for integer tensors; `InvalidArgument` for a NaN `p`;
    /// `EmptyTensor` for `p = ±∞` over an empty dim.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let v = Tensor::from_vec(vec![3f32, -4.0, 0.0, 0.0], [2, 2])?;
    /// assert_eq!(v.norm(2.0, &[1], false)?.to_vec::<f32>()?, [5.0, 0.0]);
    /// assert_eq!(v.norm(1.0, &[0, 1], false)?.item::<f32>()?, 7.0);
    /// assert_eq!(v.norm(f64::INFINITY, &[0], false)?.to_vec::<f32>()?, [3.0, 4.0]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn norm(&self, p: f64, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        let r = self.rank();
        let mut keep_shape = self.shape().clone();
        for &d in dims {
            keep_shape.0[norm_dim("norm", d, r)?] = 1;
        }
        if !self.dtype().is_float() {
            return Err(Error::UnsupportedDType {
                at: crate::Caller::here(),
                op: "norm",
                dtype: self.dtype(),
            });
        }
        if p.is_nan() {
            return Err(Error::invalid("norm", "p is NaN"));
        }
        if matches!(self.dtype(), DType::F16 | DType::BF16) {
            // Computed in f32, as PyTorch accumulates half norms: the squares (or p-th powers)
            // of values past 256 overflow f16.
            return self
                .to_dtype(DType::F32)?
                .norm(p, dims, keepdim)?
                .to_dtype(self.dtype());
        }
        if p == 2.0 {
            let y = {
                let _g = crate::no_grad();
                self.square()?.sum(dims, keepdim)?.sqrt()?
            };
            return Ok(
                y.record_saving("norm", &[self], &[self], true, move |g, ins, y| {
                    // d‖x‖/dx = x / ‖x‖, taken as 0 where ‖x‖ = 0.
                    let y = y.reshape(keep_shape.clone())?;
                    let gx = ins[0].div(&y)?.mul(&g.reshape(keep_shape.clone())?)?;
                    let zero = gx.new_filled(Shape::default(), gx.dtype(), 0.0)?;
                    Ok(vec![Some(y.eq_scalar(0.0)?.where_(&zero, &gx)?)])
                }),
            );
        }
        if p == 0.0 {
            let _g = crate::no_grad();
            return self
                .ne_scalar(0.0)?
                .to_dtype(self.dtype())?
                .sum(dims, keepdim);
        }
        let a = self.abs()?;
        if p == f64::INFINITY {
            return a.reduce(ReduceOp::Max, dims, keepdim);
        }
        if p == f64::NEG_INFINITY {
            return a.reduce(ReduceOp::Min, dims, keepdim);
        }
        if p == 1.0 {
            return a.sum(dims, keepdim);
        }
        let y = {
            let _g = crate::no_grad();
            a.pow_scalar(p)?.sum(dims, keepdim)?.pow_scalar(1.0 / p)?
        };
        Ok(
            y.record_saving("norm", &[self], &[self], true, move |g, ins, y| {
                // d‖x‖_p/dx = sign(x)·|x|^(p-1) / ‖x‖^(p-1), with |x|^(p-1) taken as 0 at x = 0 and
                // the whole as 0 where ‖x‖ = 0, as PyTorch's `norm_backward` (the composed
                // gradient is inf·0 = NaN there).
                let x = &ins[0];
                let y = y.reshape(keep_shape.clone())?;
                let zero = x.new_filled(Shape::default(), x.dtype(), 0.0)?;
                let scaled = x.sign()?.mul(
                    &x.eq_scalar(0.0)?
                        .where_(&zero, &x.abs()?.pow_scalar(p - 1.0)?)?,
                )?;
                let scale = g
                    .reshape(keep_shape.clone())?
                    .div(&y.pow_scalar(p - 1.0)?)?;
                let scale = y.eq_scalar(0.0)?.where_(&zero, &scale)?;
                Ok(vec![Some(scaled.mul(&scale)?)])
            }),
        )
    }

    /// Whether any element over `dims` is non-zero (NaN counts as non-zero), as a `Bool`
    /// tensor (`U8` for `U8` input, as PyTorch's). Any dtype.
    ///
    /// # Errors
    ///
    /// `InvalidDim`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let m = Tensor::from_vec(vec![0i64, 0, 0, 3], [2, 2])?;
    /// assert_eq!(m.any(&[1], false)?.to_f64_vec()?, [0.0, 1.0]);
    /// assert_eq!(m.all(&[0], false)?.to_f64_vec()?, [0.0, 0.0]);
    /// assert_eq!(m.any_all()?.to_scalar()?, 1.0);
    /// let bytes = Tensor::from_vec(vec![1u8, 2], [2])?;
    /// assert_eq!(bytes.any_all()?.dtype(), eddy_tensor::DType::U8);
    /// assert_eq!(bytes.all_all()?.item::<u8>()?, 1);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn any(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        for &d in dims {
            norm_dim("any", d, self.rank())?;
        }
        let _g = crate::no_grad();
        self.ne_scalar(0.0)?
            .sum(dims, keepdim)?
            .gt_scalar(0.0)?
            .to_dtype(truth_dtype(self.dtype()))
    }

    /// Whether every element over `dims` is non-zero (true over an empty dim), as a `Bool`
    /// tensor (`U8` for `U8` input, as PyTorch's). Any dtype.
    ///
    /// # Errors
    ///
    /// `InvalidDim`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1f32, 0., 2., 3.], [2, 2])?;
    /// assert_eq!(t.all(&[1], false)?.to_vec::<bool>()?, [false, true]);
    /// assert_eq!(t.all(&[0], false)?.to_vec::<bool>()?, [true, false]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn all(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        for &d in dims {
            norm_dim("all", d, self.rank())?;
        }
        let _g = crate::no_grad();
        self.eq_scalar(0.0)?
            .sum(dims, keepdim)?
            .eq_scalar(0.0)?
            .to_dtype(truth_dtype(self.dtype()))
    }

    /// [`any`](Self::any) over every dim (0-dim).
    ///
    /// # Errors
    ///
    /// Only engine errors.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// assert!(Tensor::from_vec(vec![0i64, 0, 3], [3])?.any_all()?.item::<bool>()?);
    /// assert!(!Tensor::zeros([2, 2], DType::F32)?.any_all()?.item::<bool>()?);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn any_all(&self) -> Result<Tensor> {
        self.any(&all(self.rank()), false)
    }

    /// [`all`](Self::all) over every dim (0-dim).
    ///
    /// # Errors
    ///
    /// Only engine errors.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// assert!(Tensor::from_vec(vec![1f32, -2.], [2])?.all_all()?.item::<bool>()?);
    /// assert!(!Tensor::from_vec(vec![1f32, 0.], [2])?.all_all()?.item::<bool>()?);
    /// assert!(Tensor::zeros([0], DType::F32)?.all_all()?.item::<bool>()?); // vacuously true
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn all_all(&self) -> Result<Tensor> {
        self.all(&all(self.rank()), false)
    }
}

/// The dtype of `any` and `all` of `dtype`: `Bool`, but `U8` for `U8`, as PyTorch's.
fn truth_dtype(dtype: DType) -> DType {
    if dtype == DType::U8 {
        DType::U8
    } else {
        DType::Bool
    }
}
