//! Elementwise kernels: unary and binary maps, in-place updates, comparisons, `where`.

use super::{arg, dev_lay, dev_layout, numel};
use crate::cuda::launch::{CudaKernel, Launch, dptr};
use crate::fuse::{Elementwise, Pos};
use crate::kinds::{BinaryOp, CmpOp, UnaryOp};
use crate::{DType, Lay, Layout};
use eddy_vm::instruction::Kernel;
use eddy_vm::{Blob, Counted};

/// The kernel's code for a unary op and its two scalars (`kernels.cu`'s `unary_op`).
pub(crate) fn unary_code(op: UnaryOp) -> Option<(i32, f64, f64)> {
    use UnaryOp::*;
    Some(match op {
        Neg => (0, 0.0, 0.0),
        Abs => (1, 0.0, 0.0),
        Exp => (2, 0.0, 0.0),
        Log => (3, 0.0, 0.0),
        Sqrt => (4, 0.0, 0.0),
        Rsqrt => (5, 0.0, 0.0),
        Sin => (6, 0.0, 0.0),
        Cos => (7, 0.0, 0.0),
        Tanh => (8, 0.0, 0.0),
        Sigmoid => (9, 0.0, 0.0),
        Relu => (10, 0.0, 0.0),
        Gelu => (11, 0.0, 0.0),
        Silu => (12, 0.0, 0.0),
        Recip => (13, 0.0, 0.0),
        Square => (14, 0.0, 0.0),
        Sign => (15, 0.0, 0.0),
        GeluGrad => (16, 0.0, 0.0),
        SiluGrad => (17, 0.0, 0.0),
        AddScalar(c) => (18, c, 0.0),
        MulScalar(c) => (19, c, 0.0),
        DivScalar(c) => (20, c, 0.0),
        RSubScalar(c) => (21, c, 0.0),
        RDivScalar(c) => (22, c, 0.0),
        PowScalar(c) => (23, c, 0.0),
        RPowScalar(c) => (24, c, 0.0),
        Clamp(lo, hi) => (25, lo, hi),
        Floor => (26, 0.0, 0.0),
        Ceil => (27, 0.0, 0.0),
        Round => (28, 0.0, 0.0),
        Trunc => (29, 0.0, 0.0),
        Log1p => (30, 0.0, 0.0),
        Expm1 => (31, 0.0, 0.0),
        Log2 => (32, 0.0, 0.0),
        Log10 => (33, 0.0, 0.0),
        Tan => (34, 0.0, 0.0),
        Atan => (35, 0.0, 0.0),
        Erf => (36, 0.0, 0.0),
        LeakyRelu(s) => (37, s, 0.0),
        Elu(a) => (38, a, 0.0),
        Softplus(b, t) => (39, b, t),
    })
}

pub(crate) fn binary_code(op: BinaryOp) -> i32 {
    match op {
        BinaryOp::Add => 0,
        BinaryOp::Sub => 1,
        BinaryOp::Mul => 2,
        BinaryOp::Div => 3,
        BinaryOp::Pow => 4,
        BinaryOp::Maximum => 5,
        BinaryOp::Minimum => 6,
        BinaryOp::ReluBackward => 7,
        BinaryOp::FloorDiv | BinaryOp::Rem => unreachable!("refused by `binary`"),
    }
}

/// `out = op(x)`: f32, f16 and bf16 (computed in f32) and f64, or i64 for the ops that keep
/// integers (negation, absolute value, square, sign, integral scalar add, multiply and reverse
/// subtract, clamp), wrapping as on the CPU.
pub fn unary(op: UnaryOp, dtype: DType, la: Lay) -> Option<impl Kernel + use<>> {
    use crate::device::Either;
    let what = Pos::of(&la).map(|a| Elementwise::Unary { op, dtype, a });
    let f32_math = |kernel, elem| unary_f32(op, la.clone(), kernel, elem);
    let k = match dtype {
        DType::F32 => f32_math("unary_f32", 4).map(|k| Either::Cpu(Either::Cpu(k))),
        DType::F16 => f32_math("unary_f16", 2).map(|k| Either::Cpu(Either::Cpu(k))),
        DType::BF16 => f32_math("unary_bf16", 2).map(|k| Either::Cpu(Either::Cpu(k))),
        DType::F64 => unary_f64(op, la).map(|k| Either::Cpu(Either::Cuda(k))),
        DType::I64 => unary_i64(op, la).map(Either::Cuda),
        _ => None,
    };
    k.map(|k| Described { k, what })
}

/// A device kernel that says what it computes ([`Kernel::describe`]), so that a plan's pass
/// may merge it with its neighbours ([`crate::fuse`]).
struct Described<K> {
    k: K,
    what: Option<Elementwise>,
}

impl<K: Kernel> Kernel for Described<K> {
    fn name(&self) -> &str {
        self.k.name()
    }
    fn compute(
        &mut self,
        inputs: &[Counted<Blob>],
        outputs: &[Counted<Blob>],
        ctx: &mut eddy_vm::instruction::ComputeCtx<'_>,
    ) -> eddy_vm::Result<()> {
        self.k.compute(inputs, outputs, ctx)
    }
    fn describe(&self) -> Option<Box<dyn std::any::Any + Send>> {
        Some(Box::new(self.what.clone()?))
    }
    fn is_described_by(&self, description: &dyn std::any::Any) -> bool {
        self.what.as_ref().is_some_and(|w| w.is(description))
    }
}

