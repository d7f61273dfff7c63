//! The loops every elementwise kernel runs: one or two operands, dense, strided or
//! broadcast, split over the engine's threads.

use crate::cpu::stream_store::{wants_streaming, write_chunk};
use crate::kernel::{par_out, walk};
use crate::{Elem, Lay, Layout};

/// [`map1`] over an operand kept as a [`Lay`]; `out` holds exactly the output's elements.
///
/// # Examples
///
/// ```
/// use eddy_ops::{cpu::elementwise::map1_lay, Lay};
/// let a = [1.0f32, 2.0, 3.0, 4.0];
/// let mut out = [0.0f32; 2];
/// map1_lay(&a, &Lay::Dense(2), &mut out, |x| x * 10.0);
/// assert_eq!(out, [30.0, 40.0]);
/// map1_lay(&a, &Lay::Splat(0), &mut out, |x| -x);
/// assert_eq!(out, [-1.0, -1.0]);
/// ```
pub fn map1_lay<S: Elem, D: Elem>(a: &[S], la: &Lay, out: &mut [D], f: impl Fn(S) -> D + Sync) {
    match la {
        Lay::Dense(off) => dense1(&a[*off..*off + out.len()], out, f),
        Lay::Splat(off) => {
            let v = f(a[*off]);
            par_out(out, |_, c| c.fill(v));
        }
        Lay::Strided(l) => map1(a, l, out, f),
    }
}

/// [`map2`] over operands kept as [`Lay`]s; `out` holds exactly the output's elements.
///
/// # Examples
///
/// ```
/// use eddy_ops::{cpu::elementwise::map2_lay, Lay};
/// use eddy_ops::Layout;
/// let (a, bias) = ([1, 2, 3, 4, 5, 6i64], [10i64]);
/// let mut out = [0i64; 6];
/// map2_lay(&a, &Lay::Dense(0), &bias, &Lay::Splat(0), &mut out, |x, y| x + y);
/// assert_eq!(out, [11, 12, 13, 14, 15, 16]);
/// // `a` read as [3, 2] transposed to [2, 3], plus a dense [2, 3].
/// let t = Lay::of(Layout::contiguous([3, 2]).transpose(0, 1));
/// map2_lay(&a, &t, &[0i64; 6], &Lay::Dense(0), &mut out, |x, y| x + y);
/// assert_eq!(out, [1, 3, 5, 2, 4, 6]);
/// ```
pub fn map2_lay<A: Elem, B: Elem, D: Elem>(
    a: &[A],
    la: &Lay,
    b: &[B],
    lb: &Lay,
    out: &mut [D],
    f: impl Fn(A, B) -> D + Sync,
) {
    match (la, lb) {
        (Lay::Dense(oa), Lay::Dense(ob)) => {
            let n = out.len();
            dense2(&a[*oa..*oa + n], &b[*ob..*ob + n], out, f);
        }
        (Lay::Dense(oa), Lay::Splat(ob)) => {
            let y = b[*ob];
            dense1(&a[*oa..*oa + out.len()], out, move |x| f(x, y));
        }
        (Lay::Splat(oa), Lay::Dense(ob)) => {
            let x = a[*oa];
            dense1(&b[*ob..*ob + out.len()], out, move |y| f(x, y));
        }
        (Lay::Splat(oa), Lay::Splat(ob)) => {
            let v = f(a[*oa], b[*ob]);
            par_out(out, |_, c| c.fill(v));
        }
        (Lay::Strided(l), _) | (_, Lay::Strided(l)) => {
            let shape = &l.shape;
            map2(a, &la.layout(shape), b, &lb.layout(shape), out, f);
        }
    }
}

/// `out[i] = f(a[i])`, all three dense and of one length.
///
/// An output too large for the caches is written with streaming stores
/// ([`stream_store`](super::stream_store)).
pub(super) fn dense1<S: Elem, D: Elem>(a: &[S], out: &mut [D], f: impl Fn(S) -> D + Sync) {
    if out.len() < crate::kernel::PAR_MIN {
        // One chunk on this thread, written in place: the loop alone, without the chunking's
        // and the streaming choice's layers (a third of a 16-element op's kernel).
        return dense1_run(&a[..out.len()], out, &f);
    }
    let streaming = wants_streaming::<D>(out.len());
    par_out(out, |st, c| {
        write_chunk(c, streaming, |i, dst| {
            let s = st + i;
            dense1_run(&a[s..s + dst.len()], dst, &f)
        })
    });
}

/// The loop of [`dense1`], a function of its own so that its arguments carry their no-alias
/// promises: inlined into the pool's chunk closure, a captured scalar (`x * c`) was reloaded
/// after every store, which kept the loop from vectorising (3× slower than ReLU).
#[inline]
pub(super) fn dense1_run<S: Elem, D: Elem>(a: &[S], out: &mut [D], f: &impl Fn(S) -> D) {
    for (o, &x) in out.iter_mut().zip(a) {
        *o = f(x);
    }
}

/// The loop of [`dense2`] (see [`dense1_run`]).
#[inline]
pub(super) fn dense2_run<A: Elem, B: Elem, D: Elem>(
    a: &[A],
    b: &[B],
    out: &mut [D],
    f: &impl Fn(A, B) -> D,
) {
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = f(x, y);
    }
}

