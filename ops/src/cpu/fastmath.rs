//! Branch-free `f32` versions of `exp`, `ln`, `tanh` and `erf` that the compiler vectorises (the
//! standard library's call into libm one element at a time), and the [`Transcendental`] trait
//! that picks them for `f32` arithmetic and the exact libm functions for `f64`.
//!
//! Accuracy, checked against `f64` in the tests below over a dense sweep: `exp` within 2 ulp
//! over its whole finite range (subnormal results within 2 ulp of `f32::MIN_POSITIVE`'s
//! spacing), `ln` within 2 ulp over every positive `f32` (subnormals too), `tanh` within 2e-7
//! absolute and 4 ulp relative, `erf` within 3e-7 absolute.

// The polynomial coefficients keep the decimal digits they were fitted with; the compiler rounds
// each to the nearest `f32`, which is the value the accuracy above was measured with.
#![allow(clippy::excessive_precision)]

/// The transcendental functions elementwise kernels use, per compute type.
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::fastmath::Transcendental;
/// fn sigmoid<T: Transcendental + num_traits::Float>(x: T) -> T {
///     T::one() / (T::one() + (-x).exp_())
/// }
/// assert_eq!(sigmoid(0.0f32), 0.5);
/// assert_eq!(sigmoid(0.0f64), 0.5);
/// ```
pub trait Transcendental: Copy {
    /// `e^x`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::cpu::fastmath::Transcendental;
    /// assert_eq!(0.0f32.exp_(), 1.0);
    /// assert_eq!(1.0f64.exp_(), std::f64::consts::E); // f64: the standard library's `exp`
    /// ```
    fn exp_(self) -> Self;
    /// `tanh x`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::cpu::fastmath::Transcendental;
    /// assert_eq!(f32::INFINITY.tanh_(), 1.0);
    /// assert_eq!(0.5f64.tanh_(), 0.5f64.tanh());
    /// ```
    fn tanh_(self) -> Self;
    /// The error function.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::cpu::fastmath::Transcendental;
    /// assert_eq!(0.0f32.erf_(), 0.0);
    /// assert!((1.0f64.erf_() - 0.842_700_792_949_715).abs() < 1e-15);
    /// ```
    fn erf_(self) -> Self;
    /// The natural logarithm.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::cpu::fastmath::Transcendental;
    /// assert_eq!(1.0f32.ln_(), 0.0);
    /// assert_eq!(2.0f64.ln_(), std::f64::consts::LN_2);
    /// ```
    fn ln_(self) -> Self;
}

impl Transcendental for f64 {
    #[inline(always)]
    fn exp_(self) -> f64 {
        self.exp()
    }
    #[inline(always)]
    fn tanh_(self) -> f64 {
        self.tanh()
    }
    #[inline(always)]
    fn erf_(self) -> f64 {
        libm::erf(self)
    }
    #[inline(always)]
    fn ln_(self) -> f64 {
        self.ln()
    }
}

impl Transcendental for f32 {
    #[inline(always)]
    fn exp_(self) -> f32 {
        exp_f32(self)
    }
    #[inline(always)]
    fn tanh_(self) -> f32 {
        tanh_f32(self)
    }
    #[inline(always)]
    fn erf_(self) -> f32 {
        erf_f32(self)
    }
    #[inline(always)]
    fn ln_(self) -> f32 {
        ln_f32(self)
    }
}

