//! Merged elementwise kernels on the device: the program of a run of elementwise steps
//! ([`crate::fuse`]) as CUDA source, compiled by NVRTC once per device and shape of program,
//! launched once per run.
//!
//! The source depends only on the program's shape: its ops, where each operand comes from
//! (an input read densely or as one element, or a register), and which values are stored.
//! Pointers (each operand's offset folded in), the ops' scalars and the element count are
//! the launch's arguments, so a plan's runs, and every window a promoted loop runs with new
//! scalars, reuse one compiled module. Each element is computed with the CPU kernels'
//! arithmetic (`kernels/prelude.cu`'s `unary_op` and `binary_op`, in the program's dtype).

use super::launch::{CudaError, Launch, arch_of, compile_source, dptr, prelude, with_launch_as};
use super::ops::{binary_code, unary_code};
use crate::program::{Code, Elementwise, Pos, Program, Src};
use crate::{DType, kinds::BinaryOp};
use cudarc::driver::{CudaFunction, CudaModule};
use eddy_vm::instruction::{ComputeCtx, Kernel};
use eddy_vm::{Blob, Counted};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::c_void;
use std::fmt::Write;
use std::sync::{Arc, OnceLock};

/// The most ops one merged device kernel takes: their pointers and scalars are launch
/// arguments, which must stay within the driver's 4 KiB (a longer run is cut into kernels of
/// this many ops).
pub(crate) const MAX_OPS: usize = 32;

/// Whether the device merges elementwise ops of `dtype`.
pub(crate) fn supports(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F64)
}

/// Whether the device merges `w`: its dtype, and its op (every op a merged run may hold
/// but integer division and remainder).
pub(crate) fn merges(w: &Elementwise) -> bool {
    supports(w.dtype())
        && match w {
            Elementwise::Unary { op, .. } => unary_code(*op).is_some(),
            Elementwise::Binary { op, .. } => !matches!(op, BinaryOp::FloorDiv | BinaryOp::Rem),
        }
}

/// A use of an input: which input, and the element it starts at.
type Use = (usize, usize);

/// `p` as CUDA source (a kernel named `fused`), with the uses of inputs in the order of the
/// kernel's pointer arguments, and each op's two scalars in the order of its scalar arguments.
///
/// # Panics
///
/// On an op the device does not have ([`merges`] says which).
pub(crate) fn source(p: &Program) -> (String, Vec<Use>, Vec<(f64, f64)>) {
    let t = if p.dtype == DType::F64 {
        "double"
    } else {
        "float"
    };
    let mut uses: Vec<Use> = Vec::new();
    let mut scalars: Vec<(f64, f64)> = Vec::new();
    let mut body = String::new();
    let mut outputs = 0;
    // An operand as an expression: a register, or input use `u<k>` at element i or 0.
    let operand = |s: &Src, uses: &mut Vec<Use>| match *s {
        Src::Reg(r) => format!("r{r}"),
        Src::Input(k, pos) => {
            let (off, at) = match pos {
                Pos::Dense(o) => (o, "i"),
                Pos::Splat(o) => (o, "0"),
            };
            uses.push((k, off));
            format!("u{}[{at}]", uses.len() - 1)
        }
    };
    for c in &p.code {
        match c {
            Code::Unary { op, a, d } => {
                let (code, c0, c1) = unary_code(*op).expect("an op the device has");
                let a = operand(a, &mut uses);
                let k = scalars.len();
                scalars.push((c0, c1));
                let _ = writeln!(
                    body,
                    "        r{d} = unary_op<{t}>({code}, {a}, c{k}, d{k});"
                );
            }
            Code::Binary { op, a, b, d } => {
                let code = binary_code(*op);
                let (a, b) = (operand(a, &mut uses), operand(b, &mut uses));
                let _ = writeln!(body, "        r{d} = binary_op<{t}>({code}, {a}, {b});");
            }
            Code::Store { r, out } => {
                outputs = outputs.max(out + 1);
                let _ = writeln!(body, "        o{out}[i] = r{r};");
            }
        }
    }
    let mut args: Vec<String> = (0..uses.len())
        .map(|k| format!("const {t}* u{k}"))
        .collect();
    args.extend((0..outputs).map(|k| format!("{t}* o{k}")));
    args.extend((0..scalars.len()).flat_map(|k| [format!("{t} c{k}"), format!("{t} d{k}")]));
    args.push("i64 n".into());
    let regs: Vec<String> = (0..p.regs).map(|r| format!("r{r}")).collect();
    let mut src = String::new();
    let _ = write!(
        src,
        "extern \"C\" __global__ void fused({}) {{\n    GRID_STRIDE(i, n) {{\n",
        args.join(", ")
    );
    if !regs.is_empty() {
        let _ = writeln!(src, "        {t} {};", regs.join(", "));
    }
    src.push_str(&body);
    src.push_str("    }\n}\n");
    (src, uses, scalars)
}

/// A compiled merged kernel.
type Compiled = Arc<(Arc<CudaModule>, CudaFunction)>;

/// The compiled merged kernels, by device ordinal and source.
type Cache = Mutex<HashMap<(u32, Arc<str>), Compiled>>;

