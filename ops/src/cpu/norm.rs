//! Layer normalisation over the last dim, forward and backward, one instruction each: each
//! row's mean and reciprocal standard deviation in the compute type (two passes over the row,
//! the variance biased as PyTorch's), the affine terms applied in the same pass.

use super::elementwise::{FloatElem, dispatch_float};
use crate::DType;
use crate::kernel::{FnKernel, input, output};
use eddy_vm::Counted;
use eddy_vm::{Blob, instruction::Kernel};
use num_traits::{Float, Zero};

/// Where a layer norm's operands are: `rows` rows of `cols`, the input (or the gradient) dense
/// at `x`, the weight and the bias (each `[cols]`) at their offsets when present.
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::norm::NormLayout;
/// let l = NormLayout { rows: 4, cols: 8, x: 0, weight: Some(0), bias: None, eps: 1e-5 };
/// assert_eq!(l.rows * l.cols, 32);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NormLayout {
    /// Rows normalised independently.
    pub rows: usize,
    /// Elements per row.
    pub cols: usize,
    /// The input's offset (the forward's), or the output gradient's (the backward's).
    pub x: usize,
    /// The weight's offset, if there is one.
    pub weight: Option<usize>,
    /// The bias's offset, if there is one.
    pub bias: Option<usize>,
    /// Added to the variance.
    pub eps: f64,
}

/// `Σ f(j)` for `j < n`, over 8 independent lanes (so that it vectorises).
#[inline(always)]
fn lanes<A: Float>(n: usize, f: impl Fn(usize) -> A) -> A {
    let mut acc = [A::zero(); 8];
    let full = n / 8 * 8;
    for j0 in (0..full).step_by(8) {
        for (t, a) in acc.iter_mut().enumerate() {
            *a = *a + f(j0 + t);
        }
    }
    let s = acc.iter().fold(A::zero(), |s, &a| s + a);
    (full..n).fold(s, |s, j| s + f(j))
}

/// Rows per task for `rows` rows of `cols`.
fn per_task(rows: usize, cols: usize) -> usize {
    if rows * cols < crate::kernel::PAR_MIN || rows < 2 {
        return rows.max(1);
    }
    rows.div_ceil(eddy_vm::par::threads() * crate::kernel::CHUNKS_PER_THREAD)
}

/// Layer norm: input 0 `x`, then the weight and the bias where `l` has them; outputs `y`
/// (`x`'s dtype, dense), each row's mean and reciprocal standard deviation (`f64` for `f64`,
/// else `f32`).
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::norm::{layer_norm, NormLayout};
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (x, y, m, r) = (vm.new_blob(32), vm.new_blob(32), vm.new_blob(8), vm.new_blob(8));
/// vm.run_op(StreamId::CPU, from_host(vec![1f64, 2., 3., 4.]), &[], &[&x], false)?;
/// let l = NormLayout { rows: 1, cols: 4, x: 0, weight: None, bias: None, eps: 0.0 };
/// vm.run_op(StreamId::CPU, layer_norm(DType::F64, l), &[&x], &[&y, &m, &r], false)?;
/// let y = vm.read_blob(&y, |b| gather_host::<f64>(b, &Layout::contiguous([4])))?;
/// assert!((y[0] + 1.5 / 1.25f64.sqrt()).abs() < 1e-12); // mean 2.5, variance 1.25
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn layer_norm(dtype: DType, l: NormLayout) -> impl Kernel {
    FnKernel::new(
        "layer_norm",
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            dispatch_float!(dtype, T => {
            type A = <T as FloatElem>::A;
            let NormLayout { rows, cols, .. } = l;
            // SAFETY: the inputs are read and the outputs written by this instruction; the
            // outputs are fresh blobs.
            let (x, y, mean, rstd) = unsafe {
                (input::<T>(&ins[0]), output::<T>(&outs[0]), output::<A>(&outs[1]),
                 output::<A>(&outs[2]))
            };
            let mut at = 1;
            let mut affine = |off: Option<usize>| off.map(|o| {
                // SAFETY: as above; inputs 1 and 2 are the weight and the bias, when present.
                let v = unsafe { input::<T>(&ins[at]) };
                at += 1;
                &v[o..o + cols]
            });
            let (w, b) = (affine(l.weight), affine(l.bias));
            if rows * cols == 0 {
                mean[..rows].fill(A::nan());
                rstd[..rows].fill(A::nan());
                return Ok(());
            }
            let x = &x[l.x..l.x + rows * cols];
            let eps = T::param(l.eps);
            let n = T::param(cols as f64);
            let mut items: Vec<(&mut [T], (&mut A, &mut A))> = y[..rows * cols]
                .chunks_mut(cols)
                .zip(mean[..rows].iter_mut().zip(rstd[..rows].iter_mut()))
                .collect();
            let run = |start: usize, chunk: &mut [(&mut [T], (&mut A, &mut A))]| {
                for (i, (y, (m, r))) in chunk.iter_mut().enumerate() {
                    let row = &x[(start + i) * cols..][..cols];
                    let mu = lanes(cols, |j| row[j].up()) / n;
                    let var = lanes(cols, |j| {
                        let d = row[j].up() - mu;
                        d * d
                    }) / n;
                    let rs = (var + eps).sqrt().recip();
                    for (j, (d, v)) in y.iter_mut().zip(row).enumerate() {
                        let mut h = (v.up() - mu) * rs;
                        if let Some(w) = w {
                            h *= w[j].up();
                        }
                        if let Some(b) = b {
                            h += b[j].up();
                        }
                        *d = T::down(h);
                    }
                    (**m, **r) = (mu, rs);
                }
            };
            eddy_vm::par::for_each_chunk_mut(&mut items, per_task(rows, cols), run);
            Ok(())
        }, else => Err(format!("unsupported dtype {dtype}")))
        },
    )
}