/// `e^x`: `x = n·ln 2 + r` with `|r| ≤ ln 2 / 2`, a degree-6 polynomial for `e^r` (Cephes'
/// coefficients), and `2^n` applied as two powers of two built in the exponent bits, so that
/// `n` may run from -150 to 128: results near `f32::MAX` are finite and those below
/// `f32::MIN_POSITIVE` are subnormal, each rounded once. No branches, no calls.
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::fastmath::exp_f32;
/// let e = std::f32::consts::E;
/// assert!((exp_f32(1.0) - e).abs() <= 2.0 * f32::EPSILON * e);
/// assert!((exp_f32(88.7) as f64 / (88.7f32 as f64).exp() - 1.0).abs() < 1e-6); // near f32::MAX
/// assert_eq!(exp_f32(89.0), f32::INFINITY);
/// assert!((exp_f32(-100.0) / 3.7200760e-44 - 1.0).abs() < 0.05); // subnormal
/// assert_eq!(exp_f32(-110.0), 0.0);
/// ```
#[inline(always)]
pub fn exp_f32(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // 1.5·2^23: adding it rounds to an integer held in the low mantissa bits.
    const MAGIC: f32 = 12_582_912.0;
    // e^-104 < 2^-150 rounds to 0; e^88.8 > f32::MAX overflows in the last product.
    let xc = x.clamp(-104.0, 88.8);
    let t = xc * LOG2E + MAGIC;
    let n = t - MAGIC;
    let ni = (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    let r = xc - n * LN2_HI - n * LN2_LO;
    let p = 1.987_569_1e-4_f32;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 5.000_000_1e-1;
    let er = p * r * r + r + 1.0;
    // 2^n = 2^n1 · 2^n2 with both halves normal (n1, n2 in [-75, 64]): `er · 2^n1` is exact,
    // and the second product rounds once, to infinity or a subnormal where it must.
    let n1 = ni >> 1;
    let s1 = f32::from_bits((n1.wrapping_add(127) as u32) << 23);
    let s2 = f32::from_bits((ni.wrapping_sub(n1).wrapping_add(127) as u32) << 23);
    let y = er * s1 * s2;
    // Out of range: overflow to infinity, underflow to zero; NaN stays NaN (clamp keeps it).
    let y = if x > 88.8 { f32::INFINITY } else { y };
    if x < -104.0 { 0.0 } else { y }
}

/// `tanh x`: an odd polynomial below 0.625 (Cephes), `1 - 2/(e^{2|x|} + 1)` above.
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::fastmath::tanh_f32;
/// assert!((tanh_f32(0.3) - 0.3f32.tanh()).abs() <= 2e-7);
/// assert!((tanh_f32(-2.0) - (-2.0f32).tanh()).abs() <= 2e-7);
/// assert_eq!(tanh_f32(f32::NEG_INFINITY), -1.0);
/// assert!(tanh_f32(-0.0).is_sign_negative()); // odd, as std's
/// ```
#[inline(always)]
pub fn tanh_f32(x: f32) -> f32 {
    let a = x.abs();
    let z = x * x;
    let small =
        ((((-5.704_988_7e-3 * z + 2.063_908_9e-2) * z - 5.373_971_6e-2) * z + 1.333_144_2e-1) * z
            - 3.333_328_2e-1)
            * z
            * x
            + x;
    let big = 1.0 - 2.0 / (exp_f32(2.0 * a) + 1.0);
    let big = if x < 0.0 { -big } else { big };
    if a < 0.625 {
        // The sign of x, for -0.0: `p·z·x + x` is +0.0 there.
        small.copysign(x)
    } else if a.is_nan() {
        x
    } else {
        big
    }
}

/// `erf x`: `x · P(x²) / Q(x²)` with `P` of degree 6 and `Q` of degree 4, fitted to `erf`
/// on `[0, 3.9375]` (past it `erf` rounds to ±1 in `f32`, and `x` is clamped there). One
/// division, no exponential, no branch: about half the work of a series beside an
/// exponential form. Within 3e-7 of `erf`, odd (the sign of zero kept), never past ±1.
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::fastmath::erf_f32;
/// assert!((erf_f32(0.5) - 0.520_499_9).abs() <= 3e-7);
/// assert!((erf_f32(-2.0) + 0.995_322_3).abs() <= 3e-7);
/// assert_eq!(erf_f32(f32::INFINITY), 1.0);
/// ```
#[inline(always)]
pub fn erf_f32(x: f32) -> f32 {
    let x = x.clamp(-3.9375, 3.9375);
    let z = x * x;
    let p = 1.969_247_3e-8_f32;
    let p = p * z + -1.987_865_1e-6;
    let p = p * z + 1.501_253_9e-4;
    let p = p * z + 4.039_631_2e-3;
    let p = p * z + 5.162_13e-2;
    let p = p * z + 2.078_142_9e-1;
    let p = p * z + 1.128_378_7;
    let q = 1.038_746_8e-3_f32;
    let q = q * z + 1.503_079_5e-2;
    let q = q * z + 1.182_655_5e-1;
    let q = q * z + 5.174_993_3e-1;
    let q = q * z + 1.0;
    // The fit overshoots 1 by an ulp near the clamp; NaN passes through both clamps.
    (x * p / q).clamp(-1.0, 1.0)
}

/// `ln x`: `x = m · 2^e` with `m` in `[√½, √2)`, `ln m = ln(1 + f)` as `f - f²/2 + f³·P(f)`
/// with Cephes' degree-8 `P`, and `e · ln 2` added in two parts. Subnormals are scaled by
/// `2^23` first; `ln 0 = -∞`, a negative or NaN `x` gives NaN, `ln ∞ = ∞`. No branches, no
/// calls.
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::fastmath::ln_f32;
/// assert_eq!(ln_f32(1.0), 0.0);
/// assert!((ln_f32(10.0) - 10f32.ln()).abs() <= f32::EPSILON * 2.31);
/// assert_eq!(ln_f32(0.0), f32::NEG_INFINITY);
/// assert!(ln_f32(-1.0).is_nan());
/// ```
#[inline(always)]
pub fn ln_f32(x: f32) -> f32 {
    const SQRT_HALF: f32 = std::f32::consts::FRAC_1_SQRT_2;
    let sub = x < f32::MIN_POSITIVE;
    let xs = if sub { x * 8_388_608.0 } else { x }; // 2^23
    let bits = xs.to_bits();
    // `xs = m · 2^e` with `m` in [0.5, 1).
    let e = ((bits >> 23) & 0xff) as i32 - 126 - if sub { 23 } else { 0 };
    let m = f32::from_bits((bits & 0x007f_ffff) | 0x3f00_0000);
    let low = m < SQRT_HALF;
    let e = (e - low as i32) as f32;
    let f = if low { m + m - 1.0 } else { m - 1.0 };
    let z = f * f;
    let p = 7.037_683_629_2e-2_f32;
    let p = p * f - 1.151_461_031_0e-1;
    let p = p * f + 1.167_699_874_0e-1;
    let p = p * f - 1.242_014_084_6e-1;
    let p = p * f + 1.424_932_278_7e-1;
    let p = p * f - 1.666_805_766_5e-1;
    let p = p * f + 2.000_071_476_5e-1;
    let p = p * f - 2.499_999_399_3e-1;
    let p = p * f + 3.333_333_117_4e-1;
    let y = f * z * p + e * -2.121_944_4e-4 - 0.5 * z;
    let r = f + y + e * 0.693_359_375;
    // Out of the formula's domain: zero, negatives and NaN, infinity.
    let r = if x == 0.0 { f32::NEG_INFINITY } else { r };
    let r = if x < 0.0 || x.is_nan() { f32::NAN } else { r };
    if x == f32::INFINITY { x } else { r }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep() -> impl Iterator<Item = f32> {
        (-200_000..=200_000).map(|i| i as f32 * 1e-3)
    }

    #[test]
    fn exp_is_within_2_ulp() {
        // Up to the last x whose e^x is finite in f32 (88.72283), and down past the
        // subnormals; the spacing of subnormals is 2^-149.
        let top = (f32::MAX as f64).ln() as f32;
        let edges = (0..2000).map(|i| top - i as f32 * 1e-5);
        for x in sweep().filter(|x| *x > -110.0 && *x < top).chain(edges) {
            let want = (x as f64).exp();
            let got = exp_f32(x) as f64;
            let ulp = (want as f32).abs() as f64 * f32::EPSILON as f64;
            assert!(
                (got - want).abs() <= 2.0 * ulp.max(2f64.powi(-149)),
                "exp({x}) = {got}, want {want}"
            );
        }
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(exp_f32(88.73), f32::INFINITY);
        assert_eq!(exp_f32(100.0), f32::INFINITY);
        assert_eq!(exp_f32(f32::INFINITY), f32::INFINITY);
        assert!(exp_f32(-103.0) > 0.0);
        assert_eq!(exp_f32(-104.5), 0.0);
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert!(exp_f32(f32::NAN).is_nan());
    }

    #[test]
    fn ln_is_within_2_ulp() {
        // Every 97th positive f32, from the smallest subnormal to the largest finite.
        for b in (1..0x7f80_0000u32)
            .step_by(97)
            .chain([1, 0x7f7f_ffff, 0x3f80_0000])
        {
            let x = f32::from_bits(b);
            let want = (x as f64).ln();
            let got = ln_f32(x) as f64;
            let ulp = ((want as f32).abs() as f64 * f32::EPSILON as f64).max(2f64.powi(-149));
            assert!(
                (got - want).abs() <= 2.0 * ulp,
                "ln({x:e}) = {got}, want {want}"
            );
        }
        assert_eq!(ln_f32(1.0), 0.0);
        assert_eq!(ln_f32(0.0), f32::NEG_INFINITY);
        assert_eq!(ln_f32(-0.0), f32::NEG_INFINITY);
        assert_eq!(ln_f32(f32::INFINITY), f32::INFINITY);
        assert!(ln_f32(-1e-30).is_nan() && ln_f32(f32::NEG_INFINITY).is_nan());
        assert!(ln_f32(f32::NAN).is_nan());
    }

    #[test]
    fn tanh_and_erf_are_close_to_f64() {
        for x in sweep().chain([1e-6, -1e-6, 1e-20, 0.0]) {
            let (want, got) = ((x as f64).tanh(), tanh_f32(x) as f64);
            let err = (got - want).abs();
            assert!(
                err <= 2e-7 && err <= 4.0 * f32::EPSILON as f64 * want.abs() + 1e-30,
                "tanh({x}) = {got}, want {want}"
            );
            let (want, got) = (libm::erf(x as f64), erf_f32(x) as f64);
            assert!((got - want).abs() <= 3e-7, "erf({x}) = {got}, want {want}");
            assert!(got.abs() <= 1.0, "erf({x}) = {got} is past ±1");
        }
        assert_eq!(tanh_f32(f32::INFINITY), 1.0);
        assert_eq!(tanh_f32(f32::NEG_INFINITY), -1.0);
        // Odd functions keep the sign of zero, as std's and PyTorch's do.
        assert!(tanh_f32(-0.0).is_sign_negative() && erf_f32(-0.0).is_sign_negative());
        assert!(tanh_f32(0.0).is_sign_positive() && erf_f32(0.0).is_sign_positive());
        assert!(tanh_f32(f32::NAN).is_nan() && erf_f32(f32::NAN).is_nan());
        assert_eq!(erf_f32(f32::INFINITY), 1.0);
        assert_eq!(erf_f32(f32::NEG_INFINITY), -1.0);
    }
}