/// `out[i] = f(a[i], b[i])`, all dense and of one length (streaming stores as in [`dense1`]).
pub(super) fn dense2<A: Elem, B: Elem, D: Elem>(
    a: &[A],
    b: &[B],
    out: &mut [D],
    f: impl Fn(A, B) -> D + Sync,
) {
    let n = out.len();
    if n < crate::kernel::PAR_MIN {
        return dense2_run(&a[..n], &b[..n], out, &f); // as in `dense1`
    }
    let streaming = wants_streaming::<D>(n);
    par_out(out, |st, c| {
        write_chunk(c, streaming, |i, dst| {
            let (s, e) = (st + i, st + i + dst.len());
            dense2_run(&a[s..e], &b[s..e], dst, &f)
        })
    });
}

/// `out[i] = f(a[i])` over a contiguous output, `a` in any layout of the same shape.
///
/// # Examples
///
/// ```
/// use eddy_ops::{cpu::elementwise::map1, Layout};
/// let a = [1u8, 2, 3, 4, 5, 6];
/// let mut out = [0i64; 6];
/// map1(&a, &Layout::contiguous([3, 2]).transpose(0, 1), &mut out, |x| x as i64 * 2);
/// assert_eq!(out, [2, 6, 10, 4, 8, 12]);
/// ```
pub fn map1<S: Elem, D: Elem>(a: &[S], la: &Layout, out: &mut [D], f: impl Fn(S) -> D + Sync) {
    let n = la.numel();
    let out = &mut out[..n];
    if let Some(r) = la.contiguous_range() {
        dense1(&a[r], out, f);
    } else {
        par_out(out, |st, c| {
            walk(
                la.dims(),
                [&la.strides],
                [la.offset],
                st,
                st + c.len(),
                |i, [o]| c[i - st] = f(a[o]),
            )
        });
    }
}

pub(super) fn scalar_of(l: &Layout) -> bool {
    l.strides.iter().all(|&s| s == 0)
}

/// `out[i] = f(a[i], b[i])` over a contiguous output, inputs in any layout of its shape.
///
/// # Examples
///
/// ```
/// use eddy_ops::{cpu::elementwise::map2, Layout};
/// let (a, b) = ([1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [10.0f32, 20.0, 30.0]);
/// let la = Layout::contiguous([2, 3]);
/// let lb = Layout::contiguous([3]).broadcast_to(&la.shape); // one row for both rows
/// let mut out = [0.0f32; 6];
/// map2(&a, &la, &b, &lb, &mut out, |x, y| x * y);
/// assert_eq!(out, [10.0, 40.0, 90.0, 40.0, 100.0, 180.0]);
/// ```
pub fn map2<A: Elem, B: Elem, D: Elem>(
    a: &[A],
    la: &Layout,
    b: &[B],
    lb: &Layout,
    out: &mut [D],
    f: impl Fn(A, B) -> D + Sync,
) {
    let n = la.numel();
    if n == 0 {
        return;
    }
    let out = &mut out[..n];
    match (la.contiguous_range(), lb.contiguous_range()) {
        (Some(ra), Some(rb)) => dense2(&a[ra], &b[rb], out, f),
        (Some(ra), None) if scalar_of(lb) => {
            let y = b[lb.offset];
            dense1(&a[ra], out, move |x| f(x, y));
        }
        (None, Some(rb)) if scalar_of(la) => {
            let x = a[la.offset];
            dense1(&b[rb], out, move |y| f(x, y));
        }
        _ => rows2(a, la, b, lb, out, f),
    }
}

/// The general case of [`map2`], a row (innermost dim) at a time: the outer dims advance by
/// the walker, and each row is a plain loop specialised for unit and zero strides, so a bias
/// broadcast along rows (`[n, k] + [k]`) runs as fast as a contiguous add.
pub(super) fn rows2<A: Elem, B: Elem, D: Elem>(
    a: &[A],
    la: &Layout,
    b: &[B],
    lb: &Layout,
    out: &mut [D],
    f: impl Fn(A, B) -> D + Sync,
) {
    let r = la.shape.rank();
    let inner = la.dims()[r - 1];
    if inner == 0 {
        return;
    }
    let (sa, sb) = (la.strides[r - 1], lb.strides[r - 1]);
    let outer = &la.dims()[..r - 1];
    let rows = out.len() / inner;
    let body = |row0: usize, chunk: &mut [D]| {
        let nrows = chunk.len() / inner;
        walk(
            outer,
            [&la.strides[..r - 1], &lb.strides[..r - 1]],
            [la.offset, lb.offset],
            row0,
            row0 + nrows,
            |ri, [oa, ob]| {
                let o = &mut chunk[(ri - row0) * inner..(ri - row0 + 1) * inner];
                match (sa, sb) {
                    (1, 1) => {
                        for ((d, &x), &y) in
                            o.iter_mut().zip(&a[oa..oa + inner]).zip(&b[ob..ob + inner])
                        {
                            *d = f(x, y);
                        }
                    }
                    (1, 0) => {
                        let y = b[ob];
                        for (d, &x) in o.iter_mut().zip(&a[oa..oa + inner]) {
                            *d = f(x, y);
                        }
                    }
                    (0, 1) => {
                        let x = a[oa];
                        for (d, &y) in o.iter_mut().zip(&b[ob..ob + inner]) {
                            *d = f(x, y);
                        }
                    }
                    _ => {
                        for (k, d) in o.iter_mut().enumerate() {
                            *d = f(a[oa + k * sa], b[ob + k * sb]);
                        }
                    }
                }
            },
        )
    };
    let threads = eddy_vm::par::threads();
    if out.len() >= crate::kernel::PAR_MIN && rows >= 2 && threads > 1 {
        let per = rows
            .div_ceil(threads * crate::kernel::CHUNKS_PER_THREAD)
            .max(1);
        eddy_vm::par::for_each_chunk_mut(out, per * inner, |start, c| body(start / inner, c));
    } else {
        body(0, out);
    }
}
