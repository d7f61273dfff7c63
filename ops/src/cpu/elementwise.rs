//! Elementwise kernels: unary maps, binary maps with broadcasting, comparisons and `where`.
//!
//! Outputs are fresh and contiguous; inputs come with any layout already broadcast to the
//! output's shape. Floats compute in their accumulation type (`f32` for the 16-bit floats).

use super::fastmath::Transcendental;
use super::stream_store::{wants_streaming, write_chunk};
use crate::kernel::{FnKernel, input, output, par_out, walk};
use crate::kinds::{BinaryOp, CmpOp, UnaryOp};
use crate::{Bool8, DType, Elem, Lay, Layout};
use eddy_vm::Counted;
use eddy_vm::{Blob, instruction::Kernel};
use half::{bf16, f16};
use num_traits::{Float as NumFloat, Zero};

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

/// [`map1`] over an operand kept as a [`Lay`]; `out` holds exactly the output's elements.
///
/// # Examples
///
/// ```
/// use eddy_ops::{cpu::elementwise::map1_lay, Lay};
/// let a = [1.0f32, 2.0, 3.0, 4.0];
/// let mut out = [0.0f32; 2];
/// map1_lay(&a, &Lay::Dense(2), &mut out, |x| x * 10.0);
/// assert_eq!(out, [30.0, 40.0]);
/// map1_lay(&a, &Lay::Splat(0), &mut out, |x| -x);
/// assert_eq!(out, [-1.0, -1.0]);
/// ```
pub fn map1_lay<S: Elem, D: Elem>(a: &[S], la: &Lay, out: &mut [D], f: impl Fn(S) -> D + Sync) {
    match la {
        Lay::Dense(off) => dense1(&a[*off..*off + out.len()], out, f),
        Lay::Splat(off) => {
            let v = f(a[*off]);
            par_out(out, |_, c| c.fill(v));
        }
        Lay::Strided(l) => map1(a, l, out, f),
    }
}

/// [`map2`] over operands kept as [`Lay`]s; `out` holds exactly the output's elements.
///
/// # Examples
///
/// ```
/// use eddy_ops::{cpu::elementwise::map2_lay, Lay};
/// use eddy_ops::Layout;
/// let (a, bias) = ([1, 2, 3, 4, 5, 6i64], [10i64]);
/// let mut out = [0i64; 6];
/// map2_lay(&a, &Lay::Dense(0), &bias, &Lay::Splat(0), &mut out, |x, y| x + y);
/// assert_eq!(out, [11, 12, 13, 14, 15, 16]);
/// // `a` read as [3, 2] transposed to [2, 3], plus a dense [2, 3].
/// let t = Lay::of(Layout::contiguous([3, 2]).transpose(0, 1));
/// map2_lay(&a, &t, &[0i64; 6], &Lay::Dense(0), &mut out, |x, y| x + y);
/// assert_eq!(out, [1, 3, 5, 2, 4, 6]);
/// ```
pub fn map2_lay<A: Elem, B: Elem, D: Elem>(
    a: &[A],
    la: &Lay,
    b: &[B],
    lb: &Lay,
    out: &mut [D],
    f: impl Fn(A, B) -> D + Sync,
) {
    match (la, lb) {
        (Lay::Dense(oa), Lay::Dense(ob)) => {
            let n = out.len();
            dense2(&a[*oa..*oa + n], &b[*ob..*ob + n], out, f);
        }
        (Lay::Dense(oa), Lay::Splat(ob)) => {
            let y = b[*ob];
            dense1(&a[*oa..*oa + out.len()], out, move |x| f(x, y));
        }
        (Lay::Splat(oa), Lay::Dense(ob)) => {
            let x = a[*oa];
            dense1(&b[*ob..*ob + out.len()], out, move |y| f(x, y));
        }
        (Lay::Splat(oa), Lay::Splat(ob)) => {
            let v = f(a[*oa], b[*ob]);
            par_out(out, |_, c| c.fill(v));
        }
        (Lay::Strided(l), _) | (_, Lay::Strided(l)) => {
            let shape = &l.shape;
            map2(a, &la.layout(shape), b, &lb.layout(shape), out, f);
        }
    }
}

