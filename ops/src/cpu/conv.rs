//! Sliding-window kernels: `im2col` (unfold), its adjoint `col2im` (fold) and `max_pool2d`
//! with the positions of its maxima. Planes are split over the kernel pool's threads.

use super::elementwise::{FloatElem, dispatch_float};
use crate::DType;
use crate::kernel::{FnKernel, input, output};
use crate::window::Window2d;
use eddy_vm::Counted;
use eddy_vm::{Blob, instruction::Kernel};
use num_traits::Zero;

/// Output elements below which a kernel runs on the calling thread alone.
const PAR_ELEMS: usize = 1 << 15;

/// How many of `items` units of `each` elements go in one chunk of parallel work: all of them
/// below [`PAR_ELEMS`] elements in all, else about a quarter of each thread's share.
fn per_chunk(items: usize, each: usize) -> usize {
    if items * each < PAR_ELEMS {
        return items.max(1);
    }
    items.div_ceil(4 * eddy_vm::par::threads()).max(1)
}

/// The window positions `lo..hi` along `axis` whose tap `tap` reads inside the input (they are
/// consecutive: the source moves with the position), with the source of position `lo`.
#[inline(always)]
pub(super) fn inside(w: &Window2d, axis: usize, tap: usize) -> (usize, usize, usize) {
    let (s, p, n) = (w.stride[axis], w.padding[axis], w.in_hw[axis]);
    let reach = tap * w.dilation[axis];
    // Position `o` reads `o·s + reach − p`: inside from `o·s + reach ≥ p` to `< n + p`.
    let lo = p.saturating_sub(reach).div_ceil(s).min(w.out_hw[axis]);
    let hi = (n + p)
        .saturating_sub(reach)
        .div_ceil(s)
        .min(w.out_hw[axis]);
    let hi = hi.max(lo);
    // With no position inside, the source is 0 (an empty range of any row).
    let first = if lo < hi {
        (lo * s + reach).saturating_sub(p)
    } else {
        0
    };
    (lo, hi, first)
}

/// The taps `lo..hi` of window position `pos` along `axis` that read inside the input (they
/// are consecutive; none for a dilated window that steps over the input), with the input
/// index tap `lo` reads (past the input when there is none).
#[inline]
fn taps_inside(w: &Window2d, axis: usize, pos: usize) -> (usize, usize, usize) {
    let (d, p, n) = (w.dilation[axis], w.padding[axis], w.in_hw[axis]);
    let start = pos * w.stride[axis];
    // Tap `t` reads `start + t·d − p`: inside from `start + t·d ≥ p` to `< n + p`.
    let lo = p.saturating_sub(start).div_ceil(d).min(w.kernel[axis]);
    let hi = (n + p)
        .saturating_sub(start)
        .div_ceil(d)
        .min(w.kernel[axis]);
    let hi = hi.max(lo);
    (lo, hi, (start + lo * d).saturating_sub(p))
}

/// `dst[j] = src[j·stride]` widened, with the common strides as constants and AVX2 where the
/// CPU has it (so that the copy vectorises).
fn gather<T: FloatElem>(dst: &mut [T::A], src: &[T], stride: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        /// [`gather_lanes`] compiled for AVX2.
        ///
        /// # Safety
        ///
        /// The CPU has AVX2.
        #[target_feature(enable = "avx2")]
        unsafe fn wide<T: FloatElem>(dst: &mut [T::A], src: &[T], stride: usize) {
            gather_lanes(dst, src, stride)
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe { wide(dst, src, stride) };
        }
    }
    gather_lanes(dst, src, stride)
}

/// [`gather`]'s loops.
#[inline(always)]
fn gather_lanes<T: FloatElem>(dst: &mut [T::A], src: &[T], stride: usize) {
    let n = dst.len();
    match stride {
        1 => {
            for (d, s) in dst.iter_mut().zip(&src[..n]) {
                *d = s.up();
            }
        }
        2 => {
            for (d, s) in dst.iter_mut().zip(src[..2 * n - 1].chunks(2)) {
                *d = s[0].up();
            }
        }
        _ => {
            for (d, s) in dst.iter_mut().zip(src.iter().step_by(stride)) {
                *d = s.up();
            }
        }
    }
}

