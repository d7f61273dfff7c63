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

/// Accumulators per sum: one AVX-512 register of `f32`, so the sums vectorise; the same count
/// on every CPU, so every CPU adds in the same order and gets the same bits.
const LANES: usize = 16;

/// `Σ f(row[j])` over [`LANES`] independent accumulators.
#[inline(always)]
fn sum_map<T: FloatElem>(row: &[T], f: impl Fn(T::A) -> T::A) -> T::A {
    let mut acc = [T::A::zero(); LANES];
    let mut chunks = row.chunks_exact(LANES);
    for c in &mut chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *a = *a + f(v.up());
        }
    }
    let s = acc.iter().fold(T::A::zero(), |s, &a| s + a);
    chunks.remainder().iter().fold(s, |s, v| s + f(v.up()))
}

/// `(Σ g_j, Σ g_j · x̂_j)` of a row, `g = dy · w` (or `dy`), `x̂ = (x - mu) · rs`.
#[inline(always)]
fn grad_sums<T: FloatElem>(dy: &[T], x: &[T], w: Option<&[T]>, mu: T::A, rs: T::A) -> (T::A, T::A) {
    let z = T::A::zero();
    let (mut sg, mut sgx) = ([z; LANES], [z; LANES]);
    let n = dy.len() / LANES * LANES;
    let one = |j: usize| {
        let g = match w {
            Some(w) => dy[j].up() * w[j].up(),
            None => dy[j].up(),
        };
        (g, g * ((x[j].up() - mu) * rs))
    };
    for j0 in (0..n).step_by(LANES) {
        for t in 0..LANES {
            let (g, gx) = one(j0 + t);
            sg[t] = sg[t] + g;
            sgx[t] = sgx[t] + gx;
        }
    }
    let fold = |a: [T::A; LANES]| a.iter().fold(z, |s, &v| s + v);
    (n..dy.len()).fold((fold(sg), fold(sgx)), |(a, b), j| {
        let (g, gx) = one(j);
        (a + g, b + gx)
    })
}

/// Normalises `rows` rows of `x` into `y` (each row's statistics into `mean`, `rstd`), then
/// applies the weight and the bias.
#[inline(always)]
fn norm_rows<T: FloatElem>(
    x: &[T],
    y: &mut [T],
    stats: (&mut [T::A], &mut [T::A]),
    (w, b): (Option<&[T]>, Option<&[T]>),
    (cols, eps): (usize, T::A),
) {
    let (mean, rstd) = stats;
    let n = T::param(cols as f64);
    for (((row, y), m), r) in x
        .chunks_exact(cols)
        .zip(y.chunks_exact_mut(cols))
        .zip(mean.iter_mut())
        .zip(rstd.iter_mut())
    {
        let mu = sum_map(row, |v| v) / n;
        let var = sum_map(row, |v| (v - mu) * (v - mu)) / n;
        let rs = (var + eps).sqrt().recip();
        let h = |v: &T| (v.up() - mu) * rs;
        match (w, b) {
            (Some(w), Some(b)) => {
                for (((d, v), w), b) in y.iter_mut().zip(row).zip(w).zip(b) {
                    *d = T::down(h(v) * w.up() + b.up());
                }
            }
            (Some(w), None) => {
                for ((d, v), w) in y.iter_mut().zip(row).zip(w) {
                    *d = T::down(h(v) * w.up());
                }
            }
            (None, Some(b)) => {
                for ((d, v), b) in y.iter_mut().zip(row).zip(b) {
                    *d = T::down(h(v) + b.up());
                }
            }
            (None, None) => {
                for (d, v) in y.iter_mut().zip(row) {
                    *d = T::down(h(v));
                }
            }
        }
        (*m, *r) = (mu, rs);
    }
}

