//! Unary kernels: each [`UnaryOp`] on floats (in their compute type) and on integers.

use super::elem::{FloatElem, IntElem, dispatch_float, dispatch_int};
use super::map::map1_lay;
use crate::cpu::fastmath::Transcendental;
use crate::kernel::{input, output};
use crate::kinds::UnaryOp;
use crate::program::{Elementwise, Pos};
use crate::{DType, Elem, Lay};
use eddy_vm::Blob;
use eddy_vm::Counted;
use eddy_vm::instruction::{ComputeCtx, Kernel};
use num_traits::Float as NumFloat;

const FRAC_1_SQRT_2: f64 = std::f64::consts::FRAC_1_SQRT_2;
/// `1/√(2π)`.
const FRAC_1_SQRT_2PI: f64 = 0.398_942_280_401_432_7;

/// An `f64` constant in the compute type (exact for `f64`, rounded once for `f32`).
#[inline(always)]
pub(super) fn konst<A: NumFloat>(v: f64) -> A {
    A::from(v).unwrap_or_else(A::nan)
}

#[inline(always)]
pub(crate) fn apply_float<A: NumFloat + Transcendental>(op: UnaryOp, x: A, c: A, d: A) -> A {
    use UnaryOp::*;
    let one = A::one();
    match op {
        Neg => -x,
        Abs => x.abs(),
        Exp => x.exp_(),
        Log => x.ln_(),
        Sqrt => x.sqrt(),
        Rsqrt => one / x.sqrt(),
        Sin => x.sin(),
        Cos => x.cos(),
        Tanh => x.tanh_(),
        Sigmoid => one / (one + (-x).exp_()),
        // NaN passes through, as in PyTorch.
        Relu => {
            if x > A::zero() || x.is_nan() {
                x
            } else {
                A::zero()
            }
        }
        Gelu => {
            let half = konst::<A>(0.5);
            half * x * (one + (x * konst::<A>(FRAC_1_SQRT_2)).erf_())
        }
        GeluGrad => {
            let half = konst::<A>(0.5);
            let cdf = half * (one + (x * konst::<A>(FRAC_1_SQRT_2)).erf_());
            let pdf = (-half * x * x).exp_() * konst::<A>(FRAC_1_SQRT_2PI);
            cdf + x * pdf
        }
        Silu => x / (one + (-x).exp_()),
        SiluGrad => {
            let s = one / (one + (-x).exp_());
            s * (one + x * (one - s))
        }
        Recip => one / x,
        Square => x * x,
        Sign => {
            if x > A::zero() {
                one
            } else if x < A::zero() {
                -one
            } else {
                x
            }
        }
        AddScalar(_) => x + c,
        MulScalar(_) => x * c,
        DivScalar(_) => x / c,
        RSubScalar(_) => c - x,
        RDivScalar(_) => c / x,
        PowScalar(_) => x.powf(c),
        RPowScalar(_) => c.powf(x),
        Clamp(..) => {
            if x.is_nan() {
                x
            } else {
                x.max(c).min(d)
            }
        }
        Floor => x.floor(),
        Ceil => x.ceil(),
        Round => {
            // Halves go to the even neighbour: 2·round(x/2) is even, and for a half it is the
            // nearer of the two candidates.
            let two = one + one;
            if (x - x.trunc()).abs() == konst::<A>(0.5) {
                two * (x / two).round()
            } else {
                x.round()
            }
        }
        Trunc => x.trunc(),
        Log1p => x.ln_1p(),
        Expm1 => x.exp_m1(),
        Log2 => x.log2(),
        Log10 => x.log10(),
        Tan => x.tan(),
        Atan => x.atan(),
        Erf => x.erf_(),
        LeakyRelu(_) => {
            if x > A::zero() {
                x
            } else {
                x * c
            }
        }
        Elu(_) => {
            if x > A::zero() {
                x
            } else {
                c * x.exp_m1()
            }
        }
        Softplus(..) => {
            // c = β, d = threshold; linear above it (e^(βx) would overflow), as PyTorch.
            let bx = x * c;
            if bx > d { x } else { bx.exp_().ln_1p() / c }
        }
    }
}

/// `x ^ y` in wrapping `i64` arithmetic (so, cast back, in the operands' integer type) for any
/// `y`: a negative `y` truncates toward zero (`1`, `±1` for `x = -1`, else `0`), `None` for
/// `0` to a negative power. `i64::wrapping_pow` takes a `u32` exponent, and capping a larger
/// one would change its parity.
pub(super) fn int_pow(x: i64, y: i64) -> Option<i64> {
    if y < 0 {
        return match x {
            0 => None,
            1 => Some(1),
            -1 => Some(if y % 2 == 0 { 1 } else { -1 }),
            _ => Some(0),
        };
    }
    let (mut base, mut e, mut acc) = (x, y as u64, 1i64);
    while e > 0 {
        if e & 1 == 1 {
            acc = acc.wrapping_mul(base);
        }
        base = base.wrapping_mul(base);
        e >>= 1;
    }
    Some(acc)
}

