//! The collectives of ranks whose components live in host memory (the CPU devices of this
//! process): one kernel reads the part of every rank of a group and writes one rank's result.

use super::copy::copy_typed;
use super::elementwise::{nan_max, nan_min};
use super::stream_store::{wants_streaming, write_chunk};
use crate::collective::{Collective, ReduceKind, split_range};
use crate::kernel::{FnKernel, input, output, par_out, walk};
use crate::{DType, Elem, Layout, Shape, dispatch};
use eddy_vm::Counted;
use eddy_vm::{Blob, instruction::Kernel};

/// Rank `rank`'s result of the collective `c` over `parts.len()` components of `dtype`: input
/// `j` is rank `j`'s component (laid out as `parts[j]`), output 0 the result, fresh and
/// contiguous of [`Collective::out_shape`]. Outputs after the first (an ordering dependence)
/// are not touched. Reductions combine the parts in rank order, so every rank gets the same
/// bits.
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::collective::collective;
/// use eddy_ops::global::{Collective, ReduceKind};
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (a, b, x, y) = (vm.new_blob(8), vm.new_blob(8), vm.new_blob(4), vm.new_blob(4));
/// vm.run_op(StreamId::CPU, from_host(vec![1f32, 2.]), &[], &[&a], false)?;
/// vm.run_op(StreamId::CPU, from_host(vec![10f32, 20.]), &[], &[&b], false)?;
/// let parts = vec![Layout::contiguous([2]); 2];
/// let c = Collective::ReduceScatter { kind: ReduceKind::Sum, dim: 0 };
/// vm.run_op(StreamId::CPU, collective(c, DType::F32, parts.clone(), 0), &[&a, &b], &[&x], false)?;
/// vm.run_op(StreamId::CPU, collective(c, DType::F32, parts, 1), &[&a, &b], &[&y], false)?;
/// let one = Layout::contiguous([1]);
/// assert_eq!(vm.read_blob(&x, { let l = one.clone(); move |b| gather_host::<f32>(b, &l) })?, [11.]);
/// assert_eq!(vm.read_blob(&y, move |b| gather_host::<f32>(b, &one))?, [22.]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn collective(c: Collective, dtype: DType, parts: Vec<Layout>, rank: usize) -> impl Kernel {
    FnKernel::new(
        c.name(),
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            dispatch!(dtype, T => {
                // SAFETY: the engine orders this instruction after every writer of its inputs.
                let srcs: Vec<&[T]> = ins.iter().map(|b| unsafe { input::<T>(b) }).collect();
                // SAFETY: this instruction alone writes its outputs, and output 0 is a fresh
                // blob of its own, distinct from every input.
                let d = unsafe { output::<T>(&outs[0]) };
                run(c, &parts, &srcs, rank, d);
            });
            Ok(())
        },
    )
}

/// `l` narrowed to `len` elements from `start` along `dim`.
fn narrow(l: &Layout, dim: usize, start: usize, len: usize) -> Layout {
    let mut n = l.clone();
    n.offset += start * l.strides[dim];
    n.shape.0[dim] = len;
    n
}

/// Rank `k`'s result of `c` over the parts `srcs` laid out as `parts`, into `d`.
fn run<T: Elem>(c: Collective, parts: &[Layout], srcs: &[&[T]], k: usize, d: &mut [T]) {
    let p = parts.len();
    let shapes: Vec<Shape> = parts.iter().map(|l| l.shape.clone()).collect();
    let full = Layout::contiguous(c.out_shape(&shapes, k));
    match c {
        Collective::AllGather { dim } => {
            let mut at = 0;
            for (part, s) in parts.iter().zip(srcs) {
                let n = part.shape.0[dim];
                copy_region(s, part, d, &narrow(&full, dim, at, n));
                at += n;
            }
        }
        Collective::AllReduce { kind } => reduce(kind, parts, srcs, d),
        Collective::ReduceScatter { kind, dim } => {
            let r = split_range(shapes[0].0[dim], p, k);
            let views: Vec<Layout> = (parts.iter())
                .map(|l| narrow(l, dim, r.start, r.len()))
                .collect();
            reduce(kind, &views, srcs, d);
        }
        Collective::AllToAll { from, to } => {
            let (r, mut at) = (split_range(shapes[0].0[to], p, k), 0);
            for (part, s) in parts.iter().zip(srcs) {
                let m = part.shape.0[from];
                let src = narrow(part, to, r.start, r.len());
                copy_region(s, &src, d, &narrow(&full, from, at, m));
                at += m;
            }
        }
    }
}

