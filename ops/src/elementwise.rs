//! Elementwise ops: unary maps, binary maps with broadcasting, comparisons and `where`: their
//! inference (shapes, dtypes, devices) and the kernel for the operands' device.
//!
//! # Examples
//!
//! ```
//! use eddy_ops::elementwise::{binary, infer_binary, BinaryOp, Operand};
//! use eddy_ops::{DType, Device, Lay, Shape};
//! let (a, b): (Shape, Shape) = ([2, 3].into(), [3].into());
//! let (shape, dt) = infer_binary(
//!     "add",
//!     Operand::new(&a, DType::F32, Device::CPU),
//!     Operand::new(&b, DType::I64, Device::CPU),
//! )?;
//! assert_eq!((shape.dims(), dt), (&[2, 3][..], DType::F32));
//! let k = binary(Device::CPU, BinaryOp::Add, dt, Lay::Dense(0), Lay::Dense(0));
//! assert!(k.is_some());
//! # Ok::<(), eddy_ops::Error>(())
//! ```

use crate::device::{Device, pick};
use crate::{DType, Error, Lay, Layout, Result, Shape, broadcast_shapes, cpu};
use eddy_vm::instruction::Kernel;

pub use crate::kinds::{BinaryOp, CmpOp, UnaryOp};

/// What inference needs to know of an operand: its shape, dtype and device.
///
/// # Examples
///
/// ```
/// use eddy_ops::{elementwise::Operand, DType, Device, Shape};
/// let s: Shape = [4].into();
/// let a = Operand::new(&s, DType::F16, Device::Cpu(1));
/// assert_eq!((a.dtype, a.device), (DType::F16, Device::Cpu(1)));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Operand<'a> {
    /// The dims.
    pub shape: &'a Shape,
    /// The element type.
    pub dtype: DType,
    /// Where its storage lives.
    pub device: Device,
}

impl<'a> Operand<'a> {
    /// An operand of `shape`, `dtype`, on `device`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::{elementwise::Operand, DType, Device, Shape};
    /// let s = Shape::default();
    /// assert_eq!(Operand::new(&s, DType::Bool, Device::CPU).shape.rank(), 0);
    /// ```
    pub fn new(shape: &'a Shape, dtype: DType, device: Device) -> Self {
        Operand {
            shape,
            dtype,
            device,
        }
    }
}

/// Checks that two operands of `op` share a device.
///
/// # Errors
///
/// `DeviceMismatch`, naming both devices.
///
/// # Examples
///
/// ```
/// use eddy_ops::{elementwise::same_device, Device, Error};
/// assert!(same_device("mul", Device::Cpu(1), Device::Cpu(1)).is_ok());
/// let e = same_device("mul", Device::Cpu(0), Device::Cpu(1)).unwrap_err();
/// assert!(matches!(e, Error::DeviceMismatch { op: "mul", .. }), "{e}");
/// ```
#[inline]
#[track_caller]
pub fn same_device(op: &'static str, lhs: Device, rhs: Device) -> Result<()> {
    if lhs == rhs {
        return Ok(());
    }
    Err(Error::DeviceMismatch {
        at: crate::Caller::here(),
        op,
        lhs: lhs.to_string(),
        rhs: rhs.to_string(),
    })
}