#[inline(always)]
pub(super) fn apply_int(op: UnaryOp, x: i64, c: i64, d: i64) -> i64 {
    use UnaryOp::*;
    match op {
        Neg => x.wrapping_neg(),
        Abs => x.wrapping_abs(),
        Relu => x.max(0),
        Square => x.wrapping_mul(x),
        Sign => x.signum(),
        AddScalar(_) => x.wrapping_add(c),
        MulScalar(_) => x.wrapping_mul(c),
        RSubScalar(_) => c.wrapping_sub(x),
        Clamp(..) => x.max(c).min(d),
        Floor | Ceil | Round | Trunc => x,
        _ => unreachable!("checked by keeps_int"),
    }
}

pub(crate) fn params(op: UnaryOp) -> (f64, f64) {
    use UnaryOp::*;
    match op {
        AddScalar(c) | MulScalar(c) | DivScalar(c) | RSubScalar(c) | RDivScalar(c)
        | PowScalar(c) | RPowScalar(c) | LeakyRelu(c) | Elu(c) => (c, 0.0),
        Clamp(lo, hi) | Softplus(lo, hi) => (lo, hi),
        _ => (0.0, 0.0),
    }
}

/// `out = op(a)`: input 0 laid out as `la` (of the output's shape), output 0 contiguous; both
/// of `dtype`. The op definition checked that `dtype` is float, or integer with
/// `op.keeps_int()`.
///
/// # Examples
///
/// ```
/// use eddy_ops::{cpu::elementwise::unary, elementwise::UnaryOp, Lay};
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (a, out) = (vm.new_blob(3 * 4), vm.new_blob(3 * 4));
/// vm.run_op(StreamId::CPU, from_host(vec![-1.5f32, 0.5, 4.0]), &[], &[&a], false)?;
/// let k = unary(UnaryOp::Clamp(0.0, 1.0), DType::F32, Lay::Dense(0));
/// vm.run_op(StreamId::CPU, k, &[&a], &[&out], false)?;
/// let l = Layout::contiguous([3]);
/// assert_eq!(vm.read_blob(&out, move |b| gather_host::<f32>(b, &l))?, [0.0, 0.5, 1.0]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn unary(op: UnaryOp, dtype: DType, la: Lay) -> impl Kernel {
    UnaryKernel { op, dtype, la }
}

/// The kernel [`unary`] returns: a struct rather than a closure, so that it can say what it
/// computes ([`Kernel::describe`]) without carrying anything more.
struct UnaryKernel {
    op: UnaryOp,
    dtype: DType,
    la: Lay,
}

impl Kernel for UnaryKernel {
    fn name(&self) -> &str {
        self.op.name()
    }
    fn compute(
        &mut self,
        ins: &[Counted<Blob>],
        outs: &[Counted<Blob>],
        _ctx: &mut ComputeCtx<'_>,
    ) -> eddy_vm::Result<()> {
        let UnaryKernel { op, dtype, ref la } = *self;
        run_unary(op, dtype, la, ins, outs).map_err(|m| eddy_vm::Error::kernel(op.name(), m))
    }
    fn describe(&self) -> Option<Box<dyn std::any::Any + Send>> {
        Some(Box::new(self.what()?))
    }
    fn is_described_by(&self, description: &dyn std::any::Any) -> bool {
        self.what().is_some_and(|w| w.is(description))
    }
}

impl UnaryKernel {
    /// What it computes, where a merged kernel can compute it.
    fn what(&self) -> Option<Elementwise> {
        let a = Pos::of(&self.la)?;
        let (op, dtype) = (self.op, self.dtype);
        Some(Elementwise::Unary { op, dtype, a })
    }
}

/// A module per parameter-free op `$op`: `one(x)` (`apply_float` of it, inlined wherever it
/// is called) and `slice(a, o)`, the loop `o[i] = one(a[i])`, compiled for AVX2 and FMA where
/// the CPU has them (no contraction: the same results either way).
macro_rules! elem_fn {
    ($($name:ident => $op:ident),* $(,)?) => {$(
        mod $name {
            use super::*;

            #[inline(always)]
            pub(super) fn one<T: FloatElem>(x: T) -> T {
                let z = <T::A as num_traits::Zero>::zero();
                T::down(apply_float(UnaryOp::$op, x.up(), z, z))
            }

            #[inline(always)]
            fn run<T: FloatElem>(a: &[T], o: &mut [T]) {
                for (d, &x) in o.iter_mut().zip(a) {
                    *d = one::<T>(x);
                }
            }

            /// [`run`] compiled for AVX2 and FMA.
            ///
            /// # Safety
            ///
            /// The CPU has AVX2 and FMA.
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn wide<T: FloatElem>(a: &[T], o: &mut [T]) {
                run(a, o)
            }

            /// [`run`] compiled for AVX-512F: the same operations, 16 lanes at a time.
            ///
            /// # Safety
            ///
            /// The CPU has AVX-512F, AVX2 and FMA.
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f,avx2,fma")]
            unsafe fn wider<T: FloatElem>(a: &[T], o: &mut [T]) {
                run(a, o)
            }

            pub(super) fn slice<T: FloatElem>(a: &[T], o: &mut [T]) {
                #[cfg(target_arch = "x86_64")]
                if std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                {
                    // SAFETY: the CPU has AVX-512F, AVX2 and FMA (checked just above).
                    return unsafe { wider(a, o) };
                }
                #[cfg(target_arch = "x86_64")]
                if std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                {
                    // SAFETY: the CPU has AVX2 and FMA (checked just above).
                    return unsafe { wide(a, o) };
                }
                run(a, o)
            }
        }
    )*};
}

