//! Copies and casts between layouts and dtypes, and the creation kernels (fill, arange,
//! linspace, eye, seeded random).

use super::stream_store::{wants_streaming, write_chunk};
use crate::kernel::{FnKernel, input, output, par_out, walk};
use crate::{DType, Elem, Layout, dispatch};
use eddy_vm::Counted;
use eddy_vm::{Blob, instruction::Kernel};

/// Copies `src` (any layout, broadcast allowed) into `dst` (any non-overlapping layout of the same
/// shape), converting `src_dtype` to `dst_dtype`. Input 0 is the source blob, output 0 the
/// destination; elements of `dst` outside its layout keep their values.
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::copy::copy;
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (src, dst) = (vm.new_blob(6 * 4), vm.new_blob(6 * 8));
/// vm.run_op(StreamId::CPU, from_host(vec![0i32, 1, 2, 3, 4, 5]), &[], &[&src], false)?;
/// // `src` as [2, 3] read transposed, into a contiguous [3, 2] of f64.
/// let (st, dl) = (Layout::contiguous([2, 3]).transpose(0, 1), Layout::contiguous([3, 2]));
/// let k = copy(st, DType::I32, dl.clone(), DType::F64);
/// vm.run_op(StreamId::CPU, k, &[&src], &[&dst], false)?;
/// let out = vm.read_blob(&dst, move |b| gather_host::<f64>(b, &dl))?;
/// assert_eq!(out, [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn copy(src: Layout, src_dtype: DType, dst: Layout, dst_dtype: DType) -> impl Kernel {
    FnKernel::new(
        "copy",
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            dispatch!(src_dtype, S => dispatch!(dst_dtype, D => {
                // SAFETY: input 0 is read and output 0 written by this instruction; they differ.
                let (s, d) = unsafe { (input::<S>(&ins[0]), output::<D>(&outs[0])) };
                copy_typed::<S, D>(s, &src, d, &dst);
            }));
            Ok(())
        },
    )
}

#[inline(always)]
fn conv<S: Elem, D: Elem>(v: S) -> D {
    if std::any::TypeId::of::<S>() == std::any::TypeId::of::<D>() {
        // SAFETY: S and D are the same type (checked just above), so this is a plain copy.
        unsafe { std::mem::transmute_copy::<S, D>(&v) }
    } else {
        D::from_f64(v.to_f64())
    }
}

fn copy_typed<S: Elem, D: Elem>(s: &[S], sl: &Layout, d: &mut [D], dl: &Layout) {
    let n = dl.numel();
    if n == 0 {
        return;
    }
    if let (Some(sr), Some(dr)) = (sl.contiguous_range(), dl.contiguous_range()) {
        let (s, d) = (&s[sr], &mut d[dr]);
        let streaming = wants_streaming::<D>(d.len());
        par_out(d, |start, chunk| {
            write_chunk(chunk, streaming, |i, dst| {
                let (st, len) = (start + i, dst.len());
                for (o, &v) in dst.iter_mut().zip(&s[st..st + len]) {
                    *o = conv(v);
                }
            })
        });
        return;
    }
    if let Some(dr) = dl.contiguous_range() {
        let d = &mut d[dr];
        let streaming = wants_streaming::<D>(d.len());
        par_out(d, |start, chunk| {
            write_chunk(chunk, streaming, |i, dst| {
                let st = start + i;
                walk(
                    sl.dims(),
                    [&sl.strides],
                    [sl.offset],
                    st,
                    st + dst.len(),
                    |j, [o]| dst[j - st] = conv(s[o]),
                );
            })
        });
        return;
    }
    walk(
        dl.dims(),
        [&sl.strides, &dl.strides],
        [sl.offset, dl.offset],
        0,
        n,
        |_, [so, dof]| d[dof] = conv(s[so]),
    );
}

