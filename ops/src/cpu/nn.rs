//! Row-wise kernels over the last dim: softmax and log-softmax with their gradients, and the
//! negative log-likelihood of class targets with its gradient.

use super::elementwise::{FloatElem, dispatch_float};
use super::fastmath::Transcendental;
use crate::DType;
use crate::kernel::{FnKernel, input, output};
use crate::kinds::ClassDims;
use eddy_vm::Counted;
use eddy_vm::{Blob, instruction::Kernel};
use num_traits::{Float, One, Zero};

/// The sum of `v` in the compute type, over 8 independent lanes (so it vectorises).
#[inline(always)]
fn lane_sum<T: FloatElem>(v: &[T]) -> T::A {
    let mut acc = [T::A::zero(); 8];
    let chunks = v.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for k in 0..8 {
            acc[k] = acc[k] + c[k].up();
        }
    }
    let mut s = acc.iter().fold(T::A::zero(), |a, &b| a + b);
    for r in rest {
        s = s + r.up();
    }
    s
}

/// The largest of `v` in the compute type (NaN ignored, as `Float::max`; `-inf` when empty),
/// over 16 independent lanes: the maximum is exact, so it is the sequential fold's.
#[inline(always)]
fn lane_max<T: FloatElem>(v: &[T]) -> T::A {
    let mut acc = [T::A::neg_infinity(); 16];
    let mut chunks = v.chunks_exact(16);
    for c in &mut chunks {
        for (a, x) in acc.iter_mut().zip(c) {
            *a = a.max(x.up());
        }
    }
    let m = acc.iter().fold(T::A::neg_infinity(), |m, &a| m.max(a));
    chunks.remainder().iter().fold(m, |m, x| m.max(x.up()))
}

/// Softmax (or log-softmax when `log`) of each row of `cols` elements of `x` into `y`.
#[inline(always)]
fn softmax_rows<T: FloatElem>(x: &[T], y: &mut [T], cols: usize, log: bool) {
    for (x, y) in x.chunks_exact(cols).zip(y.chunks_exact_mut(cols)) {
        // An infinite max is kept, as PyTorch: a row holding +inf (or only -inf) is NaN
        // throughout.
        let m = lane_max(x);
        // e^(x - m) into the output first: a loop of its own vectorises.
        for (d, v) in y.iter_mut().zip(x) {
            *d = T::down((v.up() - m).exp_());
        }
        let s = lane_sum(y);
        if log {
            // `(x - m) - ln s`: adding `ln s` to `m` first would round it away at large
            // logits (10000 + ln 2 in f32 is 10000.693, not 10000.6931).
            let ls = s.ln();
            for (d, v) in y.iter_mut().zip(x) {
                *d = T::down((v.up() - m) - ls);
            }
        } else {
            let inv = T::A::one() / s;
            for d in y.iter_mut() {
                *d = T::down(d.up() * inv);
            }
        }
    }
}

super::widest!(softmax_rows_wide, softmax_rows, (x: &[T], y: &mut [T], cols: usize, log: bool));

/// The gradient of [`softmax_rows`] for rows of `cols` of the output's gradient `g` and the
/// forward's output `y` into `d`.
#[inline(always)]
fn grad_rows<T: FloatElem>([g, y]: [&[T]; 2], d: &mut [T], cols: usize, log: bool) {
    let rows = g.chunks_exact(cols).zip(y.chunks_exact(cols));
    for ((g, y), d) in rows.zip(d.chunks_exact_mut(cols)) {
        if log {
            let s = T::down(super::reduce::sum_float(g)).up();
            for ((d, g), y) in d.iter_mut().zip(g).zip(y) {
                let e = T::down(y.up().exp_());
                *d = T::down(g.up() - T::down(e.up() * s).up());
            }
        } else {
            // Σ g·y over the products as rounded, staged in the output row.
            for ((d, g), y) in d.iter_mut().zip(g).zip(y) {
                *d = T::down(g.up() * y.up());
            }
            let s = T::down(super::reduce::sum_float(d)).up();
            for ((d, g), y) in d.iter_mut().zip(g).zip(y) {
                *d = T::down(y.up() * T::down(g.up() - s).up());
            }
        }
    }
}

super::widest!(grad_rows_wide, grad_rows, (ops: [&[T]; 2], d: &mut [T], cols: usize, log: bool));

