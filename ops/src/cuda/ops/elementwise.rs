//! Elementwise kernels: unary and binary maps, in-place updates, comparisons, `where`.

use super::{arg, dev_lay, dev_layout, numel};
use crate::cuda::launch::{CudaError, CudaKernel, Launch, dptr};
use crate::kinds::{BinaryOp, CmpOp, UnaryOp};
use crate::program::{Elementwise, Pos};
use crate::{DType, Lay, Layout};
use eddy_vm::instruction::Kernel;
use eddy_vm::{Blob, Counted};

/// The kernel's code for a unary op and its two scalars (`kernels/prelude.cu`'s `unary_op`).
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
        BinaryOp::FloorDiv => 8,
        BinaryOp::Rem => 9,
        BinaryOp::GeluBackward => 10,
    }
}

/// `out = op(x)`: floats (f16 and bf16 computed in f32), or the integer dtypes for the ops
/// that keep integers (negation, absolute value, ReLU, square, sign, integral scalar add,
/// multiply and reverse subtract, clamp, and the roundings, which leave integers as they are),
/// computed in i64 and wrapping as on the CPU.
pub fn unary(op: UnaryOp, dtype: DType, la: Lay) -> Option<impl Kernel + use<>> {
    use crate::device::Either;
    let what = Pos::of(&la).map(|a| Elementwise::Unary { op, dtype, a });
    let name = unary_name(dtype)?;
    let k = match dtype {
        DType::F32 | DType::F16 | DType::BF16 => {
            let (code, c, d) = unary_code(op)?;
            let k = unary_kernel(op.name(), name, dtype, (code, c as f32, d as f32), la);
            Either::Cpu(Either::Cpu(k))
        }
        DType::F64 => Either::Cpu(Either::Cuda(unary_kernel(
            op.name(),
            name,
            dtype,
            unary_code(op)?,
            la,
        ))),
        _ => Either::Cuda(unary_int(op, name, dtype, la)?),
    };
    Some(Described { k, what })
}

/// The unary kernel for `dtype` (integers share the i64 arithmetic).
fn unary_name(dtype: DType) -> Option<&'static str> {
    super::every!("unary", dtype).filter(|_| dtype != DType::Bool)
}

/// A device kernel that says what it computes ([`Kernel::describe`]), so that a plan's pass
/// may merge it with its neighbours ([`crate::fuse`]).
struct Described<K> {
    k: K,
    what: Option<Elementwise>,
}

/// Runs an expression on the described kernel (see [`eddy_vm::forward_kernel`]).
macro_rules! described {
    (ref $s:ident, $k:ident => $e:expr) => {{
        let $k = &$s.k;
        $e
    }};
    (mut $s:ident, $k:ident => $e:expr) => {{
        let $k = &mut $s.k;
        $e
    }};
}

impl<K: Kernel> Kernel for Described<K> {
    eddy_vm::forward_kernel!(described, own description);
    fn describe(&self) -> Option<Box<dyn std::any::Any + Send>> {
        Some(Box::new(self.what.clone()?))
    }
    fn is_described_by(&self, description: &dyn std::any::Any) -> bool {
        self.what.as_ref().is_some_and(|w| w.is(description))
    }
}

/// [`unary`] on an integer dtype: the op's code and its scalars in i64 (a clamp's bounds
/// saturated to the dtype's range, as the CPU's; `None` for a scalar that is not whole).
fn unary_int(
    op: UnaryOp,
    name: &'static str,
    dtype: DType,
    la: Lay,
) -> Option<impl Kernel + use<>> {
    use UnaryOp::*;
    let whole = |v: f64| (v.fract() == 0.0 && v.abs() < 9.2e18).then_some(v as i64);
    let (lo, hi) = match dtype {
        DType::I32 => (i64::from(i32::MIN), i64::from(i32::MAX)),
        DType::U8 => (0, 255),
        _ => (i64::MIN, i64::MAX),
    };
    // As `T::from_f64`: saturated to the dtype's range (NaN to 0).
    let bound = |v: f64| {
        if v.is_nan() {
            0
        } else {
            (v.clamp(lo as f64, hi as f64) as i64).clamp(lo, hi)
        }
    };
    let (code, c, d) = match op {
        Neg => (0, 0, 0),
        Abs => (1, 0, 0),
        Relu => (10, 0, 0),
        Square => (14, 0, 0),
        Sign => (15, 0, 0),
        AddScalar(c) => (18, whole(c)?, 0),
        MulScalar(c) => (19, whole(c)?, 0),
        RSubScalar(c) => (21, whole(c)?, 0),
        Clamp(l, h) => (25, bound(l), bound(h)),
        Floor | Ceil | Round | Trunc => (26, 0, 0),
        _ => return None,
    };
    Some(unary_kernel(op.name(), name, dtype, (code, c, d), la))
}

