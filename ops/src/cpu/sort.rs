//! Sorting along a dim: `sort`, `argsort` and `topk` share one kernel that orders each row's
//! element indices and writes the first `k` values and their indices.
//!
//! The order is total, so results never depend on the thread count or the sort algorithm: NaN
//! is larger than every number (as in PyTorch), and equal values keep their original order
//! (a stable sort), in both directions.

use crate::kernel::{input, output, walk, FnKernel, CHUNKS_PER_THREAD, PAR_MIN};
use crate::{dispatch, DType, Elem, Layout};
use eddy_vm::{instruction::Kernel, Blob};
use std::cmp::Ordering;
use std::sync::Arc;

/// `a` against `b` with NaN (any value unequal to itself) above everything and equal to NaN.
#[inline]
fn nan_last<T: PartialOrd>(a: &T, b: &T) -> Ordering {
    a.partial_cmp(b).unwrap_or_else(|| {
        // Unordered: at least one is NaN.
        let a_nan = a.partial_cmp(a).is_none();
        let b_nan = b.partial_cmp(b).is_none();
        a_nan.cmp(&b_nan)
    })
}

/// Orders the positions `0..row.len()` of `row` ascending (or descending) with ties by position,
/// and leaves the first `k` of that order in `pos[..k]`. `pos` is scratch of `row.len()` entries.
fn order_row<T: PartialOrd>(row: &[T], pos: &mut Vec<u32>, k: usize, descending: bool) {
    pos.clear();
    pos.extend(0..row.len() as u32);
    let cmp = |i: &u32, j: &u32| {
        let (a, b) = (&row[*i as usize], &row[*j as usize]);
        let by_value = if descending {
            nan_last(b, a)
        } else {
            nan_last(a, b)
        };
        by_value.then(i.cmp(j))
    };
    // The order is total (ties broken by position), so the unstable sorts give one answer.
    if k < row.len() && k > 0 {
        pos.select_nth_unstable_by(k - 1, cmp);
        pos[..k].sort_unstable_by(cmp);
    } else if k > 0 {
        pos.sort_unstable_by(cmp);
    }
}

/// Sorts each row of `la` along its last dim (the op permutes the sorted dim last) and writes the
/// first `k` entries of each row's order: output 0 the values (`dtype`), output 1 their positions
/// in the row (`i64`), both through `lo`, the outputs' layout permuted the same way (last dim `k`).
///
/// `descending` puts the largest first; NaN counts as the largest value and ties keep their
/// order. Rows run on both cores when the input is large.
pub fn sort(dtype: DType, la: Layout, lo: Layout, descending: bool) -> impl Kernel {
    FnKernel::new("sort", move |ins: &[Arc<Blob>], outs: &[Arc<Blob>]| {
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
        // Where each row starts in the input.
        let mut starts = Vec::with_capacity(rows);
        let outer = &la.dims()[..rank.saturating_sub(1)];
        walk(
            outer,
            [&la.strides[..outer.len()]],
            [la.offset],
            0,
            rows,
            |_, [o]| starts.push(o),
        );
        dispatch!(dtype, T => {
            // SAFETY: input 0 is read and outputs 0 and 1 written by this instruction; the three
            // blobs differ.
            let a = unsafe { input::<T>(&ins[0]) };
            // Each row's first `k` (value, position) pairs, rows in order.
            let mut picked: Vec<(T, i64)> = vec![(T::ZERO, 0); rows * k];
            let rows_per_chunk = if rows * n < PAR_MIN || eddy_vm::par::threads() < 2 {
                rows
            } else {
                rows.div_ceil(eddy_vm::par::threads() * CHUNKS_PER_THREAD)
            };
            eddy_vm::par::for_each_chunk_mut(&mut picked, rows_per_chunk * k, |first, chunk| {
                let mut row = Vec::with_capacity(n);
                let mut pos = Vec::with_capacity(n);
                for (r, dst) in chunk.chunks_exact_mut(k).enumerate() {
                    let s = starts[first / k + r];
                    row.clear();
                    row.extend((0..n).map(|j| a[s + j * step]));
                    order_row(&row, &mut pos, k, descending);
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
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(row: &[f32], k: usize, descending: bool) -> Vec<u32> {
        let mut pos = Vec::new();
        order_row(row, &mut pos, k, descending);
        pos.truncate(k);
        pos
    }

    #[test]
    fn nan_sorts_last_ascending_and_first_descending() {
        let row = [2.0, f32::NAN, -1.0, 2.0, f32::NAN];
        assert_eq!(order(&row, 5, false), [2, 0, 3, 1, 4]);
        assert_eq!(order(&row, 5, true), [1, 4, 0, 3, 2]);
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
