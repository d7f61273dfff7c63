//! Matrix products through cuBLAS, with the bias and ReLU of `linear`.

use super::{arg, dev_layout};
use crate::cuda::launch::{CudaKernel, Launch, dptr};
use crate::{DType, Layout};
use cudarc::cublas::sys::cublasOperation_t;
use eddy_vm::instruction::Kernel;
use eddy_vm::{Blob, Counted};

/// How cuBLAS reads one `rows × cols` operand stored with `strides` (row, col): as the
/// column-major transpose with leading dimension `ld` (`false`), or as itself (`true`).
fn mat_view(rows: usize, cols: usize, rs: usize, cs: usize) -> Option<(bool, usize)> {
    if cs == 1 || cols == 1 {
        // Row-major: column-major (cols × rows) with ld = rs.
        Some((false, rs.max(cols).max(1)))
    } else if rs == 1 || rows == 1 {
        Some((true, cs.max(rows).max(1)))
    } else {
        None
    }
}

/// One stride over the batch dims of `l` (all but the last two), if they collapse to one.
fn batch_stride(l: &Layout) -> Option<(usize, usize)> {
    let r = l.shape.rank();
    let dims = &l.shape.dims()[..r - 2];
    let strides = &l.strides[..r - 2];
    let count: usize = dims.iter().product();
    let mut stride: Option<usize> = None;
    let mut expect = 0usize;
    for (k, (&d, &s)) in dims.iter().zip(strides).enumerate().rev() {
        if d == 1 {
            continue;
        }
        match stride {
            None => {
                stride = Some(s);
                expect = s * d;
            }
            Some(st) if st == 0 && s == 0 => {}
            Some(_) if s == expect => expect = s * d,
            _ => return None,
        }
        let _ = k;
    }
    Some((count, stride.unwrap_or(0)))
}

/// The product `a @ b` (batched over broadcast batch dims) through cuBLAS, into a contiguous
/// output, optionally followed by a bias (`lc`, broadcast over the output) and a ReLU.
fn gemm(
    name: &'static str,
    la: Layout,
    lb: Layout,
    bias: Option<(Layout, bool)>,
) -> Option<impl Kernel + use<>> {
    let r = la.shape.rank();
    if r < 2 || lb.shape.rank() != r {
        return None;
    }
    let (m, k) = (la.shape.dims()[r - 2], la.shape.dims()[r - 1]);
    let n = lb.shape.dims()[r - 1];
    let (ta, lda) = mat_view(m, k, la.strides[r - 2], la.strides[r - 1])?;
    let (tb, ldb) = mat_view(k, n, lb.strides[r - 2], lb.strides[r - 1])?;
    let (batch, sa) = batch_stride(&la)?;
    let (_, sb) = batch_stride(&lb)?;
    let lim = i32::MAX as usize;
    if [m, n, k, lda, ldb, batch].iter().any(|&v| v > lim) {
        return None;
    }
    Some(CudaKernel::new(
        name,
        move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            if m == 0 || n == 0 || batch == 0 {
                return Ok(());
            }
            let a = dptr::<f32>(&ins[0], la.offset) as *const f32;
            let b = dptr::<f32>(&ins[1], lb.offset) as *const f32;
            let c = dptr::<f32>(&outs[0], 0) as *mut f32;
            let (alpha, beta) = (1.0f32, 0.0f32);
            let op = |t: bool| {
                if t {
                    cublasOperation_t::CUBLAS_OP_T
                } else {
                    cublasOperation_t::CUBLAS_OP_N
                }
            };
            // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: B is cuBLAS's first operand.
            l.blas(|h| {
                // SAFETY: the pointers are the operands' and output's device memory, laid out as the
                // views above describe (checked when the kernel was built); the scalars are host
                // values alive for the call; the handle is bound to this stream.
                unsafe {
                    cudarc::cublas::result::sgemm_strided_batched(
                        h,
                        op(tb),
                        op(ta),
                        n as i32,
                        m as i32,
                        k as i32,
                        &alpha,
                        b,
                        ldb as i32,
                        sb as i64,
                        a,
                        lda as i32,
                        sa as i64,
                        &beta,
                        c,
                        n as i32,
                        (m * n) as i64,
                        batch as i32,
                    )
                }
                .map_err(|e| format!("cuBLAS sgemm: {e:?}"))
            })?;
            if let Some((lc, relu)) = &bias {
                let total = batch * m * n;
                let (mut y, mut bp) = (c as u64, dptr::<f32>(&ins[2], 0));
                let mut dl = dev_layout(lc)?;
                let (mut n64, mut rl) = (total as i64, *relu as i32);
                l.elementwise(
                    "bias_act_f32",
                    total,
                    &mut [
                        arg(&mut y),
                        arg(&mut bp),
                        arg(&mut dl),
                        arg(&mut n64),
                        arg(&mut rl),
                    ],
                )?;
            }
            Ok(())
        },
    ))
}

/// `a @ b`, f32, through cuBLAS.
pub fn matmul(dtype: DType, la: Layout, lb: Layout) -> Option<impl Kernel + use<>> {
    if dtype != DType::F32 {
        return None;
    }
    gemm("matmul", la, lb, None)
}

/// `relu?(a @ b + c)`, f32: the product through cuBLAS, then the bias (and ReLU) in one pass.
pub fn matmul_bias(
    dtype: DType,
    la: Layout,
    lb: Layout,
    lc: Layout,
    relu: bool,
) -> Option<impl Kernel + use<>> {
    if dtype != DType::F32 {
        return None;
    }
    gemm(
        if relu { "linear_relu" } else { "linear" },
        la,
        lb,
        Some((lc, relu)),
    )
}