/// `out[i] = f(a[i])`, all three dense and of one length.
///
/// An output too large for the caches is written with streaming stores
/// ([`stream_store`](super::stream_store)).
fn dense1<S: Elem, D: Elem>(a: &[S], out: &mut [D], f: impl Fn(S) -> D + Sync) {
    if out.len() < crate::kernel::PAR_MIN {
        // One chunk on this thread, written in place: the loop alone, without the chunking's
        // and the streaming choice's layers (a third of a 16-element op's kernel).
        return dense1_run(&a[..out.len()], out, &f);
    }
    let streaming = wants_streaming::<D>(out.len());
    par_out(out, |st, c| {
        write_chunk(c, streaming, |i, dst| {
            let s = st + i;
            dense1_run(&a[s..s + dst.len()], dst, &f)
        })
    });
}

/// The loop of [`dense1`], a function of its own so that its arguments carry their no-alias
/// promises: inlined into the pool's chunk closure, a captured scalar (`x * c`) was reloaded
/// after every store, which kept the loop from vectorising (3× slower than ReLU).
#[inline]
fn dense1_run<S: Elem, D: Elem>(a: &[S], out: &mut [D], f: &impl Fn(S) -> D) {
    for (o, &x) in out.iter_mut().zip(a) {
        *o = f(x);
    }
}

/// The loop of [`dense2`] (see [`dense1_run`]).
#[inline]
fn dense2_run<A: Elem, B: Elem, D: Elem>(a: &[A], b: &[B], out: &mut [D], f: &impl Fn(A, B) -> D) {
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = f(x, y);
    }
}

/// `out[i] = f(a[i], b[i])`, all dense and of one length (streaming stores as in [`dense1`]).
fn dense2<A: Elem, B: Elem, D: Elem>(
    a: &[A],
    b: &[B],
    out: &mut [D],
    f: impl Fn(A, B) -> D + Sync,
) {
    let n = out.len();
    if n < crate::kernel::PAR_MIN {
        return dense2_run(&a[..n], &b[..n], out, &f); // as in `dense1`
    }
    let streaming = wants_streaming::<D>(n);
    par_out(out, |st, c| {
        write_chunk(c, streaming, |i, dst| {
            let (s, e) = (st + i, st + i + dst.len());
            dense2_run(&a[s..e], &b[s..e], dst, &f)
        })
    });
}

/// `out[i] = f(a[i])` over a contiguous output, `a` in any layout of the same shape.
///
/// # Examples
///
/// ```
/// use eddy_ops::{cpu::elementwise::map1, Layout};
/// let a = [1u8, 2, 3, 4, 5, 6];
/// let mut out = [0i64; 6];
/// map1(&a, &Layout::contiguous([3, 2]).transpose(0, 1), &mut out, |x| x as i64 * 2);
/// assert_eq!(out, [2, 6, 10, 4, 8, 12]);
/// ```
pub fn map1<S: Elem, D: Elem>(a: &[S], la: &Layout, out: &mut [D], f: impl Fn(S) -> D + Sync) {
    let n = la.numel();
    let out = &mut out[..n];
    if let Some(r) = la.contiguous_range() {
        dense1(&a[r], out, f);
    } else {
        par_out(out, |st, c| {
            walk(
                la.dims(),
                [&la.strides],
                [la.offset],
                st,
                st + c.len(),
                |i, [o]| c[i - st] = f(a[o]),
            )
        });
    }
}

fn scalar_of(l: &Layout) -> bool {
    l.strides.iter().all(|&s| s == 0)
}

