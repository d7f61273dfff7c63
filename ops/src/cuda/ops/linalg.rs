//! Matrix products through cuBLAS, with the bias and ReLU of `linear`.

use super::{arg, dev_layout};
use crate::cuda::launch::{CudaError, CudaKernel, Launch, dptr};
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
    dtype: DType,
    la: Layout,
    lb: Layout,
    bias: Option<(Layout, bool)>,
) -> Option<impl Kernel + use<>> {
    let elem = match dtype {
        DType::F32 => 4,
        DType::F64 => 8,
        DType::F16 | DType::BF16 => 2,
        _ => return None,
    };
    if bias.is_some() && !matches!(dtype, DType::F32 | DType::F64) {
        return None;
    }
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
            let a = dptr::<u8>(&ins[0], la.offset * elem);
            let b = dptr::<u8>(&ins[1], lb.offset * elem);
            let c = dptr::<u8>(&outs[0], 0);
            let op = |t: bool| {
                if t {
                    cublasOperation_t::CUBLAS_OP_T
                } else {
                    cublasOperation_t::CUBLAS_OP_N
                }
            };
            // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: B is cuBLAS's first operand.
            let (ta, tb) = (op(ta), op(tb));
            let (m, n, k, lda, ldb) = (m as i32, n as i32, k as i32, lda as i32, ldb as i32);
            let (sa, sb, sc, batch) = (sa as i64, sb as i64, (m as i64) * (n as i64), batch as i32);
            l.blas(|h| {
                use cudarc::cublas::result as blas;
                use cudarc::cublas::sys::{cublasComputeType_t, cublasGemmAlgo_t, cudaDataType};
                // Each call below: the pointers are the operands' and output's device memory, of
                // `dtype`, laid out as the views above describe (checked when the kernel was
                // built); the scalars are host values alive for the call; the handle is bound to
                // this stream.
                let r = match dtype {
                    DType::F64 => {
                        let (alpha, beta) = (1.0f64, 0.0f64);
                        let (a, b, c) = (a as *const f64, b as *const f64, c as *mut f64);
                        // SAFETY: as said above the match.
                        unsafe {
                            blas::dgemm_strided_batched(
                                h, tb, ta, n, m, k, &alpha, b, ldb, sb, a, lda, sa, &beta, c, n,
                                sc, batch,
                            )
                        }
                    }
                    DType::F16 | DType::BF16 => {
                        // Half operands on the tensor cores, summed in f32, rounded once.
                        let t = if dtype == DType::F16 {
                            cudaDataType::CUDA_R_16F
                        } else {
                            cudaDataType::CUDA_R_16BF
                        };
                        let (alpha, beta) = (1.0f32, 0.0f32);
                        let ptr = |p: u64| p as *const std::ffi::c_void;
                        // SAFETY: as said above the match.
                        unsafe {
                            blas::gemm_strided_batched_ex(
                                h,
                                tb,
                                ta,
                                n,
                                m,
                                k,
                                (&alpha as *const f32).cast(),
                                ptr(b),
                                t,
                                ldb,
                                sb,
                                ptr(a),
                                t,
                                lda,
                                sa,
                                (&beta as *const f32).cast(),
                                c as *mut std::ffi::c_void,
                                t,
                                n,
                                sc,
                                batch,
                                cublasComputeType_t::CUBLAS_COMPUTE_32F,
                                cublasGemmAlgo_t::CUBLAS_GEMM_DFALT,
                            )
                        }
                    }
                    _ => {
                        let (alpha, beta) = (1.0f32, 0.0f32);
                        let (a, b, c) = (a as *const f32, b as *const f32, c as *mut f32);
                        // SAFETY: as said above the match.
                        unsafe {
                            blas::sgemm_strided_batched(
                                h, tb, ta, n, m, k, &alpha, b, ldb, sb, a, lda, sa, &beta, c, n,
                                sc, batch,
                            )
                        }
                    }
                };
                r.map_err(|e| CudaError::Blas {
                    what: format!("gemm ({dtype})"),
                    status: format!("{e:?}"),
                })
            })?;
            if let Some((lc, relu)) = &bias {
                let total = batch as usize * m as usize * n as usize;
                bias_act(l, c, &ins[2], lc, *relu, dtype, total)?;
            }
            Ok(())
        },
    ))
}

