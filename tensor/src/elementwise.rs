//! Elementwise ops: unary maps, binary ops with broadcasting and dtype promotion (see
//! [`DType::promote`]), scalar variants, comparisons, `where_`, `clamp`, casts, and the in-place
//! forms (`add_`, `mul_`, `copy_`, `zero_`, …) that write into existing storage.

use crate::engine::Place;
use crate::{DType, Device, Error, Result, Shape, Tensor};
use eddy_ops::elementwise::{self as ew, BinaryOp, CmpOp, Operand, UnaryOp};
use eddy_ops::{Lay, broadcast_shapes, copy};

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
        let k = kernel!(
            "copy",
            self.device(),
            copy::copy(
                self.device(),
                self.layout().clone(),
                self.dtype(),
                out.layout().clone(),
                dtype,
            )
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

    /// A copy of the tensor on `device` (itself if it is there already), as PyTorch's `to`.
    ///
    /// The copy is an instruction on the destination's stream like any other op: it returns at
    /// once, runs after every earlier write of the source, and every later op on either side
    /// is ordered after it as its reads and writes require. Gradients flow back to the source's
    /// device.
    ///
    /// # Errors
    ///
    /// `DeviceUnavailable` if the tensor's engine has no such device (a CPU device past
    /// [`VmBuilder::cpu_devices`](eddy_vm::VmBuilder::cpu_devices), or CUDA in a build without
    /// it); `Unsupported` for a pair of devices with no copy between them.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{with_engine, Device, Error, Tensor};
    /// let vm = eddy_vm::Vm::builder().cpu_devices(2).build()?;
    /// let t = with_engine(&vm, || Tensor::from_vec(vec![1f32, 2.], [2]))?;
    /// let u = t.to_device(Device::Cpu(1))?;
    /// assert_eq!((u.device(), u.to_vec::<f32>()?), (Device::Cpu(1), vec![1., 2.]));
    /// assert!(matches!(t.add(&u), Err(Error::DeviceMismatch { .. })));
    /// assert!(matches!(t.to_device(Device::Cuda(0)), Err(Error::DeviceUnavailable { .. })));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn to_device(&self, device: Device) -> Result<Tensor> {
        if device == self.device() {
            return Ok(self.clone());
        }
        let place = Place::on("to_device", self.engine_ref().share(), device)?;
        // Between device kinds the copy moves whole storage ranges: a strided source is made
        // contiguous on its own device first.
        let src = if self.device().is_cpu() != device.is_cpu() && !self.is_contiguous() {
            &self.contiguous()?
        } else {
            self
        };
        let k = kernel!(
            "to_device",
            device,
            copy::transfer(src.device(), device, src.dtype(), src.layout().clone())
        );
        let out = Tensor::empty_on(place, src.shape().clone(), src.dtype())?;
        Tensor::launch(k, &[src], &[&out])?;
        if !self.dtype().is_float() {
            return Ok(out);
        }
        let from = self.device();
        Ok(out.record("to_device", &[self], move |g, _, _| {
            Ok(vec![Some(g.to_device(from)?)])
        }))
    }

    pub(crate) fn unary(&self, op: UnaryOp) -> Result<Tensor> {
        let dt = ew::unary_dtype(op, self.dtype())?;
        if dt != self.dtype() {
            return self.to_dtype(dt)?.unary(op);
        }
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
                    // x^0 is constant (x^-1 at 0 would give 0·inf = NaN).
                    PowScalar(0.0) => g.zeros_like()?,
                    PowScalar(c) => g.mul(&x.pow_scalar(c - 1.0)?)?.mul_scalar(c)?,
                    // 0^x: 0 where x ≥ 0 (PyTorch's convention; ln 0 = -inf times y = 0 is NaN).
                    RPowScalar(0.0) => {
                        let d = g.mul(y)?.mul_scalar(f64::NEG_INFINITY)?;
                        x.ge_scalar(0.0)?.where_(&g.zeros_like()?, &d)?
                    }
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
            }),
        )
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
    pub fn sub_scalar(&self, c: f64) -> Result<Tensor> {
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
    pub fn rsub_scalar(&self, c: f64) -> Result<Tensor> {
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
    pub fn pow_scalar(&self, c: f64) -> Result<Tensor> {
        // Whole exponents up to 2^53 are exact in f64 and fit every integer exponent's dtype
        // range that matters: `pow` keeps an exponent's parity beyond `u32`.
        let int = matches!(self.dtype(), DType::I64 | DType::I32 | DType::U8);
        if int && c.fract() == 0.0 && c.abs() <= 9_007_199_254_740_992.0 {
            if c < 0.0 {
                return Err(Error::InvalidArgument {
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

    /// What inference needs of this tensor as an operand.
    #[inline]
    pub(crate) fn operand(&self) -> Operand<'_> {
        Operand::new(self.shape(), self.dtype(), self.device())
    }

    /// Checks operands of a binary op and returns (output shape, compute dtype).
    fn binary_prep(&self, op: &'static str, rhs: &Tensor) -> Result<(Shape, DType)> {
        self.same_device(op, rhs)?;
        ew::infer_binary(op, self.operand(), rhs.operand())
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
                && self.same_place(rhs))
            {
                break 'flat;
            }
            // Both dense tested apart: going through the `Option`s of the general test cost
            // the commonest op about fifteen instructions (callgrind).
            let (la, lb) = if self.is_contiguous() && rhs.is_contiguous() {
                let dense = |t: &Tensor| Lay::Dense(t.layout().offset);
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
            let k = kernel!(
                op.name(),
                self.device(),
                ew::binary(self.device(), op, dt, la, lb)
            );
            let out = self.empty_like_shape(self.shape().clone(), dt)?;
            Tensor::launch(k, &[self, rhs], &[&out])?;
            return Ok(Tensor::record_binary(out, op, self, rhs));
        }
        let (shape, dt) = self.binary_prep(op.name(), rhs)?;
        let dt = ew::binary_dtype(op, dt)?;
        let (a, b) = (self.cast_ref(dt)?, rhs.cast_ref(dt)?);
        let (a, b) = (&*a, &*b);
        let out = self.empty_like_shape(shape, dt)?;
        let (la, lb) = (a.lay_for(out.shape()), b.lay_for(out.shape()));
        let k = kernel!(
            op.name(),
            self.device(),
            ew::binary(self.device(), op, dt, la, lb)
        );
        Tensor::launch(k, &[a, b], &[&out])?;
        Ok(Tensor::record_binary(out, op, a, b))
    }

    /// Records `out = op(a, b)` for autograd (`a` and `b` already of `out`'s dtype), unless the
    /// op has no gradient there.
    fn record_binary(out: Tensor, op: BinaryOp, a: &Tensor, b: &Tensor) -> Tensor {
        if !out.dtype().is_float() || op == BinaryOp::ReluBackward {
            return out;
        }
        // What each backward reads: `a` and `b` for mul, pow, maximum, minimum; `b` and the
        // output for div; nothing for add and sub.
        let (saved, reads_y): (&[&Tensor], bool) = match op {
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::ReluBackward => (&[], false),
            BinaryOp::Div => (&[b], true),
            BinaryOp::Pow => (&[a, b], true),
            BinaryOp::Mul | BinaryOp::Maximum | BinaryOp::Minimum => (&[a, b], false),
        };
        out.record_saving(op.name(), &[a, b], saved, reads_y, move |g, ins, y| {
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
                // As PyTorch's `pow_backward_self`/`_exponent`: the base's gradient is 0 where
                // the exponent is 0, and the exponent's is 0 where the base is 0 and the
                // exponent non-negative (the plain formulas give 0·inf = NaN there).
                BinaryOp::Pow => {
                    let zero = g.new_filled(Shape::default(), g.dtype(), 0.0)?;
                    let ga = need(a)
                        .then(|| {
                            let d = g.mul(b)?.mul(&a.pow(&b.sub_scalar(1.0)?)?)?;
                            b.eq_scalar(0.0)?.where_(&zero, &d)
                        })
                        .transpose()?;
                    let gb = need(b)
                        .then(|| {
                            let d = g.mul(y)?.mul(&a.log()?)?;
                            a.eq_scalar(0.0)?
                                .logical_and(&b.ge_scalar(0.0)?)?
                                .where_(&zero, &d)
                        })
                        .transpose()?;
                    (ga, gb)
                }
                // Ties split the gradient in halves, as PyTorch's `maximum`/`minimum`; where
                // either side is NaN both get all of it.
                BinaryOp::Maximum | BinaryOp::Minimum => {
                    let (a_loses, b_loses) = if op == BinaryOp::Maximum {
                        (a.lt(b)?, a.gt(b)?)
                    } else {
                        (a.gt(b)?, a.lt(b)?)
                    };
                    let z = g.new_filled(Shape::default(), g.dtype(), 0.0)?;
                    let shared = a.eq(b)?.where_(&g.mul_scalar(0.5)?, g)?;
                    (
                        Some(a_loses.where_(&z, &shared)?),
                        Some(b_loses.where_(&z, &shared)?),
                    )
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
        let (la, lb) = (a.lay_for(out.shape()), b.lay_for(out.shape()));
        let k = kernel!(
            op.name(),
            self.device(),
            ew::compare(self.device(), op, dt, la, lb)
        );
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
        let k = kernel!(
            "where",
            self.device(),
            ew::where_(
                self.device(),
                dt,
                self.layout().broadcast_to(&shape),
                a.layout().broadcast_to(&shape),
                b.layout().broadcast_to(&shape),
            )
        );
        Tensor::launch(k, &[self, &a, &b], &[&out])?;
        let cond = self.detach();
        Ok(out.record_saving(
            "where",
            &[&a, &b],
            &[&cond.clone()],
            false,
            move |g, ins, _| {
                let z = g.zeros_like()?;
                Ok(vec![
                    Some(cond.where_(g, &z)?.sum_to(ins[0].shape())?),
                    Some(cond.where_(&z, g)?.sum_to(ins[1].shape())?),
                ])
            },
        ))
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

    /// The right operand of a comparison with the scalar `c`: as [`scalar_like`](Self::scalar_like),
    /// but an integral `c` outside an integer (or bool) dtype's range is kept in `i64` (or `f64`
    /// beyond that), so that it is compared as it is, not clamped into the range: a `u8` 255
    /// is not equal to 256.
    fn cmp_scalar(&self, c: f64) -> Result<Tensor> {
        let dt = self.scalar_dtype(c);
        let range = match dt {
            DType::Bool => Some((0.0, 1.0)),
            DType::U8 => Some((0.0, 255.0)),
            DType::I32 => Some((i32::MIN as f64, i32::MAX as f64)),
            _ => None,
        };
        let i64_range = (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&c);
        let dt = match range {
            Some((lo, hi)) if !(lo..=hi).contains(&c) && i64_range => DType::I64,
            Some((lo, hi)) if !(lo..=hi).contains(&c) => DType::F64,
            None if dt == DType::I64 && !i64_range => DType::F64,
            _ => dt,
        };
        self.new_filled(Shape::default(), dt, c)
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
    /// let w = Tensor::from_vec(vec![1f32, 2.], [2])?.requires_grad_(true);
    /// assert!(matches!(w.mul_scalar_(3.0), Err(Error::Autograd { .. })));
    /// {
    ///     let _g = no_grad(); // as an optimizer updates its parameters
    ///     w.mul_scalar_(3.0)?;
    /// }
    /// assert_eq!(w.to_vec::<f32>()?, [3., 6.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn mul_scalar_(&self, c: f64) -> Result<Tensor> {
        self.scalar_(BinaryOp::Mul, c)
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
    /// a.add_scalar_(5.0)?;
    /// assert_eq!(a.to_vec::<i64>()?, [6, 7]);
    /// assert!(a.add_scalar_(0.5).is_err()); // an i64 tensor cannot hold x + 0.5
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
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
    pub fn copy_(&self, src: &Tensor) -> Result<Tensor> {
        self.check_inplace("copy_")?;
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
    pub fn fill_(&self, value: f64) -> Result<Tensor> {
        self.check_inplace("fill_")?;
        let value = crate::create::checked_fill_value("fill_", value, self.dtype())?;
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
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 2.], [2])?;
    /// let b = Tensor::from_vec(vec![10i64], [1])?; // broadcast, promoted to f32
    /// assert_eq!(a.add(&b)?.to_vec::<f32>()?, [11., 12.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    add => Add,
    /// `a - b`
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let m = Tensor::from_vec(vec![5f32, 6., 7., 8.], [2, 2])?;
    /// let row = Tensor::from_vec(vec![1f32, 2.], [2])?;
    /// assert_eq!(m.sub(&row)?.to_vec::<f32>()?, [4., 4., 6., 6.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    sub => Sub,
    /// `a * b`
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![2i64, 3], [2])?;
    /// let y = a.mul(&Tensor::from_vec(vec![4i64, 5], [2])?)?;
    /// assert_eq!(y.to_vec::<i64>()?, [8, 15]); // integers stay integers
    /// assert!(a.mul(&Tensor::from_vec(vec![1i64, 2, 3], [3])?).is_err()); // [2] and [3]
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    mul => Mul,
    /// `a / b` (true division: integers give a float)
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1i64, 3], [2])?;
    /// let y = a.div(&Tensor::from_vec(vec![2i64], [1])?)?;
    /// assert_eq!(y.to_vec::<f32>()?, [0.5, 1.5]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    div => Div,
    /// `a ^ b`
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![2f32, 3.], [2])?;
    /// let y = a.pow(&Tensor::from_vec(vec![3f32, 2.], [2])?)?.to_vec::<f32>()?;
    /// assert!((y[0] - 8.0).abs() < 1e-5 && (y[1] - 9.0).abs() < 1e-5);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pow => Pow,
    /// The elementwise maximum (NaN propagates).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 5., f32::NAN], [3])?;
    /// let y = a.maximum(&Tensor::from_vec(vec![3f32, 2., 0.], [3])?)?.to_vec::<f32>()?;
    /// assert_eq!(y[..2], [3., 5.]);
    /// assert!(y[2].is_nan());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    maximum => Maximum,
    /// The elementwise minimum (NaN propagates).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 5., f32::NAN], [3])?;
    /// let y = a.minimum(&Tensor::from_vec(vec![3f32, 2., 0.], [3])?)?.to_vec::<f32>()?;
    /// assert_eq!(y[..2], [1., 2.]);
    /// assert!(y[2].is_nan());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    minimum => Minimum,
}

macro_rules! cmp_methods {
    ($(
        $(#[$m:meta])* $name:ident,
        $(#[$sm:meta])* $sname:ident => $op:ident, $doc:literal
    );* $(;)?) => {
        impl Tensor {
            $(
                #[doc = concat!("`a ", $doc, " b` as `Bool`, with broadcasting and promotion.")]
                ///
                $(#[$m])*
                ///
                /// # Errors
                ///
                /// `ShapeMismatch`, `DeviceMismatch`.
                pub fn $name(&self, rhs: &Tensor) -> Result<Tensor> {
                    self.compare(rhs, CmpOp::$op)
                }
                #[doc = concat!("`a ", $doc, " c` as `Bool` for a scalar `c`.")]
                ///
                $(#[$sm])*
                ///
                /// # Errors
                ///
                /// Engine errors.
                pub fn $sname(&self, c: f64) -> Result<Tensor> {
                    self.compare(&self.cmp_scalar(c)?, CmpOp::$op)
                }
            )*
        }
    };
}

cmp_methods! {
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 2., 3.], [3])?;
    /// let b = Tensor::from_vec(vec![1i64, 3, 2], [3])?; // promoted to f32
    /// assert_eq!(a.eq(&b)?.to_vec::<bool>()?, [true, false, false]);
    /// assert!(a.eq(&Tensor::from_vec(vec![1f32, 2.], [2])?).is_err()); // [3] and [2]
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    eq,
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 2., 3.], [3])?;
    /// assert_eq!(a.eq_scalar(2.0)?.to_vec::<bool>()?, [false, true, false]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    eq_scalar => Eq, "==";
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 2., 3.], [3])?;
    /// let b = Tensor::from_vec(vec![1i64, 3, 2], [3])?; // promoted to f32
    /// assert_eq!(a.ne(&b)?.to_vec::<bool>()?, [false, true, true]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    ne,
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 2., 3.], [3])?;
    /// assert_eq!(a.ne_scalar(2.0)?.to_vec::<bool>()?, [true, false, true]);
    /// let nan = Tensor::from_vec(vec![f32::NAN], [1])?;
    /// assert_eq!(nan.ne_scalar(f64::NAN)?.to_vec::<bool>()?, [true]); // NaN differs from itself
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    ne_scalar => Ne, "!=";
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 2., 3.], [3])?;
    /// let b = Tensor::from_vec(vec![1i64, 3, 2], [3])?; // promoted to f32
    /// assert_eq!(a.lt(&b)?.to_vec::<bool>()?, [false, true, false]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    lt,
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 2., 3.], [3])?;
    /// assert_eq!(a.lt_scalar(2.0)?.to_vec::<bool>()?, [true, false, false]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    lt_scalar => Lt, "<";
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 2., 3.], [3])?;
    /// let b = Tensor::from_vec(vec![1i64, 3, 2], [3])?; // promoted to f32
    /// assert_eq!(a.le(&b)?.to_vec::<bool>()?, [true, true, false]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    le,
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 2., 3.], [3])?;
    /// assert_eq!(a.le_scalar(2.0)?.to_vec::<bool>()?, [true, true, false]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    le_scalar => Le, "<=";
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 2., 3.], [3])?;
    /// let b = Tensor::from_vec(vec![1i64, 3, 2], [3])?; // promoted to f32
    /// assert_eq!(a.gt(&b)?.to_vec::<bool>()?, [false, false, true]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    gt,
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 2., 3.], [3])?;
    /// assert_eq!(a.gt_scalar(2.0)?.to_vec::<bool>()?, [false, false, true]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    gt_scalar => Gt, ">";
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 2., 3.], [3])?;
    /// let b = Tensor::from_vec(vec![1i64, 3, 2], [3])?; // promoted to f32
    /// assert_eq!(a.ge(&b)?.to_vec::<bool>()?, [true, false, true]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    ge,
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 2., 3.], [3])?;
    /// assert_eq!(a.ge_scalar(2.0)?.to_vec::<bool>()?, [false, true, true]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    ge_scalar => Ge, ">=";
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
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![true, false, false], [3])?;
    /// let b = Tensor::from_vec(vec![0i64, 0, 5], [3])?;
    /// assert_eq!(a.logical_or(&b)?.to_vec::<bool>()?, [true, false, true]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn logical_or(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(rhs, CmpOp::Or)
    }
    /// `a xor b` elementwise.
    ///
    /// # Errors
    ///
    /// As [`logical_and`](Self::logical_and).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![true, true, false], [3])?;
    /// let b = Tensor::from_vec(vec![true, false, false], [3])?;
    /// assert_eq!(a.logical_xor(&b)?.to_vec::<bool>()?, [false, true, false]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn logical_xor(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(rhs, CmpOp::Xor)
    }
    /// `!a` elementwise: true where `a` is zero.
    ///
    /// # Errors
    ///
    /// Engine errors.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![0f32, 2., f32::NAN], [3])?;
    /// assert_eq!(x.logical_not()?.to_vec::<bool>()?, [true, false, false]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
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
    /// `self`; `DeviceMismatch`; `InvalidArgument` for a value `self`'s dtype cannot hold, as
    /// [`full`](Self::full).
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
        let value = crate::create::checked_fill_value(OP, value, self.dtype())?;
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
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::ones([2, 3], DType::F32)?;
    /// assert_eq!(t.triu(0)?.to_vec::<f32>()?, [1., 1., 1., 0., 1., 1.]);
    /// assert_eq!(t.triu(-1)?.to_vec::<f32>()?, [1.; 6]);
    /// assert!(Tensor::ones([3], DType::F32)?.triu(0).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
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
        if self.numel() == 0 {
            // Nothing to zero, and no mask to build over a dim that may be huge: a copy, as
            // `masked_fill` gives.
            return self.to_dtype(self.dtype());
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
