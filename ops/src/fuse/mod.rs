//! Merging elementwise ops: what an elementwise kernel says it computes ([`Elementwise`]),
//! and the plan pass that turns a run of such steps into one step ([`fuse_elementwise`]).
//!
//! The unary and binary kernels of each device say what they compute
//! ([`Kernel::describe`](eddy_vm::instruction::Kernel::describe)): the op, the dtype and where
//! each operand's elements are. A plan compiler calls [`fuse_elementwise`] on its steps:
//! consecutive elementwise steps of one dtype and one element count become one step. On the
//! CPU it reads each input once, keeps the values the other steps never see in small blocks of
//! scratch memory, and writes only the values read outside the run; on a CUDA device it is one
//! kernel generated for the run and compiled by NVRTC. The merged kernel computes each element
//! with the same arithmetic as the kernels it replaces, so its results are the same bit for
//! bit.
//!
//! # Examples
//!
//! ```
//! use eddy_ops::fuse::fuse_elementwise;
//! use eddy_ops::elementwise::{binary, unary, BinaryOp, UnaryOp};
//! use eddy_ops::{DType, Device, Lay};
//! use eddy_vm::plan::{Slot, Step};
//! // t0 = exp(in0); out0 = t0 + in1: two steps, one intermediate only they see.
//! let exp = unary(Device::CPU, UnaryOp::Exp, DType::F32, Lay::Dense(0)).unwrap();
//! let add = binary(Device::CPU, BinaryOp::Add, DType::F32, Lay::Dense(0), Lay::Splat(0)).unwrap();
//! let steps = vec![
//!     Step::new(Box::new(exp), vec![Slot::Input(0)], vec![Slot::Temp(0)]),
//!     Step::new(Box::new(add), vec![Slot::Temp(0), Slot::Input(1)], vec![Slot::Output(0)]),
//! ];
//! let bytes = |s: Slot| if s == Slot::Input(1) { 4 } else { 64 };
//! let fused = fuse_elementwise(Device::CPU, steps, &bytes);
//! assert_eq!(fused.len(), 1);
//! assert_eq!(fused[0].name(), "fused[exp, add]");
//! assert_eq!(fused[0].inputs(), [Slot::Input(0), Slot::Input(1)]);
//! assert_eq!(fused[0].outputs(), [Slot::Output(0)]);
//! ```

use crate::Device;
use crate::program::{Code, Program, Src};
use eddy_vm::plan::{PlanPass, Slot, Step};
use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use std::sync::{Arc, OnceLock};

pub use crate::program::{Elementwise, Pos};