/// A launch of the unary kernel `kernel` (`(op code, c, d)` its first three arguments, then
/// the input, its layout, the output and the count) over elements of `dtype`.
fn unary_kernel<C: Copy + Send + 'static>(
    name: &'static str,
    kernel: &'static str,
    dtype: DType,
    (code, c, d): (i32, C, C),
    la: Lay,
) -> impl Kernel {
    let elem = dtype.size_in_bytes();
    CudaKernel::new(
        name,
        move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let n = numel(&outs[0], elem);
            let (mut code, mut c, mut d) = (code, c, d);
            let mut lx = dev_lay(&la, n)?;
            let (mut x, mut y, mut n64) =
                (dptr::<u8>(&ins[0], 0), dptr::<u8>(&outs[0], 0), n as i64);
            // SAFETY: code, c, d, x, lx, y, n64 are, in order, the parameters of the kernel
            // `kernel` names in `kernels/elementwise.cu`, each of the declared type and alive for
            // the call; the device addresses are this instruction's operands (or its scratch),
            // allocated until the kernel has run.
            unsafe {
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
            }
        },
    )
}

/// `out = a op b`: floats (f16 and bf16 computed in f32), and the integer dtypes computed in
/// i64, wrapping as on the CPU. Where the CPU kernel fails (an integer division by zero, zero
/// to a negative integer power) the device, which cannot stop the stream, writes 0.
pub fn binary(op: BinaryOp, dtype: DType, la: Lay, lb: Lay) -> Option<impl Kernel + use<>> {
    let kernel = binary_name(op, dtype)?;
    let elem = dtype.size_in_bytes();
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
                    // SAFETY: code, a, b, y, n64 are, in order, the parameters of
                    // `binary_dense_f32` in `kernels/elementwise.cu`, each of the declared type
                    // and alive for the call; the device addresses are this instruction's operands
                    // (or its scratch), allocated until the kernel has run.
                    return unsafe {
                        l.grid(
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
                        )
                    };
                }
                launch_pair(l, kernel, code, (&la, &lb), ins, &outs[0], n)
            },
        );
        Some(Described { k, what })
    }
}

/// The binary kernel of `op` for `dtype` (integer division is computed in float, and bool has
/// no arithmetic: both are refused by the op layer before they come here).
fn binary_name(op: BinaryOp, dtype: DType) -> Option<&'static str> {
    let int_div = op == BinaryOp::Div && !dtype.is_float();
    super::every!("binary", dtype).filter(|_| dtype != DType::Bool && !int_div)
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

/// `out op= alpha * x` in place: floats (f16 and bf16 computed in f32), and for the integer
/// dtypes the forms the CPU defines (add and subtract with alpha truncated to an integer,
/// multiply, maximum, minimum), wrapping.
pub fn binary_inplace(
    op: BinaryOp,
    dtype: DType,
    lo: Layout,
    lx: Layout,
    alpha: f64,
) -> Option<impl Kernel + use<>> {
    let kernel = inplace_name(op, dtype)?;
    Some(CudaKernel::new(
        op.name(),
        move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let n = lo.numel();
            let mut code = binary_code(op);
            let (mut o, mut x) = (dptr::<u8>(&outs[0], 0), dptr::<u8>(&ins[0], 0));
            let (mut dlo, mut dlx) = (dev_layout(&lo)?, dev_layout(&lx)?);
            let (mut alpha32, mut alpha64, mut n64) = (alpha as f32, alpha, n as i64);
            let mut alpha_int = alpha as i64;
            let alpha_arg = match dtype {
                DType::F64 => arg(&mut alpha64),
                DType::F32 | DType::F16 | DType::BF16 => arg(&mut alpha32),
                _ => arg(&mut alpha_int),
            };
            // SAFETY: code, o, dlo, x, dlx, alpha, n64 are, in order, the parameters of the kernel
            // `kernel` names in `kernels/elementwise.cu`, each of the declared type and alive for
            // the call; the device addresses are this instruction's operands (or its scratch),
            // allocated until the kernel has run.
            unsafe {
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
            }
        },
    ))
}

/// The in-place kernel of `op` for `dtype`.
fn inplace_name(op: BinaryOp, dtype: DType) -> Option<&'static str> {
    // The integer forms the CPU defines (alpha truncated to an integer, as there).
    let int_form = matches!(
        op,
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Maximum | BinaryOp::Minimum
    );
    super::every!("binary_inplace", dtype)
        .filter(|_| dtype.is_float() || (dtype != DType::Bool && int_form))
}

/// `out = a cmp b` as bool, operands of any dtype.
pub fn compare(op: CmpOp, dtype: DType, la: Lay, lb: Lay) -> Option<impl Kernel + use<>> {
    let name = super::every!("compare", dtype)?;
    let code = op as i32;
    Some(CudaKernel::new(
        op.name(),
        move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let n = numel(&outs[0], 1);
            launch_pair(l, name, code, (&la, &lb), ins, &outs[0], n)
        },
    ))
}

