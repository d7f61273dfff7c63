//! Reductions over trailing dims: the op definition permutes the reduced dims to the end, so
//! output element `j` reduces elements `j*r .. (j+1)*r` of the input's (permuted) layout.

use super::elementwise::{FloatElem, IntElem, dispatch_float, dispatch_int};
use crate::kernel::{FnKernel, input, output, walk};
use crate::kinds::ReduceOp;
use crate::{Bool8, DType, Elem, Layout};
use eddy_vm::Counted;
use eddy_vm::{Blob, instruction::Kernel};
use num_traits::{Float, One, Zero};

/// Calls `row(j, get)` for every output `j`, where `get(k)` is element `k` of row `j`... through
/// a gather into `buf` when the layout is not contiguous.
fn rows<T: Elem, O: Send>(
    a: &[T],
    la: &Layout,
    r: usize,
    out: &mut [O],
    row: impl Fn(&[T]) -> O + Sync,
) {
    if let Some(range) = la.contiguous_range() {
        let a = &a[range];
        par_out_rows(out, r, |j, o| *o = row(&a[j * r..j * r + r]));
    } else {
        par_out_rows(out, r, |j, o| {
            let mut buf = Vec::with_capacity(r);
            walk(
                la.dims(),
                [&la.strides],
                [la.offset],
                j * r,
                j * r + r,
                |_, [off]| buf.push(a[off]),
            );
            *o = row(&buf);
        });
    }
}

fn par_out_rows<O: Send>(out: &mut [O], r: usize, f: impl Fn(usize, &mut O) + Sync) {
    // Weight the split by the row length so that few long rows still use both cores.
    let n = out.len();
    if n.saturating_mul(r.max(1)) < crate::kernel::PAR_MIN || n < 2 {
        for (j, o) in out.iter_mut().enumerate() {
            f(j, o);
        }
    } else {
        let per = n.div_ceil(eddy_vm::par::threads() * crate::kernel::CHUNKS_PER_THREAD);
        eddy_vm::par::for_each_chunk_mut(out, per, |start, c| {
            for (k, o) in c.iter_mut().enumerate() {
                f(start + k, o);
            }
        });
    }
}

/// Elements summed by one [`sum_block`]; longer runs are split in halves (pairwise above it).
const SUM_BLOCK: usize = 2048;

/// The sum of `row`, cascaded as PyTorch's: blocks of [`SUM_BLOCK`] elements summed with eight
/// accumulators, the block sums added pairwise, so the rounding error grows with the log of the
/// length rather than with the length (a million `0.1f32` sum to 100000.0, not 100958).
pub(crate) fn sum_float<T: FloatElem>(row: &[T]) -> T::A {
    if row.len() <= SUM_BLOCK {
        return sum_block(row);
    }
    let mid = (row.len() / 2).next_multiple_of(8);
    sum_float(&row[..mid]) + sum_float(&row[mid..])
}