/// One block of layer norm's backward: the input's gradient of its rows into `dx`, and, where
/// `partial` is given, the block's `Σ dy · x̂` and `Σ dy` per column into its two halves.
#[inline(always)]
fn grad_rows<T: FloatElem>(
    [dy, x]: [&[T]; 2],
    stats: (&[T::A], &[T::A]),
    w: Option<&[T]>,
    dx: &mut [T],
    partial: Option<&mut [T::A]>,
) {
    let cols = x.len() / stats.0.len();
    let ncols = T::param(cols as f64);
    for (r, dx) in dx.chunks_exact_mut(cols).enumerate() {
        let (dy, x) = (&dy[r * cols..][..cols], &x[r * cols..][..cols]);
        let (mu, rs) = (stats.0[r], stats.1[r]);
        let (sg, sgx) = grad_sums(dy, x, w, mu, rs);
        let (mg, mgx) = (sg / ncols, sgx / ncols);
        match w {
            Some(w) => {
                for (((d, dy), x), w) in dx.iter_mut().zip(dy).zip(x).zip(w) {
                    let xh = (x.up() - mu) * rs;
                    *d = T::down(rs * (dy.up() * w.up() - mg - xh * mgx));
                }
            }
            None => {
                for ((d, dy), x) in dx.iter_mut().zip(dy).zip(x) {
                    let xh = (x.up() - mu) * rs;
                    *d = T::down(rs * (dy.up() - mg - xh * mgx));
                }
            }
        }
    }
    if let Some(partial) = partial {
        let (pw, pb) = partial.split_at_mut(cols);
        pw.fill(T::A::zero());
        pb.fill(T::A::zero());
        for (r, (dy, x)) in dy.chunks_exact(cols).zip(x.chunks_exact(cols)).enumerate() {
            let (mu, rs) = (stats.0[r], stats.1[r]);
            for (((a, b), dy), x) in pw.iter_mut().zip(pb.iter_mut()).zip(dy).zip(x) {
                *a = *a + dy.up() * ((x.up() - mu) * rs);
                *b = *b + dy.up();
            }
        }
    }
}

super::widest!(norm_rows_wide, norm_rows, (
    x: &[T], y: &mut [T], stats: (&mut [T::A], &mut [T::A]),
    affine: (Option<&[T]>, Option<&[T]>), shape: (usize, T::A)
));
super::widest!(grad_rows_wide, grad_rows, (
    ops: [&[T]; 2], stats: (&[T::A], &[T::A]), w: Option<&[T]>, dx: &mut [T],
    partial: Option<&mut [T::A]>
));

/// Rows per block of the backward: the weight's and the bias's gradients are summed per
/// block, then over the blocks in order, so the bits do not depend on the thread count.
const GRAD_BLOCK: usize = 16;

/// A task's rows of layer norm's output, with their means and reciprocal deviations.
type Rows<'a, T, A> = (&'a mut [T], (&'a mut [A], &'a mut [A]));

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
            // One item per task: its rows' outputs and statistics.
            let per = per_task(rows, cols);
            let mut items: Vec<Rows<'_, T, A>> = y[..rows * cols]
                .chunks_mut(per * cols)
                .zip(mean[..rows].chunks_mut(per).zip(rstd[..rows].chunks_mut(per)))
                .collect();
            eddy_vm::par::for_each_chunk_mut(&mut items, 1, |i, item| {
                for (y, (m, r)) in item.iter_mut() {
                    let x = &x[i * per * cols..][..y.len()];
                    norm_rows_wide(x, y, (m, r), (w, b), (cols, eps));
                }
            });
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
            if n == 0 {
                // No rows: the affine terms' gradients are zero; no columns: nothing to write.
                for o in &outs[1..] {
                    // SAFETY: outputs 1.. are the weight's and the bias's gradients.
                    let out = unsafe { output::<T>(o) };
                    out[..cols].fill(T::down(A::zero()));
                }
                return Ok(());
            }
            let affine = l.weight.is_some() || l.bias.is_some();
            let blocks = rows.div_ceil(GRAD_BLOCK);
            let mut partial = vec![A::zero(); if affine { blocks * 2 * cols } else { 0 }];
            let mut parts = partial.chunks_mut(2 * cols);
            let mut items: Vec<(&mut [T], Option<&mut [A]>)> = dx[..n]
                .chunks_mut(GRAD_BLOCK * cols)
                .map(|dx| (dx, if affine { parts.next() } else { None }))
                .collect();
            let per = per_task(rows, cols).div_ceil(GRAD_BLOCK);
            eddy_vm::par::for_each_chunk_mut(&mut items, per, |b0, chunk| {
                for (k, (dx, part)) in chunk.iter_mut().enumerate() {
                    let r0 = (b0 + k) * GRAD_BLOCK;
                    let (nr, at) = (dx.len() / cols, r0 * cols);
                    let ops = [&dy[at..][..dx.len()], &x[at..][..dx.len()]];
                    let stats = (&mean[r0..r0 + nr], &rstd[r0..r0 + nr]);
                    grad_rows_wide(ops, stats, w, dx, part.as_deref_mut());
                }
            });
            // dw and db: the blocks' sums, added in block order.
            let mut at = 1;
            for (present, half) in [(l.weight.is_some(), 0), (l.bias.is_some(), cols)] {
                if !present {
                    continue;
                }
                // SAFETY: outputs 1 and 2 are the weight's and the bias's gradients, when present.
                let out = unsafe { output::<T>(&outs[at]) };
                at += 1;
                let mut acc = vec![A::zero(); cols];
                for block in partial.chunks_exact(2 * cols) {
                    for (a, p) in acc.iter_mut().zip(&block[half..half + cols]) {
                        *a += *p;
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
