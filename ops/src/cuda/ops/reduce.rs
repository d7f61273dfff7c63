//! Reductions over trailing runs and row-wise softmax.

use super::{arg, dev_layout, numel};
use crate::cuda::launch::{CudaKernel, Launch, dptr};
use crate::kinds::ReduceOp;
use crate::{DType, Layout};
use eddy_vm::instruction::Kernel;
use eddy_vm::{Blob, Counted};

/// Reductions of runs of `r` elements of `la` (the reduced dims permuted last), every dtype:
/// f32 and f64, f16 and bf16 accumulated in f32, and the integers and bool (sums and products
/// in `i64`, wrapping, as on the CPU).
pub fn reduce(op: ReduceOp, dtype: DType, la: Layout, r: usize) -> Option<impl Kernel + use<>> {
    let arg_op = matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin);
    let out_elem = op.out_dtype(dtype)?.size_in_bytes();
    let name = reduce_name(dtype, arg_op)?;
    let code = match op {
        ReduceOp::Sum | ReduceOp::ArgMax => 0,
        ReduceOp::Mean | ReduceOp::ArgMin => 1,
        ReduceOp::Prod => 2,
        ReduceOp::Max => 3,
        ReduceOp::Min => 4,
    };
    Some(reduce_kernel(op.name(), name, code, la, r, out_elem))
}

/// A launch of reduction kernel `name` over outputs of `out_elem` bytes (their count from the
/// output's size, so that runs of no elements still write their identities).
fn reduce_kernel(
    op: &'static str,
    name: &'static str,
    code: i32,
    la: Layout,
    r: usize,
    out_elem: usize,
) -> impl Kernel {
    CudaKernel::new(
        op,
        move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let nout = numel(&outs[0], out_elem);
            if nout == 0 {
                return Ok(());
            }
            let mut code = code;
            let mut x = dptr::<f32>(&ins[0], 0);
            let mut dl = dev_layout(&la)?;
            let (mut y, mut nout64, mut r64) = (dptr::<u8>(&outs[0], 0), nout as i64, r as i64);
            let params = &mut [
                arg(&mut code),
                arg(&mut x),
                arg(&mut dl),
                arg(&mut y),
                arg(&mut nout64),
                arg(&mut r64),
            ];
            if name.starts_with("reduce_") {
                // One warp per output.
                let block = 256u32;
                let grid = (nout * 32).div_ceil(block as usize) as u32;
                // SAFETY: code, x, dl, y, nout64, r64 are, in order, the parameters of the kernel
                // `name` names in `kernels/reduce.cu`, each of the declared type and alive for the
                // call; the device addresses are this instruction's operands (or its scratch),
                // allocated until the kernel has run.
                unsafe { l.grid(name, grid, block, 0, params) }
            } else {
                // SAFETY: code, x, dl, y, nout64, r64 are, in order, the parameters of the kernel
                // `name` names in `kernels/reduce.cu`, each of the declared type and alive for the
                // call; the device addresses are this instruction's operands (or its scratch),
                // allocated until the kernel has run.
                unsafe { l.elementwise(name, nout, params) }
            }
        },
    )
}

/// Sums the leading `rows` rows of a dense `[rows, cols]` float input from `offset`.
pub fn sum_leading(
    dtype: DType,
    offset: usize,
    rows: usize,
    cols: usize,
) -> Option<impl Kernel + use<>> {
    let name = super::floats!("reduce", dtype)?;
    // Output j sums elements j, j + cols, …: the layout [cols, rows] with strides [1, cols].
    let mut l = Layout::contiguous([cols, rows]);
    l.strides = [1, cols].into_iter().collect();
    l.offset = offset;
    Some(reduce_kernel(
        "sum",
        name,
        0,
        l,
        rows,
        dtype.size_in_bytes(),
    ))
}

/// Softmax or log-softmax over the last dim of a dense `[rows, cols]` float input (f16 and
/// bf16 computed in f32).
pub fn softmax(
    dtype: DType,
    offset: usize,
    rows: usize,
    cols: usize,
    log: bool,
) -> Option<impl Kernel + use<>> {
    let name = super::floats!("softmax", dtype)?;
    // Shared memory: one value of the compute type a thread.
    let compute = if dtype == DType::F64 { 8 } else { 4 };
    Some({
        let op = if log { "log_softmax" } else { "softmax" };
        CudaKernel::new(
            op,
            move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
                let (mut x, mut off, mut y) = (
                    dptr::<u8>(&ins[0], 0),
                    offset as i64,
                    dptr::<u8>(&outs[0], 0),
                );
                let (mut rows64, mut cols64, mut lg) = (rows as i64, cols as i64, log as i32);
                let block = 256u32;
                // SAFETY: x, off, y, rows64, cols64, lg are, in order, the parameters of the
                // kernel `name` names in `kernels/reduce.cu`, each of the declared type and alive
                // for the call; the device addresses are this instruction's operands (or its
                // scratch), allocated until the kernel has run.
                unsafe {
                    l.grid(
                        name,
                        rows as u32,
                        block,
                        block * compute,
                        &mut [
                            arg(&mut x),
                            arg(&mut off),
                            arg(&mut y),
                            arg(&mut rows64),
                            arg(&mut cols64),
                            arg(&mut lg),
                        ],
                    )
                }
            },
        )
    })
}

/// The reduction kernel for `dtype` (an arg-reduction with `arg_op`).
fn reduce_name(dtype: DType, arg_op: bool) -> Option<&'static str> {
    if arg_op {
        super::every!("argreduce", dtype)
    } else {
        super::every!("reduce", dtype)
    }
}

/// Every kernel name this family may launch.
#[cfg(test)]
pub(super) fn names() -> Vec<&'static str> {
    let mut v = Vec::new();
    for dt in super::DTYPES {
        v.extend(reduce_name(dt, false));
        v.extend(reduce_name(dt, true));
        v.extend(super::floats!("softmax", dt));
    }
    v
}