/// `out[i] = f(a[i], b[i])` over a contiguous output, inputs in any layout of its shape.
///
/// # Examples
///
/// ```
/// use eddy_ops::{cpu::elementwise::map2, Layout};
/// let (a, b) = ([1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [10.0f32, 20.0, 30.0]);
/// let la = Layout::contiguous([2, 3]);
/// let lb = Layout::contiguous([3]).broadcast_to(&la.shape); // one row for both rows
/// let mut out = [0.0f32; 6];
/// map2(&a, &la, &b, &lb, &mut out, |x, y| x * y);
/// assert_eq!(out, [10.0, 40.0, 90.0, 40.0, 100.0, 180.0]);
/// ```
pub fn map2<A: Elem, B: Elem, D: Elem>(
    a: &[A],
    la: &Layout,
    b: &[B],
    lb: &Layout,
    out: &mut [D],
    f: impl Fn(A, B) -> D + Sync,
) {
    let n = la.numel();
    if n == 0 {
        return;
    }
    let out = &mut out[..n];
    match (la.contiguous_range(), lb.contiguous_range()) {
        (Some(ra), Some(rb)) => dense2(&a[ra], &b[rb], out, f),
        (Some(ra), None) if scalar_of(lb) => {
            let y = b[lb.offset];
            dense1(&a[ra], out, move |x| f(x, y));
        }
        (None, Some(rb)) if scalar_of(la) => {
            let x = a[la.offset];
            dense1(&b[rb], out, move |y| f(x, y));
        }
        _ => rows2(a, la, b, lb, out, f),
    }
}

/// The general case of [`map2`], a row (innermost dim) at a time: the outer dims advance by
/// the walker, and each row is a plain loop specialised for unit and zero strides, so a bias
/// broadcast along rows (`[n, k] + [k]`) runs as fast as a contiguous add.
fn rows2<A: Elem, B: Elem, D: Elem>(
    a: &[A],
    la: &Layout,
    b: &[B],
    lb: &Layout,
    out: &mut [D],
    f: impl Fn(A, B) -> D + Sync,
) {
    let r = la.shape.rank();
    let inner = la.dims()[r - 1];
    if inner == 0 {
        return;
    }
    let (sa, sb) = (la.strides[r - 1], lb.strides[r - 1]);
    let outer = &la.dims()[..r - 1];
    let rows = out.len() / inner;
    let body = |row0: usize, chunk: &mut [D]| {
        let nrows = chunk.len() / inner;
        walk(
            outer,
            [&la.strides[..r - 1], &lb.strides[..r - 1]],
            [la.offset, lb.offset],
            row0,
            row0 + nrows,
            |ri, [oa, ob]| {
                let o = &mut chunk[(ri - row0) * inner..(ri - row0 + 1) * inner];
                match (sa, sb) {
                    (1, 1) => {
                        for ((d, &x), &y) in
                            o.iter_mut().zip(&a[oa..oa + inner]).zip(&b[ob..ob + inner])
                        {
                            *d = f(x, y);
                        }
                    }
                    (1, 0) => {
                        let y = b[ob];
                        for (d, &x) in o.iter_mut().zip(&a[oa..oa + inner]) {
                            *d = f(x, y);
                        }
                    }
                    (0, 1) => {
                        let x = a[oa];
                        for (d, &y) in o.iter_mut().zip(&b[ob..ob + inner]) {
                            *d = f(x, y);
                        }
                    }
                    _ => {
                        for (k, d) in o.iter_mut().enumerate() {
                            *d = f(a[oa + k * sa], b[ob + k * sb]);
                        }
                    }
                }
            },
        )
    };
    let threads = eddy_vm::par::threads();
    if out.len() >= crate::kernel::PAR_MIN && rows >= 2 && threads > 1 {
        let per = rows
            .div_ceil(threads * crate::kernel::CHUNKS_PER_THREAD)
            .max(1);
        eddy_vm::par::for_each_chunk_mut(out, per * inner, |start, c| body(start / inner, c));
    } else {
        body(0, out);
    }
}