/// [`unary`] on i64.
fn unary_i64(op: UnaryOp, la: Lay) -> Option<impl Kernel + use<>> {
    use UnaryOp::*;
    let whole = |v: f64| (v.fract() == 0.0 && v.abs() < 9.2e18).then_some(v as i64);
    let (code, c, d) = match op {
        Neg => (0, 0, 0),
        Abs => (1, 0, 0),
        Square => (14, 0, 0),
        Sign => (15, 0, 0),
        AddScalar(c) => (18, whole(c)?, 0),
        MulScalar(c) => (19, whole(c)?, 0),
        RSubScalar(c) => (21, whole(c)?, 0),
        Clamp(lo, hi) => (
            25,
            if lo == f64::NEG_INFINITY {
                i64::MIN
            } else {
                whole(lo)?
            },
            if hi == f64::INFINITY {
                i64::MAX
            } else {
                whole(hi)?
            },
        ),
        _ => return None,
    };
    Some(unary_kernel(op.name(), "unary_i64", 8, (code, c, d), la))
}

/// [`unary`] computed in f32: `kernel` over elements of `elem` bytes (f32, f16 or bf16).
fn unary_f32(
    op: UnaryOp,
    la: Lay,
    kernel: &'static str,
    elem: usize,
) -> Option<impl Kernel + use<>> {
    let (code, c, d) = unary_code(op)?;
    Some(unary_kernel(
        op.name(),
        kernel,
        elem,
        (code, c as f32, d as f32),
        la,
    ))
}

/// [`unary`] on f64.
fn unary_f64(op: UnaryOp, la: Lay) -> Option<impl Kernel + use<>> {
    Some(unary_kernel(op.name(), "unary_f64", 8, unary_code(op)?, la))
}

/// A launch of the unary kernel `kernel` (`(op code, c, d)` its first three arguments, then
/// the input, its layout, the output and the count) over elements of `elem` bytes.
fn unary_kernel<C: Copy + Send + 'static>(
    name: &'static str,
    kernel: &'static str,
    elem: usize,
    (code, c, d): (i32, C, C),
    la: Lay,
) -> impl Kernel {
    CudaKernel::new(
        name,
        move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let n = numel(&outs[0], elem);
            let (mut code, mut c, mut d) = (code, c, d);
            let mut lx = dev_lay(&la, n)?;
            let (mut x, mut y, mut n64) =
                (dptr::<u8>(&ins[0], 0), dptr::<u8>(&outs[0], 0), n as i64);
            l.elementwise(
                kernel,
                n,
                &mut [
                    arg(&mut code),
                    arg(&mut c),
                    arg(&mut d),
                    arg(&mut x),
                    arg(&mut lx),
                    arg(&mut y),
                    arg(&mut n64),
                ],
            )
        },
    )
}

/// `out = a op b`, f32 or f64, or f16 and bf16 computed in f32.
pub fn binary(op: BinaryOp, dtype: DType, la: Lay, lb: Lay) -> Option<impl Kernel + use<>> {
    if matches!(op, BinaryOp::FloorDiv | BinaryOp::Rem) {
        return None;
    }
    let (kernel, elem) = match dtype {
        DType::F32 => ("binary_f32", 4),
        DType::F64 => ("binary_f64", 8),
        DType::F16 => ("binary_f16", 2),
        DType::BF16 => ("binary_bf16", 2),
        _ => return None,
    };
    let what = Pos::of(&la)
        .zip(Pos::of(&lb))
        .map(|(a, b)| Elementwise::Binary { op, dtype, a, b });
    {
        let k = CudaKernel::new(
            op.name(),
            move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
                let n = numel(&outs[0], elem);
                let mut code = binary_code(op);
                if let Some((mut a, mut b)) = dense_f32_pair(dtype, &la, &lb, ins) {
                    // Both dense: vector loads, no layout walk.
                    let (mut y, mut n64) = (dptr::<u8>(&outs[0], 0), n as i64);
                    let block = 256u32;
                    let grid = n.div_ceil(4).div_ceil(block as usize).clamp(1, 65_535 * 8);
                    return l.grid(
                        "binary_dense_f32",
                        grid as u32,
                        block,
                        0,
                        &mut [
                            arg(&mut code),
                            arg(&mut a),
                            arg(&mut b),
                            arg(&mut y),
                            arg(&mut n64),
                        ],
                    );
                }
                let (mut a, mut b) = (dptr::<u8>(&ins[0], 0), dptr::<u8>(&ins[1], 0));
                let (mut da, mut db) = (dev_lay(&la, n)?, dev_lay(&lb, n)?);
                let (mut y, mut n64) = (dptr::<u8>(&outs[0], 0), n as i64);
                l.elementwise(
                    kernel,
                    n,
                    &mut [
                        arg(&mut code),
                        arg(&mut a),
                        arg(&mut da),
                        arg(&mut b),
                        arg(&mut db),
                        arg(&mut y),
                        arg(&mut n64),
                    ],
                )
            },
        );
        Some(Described { k, what })
    }
}