/// Launches `kernel`, a binary or comparison kernel of `kernels/elementwise.cu`, whose
/// parameters are `(int op, const A* a, Lay la, const A* b, Lay lb, Y* y, i64 n)`, on inputs
/// 0 and 1 laid out as `lays` into `out` (`n` elements).
fn launch_pair(
    l: &Launch<'_>,
    kernel: &str,
    mut code: i32,
    (la, lb): (&Lay, &Lay),
    ins: &[Counted<Blob>],
    out: &Blob,
    n: usize,
) -> Result<(), CudaError> {
    let (mut a, mut b) = (dptr::<u8>(&ins[0], 0), dptr::<u8>(&ins[1], 0));
    let (mut da, mut db) = (dev_lay(la, n)?, dev_lay(lb, n)?);
    let (mut y, mut n64) = (dptr::<u8>(out, 0), n as i64);
    // SAFETY: code, a, da, b, db, y, n64 are, in order, the parameters this function's
    // callers' kernels declare (above), each alive for the call; the device addresses are the
    // instruction's inputs 0 and 1 and `out`, allocated until the kernel has run.
    unsafe {
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
    }
}

/// `out = cond ? a : b`, any dtype (the bits moved by element size).
pub fn where_(dtype: DType, lc: Layout, la: Layout, lb: Layout) -> Option<impl Kernel + use<>> {
    let kernel = where_name(dtype);
    let elem = dtype.size_in_bytes();
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
            // SAFETY: c, dc, a, da, b, db, y, n64 are, in order, the parameters of the kernel
            // `kernel` names in `kernels/elementwise.cu`, each of the declared type and alive for
            // the call; the device addresses are this instruction's operands (or its scratch),
            // allocated until the kernel has run.
            unsafe {
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
            }
        },
    ))
}

/// The `where` kernel for `dtype`'s element size.
fn where_name(dtype: DType) -> &'static str {
    super::by_size(dtype, ["where_b1", "where_b2", "where_b4", "where_b8"])
}

/// Every kernel name this family may launch.
#[cfg(test)]
pub(super) fn names() -> Vec<&'static str> {
    let mut v = vec!["binary_dense_f32"];
    for dt in super::DTYPES {
        v.extend(unary_name(dt));
        v.push(where_name(dt));
        v.extend(super::every!("compare", dt));
        for op in [BinaryOp::Add, BinaryOp::Div, BinaryOp::Rem] {
            v.extend(binary_name(op, dt));
            v.extend(inplace_name(op, dt));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::Described;
    use crate::device::Either;
    use eddy_vm::instruction::{ComputeCtx, Kernel};
    use eddy_vm::{Blob, Counted};

    /// A kernel that answers every question unlike the defaults.
    struct Unusual;
    impl Kernel for Unusual {
        fn name(&self) -> &str {
            "unusual"
        }
        fn compute(
            &mut self,
            _: &[Counted<Blob>],
            _: &[Counted<Blob>],
            _: &mut ComputeCtx<'_>,
        ) -> eddy_vm::Result<()> {
            Ok(())
        }
        fn fusable(&self) -> bool {
            false
        }
        fn cheap(&self) -> bool {
            true
        }
        fn deferred_drop(&self) -> bool {
            true
        }
        fn may_alias(&self, output: usize, input: usize) -> bool {
            (output, input) == (0, 1)
        }
    }

    fn answers(k: &dyn Kernel) -> (String, bool, bool, bool, bool, bool) {
        let (fusable, cheap, late) = (k.fusable(), k.cheap(), k.deferred_drop());
        (
            k.name().into(),
            fusable,
            cheap,
            late,
            k.may_alias(0, 1),
            k.may_alias(0, 0),
        )
    }

    /// A described CUDA kernel, a kernel of either device and a boxed kernel say all their
    /// kernel says: its name, `fusable`, `cheap`, `deferred_drop` and `may_alias`.
    #[test]
    fn wrappers_keep_what_their_kernel_says() {
        let want = answers(&Unusual);
        let described = Described {
            k: Unusual,
            what: None,
        };
        let either: Either<Unusual, Unusual> = Either::Cuda(Unusual);
        let boxed: Box<dyn Kernel> = Box::new(Described {
            k: Either::<Unusual, Unusual>::Cpu(Unusual),
            what: None,
        });
        for (how, got) in [
            ("described", answers(&described)),
            ("either", answers(&either)),
            ("boxed", answers(&boxed)),
        ] {
            assert_eq!(got, want, "{how}");
        }
        // A device kernel as the op layer hands it out keeps the launch kernel's answers.
        let l = crate::Lay::Dense(0);
        let exp = super::unary(crate::kinds::UnaryOp::Exp, crate::DType::F32, l).unwrap();
        assert!(exp.fusable() && !exp.cheap() && !exp.deferred_drop() && !exp.may_alias(0, 0));
        assert!(exp.describe().is_some());
    }
}
