//! Creation ops: constants, ranges, identity, seeded random, and host data.

use crate::engine::current;
use crate::{DType, Elem, Error, Result, Shape, Tensor};
use eddy_ops::Layout;
use eddy_ops::copy;
use eddy_ops::random::{Distribution, counters_for};
use parking_lot::Mutex;

/// The global generator: a seed and a counter. Each random tensor takes `numel` counters (×2
/// for normal, [`counters_for`]), so values depend only on the seed and the order of
/// calls, never on threads, and consecutive tensors share none.
#[allow(clippy::unusual_byte_groupings)] // the groups spell "seed of Eddy"
static GENERATOR: Mutex<(u64, u64)> = Mutex::new((0x5EED_0F_EDD7, 0));

/// Seeds the global generator (PyTorch's `manual_seed`): the random tensors that follow are
/// the same for the same seed.
///
/// # Examples
///
/// ```
/// use eddy_tensor::{manual_seed, Tensor, DType};
/// manual_seed(7);
/// let a = Tensor::rand([4], DType::F32)?.to_vec::<f32>()?;
/// manual_seed(7);
/// assert_eq!(Tensor::rand([4], DType::F32)?.to_vec::<f32>()?, a);
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
pub fn manual_seed(seed: u64) {
    *GENERATOR.lock() = (seed, 0);
}

/// The generator's seed and the first of `n` counters, which the caller now owns.
pub(crate) fn take_counters(n: u64) -> (u64, u64) {
    let mut g = GENERATOR.lock();
    let r = *g;
    g.1 = g.1.wrapping_add(n);
    r
}

/// `value` as `op` (`full`, `full_like`, `fill_`) stores it in `dtype`, checked as PyTorch's
/// conversion of a fill value: a finite value past a float dtype's largest finite one, a value
/// outside an integer dtype's range, or NaN into an integer dtype is an error, not saturated.
/// Infinities and NaN fill float dtypes; an integer dtype truncates a fraction toward zero;
/// `Bool` takes any value (nonzero is true). As PyTorch does for an integer fill value, a
/// whole negative value down to `-255` wraps into `U8` (`-1` fills 255).
#[track_caller]
pub(crate) fn checked_fill_value(op: &'static str, value: f64, dtype: DType) -> Result<f64> {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    let (lo, hi) = match dtype {
        DType::F64 | DType::Bool => return Ok(value),
        DType::F32 => (f32::MIN as f64, f32::MAX as f64),
        DType::F16 => (half::f16::MIN.to_f64(), half::f16::MAX.to_f64()),
        DType::BF16 => (half::bf16::MIN.to_f64(), half::bf16::MAX.to_f64()),
        DType::I32 => (i32::MIN as f64, i32::MAX as f64),
        DType::U8 if value.fract() == 0.0 && (-255.0..0.0).contains(&value) => {
            return Ok(256.0 + value);
        }
        DType::U8 => (0.0, 255.0),
        // 2^63 - 1 is not an f64: the range ends below 2^63.
        DType::I64 => (-TWO_63, TWO_63.next_down()),
    };
    // The value itself is checked, before truncation, as PyTorch does: 255.5 does not fit `U8`.
    let fits = if dtype.is_float() {
        !value.is_finite() || (lo..=hi).contains(&value)
    } else {
        (lo..=hi).contains(&value) // false for NaN
    };
    if fits {
        Ok(value)
    } else {
        Err(Error::invalid(
            op,
            format!("value {value} cannot be converted to {dtype} without overflow"),
        ))
    }
}

