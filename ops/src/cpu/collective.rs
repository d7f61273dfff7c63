//! The collectives of ranks whose components live in host memory (the CPU devices of this
//! process): one kernel reads the part of every rank of a group and writes every rank's result.

use super::copy::copy_typed;
use super::elementwise::{nan_max, nan_min};
use crate::collective::{Collective, ReduceKind, split_range};
use crate::kernel::{FnKernel, input, output, par_out, walk};
use crate::{DType, Elem, Layout, Shape, dispatch};
use eddy_vm::Counted;
use eddy_vm::{Blob, instruction::Kernel};

/// The collective `c` over `parts.len()` components of `dtype`: input `j` is rank `j`'s
/// component (laid out as `parts[j]`), output `k` rank `k`'s result, fresh and contiguous of
/// [`Collective::out_shape`]. Outputs past the ranks' (an ordering dependence) are not touched.
/// Reductions combine the parts in rank order, so every rank gets the same bits.
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
/// let part = Layout::contiguous([2]);
/// let c = Collective::ReduceScatter { kind: ReduceKind::Sum, dim: 0 };
/// let k = collective(c, DType::F32, vec![part.clone(), part]);
/// vm.run_op(StreamId::CPU, k, &[&a, &b], &[&x, &y], false)?;
/// let one = Layout::contiguous([1]);
/// assert_eq!(vm.read_blob(&x, { let l = one.clone(); move |b| gather_host::<f32>(b, &l) })?, [11.]);
/// assert_eq!(vm.read_blob(&y, move |b| gather_host::<f32>(b, &one))?, [22.]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn collective(c: Collective, dtype: DType, parts: Vec<Layout>) -> impl Kernel {
    FnKernel::new(
        c.name(),
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            dispatch!(dtype, T => {
                // SAFETY: the engine orders this instruction after every writer of its inputs.
                let srcs: Vec<&[T]> = ins.iter().map(|b| unsafe { input::<T>(b) }).collect();
                let dsts: Vec<&mut [T]> = (outs[..parts.len()].iter())
                    // SAFETY: this instruction alone writes its outputs, and each is a fresh
                    // blob of its own, distinct from every input and every other output.
                    .map(|b| unsafe { output::<T>(b) })
                    .collect();
                run(c, &parts, &srcs, dsts);
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

fn run<T: Elem>(c: Collective, parts: &[Layout], srcs: &[&[T]], mut dsts: Vec<&mut [T]>) {
    let p = parts.len();
    let shapes: Vec<Shape> = parts.iter().map(|l| l.shape.clone()).collect();
    let out = |k: usize| Layout::contiguous(c.out_shape(&shapes, k));
    match c {
        Collective::AllGather { dim } => {
            let full = out(0);
            let mut at = 0;
            for (part, s) in parts.iter().zip(srcs) {
                let n = part.shape.0[dim];
                copy_region(s, part, dsts[0], &narrow(&full, dim, at, n));
                at += n;
            }
        }
        Collective::AllReduce { kind } => {
            if let Some(dense) = dense(parts, srcs) {
                // One pass: each block reduced, then copied to every other rank from cache.
                let n = parts[0].numel();
                let (first, rest) = dsts.split_first_mut().expect("a group has a rank");
                let replicas = Replicas(rest.iter_mut().map(|d| d.as_mut_ptr()).collect());
                return reduce_dense(kind, &dense, &mut first[..n], &replicas);
            }
            reduce(kind, parts, srcs, &mut dsts[0][..])
        }
        Collective::ReduceScatter { kind, dim } => {
            let n = shapes[0].0[dim];
            for (k, d) in dsts.iter_mut().enumerate() {
                let r = split_range(n, p, k);
                let views: Vec<Layout> = (parts.iter())
                    .map(|l| narrow(l, dim, r.start, r.len()))
                    .collect();
                match dense(&views, srcs) {
                    Some(v) => {
                        reduce_dense(kind, &v, &mut d[..views[0].numel()], &Replicas(vec![]))
                    }
                    None => reduce(kind, &views, srcs, d),
                }
            }
        }
        Collective::AllToAll { from, to } => {
            let n = shapes[0].0[to];
            for (k, d) in dsts.iter_mut().enumerate() {
                let (r, full, mut at) = (split_range(n, p, k), out(k), 0);
                for (part, s) in parts.iter().zip(srcs) {
                    let m = part.shape.0[from];
                    let src = narrow(part, to, r.start, r.len());
                    copy_region(s, &src, d, &narrow(&full, from, at, m));
                    at += m;
                }
            }
        }
    }
    if c.same_everywhere() {
        let (first, rest) = dsts.split_first_mut().expect("a group has a rank");
        let n = out(0).numel();
        let first = &first[..n];
        for d in rest {
            par_out(&mut d[..n], |start, chunk| {
                chunk.copy_from_slice(&first[start..start + chunk.len()])
            });
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
    walk(
        outer,
        [&sl.strides[..r - 1], &dl.strides[..r - 1]],
        [sl.offset, dl.offset],
        0,
        outer.iter().product(),
        |_, [so, dof]| d[dof..dof + inner].copy_from_slice(&s[so..so + inner]),
    );
}

/// The parts laid out as `views` as dense slices, if every one is dense.
fn dense<'a, T>(views: &[Layout], srcs: &[&'a [T]]) -> Option<Vec<&'a [T]>> {
    (views.iter().zip(srcs))
        .map(|(v, s)| v.contiguous_range().map(|r| &s[r]))
        .collect()
}

/// Where a reduction's result also goes: the other ranks' outputs, each at least as long as
/// the result.
struct Replicas<T>(Vec<*mut T>);

// SAFETY: `reduce_dense` writes each range of a replica from one chunk of its parallel loop
// only (the chunks are disjoint), and nothing else touches the replicas while it runs: they
// are outputs of the running instruction.
unsafe impl<T: Send> Sync for Replicas<T> {}

/// `d` = the reduction by `kind` of `srcs` (dense, of `d`'s length), in order, block by block;
/// each block is then copied to every replica while it is in cache.
fn reduce_dense<T: Elem>(kind: ReduceKind, srcs: &[&[T]], d: &mut [T], replicas: &Replicas<T>) {
    match kind {
        ReduceKind::Sum => reduce_dense_with(srcs, d, replicas, |a, b| a.acc_add(b)),
        ReduceKind::Max => reduce_dense_with(srcs, d, replicas, nan_max),
        ReduceKind::Min => reduce_dense_with(srcs, d, replicas, nan_min),
    }
}

#[inline(always)]
fn reduce_dense_with<T: Elem>(
    srcs: &[&[T]],
    d: &mut [T],
    replicas: &Replicas<T>,
    f: impl Fn(T, T) -> T + Sync + Send,
) {
    const BLOCK: usize = 2048;
    par_out(d, |start, chunk| {
        for (b, block) in chunk.chunks_mut(BLOCK).enumerate() {
            let (at, n) = (start + b * BLOCK, block.len());
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
            for &r in &replicas.0 {
                // SAFETY: `r` has at least `at + n` elements (an output of the result's
                // shape), and this chunk alone writes `at..at + n` of it (see `Replicas`).
                unsafe { std::ptr::copy_nonoverlapping(block.as_ptr(), r.add(at), n) };
            }
        }
    });
}

/// `d` (contiguous) = the reduction by `kind` of the parts laid out as `views`, in order.
fn reduce<T: Elem>(kind: ReduceKind, views: &[Layout], srcs: &[&[T]], d: &mut [T]) {
    let n = views[0].numel();
    let d = &mut d[..n];
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