/// The gradient of [`layer_norm`]: inputs the output's gradient `dy` (dense at `l.x`), the
/// forward's input `x` (dense at `x_offset`), its means and reciprocal deviations, and the
/// weight where `l` has one; outputs the input's gradient, then the weight's and the bias's
/// where `l` has them (`dw = Σ dy · x̂`, `db = Σ dy` over the rows).
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::norm::{layer_norm_backward, NormLayout};
/// use eddy_ops::DType;
/// let l = NormLayout { rows: 2, cols: 3, x: 0, weight: Some(0), bias: Some(0), eps: 1e-5 };
/// let _kernel = layer_norm_backward(DType::F32, l, 0);
/// ```
pub fn layer_norm_backward(dtype: DType, l: NormLayout, x_offset: usize) -> impl Kernel {
    FnKernel::new(
        "layer_norm_backward",
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            dispatch_float!(dtype, T => {
            type A = <T as FloatElem>::A;
            let NormLayout { rows, cols, .. } = l;
            // SAFETY: the inputs are read and the outputs written by this instruction; the
            // outputs are fresh blobs.
            let (dy, x, mean, rstd, dx) = unsafe {
                (input::<T>(&ins[0]), input::<T>(&ins[1]), input::<A>(&ins[2]),
                 input::<A>(&ins[3]), output::<T>(&outs[0]))
            };
            // SAFETY: as above; input 4 is the weight when present.
            let w = l.weight.map(|o| &unsafe { input::<T>(&ins[4]) }[o..o + cols]);
            let n = rows * cols;
            let (dy, x) = (&dy[l.x..l.x + n], &x[x_offset..x_offset + n]);
            let ncols = T::param(cols as f64);
            let mut items: Vec<&mut [T]> = dx[..n].chunks_mut(cols.max(1)).collect();
            let run = |start: usize, chunk: &mut [&mut [T]]| {
                for (i, dx) in chunk.iter_mut().enumerate() {
                    let r = start + i;
                    let (dy, x) = (&dy[r * cols..][..cols], &x[r * cols..][..cols]);
                    let (mu, rs) = (mean[r], rstd[r]);
                    let g = |j: usize| match w {
                        Some(w) => dy[j].up() * w[j].up(),
                        None => dy[j].up(),
                    };
                    let sg = lanes(cols, g);
                    let sgx = lanes(cols, |j| g(j) * (x[j].up() - mu) * rs);
                    let (mg, mgx) = (sg / ncols, sgx / ncols);
                    for (j, d) in dx.iter_mut().enumerate() {
                        let xh = (x[j].up() - mu) * rs;
                        *d = T::down(rs * (g(j) - mg - xh * mgx));
                    }
                }
            };
            if cols > 0 {
                eddy_vm::par::for_each_chunk_mut(&mut items, per_task(rows, cols), run);
            }
            // dw and db: sums over the rows, accumulated row by row (the loop vectorises).
            let mut at = 1;
            for (present, bias) in [(l.weight.is_some(), false), (l.bias.is_some(), true)] {
                if !present {
                    continue;
                }
                // SAFETY: outputs 1 and 2 are the weight's and the bias's gradients, when present.
                let out = unsafe { output::<T>(&outs[at]) };
                at += 1;
                let mut acc = vec![A::zero(); cols];
                for r in 0..rows {
                    let (dy, x) = (&dy[r * cols..][..cols], &x[r * cols..][..cols]);
                    let (mu, rs) = (mean[r], rstd[r]);
                    for ((a, d), v) in acc.iter_mut().zip(dy).zip(x) {
                        *a = if bias { *a + d.up() } else { *a + d.up() * ((v.up() - mu) * rs) };
                    }
                }
                for (o, a) in out[..cols].iter_mut().zip(&acc) {
                    *o = T::down(*a);
                }
            }
            Ok(())
        }, else => Err(format!("unsupported dtype {dtype}")))
        },
    )
}