const FRAC_1_SQRT_2: f64 = std::f64::consts::FRAC_1_SQRT_2;
/// `1/√(2π)`.
const FRAC_1_SQRT_2PI: f64 = 0.398_942_280_401_432_7;

/// An `f64` constant in the compute type (exact for `f64`, rounded once for `f32`).
#[inline(always)]
fn konst<A: NumFloat>(v: f64) -> A {
    A::from(v).unwrap_or_else(A::nan)
}

#[inline(always)]
fn apply_float<A: NumFloat + Transcendental>(op: UnaryOp, x: A, c: A, d: A) -> A {
    use UnaryOp::*;
    let one = A::one();
    match op {
        Neg => -x,
        Abs => x.abs(),
        Exp => x.exp_(),
        Log => x.ln(),
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
fn int_pow(x: i64, y: i64) -> Option<i64> {
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
fn apply_int(op: UnaryOp, x: i64, c: i64, d: i64) -> i64 {
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

fn params(op: UnaryOp) -> (f64, f64) {
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
    FnKernel::new(
        op.name(),
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
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
                UnaryOp::AddScalar(_) => map1_lay(a, &la, o, |x: T| T::down(x.up() + c)),
                UnaryOp::MulScalar(_) => map1_lay(a, &la, o, |x: T| T::down(x.up() * c)),
                _ => go!(Neg, Relu, Exp, Sqrt, Square, Tanh, Sigmoid, Gelu, Silu),
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
            map1_lay(a, &la, o, |x: T| T::from_i64(apply_int(op, x.to_i64(), c, d)));
            Ok(())
        }, else => Err(format!("unsupported dtype {dtype}"))))
        },
    )
}

#[inline(always)]
fn nan_max<A: PartialOrd + Copy>(x: A, y: A) -> A {
    #[allow(clippy::eq_op)]
    if x != x || x >= y { x } else { y }
}
#[inline(always)]
fn nan_min<A: PartialOrd + Copy>(x: A, y: A) -> A {
    #[allow(clippy::eq_op)]
    if x != x || x <= y { x } else { y }
}

