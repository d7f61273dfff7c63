//! Elementwise ops: unary maps, binary ops with broadcasting and dtype promotion (see
//! [`DType::promote`]), scalar variants, comparisons, `where_`, `clamp`, casts, and the in-place
//! forms (`add_`, `mul_`, `copy_`, `zero_`, …) that write into existing storage.

use crate::{DType, Error, Result, Shape, Tensor};
use eddy_ops::broadcast_shapes;
use eddy_ops::cpu::copy;
use eddy_ops::cpu::elementwise::{self as ew, BinaryOp, CmpOp, UnaryOp};

macro_rules! unary_methods {
    ($($(#[$m:meta])* $name:ident => $op:ident),* $(,)?) => {
        impl Tensor {
            $(
                $(#[$m])*
                ///
                /// # Errors
                ///
                /// `UnsupportedDType` for `bool`; engine errors.
                pub fn $name(&self) -> Result<Tensor> {
                    self.unary(UnaryOp::$op)
                }
            )*
        }
    };
}

unary_methods! {
    /// `-x`
    neg => Neg,
    /// `|x|`
    abs => Abs,
    /// `e^x`
    exp => Exp,
    /// The natural logarithm.
    log => Log,
    /// `√x`
    sqrt => Sqrt,
    /// `1/√x`
    rsqrt => Rsqrt,
    /// `sin x`
    sin => Sin,
    /// `cos x`
    cos => Cos,
    /// `tanh x`
    tanh => Tanh,
    /// `1/(1+e^-x)`
    sigmoid => Sigmoid,
    /// `max(x, 0)`
    relu => Relu,
    /// GELU with the exact erf, as PyTorch's default.
    gelu => Gelu,
    /// `x·sigmoid(x)`
    silu => Silu,
    /// `1/x`
    recip => Recip,
    /// `x²`
    square => Square,
    /// The sign: -1, 0 or 1.
    sign => Sign,
    /// The largest integer `≤ x` (integer tensors are returned unchanged in value).
    floor => Floor,
    /// The smallest integer `≥ x` (integer tensors unchanged).
    ceil => Ceil,
    /// The nearest integer, halves to even as in PyTorch: `round(2.5) = 2` (integers unchanged).
    round => Round,
    /// `x` rounded toward zero (integers unchanged).
    trunc => Trunc,
    /// `ln(1 + x)`, accurate for small `x`.
    log1p => Log1p,
    /// `e^x − 1`, accurate for small `x`.
    expm1 => Expm1,
    /// `log₂ x`
    log2 => Log2,
    /// `log₁₀ x`
    log10 => Log10,
    /// `tan x`
    tan => Tan,
    /// `atan x`
    atan => Atan,
    /// The error function.
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
    pub fn leaky_relu(&self, negative_slope: f64) -> Result<Tensor> {
        self.unary(UnaryOp::LeakyRelu(negative_slope))
    }

    /// `x` where `x > 0`, else `alpha · (e^x − 1)` (PyTorch's default alpha is 1).
    ///
    /// # Errors
    ///
    /// As [`leaky_relu`](Self::leaky_relu).
    pub fn elu(&self, alpha: f64) -> Result<Tensor> {
        self.unary(UnaryOp::Elu(alpha))
    }

    /// `ln(1 + e^(βx)) / β`, and `x` itself where `βx > threshold` (PyTorch's defaults: β = 1,
    /// threshold = 20).
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if `beta` is zero or not finite; as [`leaky_relu`](Self::leaky_relu).
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
    /// Casts to `dtype` if it differs (an op recorded for autograd).
    /// `self` if it already has `dtype` (borrowed: no reference-count traffic on the per-op
    /// path), else a converted copy.
    pub(crate) fn cast_ref(&self, dtype: DType) -> Result<std::borrow::Cow<'_, Tensor>> {
        if self.dtype() == dtype {
            Ok(std::borrow::Cow::Borrowed(self))
        } else {
            self.to_dtype(dtype).map(std::borrow::Cow::Owned)
        }
    }

    pub(crate) fn cast(&self, dtype: DType) -> Result<Tensor> {
        if self.dtype() == dtype {
            Ok(self.clone())
        } else {
            self.to_dtype(dtype)
        }
    }

    /// A copy converted to `dtype` (floats to integers truncate toward zero, as `as` does).
    ///
    /// # Errors
    ///
    /// Only engine errors.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::from_vec(vec![1.7f32, -2.5], [2])?.to_dtype(DType::I64)?;
    /// assert_eq!(t.to_vec::<i64>()?, vec![1, -2]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        let out = self.empty_like_shape(self.shape().clone(), dtype)?;
        let k = copy::copy(
            self.layout().clone(),
            self.dtype(),
            out.layout().clone(),
            dtype,
        );
        Tensor::launch(k, &[self], &[&out])?;
        let from = self.dtype();
        if !(from.is_float() && dtype.is_float()) {
            return Ok(out);
        }
        Ok(out.record("to_dtype", &[self], move |g, _, _| {
            Ok(vec![Some(g.cast(from)?)])
        }))
    }

    /// Moves the tensor to `device`. Only `Device::Cpu` exists in this build.
    ///
    /// # Errors
    ///
    /// `DeviceUnavailable` for any other device.
    pub fn to_device(&self, device: crate::Device) -> Result<Tensor> {
        match device {
            crate::Device::Cpu => Ok(self.clone()),
            d => Err(Error::DeviceUnavailable {
                op: "to_device",
                device: format!("{d:?}"),
                reason: "this build has no CUDA support (feature `cuda`)",
            }),
        }
    }

    pub(crate) fn unary(&self, op: UnaryOp) -> Result<Tensor> {
        let dt = self.dtype();
        if dt == DType::Bool {
            return Err(Error::UnsupportedDType {
                op: op.name(),
                dtype: dt,
            });
        }
        if !dt.is_float() && !op.keeps_int() {
            return self.to_dtype(dt.to_float())?.unary(op);
        }
        let lay = if self.is_contiguous() {
            ew::Lay::Dense(self.layout().offset) // its own shape: no comparison needed
        } else {
            self.lay_for(self.shape())
        };
        let k = ew::unary(op, dt, lay); // before the output, as in `binary`
        let out = self.empty_like_shape(self.shape().clone(), dt)?;
        Tensor::launch(k, &[self], &[&out])?;
        if !dt.is_float() {
            return Ok(out);
        }
        Ok(out.record(op.name(), &[self], move |g, ins, y| {
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
                Gelu => g.mul(&x.unary(GeluGrad)?)?,
                Silu => g.mul(&x.unary(SiluGrad)?)?,
                Recip => g.mul(&y.square()?)?.neg()?,
                Square => g.mul(x)?.mul_scalar(2.0)?,
                Sign | GeluGrad | SiluGrad => g.zeros_like()?,
                AddScalar(_) => g.clone(),
                MulScalar(c) => g.mul_scalar(c)?,
                DivScalar(c) => g.div_scalar(c)?,
                RSubScalar(_) => g.neg()?,
                RDivScalar(_) => g.mul(&y.div(x)?)?.neg()?,
                PowScalar(c) => g.mul(&x.pow_scalar(c - 1.0)?)?.mul_scalar(c)?,
                RPowScalar(c) => g.mul(y)?.mul_scalar(c.ln())?,
                Clamp(..) => g.mul(&y.eq(x)?.cast(g.dtype())?)?,
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
        }))
    }

    fn scalar_op(&self, op: UnaryOp, c: f64) -> Result<Tensor> {
        if !self.dtype().is_float() && (c.fract() != 0.0 || !op.keeps_int()) {
            return self.to_dtype(DType::F32)?.unary(op);
        }
        self.unary(op)
    }

    /// `x + c`. Integer tensors stay integer for integral `c`, else compute in `f32`.
    ///
    /// # Errors
    ///
    /// As the unary ops.
    pub fn add_scalar(&self, c: f64) -> Result<Tensor> {
        self.scalar_op(UnaryOp::AddScalar(c), c)
    }
    /// `x - c`.
    ///
    /// # Errors
    ///
    /// As the unary ops.
    pub fn sub_scalar(&self, c: f64) -> Result<Tensor> {
        self.scalar_op(UnaryOp::AddScalar(-c), c)
    }
    /// `c - x`.
    ///
    /// # Errors
    ///
    /// As the unary ops.
    pub fn rsub_scalar(&self, c: f64) -> Result<Tensor> {
        self.scalar_op(UnaryOp::RSubScalar(c), c)
    }
    /// `x * c`.
    ///
    /// # Errors
    ///
    /// As the unary ops.
    pub fn mul_scalar(&self, c: f64) -> Result<Tensor> {
        self.scalar_op(UnaryOp::MulScalar(c), c)
    }
    /// `x / c` (always a float result).
    ///
    /// # Errors
    ///
    /// As the unary ops.
    pub fn div_scalar(&self, c: f64) -> Result<Tensor> {
        self.scalar_op(UnaryOp::DivScalar(c), 0.5)
    }
    /// `x ^ c`.
    ///
    /// # Errors
    ///
    /// As the unary ops.
    pub fn pow_scalar(&self, c: f64) -> Result<Tensor> {
        self.scalar_op(UnaryOp::PowScalar(c), 0.5)
    }
    /// `clamp(x, lo, hi)`; either bound may be absent. NaN stays NaN.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if both bounds are absent; as the unary ops.
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

    /// Checks operands of a binary op and returns (output shape, compute dtype).
    fn binary_prep(&self, op: &'static str, rhs: &Tensor) -> Result<(Shape, DType)> {
        self.same_device(op, rhs)?;
        let shape = broadcast_shapes(op, self.shape(), rhs.shape())?;
        Ok((shape, self.dtype().promote(rhs.dtype())))
    }

    pub(crate) fn binary(&self, rhs: &Tensor, op: BinaryOp) -> Result<Tensor> {
        let dt = self.dtype();
        // The common case first: one dtype that needs no conversion, one shape, each operand
        // dense or a splat (`sum(y).broadcast_to(..)`), one engine. It skips the broadcast,
        // the casts and the layout analysis (about a sixth of a 16-element op's
        // instructions); the general path below gives the same result for it.
        'flat: {
            if !(dt == rhs.dtype()
                && dt != DType::Bool
                && (op != BinaryOp::Div || dt.is_float())
                && self.shape() == rhs.shape()
                && self.engine().same_engine(rhs.engine()))
            {
                break 'flat;
            }
            // Both dense tested apart: going through the `Option`s of the general test cost
            // the commonest op about fifteen instructions (callgrind).
            let (la, lb) = if self.is_contiguous() && rhs.is_contiguous() {
                let dense = |t: &Tensor| ew::Lay::Dense(t.layout().offset);
                (dense(self), dense(rhs))
            } else {
                match (self.flat_lay(), rhs.flat_lay()) {
                    (Some(la), Some(lb)) => (la, lb),
                    _ => break 'flat,
                }
            };
            // The kernel before the output: built right before the launch, its fields were
            // still in the store buffer when the launch copied them in wider pieces, a
            // store-forwarding stall (a sixth of `launch`'s samples).
            let k = ew::binary(op, dt, la, lb);
            let out = self.empty_like_shape(self.shape().clone(), dt)?;
            Tensor::launch(k, &[self, rhs], &[&out])?;
            return Ok(Tensor::record_binary(out, op, self, rhs));
        }
        let (shape, mut dt) = self.binary_prep(op.name(), rhs)?;
        if dt == DType::Bool {
            return Err(Error::UnsupportedDType {
                op: op.name(),
                dtype: dt,
            });
        }
        if op == BinaryOp::Div {
            dt = dt.to_float();
        }
        let (a, b) = (self.cast_ref(dt)?, rhs.cast_ref(dt)?);
        let (a, b) = (&*a, &*b);
        let out = self.empty_like_shape(shape, dt)?;
        let k = ew::binary(op, dt, a.lay_for(out.shape()), b.lay_for(out.shape()));
        Tensor::launch(k, &[a, b], &[&out])?;
        Ok(Tensor::record_binary(out, op, a, b))
    }

    /// Records `out = op(a, b)` for autograd (`a` and `b` already of `out`'s dtype), unless the
    /// op has no gradient there.
    fn record_binary(out: Tensor, op: BinaryOp, a: &Tensor, b: &Tensor) -> Tensor {
        if !out.dtype().is_float() || op == BinaryOp::ReluBackward {
            return out;
        }
        out.record(op.name(), &[a, b], move |g, ins, y| {
            let (a, b) = (&ins[0], &ins[1]);
            let need = |t: &Tensor| t.requires_grad();
            let (ga, gb) = match op {
                BinaryOp::Add => (Some(g.clone()), Some(g.clone())),
                BinaryOp::Sub => (Some(g.clone()), need(b).then(|| g.neg()).transpose()?),
                BinaryOp::Mul => (
                    need(a).then(|| g.mul(b)).transpose()?,
                    need(b).then(|| g.mul(a)).transpose()?,
                ),
                BinaryOp::Div => (
                    need(a).then(|| g.div(b)).transpose()?,
                    need(b).then(|| g.mul(y)?.div(b)?.neg()).transpose()?,
                ),
                BinaryOp::Pow => (
                    need(a)
                        .then(|| g.mul(b)?.mul(&a.pow(&b.sub_scalar(1.0)?)?))
                        .transpose()?,
                    need(b).then(|| g.mul(y)?.mul(&a.log()?)).transpose()?,
                ),
                BinaryOp::Maximum | BinaryOp::Minimum => {
                    let m = if op == BinaryOp::Maximum {
                        a.ge(b)?
                    } else {
                        a.le(b)?
                    };
                    let z = g.zeros_like()?;
                    (Some(m.where_(g, &z)?), Some(m.where_(&z, g)?))
                }
                BinaryOp::ReluBackward => (None, None),
            };
            Ok(vec![
                ga.map(|t| t.sum_to(a.shape())).transpose()?,
                gb.map(|t| t.sum_to(b.shape())).transpose()?,
            ])
        })
    }

    fn compare(&self, rhs: &Tensor, op: CmpOp) -> Result<Tensor> {
        let (shape, dt) = self.binary_prep(op.name(), rhs)?;
        let (a, b) = (self.cast_ref(dt)?, rhs.cast_ref(dt)?);
        let (a, b) = (&*a, &*b);
        let out = self.empty_like_shape(shape, DType::Bool)?;
        let k = ew::compare(op, dt, a.lay_for(out.shape()), b.lay_for(out.shape()));
        Tensor::launch(k, &[a, b], &[&out])?;
        Ok(out)
    }

    /// `cond ? on_true : on_false`, elementwise, with broadcasting; `self` is the `Bool` condition.
    ///
    /// # Errors
    ///
    /// `UnsupportedDType` if `self` is not `Bool`; `ShapeMismatch`, `DeviceMismatch`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![-1f32, 2.], [2])?;
    /// let y = x.gt_scalar(0.0)?.where_(&x, &x.zeros_like()?)?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![0., 2.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn where_(&self, on_true: &Tensor, on_false: &Tensor) -> Result<Tensor> {
        if self.dtype() != DType::Bool {
            return Err(Error::UnsupportedDType {
                op: "where",
                dtype: self.dtype(),
            });
        }
        let (s1, dt) = on_true.binary_prep("where", on_false)?;
        self.same_device("where", on_true)?;
        let shape = broadcast_shapes("where", self.shape(), &s1)?;
        let (a, b) = (on_true.cast(dt)?, on_false.cast(dt)?);
        let out = self.empty_like_shape(shape.clone(), dt)?;
        let k = ew::where_(
            dt,
            self.layout().broadcast_to(&shape),
            a.layout().broadcast_to(&shape),
            b.layout().broadcast_to(&shape),
        );
        Tensor::launch(k, &[self, &a, &b], &[&out])?;
        let cond = self.detach();
        Ok(out.record("where", &[&a, &b], move |g, ins, _| {
            let z = g.zeros_like()?;
            Ok(vec![
                Some(cond.where_(g, &z)?.sum_to(ins[0].shape())?),
                Some(cond.where_(&z, g)?.sum_to(ins[1].shape())?),
            ])
        }))
    }

    /// The dtype of [`scalar_like`](Self::scalar_like)`(c)`.
    fn scalar_dtype(&self, c: f64) -> DType {
        if !self.dtype().is_float() && c.fract() != 0.0 {
            DType::F32
        } else {
            self.dtype()
        }
    }

    /// A 0-dim tensor of `self`'s dtype (or `f32` if `c` is not integral and `self` is integer).
    fn scalar_like(&self, c: f64) -> Result<Tensor> {
        self.new_filled(Shape::default(), self.scalar_dtype(c), c)
    }

    // ---- in place ----------------------------------------------------------------------------

    fn check_inplace(&self, op: &'static str) -> Result<()> {
        if self.layout().has_broadcast() {
            return Err(Error::OverlappingWrite { op });
        }
        if crate::is_grad_enabled() && self.requires_grad() {
            return Err(Error::Autograd {
                op,
                message: "a tensor that requires grad is used in an in-place operation (wrap it in no_grad)".into(),
            });
        }
        Ok(())
    }

    /// The operand of an in-place op: broadcast to `self`'s shape, of `self`'s dtype, and not
    /// sharing `self`'s storage (copied if it does).
    fn inplace_operand(&self, op: &'static str, src: &Tensor, promote: DType) -> Result<Tensor> {
        self.same_device(op, src)?;
        let b = broadcast_shapes(op, self.shape(), src.shape())?;
        if &b != self.shape() {
            return Err(Error::ShapeMismatch {
                op,
                lhs: self.dims().to_vec(),
                rhs: src.dims().to_vec(),
            });
        }
        if promote != self.dtype() && !(promote.is_float() && self.dtype().is_float()) {
            return Err(Error::DTypeMismatch {
                op,
                lhs: self.dtype(),
                rhs: promote,
            });
        }
        let src = if src.shares_storage(self) {
            let out = src.empty_like_shape(src.shape().clone(), self.dtype())?;
            let k = copy::copy(
                src.layout().clone(),
                src.dtype(),
                out.layout().clone(),
                out.dtype(),
            );
            Tensor::launch(k, &[src], &[&out])?;
            out
        } else {
            src.detach().cast(self.dtype())?
        };
        Ok(src)
    }

    fn binary_(&self, op: BinaryOp, src: &Tensor, alpha: f64) -> Result<Tensor> {
        self.check_inplace(op.name())?;
        if self.dtype() == DType::Bool {
            return Err(Error::UnsupportedDType {
                op: op.name(),
                dtype: DType::Bool,
            });
        }
        let mut promote = self.dtype().promote(src.dtype());
        if op == BinaryOp::Div || alpha.fract() != 0.0 {
            promote = promote.to_float();
        }
        let x = self.inplace_operand(op.name(), src, promote)?;
        let k = ew::binary_inplace(
            op,
            self.dtype(),
            self.layout().clone(),
            x.layout().broadcast_to(self.shape()),
            alpha,
        );
        Tensor::launch(k, &[&x], &[self])?;
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
    pub fn add_(&self, src: &Tensor) -> Result<Tensor> {
        self.binary_(BinaryOp::Add, src, 1.0)
    }
    /// In place: `self += alpha * src` (an axpy, as PyTorch's `add_(src, alpha=…)`).
    ///
    /// # Errors
    ///
    /// As [`add_`](Self::add_).
    pub fn add_scaled_(&self, src: &Tensor, alpha: f64) -> Result<Tensor> {
        self.binary_(BinaryOp::Add, src, alpha)
    }
    /// In place: `self -= src`.
    ///
    /// # Errors
    ///
    /// As [`add_`](Self::add_).
    pub fn sub_(&self, src: &Tensor) -> Result<Tensor> {
        self.binary_(BinaryOp::Sub, src, 1.0)
    }
    /// In place: `self *= src`.
    ///
    /// # Errors
    ///
    /// As [`add_`](Self::add_).
    pub fn mul_(&self, src: &Tensor) -> Result<Tensor> {
        self.binary_(BinaryOp::Mul, src, 1.0)
    }
    /// In place: `self /= src`.
    ///
    /// # Errors
    ///
    /// As [`add_`](Self::add_).
    pub fn div_(&self, src: &Tensor) -> Result<Tensor> {
        self.binary_(BinaryOp::Div, src, 1.0)
    }
    /// In place: `self *= c`.
    ///
    /// # Errors
    ///
    /// As [`add_`](Self::add_).
    pub fn mul_scalar_(&self, c: f64) -> Result<Tensor> {
        self.scalar_(BinaryOp::Mul, c)
    }
    /// In place: `self += c`.
    ///
    /// # Errors
    ///
    /// As [`add_`](Self::add_).
    pub fn add_scalar_(&self, c: f64) -> Result<Tensor> {
        self.scalar_(BinaryOp::Add, c)
    }

    /// `self op= c`, with [`binary_`](Self::binary_)'s checks made before the scalar operand
    /// is enqueued (F1: a refused call enqueues nothing).
    fn scalar_(&self, op: BinaryOp, c: f64) -> Result<Tensor> {
        self.check_inplace(op.name())?;
        let dt = self.scalar_dtype(c);
        if self.dtype() == DType::Bool {
            return Err(Error::UnsupportedDType {
                op: op.name(),
                dtype: DType::Bool,
            });
        }
        if dt != self.dtype() {
            return Err(Error::DTypeMismatch {
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
    pub fn copy_(&self, src: &Tensor) -> Result<Tensor> {
        self.check_inplace("copy_")?;
        let x = self.inplace_operand("copy_", src, self.dtype())?;
        let k = copy::copy(
            x.layout().broadcast_to(self.shape()),
            x.dtype(),
            self.layout().clone(),
            self.dtype(),
        );
        Tensor::launch(k, &[&x], &[self])?;
        Ok(self.clone())
    }

    /// In place: sets every element to `value`.
    ///
    /// # Errors
    ///
    /// `OverlappingWrite`, `Autograd` as for [`add_`](Self::add_).
    pub fn fill_(&self, value: f64) -> Result<Tensor> {
        self.check_inplace("fill_")?;
        Tensor::launch(
            copy::fill(self.dtype(), self.layout().clone(), value),
            &[],
            &[self],
        )?;
        Ok(self.clone())
    }

    /// In place: sets every element to zero.
    ///
    /// # Errors
    ///
    /// As [`fill_`](Self::fill_).
    pub fn zero_(&self) -> Result<Tensor> {
        self.fill_(0.0)
    }
}

macro_rules! binary_methods {
    ($($(#[$m:meta])* $name:ident => $op:ident),* $(,)?) => {
        impl Tensor {
            $(
                $(#[$m])*
                ///
                /// Broadcasts; promotes dtypes (see [`DType::promote`]).
                ///
                /// # Errors
                ///
                /// `ShapeMismatch`, `DeviceMismatch`, `UnsupportedDType` (bool arithmetic).
                pub fn $name(&self, rhs: &Tensor) -> Result<Tensor> {
                    self.binary(rhs, BinaryOp::$op)
                }
            )*
        }
    };
}

binary_methods! {
    /// `a + b`
    add => Add,
    /// `a - b`
    sub => Sub,
    /// `a * b`
    mul => Mul,
    /// `a / b` (true division: integers give a float)
    div => Div,
    /// `a ^ b`
    pow => Pow,
    /// The elementwise maximum (NaN propagates).
    maximum => Maximum,
    /// The elementwise minimum (NaN propagates).
    minimum => Minimum,
}

macro_rules! cmp_methods {
    ($($name:ident, $sname:ident => $op:ident, $doc:literal);* $(;)?) => {
        impl Tensor {
            $(
                #[doc = concat!("`a ", $doc, " b` as `Bool`, with broadcasting and promotion.")]
                ///
                /// # Errors
                ///
                /// `ShapeMismatch`, `DeviceMismatch`.
                pub fn $name(&self, rhs: &Tensor) -> Result<Tensor> {
                    self.compare(rhs, CmpOp::$op)
                }
                #[doc = concat!("`a ", $doc, " c` as `Bool` for a scalar `c`.")]
                ///
                /// # Errors
                ///
                /// Engine errors.
                pub fn $sname(&self, c: f64) -> Result<Tensor> {
                    self.compare(&self.scalar_like(c)?, CmpOp::$op)
                }
            )*
        }
    };
}

cmp_methods! {
    eq, eq_scalar => Eq, "==";
    ne, ne_scalar => Ne, "!=";
    lt, lt_scalar => Lt, "<";
    le, le_scalar => Le, "<=";
    gt, gt_scalar => Gt, ">";
    ge, ge_scalar => Ge, ">=";
}

/// Logical ops: every operand is a truth value, true where it is not zero (NaN is true); the
/// result is `Bool`. Operands of any dtypes broadcast and promote as the comparisons do.
impl Tensor {
    /// `a && b` elementwise.
    ///
    /// # Errors
    ///
    /// `ShapeMismatch`, `DeviceMismatch`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![true, true, false], [3])?;
    /// let b = Tensor::from_vec(vec![2.0f32, 0.0, f32::NAN], [3])?;
    /// assert_eq!(a.logical_and(&b)?.to_vec::<bool>()?, [true, false, false]);
    /// assert_eq!(a.logical_or(&b)?.to_vec::<bool>()?, [true, true, true]);
    /// assert_eq!(a.logical_xor(&b)?.to_vec::<bool>()?, [false, true, true]);
    /// assert_eq!(b.logical_not()?.to_vec::<bool>()?, [false, true, false]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn logical_and(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(rhs, CmpOp::And)
    }
    /// `a || b` elementwise.
    ///
    /// # Errors
    ///
    /// As [`logical_and`](Self::logical_and).
    pub fn logical_or(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(rhs, CmpOp::Or)
    }
    /// `a xor b` elementwise.
    ///
    /// # Errors
    ///
    /// As [`logical_and`](Self::logical_and).
    pub fn logical_xor(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(rhs, CmpOp::Xor)
    }
    /// `!a` elementwise: true where `a` is zero.
    ///
    /// # Errors
    ///
    /// Engine errors.
    pub fn logical_not(&self) -> Result<Tensor> {
        self.eq_scalar(0.0)
    }
}

/// Masking: `masked_fill` and the triangles `tril` / `triu`.
impl Tensor {
    /// `self` with `value` wherever `mask` is true (`mask` is `Bool` and broadcasts to `self`'s
    /// shape, which the result keeps). The gradient flows to the elements not filled.
    ///
    /// # Errors
    ///
    /// `UnsupportedDType` if `mask` is not `Bool`; `ShapeMismatch` if it does not broadcast to
    /// `self`; `DeviceMismatch`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let scores = Tensor::from_vec(vec![0.5f32, 1.0, 2.0], [3])?;
    /// let pad = Tensor::from_vec(vec![0i64, 0, 1], [3])?.gt_scalar(0.0)?;
    /// let s = scores.masked_fill(&pad, f64::NEG_INFINITY)?;
    /// assert_eq!(s.to_vec::<f32>()?, [0.5, 1.0, f32::NEG_INFINITY]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn masked_fill(&self, mask: &Tensor, value: f64) -> Result<Tensor> {
        const OP: &str = "masked_fill";
        if mask.dtype() != DType::Bool {
            return Err(Error::UnsupportedDType {
                op: OP,
                dtype: mask.dtype(),
            });
        }
        self.same_device(OP, mask)?;
        if broadcast_shapes(OP, self.shape(), mask.shape())? != *self.shape() {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: self.dims().to_vec(),
                rhs: mask.dims().to_vec(),
            });
        }
        let fill = self.new_filled(Shape::default(), self.dtype(), value)?;
        mask.where_(&fill, self)
    }

    /// The lower triangle of the last two dims: elements with `col − row ≤ diagonal` are kept,
    /// the rest set to 0 (`diagonal` 0 is the main diagonal, positive above it), as PyTorch's
    /// `tril`. Batched over the leading dims; differentiable.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for a tensor of rank below 2.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::ones([3, 3], DType::F32)?;
    /// assert_eq!(t.tril(0)?.to_vec::<f32>()?, [1., 0., 0., 1., 1., 0., 1., 1., 1.]);
    /// assert_eq!(t.triu(1)?.to_vec::<f32>()?, [0., 1., 1., 0., 0., 1., 0., 0., 0.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn tril(&self, diagonal: i64) -> Result<Tensor> {
        self.triangle("tril", |i, j| j - i > diagonal)
    }

    /// The upper triangle of the last two dims: elements with `col − row ≥ diagonal` are kept,
    /// the rest set to 0, as PyTorch's `triu`. See [`tril`](Self::tril).
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for a tensor of rank below 2.
    pub fn triu(&self, diagonal: i64) -> Result<Tensor> {
        self.triangle("triu", |i, j| j - i < diagonal)
    }

    /// Zeros the elements `(row, col)` of the last two dims where `drop(row, col)`: a mask
    /// built on the host (rows × cols bytes) and applied with `masked_fill`.
    fn triangle(&self, op: &'static str, drop: impl Fn(i64, i64) -> bool) -> Result<Tensor> {
        let r = self.rank();
        if r < 2 {
            return Err(Error::invalid(
                op,
                format!("needs at least 2 dims, got {:?}", self.dims()),
            ));
        }
        let (rows, cols) = (self.dims()[r - 2], self.dims()[r - 1]);
        let mask: Vec<eddy_ops::Bool8> = (0..rows as i64)
            .flat_map(|i| (0..cols as i64).map(move |j| (i, j)))
            .map(|(i, j)| eddy_ops::Bool8(drop(i, j) as u8))
            .collect();
        let mask = crate::with_engine(self.engine(), || Tensor::from_vec(mask, [rows, cols]))?;
        self.masked_fill(&mask, 0.0)
    }
}