#[inline]
fn sum_block<T: FloatElem>(row: &[T]) -> T::A {
    // Eight independent accumulators: vectorises, and bounds the error growth like a
    // shallow pairwise sum.
    let mut acc = [T::A::zero(); 8];
    let chunks = row.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for k in 0..8 {
            acc[k] = acc[k] + c[k].up();
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for &v in rest {
        s = s + v.up();
    }
    s
}

/// `out[j] = op(row j)`; input 0 in layout `la` (reduced dims last, `r` elements per row),
/// output 0 contiguous of `op.out_dtype(dtype)`. The op definition ruled out empty rows for ops
/// without identity.
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::reduce::reduce;
/// use eddy_ops::reduce::ReduceOp;
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (a, sums, arg) = (vm.new_blob(6 * 4), vm.new_blob(2 * 4), vm.new_blob(3 * 8));
/// vm.run_op(StreamId::CPU, from_host(vec![1.0f32, 5.0, 3.0, 4.0, 2.0, 6.0]), &[], &[&a], false)?;
/// let la = Layout::contiguous([2, 3]);
/// // Row sums of [2, 3]; then the column argmax, through the transposed layout.
/// let k = reduce(ReduceOp::Sum, DType::F32, la.clone(), 3);
/// vm.run_op(StreamId::CPU, k, &[&a], &[&sums], false)?;
/// let k = reduce(ReduceOp::ArgMax, DType::F32, la.transpose(0, 1), 2);
/// vm.run_op(StreamId::CPU, k, &[&a], &[&arg], false)?;
/// let l = Layout::contiguous([2]);
/// assert_eq!(vm.read_blob(&sums, move |m| gather_host::<f32>(m, &l))?, [9.0, 12.0]);
/// let l = Layout::contiguous([3]);
/// assert_eq!(vm.read_blob(&arg, move |m| gather_host::<i64>(m, &l))?, [1, 0, 1]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn reduce(op: ReduceOp, dtype: DType, la: Layout, r: usize) -> impl Kernel {
    FnKernel::new(
        op.name(),
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            crate::dispatch!(dtype, T => {
                // SAFETY: input 0 is read and output 0 written by this instruction; they differ.
                let a = unsafe { input::<T>(&ins[0]) };
                match op {
                    ReduceOp::ArgMax | ReduceOp::ArgMin => {
                        // SAFETY: as above.
                        let o = unsafe { output::<i64>(&outs[0]) };
                        let max = op == ReduceOp::ArgMax;
                        rows(a, &la, r, o, |row| {
                            let mut best = 0;
                            for (k, v) in row.iter().enumerate() {
                                let b = row[best];
                                #[allow(clippy::eq_op)]
                                let nan = *v != *v && b == b;
                                if nan || (max && *v > b) || (!max && *v < b) {
                                    best = k;
                                }
                            }
                            best as i64
                        });
                    }
                    ReduceOp::Max | ReduceOp::Min => {
                        // SAFETY: as above.
                        let o = unsafe { output::<T>(&outs[0]) };
                        let max = op == ReduceOp::Max;
                        rows(a, &la, r, o, |row| {
                            let mut m = row[0];
                            for &v in &row[1..] {
                                #[allow(clippy::eq_op)]
                                if m != m {
                                    break;
                                }
                                #[allow(clippy::eq_op)]
                                if v != v || (max && v > m) || (!max && v < m) {
                                    m = v;
                                }
                            }
                            m
                        });
                    }
                    _ => return reduce_arith::<T>(op, dtype, a, &la, r, &outs[0]),
                }
            });
            Ok(())
        },
    )
}

/// `v`, an element of the integer or bool `dtype` (whose element type is `T`), as an `i64`.
#[inline]
fn int_to_i64<T: Elem>(dtype: DType, v: T) -> i64 {
    dispatch_int!(dtype, I => {
        // SAFETY: T is I (dispatched on the same dtype).
        unsafe { std::mem::transmute_copy::<T, I>(&v) }.to_i64()
    }, else => {
        // SAFETY: the only other non-float dtype is Bool, whose type is Bool8.
        (unsafe { std::mem::transmute_copy::<T, Bool8>(&v) }.0 != 0) as i64
    })
}

fn reduce_arith<T: Elem>(
    op: ReduceOp,
    dtype: DType,
    a: &[T],
    la: &Layout,
    r: usize,
    out: &Blob,
) -> Result<(), String> {
    dispatch_float!(dtype, F => {
        // SAFETY: T is F (dispatched on the same dtype); the output blob is written only here.
        let a: &[F] = unsafe { std::slice::from_raw_parts(a.as_ptr() as *const F, a.len()) };
        // SAFETY: output 0 is written only by this instruction and is not an input.
        let o = unsafe { output::<F>(out) };
        type A = <F as FloatElem>::A;
        match op {
            ReduceOp::Sum => rows(a, la, r, o, |row| F::down(sum_float(row))),
            ReduceOp::Mean => rows(a, la, r, o, |row| F::down(sum_float(row) / <A as num_traits::NumCast>::from(r).unwrap_or(A::nan()))),
            _ => rows(a, la, r, o, |row| F::down(row.iter().fold(A::one(), |p, v| p * v.up()))),
        }
        Ok(())
    }, else => {
        // SAFETY: output 0 is written only by this instruction and is not an input.
        let o = unsafe { output::<i64>(out) };
        let to_i64 = |v: T| int_to_i64(dtype, v);
        match op {
            ReduceOp::Sum => rows(a, la, r, o, |row| row.iter().fold(0i64, |s, &v| s.wrapping_add(to_i64(v)))),
            ReduceOp::Prod => rows(a, la, r, o, |row| row.iter().fold(1i64, |s, &v| s.wrapping_mul(to_i64(v)))),
            _ => return Err(format!("{} is not defined for {dtype}", op.name())),
        }
        Ok(())
    })
}