/// One tap of a row of pooling windows: where `tap[j]` beats `best[j]` (is larger, or NaN),
/// it takes its place and `best_at[j]` becomes `base + lane[j]`. With AVX2 where the CPU has
/// it: a select per lane is a blend there, where the baseline's would be a branch per lane,
/// mispredicted as often as the data is random.
fn max_tap<A: num_traits::Float>(
    best: &mut [A],
    best_at: &mut [u32],
    tap: &[A],
    lane: &[u32],
    base: u32,
) {
    /// Indexed over four slices of one length, with a select on both rows: the form the
    /// vectoriser takes.
    #[inline(always)]
    fn lanes<A: num_traits::Float>(b: &mut [A], b_at: &mut [u32], t: &[A], l: &[u32], base: u32) {
        let n = b.len().min(b_at.len()).min(t.len()).min(l.len());
        let (b, b_at, t, l) = (&mut b[..n], &mut b_at[..n], &t[..n], &l[..n]);
        for j in 0..n {
            let (v, m) = (t[j], b[j]);
            #[allow(clippy::eq_op)]
            let take = (v > m) | (v != v); // NaN wins
            b_at[j] = if take { base + l[j] } else { b_at[j] };
            b[j] = if take { v } else { m };
        }
    }
    #[cfg(target_arch = "x86_64")]
    {
        /// [`lanes`] compiled for AVX2.
        ///
        /// # Safety
        ///
        /// The CPU has AVX2.
        #[target_feature(enable = "avx2")]
        unsafe fn wide<A: num_traits::Float>(
            b: &mut [A],
            b_at: &mut [u32],
            t: &[A],
            l: &[u32],
            base: u32,
        ) {
            lanes(b, b_at, t, l, base)
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe { wide(best, best_at, tap, lane, base) };
        }
    }
    lanes(best, best_at, tap, lane, base)
}

/// `im2col`: contiguous input 0 `[batch, channels, h, w]` at `offset` to output 0 `[batch,
/// channels · taps, positions]` (see [`crate::conv::im2col`]).
///
/// # Examples
///
/// ```
/// use eddy_ops::conv::Window2d;
/// use eddy_ops::cpu::conv::im2col;
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// // One 3×3 plane, 2×2 windows, stride 1: 4 taps × 4 positions.
/// let w = Window2d::new("unfold", [1, 1, 3, 3], 2.into(), 1.into(), 0.into(), 1.into(), false).unwrap();
/// let (x, cols) = (vm.new_blob(9 * 4), vm.new_blob(16 * 4));
/// vm.run_op(StreamId::CPU, from_host((0..9).map(|v| v as f32).collect()), &[], &[&x], false)?;
/// vm.run_op(StreamId::CPU, im2col(DType::F32, w, 0), &[&x], &[&cols], false)?;
/// let l = Layout::contiguous([16]);
/// let got = vm.read_blob(&cols, move |m| gather_host::<f32>(m, &l))?;
/// assert_eq!(&got[..4], &[0., 1., 3., 4.]);   // the top-left tap of each window
/// assert_eq!(&got[12..], &[4., 5., 7., 8.]);  // the bottom-right tap
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn im2col(dtype: DType, w: Window2d, offset: usize) -> impl Kernel {
    FnKernel::new(
        "unfold",
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            dispatch_float!(dtype, T => {
                // SAFETY: input 0 is read and output 0 written by this instruction; they differ.
                let (x, o) = unsafe { (input::<T>(&ins[0]), output::<T>(&outs[0])) };
                let ([h, wd], taps, len) = (w.in_hw, w.taps(), w.positions());
                let rows = w.batch * w.channels * taps;
                if rows * len == 0 {
                    return Ok(());
                }
                let Some(x) = x.get(offset..offset + w.batch * w.channels * h * wd) else {
                    return Err("unfold input out of its storage".to_string());
                };
                let o = &mut o[..rows * len];
                let row = |r: usize, dst: &mut [T]| {
                    let (plane, tap) = (r / taps, r % taps);
                    let (ki, kj) = (tap / w.kernel[1], tap % w.kernel[1]);
                    let src = &x[plane * h * wd..(plane + 1) * h * wd];
                    let (lo, hi, first) = inside(&w, 1, kj);
                    let ow = w.out_hw[1];
                    for (oy, d) in dst.chunks_exact_mut(ow).enumerate() {
                        let Some(iy) = w.source(0, oy, ki) else {
                            d.fill(T::zero());
                            continue;
                        };
                        let line = &src[iy * wd..(iy + 1) * wd];
                        d[..lo].fill(T::zero());
                        d[hi..].fill(T::zero());
                        if w.stride[1] == 1 {
                            d[lo..hi].copy_from_slice(&line[first..first + hi - lo]);
                        } else {
                            let s = w.stride[1];
                            for (j, v) in d[lo..hi].iter_mut().enumerate() {
                                *v = line[first + j * s];
                            }
                        }
                    }
                };
                let per = per_chunk(rows, len);
                eddy_vm::par::for_each_chunk_mut(o, per * len, |start, block| {
                    for (i, dst) in block.chunks_exact_mut(len).enumerate() {
                        row(start / len + i, dst);
                    }
                });
                Ok(())
            }, else => Err(format!("unfold kernel does not take {dtype}")))
        },
    )
}

