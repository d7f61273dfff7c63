//! Sorting along a dim: `sort`, `argsort` and `topk` share one kernel that orders each row's
//! element indices and writes the first `k` values and their indices.
//!
//! The order is total, so results never depend on the thread count or the sort algorithm: NaN
//! is larger than every number (as in PyTorch), and equal values keep their original order
//! (a stable sort), in both directions.

use crate::kernel::{FnKernel, input, output, row_starts, rows_per_chunk, walk};
use crate::{DType, Elem, Layout, dispatch};
use eddy_vm::Counted;
use eddy_vm::{Blob, instruction::Kernel};

/// A value's place in the sort order as an unsigned integer: keys compare as the values do,
/// with every NaN equal and above every number, and `-0.0` equal to `0.0` (they compare equal,
/// so they tie and keep their order). Sorting integers instead of calling a comparator that
/// looks values up through positions is what makes the kernel fast.
trait SortKey: Copy {
    /// Whether the key needs more than 32 bits.
    const WIDE: bool;
    fn key(self) -> u64;
}

#[inline(always)]
fn f32_key(x: f32) -> u64 {
    if x.is_nan() {
        return u32::MAX as u64;
    }
    let b = (x + 0.0).to_bits(); // -0.0 + 0.0 is +0.0
    (if b >> 31 == 1 { !b } else { b | 1 << 31 }) as u64
}

macro_rules! key_impl {
    ($t:ty, $wide:expr, |$x:ident| $e:expr) => {
        impl SortKey for $t {
            const WIDE: bool = $wide;
            #[inline(always)]
            fn key(self) -> u64 {
                let $x = self;
                $e
            }
        }
    };
}
key_impl!(f32, false, |x| f32_key(x));
key_impl!(half::f16, false, |x| f32_key(x.to_f32()));
key_impl!(half::bf16, false, |x| f32_key(x.to_f32()));
key_impl!(i32, false, |x| (x as u32 ^ 1 << 31) as u64);
key_impl!(u8, false, |x| x as u64);
key_impl!(crate::Bool8, false, |x| x.0 as u64);
key_impl!(i64, true, |x| x as u64 ^ 1 << 63);
key_impl!(f64, true, |x| {
    if x.is_nan() {
        u64::MAX
    } else {
        let b = (x + 0.0).to_bits();
        if b >> 63 == 1 { !b } else { b | 1 << 63 }
    }
});

/// Orders the positions `0..row.len()` of `row` ascending (or descending) with ties by position,
/// and leaves the first `k` of that order in `pos[..k]`. Each position is sorted as one integer,
/// its key above its position (descending flips the key, not the position, so ties still
/// keep their order); `scratch` is reused between rows.
fn order_row<T: SortKey>(
    row: &[T],
    pos: &mut Vec<u32>,
    scratch: &mut Scratch,
    k: usize,
    descending: bool,
) {
    let flip = if descending { u64::MAX } else { 0 };
    pos.clear();
    if T::WIDE {
        let c = &mut scratch.wide;
        c.clear();
        c.extend(
            row.iter()
                .enumerate()
                .map(|(i, v)| ((v.key() ^ flip) as u128) << 64 | i as u128),
        );
        select_sorted(c, k);
        pos.extend(c[..k].iter().map(|&v| v as u32));
    } else {
        let c = &mut scratch.narrow;
        c.clear();
        c.extend(
            row.iter()
                .enumerate()
                .map(|(i, v)| ((v.key() ^ flip) & 0xffff_ffff) << 32 | i as u64),
        );
        select_sorted(c, k);
        pos.extend(c[..k].iter().map(|&v| v as u32));
    }
}

/// Buffers of [`order_row`]'s composite keys.
#[derive(Default)]
struct Scratch {
    narrow: Vec<u64>,
    wide: Vec<u128>,
}

/// Sorts the `k` smallest of `v` into `v[..k]` (all of it when `k` is `v.len()`): the keys are
/// distinct (each holds its position), so the unstable algorithms give the one answer.
fn select_sorted<C: Ord>(v: &mut [C], k: usize) {
    if k == 0 {
        return;
    }
    if k < v.len() {
        v.select_nth_unstable(k - 1);
        v[..k].sort_unstable();
    } else {
        v.sort_unstable();
    }
}

