//! A convolution in one kernel, for inference: each task unfolds one image's block of window
//! positions into a per-thread buffer and multiplies the weight by it while the block is in
//! cache, then adds the bias and applies ReLU to the block of output.
//!
//! `im2col` followed by one product writes every image's columns (taps × positions, nine
//! times the input for a 3 × 3 window) to memory and reads them back; here no column leaves
//! the core's cache. The training path keeps the columns instead: the weight's gradient
//! reads them again.

use super::conv::inside;
use super::elementwise::dispatch_float;
use crate::DType;
use crate::kernel::{FnKernel, input, output};
use crate::window::Window2d;
use eddy_vm::Counted;
use eddy_vm::{Blob, instruction::Kernel};
use num_traits::Zero;

/// The bytes of columns a task aims to keep in cache (a fraction of a core's L2, beside the
/// packed weight and the output block).
const BLOCK_BYTES: usize = 1 << 20;

/// Window positions per task for `rows` rows of columns of `size`-byte elements: about
/// [`BLOCK_BYTES`] of columns, a multiple of 16 (whole micro-kernel tiles), at least 64.
fn block_positions(rows: usize, size: usize, positions: usize) -> usize {
    let p = (BLOCK_BYTES / (rows * size).max(1)).max(64) / 16 * 16;
    p.min(positions.next_multiple_of(16))
}

/// A raw output pointer shared by the tasks, each writing its own block.
#[derive(Clone, Copy)]
struct Out<T>(*mut T);
// SAFETY: each task writes a disjoint block of the output (its image's rows over its own
// positions), and nothing reads the output during the kernel.
unsafe impl<T: Send> Send for Out<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Out<T> {}

impl<T> Out<T> {
    /// The pointer (a method, so that a closure captures the whole `Sync` wrapper).
    fn ptr(self) -> *mut T {
        self.0
    }
}