/// `col2im`: contiguous columns (input 0, `[batch, channels · taps, positions]` at `offset`)
/// summed into output 0 `[batch, channels, h, w]` (see [`crate::conv::col2im`]).
///
/// # Examples
///
/// ```
/// use eddy_ops::conv::Window2d;
/// use eddy_ops::cpu::conv::col2im;
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// // Ones folded back onto a 3×3 plane: each element counts the windows that read it.
/// let w = Window2d::new("fold", [1, 1, 3, 3], 2.into(), 1.into(), 0.into(), 1.into(), false).unwrap();
/// let (cols, x) = (vm.new_blob(16 * 4), vm.new_blob(9 * 4));
/// vm.run_op(StreamId::CPU, from_host(vec![1f32; 16]), &[], &[&cols], false)?;
/// vm.run_op(StreamId::CPU, col2im(DType::F32, w, 0), &[&cols], &[&x], false)?;
/// let l = Layout::contiguous([9]);
/// let got = vm.read_blob(&x, move |m| gather_host::<f32>(m, &l))?;
/// assert_eq!(got, [1., 2., 1., 2., 4., 2., 1., 2., 1.]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn col2im(dtype: DType, w: Window2d, offset: usize) -> impl Kernel {
    FnKernel::new(
        "fold",
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            dispatch_float!(dtype, T => {
                // SAFETY: input 0 is read and output 0 written by this instruction; they differ.
                let (c, o) = unsafe { (input::<T>(&ins[0]), output::<T>(&outs[0])) };
                let ([h, wd], taps, len) = (w.in_hw, w.taps(), w.positions());
                let planes = w.batch * w.channels;
                if planes * h * wd == 0 {
                    return Ok(());
                }
                let Some(c) = c.get(offset..offset + planes * taps * len) else {
                    return Err("fold input out of its storage".to_string());
                };
                let o = &mut o[..planes * h * wd];
                let plane = |p: usize, dst: &mut [T]| {
                    dst.fill(T::zero());
                    for tap in 0..taps {
                        let (ki, kj) = (tap / w.kernel[1], tap % w.kernel[1]);
                        let src = &c[(p * taps + tap) * len..(p * taps + tap + 1) * len];
                        let (lo, hi, first) = inside(&w, 1, kj);
                        let ow = w.out_hw[1];
                        for (oy, s) in src.chunks_exact(ow).enumerate() {
                            let Some(iy) = w.source(0, oy, ki) else { continue };
                            let line = &mut dst[iy * wd..(iy + 1) * wd];
                            if w.stride[1] == 1 {
                                for (d, &v) in line[first..first + hi - lo].iter_mut().zip(&s[lo..hi]) {
                                    *d = T::down(d.up() + v.up());
                                }
                            } else {
                                for (j, &v) in s[lo..hi].iter().enumerate() {
                                    let d = &mut line[first + j * w.stride[1]];
                                    *d = T::down(d.up() + v.up());
                                }
                            }
                        }
                    }
                };
                let per = per_chunk(planes, taps * len);
                eddy_vm::par::for_each_chunk_mut(o, per * h * wd, |start, block| {
                    for (i, dst) in block.chunks_exact_mut(h * wd).enumerate() {
                        plane(start / (h * wd) + i, dst);
                    }
                });
                Ok(())
            }, else => Err(format!("fold kernel does not take {dtype}")))
        },
    )
}