/// Softmax (or log-softmax if `log`) over rows of `cols` elements: input 0 contiguous at
/// `offset`, output 0 contiguous, both float `dtype`. Numerically stable (subtracts the row max).
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::nn::softmax;
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (x, p, lp) = (vm.new_blob(4 * 8), vm.new_blob(4 * 8), vm.new_blob(4 * 8));
/// let ln3 = 3f64.ln();
/// vm.run_op(StreamId::CPU, from_host(vec![1.0f64, 1.0, 0.0, ln3]), &[], &[&x], false)?;
/// // Two rows of two.
/// vm.run_op(StreamId::CPU, softmax(DType::F64, 0, 2, 2, false), &[&x], &[&p], false)?;
/// vm.run_op(StreamId::CPU, softmax(DType::F64, 0, 2, 2, true), &[&x], &[&lp], false)?;
/// let l = Layout::contiguous([4]);
/// let p = vm.read_blob(&p, move |m| gather_host::<f64>(m, &l))?;
/// let l = Layout::contiguous([4]);
/// let lp = vm.read_blob(&lp, move |m| gather_host::<f64>(m, &l))?;
/// for (got, want) in p.iter().zip([0.5, 0.5, 0.25, 0.75]) {
///     assert!((got - want).abs() < 1e-12, "{p:?}");
/// }
/// assert!((lp[2] - 0.25f64.ln()).abs() < 1e-12, "{lp:?}");
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn softmax(dtype: DType, offset: usize, rows: usize, cols: usize, log: bool) -> impl Kernel {
    let name = if log { "log_softmax" } else { "softmax" };
    FnKernel::new(
        name,
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            dispatch_float!(dtype, T => {
            // SAFETY: input 0 is read and output 0 written by this instruction; they differ.
            let (a, o) = unsafe { (input::<T>(&ins[0]), output::<T>(&outs[0])) };
            if rows * cols == 0 {
                return Ok(());
            }
            let a = &a[offset..offset + rows * cols];
            let o = &mut o[..rows * cols];
            if rows * cols >= crate::kernel::PAR_MIN && rows > 1 {
                let per = rows.div_ceil(eddy_vm::par::threads() * crate::kernel::CHUNKS_PER_THREAD);
                eddy_vm::par::for_each_chunk_mut(o, per * cols, |start, ys| {
                    softmax_rows_wide(&a[start..start + ys.len()], ys, cols, log)
                });
            } else {
                softmax_rows_wide(a, o, cols, log);
            }
            Ok(())
        }, else => Err(format!("unsupported dtype {dtype}")))
        },
    )
}

/// The gradient of [`softmax`] (or of log-softmax when `log`) over rows of `cols` elements:
/// input 0 the output's gradient `g`, input 1 the forward's output `y`, both dense
/// `[rows, cols]` (at `g_offset` and `y_offset`); output 0, dense, is
/// `g - exp(y) · Σ g` for log-softmax and `y · (g - Σ g·y)` for softmax, the sums over each
/// row. Each step rounds as the elementwise ops and the row sum it stands for, so the result
/// is bit for bit theirs.
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::nn::softmax_backward;
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (g, y, gx) = (vm.new_blob(2 * 8), vm.new_blob(2 * 8), vm.new_blob(2 * 8));
/// vm.run_op(StreamId::CPU, from_host(vec![1.0f64, 0.0]), &[], &[&g], false)?;
/// vm.run_op(StreamId::CPU, from_host(vec![0.25f64, 0.75]), &[], &[&y], false)?;
/// // Softmax: y · (g - Σ g·y) = [0.25 · 0.75, 0.75 · -0.25].
/// let k = softmax_backward(DType::F64, 0, 0, 1, 2, false);
/// vm.run_op(StreamId::CPU, k, &[&g, &y], &[&gx], false)?;
/// let l = Layout::contiguous([2]);
/// assert_eq!(vm.read_blob(&gx, move |m| gather_host::<f64>(m, &l))?, [0.1875, -0.1875]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn softmax_backward(
    dtype: DType,
    g_offset: usize,
    y_offset: usize,
    rows: usize,
    cols: usize,
    log: bool,
) -> impl Kernel {
    let name = if log {
        "log_softmax_backward"
    } else {
        "softmax_backward"
    };
    FnKernel::new(
        name,
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            dispatch_float!(dtype, T => {
            // SAFETY: inputs are read and output 0 written by this instruction; the output is
            // neither input.
            let (g, y, o) = unsafe { (input::<T>(&ins[0]), input::<T>(&ins[1]), output::<T>(&outs[0])) };
            let n = rows * cols;
            if n == 0 {
                return Ok(());
            }
            let (g, y) = (&g[g_offset..g_offset + n], &y[y_offset..y_offset + n]);
            let o = &mut o[..n];
            if n >= crate::kernel::PAR_MIN && rows > 1 {
                let per = rows.div_ceil(eddy_vm::par::threads() * crate::kernel::CHUNKS_PER_THREAD);
                eddy_vm::par::for_each_chunk_mut(o, per * cols, |start, ds| {
                    let at = start..start + ds.len();
                    grad_rows_wide([&g[at.clone()], &y[at]], ds, cols, log)
                });
            } else {
                grad_rows_wide([g, y], o, cols, log);
            }
            Ok(())
        }, else => Err(format!("unsupported dtype {dtype}")))
        },
    )
}