/// Copies the elements of `sl` in `s` to those of `dl` (the same shape) in `d`: a slice copy
/// per row where both run densely along the last dim and the layouts are not both dense (the
/// blocks of an all-gather along an inner dim, of an all-to-all), else as any copy.
fn copy_region<T: Elem>(s: &[T], sl: &Layout, d: &mut [T], dl: &Layout) {
    let r = sl.shape.0.len();
    let inner = sl.shape.0.last().copied().unwrap_or(1);
    let rows_dense = r >= 2 && inner >= 16 && sl.strides[r - 1] == 1 && dl.strides[r - 1] == 1;
    if !rows_dense || (sl.is_contiguous() && dl.is_contiguous()) || sl.numel() == 0 {
        return copy_typed(s, sl, d, dl);
    }
    let outer = &sl.shape.0[..r - 1];
    if let Some(dr) = dl.contiguous_range() {
        // A dense block of the result (an all-to-all's, an all-gather's along dim 0): split
        // over the kernel pool, large ones streamed past the cache.
        let d = &mut d[dr];
        let streaming = wants_streaming::<T>(d.len());
        par_out(d, |start, chunk| {
            write_chunk(chunk, streaming, |i, dst| {
                let mut pos = 0;
                while pos < dst.len() {
                    let at = start + i + pos;
                    let (row, col) = (at / inner, at % inner);
                    let len = (inner - col).min(dst.len() - pos);
                    let so = row_offset(row, outer, &sl.strides[..r - 1]) + sl.offset + col;
                    dst[pos..pos + len].copy_from_slice(&s[so..so + len]);
                    pos += len;
                }
            })
        });
        return;
    }
    walk(
        outer,
        [&sl.strides[..r - 1], &dl.strides[..r - 1]],
        [sl.offset, dl.offset],
        0,
        outer.iter().product(),
        |_, [so, dof]| d[dof..dof + inner].copy_from_slice(&s[so..so + inner]),
    );
}

/// The storage offset of row `row` (in row-major order over `dims`) with `strides`.
fn row_offset(mut row: usize, dims: &[usize], strides: &[usize]) -> usize {
    let mut off = 0;
    for (&n, &st) in dims.iter().zip(strides).rev() {
        off += (row % n) * st;
        row /= n;
    }
    off
}

/// The parts laid out as `views` as dense slices, if every one is dense.
fn dense<'a, T>(views: &[Layout], srcs: &[&'a [T]]) -> Option<Vec<&'a [T]>> {
    (views.iter().zip(srcs))
        .map(|(v, s)| v.contiguous_range().map(|r| &s[r]))
        .collect()
}

/// `d` = the reduction by `kind` of `srcs` (dense, of `d`'s length), in order, in one pass
/// block by block (each block of `d` stays in cache while every part is added in).
fn reduce_dense<T: Elem>(kind: ReduceKind, srcs: &[&[T]], d: &mut [T]) {
    match kind {
        ReduceKind::Sum => reduce_dense_with(srcs, d, |a, b| a.acc_add(b)),
        ReduceKind::Max => reduce_dense_with(srcs, d, nan_max),
        ReduceKind::Min => reduce_dense_with(srcs, d, nan_min),
    }
}

#[inline(always)]
fn reduce_dense_with<T: Elem>(srcs: &[&[T]], d: &mut [T], f: impl Fn(T, T) -> T + Sync + Send) {
    // A large result is streamed past the cache: its lines are not read in to be overwritten.
    let streaming = wants_streaming::<T>(d.len());
    par_out(d, |start, chunk| {
        write_chunk(chunk, streaming, |i, dst| {
            reduce_block(srcs, start + i, dst, &f)
        })
    });
}