fn compiled(l: &Launch<'_>, src: &Arc<str>) -> Result<Compiled, CudaError> {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let device = l.device();
    let key = (device.ordinal(), src.clone());
    if let Some(c) = CACHE.get_or_init(Default::default).lock().get(&key) {
        return Ok(c.clone());
    }
    // Compiled outside the lock: NVRTC takes a while, and another device may want its own.
    let full = format!("{}\n{src}", prelude());
    let ptx = compile_source(&full, arch_of(device)?)?;
    let module = device
        .context()
        .load_module(ptx)
        .map_err(|e| CudaError::driver("loading a merged kernel", e))?;
    let f = module
        .load_function("fused")
        .map_err(|e| CudaError::driver("a merged kernel", e))?;
    let c = Arc::new((module, f));
    Ok(CACHE
        .get_or_init(Default::default)
        .lock()
        .entry(key)
        .or_insert(c)
        .clone())
}

/// The device kernel running `p`: one launch over its `n` elements.
pub(crate) fn kernel(p: Program) -> Box<dyn Kernel> {
    let (src, uses, scalars) = source(&p);
    Box::new(Fused {
        name: p.name,
        elem: p.dtype.size_in_bytes(),
        dtype: p.dtype,
        n: p.n,
        src: src.into(),
        uses,
        scalars,
    })
}

struct Fused {
    name: String,
    dtype: DType,
    elem: usize,
    n: usize,
    src: Arc<str>,
    uses: Vec<Use>,
    scalars: Vec<(f64, f64)>,
}

impl Kernel for Fused {
    fn name(&self) -> &str {
        &self.name
    }

    fn compute(
        &mut self,
        inputs: &[Counted<Blob>],
        outputs: &[Counted<Blob>],
        ctx: &mut ComputeCtx<'_>,
    ) -> eddy_vm::Result<()> {
        with_launch_as("fused", &self.name, ctx, |l| {
            if self.n == 0 {
                return Ok(());
            }
            let f = compiled(l, &self.src)?;
            let mut ptrs: Vec<u64> = (self.uses.iter())
                .map(|&(k, off)| dptr::<u8>(&inputs[k], off * self.elem))
                .chain(outputs.iter().map(|o| dptr::<u8>(o, 0)))
                .collect();
            let mut f32s: Vec<f32> = Vec::new();
            let mut f64s: Vec<f64> = Vec::new();
            for &(c, d) in &self.scalars {
                if self.dtype == DType::F64 {
                    f64s.extend([c, d]);
                } else {
                    f32s.extend([c as f32, d as f32]);
                }
            }
            let mut n = self.n as i64;
            let mut params: Vec<*mut c_void> = Vec::with_capacity(ptrs.len() + f64s.len() + 1);
            params.extend(ptrs.iter_mut().map(|p| (p as *mut u64).cast::<c_void>()));
            params.extend(f32s.iter_mut().map(|v| (v as *mut f32).cast::<c_void>()));
            params.extend(f64s.iter_mut().map(|v| (v as *mut f64).cast::<c_void>()));
            params.push((&mut n as *mut i64).cast());
            let block = 256u32;
            let grid = self.n.div_ceil(block as usize).min(65_535 * 8) as u32;
            // SAFETY: `params` follow `fused`'s signature as `source` wrote it (the uses'
            // pointers, the outputs', two scalars an op in the dtype, the count), each alive
            // until the call returns; the pointers are this instruction's operands, holding `n`
            // elements from each use's offset (the plan pass checked the sizes) or one (a
            // splat use).
            unsafe { l.launch_function(&f.1, grid, block, &mut params) }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::UnaryOp;

    /// A program with a splat operand, a register read twice and two stores: its source
    /// compiles for the H200's architecture (where NVRTC is installed), with one pointer a
    /// use of an input, two scalars an op, and the count.
    #[test]
    fn a_program_becomes_a_kernel_that_compiles() {
        let p = Program {
            name: "fused[mul, exp, sub]".into(),
            dtype: DType::F32,
            n: 100,
            regs: 2,
            code: vec![
                Code::Binary {
                    op: BinaryOp::Mul,
                    a: Src::Input(0, Pos::Dense(0)),
                    b: Src::Input(1, Pos::Splat(3)),
                    d: 0,
                },
                Code::Unary {
                    op: UnaryOp::Exp,
                    a: Src::Reg(0),
                    d: 1,
                },
                Code::Store { r: 1, out: 0 },
                Code::Binary {
                    op: BinaryOp::Sub,
                    a: Src::Reg(1),
                    b: Src::Reg(0),
                    d: 0,
                },
                Code::Store { r: 0, out: 1 },
            ],
        };
        let (src, uses, scalars) = source(&p);
        assert_eq!(uses, [(0, 0), (1, 3)]);
        assert_eq!(scalars.len(), 1);
        assert!(
            src.contains("u1[0]") && src.contains("o1[i] = r0;"),
            "{src}"
        );
        match compile_source(&format!("{}\n{src}", prelude()), "sm_90") {
            Ok(ptx) => assert!(ptx.to_src().contains(".entry fused("), "{src}"),
            Err(e @ CudaError::NoCompiler) => eprintln!("SKIPPED: {e}"),
            Err(e) => panic!("{e}\n{src}"),
        }
        let mut f64_p = p;
        f64_p.dtype = DType::F64;
        let (src, ..) = source(&f64_p);
        assert!(src.contains("double r0, r1;"), "{src}");
    }
}
