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

use crate::{DType, Result, Scalar, Shape, Tensor};
use std::borrow::Cow;
use std::ops::{Add, Div, Mul, Neg, Sub};

/// A tensor operand: a tensor, a borrowed one, or the result of an op.
trait Operand<'a> {
    /// The tensor, or the op's error.
    fn get(self) -> Result<Cow<'a, Tensor>>;
}

impl Operand<'_> for Tensor {
    fn get(self) -> Result<Cow<'static, Tensor>> {
        Ok(Cow::Owned(self))
    }
}

impl<'a> Operand<'a> for &'a Tensor {
    fn get(self) -> Result<Cow<'a, Tensor>> {
        Ok(Cow::Borrowed(self))
    }
}

impl Operand<'_> for Result<Tensor> {
    fn get(self) -> Result<Cow<'static, Tensor>> {
        self.map(Cow::Owned)
    }
}

// The operators call the methods directly, not through a closure or a function pointer, which
// `#[track_caller]` does not see through: an error names the line with the operator.

/// `c + t`.
#[track_caller]
fn scalar_add(c: impl Into<Scalar>, t: &Tensor) -> Result<Tensor> {
    t.add_scalar(c)
}

/// `c - t`.
#[track_caller]
fn scalar_sub(c: impl Into<Scalar>, t: &Tensor) -> Result<Tensor> {
    t.rsub_scalar(c)
}

/// `c * t`.
#[track_caller]
fn scalar_mul(c: impl Into<Scalar>, t: &Tensor) -> Result<Tensor> {
    t.mul_scalar(c)
}

/// `c / t`: a 0-dim tensor of `c` (in `t`'s dtype if it is a float, else `f32`) over `t`, so
/// that the quotient is rounded once.
#[track_caller]
fn scalar_div(c: impl Into<Scalar>, t: &Tensor) -> Result<Tensor> {
    let dtype = if t.dtype().is_float() {
        t.dtype()
    } else {
        DType::F32
    };
    t.new_filled(Shape::default(), dtype, c.into().to_f64())?
        .div(t)
}

/// Tensor-tensor impls for one operator: a tensor or a borrowed one on the left and any
/// operand on the right (the right one's error if it is one), and a `Result` on the left of a
/// tensor (its error first).
macro_rules! tensor_tensor {
    ($Trait:ident, $method:ident) => {
        impl<'r, R: Operand<'r>> $Trait<R> for Tensor {
            type Output = Result<Tensor>;
            #[track_caller]
            fn $method(self, rhs: R) -> Result<Tensor> {
                Tensor::$method(&self, &*rhs.get()?)
            }
        }
        impl<'r, R: Operand<'r>> $Trait<R> for &Tensor {
            type Output = Result<Tensor>;
            #[track_caller]
            fn $method(self, rhs: R) -> Result<Tensor> {
                Tensor::$method(self, &*rhs.get()?)
            }
        }
        impl $Trait<Tensor> for Result<Tensor> {
            type Output = Result<Tensor>;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Result<Tensor> {
                Tensor::$method(&self?, &rhs)
            }
        }
        impl $Trait<&Tensor> for Result<Tensor> {
            type Output = Result<Tensor>;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                Tensor::$method(&self?, rhs)
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
    ($Trait:ident, $method:ident, $S:ty, $ts:path, $st:path) => {
        impl $Trait<$S> for Tensor {
            type Output = Result<Tensor>;
            #[track_caller]
            fn $method(self, c: $S) -> Result<Tensor> {
                $ts(&self, c)
            }
        }
        impl $Trait<$S> for &Tensor {
            type Output = Result<Tensor>;
            #[track_caller]
            fn $method(self, c: $S) -> Result<Tensor> {
                $ts(self, c)
            }
        }
        impl $Trait<Tensor> for $S {
            type Output = Result<Tensor>;
            #[track_caller]
            fn $method(self, t: Tensor) -> Result<Tensor> {
                $st(self, &t)
            }
        }
        impl $Trait<&Tensor> for $S {
            type Output = Result<Tensor>;
            #[track_caller]
            fn $method(self, t: &Tensor) -> Result<Tensor> {
                $st(self, t)
            }
        }
    };
}

macro_rules! scalar_ops {
    ($($S:ty),*) => {
        $(
            with_scalar!(Add, add, $S, Tensor::add_scalar, scalar_add);
            with_scalar!(Sub, sub, $S, Tensor::sub_scalar, scalar_sub);
            with_scalar!(Mul, mul, $S, Tensor::mul_scalar, scalar_mul);
            with_scalar!(Div, div, $S, Tensor::div_scalar, scalar_div);
        )*
    };
}

// One float and one integer type, so that a literal (`2.0`, `2`) picks its impl unaided; each
// is its scalar's kind (see `Scalar`): `&i * 2` stays integer, `&i * 2.0` is a float.
scalar_ops!(f64, i32);

impl Neg for Tensor {
    type Output = Result<Tensor>;
    #[track_caller]
    fn neg(self) -> Result<Tensor> {
        Tensor::neg(&self)
    }
}

impl Neg for &Tensor {
    type Output = Result<Tensor>;
    #[track_caller]
    fn neg(self) -> Result<Tensor> {
        Tensor::neg(self)
    }
}