/// `dst` = the reduction of the parts' elements from `from`, block by block.
#[inline(always)]
fn reduce_block<T: Elem>(srcs: &[&[T]], from: usize, dst: &mut [T], f: &impl Fn(T, T) -> T) {
    const BLOCK: usize = 2048;
    for (b, block) in dst.chunks_mut(BLOCK).enumerate() {
        let (at, n) = (from + b * BLOCK, block.len());
        let first = &srcs[0][at..at + n];
        match srcs.get(1) {
            None => block.copy_from_slice(first),
            Some(second) => {
                for ((o, &x), &y) in block.iter_mut().zip(first).zip(&second[at..at + n]) {
                    *o = f(x, y);
                }
            }
        }
        for s in srcs.iter().skip(2) {
            for (o, &y) in block.iter_mut().zip(&s[at..at + n]) {
                *o = f(*o, y);
            }
        }
    }
}

/// `d` (contiguous) = the reduction by `kind` of the parts laid out as `views`, in order.
fn reduce<T: Elem>(kind: ReduceKind, views: &[Layout], srcs: &[&[T]], d: &mut [T]) {
    let n = views[0].numel();
    let d = &mut d[..n];
    if let Some(dense) = dense(views, srcs) {
        return reduce_dense(kind, &dense, d);
    }
    copy_typed(
        srcs[0],
        &views[0],
        d,
        &Layout::contiguous(views[0].shape.clone()),
    );
    for (v, s) in views.iter().zip(srcs).skip(1) {
        match kind {
            ReduceKind::Sum => combine(s, v, d, |a, b| a.acc_add(b)),
            ReduceKind::Max => combine(s, v, d, nan_max),
            ReduceKind::Min => combine(s, v, d, nan_min),
        }
    }
}

/// `d[i] = f(d[i], s[i])` over the elements of `sl`, in its row-major order.
#[inline(always)]
fn combine<T: Elem>(s: &[T], sl: &Layout, d: &mut [T], f: impl Fn(T, T) -> T + Sync + Send) {
    if d.is_empty() {
        return;
    }
    match sl.contiguous_range() {
        Some(r) => {
            let s = &s[r];
            par_out(d, |start, chunk| {
                for (o, &v) in chunk.iter_mut().zip(&s[start..]) {
                    *o = f(*o, v);
                }
            })
        }
        None => walk(
            sl.dims(),
            [&sl.strides],
            [sl.offset],
            0,
            d.len(),
            |i, [o]| d[i] = f(d[i], s[o]),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows of 300 (chunks of the pool start inside rows) from a strided source block into a
    /// dense destination block, large enough to be split over the pool and streamed.
    #[test]
    fn row_copies_into_a_dense_block_match_elementwise() {
        for rows in [2, 200, 20_000] {
            let cols = 600;
            let s: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
            // The right half of each source row, into a dense `[rows, 300]` block after a
            // leading row of padding.
            let sl = narrow(&Layout::contiguous([rows, cols]), 1, 300, 300);
            let dl = narrow(&Layout::contiguous([rows + 1, 300]), 0, 1, rows);
            let mut d = vec![-1f32; (rows + 1) * 300];
            copy_region(&s, &sl, &mut d, &dl);
            assert!(d[..300].iter().all(|&v| v == -1.0), "padding untouched");
            for r in 0..rows {
                for c in 0..300 {
                    assert_eq!(d[300 + r * 300 + c], s[r * cols + 300 + c], "({r}, {c})");
                }
            }
        }
    }

    #[test]
    fn row_offsets_follow_the_strides() {
        // Rows of a [2, 3, ·] view with strides [100, 10, ·].
        let offs: Vec<usize> = (0..6).map(|r| row_offset(r, &[2, 3], &[100, 10])).collect();
        assert_eq!(offs, [0, 10, 20, 100, 110, 120]);
    }
}