/// The device addresses of two dense f32 operands, if both are dense and 16-byte aligned (the
/// vector kernel's case); the output, fresh from the allocator, always is.
fn dense_f32_pair(dtype: DType, la: &Lay, lb: &Lay, ins: &[Counted<Blob>]) -> Option<(u64, u64)> {
    let (Lay::Dense(oa), Lay::Dense(ob)) = (la, lb) else {
        return None;
    };
    let (a, b) = (dptr::<f32>(&ins[0], *oa), dptr::<f32>(&ins[1], *ob));
    (dtype == DType::F32 && a % 16 == 0 && b % 16 == 0).then_some((a, b))
}

/// `out op= alpha * x` in place, f32 or f64, or f16 and bf16 computed in f32.
pub fn binary_inplace(
    op: BinaryOp,
    dtype: DType,
    lo: Layout,
    lx: Layout,
    alpha: f64,
) -> Option<impl Kernel + use<>> {
    let kernel = match dtype {
        DType::F32 => "binary_inplace_f32",
        DType::F64 => "binary_inplace_f64",
        DType::F16 => "binary_inplace_f16",
        DType::BF16 => "binary_inplace_bf16",
        _ => return None,
    };
    Some(CudaKernel::new(
        op.name(),
        move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let n = lo.numel();
            let mut code = binary_code(op);
            let (mut o, mut x) = (dptr::<u8>(&outs[0], 0), dptr::<u8>(&ins[0], 0));
            let (mut dlo, mut dlx) = (dev_layout(&lo)?, dev_layout(&lx)?);
            let (mut alpha32, mut alpha64, mut n64) = (alpha as f32, alpha, n as i64);
            let alpha_arg = if dtype == DType::F64 {
                arg(&mut alpha64)
            } else {
                arg(&mut alpha32)
            };
            l.elementwise(
                kernel,
                n,
                &mut [
                    arg(&mut code),
                    arg(&mut o),
                    arg(&mut dlo),
                    arg(&mut x),
                    arg(&mut dlx),
                    alpha_arg,
                    arg(&mut n64),
                ],
            )
        },
    ))
}

/// `out = a cmp b` as bool, f32, f64, f16, bf16, i64, u8 or bool operands.
pub fn compare(op: CmpOp, dtype: DType, la: Lay, lb: Lay) -> Option<impl Kernel + use<>> {
    let name = match dtype {
        DType::U8 | DType::Bool => "compare_u8",
        DType::F32 => "compare_f32",
        DType::F16 => "compare_f16",
        DType::BF16 => "compare_bf16",
        DType::F64 => "compare_f64",
        DType::I64 => "compare_i64",
        _ => return None,
    };
    let code = op as i32;
    Some(CudaKernel::new(
        op.name(),
        move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let n = numel(&outs[0], 1);
            let mut code = code;
            let (mut a, mut b) = (dptr::<u8>(&ins[0], 0), dptr::<u8>(&ins[1], 0));
            let (mut da, mut db) = (dev_lay(&la, n)?, dev_lay(&lb, n)?);
            let (mut y, mut n64) = (dptr::<u8>(&outs[0], 0), n as i64);
            l.elementwise(
                name,
                n,
                &mut [
                    arg(&mut code),
                    arg(&mut a),
                    arg(&mut da),
                    arg(&mut b),
                    arg(&mut db),
                    arg(&mut y),
                    arg(&mut n64),
                ],
            )
        },
    ))
}

/// `out = cond ? a : b`: f32, f64, f16, bf16, i64, u8 and bool.
pub fn where_(dtype: DType, lc: Layout, la: Layout, lb: Layout) -> Option<impl Kernel + use<>> {
    let (kernel, elem) = match dtype {
        DType::F32 => ("where_f32", 4),
        DType::F64 => ("where_f64", 8),
        DType::I64 => ("where_i64", 8),
        DType::U8 | DType::Bool => ("where_u8", 1),
        DType::F16 | DType::BF16 => ("where_u16", 2),
        _ => return None,
    };
    Some(CudaKernel::new(
        "where",
        move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let n = numel(&outs[0], elem);
            let (mut c, mut a, mut b) = (
                dptr::<u8>(&ins[0], 0),
                dptr::<u8>(&ins[1], 0),
                dptr::<u8>(&ins[2], 0),
            );
            let (mut dc, mut da, mut db) = (dev_layout(&lc)?, dev_layout(&la)?, dev_layout(&lb)?);
            let (mut y, mut n64) = (dptr::<u8>(&outs[0], 0), n as i64);
            l.elementwise(
                kernel,
                n,
                &mut [
                    arg(&mut c),
                    arg(&mut dc),
                    arg(&mut a),
                    arg(&mut da),
                    arg(&mut b),
                    arg(&mut db),
                    arg(&mut y),
                    arg(&mut n64),
                ],
            )
        },
    ))
}