/// Merges each run of two or more consecutive elementwise steps of `steps` (of one float dtype
/// and one element count, each operand dense or one element broadcast) into one step, on a
/// device that has a merged kernel (the CPU; a CUDA device, in runs of at most 32 ops, each
/// merged run one kernel compiled by NVRTC); elsewhere returns `steps` as they are.
/// `bytes(slot)` is the size of the blob a slot stands for.
///
/// A value computed in a run and read only inside it (a [`Slot::Temp`] no other step touches)
/// is not written at all; every other value the run computes is written, as before. A run
/// stops before a step that would overwrite what the run read, or that reads a value of the
/// run as one element broadcast. The merged step names, for each output, the inputs it is
/// computed from ([`Step::with_depends`]), so a failed input still fails only what depends
/// on it.
///
/// See the [module's examples](self).
pub fn fuse_elementwise(
    device: Device,
    steps: Vec<Step>,
    bytes: &dyn Fn(Slot) -> usize,
) -> Vec<Step> {
    let Some(longest) = longest_run(device) else {
        return steps;
    };
    // What each step computes, with its element count, where it can be merged.
    let what: Vec<Option<(Elementwise, usize)>> = steps
        .iter()
        .map(|s| {
            let w = *s.kernel().describe()?.downcast::<Elementwise>().ok()?;
            let dtype = w.dtype();
            let fits = merges(device, &w)
                && s.outputs().len() == 1
                && s.inputs().len() == w.positions().len();
            fits.then(|| (w, bytes(s.outputs()[0]) / dtype.size_in_bytes()))
        })
        .collect();
    // How each temporary is used: by index, as a promoted window's plan runs this pass on
    // every window (maps of every slot took half of its time).
    let temps = (steps.iter())
        .flat_map(|s| s.inputs().iter().chain(s.outputs()))
        .filter_map(|x| match x {
            Slot::Temp(k) => Some(k + 1),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let mut uses = vec![TempUse::default(); temps];
    for (i, s) in steps.iter().enumerate() {
        for x in s.inputs() {
            if let Slot::Temp(k) = *x {
                let r = &mut uses[k].reads;
                *r = Some(r.map_or((i, i), |(first, _)| (first, i)));
            }
        }
        for x in s.outputs() {
            if let Slot::Temp(k) = *x {
                uses[k].writes += 1;
            }
        }
    }
    // The runs, as ranges of steps.
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < steps.len() {
        let Some((first, n)) = &what[i] else {
            i += 1;
            continue;
        };
        let (dtype, n) = (first.dtype(), *n);
        let mut made: HashSet<Slot> = HashSet::new();
        let mut read: HashSet<Slot> = HashSet::new();
        let mut j = i;
        while j < steps.len() {
            let Some((w, m)) = &what[j] else { break };
            let s = &steps[j];
            let out = s.outputs()[0];
            let joins = w.dtype() == dtype
                && j - i < longest
                && *m == n
                && n > 0
                && !made.contains(&out)
                && !read.contains(&out)
                && !s.inputs().contains(&out)
                && (s.inputs().iter().zip(w.positions()))
                    .all(|(x, p)| !made.contains(x) || p == Pos::Dense(0));
            if !joins {
                break;
            }
            for &x in s.inputs() {
                if !made.contains(&x) {
                    read.insert(x);
                }
            }
            made.insert(out);
            j += 1;
        }
        if j - i >= 2 {
            runs.push((i, j));
        }
        i = j.max(i + 1);
    }
    if runs.is_empty() {
        return steps;
    }
    let mut out = Vec::with_capacity(steps.len());
    let mut steps = steps.into_iter().enumerate().peekable();
    for (lo, hi) in runs {
        while steps.peek().is_some_and(|(k, _)| *k < lo) {
            out.push(steps.next().expect("peeked").1);
        }
        let run: Vec<Step> = (lo..hi)
            .map(|_| steps.next().expect("in range").1)
            .collect();
        let whats: Vec<&Elementwise> = (lo..hi)
            .map(|k| &what[k].as_ref().expect("merged").0)
            .collect();
        let n = what[lo].as_ref().expect("merged").1;
        let escapes = |x: Slot| match x {
            Slot::Temp(k) => {
                let u = &uses[k];
                u.writes != 1
                    || u.reads
                        .is_some_and(|(first, last)| first < lo || last >= hi)
            }
            _ => true,
        };
        out.push(merge(device, &run, &whats, n, lo, &escapes));
    }
    out.extend(steps.map(|(_, s)| s));
    out
}

/// How the steps of a plan use one temporary: how many write it, and the first and last
/// that read it.
#[derive(Clone, Copy, Default)]
struct TempUse {
    writes: u32,
    reads: Option<(usize, usize)>,
}

/// [`fuse_elementwise`] as a plan pass, for an engine's automatic promotion
/// ([`Vm::set_plan_pass`](eddy_vm::Vm::set_plan_pass)): a promoted loop's elementwise runs
/// are merged as a compiled graph's are.
///
/// # Examples
///
/// ```
/// let vm = eddy_vm::Vm::builder().promotion(true).build()?;
/// assert!(vm.set_plan_pass(eddy_ops::fuse::plan_pass()));
/// assert!(vm.has_plan_pass());
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn plan_pass() -> PlanPass {
    static PASS: OnceLock<PlanPass> = OnceLock::new();
    PASS.get_or_init(|| Arc::new(fuse_elementwise)).clone()
}

/// The most ops `device` merges into one kernel; `None` where it merges none.
fn longest_run(device: Device) -> Option<usize> {
    match device {
        Device::Cpu(_) => Some(usize::MAX),
        #[cfg(feature = "cuda")]
        Device::Cuda(_) => Some(crate::cuda::fused::MAX_OPS),
        _ => None,
    }
}

/// Whether `device` has a merged kernel that computes `w`.
fn merges(device: Device, w: &Elementwise) -> bool {
    match device {
        #[cfg(feature = "cuda")]
        Device::Cuda(_) => crate::cuda::fused::merges(w),
        _ => crate::cpu::fused::supports(w.dtype()),
    }
}

/// One step for the consecutive steps `run` (the first is step `lo` of the plan), computing
/// `whats` on `n` elements; `escapes(slot)` says whether a value must be written.
fn merge(
    device: Device,
    run: &[Step],
    whats: &[&Elementwise],
    n: usize,
    lo: usize,
    escapes: &dyn Fn(Slot) -> bool,
) -> Step {
    let dtype = whats[0].dtype();
    // The last step of the run that reads each value made in it.
    let mut last_use: HashMap<Slot, usize> = HashMap::new();
    for (k, s) in run.iter().enumerate() {
        for &x in s.inputs() {
            last_use.insert(x, lo + k);
        }
    }
    let mut inputs: Vec<Slot> = Vec::new();
    let mut outputs: Vec<Slot> = Vec::new();
    let mut depends: Vec<Vec<usize>> = Vec::new();
    // The register and the inputs it depends on, of each value made in the run.
    let mut regs: HashMap<Slot, (usize, Vec<usize>)> = HashMap::new();
    let mut free: Vec<usize> = Vec::new();
    let mut count = 0usize;
    let mut code = Vec::new();
    for (k, (s, w)) in run.iter().zip(whats).enumerate() {
        let mut deps: Vec<usize> = Vec::new();
        let srcs: Vec<Src> = (s.inputs().iter().zip(w.positions()))
            .map(|(&x, p)| match regs.get(&x) {
                Some((r, d)) => {
                    deps.extend(d);
                    Src::Reg(*r)
                }
                None => {
                    let i = inputs.iter().position(|&y| y == x).unwrap_or_else(|| {
                        inputs.push(x);
                        inputs.len() - 1
                    });
                    deps.push(i);
                    Src::Input(i, p)
                }
            })
            .collect();
        deps.sort_unstable();
        deps.dedup();
        // The destination first, so that it is none of the sources.
        let d = free.pop().unwrap_or_else(|| {
            count += 1;
            count - 1
        });
        code.push(match **w {
            Elementwise::Unary { op, .. } => Code::Unary { op, a: srcs[0], d },
            Elementwise::Binary { op, .. } => Code::Binary {
                op,
                a: srcs[0],
                b: srcs[1],
                d,
            },
        });
        // Sources read for the last time free their registers.
        for &x in s.inputs() {
            if last_use.get(&x) == Some(&(lo + k))
                && let Some((r, _)) = regs.get(&x)
                && !free.contains(r)
            {
                free.push(*r);
            }
        }
        let made = s.outputs()[0];
        if escapes(made) {
            outputs.push(made);
            depends.push(deps.clone());
            code.push(Code::Store {
                r: d,
                out: outputs.len() - 1,
            });
        }
        if last_use.get(&made).is_some_and(|&u| u > lo + k) {
            regs.insert(made, (d, deps));
        } else {
            free.push(d);
        }
    }
    let program = Program {
        name: fused_name(whats),
        dtype,
        n,
        regs: count,
        code,
    };
    let kernel = match device {
        #[cfg(feature = "cuda")]
        Device::Cuda(_) => crate::cuda::fused::kernel(program),
        _ => crate::cpu::fused::kernel(program),
    };
    Step::new(kernel, inputs, outputs)
        .called_at(run[0].caller())
        .with_depends(depends)
}

/// `fused[exp, add×3]`: the ops in order, repeats counted.
fn fused_name(whats: &[&Elementwise]) -> String {
    let mut parts: Vec<(&str, usize)> = Vec::new();
    for w in whats {
        match parts.last_mut() {
            Some((name, k)) if *name == w.name() => *k += 1,
            _ => parts.push((w.name(), 1)),
        }
    }
    let parts: Vec<String> = parts
        .into_iter()
        .map(|(name, k)| {
            if k == 1 {
                name.to_string()
            } else {
                format!("{name}×{k}")
            }
        })
        .collect();
    format!("fused[{}]", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elementwise::{binary, unary};
    use crate::kernel::{from_host, gather_host};
    use crate::kinds::{BinaryOp, UnaryOp};
    use crate::{DType, Lay};
    use crate::{Layout, cpu};
    use eddy_vm::plan::{Plan, PlanSpec};
    use eddy_vm::{StreamId, Vm};

    /// A run of three ops over blocks (two full, one short) with a splat operand and a value
    /// read after the run: merged into one step whose outputs equal the separate kernels' bit
    /// for bit (Miri checks the blocks' pointers into the outputs).
    #[test]
    fn a_merged_run_computes_what_its_ops_compute() {
        let vm = Vm::builder().sync_mode(true).build().unwrap();
        let n = 2 * cpu::fused::BLOCK + 7;
        let xs: Vec<f32> = (0..n).map(|i| i as f32 * 0.01 - 3.0).collect();
        let k = |w| -> Box<dyn eddy_vm::instruction::Kernel> { w };
        let cpu = Device::CPU;
        let steps = |fused: bool| {
            let mul = binary(cpu, BinaryOp::Mul, DType::F32, Lay::Dense(0), Lay::Splat(0));
            let exp = unary(cpu, UnaryOp::Exp, DType::F32, Lay::Dense(0));
            let sub = binary(cpu, BinaryOp::Sub, DType::F32, Lay::Dense(0), Lay::Dense(0));
            let s = vec![
                Step::new(
                    k(Box::new(mul.unwrap())),
                    vec![Slot::Input(0), Slot::Input(1)],
                    vec![Slot::Temp(0)],
                ),
                Step::new(
                    k(Box::new(exp.unwrap())),
                    vec![Slot::Temp(0)],
                    vec![Slot::Output(0)],
                ),
                Step::new(
                    k(Box::new(sub.unwrap())),
                    vec![Slot::Output(0), Slot::Temp(0)],
                    vec![Slot::Output(1)],
                ),
            ];
            let bytes = |s: Slot| if s == Slot::Input(1) { 4 } else { 4 * n };
            if fused {
                fuse_elementwise(cpu, s, &bytes)
            } else {
                s
            }
        };
        let run = |fused: bool| {
            let steps = steps(fused);
            if fused {
                assert_eq!(steps.len(), 1);
                assert_eq!(steps[0].outputs(), [Slot::Output(0), Slot::Output(1)]);
                assert_eq!(steps[0].depends(1), Some(&[0, 1][..]));
            }
            let spec = PlanSpec::new(StreamId::CPU, steps, 2, 2, vec![4 * n], vec![]);
            let plan = Plan::new(&vm, spec).unwrap();
            let (x, c) = (vm.new_blob(4 * n), vm.new_blob(4));
            vm.run_op(StreamId::CPU, from_host(xs.clone()), &[], &[&x], false)
                .unwrap();
            vm.run_op(StreamId::CPU, from_host(vec![0.5f32]), &[], &[&c], false)
                .unwrap();
            let (y, z) = (vm.new_blob(4 * n), vm.new_blob(4 * n));
            plan.launch(&vm, &[x, c], &[y.clone(), z.clone()]).unwrap();
            let read = |b| {
                let l = Layout::contiguous([n]);
                vm.read_blob(b, move |m| gather_host::<f32>(m, &l)).unwrap()
            };
            let bits = |v: Vec<f32>| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            (bits(read(&y)), bits(read(&z)))
        };
        assert_eq!(run(true), run(false));
    }

    /// A merged step writes the temporaries that anything outside it reads or writes, and
    /// only those: one read only inside the run is kept in registers, one nothing reads is not
    /// written at all, and one read after the run or written again after it is stored.
    #[test]
    fn a_merged_step_writes_the_temporaries_read_or_written_outside_it() {
        let cpu = Device::CPU;
        let neg = || -> Box<dyn eddy_vm::instruction::Kernel> {
            Box::new(unary(cpu, UnaryOp::Neg, DType::F32, Lay::Dense(0)).unwrap())
        };
        let add = || -> Box<dyn eddy_vm::instruction::Kernel> {
            let k = binary(cpu, BinaryOp::Add, DType::F32, Lay::Dense(0), Lay::Dense(0));
            Box::new(k.unwrap())
        };
        let step = |k, ins: &[Slot], out: Slot| Step::new(k, ins.to_vec(), vec![out]);
        // Steps 1–4 merge; steps 0 and 5 are not elementwise (a host copy stands in for any
        // other kernel), so they stay outside.
        let outside = || -> Box<dyn eddy_vm::instruction::Kernel> {
            Box::new(crate::kernel::from_host(vec![0f32; 4]))
        };
        let (t, i) = (Slot::Temp, Slot::Input);
        let steps = vec![
            step(outside(), &[], t(0)),
            step(neg(), &[i(0)], t(1)),       // read only inside: kept
            step(add(), &[t(1), i(0)], t(2)), // read after the run: stored
            step(add(), &[t(2), t(0)], t(3)), // written again after the run: stored
            step(neg(), &[t(3)], t(4)),       // read by nothing: not written
            step(outside(), &[t(2)], t(3)),
        ];
        let fused = fuse_elementwise(cpu, steps, &|_| 16);
        assert_eq!(
            fused.len(),
            3,
            "{:?}",
            fused.iter().map(|s| s.name()).collect::<Vec<_>>()
        );
        assert_eq!(fused[1].name(), "fused[neg, add×2, neg]");
        assert_eq!(fused[1].inputs(), [i(0), t(0)]);
        assert_eq!(fused[1].outputs(), [t(2), t(3)]);
    }

    /// A merged step writes a value over an input it reads for the last time, in the plan's
    /// arena, where every read of that input in a block comes before the store: the plan lays
    /// the two out in one place, and the values are those of the separate kernels, bit for
    /// bit. A value stored before the input's last read does not share its place. (Miri
    /// checks that the aliased blocks are never borrowed at once.)
    #[test]
    fn a_merged_step_writes_over_an_input_it_no_longer_reads() {
        let vm = Vm::builder().sync_mode(true).build().unwrap();
        let n = 2 * cpu::fused::BLOCK + 5;
        let xs: Vec<f32> = (0..n).map(|i| i as f32 * 0.003 - 1.0).collect();
        let k = |w| -> Box<dyn eddy_vm::instruction::Kernel> { w };
        let cpu = Device::CPU;
        let f = DType::F32;
        let d = || Lay::Dense(0);
        let run = |fused: bool| {
            // t0 = xs; t1 = exp(t0); t2 = t1 + t0; out0 = -t1, out1 = -t2 over n - 1 elements
            // (another element count: a run of its own, reading t1 and t2 from the arena).
            let s = vec![
                Step::new(
                    k(Box::new(from_host(xs.clone()))),
                    vec![],
                    vec![Slot::Temp(0)],
                ),
                Step::new(
                    k(Box::new(unary(cpu, UnaryOp::Exp, f, d()).unwrap())),
                    vec![Slot::Temp(0)],
                    vec![Slot::Temp(1)],
                ),
                Step::new(
                    k(Box::new(binary(cpu, BinaryOp::Add, f, d(), d()).unwrap())),
                    vec![Slot::Temp(1), Slot::Temp(0)],
                    vec![Slot::Temp(2)],
                ),
                Step::new(
                    k(Box::new(unary(cpu, UnaryOp::Neg, f, d()).unwrap())),
                    vec![Slot::Temp(1)],
                    vec![Slot::Output(0)],
                ),
                Step::new(
                    k(Box::new(unary(cpu, UnaryOp::Neg, f, d()).unwrap())),
                    vec![Slot::Temp(2)],
                    vec![Slot::Output(1)],
                ),
            ];
            let bytes = |s: Slot| match s {
                Slot::Output(_) => 4 * (n - 1),
                _ => 4 * n,
            };
            let steps = if fused {
                fuse_elementwise(cpu, s, &bytes)
            } else {
                s
            };
            if fused {
                assert_eq!(steps.len(), 3, "the source, t1 and t2, the outputs");
                assert_eq!(steps[1].inputs(), [Slot::Temp(0)]);
                assert_eq!(steps[1].outputs(), [Slot::Temp(1), Slot::Temp(2)]);
                let k = steps[1].kernel();
                assert!(!k.may_alias(0, 0), "t1 is stored before t0's last read");
                assert!(k.may_alias(1, 0), "t2 is stored after it");
            }
            let spec = PlanSpec::new(StreamId::CPU, steps, 0, 2, vec![4 * n; 3], vec![]);
            let plan = Plan::new(&vm, spec).unwrap();
            plan.memory().check().unwrap();
            let (y, z) = (vm.new_blob(4 * (n - 1)), vm.new_blob(4 * (n - 1)));
            plan.launch(&vm, &[], &[y.clone(), z.clone()]).unwrap();
            let read = |b| {
                let l = Layout::contiguous([n - 1]);
                vm.read_blob(b, move |m| gather_host::<f32>(m, &l)).unwrap()
            };
            let bits = |v: Vec<f32>| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            let m = plan.memory();
            ((bits(read(&y)), bits(read(&z))), m.shares.clone(), m.arena)
        };
        let (fused, shares, arena) = run(true);
        let (separate, none, apart) = run(false);
        assert_eq!(fused, separate);
        assert_eq!(shares, [(0, 2)], "t2 over t0");
        assert!(none.is_empty(), "the separate kernels do not say they may");
        let place = (4 * n).div_ceil(64) * 64;
        assert_eq!(arena, 2 * place, "t0 and t2 in one place, t1 in another");
        assert_eq!(apart, 3 * place, "all three live at the step that makes t2");
    }

    /// A merged step run on an input shorter than its program reads fails with a typed
    /// kernel error naming the input, and writes nothing out of bounds.
    #[test]
    fn a_merged_step_refuses_an_input_too_short() {
        let vm = Vm::builder().sync_mode(true).build().unwrap();
        let cpu = Device::CPU;
        let k = |w| -> Box<dyn eddy_vm::instruction::Kernel> { w };
        let exp = unary(cpu, UnaryOp::Exp, DType::F32, Lay::Dense(0)).unwrap();
        let add = binary(cpu, BinaryOp::Add, DType::F32, Lay::Dense(0), Lay::Dense(0)).unwrap();
        let steps = vec![
            Step::new(k(Box::new(exp)), vec![Slot::Input(0)], vec![Slot::Temp(0)]),
            Step::new(
                k(Box::new(add)),
                vec![Slot::Temp(0), Slot::Input(1)],
                vec![Slot::Output(0)],
            ),
        ];
        let fused = fuse_elementwise(cpu, steps, &|_| 64);
        assert_eq!(fused.len(), 1);
        let spec = PlanSpec::new(StreamId::CPU, fused, 2, 1, vec![64], vec![]);
        let plan = Plan::new(&vm, spec).unwrap();
        // Input 1 holds 8 elements where the program reads 16.
        let (x, short, y) = (vm.new_blob(64), vm.new_blob(32), vm.new_blob(64));
        vm.run_op(StreamId::CPU, from_host(vec![0f32; 16]), &[], &[&x], false)
            .unwrap();
        vm.run_op(
            StreamId::CPU,
            from_host(vec![0f32; 8]),
            &[],
            &[&short],
            false,
        )
        .unwrap();
        plan.launch(&vm, &[x, short], std::slice::from_ref(&y))
            .unwrap();
        let e = vm.read_blob(&y, |_| ()).unwrap_err().to_string();
        assert!(e.contains("input 1 has 8 elements"), "{e}");
    }

    /// On a CUDA device (no GPU needed: the pass only builds kernels), a chain of 40 adds
    /// becomes kernels of at most 32 ops, and an op the device does not merge (one over a
    /// strided operand) ends a run.
    #[cfg(feature = "cuda")]
    #[test]
    fn a_cuda_chain_is_merged_in_kernels_of_at_most_32_ops() {
        let gpu = Device::Cuda(0);
        let add = || -> Box<dyn eddy_vm::instruction::Kernel> {
            let k = binary(gpu, BinaryOp::Add, DType::F32, Lay::Dense(0), Lay::Dense(0));
            Box::new(k.expect("the device adds f32"))
        };
        // t[k+1] = t[k] + in1, from in0 to out0.
        let chain = |len: usize| -> Vec<Step> {
            (0..len)
                .map(|k| {
                    let a = if k == 0 {
                        Slot::Input(0)
                    } else {
                        Slot::Temp(k - 1)
                    };
                    let y = if k + 1 == len {
                        Slot::Output(0)
                    } else {
                        Slot::Temp(k)
                    };
                    Step::new(add(), vec![a, Slot::Input(1)], vec![y])
                })
                .collect()
        };
        let merged = fuse_elementwise(gpu, chain(40), &|_| 64);
        let names: Vec<&str> = merged.iter().map(|s| s.name()).collect();
        assert_eq!(names, ["fused[add×32]", "fused[add×8]"]);
        assert_eq!(merged[1].outputs(), [Slot::Output(0)]);
        let mut steps = chain(4);
        let exp = unary(
            gpu,
            UnaryOp::Exp,
            DType::F32,
            Lay::Strided(Box::new(Layout::contiguous([4, 4]).transpose(0, 1))),
        );
        steps.insert(
            2,
            Step::new(
                Box::new(exp.expect("a strided exp")),
                vec![Slot::Temp(1)],
                vec![Slot::Temp(9)],
            ),
        );
        let merged = fuse_elementwise(gpu, steps, &|_| 64);
        let names: Vec<&str> = merged.iter().map(|s| s.name()).collect();
        assert_eq!(names, ["fused[add×2]", "exp", "fused[add×2]"]);
    }
}
