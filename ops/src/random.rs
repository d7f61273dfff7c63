//! The counter-based random generator: every value is a pure function of (seed, counter), so
//! a tensor's random values depend only on the seed and the order of the draws, on any device.

use crate::DType;

/// The distribution of [`copy::random`](crate::copy::random).
///
/// # Examples
///
/// ```
/// use eddy_ops::random::{random_value, Distribution};
/// let d = Distribution::Uniform { lo: -1.0, hi: 1.0 };
/// assert!((0..100).all(|i| (-1.0..1.0).contains(&random_value(d, 42, 0, i, 53))));
/// let constant = Distribution::Normal { mean: 3.0, std: 0.0 };
/// assert_eq!(random_value(constant, 42, 0, 7, 53), 3.0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Distribution {
    /// Uniform on `[lo, hi)`.
    Uniform {
        /// The lower bound, included.
        lo: f64,
        /// The upper bound, excluded.
        hi: f64,
    },
    /// Normal with this mean and standard deviation.
    Normal {
        /// The mean.
        mean: f64,
        /// The standard deviation.
        std: f64,
    },
}

/// SplitMix64: a counter-based hash, so element `i` of a random tensor depends only on the seed
/// and `i`, not on how the work is split across threads.
///
/// # Examples
///
/// ```
/// use eddy_ops::random::splitmix64;
/// assert_eq!(splitmix64(0), 0xE220_A839_7B1D_CDAF); // the reference generator's first output
/// assert_ne!(splitmix64(1), splitmix64(2));
/// ```
#[inline(always)]
pub fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A uniform `f64` in `[0, 1)` for counter `c` of stream `seed`.
///
/// # Examples
///
/// ```
/// use eddy_ops::random::uniform01;
/// let u = uniform01(7, 3);
/// assert!((0.0..1.0).contains(&u));
/// assert_eq!(u, uniform01(7, 3)); // a pure function of (seed, counter)
/// assert_ne!(u, uniform01(8, 3));
/// ```
#[inline(always)]
pub fn uniform01(seed: u64, c: u64) -> f64 {
    uniform01_digits(seed, c, 53)
}

/// A uniform value in `[0, 1)` with `digits` significant bits (1..=53), a multiple of
/// `2^-digits`: exact in a float type with that many digits, so it never rounds up to 1 there
/// (PyTorch draws `rand` the same way).
///
/// # Examples
///
/// ```
/// use eddy_ops::random::uniform01_digits;
/// let u = uniform01_digits(7, 3, 11); // f16's 11 digits
/// assert!((0.0..1.0).contains(&u));
/// assert_eq!(u * 2048.0, (u * 2048.0).trunc());
/// assert_eq!(half::f16::from_f64(u).to_f64(), u);
/// ```
#[inline(always)]
pub fn uniform01_digits(seed: u64, c: u64, digits: u32) -> f64 {
    debug_assert!((1..=53).contains(&digits));
    // 2^-digits, built in the exponent bits.
    let scale = f64::from_bits((1023 - digits as u64) << 52);
    (splitmix64(seed ^ splitmix64(c)) >> (64 - digits)) as f64 * scale
}

/// The significant bits of a float dtype (`f16` 11, `bf16` 8, `f32` 24, `f64` 53); 53 for
/// the others.
///
/// # Examples
///
/// ```
/// use eddy_ops::random::mantissa_digits;
/// use eddy_ops::DType;
/// assert_eq!(mantissa_digits(DType::BF16), 8);
/// assert_eq!(mantissa_digits(DType::F32), f32::MANTISSA_DIGITS);
/// ```
pub fn mantissa_digits(dtype: DType) -> u32 {
    match dtype {
        DType::F16 => 11,
        DType::BF16 => 8,
        DType::F32 => f32::MANTISSA_DIGITS,
        _ => f64::MANTISSA_DIGITS,
    }
}

/// The counters a random tensor of `numel` elements takes from its stream: one per element
/// for a uniform draw, two for a normal one (Box–Muller), so that consecutive tensors never
/// share a counter.
///
/// # Examples
///
/// ```
/// use eddy_ops::random::{counters_for, Distribution};
/// assert_eq!(counters_for(Distribution::Uniform { lo: 0.0, hi: 1.0 }, 5), 5);
/// assert_eq!(counters_for(Distribution::Normal { mean: 0.0, std: 1.0 }, 5), 10);
/// ```
pub fn counters_for(dist: Distribution, numel: u64) -> u64 {
    match dist {
        Distribution::Uniform { .. } => numel,
        Distribution::Normal { .. } => numel.wrapping_mul(2),
    }
}

/// Element `i` of a random tensor drawn with `seed` starting at counter `offset`, with
/// `digits` significant bits in a uniform draw ([`mantissa_digits`] of the dtype). A uniform
/// element uses counter `offset + i`, a normal one counters `offset + 2i` and `offset + 2i + 1`
/// ([`counters_for`]).
///
/// # Examples
///
/// ```
/// use eddy_ops::random::{random_value, Distribution};
/// let d = Distribution::Normal { mean: 0.0, std: 1.0 };
/// // Element 5 from counter 0 is element 0 from counter 10: draws continue across calls.
/// assert_eq!(random_value(d, 1, 0, 5, 53), random_value(d, 1, 10, 0, 53));
/// assert_ne!(random_value(d, 1, 0, 5, 53), random_value(d, 2, 0, 5, 53));
/// let u = Distribution::Uniform { lo: 0.0, hi: 1.0 };
/// assert_eq!(random_value(u, 1, 0, 5, 24), random_value(u, 1, 5, 0, 24));
/// ```
#[inline(always)]
pub fn random_value(dist: Distribution, seed: u64, offset: u64, i: usize, digits: u32) -> f64 {
    match dist {
        Distribution::Uniform { lo, hi } => {
            let c = offset.wrapping_add(i as u64);
            lo + (hi - lo) * uniform01_digits(seed, c, digits)
        }
        Distribution::Normal { mean, std } => {
            // Box–Muller on the element's two counters.
            let c = offset.wrapping_add(2 * i as u64);
            let u1 = 1.0 - uniform01(seed, c);
            let u2 = uniform01(seed, c.wrapping_add(1));
            mean + std * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
        }
    }
}