/// `out = a op b`: inputs 0 and 1 laid out as `la`, `lb`, already broadcast to the output
/// shape, all of `dtype` (the op definition promoted them). Integer `div` is not defined (it promotes to float).
///
/// # Examples
///
/// ```
/// use eddy_ops::{cpu::elementwise::binary, elementwise::BinaryOp, Lay};
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (a, b, out) = (vm.new_blob(3 * 8), vm.new_blob(8), vm.new_blob(3 * 8));
/// vm.run_op(StreamId::CPU, from_host(vec![1i64, 5, 9]), &[], &[&a], false)?;
/// vm.run_op(StreamId::CPU, from_host(vec![4i64]), &[], &[&b], false)?;
/// // `a - 4`, the scalar splat over `a`'s three elements.
/// let k = binary(BinaryOp::Sub, DType::I64, Lay::Dense(0), Lay::Splat(0));
/// vm.run_op(StreamId::CPU, k, &[&a, &b], &[&out], false)?;
/// let l = Layout::contiguous([3]);
/// assert_eq!(vm.read_blob(&out, move |m| gather_host::<i64>(m, &l))?, [-3, 1, 5]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn binary(op: BinaryOp, dtype: DType, la: Lay, lb: Lay) -> impl Kernel {
    FnKernel::new(
        op.name(),
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            dispatch_float!(dtype, T => {
            // SAFETY: inputs 0 and 1 are read, output 0 written; the output is a fresh blob.
            let (a, b, o) = unsafe { (input::<T>(&ins[0]), input::<T>(&ins[1]), output::<T>(&outs[0])) };
            macro_rules! go { ($f:expr) => { map2_lay(a, &la, b, &lb, o, |x: T, y: T| T::down($f(x.up(), y.up()))) }; }
            type A = <T as FloatElem>::A;
            match op {
                BinaryOp::Add => go!(|x: A, y: A| x + y),
                BinaryOp::Sub => go!(|x: A, y: A| x - y),
                BinaryOp::Mul => go!(|x: A, y: A| x * y),
                BinaryOp::Div => go!(|x: A, y: A| x / y),
                BinaryOp::Pow => go!(|x: A, y: A| x.powf(y)),
                BinaryOp::Maximum => go!(nan_max::<A>),
                BinaryOp::Minimum => go!(nan_min::<A>),
                BinaryOp::ReluBackward => go!(|x: A, y: A| if x > A::zero() { y } else { A::zero() }),
            }
            Ok(())
        }, else => dispatch_int!(dtype, T => {
            // SAFETY: as above.
            let (a, b, o) = unsafe { (input::<T>(&ins[0]), input::<T>(&ins[1]), output::<T>(&outs[0])) };
            macro_rules! go { ($f:expr) => { map2_lay(a, &la, b, &lb, o, |x: T, y: T| T::from_i64($f(x.to_i64(), y.to_i64()))) }; }
            match op {
                BinaryOp::Add => go!(|x: i64, y: i64| x.wrapping_add(y)),
                BinaryOp::Sub => go!(|x: i64, y: i64| x.wrapping_sub(y)),
                BinaryOp::Mul => go!(|x: i64, y: i64| x.wrapping_mul(y)),
                BinaryOp::Pow => {
                    let zero_to_negative = std::sync::atomic::AtomicBool::new(false);
                    go!(|x: i64, y: i64| int_pow(x, y).unwrap_or_else(|| {
                        zero_to_negative.store(true, std::sync::atomic::Ordering::Relaxed);
                        0
                    }));
                    if zero_to_negative.into_inner() {
                        return Err("pow: 0 to a negative integer power".into());
                    }
                }
                BinaryOp::Maximum => go!(|x: i64, y: i64| x.max(y)),
                BinaryOp::Minimum => go!(|x: i64, y: i64| x.min(y)),
                BinaryOp::ReluBackward => go!(|x: i64, y: i64| if x > 0 { y } else { 0 }),
                BinaryOp::Div => return Err("integer division is computed in float".into()),
            }
            Ok(())
        }, else => Err(format!("unsupported dtype {dtype}"))))
        },
    )
}

/// `out = a cmp b` (as `Bool`), inputs of one `dtype` broadcast to the output shape.
///
/// # Examples
///
/// ```
/// use eddy_ops::{cpu::elementwise::compare, elementwise::CmpOp, Lay};
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (a, b, out) = (vm.new_blob(3 * 4), vm.new_blob(3 * 4), vm.new_blob(3));
/// vm.run_op(StreamId::CPU, from_host(vec![1.0f32, 2.0, f32::NAN]), &[], &[&a], false)?;
/// vm.run_op(StreamId::CPU, from_host(vec![2.0f32, 2.0, 0.0]), &[], &[&b], false)?;
/// let k = compare(CmpOp::Lt, DType::F32, Lay::Dense(0), Lay::Dense(0));
/// vm.run_op(StreamId::CPU, k, &[&a, &b], &[&out], false)?;
/// let l = Layout::contiguous([3]);
/// assert_eq!(vm.read_blob(&out, move |m| gather_host::<bool>(m, &l))?, [true, false, false]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn compare(op: CmpOp, dtype: DType, la: Lay, lb: Lay) -> impl Kernel {
    FnKernel::new(
        op.name(),
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            crate::dispatch!(dtype, T => {
                // SAFETY: inputs 0 and 1 are read, output 0 written; the output is a fresh blob.
                let (a, b, o) = unsafe { (input::<T>(&ins[0]), input::<T>(&ins[1]), output::<Bool8>(&outs[0])) };
                macro_rules! go { ($f:expr) => { map2_lay(a, &la, b, &lb, o, |x: T, y: T| Bool8($f(x, y) as u8)) }; }
                match op {
                    CmpOp::Eq => go!(|x: T, y: T| x == y),
                    CmpOp::Ne => go!(|x: T, y: T| x != y),
                    CmpOp::Lt => go!(|x: T, y: T| x < y),
                    CmpOp::Le => go!(|x: T, y: T| x <= y),
                    CmpOp::Gt => go!(|x: T, y: T| x > y),
                    CmpOp::Ge => go!(|x: T, y: T| x >= y),
                    CmpOp::And => go!(|x: T, y: T| (x != T::ZERO) & (y != T::ZERO)),
                    CmpOp::Or => go!(|x: T, y: T| (x != T::ZERO) | (y != T::ZERO)),
                    CmpOp::Xor => go!(|x: T, y: T| (x != T::ZERO) ^ (y != T::ZERO)),
                }
            });
            Ok(())
        },
    )
}

