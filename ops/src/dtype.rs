//! Element types: [`DType`], the [`Elem`] trait kernels are generic over, and promotion.

use half::{bf16, f16};

/// The element type of a tensor.
///
/// # Promotion
///
/// Binary ops on two different dtypes compute in the *promoted* type, as PyTorch does:
/// `bool < u8 < i32 < i64 < {f16, bf16} < f32 < f64`; `f16` with `bf16` gives `f32`.
/// Comparisons return `Bool`. Transcendental ops (`exp`, `log`, `sqrt`, …) on integer tensors
/// compute in `f32`.
///
/// # Examples
///
/// ```
/// use eddy_ops::DType;
/// assert_eq!(DType::I64.promote(DType::F16), DType::F16);
/// assert_eq!(DType::F16.promote(DType::BF16), DType::F32);
/// assert_eq!(DType::F32.size_in_bytes(), 4);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum DType {
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    BF16,
    /// 64-bit signed integer (indices).
    I64,
    /// 32-bit signed integer.
    I32,
    /// 8-bit unsigned integer.
    U8,
    /// Boolean, stored as one byte holding 0 or 1.
    Bool,
}

impl DType {
    /// Bytes per element.
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::U8 | DType::Bool => 1,
        }
    }

    /// Whether the dtype is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
    }

    /// Whether the dtype is an integer type (bool excluded).
    pub fn is_int(self) -> bool {
        matches!(self, DType::I64 | DType::I32 | DType::U8)
    }

    /// The lower-case name (`"f32"`).
    pub fn as_str(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I64 => "i64",
            DType::I32 => "i32",
            DType::U8 => "u8",
            DType::Bool => "bool",
        }
    }

    fn rank(self) -> u8 {
        match self {
            DType::Bool => 0,
            DType::U8 => 1,
            DType::I32 => 2,
            DType::I64 => 3,
            DType::F16 | DType::BF16 => 4,
            DType::F32 => 5,
            DType::F64 => 6,
        }
    }

    /// The type two operands of these dtypes compute in (see the type's docs).
    pub fn promote(self, other: DType) -> DType {
        if self == other {
            return self;
        }
        if matches!(
            (self, other),
            (DType::F16, DType::BF16) | (DType::BF16, DType::F16)
        ) {
            return DType::F32;
        }
        if self.rank() >= other.rank() {
            self
        } else {
            other
        }
    }

    /// The type a binary op on a tensor of `self` and one of `other` computes in, as PyTorch's
    /// `result_type`: a 0-d operand (`self_0d`, `other_0d`) beside a dimensioned one raises
    /// the result only to a higher category (bool, integer, float), never within one. Between
    /// operands of equal standing, [`promote`](Self::promote).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::DType::*;
    /// assert_eq!(I32.result_type(false, I64, true), I32); // [1, 2] (i32) + tensor(5)
    /// assert_eq!(F16.result_type(false, F32, true), F16);
    /// assert_eq!(I32.result_type(false, F64, true), F64); // a higher category
    /// assert_eq!(Bool.result_type(false, I64, true), I64);
    /// assert_eq!(I64.result_type(true, I32, true), I64); // both 0-d: promote
    /// ```
    pub fn result_type(self, self_0d: bool, other: DType, other_0d: bool) -> DType {
        if self_0d == other_0d {
            return self.promote(other);
        }
        let (dim, zero) = if self_0d {
            (other, self)
        } else {
            (self, other)
        };
        if dim.is_float() {
            dim
        } else if dim == DType::Bool || zero.is_float() {
            dim.promote(zero)
        } else {
            dim
        }
    }

    /// The dtype transcendental ops compute in: the dtype itself if float, else `f32`.
    pub fn to_float(self) -> DType {
        if self.is_float() { self } else { DType::F32 }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Keeps [`Elem`] to the types of this module: kernels reinterpret storage bytes as `T`, which
/// is sound only for the types whose layouts this crate knows.
mod sealed {
    pub trait Sealed {}
}

/// A Rust type that can be a tensor element: `f32`, `f64`, `f16`, `bf16`, `i64`, `i32`, `u8`,
/// `bool`, and [`Bool8`] (the storage type of `bool` tensors, which kernels use).
///
/// Conversions go through `f64` (exact for every integer a tensor index needs and for every
/// float narrower than `f64`). The trait is sealed: a dtype is a closed set.
///
/// # Examples
///
/// ```
/// use eddy_ops::{DType, Elem};
/// assert_eq!(<bool as Elem>::DTYPE, DType::Bool);
/// assert!(bool::from_f64(2.0) && !bool::from_f64(0.0));
/// assert_eq!(i64::from_f64(-3.7), -3);
/// ```
pub trait Elem:
    Copy + Send + Sync + PartialOrd + std::fmt::Debug + 'static + sealed::Sealed
{
    /// The matching dtype.
    const DTYPE: DType;
    /// Zero.
    const ZERO: Self;
    /// Whether every bit pattern of `Self` is a valid value, so storage bytes may be read as
    /// `Self` in place. False only for `bool`: its tensors store [`Bool8`] bytes, which host
    /// reads and writes convert (a byte other than 0 or 1 read as `bool` would be undefined
    /// behaviour).
    const ANY_BITS: bool = true;
    /// Converts to `f64`.
    fn to_f64(self) -> f64;
    /// Converts from `f64` (saturating and truncating toward zero for integers, as `as` does).
    fn from_f64(v: f64) -> Self;
    /// `self + v` rounded once to `Self`: integers wrap, booleans or. The default goes through
    /// `f64`, exact for `f16`/`bf16` (and so rounded once).
    #[inline(always)]
    fn acc_add(self, v: Self) -> Self {
        Self::from_f64(self.to_f64() + v.to_f64())
    }
    /// The value of an integer or boolean as an `i64`, exactly (floats: truncated, saturating;
    /// [`cast`] converts floats to integers as PyTorch does).
    #[inline(always)]
    fn int_value(self) -> i64 {
        self.to_f64() as i64
    }
    /// The integer `v` in `Self`: modulo 2^bits for the integer types, as PyTorch's casts
    /// between integers; the nearest value for floats; `v != 0` for booleans.
    #[inline(always)]
    fn from_int_wrapping(v: i64) -> Self {
        Self::from_f64(v as f64)
    }
}

/// Converts `v` to `D` as PyTorch's casts do (`tensor.to(dtype)`, type promotion):
///
/// - between integers and from booleans: modulo 2^bits (`300 → 44` in `u8`, `-1 → 255`);
/// - floats to `i32` and `i64`: truncated toward zero, and the smallest value for NaN and out of
///   range (what x86's conversion instructions give, which PyTorch's CPU casts compile to);
///   floats to `u8` through `i64`, then modulo 2^8 (`-1.5 → 255`), as PyTorch does;
/// - to floats: rounded once to the nearest; to `bool`: whether it is nonzero (NaN is).
///
/// # Examples
///
/// ```
/// use eddy_ops::cast;
/// assert_eq!(cast::<i64, u8>(300), 44);
/// assert_eq!(cast::<i64, u8>(-1), 255);
/// assert_eq!(cast::<i64, i32>(3_000_000_000), -1_294_967_296);
/// assert_eq!(cast::<f32, u8>(-1.5), 255);
/// assert_eq!(cast::<f32, i32>(3e9), i32::MIN);
/// assert_eq!(cast::<f64, i64>(f64::NAN), i64::MIN);
/// assert_eq!(cast::<i64, f32>((1 << 53) + 1), 9007199254740992.0);
/// assert!(cast::<f32, bool>(f32::NAN));
/// ```
#[inline(always)]
pub fn cast<S: Elem, D: Elem>(v: S) -> D {
    if S::DTYPE.is_float() {
        let f = v.to_f64(); // exact for every float type
        match D::DTYPE {
            DType::I32 => D::from_int_wrapping(i64::from(trunc_i32(f))),
            DType::I64 | DType::U8 => D::from_int_wrapping(trunc_i64(f)),
            _ => D::from_f64(f),
        }
    } else {
        D::from_int_wrapping(v.int_value())
    }
}

/// `f` truncated toward zero into an `i32`, or `i32::MIN` for NaN and out of range.
#[inline(always)]
fn trunc_i32(f: f64) -> i32 {
    if f > -2_147_483_649.0 && f < 2_147_483_648.0 {
        f as i32
    } else {
        i32::MIN
    }
}

/// `f` truncated toward zero into an `i64`, or `i64::MIN` for NaN and out of range.
#[inline(always)]
fn trunc_i64(f: f64) -> i64 {
    if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&f) {
        f as i64
    } else {
        i64::MIN
    }
}

