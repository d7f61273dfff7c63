//! Ops with a scalar operand (`add_scalar`, `pow_scalar`, …) and `clamp`.
//!
//! The scalar's kind ([`Scalar`]: an integer, a float or a bool, from the Rust type passed)
//! decides the result's dtype, as a Python number's does in PyTorch, never its value:
//! `i64 * 2` stays `i64`, `i64 * 2.0` is `f32` ([`DType::with_scalar`]).

use crate::{DType, Error, Result, Scalar, Shape, Tensor};
use eddy_ops::copy;
use eddy_ops::elementwise::UnaryOp;

impl Tensor {
    /// As PyTorch: `-` with a bool operand is refused (`logical_xor` or `~` are meant).
    #[track_caller]
    fn refuse_bool_sub(&self) -> Result<()> {
        if self.dtype() == DType::Bool {
            return Err(Error::UnsupportedDType {
                at: crate::Caller::here(),
                op: "sub",
                dtype: DType::Bool,
            });
        }
        Ok(())
    }

    /// `op` (with the scalar `c` inside it) in the dtype of `self op c`: a non-float tensor
    /// is converted first where `c`'s kind or the op asks for another dtype.
    #[track_caller]
    pub(super) fn scalar_op(&self, op: UnaryOp, c: Scalar) -> Result<Tensor> {
        let dt = self.dtype();
        if !dt.is_float() {
            let to = match dt.with_scalar(c) {
                to if !to.is_float() && !op.keeps_int() => DType::F32,
                // No arithmetic on bool: a bool beside a bool tensor counts as 0 or 1.
                DType::Bool => DType::I64,
                to => to,
            };
            if to != dt {
                return self.to_dtype(to)?.unary(op);
            }
        }
        self.unary(op)
    }

