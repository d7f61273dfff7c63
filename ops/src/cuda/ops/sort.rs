//! Sorting and running sums along the last dim: `sort`, `argsort`, `topk` (and `median`, which
//! the tensor layer builds on them), `cumsum`.

use super::{arg, dev_layout};
use crate::cuda::launch::{CudaError, CudaKernel, Launch, dptr};
use crate::{DType, Layout};
use eddy_vm::instruction::Kernel;
use eddy_vm::{Blob, Counted};

/// The longest row sorted in shared memory: its keys and positions take 12 bytes an element,
/// within the 48 KiB a block may take without asking.
const SHARED_ROW: usize = 4096;

/// Sorts each row of `la` (its last dim) and writes the first `k` of each row's order, `k`
/// being `lo`'s last dim: values (`dtype`) to output 0 and their positions (`i64`) to output 1,
/// both through `lo`. The CPU kernel's total order: NaN above every number, ties in their
/// original order, in both directions. One block a row: a row of up to 4,096 elements is
/// sorted in shared memory, a longer one in scratch memory of 12 bytes an element for each of
/// up to 1,024 rows at once (fewer where that would pass 256 MiB).
pub fn sort(dtype: DType, la: Layout, lo: Layout, descending: bool) -> Option<impl Kernel + use<>> {
    let name = super::every!("sort", dtype)?;
    let (dl, dlo) = (dev_layout(&la).ok()?, dev_layout(&lo).ok()?);
    Some(CudaKernel::new(
        "sort",
        move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let n = la.dims().last().copied().unwrap_or(1);
            let k = lo.dims().last().copied().unwrap_or(1);
            let rows = la.numel().checked_div(n).unwrap_or(0);
            if rows == 0 || k == 0 {
                return Ok(());
            }
            if n > u32::MAX as usize {
                return Err(CudaError::Unsupported(format!(
                    "a dim of {n} elements is too long to sort"
                )));
            }
            let (mut x, mut dl, mut dlo) = (dptr::<u8>(&ins[0], 0), dl, dlo);
            let (mut yv, mut yi) = (dptr::<u8>(&outs[0], 0), dptr::<i64>(&outs[1], 0));
            let (mut rows64, mut n64, mut k64) = (rows as i64, n as i64, k as i64);
            let mut desc = descending as i32;
            let block = 512u32;
            let (grid, shared, scratch) = if n <= SHARED_ROW {
                (rows.min(65_535), (n * 12).next_multiple_of(8) as u32, None)
            } else {
                // As many rows at once as 256 MiB of keys and positions hold (at least one).
                let grid = rows.min(1024).min(((256 << 20) / (n * 12)).max(1));
                (grid, 0, Some(l.scratch(grid * n * 12)?))
            };
            let (mut key, mut pos) = match &scratch {
                Some(s) => {
                    let base = s.ptr() as u64;
                    (base, base + (grid * n * 8) as u64)
                }
                None => (0u64, 0u64),
            };
            // SAFETY: x, dl, yv, yi, dlo, rows64, n64, k64, desc, key, pos are, in order, the
            // parameters of the kernel `name` names in `kernels/sort.cu`, each of the declared
            // type and alive for the call; the device addresses are this instruction's operands
            // (or its scratch), allocated until the kernel has run.
            unsafe {
                l.grid(
                    name,
                    grid as u32,
                    block,
                    shared,
                    &mut [
                        arg(&mut x),
                        arg(&mut dl),
                        arg(&mut yv),
                        arg(&mut yi),
                        arg(&mut dlo),
                        arg(&mut rows64),
                        arg(&mut n64),
                        arg(&mut k64),
                        arg(&mut desc),
                        arg(&mut key),
                        arg(&mut pos),
                    ],
                )
            }
            // `scratch` goes back to the stream's cache here, after the launch.
        },
    ))
}

/// Running sums along the last dim of `la` into `lo`: floats in their compute type, integers
/// and bools into `i64` (wrapping). One thread a row, summing in order, so the sums round as
/// the CPU kernel's do.
pub fn cumsum(dtype: DType, la: Layout, lo: Layout) -> Option<impl Kernel + use<>> {
    scan("cumsum", false, dtype, la, lo)
}

/// Running products, as [`cumsum`] runs sums.
pub fn cumprod(dtype: DType, la: Layout, lo: Layout) -> Option<impl Kernel + use<>> {
    scan("cumprod", true, dtype, la, lo)
}