/// `y = relu?(y + bias)` in place over the `total` elements of the product at `y`, `bias`
/// (input 2) laid out as `lc` over the output; f32 or f64.
fn bias_act(
    l: &Launch<'_>,
    y: u64,
    bias: &Blob,
    lc: &Layout,
    relu: bool,
    dtype: DType,
    total: usize,
) -> Result<(), CudaError> {
    let name = if dtype == DType::F64 {
        "bias_act_f64"
    } else {
        "bias_act_f32"
    };
    let (mut y, mut bp) = (y, dptr::<u8>(bias, 0));
    let mut dl = dev_layout(lc)?;
    let (mut n64, mut rl) = (total as i64, i32::from(relu));
    // SAFETY: y, bp, dl, n64, rl are, in order, the parameters of the kernel `name` names in
    // `kernels/linalg.cu`, each of the declared type and alive for the call; the device addresses
    // are this instruction's operands (or its scratch), allocated until the kernel has run.
    unsafe {
        l.elementwise(
            name,
            total,
            &mut [
                arg(&mut y),
                arg(&mut bp),
                arg(&mut dl),
                arg(&mut n64),
                arg(&mut rl),
            ],
        )
    }
}

/// `a @ b`: through cuBLAS for f32, f64, and f16 and bf16 on the tensor cores (summed in
/// f32) where each matrix has a unit stride; any other dtype or layout by a kernel of one
/// thread an output element (integers wrapping, as on the CPU).
pub fn matmul(dtype: DType, la: Layout, lb: Layout) -> Option<impl Kernel + use<>> {
    use crate::device::Either;
    match gemm("matmul", dtype, la.clone(), lb.clone(), None) {
        Some(k) => Some(Either::Cpu(k)),
        None => matmul_any("matmul", dtype, la, lb, None).map(Either::Cuda),
    }
}

/// The kernel of [`matmul`] for any dtype but bool and any layout, followed by a bias (f32
/// or f64) and a ReLU where `bias` says so.
fn matmul_any(
    op: &'static str,
    dtype: DType,
    la: Layout,
    lb: Layout,
    bias: Option<(Layout, bool)>,
) -> Option<impl Kernel + use<>> {
    if bias.is_some() && !matches!(dtype, DType::F32 | DType::F64) {
        return None;
    }
    let name = super::every!("matmul_any", dtype).filter(|_| dtype != DType::Bool)?;
    let r = la.shape.rank();
    if r < 2 || lb.shape.rank() != r {
        return None;
    }
    let (m, k) = (la.shape.dims()[r - 2], la.shape.dims()[r - 1]);
    let n = lb.shape.dims()[r - 1];
    let batch: usize = la.shape.dims()[..r - 2].iter().product();
    let (dla, dlb) = (dev_layout(&la).ok()?, dev_layout(&lb).ok()?);
    let (sa, sb) = (la.strides[r - 1] as i64, lb.strides[r - 2] as i64);
    Some(CudaKernel::new(
        op,
        move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let (mut a, mut dla, mut sa) = (dptr::<u8>(&ins[0], 0), dla, sa);
            let (mut b, mut dlb, mut sb) = (dptr::<u8>(&ins[1], 0), dlb, sb);
            let mut y = dptr::<u8>(&outs[0], 0);
            let (mut batch64, mut m64, mut k64, mut n64) =
                (batch as i64, m as i64, k as i64, n as i64);
            // SAFETY: a, dla, sa, b, dlb, sb, y, batch64, m64, k64, n64 are, in order, the
            // parameters of the kernel `name` names in `kernels/linalg.cu`, each of the declared
            // type and alive for the call; the device addresses are this instruction's operands
            // (or its scratch), allocated until the kernel has run.
            unsafe {
                l.elementwise(
                    name,
                    batch * m * n,
                    &mut [
                        arg(&mut a),
                        arg(&mut dla),
                        arg(&mut sa),
                        arg(&mut b),
                        arg(&mut dlb),
                        arg(&mut sb),
                        arg(&mut y),
                        arg(&mut batch64),
                        arg(&mut m64),
                        arg(&mut k64),
                        arg(&mut n64),
                    ],
                )
            }?;
            match &bias {
                Some((lc, relu)) => bias_act(l, y, &ins[2], lc, *relu, dtype, batch * m * n),
                None => Ok(()),
            }
        },
    ))
}

/// Every kernel name this family may launch.
#[cfg(test)]
pub(super) fn names() -> Vec<&'static str> {
    let mut v = vec!["bias_act_f32", "bias_act_f64"];
    for dt in super::DTYPES {
        v.extend(super::every!("matmul_any", dt).filter(|_| dt != DType::Bool));
    }
    v
}

/// `relu?(a @ b + c)`, f32 or f64: the product (as [`matmul`] computes it), then the bias
/// (and ReLU) in one pass.
pub fn matmul_bias(
    dtype: DType,
    la: Layout,
    lb: Layout,
    lc: Layout,
    relu: bool,
) -> Option<impl Kernel + use<>> {
    use crate::device::Either;
    let op = if relu { "linear_relu" } else { "linear" };
    let bias = Some((lc, relu));
    match gemm(op, dtype, la.clone(), lb.clone(), bias.clone()) {
        Some(k) => Some(Either::Cpu(k)),
        None => matmul_any(op, dtype, la, lb, bias).map(Either::Cuda),
    }
}