/// Running sums along the last dim of `la` (the op permutes the scanned dim last), written
/// through `lo`, the output's layout permuted the same way: `out[.., i] = Σ_{j ≤ i} a[.., j]`.
/// Floats accumulate in their compute type (`f32` for `f16`/`bf16`) and keep their dtype;
/// integers and bools sum to `i64`, wrapping.
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::reduce::cumsum;
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (a, out) = (vm.new_blob(4), vm.new_blob(4 * 8));
/// vm.run_op(StreamId::CPU, from_host(vec![1u8, 2, 3, 4]), &[], &[&a], false)?;
/// let l = Layout::contiguous([2, 2]);
/// vm.run_op(StreamId::CPU, cumsum(DType::U8, l.clone(), l.clone()), &[&a], &[&out], false)?;
/// // Per row of two, summed to i64.
/// assert_eq!(vm.read_blob(&out, move |m| gather_host::<i64>(m, &l))?, [1, 3, 3, 7]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn cumsum(dtype: DType, la: Layout, lo: Layout) -> impl Kernel {
    scan("cumsum", false, dtype, la, lo)
}

/// Running products along the last dim of `la`, as [`cumsum`] sums: `out[.., i] =
/// Π_{j ≤ i} a[.., j]`, floats in their compute type, integers and bools to `i64`, wrapping.
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::reduce::cumprod;
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (a, out) = (vm.new_blob(4 * 4), vm.new_blob(4 * 4));
/// vm.run_op(StreamId::CPU, from_host(vec![1f32, 2., 3., 4.]), &[], &[&a], false)?;
/// let l = Layout::contiguous([2, 2]);
/// vm.run_op(StreamId::CPU, cumprod(DType::F32, l.clone(), l.clone()), &[&a], &[&out], false)?;
/// assert_eq!(vm.read_blob(&out, move |m| gather_host::<f32>(m, &l))?, [1., 2., 3., 12.]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn cumprod(dtype: DType, la: Layout, lo: Layout) -> impl Kernel {
    scan("cumprod", true, dtype, la, lo)
}

/// [`cumsum`] (`prod` false) or [`cumprod`] (`prod` true), as op `name`.
fn scan(name: &'static str, prod: bool, dtype: DType, la: Layout, lo: Layout) -> impl Kernel {
    FnKernel::new(
        name,
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let step = la.strides.last().copied().unwrap_or(0);
            crate::dispatch!(dtype, T => {
                // SAFETY: input 0 is read and output 0 written by this instruction; they differ.
                let a = unsafe { input::<T>(&ins[0]) };
                dispatch_float!(dtype, F => {
                    // SAFETY: T is F (dispatched on the same dtype).
                    let a: &[F] = unsafe { std::slice::from_raw_parts(a.as_ptr() as *const F, a.len()) };
                    // SAFETY: output 0 is written only by this instruction and is not an input.
                    let o = unsafe { output::<F>(&outs[0]) };
                    per_row(&la, &lo, o, |start, row| {
                        // The first element as it is (`cumsum([-0.0])` is `-0.0`), then the
                        // running sums or products.
                        let mut acc = a[start].up();
                        row[0] = F::down(acc);
                        for (j, d) in row.iter_mut().enumerate().skip(1) {
                            let v = a[start + j * step].up();
                            acc = if prod { acc * v } else { acc + v };
                            *d = F::down(acc);
                        }
                    });
                }, else => {
                    // SAFETY: output 0 is written only by this instruction and is not an input.
                    let o = unsafe { output::<i64>(&outs[0]) };
                    per_row(&la, &lo, o, |start, row| {
                        let mut acc = i64::from(prod);
                        for (j, d) in row.iter_mut().enumerate() {
                            let v = int_to_i64(dtype, a[start + j * step]);
                            acc = if prod { acc.wrapping_mul(v) } else { acc.wrapping_add(v) };
                            *d = acc;
                        }
                    });
                });
            });
            Ok(())
        },
    )
}