elem_fn!(
    gelu => Gelu,
    gelu_grad => GeluGrad,
    tanh => Tanh,
    sigmoid => Sigmoid,
    silu => Silu,
    silu_grad => SiluGrad,
    exp => Exp,
    erf => Erf,
    log => Log,
);

/// `o[i] = f(a[i])` with `f` one of the modules above, its loop written there (so that the
/// op inlines and the loop vectorises; through `map1_lay` it stayed a call per element), on
/// the kernel threads when long; other layouts through `map1_lay`.
macro_rules! dense_loop {
    ($a:ident, $la:ident, $o:ident, $f:ident) => {
        match $la {
            Lay::Dense(off) => {
                let a = &$a[*off..*off + $o.len()];
                let run = |st: usize, c: &mut [T]| $f::slice(&a[st..st + c.len()], c);
                if $o.len() < crate::kernel::PAR_MIN {
                    run(0, $o)
                } else {
                    let per = $o
                        .len()
                        .div_ceil(eddy_vm::par::threads() * crate::kernel::CHUNKS_PER_THREAD);
                    eddy_vm::par::for_each_chunk_mut($o, per, run)
                }
            }
            _ => map1_lay($a, $la, $o, $f::one::<T>),
        }
    };
}

/// The body of [`UnaryKernel`].
#[inline(always)]
fn run_unary(
    op: UnaryOp,
    dtype: DType,
    la: &Lay,
    ins: &[Counted<Blob>],
    outs: &[Counted<Blob>],
) -> Result<(), String> {
    let (c, d) = params(op);
    dispatch_float!(dtype, T => {
            // SAFETY: input 0 is read and output 0 written by this instruction; they differ.
            let (a, o) = unsafe { (input::<T>(&ins[0]), output::<T>(&outs[0])) };
            let (c, d) = (T::param(c), T::param(d));
            macro_rules! go {
                ($($v:ident),*) => {
                    match op {
                        $(UnaryOp::$v { .. } => map1_lay(a, &la, o, |x: T| {
                            T::down(apply_float(UnaryOp::$v, x.up(), c, d))
                        }),)*
                        other => map1_lay(a, &la, o, |x: T| T::down(apply_float(other, x.up(), c, d))),
                    }
                };
            }
            // The common ops get a loop each (so the op's match is hoisted and it vectorises).
            match op {
                UnaryOp::AddScalar(_) => map1_lay(a, la, o, |x: T| T::down(x.up() + c)),
                UnaryOp::MulScalar(_) => map1_lay(a, la, o, |x: T| T::down(x.up() * c)),
                // The long ones as functions marked for inlining: as closures they stayed
                // calls inside the loop, which then ran one element at a time.
                UnaryOp::Gelu => dense_loop!(a, la, o, gelu),
                UnaryOp::GeluGrad => dense_loop!(a, la, o, gelu_grad),
                UnaryOp::Tanh => dense_loop!(a, la, o, tanh),
                UnaryOp::Sigmoid => dense_loop!(a, la, o, sigmoid),
                UnaryOp::Silu => dense_loop!(a, la, o, silu),
                UnaryOp::SiluGrad => dense_loop!(a, la, o, silu_grad),
                UnaryOp::Exp => dense_loop!(a, la, o, exp),
                UnaryOp::Erf => dense_loop!(a, la, o, erf),
                UnaryOp::Log => dense_loop!(a, la, o, log),
                _ => go!(Neg, Relu, Sqrt, Square, Rsqrt, Recip, Abs),
            }
            Ok(())
        }, else => dispatch_int!(dtype, T => {
            // SAFETY: as above.
            let (a, o) = unsafe { (input::<T>(&ins[0]), output::<T>(&outs[0])) };
            let (c, d) = if let UnaryOp::Clamp(..) = op {
                // Bounds saturated to `T`'s range, so the result stays in it (`T::from_i64`
                // would wrap a bound below or above it).
                (T::from_f64(c).to_i64(), T::from_f64(d).to_i64())
            } else {
                (c as i64, d as i64)
            };
            map1_lay(a, la, o, |x: T| T::from_i64(apply_int(op, x.to_i64(), c, d)));
            Ok(())
        }, else => Err(format!("unsupported dtype {dtype}"))))
}
