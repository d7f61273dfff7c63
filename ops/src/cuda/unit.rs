//! The CUDA device's unit merge ([`eddy_vm::merge`]): a fused unit of eager elementwise op
//! calls runs as one launch of `kernels/linalg.cu`'s `unit_f32` / `unit_f64` per 32 ops, instead of
//! one launch per op. The kernel takes the unit's program (each op's code, scalars and
//! operands) as its argument, so nothing is compiled per unit, whatever its length or ops.
//!
//! A unit is taken when every member is an elementwise op the device computes (its kernel
//! says what it computes, [`Kernel::describe`]), all of one dtype (f32 or f64) and one element
//! count, and each operand is dense or one element broadcast; every blob a member writes is
//! read, by the members after it, only densely from its first element, so each thread reads
//! only what it wrote itself. Every member's output is written, as the members would.

use super::fused::merges;
use super::launch::{Launch, dptr, with_launch_as};
use super::ops::{binary_code, unary_code};
use crate::DType;
use crate::program::{Elementwise, Pos};
use eddy_vm::instruction::{ComputeCtx, Kernel};
use eddy_vm::merge::{Member, UnitMerge};
use eddy_vm::{Blob, Counted};
use std::collections::HashSet;
use std::ffi::c_void;
use std::sync::{Arc, OnceLock};

/// The most ops one launch takes (`kernels/linalg.cu`'s `Unit`).
const OPS: usize = 32;
/// The most operands one launch takes.
const OPERANDS: usize = 96;

/// `kernels/linalg.cu`'s `Unit`, field for field.
#[repr(C)]
struct UnitArgs {
    n: i64,
    nops: i32,
    pad: i32,
    code: [i32; OPS],
    binary: [i32; OPS],
    a: [i32; OPS],
    b: [i32; OPS],
    y: [i32; OPS],
    c: [f64; OPS],
    d: [f64; OPS],
    ptr: [u64; OPERANDS],
    splat: [i32; OPERANDS],
}

/// An operand of the merged kernel: input or output `k` (of all the members', in order),
/// read from element `off` densely or as one element.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Operand {
    Input(usize, Pos),
    Output(usize),
}

/// One op of the unit.
struct Op {
    code: i32,
    binary: bool,
    c: f64,
    d: f64,
    a: Operand,
    b: Option<Operand>,
    y: Operand,
}