/// The gradient of [`cumprod`] along rows of `n` elements: input 0 the values `x`, input 1 the
/// gradient `g` of the running products, both dense `[rows, n]` from `offsets.0` and
/// `offsets.1` elements; output 0 (dense `[rows, n]`) gets
/// `∂/∂x_k = (Π_{j<k} x_j) · S_k`, with `S_k = g_k + x_{k+1} · S_{k+1}`: exact where some
/// `x_j` is 0, where dividing the products by `x_k` is not.
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::reduce::cumprod_backward;
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (x, g, out) = (vm.new_blob(12), vm.new_blob(12), vm.new_blob(12));
/// vm.run_op(StreamId::CPU, from_host(vec![2f32, 0., 3.]), &[], &[&x], false)?;
/// vm.run_op(StreamId::CPU, from_host(vec![1f32, 1., 1.]), &[], &[&g], false)?;
/// let k = cumprod_backward(DType::F32, 1, 3, (0, 0));
/// vm.run_op(StreamId::CPU, k, &[&x, &g], &[&out], false)?;
/// // y = [2, 0, 0]: dy/dx0 = 1 + 0 + 0, dy/dx1 = 2 + 2·3, dy/dx2 = 0.
/// let l = Layout::contiguous([3]);
/// assert_eq!(vm.read_blob(&out, move |m| gather_host::<f32>(m, &l))?, [1., 8., 0.]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn cumprod_backward(
    dtype: DType,
    rows: usize,
    n: usize,
    offsets: (usize, usize),
) -> impl Kernel {
    FnKernel::new(
        "cumprod_backward",
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            dispatch_float!(dtype, F => {
                // SAFETY: inputs 0 and 1 are read and output 0 written by this instruction.
                let (x, g) = unsafe { (input::<F>(&ins[0]), input::<F>(&ins[1])) };
                // SAFETY: output 0 is written only by this instruction and is not an input.
                let o = unsafe { output::<F>(&outs[0]) };
                let (x, g) = (&x[offsets.0..offsets.0 + rows * n], &g[offsets.1..offsets.1 + rows * n]);
                if n == 0 {
                    return Ok(());
                }
                for ((xr, gr), or) in x.chunks_exact(n).zip(g.chunks_exact(n)).zip(o.chunks_exact_mut(n)) {
                    // S from the end, kept in the output; then the exclusive products.
                    let mut s = gr[n - 1].up();
                    or[n - 1] = F::down(s);
                    for k in (0..n - 1).rev() {
                        s = gr[k].up() + xr[k + 1].up() * s;
                        or[k] = F::down(s);
                    }
                    let mut before = <F as FloatElem>::A::one();
                    for k in 0..n {
                        let sk = or[k].up();
                        or[k] = F::down(before * sk);
                        before *= xr[k].up();
                    }
                }
            }, else => {
                return Err(format!("cumprod_backward is not defined for {dtype}"));
            });
            Ok(())
        },
    )
}

/// Runs `scan(start, out_row)` for every row along the last dim of `la` (`start`: where the
/// row begins in the input; `out_row`: the row's `r` outputs, in order) and stores the rows
/// through `lo`. Rows are split over the kernel pool when the input is large; a strided output
/// (a scan along an inner dim) is gathered in a contiguous buffer first.
fn per_row<O: Elem>(la: &Layout, lo: &Layout, o: &mut [O], scan: impl Fn(usize, &mut [O]) + Sync) {
    let r = la.dims().last().copied().unwrap_or(1);
    if r == 0 {
        return; // no element (the outer dims may be huge)
    }
    let starts = crate::kernel::row_starts(la);
    let rows = starts.len();
    if rows == 0 {
        return;
    }
    let per = crate::kernel::rows_per_chunk(rows, r);
    let run = |first: usize, chunk: &mut [O]| {
        for (i, row) in chunk.chunks_exact_mut(r).enumerate() {
            scan(starts[first / r + i], row);
        }
    };
    if lo.is_contiguous() && lo.offset == 0 {
        eddy_vm::par::for_each_chunk_mut(&mut o[..rows * r], per * r, run);
    } else {
        let mut rows_out = vec![O::ZERO; rows * r];
        eddy_vm::par::for_each_chunk_mut(&mut rows_out, per * r, run);
        walk(
            lo.dims(),
            [&lo.strides],
            [lo.offset],
            0,
            rows * r,
            |i, [p]| {
                o[p] = rows_out[i];
            },
        );
    }
}

/// Rows of a sum over leading dims added straight into the column sums, up to this many; more
/// are split in halves and their sums added pairwise.
const SUM_ROWS_BLOCK: usize = 256;