thread_local! {
    /// Each thread's column buffer, kept between calls.
    static COLS: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Columns of image `x` (`[channels, h, w]`) for positions `p0..p0 + p` into `cols`
/// (`[channels · taps][p]`): row `c · taps + tap`, zero where the tap reads the padding.
fn unfold_block<T: Copy + Zero>(w: &Window2d, x: &[T], p0: usize, p: usize, cols: &mut [T]) {
    let ([h, wd], [kh, kw], ow) = (w.in_hw, w.kernel, w.out_hw[1]);
    let mut rows = cols.chunks_exact_mut(p);
    for c in 0..w.channels {
        let plane = &x[c * h * wd..][..h * wd];
        for ki in 0..kh {
            for kj in 0..kw {
                let Some(row) = rows.next() else { return };
                let (lo, hi, first) = inside(w, 1, kj);
                let mut at = p0;
                while at < p0 + p {
                    let (oy, ox0) = (at / ow, at % ow);
                    let ox1 = ow.min(ox0 + p0 + p - at);
                    let d = &mut row[at - p0..][..ox1 - ox0];
                    at += ox1 - ox0;
                    let Some(iy) = w.source(0, oy, ki) else {
                        d.fill(T::zero());
                        continue;
                    };
                    let line = &plane[iy * wd..][..wd];
                    // Positions `a..b` of this segment read inside the input.
                    let (a, b) = (lo.clamp(ox0, ox1), hi.clamp(ox0, ox1));
                    d[..a - ox0].fill(T::zero());
                    d[b - ox0..].fill(T::zero());
                    let src = first + (a - lo) * w.stride[1];
                    if w.stride[1] == 1 {
                        d[a - ox0..b - ox0].copy_from_slice(&line[src..src + b - a]);
                    } else {
                        for (j, v) in d[a - ox0..b - ox0].iter_mut().enumerate() {
                            *v = line[src + j * w.stride[1]];
                        }
                    }
                }
            }
        }
    }
}

/// A convolution of one group: input 0 the images `[batch, channels, h, w]` (contiguous at
/// `offsets[0]`), input 1 the weight `[out, channels · taps]` (contiguous at `offsets[1]`),
/// input 2 the bias `[out]` (contiguous at `offsets[2]`) when `bias`; output 0 `[batch, out,
/// positions]`, dense, each element `max(·, 0)` when `relu`. `f32` and `f64`.
///
/// # Examples
///
/// ```
/// use eddy_ops::conv::Window2d;
/// use eddy_ops::cpu::conv_blocked::conv2d_blocked;
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// // A 3×3 plane of 0..9, a 2×2 window of ones: each output sums its window.
/// let w = Window2d::new("conv2d", [1, 1, 3, 3], 2.into(), 1.into(), 0.into(), 1.into(), false).unwrap();
/// let (x, k, y) = (vm.new_blob(9 * 4), vm.new_blob(4 * 4), vm.new_blob(4 * 4));
/// vm.run_op(StreamId::CPU, from_host((0..9).map(|v| v as f32).collect()), &[], &[&x], false)?;
/// vm.run_op(StreamId::CPU, from_host(vec![1f32; 4]), &[], &[&k], false)?;
/// let conv = conv2d_blocked(DType::F32, w, 1, [0; 3], false, false);
/// vm.run_op(StreamId::CPU, conv, &[&x, &k], &[&y], false)?;
/// let got = vm.read_blob(&y, move |m| gather_host::<f32>(m, &Layout::contiguous([4])))?;
/// assert_eq!(got, [8., 12., 20., 24.]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn conv2d_blocked(
    dtype: DType,
    w: Window2d,
    out_channels: usize,
    offsets: [usize; 3],
    bias: bool,
    relu: bool,
) -> impl Kernel {
    FnKernel::new(
        "conv2d",
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            if !matches!(dtype, DType::F32 | DType::F64) {
                return Err(format!("conv2d's blocked kernel does not take {dtype}"));
            }
            dispatch_float!(dtype, T => {
                // SAFETY: the inputs are read and output 0 written by this instruction; the
                // output is a fresh blob, none of the inputs.
                let (x, k, y) = unsafe {
                    (input::<T>(&ins[0]), input::<T>(&ins[1]), output::<T>(&outs[0]))
                };
                // SAFETY: as above; input 2 is the bias when there is one.
                let b = if bias { Some(unsafe { input::<T>(&ins[2]) }) } else { None };
                let ([h, wd], rows, len) = (w.in_hw, w.channels * w.taps(), w.positions());
                let image = w.channels * h * wd;
                let (Some(x), Some(k), Some(y)) = (
                    x.get(offsets[0]..offsets[0] + w.batch * image),
                    k.get(offsets[1]..offsets[1] + out_channels * rows),
                    y.get_mut(..w.batch * out_channels * len),
                ) else {
                    return Err("conv2d operands out of their storage".to_string());
                };
                let b = match b.map(|b| b.get(offsets[2]..offsets[2] + out_channels)) {
                    Some(None) => return Err("conv2d bias out of its storage".to_string()),
                    Some(b) => b,
                    None => None,
                };
                if y.is_empty() {
                    return Ok(());
                }
                let p = block_positions(rows, size_of::<T>(), len);
                let blocks = len.div_ceil(p);
                let out = Out(y.as_mut_ptr());
                let task = |t: usize| {
                    let (n, p0) = (t / blocks, t % blocks * p);
                    let pw = p.min(len - p0);
                    COLS.with_borrow_mut(|buf| {
                        let words = (rows * pw * size_of::<T>()).div_ceil(8);
                        if buf.len() < words {
                            buf.resize(words, 0);
                        }
                        // SAFETY: the buffer holds `rows · pw` elements of `T` (8-byte words,
                        // aligned for `f32` and `f64`), every one written by the unfold.
                        let cols = unsafe {
                            std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast::<T>(), rows * pw)
                        };
                        unfold_block(&w, &x[n * image..][..image], p0, pw, cols);
                        // SAFETY: image `n`'s output starts inside the output.
                        let dst = unsafe { out.ptr().add(n * out_channels * len + p0) };
                        // SAFETY: the block `[out_channels, pw]` at `dst`, rows `len` apart,
                        // lies inside the output and no other task writes it; `k` and `cols`
                        // are read only, with the strides given.
                        unsafe {
                            gemm::gemm(
                                out_channels, pw, rows,
                                dst, 1, len as isize, false,
                                k.as_ptr(), 1, rows as isize,
                                cols.as_ptr(), 1, pw as isize,
                                T::zero(), <T as num_traits::One>::one(),
                                false, false, false,
                                gemm::Parallelism::None,
                            );
                        }
                        if b.is_none() && !relu {
                            return;
                        }
                        for o in 0..out_channels {
                            // SAFETY: row `o` of this task's block, as above.
                            let d = unsafe { std::slice::from_raw_parts_mut(dst.add(o * len), pw) };
                            let add = b.map_or(T::zero(), |b| b[o]);
                            for v in d.iter_mut() {
                                let s = *v + add;
                                *v = if relu && s < T::zero() { T::zero() } else { s };
                            }
                        }
                    });
                };
                eddy_vm::par::for_each(w.batch * blocks, task);
                Ok(())
            }, else => Err(format!("conv2d's blocked kernel does not take {dtype}")))
        },
    )
}