/// A pointer to the second output of [`max_pool2d`], written by plane groups on several threads.
#[derive(Clone, Copy)]
struct Positions(*mut i64);
// SAFETY: each plane group writes only its own planes' positions (disjoint ranges), and the
// slice outlives the parallel loop.
unsafe impl Send for Positions {}
// SAFETY: as above.
unsafe impl Sync for Positions {}

impl Positions {
    /// The pointer (a method, so that a closure captures the whole `Sync` wrapper).
    fn get(self) -> *mut i64 {
        self.0
    }
}

/// `max_pool2d`: contiguous input 0 `[batch, channels, h, w]` at `offset` to the window maxima
/// (output 0) and their positions `row · w + col` in the plane (output 1, `i64`), as
/// PyTorch's `max_pool2d_with_indices`: the first maximum wins, and a NaN over any number
/// (the last NaN of a window, as PyTorch's CPU kernel). A dilated window whose taps all fall
/// in the padding gives `-inf` at the position PyTorch gives it, past the plane.
///
/// # Examples
///
/// ```
/// use eddy_ops::conv::Window2d;
/// use eddy_ops::cpu::conv::max_pool2d;
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let w = Window2d::new("max_pool2d", [1, 1, 2, 4], 2.into(), 2.into(), 0.into(), 1.into(), false).unwrap();
/// let (x, m, at) = (vm.new_blob(8 * 4), vm.new_blob(2 * 4), vm.new_blob(2 * 8));
/// vm.run_op(StreamId::CPU, from_host(vec![1f32, 5., 0., 0., 2., 3., 0., 9.]), &[], &[&x], false)?;
/// vm.run_op(StreamId::CPU, max_pool2d(DType::F32, w, 0), &[&x], &[&m, &at], false)?;
/// let l = Layout::contiguous([2]);
/// assert_eq!(vm.read_blob(&m, move |b| gather_host::<f32>(b, &l))?, [5., 9.]);
/// let l = Layout::contiguous([2]);
/// assert_eq!(vm.read_blob(&at, move |b| gather_host::<i64>(b, &l))?, [1, 7]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn max_pool2d(dtype: DType, w: Window2d, offset: usize) -> impl Kernel {
    FnKernel::new(
        "max_pool2d",
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            dispatch_float!(dtype, T => {
                // SAFETY: input 0 is read, outputs 0 and 1 written by this instruction; the
                // three differ.
                let (x, o, at) = unsafe {
                    (input::<T>(&ins[0]), output::<T>(&outs[0]), output::<i64>(&outs[1]))
                };
                let ([h, wd], len) = (w.in_hw, w.positions());
                let planes = w.batch * w.channels;
                if planes * len == 0 {
                    return Ok(());
                }
                let Some(x) = x.get(offset..offset + planes * h * wd) else {
                    return Err("max_pool2d input out of its storage".to_string());
                };
                let (o, at) = (&mut o[..planes * len], &mut at[..planes * len]);
                let pos = Positions(at.as_mut_ptr());
                // Per output row (column): the taps inside the input, `lo..hi`, and the input
                // row (column) tap `lo` reads; the same for every plane.
                let spans = |axis: usize| -> Vec<(usize, usize, usize)> {
                    (0..w.out_hw[axis]).map(|o| taps_inside(&w, axis, o)).collect()
                };
                let (rows, cols) = (spans(0), spans(1));
                let (dy, dx) = (w.dilation[0], w.dilation[1]);
                // The block of windows whose taps are all inside, rows `ry0..ry1` by columns
                // `cx0..cx1` (each range consecutive), runs tap by tap over the whole block:
                // each window is its own dependency chain, so the comparisons overlap and
                // vectorise. The border runs one window at a time.
                let inner = |spans: &[(usize, usize, usize)], k: usize| {
                    let full = |&(lo, hi, _): &(usize, usize, usize)| lo == 0 && hi == k;
                    let a = spans.iter().position(full).unwrap_or(0);
                    (a, spans.iter().rposition(full).map_or(a, |i| i + 1))
                };
                let ((ry0, mut ry1), (cx0, mut cx1)) = (inner(&rows, w.kernel[0]), inner(&cols, w.kernel[1]));
                if h * wd > u32::MAX as usize {
                    // Positions past `u32` lanes: every window one at a time.
                    (ry1, cx1) = (ry0, cx0);
                }
                let (nr, nc) = (ry1 - ry0, cx1 - cx0);
                let (sy, sx) = (w.stride[0], w.stride[1]);
                // Window `(r, c)` of the block reads `r·sy` rows and `c·sx` columns past
                // window `(0, 0)`: its offset from each tap's first element.
                let lane: Vec<u32> = (0..nr * nc)
                    .map(|q| ((q / nc) * sy * wd + (q % nc) * sx) as u32)
                    .collect();
                type A<T> = <T as FloatElem>::A;
                // Scratch rows for the block: the best so far, a tap's values, the winners.
                type Scratch<T> = (Vec<A<T>>, Vec<A<T>>, Vec<u32>);
                let plane = |p: usize, dst: &mut [T], (best, tap, best_at): &mut Scratch<T>| {
                    // SAFETY: plane `p`'s positions, `p·len..(p+1)·len` of output 1, are
                    // written by this call alone (each plane is handed to one call).
                    let at = unsafe { std::slice::from_raw_parts_mut(pos.get().add(p * len), len) };
                    let src = &x[p * h * wd..(p + 1) * h * wd];
                    let ow = w.out_hw[1];
                    for (oy, &(ylo, yhi, iy0)) in rows.iter().enumerate() {
                        let border: &mut dyn Iterator<Item = usize> = if (ry0..ry1).contains(&oy) {
                            &mut (0..cx0).chain(cx1..ow)
                        } else {
                            &mut (0..ow)
                        };
                        for ox in border {
                            let (xlo, xhi, ix0) = cols[ox];
                            if ylo == yhi || xlo == xhi {
                                // A dilated window can step over the whole input: -inf, at the
                                // position PyTorch gives (its first tap past the padding),
                                // which may lie outside the plane; its gradient goes nowhere.
                                dst[oy * ow + ox] = T::down(<A<T> as num_traits::Float>::neg_infinity());
                                at[oy * ow + ox] = (iy0 * wd + ix0) as i64;
                                continue;
                            }
                            // The first tap inside starts the search.
                            let mut b_at = iy0 * wd + ix0;
                            let mut b = src[b_at].up();
                            for ki in 0..yhi - ylo {
                                let line = (iy0 + ki * dy) * wd + ix0;
                                for kj in 0..xhi - xlo {
                                    let i = line + kj * dx;
                                    let v = src[i].up();
                                    let take = (v > b) | v.is_nan();
                                    b_at = if take { i } else { b_at };
                                    b = if take { v } else { b };
                                }
                            }
                            dst[oy * ow + ox] = src[b_at];
                            at[oy * ow + ox] = b_at as i64;
                        }
                    }
                    if nr * nc == 0 {
                        return;
                    }
                    let corner = rows[ry0].2 * wd + cols[cx0].2;
                    for ki in 0..w.kernel[0] {
                        for kj in 0..w.kernel[1] {
                            let first = corner + ki * dy * wd + kj * dx;
                            for (r, t) in tap.chunks_exact_mut(nc).enumerate() {
                                gather(t, &src[first + r * sy * wd..], sx);
                            }
                            if ki == 0 && kj == 0 {
                                best.copy_from_slice(tap);
                                for (b_at, &l) in best_at.iter_mut().zip(&lane) {
                                    *b_at = first as u32 + l;
                                }
                            } else {
                                max_tap(best, best_at, tap, &lane, first as u32);
                            }
                        }
                    }
                    for (r, row) in best_at.chunks_exact(nc).enumerate() {
                        let o = (ry0 + r) * ow + cx0;
                        for ((d, a), &i) in dst[o..o + nc].iter_mut().zip(&mut at[o..o + nc]).zip(row) {
                            *d = src[i as usize];
                            *a = i as i64;
                        }
                    }
                };
                let per = per_chunk(planes, len);
                eddy_vm::par::for_each_chunk_mut(o, per * len, |start, block| {
                    let zero = A::<T>::zero();
                    let mut scratch = (vec![zero; nr * nc], vec![zero; nr * nc], vec![0; nr * nc]);
                    for (i, dst) in block.chunks_exact_mut(len).enumerate() {
                        plane(start / len + i, dst, &mut scratch);
                    }
                });
                Ok(())
            }, else => Err(format!("max_pool2d kernel does not take {dtype}")))
        },
    )
}

