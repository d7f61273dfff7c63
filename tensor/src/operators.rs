//! Arithmetic operators: `&a + &b`, `&a * 2.0`, `1.0 - &a`, `-&a`, ...
//!
//! The operator impls on [`Tensor`]; the crate's documentation lists them (section
//! "Operators").
//!
//! # Examples
//!
//! ```
//! use eddy_tensor::{DType, Tensor};
//! let x = Tensor::from_vec(vec![1f32, 2.0], [1, 2])?;
//! let w = Tensor::from_vec(vec![1f32, 0.5, -1.0, 2.0], [2, 2])?;
//! let b = Tensor::from_vec(vec![0.25f32, 0.0], [2])?;
//! let y = (x.matmul(&w)? + &b)?; // [1 - 2 + 0.25, 0.5 + 4]
//! assert_eq!(y.to_vec::<f32>()?, [-0.75, 4.5]);
//! let z = ((&y * 2.0)? - &y * &y)?;
//! assert_eq!(z.to_vec::<f32>()?, [-1.5 - 0.5625, 9.0 - 20.25]);
//! assert_eq!((1.0 / &b)?.to_vec::<f32>()?, [4.0, f32::INFINITY]);
//! assert_eq!((-&x)?.to_vec::<f32>()?, [-1.0, -2.0]);
//! # Ok::<(), eddy_tensor::Error>(())
//! ```

use crate::{DType, Result, Shape, Tensor};
use std::ops::{Add, Div, Mul, Neg, Sub};

/// A tensor operand: a tensor, a borrowed one, or the result of an op.
trait Operand {
    fn with<R>(self, f: impl FnOnce(&Tensor) -> Result<R>) -> Result<R>;
}

impl Operand for Tensor {
    fn with<R>(self, f: impl FnOnce(&Tensor) -> Result<R>) -> Result<R> {
        f(&self)
    }
}

impl Operand for &Tensor {
    fn with<R>(self, f: impl FnOnce(&Tensor) -> Result<R>) -> Result<R> {
        f(self)
    }
}

impl Operand for Result<Tensor> {
    fn with<R>(self, f: impl FnOnce(&Tensor) -> Result<R>) -> Result<R> {
        f(&self?)
    }
}

/// `lhs op rhs` for two operands, the left one's error first.
fn both(
    lhs: impl Operand,
    rhs: impl Operand,
    op: impl FnOnce(&Tensor, &Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    lhs.with(|a| rhs.with(|b| op(a, b)))
}

/// `c / t`: a 0-dim tensor of `c` (in `t`'s dtype if it is a float, else `f32`) over `t`, so
/// that the quotient is rounded once.
fn scalar_div(c: f64, t: &Tensor) -> Result<Tensor> {
    let dtype = if t.dtype().is_float() {
        t.dtype()
    } else {
        DType::F32
    };
    t.new_filled(Shape::default(), dtype, c)?.div(t)
}

/// Tensor-tensor impls for one operator: a tensor or a borrowed one on the left and any
/// operand on the right, and a `Result` on the left of a tensor.
macro_rules! tensor_tensor {
    ($Trait:ident, $method:ident) => {
        impl<R: Operand> $Trait<R> for Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: R) -> Result<Tensor> {
                both(self, rhs, Tensor::$method)
            }
        }
        impl<R: Operand> $Trait<R> for &Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: R) -> Result<Tensor> {
                both(self, rhs, Tensor::$method)
            }
        }
        impl $Trait<Tensor> for Result<Tensor> {
            type Output = Result<Tensor>;
            fn $method(self, rhs: Tensor) -> Result<Tensor> {
                both(self, rhs, Tensor::$method)
            }
        }
        impl $Trait<&Tensor> for Result<Tensor> {
            type Output = Result<Tensor>;
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                both(self, rhs, Tensor::$method)
            }
        }
    };
}

tensor_tensor!(Add, add);
tensor_tensor!(Sub, sub);
tensor_tensor!(Mul, mul);
tensor_tensor!(Div, div);

/// Tensor-scalar and scalar-tensor impls for one scalar type: `$ts(t, c)` computes
/// `t op c` and `$st(c, t)` computes `c op t`.
macro_rules! with_scalar {
    ($Trait:ident, $method:ident, $S:ty, $ts:expr, $st:expr) => {
        impl $Trait<$S> for Tensor {
            type Output = Result<Tensor>;
            fn $method(self, c: $S) -> Result<Tensor> {
                $ts(&self, c as f64)
            }
        }
        impl $Trait<$S> for &Tensor {
            type Output = Result<Tensor>;
            fn $method(self, c: $S) -> Result<Tensor> {
                $ts(self, c as f64)
            }
        }
        impl $Trait<Tensor> for $S {
            type Output = Result<Tensor>;
            fn $method(self, t: Tensor) -> Result<Tensor> {
                $st(self as f64, &t)
            }
        }
        impl $Trait<&Tensor> for $S {
            type Output = Result<Tensor>;
            fn $method(self, t: &Tensor) -> Result<Tensor> {
                $st(self as f64, t)
            }
        }
    };
}

macro_rules! scalar_ops {
    ($($S:ty),*) => {
        $(
            with_scalar!(Add, add, $S, Tensor::add_scalar, |c, t: &Tensor| t.add_scalar(c));
            with_scalar!(Sub, sub, $S, Tensor::sub_scalar, |c, t: &Tensor| t.rsub_scalar(c));
            with_scalar!(Mul, mul, $S, Tensor::mul_scalar, |c, t: &Tensor| t.mul_scalar(c));
            with_scalar!(Div, div, $S, Tensor::div_scalar, scalar_div);
        )*
    };
}

// One float and one integer type, so that a literal (`2.0`, `2`) picks its impl unaided.
scalar_ops!(f64, i32);

impl Neg for Tensor {
    type Output = Result<Tensor>;
    fn neg(self) -> Result<Tensor> {
        Tensor::neg(&self)
    }
}

impl Neg for &Tensor {
    type Output = Result<Tensor>;
    fn neg(self) -> Result<Tensor> {
        Tensor::neg(self)
    }
}
