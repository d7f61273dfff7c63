//! Binary kernels with broadcasting, comparisons, `where` and the in-place forms.

use super::elem::{FloatElem, IntElem, dispatch_float, dispatch_int};
use super::map::map2_lay;
use super::unary::{apply_float, int_pow};
use crate::cpu::fastmath::Transcendental;
use crate::kernel::{FnKernel, input, output, par_out, walk};
use crate::kinds::UnaryOp;
use crate::kinds::{BinaryOp, CmpOp};
use crate::program::{Elementwise, Pos};
use crate::{Bool8, DType, Elem, Lay, Layout};
use eddy_vm::Blob;
use eddy_vm::Counted;
use eddy_vm::instruction::{ComputeCtx, Kernel};
use num_traits::Zero;

#[inline(always)]
pub(crate) fn nan_max<A: PartialOrd + Copy>(x: A, y: A) -> A {
    #[allow(clippy::eq_op)]
    if x != x || x >= y { x } else { y }
}
#[inline(always)]
pub(crate) fn nan_min<A: PartialOrd + Copy>(x: A, y: A) -> A {
    #[allow(clippy::eq_op)]
    if x != x || x <= y { x } else { y }
}

/// Python's `%` on floats, as PyTorch's `remainder`: `fmod`, moved by `y` when the signs differ.
#[inline(always)]
fn rem_float<A: num_traits::Float>(x: A, y: A) -> A {
    let m = x % y;
    if m != A::zero() && (y < A::zero()) != (m < A::zero()) {
        m + y
    } else {
        m
    }
}

/// Python's `//` on floats, as PyTorch's `div_floor`: exact where `x / y` rounds across an
/// integer (from `fmod`), and `x / y` itself for `y == 0` (an infinity or NaN).
#[inline(always)]
fn floor_div_float<A: num_traits::Float>(x: A, y: A) -> A {
    if y == A::zero() {
        return x / y;
    }
    let m = x % y;
    let mut div = (x - m) / y;
    if m != A::zero() && (y < A::zero()) != (m < A::zero()) {
        div = div - A::one();
    }
    if div == A::zero() {
        return A::zero().copysign(x / y);
    }
    let f = div.floor();
    if div - f > A::from(0.5).unwrap_or_else(A::zero) {
        f + A::one()
    } else {
        f
    }
}

/// `x op y` on floats, in their compute type: what the binary kernels (and the kernels merged
/// from several) compute for each element.
#[inline(always)]
pub(crate) fn apply_binary_float<A: num_traits::Float + Transcendental>(
    op: BinaryOp,
    x: A,
    y: A,
) -> A {
    match op {
        BinaryOp::Add => x + y,
        BinaryOp::Sub => x - y,
        BinaryOp::Mul => x * y,
        BinaryOp::Div => x / y,
        BinaryOp::Pow => x.powf(y),
        BinaryOp::Maximum => nan_max(x, y),
        BinaryOp::Minimum => nan_min(x, y),
        BinaryOp::ReluBackward => {
            if x > A::zero() {
                y
            } else {
                A::zero()
            }
        }
        BinaryOp::FloorDiv => floor_div_float(x, y),
        BinaryOp::Rem => rem_float(x, y),
        BinaryOp::GeluBackward => y * apply_float(UnaryOp::GeluGrad, x, A::zero(), A::zero()),
    }
}

/// `o = g · GELU'(x)` over dense slices (GELU's backward), as [`apply_binary_float`].
#[inline(always)]
fn gelu_backward_run<T: FloatElem>(x: &[T], g: &[T], o: &mut [T]) {
    for ((d, x), g) in o.iter_mut().zip(x).zip(g) {
        *d = T::down(apply_binary_float(BinaryOp::GeluBackward, x.up(), g.up()));
    }
}

crate::cpu::widest!(gelu_backward_slice, gelu_backward_run, (x: &[T], g: &[T], o: &mut [T]));

/// [`gelu_backward_slice`] on the kernel threads when long.
fn gelu_backward_dense<T: FloatElem>(x: &[T], g: &[T], o: &mut [T]) {
    let slice = gelu_backward_slice::<T>;
    let n = o.len();
    let (x, g) = (&x[..n], &g[..n]);
    if n < crate::kernel::PAR_MIN {
        return slice(x, g, o);
    }
    let per = n.div_ceil(eddy_vm::par::threads() * crate::kernel::CHUNKS_PER_THREAD);
    eddy_vm::par::for_each_chunk_mut(o, per, |st, c| {
        slice(&x[st..st + c.len()], &g[st..st + c.len()], c)
    });
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
    BinaryKernel { op, dtype, la, lb }
}

