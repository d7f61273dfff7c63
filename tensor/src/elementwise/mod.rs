//! Elementwise ops: unary maps, binary ops with broadcasting and dtype promotion (see
//! [`DType::promote`]), scalar variants, comparisons, `where_`, `clamp`, casts, and the in-place
//! forms (`add_`, `mul_`, `copy_`, `zero_`, …) that write into existing storage.
//!
//! By concern: [`scalar`] (ops with a scalar operand, `clamp`), [`binary`] (tensor–tensor ops,
//! comparisons, `where_`, logical ops), [`inplace`] (the `_` forms), [`cast`] (`to_dtype`,
//! `to_device`) and [`mask`] (`masked_fill`, `tril`, `triu`).

mod binary;
mod cast;
mod inplace;
mod mask;
mod scalar;

use crate::{DType, Error, Result, Tensor};
use eddy_ops::Lay;
use eddy_ops::elementwise::{self as ew, BinaryOp, UnaryOp};

macro_rules! unary_methods {
    ($($(#[$m:meta])* $name:ident => $op:ident),* $(,)?) => {
        impl Tensor {
            $(
                $(#[$m])*
                ///
                /// # Errors
                ///
                /// `UnsupportedDType` for `bool`; engine errors.
                #[track_caller]
                pub fn $name(&self) -> Result<Tensor> {
                    self.unary(UnaryOp::$op)
                }
            )*
        }
    };
}

unary_methods! {
    /// `-x`
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![1f32, -2.], [2])?;
    /// assert_eq!(x.neg()?.to_vec::<f32>()?, [-1., 2.]);
    /// let i = Tensor::from_vec(vec![3i64], [1])?.neg()?; // integers stay integers
    /// assert_eq!(i.to_vec::<i64>()?, [-3]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    neg => Neg,
    /// `|x|`
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![-1.5f32, 2.], [2])?;
    /// assert_eq!(x.abs()?.to_vec::<f32>()?, [1.5, 2.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    abs => Abs,
    /// `e^x`
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let y = Tensor::from_vec(vec![0f32, 1.], [2])?.exp()?.to_vec::<f32>()?;
    /// let want = [1.0, std::f32::consts::E];
    /// assert!(y.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    exp => Exp,
    /// The natural logarithm.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let y = Tensor::from_vec(vec![1f32, std::f32::consts::E], [2])?.log()?.to_vec::<f32>()?;
    /// let want = [0.0, 1.0];
    /// assert!(y.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    log => Log,
    /// `√x`
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![4f32, 9.], [2])?;
    /// assert_eq!(x.sqrt()?.to_vec::<f32>()?, [2., 3.]);
    /// let i = Tensor::from_vec(vec![16i64], [1])?.sqrt()?; // integers compute in f32
    /// assert_eq!(i.to_vec::<f32>()?, [4.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    sqrt => Sqrt,
    /// `1/√x`
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let y = Tensor::from_vec(vec![4f32, 16.], [2])?.rsqrt()?.to_vec::<f32>()?;
    /// let want = [0.5, 0.25];
    /// assert!(y.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    rsqrt => Rsqrt,
    /// `sin x`
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// use std::f32::consts::FRAC_PI_2;
    /// let y = Tensor::from_vec(vec![0f32, FRAC_PI_2], [2])?.sin()?.to_vec::<f32>()?;
    /// let want = [0.0, 1.0];
    /// assert!(y.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    sin => Sin,
    /// `cos x`
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let y = Tensor::from_vec(vec![0f32, std::f32::consts::PI], [2])?.cos()?.to_vec::<f32>()?;
    /// let want = [1.0, -1.0];
    /// assert!(y.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    cos => Cos,
    /// `tanh x`
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let y = Tensor::from_vec(vec![0f32, 1., -20.], [3])?.tanh()?.to_vec::<f32>()?;
    /// let want = [0.0, 0.761_594_2, -1.0];
    /// assert!(y.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    tanh => Tanh,
    /// `1/(1+e^-x)`
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let y = Tensor::from_vec(vec![0f32, 3f32.ln()], [2])?.sigmoid()?.to_vec::<f32>()?;
    /// let want = [0.5, 0.75];
    /// assert!(y.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    sigmoid => Sigmoid,
    /// `max(x, 0)`
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![-1f32, 0., 2.], [3])?;
    /// assert_eq!(x.relu()?.to_vec::<f32>()?, [0., 0., 2.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    relu => Relu,
    /// GELU with the exact erf, as PyTorch's default.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let y = Tensor::from_vec(vec![0f32, 1., -1.], [3])?.gelu()?.to_vec::<f32>()?;
    /// let want = [0.0, 0.841_344_7, -0.158_655_3];
    /// assert!(y.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-5));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    gelu => Gelu,
    /// `x·sigmoid(x)`
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let y = Tensor::from_vec(vec![0f32, 1.], [2])?.silu()?.to_vec::<f32>()?;
    /// let want = [0.0, 0.731_058_6];
    /// assert!(y.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    silu => Silu,
    /// `1/x`
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let y = Tensor::from_vec(vec![2f32, -4.], [2])?.recip()?.to_vec::<f32>()?;
    /// let want = [0.5, -0.25];
    /// assert!(y.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    recip => Recip,
    /// `x²`
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![-3i64, 2], [2])?;
    /// assert_eq!(x.square()?.to_vec::<i64>()?, [9, 4]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    square => Square,
    /// The sign: -1, 0 or 1.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![-2f32, 0., 3.], [3])?;
    /// assert_eq!(x.sign()?.to_vec::<f32>()?, [-1., 0., 1.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    sign => Sign,
    /// The largest integer `≤ x` (integer tensors are returned unchanged in value).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![1.5f32, -1.5], [2])?;
    /// assert_eq!(x.floor()?.to_vec::<f32>()?, [1., -2.]);
    /// let i = Tensor::from_vec(vec![7i64], [1])?.floor()?;
    /// assert_eq!(i.to_vec::<i64>()?, [7]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    floor => Floor,
    /// The smallest integer `≥ x` (integer tensors unchanged).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![1.5f32, -1.5], [2])?;
    /// assert_eq!(x.ceil()?.to_vec::<f32>()?, [2., -1.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    ceil => Ceil,
    /// The nearest integer, halves to even as in PyTorch: `round(2.5) = 2` (integers unchanged).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![2.5f32, 3.5, -1.4], [3])?;
    /// assert_eq!(x.round()?.to_vec::<f32>()?, [2., 4., -1.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    round => Round,
    /// `x` rounded toward zero (integers unchanged).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![1.7f32, -1.7], [2])?;
    /// assert_eq!(x.trunc()?.to_vec::<f32>()?, [1., -1.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    trunc => Trunc,
    /// `ln(1 + x)`, accurate for small `x`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let y = Tensor::from_vec(vec![0f64, 1e-10], [2])?.log1p()?.to_vec::<f64>()?;
    /// assert_eq!(y[0], 0.0);
    /// assert!((y[1] / 1e-10 - 1.0).abs() < 1e-9); // full precision for a tiny x
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    log1p => Log1p,
    /// `e^x − 1`, accurate for small `x`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let y = Tensor::from_vec(vec![0f64, 1e-10], [2])?.expm1()?.to_vec::<f64>()?;
    /// assert_eq!(y[0], 0.0);
    /// assert!((y[1] / 1e-10 - 1.0).abs() < 1e-9);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    expm1 => Expm1,
    /// `log₂ x`
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let y = Tensor::from_vec(vec![1f32, 8., 0.5], [3])?.log2()?.to_vec::<f32>()?;
    /// let want = [0.0, 3.0, -1.0];
    /// assert!(y.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    log2 => Log2,
    /// `log₁₀ x`
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let y = Tensor::from_vec(vec![1f32, 1000.], [2])?.log10()?.to_vec::<f32>()?;
    /// let want = [0.0, 3.0];
    /// assert!(y.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-5));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    log10 => Log10,
    /// `tan x`
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// use std::f32::consts::FRAC_PI_4;
    /// let y = Tensor::from_vec(vec![0f32, FRAC_PI_4], [2])?.tan()?.to_vec::<f32>()?;
    /// let want = [0.0, 1.0];
    /// assert!(y.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    tan => Tan,
    /// `atan x`
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let y = Tensor::from_vec(vec![0f32, 1.], [2])?.atan()?.to_vec::<f32>()?;
    /// let want = [0.0, std::f32::consts::FRAC_PI_4];
    /// assert!(y.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    atan => Atan,
    /// The error function.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let y = Tensor::from_vec(vec![0f32, 1., -1.], [3])?.erf()?.to_vec::<f32>()?;
    /// let want = [0.0, 0.842_700_8, -0.842_700_8];
    /// assert!(y.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    erf => Erf,
}