macro_rules! elem_prim {
    ($t:ty, $d:expr, $add:path, int) => {
        elem_prim!($t, $d, $add, {
            #[inline(always)]
            fn int_value(self) -> i64 {
                self as i64
            }
            #[inline(always)]
            fn from_int_wrapping(v: i64) -> Self {
                v as $t
            }
        });
    };
    ($t:ty, $d:expr, $add:path, float) => {
        elem_prim!($t, $d, $add, {
            #[inline(always)]
            fn from_int_wrapping(v: i64) -> Self {
                v as $t
            }
        });
    };
    ($t:ty, $d:expr, $add:path, { $($extra:tt)* }) => {
        impl sealed::Sealed for $t {}
        impl Elem for $t {
            const DTYPE: DType = $d;
            const ZERO: Self = 0 as $t;
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn acc_add(self, v: Self) -> Self {
                $add(self, v)
            }
            $($extra)*
        }
    };
}
elem_prim!(f32, DType::F32, std::ops::Add::add, float);
elem_prim!(f64, DType::F64, std::ops::Add::add, float);
elem_prim!(i64, DType::I64, i64::wrapping_add, int);
elem_prim!(i32, DType::I32, i32::wrapping_add, int);
elem_prim!(u8, DType::U8, u8::wrapping_add, int);