/// Sorts each row of `la` along its last dim (the op permutes the sorted dim last) and writes the
/// first `k` entries of each row's order: output 0 the values (`dtype`), output 1 their positions
/// in the row (`i64`), both through `lo`, the outputs' layout permuted the same way (last dim `k`).
///
/// `descending` puts the largest first; NaN counts as the largest value and ties keep their
/// order. Rows run on both cores when the input is large.
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::sort::sort;
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (a, vals, pos) = (vm.new_blob(4 * 4), vm.new_blob(2 * 4), vm.new_blob(2 * 8));
/// vm.run_op(StreamId::CPU, from_host(vec![3i32, 1, 4, 1]), &[], &[&a], false)?;
/// // The two largest of one row of four (`topk(2)`).
/// let k = sort(DType::I32, Layout::contiguous([4]), Layout::contiguous([2]), true);
/// vm.run_op(StreamId::CPU, k, &[&a], &[&vals, &pos], false)?;
/// let l = Layout::contiguous([2]);
/// assert_eq!(vm.read_blob(&vals, move |m| gather_host::<i32>(m, &l))?, [4, 3]);
/// let l = Layout::contiguous([2]);
/// assert_eq!(vm.read_blob(&pos, move |m| gather_host::<i64>(m, &l))?, [2, 0]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn sort(dtype: DType, la: Layout, lo: Layout, descending: bool) -> impl Kernel {
    FnKernel::new(
        "sort",
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let rank = la.dims().len();
            let n = la.dims().last().copied().unwrap_or(1);
            let k = lo.dims().last().copied().unwrap_or(1);
            let rows = crate::numel_of(&la.dims()[..rank.saturating_sub(1)]);
            if rows == 0 || k == 0 {
                return Ok(());
            }
            if n > u32::MAX as usize {
                return Err(format!("sort: a dim of {n} elements is too long to sort"));
            }
            let step = if rank == 0 { 0 } else { la.strides[rank - 1] };
            let starts = row_starts(&la);
            let rows_per_chunk = rows_per_chunk(rows, n);
            dispatch!(dtype, T => {
                // SAFETY: input 0 is read and outputs 0 and 1 written by this instruction; the three
                // blobs differ.
                let a = unsafe { input::<T>(&ins[0]) };
                // Each row's first `k` (value, position) pairs, rows in order.
                let mut picked: Vec<(T, i64)> = vec![(T::ZERO, 0); rows * k];
                eddy_vm::par::for_each_chunk_mut(&mut picked, rows_per_chunk * k, |first, chunk| {
                    let mut row = Vec::with_capacity(n);
                    let mut pos = Vec::with_capacity(n);
                    let mut scratch = Scratch::default();
                    for (r, dst) in chunk.chunks_exact_mut(k).enumerate() {
                        let s = starts[first / k + r];
                        row.clear();
                        row.extend((0..n).map(|j| a[s + j * step]));
                        order_row(&row, &mut pos, &mut scratch, k, descending);
                        for (d, &p) in dst.iter_mut().zip(&pos[..k]) {
                            *d = (row[p as usize], p as i64);
                        }
                    }
                });
                // SAFETY: as above; each output is taken once.
                let (ov, oi) = unsafe { (output::<T>(&outs[0]), output::<i64>(&outs[1])) };
                walk(lo.dims(), [&lo.strides], [lo.offset], 0, rows * k, |i, [o]| {
                    (ov[o], oi[o]) = picked[i];
                });
            });
            Ok(())
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order<T: SortKey>(row: &[T], k: usize, descending: bool) -> Vec<u32> {
        let mut pos = Vec::new();
        order_row(row, &mut pos, &mut Scratch::default(), k, descending);
        pos
    }

    /// The order by a comparator: NaN above everything, then a stable sort.
    fn by_comparator<T: PartialOrd>(row: &[T], descending: bool) -> Vec<u32> {
        let nan_last = |a: &T, b: &T| {
            a.partial_cmp(b).unwrap_or_else(|| {
                let a_nan = a.partial_cmp(a).is_none();
                a_nan.cmp(&b.partial_cmp(b).is_none())
            })
        };
        let mut pos: Vec<u32> = (0..row.len() as u32).collect();
        pos.sort_by(|&i, &j| {
            let (a, b) = (&row[i as usize], &row[j as usize]);
            if descending {
                nan_last(b, a)
            } else {
                nan_last(a, b)
            }
        });
        pos
    }

    #[test]
    fn nan_sorts_last_ascending_and_first_descending() {
        let row = [2.0, f32::NAN, -1.0, 2.0, -f32::NAN];
        assert_eq!(order(&row, 5, false), [2, 0, 3, 1, 4]);
        assert_eq!(order(&row, 5, true), [1, 4, 0, 3, 2]);
    }

    #[test]
    fn keys_order_as_the_comparator_for_every_dtype() {
        let f: Vec<f64> = [
            0.0,
            -0.0,
            1.5,
            -1.5,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            -f64::NAN,
            1e-300,
            -1e-300,
            3.0,
            1.5,
            0.0,
            f64::MIN_POSITIVE,
            -7.25,
            f64::MAX,
            f64::MIN,
        ]
        .to_vec();
        let i: Vec<i64> = [0, -1, 1, i64::MIN, i64::MAX, 5, -5, 5, 0].to_vec();
        fn same<T: SortKey + PartialOrd + std::fmt::Debug>(row: &[T]) {
            for descending in [false, true] {
                let want = by_comparator(row, descending);
                assert_eq!(
                    order(row, row.len(), descending),
                    want,
                    "{row:?} {descending}"
                );
            }
        }
        same(&f);
        same(&f.iter().map(|&v| v as f32).collect::<Vec<_>>());
        same(
            &f.iter()
                .map(|&v| half::f16::from_f64(v))
                .collect::<Vec<_>>(),
        );
        same(
            &f.iter()
                .map(|&v| half::bf16::from_f64(v))
                .collect::<Vec<_>>(),
        );
        same(&i);
        same(
            &i.iter()
                .map(|&v| v.clamp(i32::MIN as i64, i32::MAX as i64) as i32)
                .collect::<Vec<_>>(),
        );
        same(&i.iter().map(|&v| v as u8).collect::<Vec<_>>());
        // -0.0 and 0.0 tie, so they keep their order.
        assert_eq!(order(&[0.0f32, -0.0], 2, false), [0, 1]);
    }

    #[test]
    fn partial_selection_matches_the_full_order() {
        let row: Vec<f32> = (0..97).map(|i| ((i * 37) % 11) as f32).collect();
        for descending in [false, true] {
            let full = order(&row, row.len(), descending);
            for k in [1, 2, 10, 96, 97] {
                assert_eq!(order(&row, k, descending), full[..k], "k = {k}");
            }
        }
    }
}