    /// `x + c`. An integer tensor stays integer beside an integer `c` (a bool one becomes
    /// `i64`), and computes in `f32` beside a float `c`, whole or not, as in PyTorch.
    ///
    /// # Errors
    ///
    /// As the unary ops.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![1i64, 2], [2])?;
    /// assert_eq!(x.add_scalar(1)?.to_vec::<i64>()?, [2, 3]); // an integer: still i64
    /// assert_eq!(x.add_scalar(1.0)?.to_vec::<f32>()?, [2., 3.]); // a float: f32
    /// assert_eq!(x.add_scalar(0.5)?.to_vec::<f32>()?, [1.5, 2.5]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn add_scalar(&self, c: impl Into<Scalar>) -> Result<Tensor> {
        let c = c.into();
        if let (DType::Bool, Scalar::Bool(_)) = (self.dtype(), c) {
            // As PyTorch: `or`, as for two bool tensors.
            return self.add(&self.scalar_like(c)?);
        }
        self.scalar_op(UnaryOp::AddScalar(c.to_f64()), c)
    }
    /// `x - c`.
    ///
    /// # Errors
    ///
    /// As the unary ops.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![3f32, 5.], [2])?;
    /// assert_eq!(x.sub_scalar(1.0)?.to_vec::<f32>()?, [2., 4.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn sub_scalar(&self, c: impl Into<Scalar>) -> Result<Tensor> {
        self.refuse_bool_sub()?;
        let c = c.into();
        self.scalar_op(UnaryOp::AddScalar(-c.to_f64()), c)
    }
    /// `c - x`.
    ///
    /// # Errors
    ///
    /// As the unary ops.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![1f32, 2.], [2])?;
    /// assert_eq!(x.rsub_scalar(10.0)?.to_vec::<f32>()?, [9., 8.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn rsub_scalar(&self, c: impl Into<Scalar>) -> Result<Tensor> {
        self.refuse_bool_sub()?;
        let c = c.into();
        self.scalar_op(UnaryOp::RSubScalar(c.to_f64()), c)
    }
    /// `x * c`.
    ///
    /// # Errors
    ///
    /// As the unary ops.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![1.5f32, -2.], [2])?;
    /// assert_eq!(x.mul_scalar(2.0)?.to_vec::<f32>()?, [3., -4.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn mul_scalar(&self, c: impl Into<Scalar>) -> Result<Tensor> {
        let c = c.into();
        if let (DType::Bool, Scalar::Bool(_)) = (self.dtype(), c) {
            // As PyTorch: `and`, as for two bool tensors.
            return self.mul(&self.scalar_like(c)?);
        }
        self.scalar_op(UnaryOp::MulScalar(c.to_f64()), c)
    }
    /// `x / c` (always a float result).
    ///
    /// # Errors
    ///
    /// As the unary ops.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![1i64, 3], [2])?;
    /// assert_eq!(x.div_scalar(2.0)?.to_vec::<f32>()?, [0.5, 1.5]); // integers give f32
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn div_scalar(&self, c: impl Into<Scalar>) -> Result<Tensor> {
        let c = c.into();
        self.scalar_op(UnaryOp::DivScalar(c.to_f64()), c)
    }
    /// `x ^ c`. An integer tensor (`i64`, `i32`, `u8`) to an integer power `c ≥ 0` stays
    /// integer and wraps, as [`pow`](Self::pow) and PyTorch's `x ** 2` do; a float `c` (`2.0`
    /// included) computes in `f32`; a negative integer `c` is refused, as in PyTorch (integers
    /// to negative integer powers). A bool tensor computes in `i64` to an integer power.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for an integer tensor to a negative integer power, or a float tensor to
    /// an exponent its dtype cannot hold (f16 to 1e10); as the unary ops.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![2f32, 4.], [2])?;
    /// let sq = x.pow_scalar(2.0)?.to_vec::<f32>()?;
    /// let root = x.pow_scalar(0.5)?.to_vec::<f32>()?;
    /// assert!((sq[0] - 4.0).abs() < 1e-5 && (sq[1] - 16.0).abs() < 1e-5);
    /// assert!((root[0] - 2f32.sqrt()).abs() < 1e-6 && (root[1] - 2.0).abs() < 1e-6);
    /// let i = Tensor::from_vec(vec![3i64, -2], [2])?;
    /// assert_eq!(i.pow_scalar(3)?.to_vec::<i64>()?, [27, -8]); // still i64
    /// assert_eq!(i.pow_scalar(3.0)?.dtype(), eddy_tensor::DType::F32);
    /// assert!(i.pow_scalar(-1).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn pow_scalar(&self, c: impl Into<Scalar>) -> Result<Tensor> {
        let sc = c.into();
        if self.dtype() == DType::Bool {
            // As PyTorch: a bool base computes in i64 to an integer power, else in f32.
            return self.to_dtype(self.dtype().with_scalar(sc))?.pow_scalar(sc);
        }
        let c = sc.to_f64();
        // Integer exponents up to 2^53 are exact in f64 and fit every integer exponent's dtype
        // range that matters: `pow` keeps an exponent's parity beyond `u32`.
        let int = matches!(self.dtype(), DType::I64 | DType::I32 | DType::U8);
        if int && !sc.is_float() && c.abs() <= 9_007_199_254_740_992.0 {
            if c < 0.0 {
                return Err(Error::InvalidArgument {
                    at: crate::Caller::here(),
                    op: "pow_scalar",
                    message: format!(
                        "integers to negative integer powers are not allowed (dtype {}, \
                         exponent {c}); convert to a float dtype first",
                        self.dtype()
                    ),
                });
            }
            // An exponent past the dtype's range is replaced by one in range that gives the
            // same power modulo 2^bits: an even base to any power ≥ bits is 0, and an odd
            // base's powers repeat with a period dividing 2^(bits-2) (64 for u8, 2^30 for i32).
            let c = match self.dtype() {
                DType::U8 if c > 255.0 => 192.0 + c % 64.0,
                DType::I32 if c > i32::MAX as f64 => 1_073_741_824.0 + c % 1_073_741_824.0,
                _ => c,
            };
            let e = self.empty_like_shape(Shape::from([]), self.dtype())?;
            let k = kernel!(
                "fill",
                e.device(),
                copy::fill(e.device(), e.dtype(), e.layout().clone(), c)
            );
            Tensor::launch(k, &[], &[&e])?;
            return self.pow(&e);
        }
        if self.dtype().is_float() {
            // As PyTorch: an exponent the dtype cannot hold is refused (f16 to 1e10).
            crate::create::checked_fill_value("pow_scalar", c, self.dtype())?;
        }
        self.scalar_op(UnaryOp::PowScalar(c), sc)
    }
    /// `clamp(x, lo, hi)`; either bound may be absent (see [`clamp_min`](Self::clamp_min),
    /// [`clamp_max`](Self::clamp_max)). NaN stays NaN. The dtype is that of `x` beside its
    /// bounds: an integer tensor clamped to a float bound (`0.0`) is `f32`, as in PyTorch.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if both bounds are absent, or for a bound a float tensor's dtype cannot
    /// hold (an f16 tensor and 1e10); as the unary ops.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{DType, Tensor};
    /// let x = Tensor::from_vec(vec![-2f32, 0.5, 3., f32::NAN], [4])?;
    /// let y = x.clamp(Some(0.0), Some(1.0))?.to_vec::<f32>()?;
    /// assert_eq!(y[..3], [0., 0.5, 1.]);
    /// assert!(y[3].is_nan());
    /// assert_eq!(x.clamp_max(0.0)?.to_vec::<f32>()?[..3], [-2., 0., 0.]);
    /// assert!(x.clamp(None::<f64>, None::<f64>).is_err());
    /// let i = Tensor::from_vec(vec![-2i64, 5], [2])?;
    /// assert_eq!(i.clamp(Some(0), Some(3))?.to_vec::<i64>()?, [0, 3]);
    /// assert_eq!(i.clamp_min(0.0)?.dtype(), DType::F32);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn clamp(
        &self,
        lo: Option<impl Into<Scalar>>,
        hi: Option<impl Into<Scalar>>,
    ) -> Result<Tensor> {
        let (lo, hi) = (lo.map(Into::into), hi.map(Into::into));
        let kind = match (lo, hi) {
            (None, None) => {
                return Err(Error::invalid(
                    "clamp",
                    "at least one of min and max must be given",
                ));
            }
            // The bounds' kinds together: a float one makes an integer tensor float.
            (Some(Scalar::Float(f)), _) | (_, Some(Scalar::Float(f))) => Scalar::Float(f),
            (Some(c), _) | (_, Some(c)) => c,
        };
        let l = lo.map_or(f64::NEG_INFINITY, Scalar::to_f64);
        let h = hi.map_or(f64::INFINITY, Scalar::to_f64);
        if self.dtype().is_float() {
            // As PyTorch: a bound the dtype cannot hold is refused (an f16 tensor and 1e10).
            for b in [l, h] {
                crate::create::checked_fill_value("clamp", b, self.dtype())?;
            }
        }
        self.scalar_op(UnaryOp::Clamp(l, h), kind)
    }

    /// `max(x, lo)`: [`clamp`](Self::clamp) with a lower bound only.
    ///
    /// # Errors
    ///
    /// As the unary ops.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![-1i64, 4], [2])?;
    /// assert_eq!(x.clamp_min(0)?.to_vec::<i64>()?, [0, 4]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn clamp_min(&self, lo: impl Into<Scalar>) -> Result<Tensor> {
        self.clamp(Some(lo), None::<Scalar>)
    }

    /// `min(x, hi)`: [`clamp`](Self::clamp) with an upper bound only.
    ///
    /// # Errors
    ///
    /// As the unary ops.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![-1f32, 4.], [2])?;
    /// assert_eq!(x.clamp_max(1.0)?.to_vec::<f32>()?, [-1., 1.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn clamp_max(&self, hi: impl Into<Scalar>) -> Result<Tensor> {
        self.clamp(None::<Scalar>, Some(hi))
    }
}