impl sealed::Sealed for f16 {}
impl Elem for f16 {
    const DTYPE: DType = DType::F16;
    const ZERO: Self = f16::ZERO;
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        f16::from_f64(v)
    }
    #[inline(always)]
    fn from_int_wrapping(v: i64) -> Self {
        f16::from_f32(v as f32) // through `f32`, as PyTorch's conversion
    }
}

impl sealed::Sealed for bf16 {}
impl Elem for bf16 {
    const DTYPE: DType = DType::BF16;
    const ZERO: Self = bf16::ZERO;
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        bf16::from_f64(v)
    }
    #[inline(always)]
    fn from_int_wrapping(v: i64) -> Self {
        bf16::from_f32(v as f32) // through `f32`, as PyTorch's conversion
    }
}

/// Booleans are stored as `u8` 0/1; this wrapper gives them their own [`Elem`] impl.
#[derive(Clone, Copy, PartialEq, PartialOrd, Debug, Default)]
#[repr(transparent)]
pub struct Bool8(pub u8);

impl sealed::Sealed for Bool8 {}
impl Elem for Bool8 {
    const DTYPE: DType = DType::Bool;
    const ZERO: Self = Bool8(0);
    #[inline(always)]
    fn to_f64(self) -> f64 {
        (self.0 != 0) as u8 as f64
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        Bool8((v != 0.0) as u8)
    }
    #[inline(always)]
    fn int_value(self) -> i64 {
        (self.0 != 0) as i64
    }
    #[inline(always)]
    fn from_int_wrapping(v: i64) -> Self {
        Bool8((v != 0) as u8)
    }
    #[inline(always)]
    fn acc_add(self, v: Self) -> Self {
        Bool8(((self.0 | v.0) != 0) as u8)
    }
}

/// `bool` at the host boundary (`from_vec`, `to_vec`, `item`): stored as [`Bool8`] 0/1 bytes,
/// converted on the way in and out, never read in place.
impl sealed::Sealed for bool {}
impl Elem for bool {
    const DTYPE: DType = DType::Bool;
    const ZERO: Self = false;
    const ANY_BITS: bool = false;
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    #[inline(always)]
    fn int_value(self) -> i64 {
        self as i64
    }
    #[inline(always)]
    fn from_int_wrapping(v: i64) -> Self {
        v != 0
    }
    #[inline(always)]
    fn acc_add(self, v: Self) -> Self {
        self | v
    }
}

/// Runs `$body` with the type alias `$T` bound to the Rust type of `$dtype`.
///
/// # Examples
///
/// ```
/// use eddy_ops::{dispatch, DType, Elem};
/// let size = dispatch!(DType::F16, T => std::mem::size_of::<T>());
/// assert_eq!(size, 2);
/// ```
#[macro_export]
macro_rules! dispatch {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            $crate::DType::F32 => {
                type $T = f32;
                $body
            }
            $crate::DType::F64 => {
                type $T = f64;
                $body
            }
            $crate::DType::F16 => {
                type $T = $crate::half::f16;
                $body
            }
            $crate::DType::BF16 => {
                type $T = $crate::half::bf16;
                $body
            }
            $crate::DType::I64 => {
                type $T = i64;
                $body
            }
            $crate::DType::I32 => {
                type $T = i32;
                $body
            }
            $crate::DType::U8 => {
                type $T = u8;
                $body
            }
            $crate::DType::Bool => {
                type $T = $crate::Bool8;
                $body
            }
        }
    };
}