/// The output shape and the dtype both operands compute in, for a binary op: one device, the
/// shapes broadcast as NumPy's rules, the dtypes promoted as PyTorch's (a 0-d operand raises
/// the result only to a higher category: [`DType::result_type`]).
///
/// # Errors
///
/// `DeviceMismatch`; `ShapeMismatch` for shapes that do not broadcast.
///
/// # Examples
///
/// ```
/// use eddy_ops::{elementwise::{infer_binary, Operand}, DType, Device, Error, Shape};
/// let (a, b): (Shape, Shape) = ([2, 1].into(), [3].into());
/// let x = Operand::new(&a, DType::I32, Device::CPU);
/// let (s, dt) = infer_binary("add", x, Operand::new(&b, DType::I64, Device::CPU))?;
/// assert_eq!((s.dims(), dt), (&[2, 3][..], DType::I64));
/// let (c, d): (Shape, Shape) = ([2, 3].into(), [4].into());
/// let x = Operand::new(&c, DType::I32, Device::CPU);
/// let bad = infer_binary("add", x, Operand::new(&d, DType::I32, Device::CPU));
/// assert!(matches!(bad, Err(Error::ShapeMismatch { .. })));
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[track_caller]
pub fn infer_binary(
    op: &'static str,
    lhs: Operand<'_>,
    rhs: Operand<'_>,
) -> Result<(Shape, DType)> {
    same_device(op, lhs.device, rhs.device)?;
    let shape = broadcast_shapes(op, lhs.shape, rhs.shape)?;
    let dtype = lhs
        .dtype
        .result_type(lhs.shape.rank() == 0, rhs.dtype, rhs.shape.rank() == 0);
    Ok((shape, dtype))
}

/// The dtype an arithmetic binary op computes in, given its operands' promoted dtype: `div`
/// of integers and of `Bool` computes in float. `Bool` has no other arithmetic here: the tensor
/// layer computes `add`, `mul`, `maximum` and `minimum` of two `Bool` operands as the logical
/// ops PyTorch makes of them.
///
/// # Errors
///
/// `UnsupportedDType` for any other op on `Bool`.
///
/// # Examples
///
/// ```
/// use eddy_ops::{elementwise::{binary_dtype, BinaryOp}, DType};
/// assert_eq!(binary_dtype(BinaryOp::Div, DType::I32)?, DType::F32);
/// assert_eq!(binary_dtype(BinaryOp::Div, DType::Bool)?, DType::F32);
/// assert_eq!(binary_dtype(BinaryOp::Mul, DType::I32)?, DType::I32);
/// assert!(binary_dtype(BinaryOp::Sub, DType::Bool).is_err());
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[inline]
#[track_caller]
pub fn binary_dtype(op: BinaryOp, promoted: DType) -> Result<DType> {
    if op == BinaryOp::Div {
        return Ok(promoted.to_float());
    }
    if op == BinaryOp::GeluBackward && !promoted.is_float() {
        return Err(Error::UnsupportedDType {
            at: crate::Caller::here(),
            op: op.name(),
            dtype: promoted,
        });
    }
    if promoted == DType::Bool {
        return Err(Error::UnsupportedDType {
            at: crate::Caller::here(),
            op: op.name(),
            dtype: promoted,
        });
    }
    Ok(promoted)
}

/// The dtype a unary op computes in for an input of `dtype`, as PyTorch: integers stay
/// integer for the ops that keep them ([`UnaryOp::keeps_int`]), and they and `Bool` compute the
/// others in `f32`; the activations PyTorch defines on floats only (`gelu`, `silu`, `elu`,
/// `softplus`, `leaky_relu`) refuse integers and `Bool`, and the integer-keeping ops refuse
/// `Bool`.
///
/// # Errors
///
/// `UnsupportedDType` as above.
///
/// # Examples
///
/// ```
/// use eddy_ops::{elementwise::{unary_dtype, UnaryOp}, DType};
/// assert_eq!(unary_dtype(UnaryOp::Neg, DType::I64)?, DType::I64);
/// assert_eq!(unary_dtype(UnaryOp::Exp, DType::I64)?, DType::F32);
/// assert_eq!(unary_dtype(UnaryOp::Exp, DType::Bool)?, DType::F32);
/// assert!(unary_dtype(UnaryOp::Neg, DType::Bool).is_err());
/// assert!(unary_dtype(UnaryOp::Gelu, DType::I64).is_err());
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[inline]
#[track_caller]
pub fn unary_dtype(op: UnaryOp, dtype: DType) -> Result<DType> {
    use UnaryOp::*;
    if dtype.is_float() {
        return Ok(dtype);
    }
    let float_only = matches!(op, Gelu | Silu | Elu(_) | Softplus(..) | LeakyRelu(_));
    if float_only || (op.keeps_int() && dtype == DType::Bool) {
        return Err(Error::UnsupportedDType {
            at: crate::Caller::here(),
            op: op.name(),
            dtype,
        });
    }
    Ok(if op.keeps_int() { dtype } else { DType::F32 })
}