/// The kernel [`binary`] returns: a struct rather than a closure, so that it can say what it
/// computes ([`Kernel::describe`]) without carrying anything more.
struct BinaryKernel {
    op: BinaryOp,
    dtype: DType,
    la: Lay,
    lb: Lay,
}

impl Kernel for BinaryKernel {
    fn name(&self) -> &str {
        self.op.name()
    }
    fn compute(
        &mut self,
        ins: &[Counted<Blob>],
        outs: &[Counted<Blob>],
        _ctx: &mut ComputeCtx<'_>,
    ) -> eddy_vm::Result<()> {
        let BinaryKernel {
            op,
            dtype,
            ref la,
            ref lb,
        } = *self;
        run_binary(op, dtype, la, lb, ins, outs).map_err(|m| eddy_vm::Error::kernel(op.name(), m))
    }
    fn describe(&self) -> Option<Box<dyn std::any::Any + Send>> {
        Some(Box::new(self.what()?))
    }
    fn is_described_by(&self, description: &dyn std::any::Any) -> bool {
        self.what().is_some_and(|w| w.is(description))
    }
}

impl BinaryKernel {
    /// What it computes, where a merged kernel can compute it.
    fn what(&self) -> Option<Elementwise> {
        let (a, b) = (Pos::of(&self.la)?, Pos::of(&self.lb)?);
        let (op, dtype) = (self.op, self.dtype);
        Some(Elementwise::Binary { op, dtype, a, b })
    }
}

/// The body of [`BinaryKernel`].
#[inline(always)]
fn run_binary(
    op: BinaryOp,
    dtype: DType,
    la: &Lay,
    lb: &Lay,
    ins: &[Counted<Blob>],
    outs: &[Counted<Blob>],
) -> Result<(), String> {
    dispatch_float!(dtype, T => {
            // SAFETY: inputs 0 and 1 are read, output 0 written; the output is a fresh blob.
            let (a, b, o) = unsafe { (input::<T>(&ins[0]), input::<T>(&ins[1]), output::<T>(&outs[0])) };
            // A loop per op, the op a constant in it (so its match folds away and it vectorises).
            macro_rules! go {
                ($($v:ident),*) => {
                    match op {
                        $(BinaryOp::$v => map2_lay(a, &la, b, &lb, o, |x: T, y: T| {
                            T::down(apply_binary_float(BinaryOp::$v, x.up(), y.up()))
                        }),)*
                    }
                };
            }
            if let (BinaryOp::GeluBackward, Lay::Dense(oa), Lay::Dense(ob)) = (op, la, lb) {
                gelu_backward_dense(&a[*oa..], &b[*ob..], o);
                return Ok(());
            }
            go!(Add, Sub, Mul, Div, Pow, Maximum, Minimum, ReluBackward, FloorDiv, Rem, GeluBackward);
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
                BinaryOp::GeluBackward => return Err("gelu_backward is defined on floats".into()),
                BinaryOp::FloorDiv | BinaryOp::Rem => {
                    let by_zero = std::sync::atomic::AtomicBool::new(false);
                    let floor = op == BinaryOp::FloorDiv;
                    go!(|x: i64, y: i64| {
                        if y == 0 {
                            by_zero.store(true, std::sync::atomic::Ordering::Relaxed);
                            return 0;
                        }
                        let (q, r) = (x.wrapping_div(y), x.wrapping_rem(y));
                        // Toward negative infinity, as Python: the remainder takes `y`'s sign.
                        let adjust = r != 0 && (r < 0) != (y < 0);
                        match (floor, adjust) {
                            (true, true) => q.wrapping_sub(1),
                            (true, false) => q,
                            (false, true) => r.wrapping_add(y),
                            (false, false) => r,
                        }
                    });
                    if by_zero.into_inner() {
                        return Err(format!("{}: integer division by zero", op.name()));
                    }
                }
            }
            Ok(())
        }, else => Err(format!("unsupported dtype {dtype}"))))
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
pub(super) fn inplace_run<T: Elem>(out: &mut [T], x: &[T], f: &impl Fn(T, T) -> T) {
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
                BinaryOp::FloorDiv => go!(floor_div_float::<A>),
                BinaryOp::Rem => go!(rem_float::<A>),
                BinaryOp::GeluBackward => {
                    go!(|d: A, v: A| apply_binary_float(BinaryOp::GeluBackward, d, v))
                }
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
