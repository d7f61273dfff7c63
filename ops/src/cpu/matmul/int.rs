//! The integer products of [`matmul`](super::matmul): exact, wrapping in the dtype.

use super::{PAR_MNK, Product, product};
use crate::kernel::walk;
use crate::{Elem, Layout};
use eddy_vm::{Blob, Counted};

/// The integer product: exact, with every multiply and add wrapping in `T` (a sum that
/// overflows `i64` wraps as `torch.mm` does, rather than losing its low digits in `f64`).
///
/// A plain `i-p-j` loop: each output row accumulates `a[i, p] * b[p, ..]` over `p`, so the inner
/// loop runs along `b`'s row (vectorised when `b`'s columns are contiguous). Rows are split over
/// the kernel pool's threads from [`PAR_MNK`] multiply-adds on.
pub(super) fn run_int<T>(
    la: &Layout,
    lb: &Layout,
    ins: &[Counted<Blob>],
    outs: &[Counted<Blob>],
) -> Result<(), String>
where
    T: Elem + num_traits::WrappingAdd + num_traits::WrappingMul,
{
    let r = la.shape.rank();
    let Product {
        m,
        k,
        n,
        batch,
        nb,
        a,
        b,
        o,
    } = product::<T>(la, lb, ins, outs);
    if nb == 0 || m == 0 || n == 0 {
        return Ok(());
    }
    let (a_rs, a_cs) = (la.strides[r - 2], la.strides[r - 1]);
    let (b_rs, b_cs) = (lb.strides[r - 2], lb.strides[r - 1]);
    let parallel = m > 1 && m.saturating_mul(n).saturating_mul(k) >= PAR_MNK;
    let mut err = None;
    walk(
        batch,
        [&la.strides[..r - 2], &lb.strides[..r - 2]],
        [la.offset, lb.offset],
        0,
        nb,
        |bi, [oa, ob]| {
            let dst = &mut o[bi * m * n..(bi + 1) * m * n];
            if k == 0 {
                dst.fill(T::ZERO);
                return;
            }
            let last_a = oa + (m - 1) * a_rs + (k - 1) * a_cs;
            let last_b = ob + (k - 1) * b_rs + (n - 1) * b_cs;
            if last_a >= a.len() || last_b >= b.len() {
                err = Some("matmul operand out of its storage".to_string());
                return;
            }
            let row = |i: usize, out: &mut [T]| {
                out.fill(T::ZERO);
                for p in 0..k {
                    let x = a[oa + i * a_rs + p * a_cs];
                    let brow = &b[ob + p * b_rs..];
                    if b_cs == 1 {
                        for (o, &y) in out.iter_mut().zip(&brow[..n]) {
                            *o = o.wrapping_add(&x.wrapping_mul(&y));
                        }
                    } else {
                        for (j, o) in out.iter_mut().enumerate() {
                            *o = o.wrapping_add(&x.wrapping_mul(&brow[j * b_cs]));
                        }
                    }
                }
            };
            if parallel {
                let rows = m.div_ceil(eddy_vm::par::threads().max(1));
                eddy_vm::par::for_each_chunk_mut(dst, rows * n, |start, chunk| {
                    for (ii, out) in chunk.chunks_mut(n).enumerate() {
                        row(start / n + ii, out);
                    }
                });
            } else {
                for (i, out) in dst.chunks_mut(n).enumerate() {
                    row(i, out);
                }
            }
        },
    );
    err.map_or(Ok(()), Err)
}
