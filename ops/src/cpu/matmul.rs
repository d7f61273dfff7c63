//! Matrix multiplication through the `gemm` crate (≈ 89 % of this machine's peak), batched over
//! broadcast leading dims. Strided operands (transposed views) need no copy.

use crate::kernel::{input, output, walk, FnKernel};
use crate::{DType, Elem, Layout};
use eddy_vm::{instruction::Kernel, Blob};
use gemm::Parallelism;
use std::sync::Arc;

/// `out[b] = a[b] @ b[b]` for every batch index: input 0 of layout `la` (`[batch.., m, k]`),
/// input 1 of layout `lb` (`[batch.., k, n]`), batch dims already broadcast to the same shape;
/// output 0 contiguous `[batch.., m, n]`. `dtype` is `f32` or `f64`.
pub fn matmul(dtype: DType, la: Layout, lb: Layout) -> impl Kernel {
    FnKernel::new(
        "matmul",
        move |ins: &[Arc<Blob>], outs: &[Arc<Blob>]| match dtype {
            DType::F32 => run::<f32>(&la, &lb, ins, outs),
            DType::F64 => run::<f64>(&la, &lb, ins, outs),
            d => Err(format!("matmul kernel does not take {d}")),
        },
    )
}

fn run<T: Elem + num_traits::Zero>(
    la: &Layout,
    lb: &Layout,
    ins: &[Arc<Blob>],
    outs: &[Arc<Blob>],
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
    let nb: usize = batch.iter().product();
    if nb == 0 || m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        o[..nb * m * n].fill(T::ZERO);
        return Ok(());
    }
    let par = if m * n * k >= 64 * 64 * 64 {
        Parallelism::Rayon(0)
    } else {
        Parallelism::None
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
            // SAFETY: every element gemm reads, `base + i*rs + j*cs` for i, j within the
            // operand's dims, lies inside its slice (the last one was checked just above; strides
            // are non-negative); `dst` is a dense `m × n` row-major slice that only gemm writes.
            unsafe {
                gemm::gemm(
                    m,
                    n,
                    k,
                    dst.as_mut_ptr(),
                    1,
                    n as isize,
                    false,
                    a.as_ptr().add(oa),
                    a_cs,
                    a_rs,
                    b.as_ptr().add(ob),
                    b_cs,
                    b_rs,
                    T::ZERO,
                    T::from_f64(1.0),
                    false,
                    false,
                    false,
                    par,
                )
            }
        },
    );
    err.map_or(Ok(()), Err)
}
