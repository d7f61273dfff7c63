//! The element types kernels are generic over: floats with their compute type, integers
//! widened to `i64`, and the macros that pick a kernel body per dtype.

use crate::Elem;
use crate::cpu::fastmath::Transcendental;
use half::{bf16, f16};
use num_traits::Float as NumFloat;

/// A float element type and the type it computes in.
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::elementwise::FloatElem;
/// use eddy_ops::half::f16;
/// // Computes in `T::A` (f32 for f16), rounds once at the end.
/// fn mean2<T: FloatElem>(a: T, b: T) -> T {
///     T::down((a.up() + b.up()) / T::param(2.0))
/// }
/// assert_eq!(mean2(f16::from_f32(1.0), f16::from_f32(2.0)), f16::from_f32(1.5));
/// assert_eq!(mean2(1.0f64, 4.0), 2.5);
/// ```
pub trait FloatElem: Elem {
    /// The type arithmetic happens in.
    type A: NumFloat + Transcendental + Send + Sync + std::iter::Sum;
    /// Widens.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::cpu::elementwise::FloatElem;
    /// use eddy_ops::half::bf16;
    /// let x: f32 = bf16::from_f32(0.5).up();
    /// assert_eq!(x, 0.5);
    /// ```
    fn up(self) -> Self::A;
    /// Narrows.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::cpu::elementwise::FloatElem;
    /// use eddy_ops::half::f16;
    /// assert_eq!(<f16 as FloatElem>::down(65504.0), f16::MAX);
    /// assert_eq!(<f64 as FloatElem>::down(0.25), 0.25);
    /// ```
    fn down(a: Self::A) -> Self;
    /// Converts an `f64` parameter to the compute type.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::cpu::elementwise::FloatElem;
    /// use eddy_ops::half::f16;
    /// let c: f32 = <f16 as FloatElem>::param(0.1);
    /// assert_eq!(c, 0.1f32);
    /// ```
    fn param(v: f64) -> Self::A;
}
macro_rules! float_elem {
    ($t:ty, $a:ty, $up:expr, $down:expr) => {
        impl FloatElem for $t {
            type A = $a;
            #[inline(always)]
            fn up(self) -> $a {
                $up(self)
            }
            #[inline(always)]
            fn down(a: $a) -> Self {
                $down(a)
            }
            #[inline(always)]
            fn param(v: f64) -> $a {
                v as $a
            }
        }
    };
}
float_elem!(f32, f32, |x| x, |x| x);
float_elem!(f64, f64, |x| x, |x| x);
float_elem!(f16, f32, f16::to_f32, f16::from_f32);
float_elem!(bf16, f32, bf16::to_f32, bf16::from_f32);

/// An integer element type (bool excluded), computed in `i64` with wrapping arithmetic.
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::elementwise::IntElem;
/// fn add_wrapping<T: IntElem>(a: T, b: T) -> T {
///     T::from_i64(a.to_i64().wrapping_add(b.to_i64()))
/// }
/// assert_eq!(add_wrapping(200u8, 100), 44);
/// assert_eq!(add_wrapping(-3i32, 5), 2);
/// ```
pub trait IntElem: Elem {
    /// Widens.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::cpu::elementwise::IntElem;
    /// assert_eq!(255u8.to_i64(), 255);
    /// assert_eq!((-7i32).to_i64(), -7);
    /// ```
    fn to_i64(self) -> i64;
    /// Narrows (wrapping, as `as` does).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::cpu::elementwise::IntElem;
    /// assert_eq!(<u8 as IntElem>::from_i64(300), 44);
    /// assert_eq!(<i32 as IntElem>::from_i64(-1), -1);
    /// ```
    fn from_i64(v: i64) -> Self;
}
macro_rules! int_elem {
    ($t:ty) => {
        impl IntElem for $t {
            #[inline(always)]
            fn to_i64(self) -> i64 {
                self as i64
            }
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                v as $t
            }
        }
    };
}
int_elem!(i64);
int_elem!(i32);
int_elem!(u8);

/// Runs `$body` with `$T` bound to a float type, or evaluates `$else` for other dtypes.
macro_rules! dispatch_float {
    ($dtype:expr, $T:ident => $body:expr, else => $else:expr) => {
        match $dtype {
            DType::F32 => {
                type $T = f32;
                $body
            }
            DType::F64 => {
                type $T = f64;
                $body
            }
            DType::F16 => {
                type $T = $crate::half::f16;
                $body
            }
            DType::BF16 => {
                type $T = $crate::half::bf16;
                $body
            }
            _ => $else,
        }
    };
}
pub(crate) use dispatch_float;

/// Runs `$body` with `$T` bound to an integer type, or evaluates `$else`.
macro_rules! dispatch_int {
    ($dtype:expr, $T:ident => $body:expr, else => $else:expr) => {
        match $dtype {
            DType::I64 => {
                type $T = i64;
                $body
            }
            DType::I32 => {
                type $T = i32;
                $body
            }
            DType::U8 => {
                type $T = u8;
                $body
            }
            _ => $else,
        }
    };
}
pub(crate) use dispatch_int;