/// Fills the elements of output 0 that `layout` covers with `value` (`zeros`, `zero_`, `fill_`).
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::copy::fill;
/// use eddy_ops::kernel::gather_host;
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let out = vm.new_blob(4 * 4);
/// let all = Layout::contiguous([4]);
/// vm.run_op(StreamId::CPU, fill(DType::F32, all.clone(), 0.0), &[], &[&out], false)?;
/// let mut odd = Layout::contiguous([2]); // elements 1 and 3
/// (odd.strides[0], odd.offset) = (2, 1);
/// vm.run_op(StreamId::CPU, fill(DType::F32, odd, 7.0), &[], &[&out], false)?;
/// assert_eq!(vm.read_blob(&out, move |b| gather_host::<f32>(b, &all))?, [0.0, 7.0, 0.0, 7.0]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn fill(dtype: DType, layout: Layout, value: f64) -> impl Kernel {
    FnKernel::new(
        "fill",
        move |_: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            dispatch!(dtype, T => {
                // SAFETY: output 0 is written only by this instruction.
                let o = unsafe { output::<T>(&outs[0]) };
                let v = T::from_f64(value);
                if let Some(r) = layout.contiguous_range() {
                    let streaming = wants_streaming::<T>(r.len());
                    par_out(&mut o[r], |_, c| write_chunk(c, streaming, |_, dst| dst.fill(v)));
                } else {
                    walk(layout.dims(), [&layout.strides], [layout.offset], 0, layout.numel(), |_, [i]| o[i] = v);
                }
            });
            Ok(())
        },
    )
}

/// Writes `f(i)` to element `i` of output 0 (arange, linspace, eye).
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::copy::generate;
/// use eddy_ops::kernel::gather_host;
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let out = vm.new_blob(4 * 8);
/// let k = generate("arange", DType::I64, |i| 10.0 + 2.0 * i as f64);
/// vm.run_op(StreamId::CPU, k, &[], &[&out], false)?;
/// let l = Layout::contiguous([4]);
/// assert_eq!(vm.read_blob(&out, move |b| gather_host::<i64>(b, &l))?, [10, 12, 14, 16]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn generate(
    name: &'static str,
    dtype: DType,
    f: impl Fn(usize) -> f64 + Send + Sync + 'static,
) -> impl Kernel {
    FnKernel::new(name, move |_: &[Counted<Blob>], outs: &[Counted<Blob>]| {
        dispatch!(dtype, T => {
            // SAFETY: output 0 is written only by this instruction.
            let o = unsafe { output::<T>(&outs[0]) };
            par_out(o, |start, c| {
                for (k, v) in c.iter_mut().enumerate() {
                    *v = T::from_f64(f(start + k));
                }
            });
        });
        Ok(())
    })
}

/// The distribution of [`random`].
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::copy::{random_value, Distribution};
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
/// use eddy_ops::cpu::copy::splitmix64;
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
/// use eddy_ops::cpu::copy::uniform01;
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
/// use eddy_ops::cpu::copy::uniform01_digits;
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
/// use eddy_ops::cpu::copy::mantissa_digits;
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
/// use eddy_ops::cpu::copy::{counters_for, Distribution};
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
/// use eddy_ops::cpu::copy::{random_value, Distribution};
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

/// Fills output 0 with values of `dist` from the counter-based generator (`seed`, `offset`),
/// rounded once to `dtype`. A uniform value that rounds up to `hi` in the dtype (possible for
/// bounds other than `[0, 1)`) becomes `lo`, so every value is in `[lo, hi)`.
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::copy::{random, random_value, Distribution};
/// use eddy_ops::kernel::gather_host;
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let out = vm.new_blob(3 * 8);
/// let d = Distribution::Uniform { lo: 0.0, hi: 10.0 };
/// vm.run_op(StreamId::CPU, random(DType::F64, d, 9, 100), &[], &[&out], false)?;
/// let l = Layout::contiguous([3]);
/// let v = vm.read_blob(&out, move |b| gather_host::<f64>(b, &l))?;
/// assert_eq!(v, (0..3).map(|i| random_value(d, 9, 100, i, 53)).collect::<Vec<_>>());
/// assert!(v.iter().all(|x| (0.0..10.0).contains(x)));
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn random(dtype: DType, dist: Distribution, seed: u64, offset: u64) -> impl Kernel {
    let digits = mantissa_digits(dtype);
    FnKernel::new(
        "rand",
        move |_: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            dispatch!(dtype, T => {
                // SAFETY: output 0 is written only by this instruction.
                let o = unsafe { output::<T>(&outs[0]) };
                par_out(o, |start, c| {
                    for (k, v) in c.iter_mut().enumerate() {
                        let mut x = T::from_f64(random_value(dist, seed, offset, start + k, digits));
                        if let Distribution::Uniform { lo, hi } = dist
                            && x.to_f64() >= hi
                            && lo < hi
                        {
                            x = T::from_f64(lo);
                        }
                        *v = x;
                    }
                });
            });
            Ok(())
        },
    )
}