/// [`cumsum`] or (with `prod`) [`cumprod`], as op `op`.
fn scan(
    op: &'static str,
    prod: bool,
    dtype: DType,
    la: Layout,
    lo: Layout,
) -> Option<impl Kernel + use<>> {
    let name = super::every!("scan", dtype)?;
    let (dl, dlo) = (dev_layout(&la).ok()?, dev_layout(&lo).ok()?);
    Some(CudaKernel::new(
        op,
        move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let n = la.dims().last().copied().unwrap_or(1);
            let rows = la.numel().checked_div(n).unwrap_or(0);
            let (mut x, mut dl, mut y, mut dlo) =
                (dptr::<u8>(&ins[0], 0), dl, dptr::<u8>(&outs[0], 0), dlo);
            let (mut rows64, mut n64, mut p) = (rows as i64, n as i64, i32::from(prod));
            // SAFETY: x, dl, y, dlo, rows64, n64, p are, in order, the parameters of the kernel
            // `name` names in `kernels/reduce.cu`, each of the declared type and alive for the
            // call; the device addresses are this instruction's operands (or its scratch),
            // allocated until the kernel has run.
            unsafe {
                l.elementwise(
                    name,
                    rows,
                    &mut [
                        arg(&mut x),
                        arg(&mut dl),
                        arg(&mut y),
                        arg(&mut dlo),
                        arg(&mut rows64),
                        arg(&mut n64),
                        arg(&mut p),
                    ],
                )
            }
        },
    ))
}

/// The gradient of [`cumprod`] along dense rows of `n`: input 0 the values (from
/// `offsets.0`), input 1 the gradient of the products (from `offsets.1`), output 0 dense; as
/// the CPU kernel computes it, float dtypes.
pub fn cumprod_backward(
    dtype: DType,
    rows: usize,
    n: usize,
    offsets: (usize, usize),
) -> Option<impl Kernel + use<>> {
    let name = super::floats!("cumprod_backward", dtype)?;
    Some(CudaKernel::new(
        "cumprod_backward",
        move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let (mut x, mut xo) = (dptr::<u8>(&ins[0], 0), offsets.0 as i64);
            let (mut g, mut go) = (dptr::<u8>(&ins[1], 0), offsets.1 as i64);
            let (mut y, mut rows64, mut n64) = (dptr::<u8>(&outs[0], 0), rows as i64, n as i64);
            // SAFETY: x, xo, g, go, y, rows64, n64 are, in order, the parameters of the kernel
            // `name` names in `kernels/reduce.cu`, each of the declared type and alive for the
            // call; the device addresses are this instruction's operands (or its scratch),
            // allocated until the kernel has run.
            unsafe {
                l.elementwise(
                    name,
                    rows,
                    &mut [
                        arg(&mut x),
                        arg(&mut xo),
                        arg(&mut g),
                        arg(&mut go),
                        arg(&mut y),
                        arg(&mut rows64),
                        arg(&mut n64),
                    ],
                )
            }
        },
    ))
}

/// Every kernel name this family may launch.
#[cfg(test)]
pub(super) fn names() -> Vec<&'static str> {
    let mut v = Vec::new();
    for dt in super::DTYPES {
        v.extend(super::every!("sort", dt));
        v.extend(super::every!("scan", dt));
        v.extend(super::floats!("cumprod_backward", dt));
    }
    v
}

#[cfg(test)]
mod tests {
    /// The network `block_sort` in `kernels/sort.cu` runs, stage by stage (the pairs of a stage are
    /// disjoint, so the block's threads may take them in any order): every comparator puts
    /// the smaller pair first, and one whose second place is past `n` is skipped, as if the
    /// places up to the next power of two held +infinity.
    fn block_sort(key: &mut [u64], pos: &mut [u32]) {
        let n = key.len();
        let mut p = 1;
        while p < n {
            p <<= 1;
        }
        let mut order = |a: usize, b: usize| {
            if b < n && (key[b], pos[b]) < (key[a], pos[a]) {
                key.swap(a, b);
                pos.swap(a, b);
            }
        };
        let mut size = 2;
        while size <= p {
            let half = size / 2;
            for t in 0..p / 2 {
                let (base, off) = ((t / half) * size, t % half);
                order(base + off, base + size - 1 - off);
            }
            let mut stride = half / 2;
            while stride > 0 {
                for t in 0..p / 2 {
                    let a = (t / stride) * 2 * stride + t % stride;
                    order(a, a + stride);
                }
                stride /= 2;
            }
            size *= 2;
        }
    }

    /// The device sort's network sorts rows of every length up to a few hundred, and long
    /// ones, with many ties (kept in their order by the positions).
    #[test]
    fn the_sort_network_sorts_rows_of_any_length() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for n in (0..300).chain([1000, 1023, 1024, 1025, 4097, 5000]) {
            let mut key: Vec<u64> = (0..n).map(|_| next() % 17).collect();
            let mut want: Vec<(u64, u32)> = key.iter().copied().zip(0..).collect();
            want.sort();
            let mut pos: Vec<u32> = (0..n as u32).collect();
            block_sort(&mut key, &mut pos);
            let got: Vec<(u64, u32)> = key.into_iter().zip(pos).collect();
            assert_eq!(got, want, "n = {n}");
        }
    }
}
