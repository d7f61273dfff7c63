//! Numbers that remember their kind: a Python `bool`, `int` or `float`, as an op's scalar
//! operand. PyTorch decides the dtype of `tensor op number` by the number's kind, never its
//! value: `tensor([1, 2]) * 2` stays `i64`, `tensor([1, 2]) * 2.0` is `f32`.

use crate::DType;

/// A scalar operand with its kind. Rust's numbers convert into it by their type: `2`, `2i64`,
/// `7u8` are [`Int`](Scalar::Int); `2.0`, `0.5f32` are [`Float`](Scalar::Float); `true` is
/// [`Bool`](Scalar::Bool).
///
/// # Examples
///
/// ```
/// use eddy_ops::{DType, Scalar};
/// assert_eq!(Scalar::from(2), Scalar::Int(2));
/// assert_eq!(Scalar::from(2.0), Scalar::Float(2.0));
/// // The kind decides the dtype, not the value:
/// assert_eq!(DType::I64.with_scalar(2.into()), DType::I64);
/// assert_eq!(DType::I64.with_scalar(2.0.into()), DType::F32);
/// assert_eq!(DType::F16.with_scalar(1e10.into()), DType::F16);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    /// A boolean (`true` is 1).
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Float(f64),
}

impl Scalar {
    /// The value as an `f64` (an integer beyond ±2^53 rounded to the nearest).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::Scalar;
    /// assert_eq!(Scalar::Int(3).to_f64(), 3.0);
    /// assert_eq!(Scalar::Bool(true).to_f64(), 1.0);
    /// ```
    #[inline]
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => f64::from(u8::from(b)),
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) => f,
        }
    }

    /// Whether it is a [`Float`](Scalar::Float).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::Scalar;
    /// assert!(Scalar::from(1.0).is_float() && !Scalar::from(1).is_float());
    /// ```
    #[inline]
    pub fn is_float(self) -> bool {
        matches!(self, Scalar::Float(_))
    }
}

impl std::fmt::Display for Scalar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scalar::Bool(b) => write!(f, "{b}"),
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::Float(x) if x.fract() == 0.0 && x.is_finite() => write!(f, "{x:.1}"),
            Scalar::Float(x) => write!(f, "{x}"),
        }
    }
}

macro_rules! from_int {
    ($($t:ty),*) => {
        $(
            impl From<$t> for Scalar {
                #[inline]
                fn from(v: $t) -> Scalar {
                    Scalar::Int(v as i64)
                }
            }
        )*
    };
}

from_int!(i8, i16, i32, i64, u8, u16, u32, isize);

impl From<f64> for Scalar {
    #[inline]
    fn from(v: f64) -> Scalar {
        Scalar::Float(v)
    }
}

impl From<f32> for Scalar {
    #[inline]
    fn from(v: f32) -> Scalar {
        Scalar::Float(f64::from(v))
    }
}

impl From<bool> for Scalar {
    #[inline]
    fn from(v: bool) -> Scalar {
        Scalar::Bool(v)
    }
}

impl DType {
    /// The dtype of `tensor op c` for a tensor of this dtype, as PyTorch's `result_type` with
    /// a Python number: a float tensor keeps its dtype whatever `c` is; an integer tensor
    /// keeps its dtype beside an integer or a bool and becomes `f32` (the default float)
    /// beside a float; a bool tensor becomes `i64` beside an integer, `f32` beside a float,
    /// and stays `bool` beside a bool.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::{DType::*, Scalar};
    /// assert_eq!(U8.with_scalar(Scalar::Int(300)), U8);
    /// assert_eq!(I32.with_scalar(Scalar::Float(1e10)), F32);
    /// assert_eq!(Bool.with_scalar(Scalar::Int(1)), I64);
    /// assert_eq!(BF16.with_scalar(Scalar::Float(0.5)), BF16);
    /// ```
    #[inline]
    pub fn with_scalar(self, c: Scalar) -> DType {
        match (self, c) {
            (d, _) if d.is_float() => d,
            (_, Scalar::Float(_)) => DType::F32,
            (DType::Bool, Scalar::Int(_)) => DType::I64,
            (d, _) => d,
        }
    }
}