/// The gradient of `max_pool2d`: input 0 the output's gradient (`[planes, positions]`,
/// contiguous at `offset`), input 1 the positions of the maxima (`i64`, the same shape,
/// contiguous at `idx_offset`); output 0 `[planes, h · w]`, each element the sum of the
/// gradients of the windows whose maximum it was.
///
/// # Examples
///
/// ```
/// use eddy_ops::conv::Window2d;
/// use eddy_ops::cpu::conv::max_pool2d_backward;
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let w = Window2d::new("max_pool2d", [1, 1, 2, 4], 2.into(), 2.into(), 0.into(), 1.into(), false).unwrap();
/// let (g, at, gx) = (vm.new_blob(2 * 4), vm.new_blob(2 * 8), vm.new_blob(8 * 4));
/// vm.run_op(StreamId::CPU, from_host(vec![2f32, 3.]), &[], &[&g], false)?;
/// vm.run_op(StreamId::CPU, from_host(vec![1i64, 7]), &[], &[&at], false)?;
/// vm.run_op(StreamId::CPU, max_pool2d_backward(DType::F32, w, 0, 0), &[&g, &at], &[&gx], false)?;
/// let l = Layout::contiguous([8]);
/// assert_eq!(vm.read_blob(&gx, move |b| gather_host::<f32>(b, &l))?, [0., 2., 0., 0., 0., 0., 0., 3.]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn max_pool2d_backward(
    dtype: DType,
    w: Window2d,
    offset: usize,
    idx_offset: usize,
) -> impl Kernel {
    FnKernel::new(
        "max_pool2d_backward",
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            dispatch_float!(dtype, T => {
                // SAFETY: inputs 0 and 1 are read and output 0 written by this instruction;
                // the output differs from both.
                let (g, at, o) = unsafe {
                    (input::<T>(&ins[0]), input::<i64>(&ins[1]), output::<T>(&outs[0]))
                };
                let (len, area) = (w.positions(), w.in_hw[0] * w.in_hw[1]);
                let planes = w.batch * w.channels;
                if planes * area == 0 {
                    return Ok(());
                }
                let (Some(g), Some(at)) = (
                    g.get(offset..offset + planes * len),
                    at.get(idx_offset..idx_offset + planes * len),
                ) else {
                    return Err("max_pool2d_backward input out of its storage".to_string());
                };
                let o = &mut o[..planes * area];
                let per = per_chunk(planes, area);
                eddy_vm::par::for_each_chunk_mut(o, per * area, |start, block| {
                    for (i, dst) in block.chunks_exact_mut(area).enumerate() {
                        let p = start / area + i;
                        dst.fill(T::zero());
                        let (g, at) = (&g[p * len..(p + 1) * len], &at[p * len..(p + 1) * len]);
                        for (&v, &i) in g.iter().zip(at) {
                            // A window with no element inside has a position past the plane
                            // (see `max_pool2d`): its gradient goes nowhere.
                            if let Some(d) = usize::try_from(i).ok().and_then(|i| dst.get_mut(i)) {
                                *d = T::down(d.up() + v.up());
                            }
                        }
                    }
                });
                Ok(())
            }, else => Err(format!("max_pool2d_backward kernel does not take {dtype}")))
        },
    )
}