/// The device's unit merge (one for the process).
///
/// # Examples
///
/// ```
/// use eddy_vm::{Device, Vm};
/// // What the tensor layer does for each CUDA device of an engine (none here: nothing takes it).
/// let vm = Vm::builder().build()?;
/// assert!(!vm.set_unit_merge(Device::Cuda(0), eddy_ops::cuda::unit_merge()));
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn unit_merge() -> UnitMerge {
    static MERGE: OnceLock<UnitMerge> = OnceLock::new();
    MERGE
        .get_or_init(|| Arc::new(|members: &[Member<'_>]| merge(members).map(|k| Box::new(k) as _)))
        .clone()
}

/// The merged kernel of `members`, or `None` where the unit does not fit.
fn merge(members: &[Member<'_>]) -> Option<UnitKernel> {
    let written: HashSet<u64> = (members.iter())
        .flat_map(|m| m.outputs.iter().map(|b| b.id()))
        .collect();
    let (mut dtype, mut n) = (None, None);
    let mut ops = Vec::with_capacity(members.len());
    let mut names: Vec<String> = Vec::new();
    let mut at = 0;
    for (k, m) in members.iter().enumerate() {
        let w = *m.kernel.describe()?.downcast::<Elementwise>().ok()?;
        if !merges(&w) || m.outputs.len() != 1 {
            return None;
        }
        let dt = w.dtype();
        let elem = dt.size_in_bytes();
        let count = m.outputs[0].bytes() / elem;
        if *dtype.get_or_insert(dt) != dt || *n.get_or_insert(count) != count || count == 0 {
            return None;
        }
        let (code, binary, c, d, positions) = match w {
            Elementwise::Unary { op, a, .. } => {
                let (code, c, d) = unary_code(op)?;
                (code, false, c, d, vec![a])
            }
            Elementwise::Binary { op, a, b, .. } => (binary_code(op), true, 0.0, 0.0, vec![a, b]),
        };
        if m.inputs.len() != positions.len() {
            return None;
        }
        let mut operands = Vec::with_capacity(2);
        for (j, (blob, pos)) in m.inputs.iter().zip(positions).enumerate() {
            let (off, len) = match pos {
                Pos::Dense(o) => (o, count),
                Pos::Splat(o) => (o, 1),
            };
            // The whole read lies in the blob, and a blob the unit writes is read only where
            // each thread wrote it.
            let fits = (off + len) * elem <= blob.bytes();
            if !fits || (written.contains(&blob.id()) && pos != Pos::Dense(0)) {
                return None;
            }
            operands.push(Operand::Input(at + j, pos));
        }
        at += m.inputs.len();
        ops.push(Op {
            code,
            binary,
            c,
            d,
            a: operands[0],
            b: operands.get(1).copied(),
            y: Operand::Output(k),
        });
        names.push(m.kernel.name().to_string());
    }
    if ops.len() < 2 {
        return None;
    }
    Some(UnitKernel {
        name: format!("unit[{}]", names.join(", ")),
        dtype: dtype?,
        n: n?,
        ops,
    })
}

/// A fused unit as one kernel: a launch per [`OPS`] ops.
struct UnitKernel {
    name: String,
    dtype: DType,
    n: usize,
    ops: Vec<Op>,
}

impl UnitKernel {
    /// The argument of the launch for `ops`, its operands' addresses taken from the blobs.
    fn args(&self, ops: &[Op], ins: &[Counted<Blob>], outs: &[Counted<Blob>]) -> UnitArgs {
        let elem = self.dtype.size_in_bytes();
        let mut u = UnitArgs {
            n: self.n as i64,
            nops: ops.len() as i32,
            pad: 0,
            code: [0; OPS],
            binary: [0; OPS],
            a: [0; OPS],
            b: [0; OPS],
            y: [0; OPS],
            c: [0.0; OPS],
            d: [0.0; OPS],
            ptr: [0; OPERANDS],
            splat: [0; OPERANDS],
        };
        let mut table: Vec<Operand> = Vec::with_capacity(OPERANDS);
        let mut slot = |o: Operand, u: &mut UnitArgs| -> i32 {
            let k = table.iter().position(|&t| t == o).unwrap_or_else(|| {
                table.push(o);
                table.len() - 1
            });
            (u.ptr[k], u.splat[k]) = match o {
                Operand::Input(i, Pos::Dense(off)) => (dptr::<u8>(&ins[i], off * elem), 0),
                Operand::Input(i, Pos::Splat(off)) => (dptr::<u8>(&ins[i], off * elem), 1),
                Operand::Output(j) => (dptr::<u8>(&outs[j], 0), 0),
            };
            k as i32
        };
        for (s, op) in ops.iter().enumerate() {
            u.code[s] = op.code;
            u.binary[s] = op.binary as i32;
            (u.c[s], u.d[s]) = (op.c, op.d);
            u.a[s] = slot(op.a, &mut u);
            if let Some(b) = op.b {
                u.b[s] = slot(b, &mut u);
            }
            u.y[s] = slot(op.y, &mut u);
        }
        u
    }
}

impl Kernel for UnitKernel {
    fn name(&self) -> &str {
        &self.name
    }

    fn compute(
        &mut self,
        inputs: &[Counted<Blob>],
        outputs: &[Counted<Blob>],
        ctx: &mut ComputeCtx<'_>,
    ) -> eddy_vm::Result<()> {
        let kernel = if self.dtype == DType::F64 {
            "unit_f64"
        } else {
            "unit_f32"
        };
        with_launch_as("unit", &self.name, ctx, |l: &Launch<'_>| {
            for ops in self.ops.chunks(OPS) {
                let mut u = self.args(ops, inputs, outputs);
                let block = 256u32;
                let grid = self.n.div_ceil(block as usize).min(65_535 * 8) as u32;
                // SAFETY: `unit_f32`/`unit_f64` (`kernels/linalg.cu`) take one `Unit` by value,
                // and `UnitArgs` is laid out as it, field for field (`repr(C)`); `u` is alive for
                // the call, and the pointers in it are the members' operands, allocated until the
                // kernel has run.
                unsafe {
                    l.grid(
                        kernel,
                        grid,
                        block,
                        0,
                        &mut [(&mut u as *mut UnitArgs).cast::<c_void>()],
                    )
                }?;
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elementwise::{binary, unary};
    use crate::kinds::{BinaryOp, UnaryOp};
    use crate::{Device, Lay};

    /// Which units the device takes (no GPU needed: only the kernels' descriptions and the
    /// blobs' sizes are read): a chain of f32 maps, with a scalar operand; not one that reads
    /// a value the unit writes at another place, mixes dtypes or element counts, reads past an
    /// input, or has one member.
    #[test]
    fn units_of_elementwise_maps_are_taken_and_the_others_left() {
        let gpu = Device::Cuda(0);
        let vm = eddy_vm::Vm::builder().build().unwrap();
        let blob = |floats: usize| vm.new_blob(floats * 4);
        let add = |a, b| -> Box<dyn Kernel> {
            Box::new(binary(gpu, BinaryOp::Add, DType::F32, a, b).unwrap())
        };
        let exp: Box<dyn Kernel> =
            Box::new(unary(gpu, UnaryOp::Exp, DType::F32, Lay::Dense(0)).unwrap());
        let (x, s, t, y, z) = (blob(16), blob(1), blob(16), blob(16), blob(16));
        // A member: its kernel, inputs and output.
        type M<'a> = (&'a dyn Kernel, Vec<&'a Counted<Blob>>, &'a Counted<Blob>);
        let units = |members: &[M<'_>]| {
            let ins: Vec<Vec<Counted<Blob>>> = (members.iter())
                .map(|m| m.1.iter().map(|&b| b.clone()).collect())
                .collect();
            let outs: Vec<[Counted<Blob>; 1]> = members.iter().map(|m| [m.2.clone()]).collect();
            let views: Vec<Member<'_>> = (members.iter().enumerate())
                .map(|(k, m)| Member {
                    kernel: m.0,
                    inputs: &ins[k],
                    outputs: &outs[k],
                })
                .collect();
            merge(&views).map(|k| k.name)
        };
        let plus_scalar = add(Lay::Dense(0), Lay::Splat(0));
        let dense = add(Lay::Dense(0), Lay::Dense(0));
        // t = x + s; y = exp(t); z = y + t.
        let taken = units(&[
            (&*plus_scalar, vec![&x, &s], &t),
            (&*exp, vec![&t], &y),
            (&*dense, vec![&y, &t], &z),
        ]);
        assert_eq!(taken.as_deref(), Some("unit[add, exp, add]"));
        assert_eq!(units(&[(&*exp, vec![&t], &y)]), None, "one member");
        // z = t + y[0]: a value the unit writes, read as one element by every thread.
        let splat_y = add(Lay::Dense(0), Lay::Splat(0));
        let raced = units(&[(&*exp, vec![&x], &y), (&*splat_y, vec![&t, &y], &z)]);
        assert_eq!(raced, None);
        // The same read of a blob nobody in the unit writes is fine.
        let fine = units(&[(&*exp, vec![&x], &t), (&*splat_y, vec![&t, &s], &z)]);
        assert!(fine.is_some());
        // An input too short for the element count, a second element count, a second dtype.
        let short = blob(8);
        assert_eq!(
            units(&[(&*exp, vec![&short], &t), (&*exp, vec![&t], &y)]),
            None
        );
        let (w, v) = (blob(8), blob(8));
        assert_eq!(units(&[(&*exp, vec![&x], &t), (&*exp, vec![&w], &v)]), None);
        let exp64: Box<dyn Kernel> =
            Box::new(unary(gpu, UnaryOp::Exp, DType::F64, Lay::Dense(0)).unwrap());
        let (w64, v64) = (vm.new_blob(16 * 8), vm.new_blob(16 * 8));
        assert!(units(&[(&*exp64, vec![&w64], &v64), (&*exp64, vec![&v64], &w64)]).is_some());
        assert_eq!(
            units(&[(&*exp, vec![&x], &t), (&*exp64, vec![&w64], &v64)]),
            None
        );
    }

    /// The argument is laid out as `kernels/linalg.cu`'s `Unit` (2,320 bytes, within the driver's
    /// 4 KiB of arguments).
    #[test]
    fn the_launch_argument_has_the_kernels_layout() {
        assert_eq!(std::mem::size_of::<UnitArgs>(), 2320);
        assert_eq!(std::mem::offset_of!(UnitArgs, c), 656);
        assert_eq!(std::mem::offset_of!(UnitArgs, ptr), 1168);
        assert_eq!(std::mem::offset_of!(UnitArgs, splat), 1936);
    }
}