/// Activations with a parameter (integer tensors compute in `f32`, as the other float ops).
impl Tensor {
    /// `x` where `x > 0`, else `negative_slope · x` (PyTorch's default slope is 0.01).
    ///
    /// # Errors
    ///
    /// `UnsupportedDType` for `bool`; engine errors.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![-2.0f32, 3.0], [2])?;
    /// assert_eq!(x.leaky_relu(0.5)?.to_vec::<f32>()?, [-1.0, 3.0]);
    /// assert_eq!(x.elu(1.0)?.to_vec::<f32>()?[1], 3.0);
    /// assert!((x.softplus(1.0, 20.0)?.to_vec::<f32>()?[0] - 0.126_928).abs() < 1e-5);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn leaky_relu(&self, negative_slope: f64) -> Result<Tensor> {
        self.unary(UnaryOp::LeakyRelu(negative_slope))
    }

    /// `x` where `x > 0`, else `alpha · (e^x − 1)` (PyTorch's default alpha is 1).
    ///
    /// # Errors
    ///
    /// As [`leaky_relu`](Self::leaky_relu).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let y = Tensor::from_vec(vec![-1f32, 0., 2.], [3])?.elu(1.0)?.to_vec::<f32>()?;
    /// assert!((y[0] - (-1f32).exp_m1()).abs() < 1e-6); // e^-1 − 1
    /// assert_eq!(y[1..], [0., 2.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn elu(&self, alpha: f64) -> Result<Tensor> {
        self.unary(UnaryOp::Elu(alpha))
    }

    /// `ln(1 + e^(βx)) / β`, and `x` itself where `βx > threshold` (PyTorch's defaults: β = 1,
    /// threshold = 20).
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if `beta` is zero or not finite; as [`leaky_relu`](Self::leaky_relu).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![0f32, 30.], [2])?;
    /// let y = x.softplus(1.0, 20.0)?.to_vec::<f32>()?;
    /// assert!((y[0] - 2f32.ln()).abs() < 1e-6);
    /// assert_eq!(y[1], 30.0); // above the threshold: x itself
    /// assert!(x.softplus(0.0, 20.0).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn softplus(&self, beta: f64, threshold: f64) -> Result<Tensor> {
        if beta == 0.0 || !beta.is_finite() {
            return Err(Error::invalid(
                "softplus",
                format!("beta must be finite and nonzero, got {beta}"),
            ));
        }
        self.unary(UnaryOp::Softplus(beta, threshold))
    }
}