/// `acc[j] += a[i·stride + j]` for rows `i < rows`: the leaf of [`sum_rows`].
#[inline(always)]
fn add_rows<T: FloatElem>(a: &[T], stride: usize, rows: usize, acc: &mut [T::A]) {
    let w = acc.len();
    for i in 0..rows {
        let row = &a[i * stride..i * stride + w];
        for (s, &v) in acc.iter_mut().zip(row) {
            *s = *s + v.up();
        }
    }
}

crate::cpu::widest!(add_rows_wide, add_rows, (a: &[T], stride: usize, rows: usize, acc: &mut [T::A]));

/// `acc[j] += Σ_i a[i·stride + j]` over `rows` rows (`acc` zero on entry, `j < acc.len()`),
/// cascaded over the rows as [`sum_float`] is over elements, so a long column's error grows
/// with the log of its length. The cascade depends on `rows` alone: a column's sum is the
/// same whichever columns are summed beside it.
fn sum_rows<F: FloatElem>(a: &[F], stride: usize, rows: usize, acc: &mut [F::A]) {
    if rows <= SUM_ROWS_BLOCK {
        return add_rows_wide(a, stride, rows, acc);
    }
    let mid = rows / 2;
    sum_rows(a, stride, mid, acc);
    let mut rest = vec![F::A::zero(); acc.len()];
    sum_rows(&a[mid * stride..], stride, rows - mid, &mut rest);
    for (s, r) in acc.iter_mut().zip(rest) {
        *s = *s + r;
    }
}

/// Columns per task of [`sum_leading`]'s column sums: whole cache lines of a row, and
/// enough of them that a task streams rather than hops.
const SUM_COLS_MIN: usize = 64;

/// Column sums of a contiguous `[rows, cols]` float input at `offset`: `out[j] = Σ_i a[i, j]`
/// (a bias gradient). Accumulates whole rows at a time, so it streams the input once; long
/// inputs of many columns are split in bands of columns over the kernel threads.
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::reduce::sum_leading;
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (a, out) = (vm.new_blob(6 * 4), vm.new_blob(3 * 4));
/// vm.run_op(StreamId::CPU, from_host(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]), &[], &[&a], false)?;
/// vm.run_op(StreamId::CPU, sum_leading(DType::F32, 0, 2, 3), &[&a], &[&out], false)?;
/// let l = Layout::contiguous([3]);
/// assert_eq!(vm.read_blob(&out, move |m| gather_host::<f32>(m, &l))?, [5.0, 7.0, 9.0]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn sum_leading(dtype: DType, offset: usize, rows_n: usize, cols: usize) -> impl Kernel {
    FnKernel::new(
        "sum",
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            dispatch_float!(dtype, F => {
            // SAFETY: input 0 is read and output 0 written by this instruction; they differ.
            let (a, o) = unsafe { (input::<F>(&ins[0]), output::<F>(&outs[0])) };
            let a = &a[offset..offset + rows_n * cols];
            if cols == 1 {
                // A full reduction: one column, summed with independent accumulators (a running
                // sum in `acc[0]` would wait on the previous addition at every element).
                o[0] = F::down(sum_float(a));
                return Ok(());
            }
            // Each task sums a band of columns over every row; the bands' results do not
            // depend on how the columns are split.
            let band = |st: usize, o: &mut [F]| {
                let mut acc = vec![<F as FloatElem>::A::zero(); o.len()];
                sum_rows(&a[st..], cols, rows_n, &mut acc);
                for (d, s) in o.iter_mut().zip(acc) {
                    *d = F::down(s);
                }
            };
            let threads = eddy_vm::par::threads();
            let o = &mut o[..cols];
            // Bands of fewer elements than a few times the pool's threshold: one wide pass
            // takes about as long as handing a band to a helper.
            let few = rows_n * cols < 4 * crate::kernel::PAR_MIN;
            if few || cols < 2 * SUM_COLS_MIN || threads < 2 {
                band(0, o);
            } else {
                let per = cols.div_ceil(threads).next_multiple_of(16).max(SUM_COLS_MIN);
                eddy_vm::par::for_each_chunk_mut(o, per, band);
            }
            Ok(())
        }, else => Err(format!("sum_leading: unsupported dtype {dtype}")))
        },
    )
}
