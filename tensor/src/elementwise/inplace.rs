//! The in-place forms (`add_`, `mul_`, `copy_`, `fill_`, …): they write into existing storage.

use crate::{DType, Error, Result, Scalar, Shape, Tensor};
use eddy_ops::elementwise::{self as ew, BinaryOp};
use eddy_ops::{broadcast_shapes, copy};

impl Tensor {
    #[track_caller]
    pub(super) fn check_inplace(&self, op: &'static str) -> Result<()> {
        if self.layout().has_broadcast() {
            return Err(Error::OverlappingWrite {
                at: crate::Caller::here(),
                op,
            });
        }
        if crate::is_grad_enabled() && self.requires_grad() {
            return Err(Error::Autograd { at: crate::Caller::here(),
                op,
                message: "a tensor that requires grad is used in an in-place operation (wrap it in no_grad)".into(),
            });
        }
        Ok(())
    }

    /// The operand of an in-place op: broadcast to `self`'s shape, of `self`'s dtype, and not
    /// sharing `self`'s storage (copied if it does).
    #[track_caller]
    pub(super) fn inplace_operand(
        &self,
        op: &'static str,
        src: &Tensor,
        promote: DType,
    ) -> Result<Tensor> {
        self.same_device(op, src)?;
        let b = broadcast_shapes(op, self.shape(), src.shape())?;
        if &b != self.shape() {
            return Err(Error::ShapeMismatch {
                at: crate::Caller::here(),
                op,
                lhs: self.dims().to_vec(),
                rhs: src.dims().to_vec(),
            });
        }
        if promote != self.dtype() && !(promote.is_float() && self.dtype().is_float()) {
            return Err(Error::DTypeMismatch {
                at: crate::Caller::here(),
                op,
                lhs: self.dtype(),
                rhs: promote,
            });
        }
        let src = if src.shares_storage(self) {
            let out = src.empty_like_shape(src.shape().clone(), self.dtype())?;
            let k = kernel!(
                "copy",
                src.device(),
                copy::copy(
                    src.device(),
                    src.layout().clone(),
                    src.dtype(),
                    out.layout().clone(),
                    out.dtype(),
                )
            );
            Tensor::launch(k, &[src], &[&out])?;
            out
        } else {
            src.detach().cast(self.dtype())?
        };
        Ok(src)
    }

    #[track_caller]
    pub(super) fn binary_(&self, op: BinaryOp, src: &Tensor, alpha: f64) -> Result<Tensor> {
        self.check_inplace(op.name())?;
        if self.dtype() == DType::Bool {
            return Err(Error::UnsupportedDType {
                at: crate::Caller::here(),
                op: op.name(),
                dtype: DType::Bool,
            });
        }
        if self.is_global() || src.is_global() {
            let partial = |k| crate::global::inplace_partial(op, k);
            return self.global_inplace(op.name(), Some(src), partial, |c, s| {
                c.binary_(op, s.expect("an operand"), alpha)
            });
        }
        let mut promote = self.dtype().promote(src.dtype());
        if op == BinaryOp::Div || alpha.fract() != 0.0 {
            promote = promote.to_float();
        }
        let x = self.inplace_operand(op.name(), src, promote)?;
        let k = kernel!(
            op.name(),
            self.device(),
            ew::binary_inplace(
                self.device(),
                op,
                self.dtype(),
                self.layout().clone(),
                x.layout().broadcast_to(self.shape()),
                alpha,
            )
        );
        Tensor::launch(k, &[&x], &[self])?;
        self.blob().bump_version();
        Ok(self.clone())
    }