impl Tensor {
    #[track_caller]
    pub(crate) fn unary(&self, op: UnaryOp) -> Result<Tensor> {
        let dt = match ew::unary_dtype(op, self.dtype()) {
            Ok(dt) => dt,
            // PyTorch's two integer-keeping ops defined on bool, which the op layer refuses:
            // `sign` is the identity, `square` computes in i64 (off the per-op path).
            Err(_) if self.dtype() == DType::Bool && op == UnaryOp::Sign => {
                return self.to_dtype(DType::Bool);
            }
            Err(_) if self.dtype() == DType::Bool && op == UnaryOp::Square => {
                return self.to_dtype(DType::I64)?.unary(op);
            }
            Err(e) => return Err(e),
        };
        if dt != self.dtype() {
            return self.to_dtype(dt)?.unary(op);
        }
        let out = if self.is_global() {
            self.global_unary(op)?
        } else {
            let lay = if self.is_contiguous() {
                Lay::Dense(self.layout().offset) // its own shape: no comparison needed
            } else {
                self.lay_for(self.shape())
            };
            let k = kernel!(
                op.name(),
                self.device(),
                ew::unary(self.device(), op, dt, lay)
            ); // before the output, as in `binary`
            let out = self.empty_like_shape(self.shape().clone(), dt)?;
            Tensor::launch(k, &[self], &[&out])?;
            out
        };
        if !dt.is_float() {
            return Ok(out);
        }
        let (reads_x, reads_y) = backward_reads(op);
        let saved: &[&Tensor] = if reads_x { &[self] } else { &[] };
        Ok(
            out.record_saving(op.name(), &[self], saved, reads_y, move |g, ins, y| {
                let x = &ins[0];
                use UnaryOp::*;
                let gx = match op {
                    Neg => g.neg()?,
                    Abs => g.mul(&x.sign()?)?,
                    Exp => g.mul(y)?,
                    Log => g.div(x)?,
                    Sqrt => g.div(y)?.mul_scalar(0.5)?,
                    Rsqrt => g.mul(&y.pow_scalar(3.0)?)?.mul_scalar(-0.5)?,
                    Sin => g.mul(&x.cos()?)?,
                    Cos => g.mul(&x.sin()?)?.neg()?,
                    Tanh => g.mul(&y.square()?.rsub_scalar(1.0)?)?,
                    Sigmoid => g.mul(&y.mul(&y.rsub_scalar(1.0)?)?)?,
                    Relu => x.binary(g, BinaryOp::ReluBackward)?,
                    Gelu => x.binary(g, BinaryOp::GeluBackward)?,
                    Silu => g.mul(&x.unary(SiluGrad)?)?,
                    Recip => g.mul(&y.square()?)?.neg()?,
                    Square => g.mul(x)?.mul_scalar(2.0)?,
                    Sign | GeluGrad | SiluGrad => g.zeros_like()?,
                    AddScalar(_) => g.clone(),
                    MulScalar(c) => g.mul_scalar(c)?,
                    DivScalar(c) => g.div_scalar(c)?,
                    RSubScalar(_) => g.neg()?,
                    RDivScalar(_) => g.mul(&y.div(x)?)?.neg()?,
                    // x^0 is constant (x^-1 at 0 would give 0·inf = NaN).
                    PowScalar(0.0) => g.zeros_like()?,
                    PowScalar(c) => g.mul(&x.pow_scalar(c - 1.0)?)?.mul_scalar(c)?,
                    // 0^x: 0 where x ≥ 0 (PyTorch's convention; ln 0 = -inf times y = 0 is NaN).
                    RPowScalar(0.0) => {
                        let d = g.mul(y)?.mul_scalar(f64::NEG_INFINITY)?;
                        x.ge_scalar(0.0)?.where_(&g.zeros_like()?, &d)?
                    }
                    RPowScalar(c) => g.mul(y)?.mul_scalar(c.ln())?,
                    // As PyTorch's: 1 strictly inside the bounds, 0 at and beyond them.
                    Clamp(lo, hi) => {
                        let inside = match (lo > f64::NEG_INFINITY, hi < f64::INFINITY) {
                            (true, true) => x.gt_scalar(lo)?.logical_and(&x.lt_scalar(hi)?)?,
                            (true, false) => x.gt_scalar(lo)?,
                            (false, true) => x.lt_scalar(hi)?,
                            (false, false) => y.eq(x)?,
                        };
                        g.mul(&inside.cast(g.dtype())?)?
                    }
                    Floor | Ceil | Round | Trunc => g.zeros_like()?,
                    Log1p => g.div(&x.add_scalar(1.0)?)?,
                    Expm1 => g.mul(&y.add_scalar(1.0)?)?,
                    Log2 => g.div(x)?.mul_scalar(std::f64::consts::LOG2_E)?,
                    Log10 => g.div(x)?.mul_scalar(std::f64::consts::LOG10_E)?,
                    Tan => g.mul(&y.square()?.add_scalar(1.0)?)?,
                    Atan => g.div(&x.square()?.add_scalar(1.0)?)?,
                    Erf => g
                        .mul(&x.square()?.neg()?.exp()?)?
                        .mul_scalar(std::f64::consts::FRAC_2_SQRT_PI)?,
                    // The gradient at 0 is the left side's, as PyTorch (x > 0 is the right side).
                    LeakyRelu(s) => g.mul(
                        &x.gt_scalar(0.0)?
                            .where_(&x.ones_like()?, &x.full_like(s)?)?,
                    )?,
                    Elu(a) => {
                        let left = y.add_scalar(a)?; // a·e^x for x ≤ 0
                        g.mul(&x.gt_scalar(0.0)?.where_(&x.ones_like()?, &left)?)?
                    }
                    Softplus(b, t) => {
                        let s = x.mul_scalar(b)?.sigmoid()?;
                        let linear = x.mul_scalar(b)?.gt_scalar(t)?;
                        g.mul(&linear.where_(&x.ones_like()?, &s)?)?
                    }
                };
                Ok(vec![Some(gx)])
            }),
        )
    }
}

/// Whether `op`'s backward reads its input's values, and its output's (the tensors autograd
/// checks for in-place writes between the forward and the backward).
fn backward_reads(op: UnaryOp) -> (bool, bool) {
    use UnaryOp::*;
    match op {
        Neg | Sign | GeluGrad | SiluGrad | AddScalar(_) | MulScalar(_) | DivScalar(_)
        | RSubScalar(_) | Floor | Ceil | Round | Trunc => (false, false),
        Exp | Sqrt | Rsqrt | Tanh | Sigmoid | Recip | RPowScalar(_) | Expm1 | Tan => (false, true),
        RDivScalar(_) | Clamp(..) | Elu(_) => (true, true),
        Abs | Log | Sin | Cos | Relu | Gelu | Silu | Square | PowScalar(_) | Log1p | Log2
        | Log10 | Atan | Erf | LeakyRelu(_) | Softplus(..) => (true, false),
    }
}
