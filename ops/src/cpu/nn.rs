//! Row-wise kernels over the last dim: softmax and log-softmax.

use super::elementwise::{FloatElem, dispatch_float};
use super::fastmath::Transcendental;
use crate::DType;
use crate::kernel::{FnKernel, input, output};
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
            let row = |x: &[T], y: &mut [T]| {
                type A = <T as FloatElem>::A;
                // An infinite max is kept, as PyTorch: a row holding +inf (or only -inf) is
                // NaN throughout.
                let m = x.iter().fold(A::neg_infinity(), |m, v| m.max(v.up()));
                // e^(x - m) into the output first: a loop of its own vectorises.
                for (d, v) in y.iter_mut().zip(x) {
                    *d = T::down((v.up() - m).exp_());
                }
                let s = lane_sum(y);
                if log {
                    // `(x - m) - ln s`: adding `ln s` to `m` first would round it away at
                    // large logits (10000 + ln 2 in f32 is 10000.693, not 10000.6931).
                    let ls = s.ln();
                    for (d, v) in y.iter_mut().zip(x) {
                        *d = T::down((v.up() - m) - ls);
                    }
                } else {
                    let inv = A::one() / s;
                    for d in y.iter_mut() {
                        *d = T::down(d.up() * inv);
                    }
                }
            };
            if rows * cols >= crate::kernel::PAR_MIN && rows > 1 {
                let per = rows.div_ceil(eddy_vm::par::threads() * crate::kernel::CHUNKS_PER_THREAD);
                eddy_vm::par::for_each_chunk_mut(o, per * cols, |start, ys| {
                    for (y, x) in ys.chunks_mut(cols).zip(a[start..].chunks(cols)) {
                        row(x, y);
                    }
                });
            } else {
                for (y, x) in o.chunks_mut(cols).zip(a.chunks(cols)) {
                    row(x, y);
                }
            }
            Ok(())
        }, else => Err(format!("unsupported dtype {dtype}")))
        },
    )
}