use crate::kinds::IGNORE_INDEX;

/// Reads the class targets `d` describes from `b`: `Some(class)`, or `None` for
/// [`IGNORE_INDEX`]. Any other target outside `0..cols` fails, naming `op`.
fn class_targets(op: &str, b: &Blob, d: ClassDims) -> Result<Vec<Option<usize>>, String> {
    let ClassDims {
        idx_dtype,
        idx_offset: offset,
        rows,
        cols,
        ..
    } = d;
    let check = |t: i64| match t {
        IGNORE_INDEX => Ok(None),
        // In u128: `cols` may exceed i64::MAX on paper.
        t if t >= 0 && (t as u128) < cols as u128 => Ok(Some(t as usize)),
        t => Err(format!(
            "{op}: index {t} out of range for a dim of size {cols}"
        )),
    };
    match idx_dtype {
        // SAFETY: the target blob is an input of the calling kernel.
        DType::I64 => (unsafe { input::<i64>(b) })[offset..offset + rows]
            .iter()
            .map(|&t| check(t))
            .collect(),
        // SAFETY: as above.
        DType::U8 => (unsafe { input::<u8>(b) })[offset..offset + rows]
            .iter()
            .map(|&t| check(i64::from(t)))
            .collect(),
        d => Err(format!("{op}: class targets must be i64 or u8, not {d}")),
    }
}

/// The mean negative log-likelihood, PyTorch's `nll_loss` with its defaults: input 0 holds
/// log-probabilities, dense `[rows, cols]` at `d.offset`; input 1 the class targets `d`
/// describes; output 0, one element of `d.dtype`, is
/// `-(Σ input[i, target[i]]) / kept` over the targets that are not -100 (NaN if none is). A
/// target outside `0..cols` other than -100 fails the kernel, naming `op`. The picked values
/// are summed as the reductions sum, so with no target left out the loss is bit for bit the
/// mean of the gathered values, negated.
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::nn::nll_loss;
/// use eddy_ops::nn::ClassDims;
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (lp, t, loss) = (vm.new_blob(6 * 4), vm.new_blob(3 * 8), vm.new_blob(4));
/// vm.run_op(StreamId::CPU, from_host(vec![-1.0f32, -2.0, -3.0, -4.0, -5.0, -6.0]), &[], &[&lp], false)?;
/// vm.run_op(StreamId::CPU, from_host(vec![1i64, -100, 0]), &[], &[&t], false)?;
/// // Rows 0 and 2 count: -(-2 + -5) / 2.
/// let d = ClassDims { dtype: DType::F32, idx_dtype: DType::I64, offset: 0, idx_offset: 0,
///                     rows: 3, cols: 2 };
/// let k = nll_loss("nll_loss", d);
/// vm.run_op(StreamId::CPU, k, &[&lp, &t], &[&loss], false)?;
/// let l = Layout::contiguous([1]);
/// assert_eq!(vm.read_blob(&loss, move |m| gather_host::<f32>(m, &l))?, [3.5]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn nll_loss(op: &'static str, d: ClassDims) -> impl Kernel {
    let ClassDims {
        dtype,
        offset,
        cols,
        ..
    } = d;
    FnKernel::new(op, move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
        let targets = class_targets(op, &ins[1], d)?;
        dispatch_float!(dtype, T => {
            // SAFETY: inputs are read and output 0 written by this instruction; they differ.
            let (a, o) = unsafe { (input::<T>(&ins[0]), output::<T>(&outs[0])) };
            type A = <T as FloatElem>::A;
            let mut kept = 0usize;
            // Left-out rows add a zero in their place, so the summation order is the
            // reduction's over all rows.
            let picked: Vec<T> = (targets.iter().enumerate())
                .map(|(i, t)| match t {
                    Some(c) => {
                        kept += 1;
                        a[offset + i * cols + c]
                    }
                    None => T::down(A::zero()),
                })
                .collect();
            let n = <A as num_traits::NumCast>::from(kept).unwrap_or(A::nan());
            o[0] = T::down(-(super::reduce::sum_float(&picked) / n));
            Ok(())
        }, else => Err(format!("{op}: unsupported dtype {dtype}")))
    })
}

