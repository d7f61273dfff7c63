//! Ops with a scalar operand (`add_scalar`, `pow_scalar`, …) and `clamp`.

use crate::{DType, Error, Result, Shape, Tensor};
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

    #[track_caller]
    pub(super) fn scalar_op(&self, op: UnaryOp, c: f64) -> Result<Tensor> {
        if !self.dtype().is_float() {
            if c.fract() != 0.0 || !op.keeps_int() {
                return self.to_dtype(DType::F32)?.unary(op);
            }
            if self.dtype() == DType::Bool {
                // As PyTorch: a whole number beside a bool tensor computes in `i64`.
                return self.to_dtype(DType::I64)?.unary(op);
            }
        }
        self.unary(op)
    }

    /// `x + c`. Integer tensors stay integer for integral `c`, else compute in `f32`.
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
    /// assert_eq!(x.add_scalar(1.0)?.to_vec::<i64>()?, [2, 3]); // integral c: still i64
    /// assert_eq!(x.add_scalar(0.5)?.to_vec::<f32>()?, [1.5, 2.5]); // else f32
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn add_scalar(&self, c: f64) -> Result<Tensor> {
        self.scalar_op(UnaryOp::AddScalar(c), c)
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
    pub fn sub_scalar(&self, c: f64) -> Result<Tensor> {
        self.refuse_bool_sub()?;
        self.scalar_op(UnaryOp::AddScalar(-c), c)
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
    pub fn rsub_scalar(&self, c: f64) -> Result<Tensor> {
        self.refuse_bool_sub()?;
        self.scalar_op(UnaryOp::RSubScalar(c), c)
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
    pub fn mul_scalar(&self, c: f64) -> Result<Tensor> {
        self.scalar_op(UnaryOp::MulScalar(c), c)
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
    pub fn div_scalar(&self, c: f64) -> Result<Tensor> {
        self.scalar_op(UnaryOp::DivScalar(c), 0.5)
    }
    /// `x ^ c`. An integer tensor (`i64`, `i32`, `u8`) to a whole power `c ≥ 0` stays integer
    /// and wraps, as [`pow`](Self::pow) and PyTorch's `x ** 2` do; a fractional `c` computes
    /// in `f32`; a negative whole `c` is refused, as in PyTorch (integers to negative integer
    /// powers).
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for an integer tensor to a negative whole power; as the unary ops.
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
    /// assert_eq!(i.pow_scalar(3.0)?.to_vec::<i64>()?, [27, -8]); // still i64
    /// assert_eq!(i.pow_scalar(0.5)?.dtype(), eddy_tensor::DType::F32);
    /// assert!(i.pow_scalar(-1.0).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn pow_scalar(&self, c: f64) -> Result<Tensor> {
        if self.dtype() == DType::Bool {
            // As PyTorch: a bool base computes in i64 for a whole exponent, else in f32.
            let dt = if c.fract() == 0.0 {
                DType::I64
            } else {
                DType::F32
            };
            return self.to_dtype(dt)?.pow_scalar(c);
        }
        // Whole exponents up to 2^53 are exact in f64 and fit every integer exponent's dtype
        // range that matters: `pow` keeps an exponent's parity beyond `u32`.
        let int = matches!(self.dtype(), DType::I64 | DType::I32 | DType::U8);
        if int && c.fract() == 0.0 && c.abs() <= 9_007_199_254_740_992.0 {
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
        self.scalar_op(UnaryOp::PowScalar(c), 0.5)
    }
    /// `clamp(x, lo, hi)`; either bound may be absent. NaN stays NaN.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if both bounds are absent; as the unary ops.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![-2f32, 0.5, 3., f32::NAN], [4])?;
    /// let y = x.clamp(Some(0.0), Some(1.0))?.to_vec::<f32>()?;
    /// assert_eq!(y[..3], [0., 0.5, 1.]);
    /// assert!(y[3].is_nan());
    /// assert_eq!(x.clamp(None, Some(0.0))?.to_vec::<f32>()?[..3], [-2., 0., 0.]);
    /// assert!(x.clamp(None, None).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn clamp(&self, lo: Option<f64>, hi: Option<f64>) -> Result<Tensor> {
        if lo.is_none() && hi.is_none() {
            return Err(Error::invalid(
                "clamp",
                "at least one of min and max must be given",
            ));
        }
        let (l, h) = (lo.unwrap_or(f64::NEG_INFINITY), hi.unwrap_or(f64::INFINITY));
        let int_ok = lo.is_none_or(|v| v.fract() == 0.0) && hi.is_none_or(|v| v.fract() == 0.0);
        self.scalar_op(UnaryOp::Clamp(l, h), if int_ok { 0.0 } else { 0.5 })
    }
}
