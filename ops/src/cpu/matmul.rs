//! Matrix multiplication through the `gemm` crate (≈ 89 % of this machine's peak), batched over
//! broadcast leading dims. Strided operands (transposed views) need no copy.

use crate::kernel::{input, output, walk, FnKernel};
use crate::{DType, Elem, Layout};
use eddy_vm::{instruction::Kernel, Blob};
use std::sync::Arc;

/// `out[b] = a[b] @ b[b]` for every batch index: input 0 of layout `la` (`[batch.., m, k]`),
/// input 1 of layout `lb` (`[batch.., k, n]`), batch dims already broadcast to the same shape;
/// output 0 contiguous `[batch.., m, n]`. `dtype` is `f32` or `f64`.
pub fn matmul(dtype: DType, la: Layout, lb: Layout) -> impl Kernel {
    FnKernel::new(
        "matmul",
        move |ins: &[Arc<Blob>], outs: &[Arc<Blob>]| match dtype {
            DType::F32 => run::<f32>(&la, &lb, ins, outs, single_row_f32),
            DType::F64 => run::<f64>(&la, &lb, ins, outs, |_, _, _, _, _| false),
            d => Err(format!("matmul kernel does not take {d}")),
        },
    )
}

fn run<T: Elem + num_traits::Zero>(
    la: &Layout,
    lb: &Layout,
    ins: &[Arc<Blob>],
    outs: &[Arc<Blob>],
    single_row: SingleRow<T>,
) -> Result<(), String> {
    let r = la.shape.rank();
    let (m, k, n) = (la.dims()[r - 2], la.dims()[r - 1], lb.dims()[r - 1]);
    // SAFETY: inputs 0 and 1 are read, output 0 written; the output is a fresh blob.
    let (a, b, o) = unsafe {
        (
            input::<T>(&ins[0]),
            input::<T>(&ins[1]),
            output::<T>(&outs[0]),
        )
    };
    let batch = &la.dims()[..r - 2];
    let nb = crate::numel_of(batch);
    if nb == 0 || m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        o[..nb * m * n].fill(T::ZERO);
        return Ok(());
    }
    let parts = if m * n * k >= PAR_MNK {
        eddy_vm::par::threads()
    } else {
        1
    };
    let (a_rs, a_cs) = (la.strides[r - 2] as isize, la.strides[r - 1] as isize);
    let (b_rs, b_cs) = (lb.strides[r - 2] as isize, lb.strides[r - 1] as isize);
    let mut err = None;
    walk(
        batch,
        [&la.strides[..r - 2], &lb.strides[..r - 2]],
        [la.offset, lb.offset],
        0,
        nb,
        |bi, [oa, ob]| {
            let dst = &mut o[bi * m * n..(bi + 1) * m * n];
            let last_a = oa + (m - 1) * a_rs as usize + (k - 1) * a_cs as usize;
            let last_b = ob + (k - 1) * b_rs as usize + (n - 1) * b_cs as usize;
            if last_a >= a.len() || last_b >= b.len() {
                err = Some("matmul operand out of its storage".to_string());
                return;
            }
            if m == 1
                && a_cs == 1
                && single_row(&a[oa..oa + k], &b[ob..], b_rs as usize, b_cs as usize, dst)
            {
                return;
            }
            // SAFETY: every element gemm reads, `base + i*rs + j*cs` for i, j within the
            // operand's dims, lies inside its slice (the last one was checked just above; strides
            // are non-negative); `dst` is a dense `m × n` row-major slice that only gemm writes.
            unsafe {
                gemm_parts(
                    parts,
                    Mat {
                        p: dst.as_mut_ptr(),
                        rs: n as isize,
                        cs: 1,
                    },
                    Mat {
                        p: a.as_ptr().add(oa).cast_mut(),
                        rs: a_rs,
                        cs: a_cs,
                    },
                    Mat {
                        p: b.as_ptr().add(ob).cast_mut(),
                        rs: b_rs,
                        cs: b_cs,
                    },
                    m,
                    n,
                    k,
                )
            }
        },
    );
    err.map_or(Ok(()), Err)
}

/// `y = x @ B` for one row `x` (`B` at the slice's start with row and column strides
/// `rs`, `cs`), if the dtype has a kernel for it and `B` has contiguous rows or columns;
/// returns whether it ran.
type SingleRow<T> = fn(x: &[T], b: &[T], rs: usize, cs: usize, y: &mut [T]) -> bool;

/// [`SingleRow`] for `f32`: the streaming loops of [`gemv`](super::gemv) where the CPU has them.
fn single_row_f32(x: &[f32], b: &[f32], rs: usize, cs: usize, y: &mut [f32]) -> bool {
    super::gemv::gemv(x, b, rs, cs, y)
}

/// From this many multiply-adds on, a product is split over the kernel pool's threads.
const PAR_MNK: usize = 64 * 64 * 64;

/// A strided matrix operand: element `(i, j)` at `p + i*rs + j*cs`.
#[derive(Clone, Copy)]
struct Mat<T> {
    p: *mut T,
    rs: isize,
    cs: isize,
}
// SAFETY: `gemm_parts` hands each thread a disjoint block of the output and read-only operands.
unsafe impl<T: Send + Sync> Send for Mat<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for Mat<T> {}

/// `dst = a @ b` (`m × k` by `k × n`) as `parts` single-threaded gemm calls on the kernel pool,
/// each computing a band of the output: columns when `n ≥ m`, else rows, in multiples of 16 so
/// every band keeps whole micro-kernel tiles. One band per thread, each packing its own
/// operands, measured faster than gemm's own rayon split from a non-rayon thread for every
/// shape of the MLP workload (the hand-off to rayon's sleeping threads cost 15–20 µs a call).
///
/// # Safety
///
/// As `gemm::gemm`: every element of the three matrices is in bounds, `dst` is written by
/// nothing else, and `a`, `b` are not written during the call.
unsafe fn gemm_parts<T: Elem + num_traits::Zero>(
    parts: usize,
    dst: Mat<T>,
    a: Mat<T>,
    b: Mat<T>,
    m: usize,
    n: usize,
    k: usize,
) {
    // SAFETY: the caller's guarantee, for the block of `rows × cols` at `(i0, j0)`.
    let block = |i0: usize, j0: usize, rows: usize, cols: usize| unsafe {
        let (dst, a, b) = (dst, a, b); // whole operands (`Sync`), not their raw pointer fields
        gemm::gemm(
            rows,
            cols,
            k,
            dst.p.offset(i0 as isize * dst.rs + j0 as isize * dst.cs),
            dst.cs,
            dst.rs,
            false,
            a.p.offset(i0 as isize * a.rs),
            a.cs,
            a.rs,
            b.p.offset(j0 as isize * b.cs),
            b.cs,
            b.rs,
            T::ZERO,
            T::from_f64(1.0),
            false,
            false,
            false,
            gemm::Parallelism::None,
        )
    };
    let split_cols = n >= m;
    let len = if split_cols { n } else { m };
    let band = len.div_ceil(parts.max(1)).next_multiple_of(16);
    if parts < 2 || band >= len {
        block(0, 0, m, n);
        return;
    }
    eddy_vm::par::for_each(len.div_ceil(band), |p| {
        let (s, w) = (p * band, band.min(len - p * band));
        if split_cols {
            block(0, s, m, w)
        } else {
            block(s, 0, w, n)
        }
    });
}