/// `out = cond ? a : b`: input 0 the `Bool` condition, inputs 1 and 2 of `dtype`, all broadcast
/// to the output shape.
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::elementwise::where_;
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (c, a, b) = (vm.new_blob(3), vm.new_blob(3 * 4), vm.new_blob(4));
/// let out = vm.new_blob(3 * 4);
/// vm.run_op(StreamId::CPU, from_host(vec![true, false, true]), &[], &[&c], false)?;
/// vm.run_op(StreamId::CPU, from_host(vec![1.0f32, 2.0, 3.0]), &[], &[&a], false)?;
/// vm.run_op(StreamId::CPU, from_host(vec![0.0f32]), &[], &[&b], false)?;
/// let l = Layout::contiguous([3]);
/// let lb = Layout::contiguous([1]).broadcast_to(&l.shape); // the scalar `b` for every element
/// let k = where_(DType::F32, l.clone(), l.clone(), lb);
/// vm.run_op(StreamId::CPU, k, &[&c, &a, &b], &[&out], false)?;
/// assert_eq!(vm.read_blob(&out, move |m| gather_host::<f32>(m, &l))?, [1.0, 0.0, 3.0]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn where_(dtype: DType, lc: Layout, la: Layout, lb: Layout) -> impl Kernel {
    FnKernel::new(
        "where",
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            crate::dispatch!(dtype, T => {
                // SAFETY: inputs 0..3 are read, output 0 written; the output is a fresh blob.
                let (c, a, b, o) = unsafe {
                    (input::<Bool8>(&ins[0]), input::<T>(&ins[1]), input::<T>(&ins[2]), output::<T>(&outs[0]))
                };
                let n = lc.numel();
                walk(lc.dims(), [&lc.strides, &la.strides, &lb.strides], [lc.offset, la.offset, lb.offset], 0, n,
                    |i, [oc, oa, ob]| o[i] = if c[oc].0 != 0 { a[oa] } else { b[ob] });
            });
            Ok(())
        },
    )
}

/// The loop of [`binary_inplace`] on dense operands (a function of its own: see
/// [`dense1_run`]).
#[inline]
fn inplace_run<T: Elem>(out: &mut [T], x: &[T], f: &impl Fn(T, T) -> T) {
    for (d, &v) in out.iter_mut().zip(x) {
        *d = f(*d, v);
    }
}

