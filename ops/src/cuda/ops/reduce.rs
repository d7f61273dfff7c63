//! Reductions over trailing runs and row-wise softmax.

use super::{arg, dev_layout, numel};
use crate::cuda::launch::{CudaKernel, Launch, dptr};
use crate::kinds::ReduceOp;
use crate::{DType, Layout};
use eddy_vm::instruction::Kernel;
use eddy_vm::{Blob, Counted};

/// Reductions of runs of `r` elements of `la` (the reduced dims permuted last): f32 and f64,
/// f16 and bf16 accumulated in f32, and `i64`, `u8` and `bool` (sums and products in `i64`,
/// wrapping, as on the CPU).
pub fn reduce(op: ReduceOp, dtype: DType, la: Layout, r: usize) -> Option<impl Kernel + use<>> {
    let arg_op = matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin);
    let out_elem = op.out_dtype(dtype)?.size_in_bytes();
    let name = match (dtype, arg_op) {
        (DType::I64, false) => "reduce_i64",
        (DType::U8 | DType::Bool, false) => "reduce_u8",
        (DType::I64, true) => "argreduce_i64",
        (DType::U8 | DType::Bool, true) => "argreduce_u8",
        (DType::F32, false) => "reduce_f32",
        (DType::F64, false) => "reduce_f64",
        (DType::F16, false) => "reduce_f16",
        (DType::BF16, false) => "reduce_bf16",
        (DType::F32, true) => "argreduce_f32",
        (DType::F64, true) => "argreduce_f64",
        (DType::F16, true) => "argreduce_f16",
        (DType::BF16, true) => "argreduce_bf16",
        _ => return None,
    };
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
                l.grid(name, grid, block, 0, params)
            } else {
                l.elementwise(name, nout, params)
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
    let name = match dtype {
        DType::F32 => "reduce_f32",
        DType::F64 => "reduce_f64",
        DType::F16 => "reduce_f16",
        DType::BF16 => "reduce_bf16",
        _ => return None,
    };
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

/// Softmax or log-softmax over the last dim of a dense `[rows, cols]` f32 input.
pub fn softmax(
    dtype: DType,
    offset: usize,
    rows: usize,
    cols: usize,
    log: bool,
) -> Option<impl Kernel + use<>> {
    (dtype == DType::F32).then(|| {
        let op = if log { "log_softmax" } else { "softmax" };
        CudaKernel::new(
            op,
            move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
                let (mut x, mut off, mut y) = (
                    dptr::<f32>(&ins[0], 0),
                    offset as i64,
                    dptr::<f32>(&outs[0], 0),
                );
                let (mut rows64, mut cols64, mut lg) = (rows as i64, cols as i64, log as i32);
                let block = 256u32;
                l.grid(
                    "softmax_f32",
                    rows as u32,
                    block,
                    block * 4,
                    &mut [
                        arg(&mut x),
                        arg(&mut off),
                        arg(&mut y),
                        arg(&mut rows64),
                        arg(&mut cols64),
                        arg(&mut lg),
                    ],
                )
            },
        )
    })
}