/// The gradient of [`nll_loss`] with respect to its log-probabilities: input 0 the loss's
/// gradient (one element of `d.dtype` at `d.offset`), input 1 the class targets; output 0,
/// dense `[rows, cols]`, is zero but at each kept row's target, where it is `-g / kept` (what
/// the mean, the negation and the gather's backward give there). Targets are checked as
/// [`nll_loss`] checks them.
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::nn::nll_loss_backward;
/// use eddy_ops::nn::ClassDims;
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (g, t, gx) = (vm.new_blob(4), vm.new_blob(2), vm.new_blob(4 * 4));
/// vm.run_op(StreamId::CPU, from_host(vec![1.0f32]), &[], &[&g], false)?;
/// vm.run_op(StreamId::CPU, from_host(vec![1u8, 0]), &[], &[&t], false)?;
/// let d = ClassDims { dtype: DType::F32, idx_dtype: DType::U8, offset: 0, idx_offset: 0,
///                     rows: 2, cols: 2 };
/// let k = nll_loss_backward("nll_loss", d);
/// vm.run_op(StreamId::CPU, k, &[&g, &t], &[&gx], false)?;
/// let l = Layout::contiguous([4]);
/// assert_eq!(vm.read_blob(&gx, move |m| gather_host::<f32>(m, &l))?, [0.0, -0.5, -0.5, 0.0]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn nll_loss_backward(op: &'static str, d: ClassDims) -> impl Kernel {
    let ClassDims {
        dtype,
        offset: g_offset,
        rows,
        cols,
        ..
    } = d;
    FnKernel::new(op, move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
        let targets = class_targets(op, &ins[1], d)?;
        dispatch_float!(dtype, T => {
            // SAFETY: inputs are read and output 0 written by this instruction; they differ.
            let (g, o) = unsafe { (input::<T>(&ins[0]), output::<T>(&outs[0])) };
            type A = <T as FloatElem>::A;
            let kept = targets.iter().flatten().count();
            let n = <A as num_traits::NumCast>::from(kept).unwrap_or(A::nan());
            // As the composed ops round: the negation, the division by the count, then
            // the scatter's addition to zero.
            let v = T::down(A::zero() + T::down(T::down(-g[g_offset].up()).up() / n).up());
            if rows * cols == 0 {
                return Ok(());
            }
            let zero = T::down(A::zero());
            // Rows `first..` of the gradient, in `block`.
            let write = |first: usize, block: &mut [T]| {
                block.fill(zero);
                for (d, t) in block.chunks_mut(cols).zip(&targets[first..]) {
                    if let Some(c) = t {
                        d[*c] = v;
                    }
                }
            };
            let o = &mut o[..rows * cols];
            if rows * cols >= crate::kernel::PAR_MIN && rows > 1 {
                // A large vocabulary's zeros are most of the work: both cores write them.
                let per = rows.div_ceil(eddy_vm::par::threads() * crate::kernel::CHUNKS_PER_THREAD);
                eddy_vm::par::for_each_chunk_mut(o, per * cols, |start, block| write(start / cols, block));
            } else {
                write(0, o);
            }
            Ok(())
        }, else => Err(format!("{op}: unsupported dtype {dtype}")))
    })
}