/// The kernel of `out = op(x)` on `device`: input laid out as `la`, all of `dtype` (see
/// [`unary_dtype`]).
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`]).
///
/// # Examples
///
/// ```
/// use eddy_ops::{elementwise::{unary, UnaryOp}, DType, Device, Lay};
/// assert!(unary(Device::Cpu(1), UnaryOp::Exp, DType::F32, Lay::Dense(0)).is_some());
/// assert!(unary(Device::Test(0), UnaryOp::Exp, DType::F32, Lay::Dense(0)).is_none());
/// ```
#[inline(always)]
pub fn unary(device: Device, op: UnaryOp, dtype: DType, la: Lay) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::elementwise::unary(op, dtype, la),
        crate::cuda::ops::unary(op, dtype, la)
    )
}

/// The kernel of `out = a op b` on `device`: operands laid out as `la`, `lb` (already
/// broadcast to the output's shape), all of `dtype` (see [`binary_dtype`]).
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`]).
///
/// # Examples
///
/// ```
/// use eddy_ops::{elementwise::{binary, BinaryOp}, DType, Device, Lay};
/// assert!(binary(Device::CPU, BinaryOp::Add, DType::F32, Lay::Dense(0), Lay::Splat(0)).is_some());
/// ```
#[inline(always)]
pub fn binary(
    device: Device,
    op: BinaryOp,
    dtype: DType,
    la: Lay,
    lb: Lay,
) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::elementwise::binary(op, dtype, la, lb),
        crate::cuda::ops::binary(op, dtype, la, lb)
    )
}

/// The kernel of `out = a cmp b` (a `Bool` output) on `device`, operands of one `dtype`.
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`]).
///
/// # Examples
///
/// ```
/// use eddy_ops::{elementwise::{compare, CmpOp}, DType, Device, Lay};
/// assert!(compare(Device::CPU, CmpOp::Lt, DType::I32, Lay::Dense(0), Lay::Dense(0)).is_some());
/// ```
#[inline(always)]
pub fn compare(
    device: Device,
    op: CmpOp,
    dtype: DType,
    la: Lay,
    lb: Lay,
) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::elementwise::compare(op, dtype, la, lb),
        crate::cuda::ops::compare(op, dtype, la, lb)
    )
}

/// The kernel of `out = cond ? a : b` on `device`: layouts broadcast to the output's shape,
/// `a`, `b` and the output of `dtype`.
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`]).
///
/// # Examples
///
/// ```
/// use eddy_ops::{elementwise::where_, DType, Device, Layout};
/// let l = Layout::contiguous([3]);
/// assert!(where_(Device::CPU, DType::F32, l.clone(), l.clone(), l).is_some());
/// ```
pub fn where_(
    device: Device,
    dtype: DType,
    lc: Layout,
    la: Layout,
    lb: Layout,
) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::elementwise::where_(dtype, lc, la, lb),
        crate::cuda::ops::where_(dtype, lc, la, lb)
    )
}

/// The kernel of the in-place `out op= alpha * x` on `device` (`add_`, `mul_`, …): output 0
/// laid out as `lo` is read and written, input 0 as `lx` broadcast to it.
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`]).
///
/// # Examples
///
/// ```
/// use eddy_ops::{elementwise::{binary_inplace, BinaryOp}, DType, Device, Layout};
/// let l = Layout::contiguous([3]);
/// assert!(binary_inplace(Device::CPU, BinaryOp::Add, DType::F32, l.clone(), l, 1.0).is_some());
/// ```
pub fn binary_inplace(
    device: Device,
    op: BinaryOp,
    dtype: DType,
    lo: Layout,
    lx: Layout,
    alpha: f64,
) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::elementwise::binary_inplace(op, dtype, lo, lx, alpha),
        crate::cuda::ops::binary_inplace(op, dtype, lo, lx, alpha)
    )
}
