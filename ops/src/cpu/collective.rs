//! The collectives of ranks whose components live in host memory (the CPU devices of this
//! process): one kernel reads the part of every rank of a group and writes every rank's result.

use super::copy::copy_typed;
use super::elementwise::{nan_max, nan_min};
use crate::global::{Collective, ReduceKind, split_range};
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
                copy_typed(s, part, dsts[0], &narrow(&full, dim, at, n));
                at += n;
            }
        }
        Collective::AllReduce { kind } => reduce(kind, parts, srcs, &mut dsts[0][..]),
        Collective::ReduceScatter { kind, dim } => {
            let n = shapes[0].0[dim];
            for (k, d) in dsts.iter_mut().enumerate() {
                let r = split_range(n, p, k);
                let views: Vec<Layout> = (parts.iter())
                    .map(|l| narrow(l, dim, r.start, r.len()))
                    .collect();
                reduce(kind, &views, srcs, d);
            }
        }
        Collective::AllToAll { from, to } => {
            let n = shapes[0].0[to];
            for (k, d) in dsts.iter_mut().enumerate() {
                let (r, full, mut at) = (split_range(n, p, k), out(k), 0);
                for (part, s) in parts.iter().zip(srcs) {
                    let m = part.shape.0[from];
                    let src = narrow(part, to, r.start, r.len());
                    copy_typed(s, &src, d, &narrow(&full, from, at, m));
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