    /// In place: `self += src` (broadcast to `self`'s shape). Returns `self`.
    ///
    /// # Errors
    ///
    /// `OverlappingWrite` into an expanded view; `DTypeMismatch` if a float result would be
    /// stored in an integer tensor; `Autograd` on a tensor requiring grad while grad mode is on.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let a = Tensor::zeros([2, 2], DType::F32)?;
    /// a.narrow(0, 1, 1)?.add_(&Tensor::ones([2], DType::F32)?)?;
    /// assert_eq!(a.to_vec::<f32>()?, vec![0., 0., 1., 1.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn add_(&self, src: &Tensor) -> Result<Tensor> {
        self.binary_(BinaryOp::Add, src, 1.0)
    }
    /// In place: `self += alpha * src` (an axpy, as PyTorch's `add_(src, alpha=…)`).
    ///
    /// # Errors
    ///
    /// As [`add_`](Self::add_).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Error, Tensor, DType};
    /// let a = Tensor::ones([2], DType::F32)?;
    /// a.add_scaled_(&Tensor::from_vec(vec![2f32, 4.], [2])?, 0.5)?;
    /// assert_eq!(a.to_vec::<f32>()?, [2., 3.]);
    /// let i = Tensor::zeros([2], DType::I64)?; // a fractional alpha needs a float tensor
    /// assert!(matches!(i.add_scaled_(&i.ones_like()?, 0.5), Err(Error::DTypeMismatch { .. })));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn add_scaled_(&self, src: &Tensor, alpha: f64) -> Result<Tensor> {
        self.binary_(BinaryOp::Add, src, alpha)
    }
    /// In place: `self -= src`.
    ///
    /// # Errors
    ///
    /// As [`add_`](Self::add_).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![5f32, 5.], [2])?;
    /// let r = a.sub_(&Tensor::from_vec(vec![1f32, 2.], [2])?)?;
    /// assert_eq!(a.to_vec::<f32>()?, [4., 3.]);
    /// assert!(r.shares_storage(&a)); // the result is `a` itself
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn sub_(&self, src: &Tensor) -> Result<Tensor> {
        self.binary_(BinaryOp::Sub, src, 1.0)
    }
    /// In place: `self *= src`.
    ///
    /// # Errors
    ///
    /// As [`add_`](Self::add_).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Error, Tensor, DType};
    /// let a = Tensor::from_vec(vec![1f32, 2., 3., 4.], [2, 2])?;
    /// a.mul_(&Tensor::from_vec(vec![10f32, 0.], [2])?)?; // the row broadcasts
    /// assert_eq!(a.to_vec::<f32>()?, [10., 0., 30., 0.]);
    /// let e = Tensor::ones([1], DType::F32)?.expand([3])?; // three elements, one storage slot
    /// assert!(matches!(e.mul_(&e.ones_like()?), Err(Error::OverlappingWrite { .. })));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn mul_(&self, src: &Tensor) -> Result<Tensor> {
        self.binary_(BinaryOp::Mul, src, 1.0)
    }
    /// In place: `self /= src`.
    ///
    /// # Errors
    ///
    /// As [`add_`](Self::add_).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Error, Tensor};
    /// let a = Tensor::from_vec(vec![1f32, 3.], [2])?;
    /// a.div_(&Tensor::from_vec(vec![2f32], [1])?)?;
    /// assert_eq!(a.to_vec::<f32>()?, [0.5, 1.5]);
    /// let i = Tensor::from_vec(vec![4i64], [1])?; // true division does not fit in i64
    /// assert!(matches!(i.div_(&i.clone()), Err(Error::DTypeMismatch { .. })));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn div_(&self, src: &Tensor) -> Result<Tensor> {
        self.binary_(BinaryOp::Div, src, 1.0)
    }
    /// In place: `self *= c`.
    ///
    /// # Errors
    ///
    /// As [`add_`](Self::add_).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{no_grad, Error, Tensor};
    /// let w = Tensor::from_vec(vec![1f32, 2.], [2])?.requires_grad_(true)?;
    /// assert!(matches!(w.mul_scalar_(3.0), Err(Error::Autograd { .. })));
    /// {
    ///     let _g = no_grad(); // as an optimizer updates its parameters
    ///     w.mul_scalar_(3.0)?;
    /// }
    /// assert_eq!(w.to_vec::<f32>()?, [3., 6.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn mul_scalar_(&self, c: impl Into<Scalar>) -> Result<Tensor> {
        self.scalar_(BinaryOp::Mul, c.into())
    }
    /// In place: `self += c`.
    ///
    /// # Errors
    ///
    /// As [`add_`](Self::add_).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1i64, 2], [2])?;
    /// a.add_scalar_(5)?;
    /// assert_eq!(a.to_vec::<i64>()?, [6, 7]);
    /// // As in PyTorch: `x + 1.0` is a float, which an i64 tensor cannot hold.
    /// assert!(a.add_scalar_(1.0).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn add_scalar_(&self, c: impl Into<Scalar>) -> Result<Tensor> {
        self.scalar_(BinaryOp::Add, c.into())
    }

    /// `self op= c`, with [`binary_`](Self::binary_)'s checks made before the scalar operand
    /// is enqueued (F1: a refused call enqueues nothing).
    #[track_caller]
    pub(super) fn scalar_(&self, op: BinaryOp, c: Scalar) -> Result<Tensor> {
        self.check_inplace(op.name())?;
        let dt = self.scalar_dtype(c);
        if self.dtype() == DType::Bool {
            return Err(Error::UnsupportedDType {
                at: crate::Caller::here(),
                op: op.name(),
                dtype: DType::Bool,
            });
        }
        if dt != self.dtype() {
            return Err(Error::DTypeMismatch {
                at: crate::Caller::here(),
                op: op.name(),
                lhs: self.dtype(),
                rhs: dt,
            });
        }
        self.binary_(op, &self.scalar_like(c)?, 1.0)
    }

    /// In place: copies `src` (broadcast to `self`'s shape, converted to its dtype) into `self`.
    ///
    /// # Errors
    ///
    /// As [`add_`](Self::add_), except that any dtype converts.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let a = Tensor::zeros([2, 2], DType::F32)?;
    /// a.copy_(&Tensor::from_vec(vec![1i64, 2], [2])?)?; // broadcast and converted
    /// assert_eq!(a.to_vec::<f32>()?, [1., 2., 1., 2.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn copy_(&self, src: &Tensor) -> Result<Tensor> {
        self.check_inplace("copy_")?;
        if self.is_global() {
            // Each rank's part of the value: the whole once (a sum) or everywhere (extrema).
            let partial = |k| Some(crate::global::Sbp::Partial(k));
            return self.global_inplace("copy_", Some(src), partial, |c, s| {
                c.copy_(s.expect("a source"))
            });
        }
        let x = self.inplace_operand("copy_", src, self.dtype())?;
        let k = kernel!(
            "copy",
            self.device(),
            copy::copy(
                self.device(),
                x.layout().broadcast_to(self.shape()),
                x.dtype(),
                self.layout().clone(),
                self.dtype(),
            )
        );
        Tensor::launch(k, &[&x], &[self])?;
        self.blob().bump_version();
        Ok(self.clone())
    }

    /// In place: sets every element to `value`.
    ///
    /// # Errors
    ///
    /// `OverlappingWrite`, `Autograd` as for [`add_`](Self::add_); `InvalidArgument` for a
    /// value the dtype cannot hold, as [`full`](Self::full).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let a = Tensor::zeros([2, 2], DType::F32)?;
    /// assert!(a.fill_(1e39).is_err()); // past f32's largest finite value: nothing written
    /// a.narrow(1, 0, 1)?.fill_(7.0)?; // through a view: the first column
    /// assert_eq!(a.to_vec::<f32>()?, [7., 0., 7., 0.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn fill_(&self, value: f64) -> Result<Tensor> {
        self.check_inplace("fill_")?;
        let value = crate::create::checked_fill_value("fill_", value, self.dtype())?;
        if self.is_global() {
            if (self.sbp().unwrap_or_default().iter())
                .any(|s| matches!(s, crate::global::Sbp::Partial(_)))
            {
                // Laid out as the tensor is, as `copy_` of the value does.
                return self.copy_(&self.global_filled(Shape::default(), self.dtype(), value)?);
            }
            return self.global_inplace("fill_", None, |_| None, |c, _| c.fill_(value));
        }
        let k = kernel!(
            "fill",
            self.device(),
            copy::fill(self.device(), self.dtype(), self.layout().clone(), value)
        );
        Tensor::launch(k, &[], &[self])?;
        self.blob().bump_version();
        Ok(self.clone())
    }

    /// In place: sets every element to zero.
    ///
    /// # Errors
    ///
    /// As [`fill_`](Self::fill_).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let a = Tensor::ones([3], DType::I32)?;
    /// a.zero_()?;
    /// assert_eq!(a.to_vec::<i32>()?, [0, 0, 0]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn zero_(&self) -> Result<Tensor> {
        self.fill_(0.0)
    }
}