impl Tensor {
    /// A tensor of `shape` filled with `value` (converted to `dtype` as PyTorch's `full`: see
    /// the errors).
    ///
    /// # Errors
    ///
    /// `ShapeOverflow` for shapes whose byte size overflows; `InvalidArgument` for a value
    /// `dtype` cannot hold: a finite value past a float dtype's largest, a value outside an
    /// integer dtype's range, NaN into an integer dtype. (Infinities and NaN fill float dtypes;
    /// an integer dtype truncates toward zero; a whole negative value down to -255 wraps into
    /// `U8`, as PyTorch's integer fill values do.)
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// assert_eq!(Tensor::full([2], 1.5, DType::F32)?.to_vec::<f32>()?, vec![1.5, 1.5]);
    /// assert_eq!(Tensor::full([1], -1.0, DType::U8)?.to_vec::<u8>()?, [255]);
    /// assert!(Tensor::full([1], 300.0, DType::U8).is_err());
    /// assert!(Tensor::full([1], 1e6, DType::F16).is_err());
    /// assert!(Tensor::full([1], f64::INFINITY, DType::F16).is_ok());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn full(shape: impl Into<Shape>, value: f64, dtype: DType) -> Result<Tensor> {
        let value = checked_fill_value("full", value, dtype)?;
        let t = Tensor::empty_on(current("full")?, shape.into(), dtype)?;
        let k = kernel!(
            "fill",
            t.device(),
            copy::fill(t.device(), dtype, t.layout().clone(), value)
        );
        Tensor::launch(k, &[], &[&t])?;
        Ok(t)
    }
    /// Zeros.
    ///
    /// # Errors
    ///
    /// As [`full`](Self::full).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let z = Tensor::zeros([2, 3], DType::I64)?;
    /// assert_eq!((z.dims(), z.dtype()), (&[2, 3][..], DType::I64));
    /// assert_eq!(z.to_vec::<i64>()?, [0; 6]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn zeros(shape: impl Into<Shape>, dtype: DType) -> Result<Tensor> {
        Tensor::full(shape, 0.0, dtype)
    }
    /// Ones.
    ///
    /// # Errors
    ///
    /// As [`full`](Self::full).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// assert_eq!(Tensor::ones([3], DType::F32)?.to_vec::<f32>()?, [1.; 3]);
    /// assert_eq!(Tensor::ones([2], DType::Bool)?.to_vec::<bool>()?, [true, true]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn ones(shape: impl Into<Shape>, dtype: DType) -> Result<Tensor> {
        Tensor::full(shape, 1.0, dtype)
    }
    /// Zeros of `self`'s shape and dtype, on its engine.
    ///
    /// # Errors
    ///
    /// As [`full`](Self::full).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![5i32, 6], [2])?;
    /// assert_eq!(t.zeros_like()?.to_vec::<i32>()?, [0, 0]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn zeros_like(&self) -> Result<Tensor> {
        self.full_like(0.0)
    }
    /// Ones of `self`'s shape and dtype, on its engine.
    ///
    /// # Errors
    ///
    /// As [`full`](Self::full).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![5f64, 6.], [2, 1])?;
    /// let o = t.ones_like()?;
    /// assert_eq!((o.dims(), o.to_vec::<f64>()?), (&[2, 1][..], vec![1., 1.]));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn ones_like(&self) -> Result<Tensor> {
        self.full_like(1.0)
    }
    /// `value` everywhere, of `self`'s shape and dtype, on its engine.
    ///
    /// # Errors
    ///
    /// As [`full`](Self::full).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![0f32; 3], [3])?;
    /// assert_eq!(t.full_like(-2.5)?.to_vec::<f32>()?, [-2.5; 3]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn full_like(&self, value: f64) -> Result<Tensor> {
        let value = checked_fill_value("full_like", value, self.dtype())?;
        if self.is_global() {
            return self.global_full_like(value);
        }
        let t = self.empty_like_shape(self.shape().clone(), self.dtype())?;
        let k = kernel!(
            "fill",
            t.device(),
            copy::fill(t.device(), t.dtype(), t.layout().clone(), value)
        );
        Tensor::launch(k, &[], &[&t])?;
        Ok(t)
    }
    /// Uniform random values in `[0, 1)` of `self`'s shape and dtype.
    ///
    /// # Errors
    ///
    /// As [`rand`](Self::rand).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::zeros([2, 5], DType::F64)?;
    /// let r = t.rand_like()?;
    /// assert_eq!((r.dims(), r.dtype()), (&[2, 5][..], DType::F64));
    /// assert!(r.to_vec::<f64>()?.iter().all(|v| (0.0..1.0).contains(v)));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn rand_like(&self) -> Result<Tensor> {
        let t = crate::engine::with_engine(self.engine(), || {
            Tensor::rand(self.shape().clone(), self.dtype())
        });
        if self.is_global() {
            return self.global_like(t?);
        }
        t
    }
    /// Normal random values of `self`'s shape and dtype.
    ///
    /// # Errors
    ///
    /// As [`rand`](Self::rand).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::zeros([1000], DType::F32)?;
    /// let r = t.randn_like()?;
    /// assert_eq!(r.dims(), &[1000]);
    /// assert!(r.mean_all()?.item::<f32>()?.abs() < 0.2); // N(0, 1): the mean of 1000 is near 0
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn randn_like(&self) -> Result<Tensor> {
        let t = crate::engine::with_engine(self.engine(), || {
            Tensor::randn(self.shape().clone(), 0.0, 1.0, self.dtype())
        });
        if self.is_global() {
            return self.global_like(t?);
        }
        t
    }

    /// `start, start + step, …` up to (excluding) `end`.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if `step` is zero or has the wrong sign, a bound is not finite, or the
    /// range has 2^63 elements or more.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// assert_eq!(Tensor::arange(0.0, 5.0, 2.0, DType::I64)?.to_vec::<i64>()?, vec![0, 2, 4]);
    /// assert!(Tensor::arange(0.0, 1e-200, -1e-200, DType::F64).is_err()); // the wrong way
    /// assert!(Tensor::arange(-1e308, 1e308, 1e300, DType::F64).is_err()); // too many
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn arange(start: f64, end: f64, step: f64, dtype: DType) -> Result<Tensor> {
        // Signs compared, not multiplied: `(end - start) * step` underflows to 0 for tiny ones.
        if !(start.is_finite() && end.is_finite() && step.is_finite())
            || step == 0.0
            || (end != start && (end > start) != (step > 0.0))
        {
            return Err(Error::invalid(
                "arange",
                format!("no range from {start} to {end} by step {step}"),
            ));
        }
        let count = ((end - start) / step).ceil().max(0.0);
        // 2^63: past it the count saturates (and `end - start` may be infinite).
        if count >= 9.223_372_036_854_776e18 {
            return Err(Error::invalid(
                "arange",
                format!("{count} elements from {start} to {end} by step {step}: too many"),
            ));
        }
        let n = count as usize;
        let t = Tensor::empty_on(current("arange")?, Shape::from([n]), dtype)?;
        Tensor::launch(
            kernel!(
                "arange",
                t.device(),
                copy::generate(t.device(), "arange", dtype, move |i| {
                    start + i as f64 * step
                })
            ),
            &[],
            &[&t],
        )?;
        Ok(t)
    }

    /// `steps` values evenly spaced from `start` to `end` inclusive, computed as PyTorch's
    /// CPU kernel does: the first half as `start + i·step`, the second as
    /// `end - (steps - 1 - i)·step`, so both ends are exact and the values are symmetric;
    /// in `f32` arithmetic for `f32`, `f16` and `bf16` (rounded once), in `f64` otherwise.
    /// An integer dtype truncates the bounds first and each value after.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if a bound is not finite, or does not fit the dtype (as
    /// [`full`](Self::full)).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::linspace(0.0, 1.0, 5, DType::F32)?;
    /// assert_eq!(t.to_vec::<f32>()?, [0., 0.25, 0.5, 0.75, 1.]);
    /// let i = Tensor::linspace(0.5, 10.7, 3, DType::I64)?; // bounds truncated to 0 and 10
    /// assert_eq!(i.to_vec::<i64>()?, [0, 5, 10]);
    /// assert!(Tensor::linspace(0.0, f64::INFINITY, 2, DType::F32).is_err());
    /// assert!(Tensor::linspace(0.0, 300.0, 2, DType::U8).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn linspace(start: f64, end: f64, steps: usize, dtype: DType) -> Result<Tensor> {
        const OP: &str = "linspace";
        if !(start.is_finite() && end.is_finite()) {
            return Err(Error::invalid(OP, "bounds must be finite"));
        }
        let (start, end) = (
            checked_fill_value(OP, start, dtype)?,
            checked_fill_value(OP, end, dtype)?,
        );
        let t = Tensor::empty_on(current(OP)?, Shape::from([steps]), dtype)?;
        // One step is `start`, as PyTorch's fill of that case.
        let (last, half) = (steps.saturating_sub(1), (steps / 2).max(1));
        let value: Box<dyn Fn(usize) -> f64 + Send + Sync> = match dtype {
            DType::F32 | DType::F16 | DType::BF16 => {
                let (s, e) = (start as f32, end as f32);
                let step = (e - s) / last.max(1) as f32;
                Box::new(move |i| {
                    f64::from(if i < half {
                        s + step * i as f32
                    } else {
                        e - step * (last - i) as f32
                    })
                })
            }
            _ => {
                let (s, e) = if dtype.is_float() {
                    (start, end)
                } else {
                    (start.trunc(), end.trunc())
                };
                let step = (e - s) / last.max(1) as f64;
                Box::new(move |i| {
                    if i < half {
                        s + step * i as f64
                    } else {
                        e - step * (last - i) as f64
                    }
                })
            }
        };
        Tensor::launch(
            kernel!(OP, t.device(), copy::generate(t.device(), OP, dtype, value)),
            &[],
            &[&t],
        )?;
        Ok(t)
    }

    /// The `n × n` identity matrix.
    ///
    /// # Errors
    ///
    /// `ShapeOverflow` for huge `n`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let i = Tensor::eye(3, DType::I64)?;
    /// assert_eq!(i.to_vec::<i64>()?, [1, 0, 0, 0, 1, 0, 0, 0, 1]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn eye(n: usize, dtype: DType) -> Result<Tensor> {
        let t = Tensor::empty_on(current("eye")?, Shape::from([n, n]), dtype)?;
        Tensor::launch(
            kernel!(
                "eye",
                t.device(),
                copy::generate(t.device(), "eye", dtype, move |i| {
                    (i / n == i % n) as u8 as f64
                })
            ),
            &[],
            &[&t],
        )?;
        Ok(t)
    }

    /// Uniform random values in `[0, 1)` from the global generator ([`manual_seed`]).
    ///
    /// # Errors
    ///
    /// As [`full`](Self::full).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let r = Tensor::rand([4, 4], DType::F32)?;
    /// assert!(r.to_vec::<f32>()?.iter().all(|v| (0.0..1.0).contains(v)));
    /// assert!(Tensor::rand([2], DType::I64).is_err()); // float dtypes only
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn rand(shape: impl Into<Shape>, dtype: DType) -> Result<Tensor> {
        Tensor::uniform(shape, 0.0, 1.0, dtype)
    }

    /// Uniform random values in `[lo, hi)`.
    ///
    /// # Errors
    ///
    /// As [`full`](Self::full); `InvalidArgument` unless `lo` and `hi` are finite and
    /// `lo <= hi`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let u = Tensor::uniform([100], -2.0, 2.0, DType::F32)?;
    /// assert!(u.to_vec::<f32>()?.iter().all(|v| (-2.0..2.0).contains(v)));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn uniform(shape: impl Into<Shape>, lo: f64, hi: f64, dtype: DType) -> Result<Tensor> {
        Tensor::random(shape.into(), Distribution::Uniform { lo, hi }, dtype)
    }

    /// Normal random values with `mean` and `std`.
    ///
    /// # Errors
    ///
    /// As [`full`](Self::full); `InvalidArgument` unless `mean` and `std` are finite and
    /// `std >= 0`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let x = Tensor::randn([1000], 5.0, 0.1, DType::F64)?;
    /// assert!((x.mean_all()?.item::<f64>()? - 5.0).abs() < 0.05);
    /// assert!((x.std(&[0], 1, false)?.item::<f64>()? - 0.1).abs() < 0.02);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn randn(shape: impl Into<Shape>, mean: f64, std: f64, dtype: DType) -> Result<Tensor> {
        Tensor::random(shape.into(), Distribution::Normal { mean, std }, dtype)
    }

    #[track_caller]
    fn random(shape: Shape, dist: Distribution, dtype: DType) -> Result<Tensor> {
        if !dtype.is_float() {
            let op = match dist {
                Distribution::Uniform { .. } => "rand",
                Distribution::Normal { .. } => "randn",
            };
            return Err(Error::UnsupportedDType {
                at: crate::Caller::here(),
                op,
                dtype,
            });
        }
        match dist {
            Distribution::Uniform { lo, hi } if !(lo.is_finite() && hi.is_finite() && lo <= hi) => {
                return Err(Error::invalid(
                    "uniform",
                    format!("needs finite bounds with lo <= hi, got [{lo}, {hi})"),
                ));
            }
            // As PyTorch: the range's width, and each bound in the dtype, must be finite.
            Distribution::Uniform { lo, hi }
                if !(hi - lo).is_finite()
                    || eddy_ops::dispatch!(dtype, T => !(T::from_f64(lo).to_f64().is_finite()
                        && T::from_f64(hi).to_f64().is_finite())) =>
            {
                return Err(Error::invalid(
                    "uniform",
                    format!(
                        "[{lo}, {hi}) is wider than {dtype} or the largest finite value can hold"
                    ),
                ));
            }
            Distribution::Normal { mean, std }
                if !(mean.is_finite() && std.is_finite() && std >= 0.0) =>
            {
                return Err(Error::invalid(
                    "randn",
                    format!("needs a finite mean and a finite std >= 0, got {mean} and {std}"),
                ));
            }
            _ => {}
        }
        let t = Tensor::empty_on(current("rand")?, shape, dtype)?;
        let (seed, offset) = take_counters(counters_for(dist, t.numel() as u64));
        let k = kernel!(
            "rand",
            t.device(),
            copy::random(t.device(), dtype, dist, seed, offset)
        );
        Tensor::launch(k, &[], &[&t])?;
        Ok(t)
    }

    /// A tensor holding `data` with `shape` (the data moves into the engine; nothing waits).
    /// The dtype is `T`'s: a `Vec<bool>` gives a `Bool` tensor (stored one byte per element).
    ///
    /// # Errors
    ///
    /// `ElementCountMismatch` if `data.len()` is not the shape's element count.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{DType, Tensor};
    /// let t = Tensor::from_vec(vec![1i64, 2, 3, 4, 5, 6], [2, 3])?;
    /// assert_eq!(t.dims(), &[2, 3]);
    /// assert!(Tensor::from_vec(vec![1f32], [2]).is_err());
    /// let mask = Tensor::from_vec(vec![true, false, true], [3])?;
    /// assert_eq!(mask.dtype(), DType::Bool);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn from_vec<T: Elem>(data: Vec<T>, shape: impl Into<Shape>) -> Result<Tensor> {
        let shape = shape.into();
        if shape.checked_numel() != Some(data.len()) {
            return Err(Error::ElementCountMismatch {
                at: crate::Caller::here(),
                op: "from_vec",
                from: vec![data.len()],
                to: shape.dims().to_vec(),
            });
        }
        // Integer data may be indices: remember their range so index ops can check them on
        // the calling thread instead of failing later in the kernel.
        let range = (!data.is_empty() && matches!(T::DTYPE, DType::I64 | DType::I32 | DType::U8))
            .then(|| {
                data.iter().fold((i64::MAX, i64::MIN), |(lo, hi), v| {
                    let v = v.to_f64() as i64;
                    (lo.min(v), hi.max(v))
                })
            });
        let t = Tensor::empty_with_range(current("from_vec")?, shape, T::DTYPE, range)?;
        if !data.is_empty() {
            Tensor::launch(
                kernel!("from_vec", t.device(), copy::from_host(t.device(), data)),
                &[],
                &[&t],
            )?;
            t.range_is_filled();
        }
        Ok(t)
    }

    /// A tensor copying `data` with `shape`.
    ///
    /// # Errors
    ///
    /// As [`from_vec`](Self::from_vec).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let data = [1u8, 2, 3, 4];
    /// let t = Tensor::from_slice(&data, [2, 2])?;
    /// assert_eq!(t.to_vec2::<u8>()?, [[1, 2], [3, 4]]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn from_slice<T: Elem>(data: &[T], shape: impl Into<Shape>) -> Result<Tensor> {
        Tensor::from_vec(data.to_vec(), shape)
    }

    /// A 0-dim tensor holding `v`.
    ///
    /// # Errors
    ///
    /// Only engine start-up errors.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let s = Tensor::scalar(2.5f64)?;
    /// assert_eq!((s.rank(), s.item::<f64>()?), (0, 2.5));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn scalar<T: Elem>(v: T) -> Result<Tensor> {
        Tensor::from_vec(vec![v], Shape::default())
    }

    /// A fresh contiguous tensor with `self`'s engine, of `shape` and `dtype`, filled by `fill`.
    #[track_caller]
    pub(crate) fn new_filled(&self, shape: Shape, dtype: DType, value: f64) -> Result<Tensor> {
        if self.is_global() {
            return self.global_filled(shape, dtype, value);
        }
        let t = self.empty_like_shape(shape, dtype)?;
        let k = kernel!(
            "fill",
            t.device(),
            copy::fill(
                t.device(),
                dtype,
                Layout::contiguous(t.shape().clone()),
                value,
            )
        );
        Tensor::launch(k, &[], &[&t])?;
        Ok(t)
    }
}