/// In place: `out[i] = out[i] op (alpha * x[i])` over output 0's elements in layout `lo`
/// (`alpha` scales `x` for `Add` and `Sub` only, making `add_`'s `alpha` an axpy). Input 0 is `x`
/// in layout `lx` broadcast to `lo`'s shape, of the same dtype, and not the output's blob.
///
/// # Examples
///
/// ```
/// use eddy_ops::{cpu::elementwise::binary_inplace, elementwise::BinaryOp};
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (y, x) = (vm.new_blob(3 * 4), vm.new_blob(3 * 4));
/// vm.run_op(StreamId::CPU, from_host(vec![1.0f32, 2.0, 3.0]), &[], &[&y], false)?;
/// vm.run_op(StreamId::CPU, from_host(vec![1.0f32, 1.0, 1.0]), &[], &[&x], false)?;
/// let l = Layout::contiguous([3]);
/// // `y += 2 * x` (`add_` with `alpha = 2`).
/// let k = binary_inplace(BinaryOp::Add, DType::F32, l.clone(), l.clone(), 2.0);
/// vm.run_op(StreamId::CPU, k, &[&x], &[&y], false)?;
/// assert_eq!(vm.read_blob(&y, move |m| gather_host::<f32>(m, &l))?, [3.0, 4.0, 5.0]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn binary_inplace(
    op: BinaryOp,
    dtype: DType,
    lo: Layout,
    lx: Layout,
    alpha: f64,
) -> impl Kernel {
    FnKernel::new(
        op.name(),
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            fn run<T: Elem>(
                o: &mut [T],
                lo: &Layout,
                x: &[T],
                lx: &Layout,
                f: impl Fn(T, T) -> T + Sync,
            ) {
                match (lo.contiguous_range(), lx.contiguous_range()) {
                    (Some(ro), Some(rx)) => {
                        let x = &x[rx];
                        par_out(&mut o[ro], |st, c| {
                            let e = st + c.len();
                            inplace_run(c, &x[st..e], &f)
                        });
                    }
                    _ => walk(
                        lo.dims(),
                        [&lo.strides, &lx.strides],
                        [lo.offset, lx.offset],
                        0,
                        lo.numel(),
                        |_, [io, ix]| o[io] = f(o[io], x[ix]),
                    ),
                }
            }
            dispatch_float!(dtype, T => {
            // SAFETY: input 0 is read, output 0 written; the op definition made sure they differ.
            let (x, o) = unsafe { (input::<T>(&ins[0]), output::<T>(&outs[0])) };
            type A = <T as FloatElem>::A;
            let al = T::param(alpha);
            macro_rules! go { ($f:expr) => { run(o, &lo, x, &lx, |d: T, v: T| T::down($f(d.up(), v.up()))) }; }
            match op {
                BinaryOp::Add => go!(|d: A, v: A| d + al * v),
                BinaryOp::Sub => go!(|d: A, v: A| d - al * v),
                BinaryOp::Mul => go!(|d: A, v: A| d * v),
                BinaryOp::Div => go!(|d: A, v: A| d / v),
                BinaryOp::Pow => go!(|d: A, v: A| d.powf(v)),
                BinaryOp::Maximum => go!(nan_max::<A>),
                BinaryOp::Minimum => go!(nan_min::<A>),
                BinaryOp::ReluBackward => go!(|d: A, v: A| if d > A::zero() { v } else { A::zero() }),
            }
            Ok(())
        }, else => dispatch_int!(dtype, T => {
            // SAFETY: as above.
            let (x, o) = unsafe { (input::<T>(&ins[0]), output::<T>(&outs[0])) };
            let al = alpha as i64;
            macro_rules! go { ($f:expr) => { run(o, &lo, x, &lx, |d: T, v: T| T::from_i64($f(d.to_i64(), v.to_i64()))) }; }
            match op {
                BinaryOp::Add => go!(|d: i64, v: i64| d.wrapping_add(al.wrapping_mul(v))),
                BinaryOp::Sub => go!(|d: i64, v: i64| d.wrapping_sub(al.wrapping_mul(v))),
                BinaryOp::Mul => go!(|d: i64, v: i64| d.wrapping_mul(v)),
                BinaryOp::Maximum => go!(|d: i64, v: i64| d.max(v)),
                BinaryOp::Minimum => go!(|d: i64, v: i64| d.min(v)),
                _ => return Err(format!("{} in place is not defined for {dtype}", op.name())),
            }
            Ok(())
        }, else => Err(format!("unsupported dtype {dtype}"))))
        },
    )
}
