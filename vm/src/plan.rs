//! Plans: a captured sequence of op calls, compiled once and replayed as one instruction.
//!
//! [`Vm::capture`] runs a closure with the op calls ([`Vm::run_op`]) it makes on this engine
//! recorded instead of run: each becomes a [`Captured`] (its kernel, stream, operands and the
//! caller's line). A compiler above the engine (the tensor layer's graph API) maps every
//! operand to a [`Slot`] (an input or output of a run, a temporary of the plan, or a fixed blob
//! such as a parameter) and builds a [`Plan`]. The plan lays its temporaries out in one arena by
//! their lifetimes ([`MemoryLayout`]): the memory is allocated once, when the plan is built,
//! and no run allocates or frees any. [`Plan::launch`] submits one run as one instruction whose
//! operands are the run's inputs and outputs and the fixed blobs the plan reads and writes, so
//! the engine orders it against eager work as it orders any op; inside, the steps run in their
//! captured order.
//!
//! # Examples
//!
//! ```
//! use eddy_vm::plan::{Plan, PlanSpec, Slot, Step};
//! use eddy_vm::{StreamId, Vm, testing::AddByte};
//! let vm = Vm::builder().build()?;
//! // in → temp → out: two steps, one temporary.
//! let steps = vec![
//!     Step::new(Box::new(AddByte(1)), vec![Slot::Input(0)], vec![Slot::Temp(0)]),
//!     Step::new(Box::new(AddByte(1)), vec![Slot::Temp(0)], vec![Slot::Output(0)]),
//! ];
//! let plan = Plan::new(&vm, PlanSpec::new(StreamId::CPU, steps, 1, 1, vec![1], vec![]))?;
//! let (x, y) = (vm.new_blob(1), vm.new_blob(1));
//! vm.write_blob(&x, |b| b[0] = 40)?;
//! plan.launch(&vm, &[x], &[y.clone()])?;
//! assert_eq!(vm.read_blob(&y, |b| b[0])?, 42);
//! assert_eq!(plan.memory().arena, 64, "one temporary, aligned");
//! # Ok::<(), eddy_vm::Error>(())
//! ```

use crate::Counted;
use crate::alloc::Allocation;
use crate::blob::Blob;
use crate::engine::Vm;
use crate::error::{Caller, Error, Result};
use crate::instruction::op_call::{Blobs, SHALLOW_MAX, Shallow};
use crate::instruction::{ComputeCtx, InstructionPolicy, Kernel};
use crate::stream::StreamId;
use parking_lot::Mutex;
use std::sync::Arc;

pub use crate::captured::Captured;

/// Where a step's operand comes from at each run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Slot {
    /// The run's input `k`.
    Input(usize),
    /// The run's output `k`.
    Output(usize),
    /// The plan's temporary `k`, in its arena.
    Temp(usize),
    /// The plan's fixed blob `k` (a parameter, a constant): the same at every run.
    Fixed(usize),
}

/// One step of a plan: a kernel and where its operands come from.
pub struct Step {
    kernel: Box<dyn Kernel>,
    inputs: Vec<Slot>,
    outputs: Vec<Slot>,
    at: Caller,
}

impl Step {
    /// A step running `kernel` on `inputs` and `outputs`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::plan::{Slot, Step};
    /// let s = Step::new(Box::new(eddy_vm::testing::AddByte(0)), vec![Slot::Input(0)], vec![Slot::Output(0)]);
    /// assert_eq!(s.name(), "add_byte");
    /// ```
    pub fn new(kernel: Box<dyn Kernel>, inputs: Vec<Slot>, outputs: Vec<Slot>) -> Step {
        Step {
            kernel,
            inputs,
            outputs,
            at: Caller::UNKNOWN,
        }
    }

    /// This step, naming `at` as the place of its call in its errors.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{error::Caller, plan::Step};
    /// let s = Step::new(Box::new(eddy_vm::testing::AddByte(0)), vec![], vec![]);
    /// assert!(s.called_at(Caller::here()).caller().is_known());
    /// ```
    pub fn called_at(mut self, at: Caller) -> Step {
        self.at = at;
        self
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        self.kernel.name()
    }

    /// Where the user's code called the op.
    pub fn caller(&self) -> Caller {
        self.at
    }

    /// Where its inputs come from.
    pub fn inputs(&self) -> &[Slot] {
        &self.inputs
    }

    /// Where its outputs go.
    pub fn outputs(&self) -> &[Slot] {
        &self.outputs
    }
}

/// What a plan is built from.
pub struct PlanSpec {
    stream: StreamId,
    steps: Vec<Step>,
    inputs: usize,
    outputs: usize,
    temps: Vec<usize>,
    fixed: Vec<Counted<Blob>>,
}

impl PlanSpec {
    /// A plan of `steps` on `stream`, run on `inputs` input and `outputs` output blobs, with
    /// temporaries of `temps` bytes each and the `fixed` blobs, which the plan holds (see
    /// [`Blob::hold`]) as long as it lives.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{StreamId, plan::PlanSpec};
    /// let spec = PlanSpec::new(StreamId::CPU, vec![], 0, 0, vec![], vec![]);
    /// # let _ = spec;
    /// ```
    pub fn new(
        stream: StreamId,
        steps: Vec<Step>,
        inputs: usize,
        outputs: usize,
        temps: Vec<usize>,
        fixed: Vec<Counted<Blob>>,
    ) -> PlanSpec {
        PlanSpec {
            stream,
            steps,
            inputs,
            outputs,
            temps,
            fixed,
        }
    }
}

/// Where each temporary of a plan lives in its arena, from the temporaries' lifetimes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryLayout {
    /// Each temporary's size in bytes.
    pub sizes: Vec<usize>,
    /// Each temporary's lifetime: the first and last step that touches it (inclusive).
    pub lifetimes: Vec<(usize, usize)>,
    /// Each temporary's offset in the arena.
    pub offsets: Vec<usize>,
    /// The arena's size in bytes.
    pub arena: usize,
}

/// Offsets and sizes in an arena are multiples of this many bytes.
pub const ARENA_ALIGN: usize = 64;

impl MemoryLayout {
    /// Packs temporaries of `sizes` bytes live over `lifetimes` into one arena: the largest
    /// first, each at the lowest aligned offset where it overlaps no placed temporary whose
    /// lifetime overlaps its own. Temporaries whose lifetimes are disjoint may share bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::plan::MemoryLayout;
    /// // Three temporaries: 0 and 2 are never live at once and share memory.
    /// let m = MemoryLayout::pack(vec![100, 64, 100], vec![(0, 1), (1, 2), (2, 3)]);
    /// assert_eq!(m.offsets[0], m.offsets[2]);
    /// assert_eq!(m.arena, 128 + 64);
    /// m.check().unwrap();
    /// ```
    pub fn pack(sizes: Vec<usize>, lifetimes: Vec<(usize, usize)>) -> MemoryLayout {
        let round = |n: usize| n.div_ceil(ARENA_ALIGN) * ARENA_ALIGN;
        let mut order: Vec<usize> = (0..sizes.len()).collect();
        order.sort_by_key(|&k| (std::cmp::Reverse(round(sizes[k])), lifetimes[k].0, k));
        let mut offsets = vec![0usize; sizes.len()];
        // The placed temporaries live at each step, and a mark per temporary (the last
        // temporary whose neighbours it was collected for), so that finding the placed ones
        // live at once costs the steps spanned, not the count placed.
        let steps = lifetimes.iter().map(|l| l.1 + 1).max().unwrap_or(0);
        let mut live_at: Vec<Vec<usize>> = vec![Vec::new(); steps];
        let mut mark = vec![usize::MAX; sizes.len()];
        let mut busy: Vec<(usize, usize)> = Vec::new();
        let mut arena = 0usize;
        for k in order {
            let size = round(sizes[k]);
            if size == 0 {
                continue;
            }
            // The placed ones live at the same time, by offset.
            busy.clear();
            let (first, last) = lifetimes[k];
            for live in &live_at[first..=last] {
                for &j in live {
                    if mark[j] != k {
                        mark[j] = k;
                        busy.push((offsets[j], offsets[j] + round(sizes[j])));
                    }
                }
            }
            busy.sort_unstable();
            let mut at = 0usize;
            for &(lo, hi) in &busy {
                if at + size <= lo {
                    break;
                }
                at = at.max(hi);
            }
            offsets[k] = at;
            arena = arena.max(at + size);
            for live in &mut live_at[first..=last] {
                live.push(k);
            }
        }
        MemoryLayout {
            sizes,
            lifetimes,
            offsets,
            arena,
        }
    }

    /// Checks the layout: every temporary inside the arena and aligned, and no two whose
    /// lifetimes overlap sharing a byte.
    ///
    /// # Errors
    ///
    /// A message naming the first two temporaries that collide, or the one out of place.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::plan::MemoryLayout;
    /// let mut m = MemoryLayout::pack(vec![64, 64], vec![(0, 1), (1, 2)]);
    /// m.check().unwrap();
    /// m.offsets[1] = m.offsets[0]; // both live at step 1
    /// assert!(m.check().is_err());
    /// ```
    pub fn check(&self) -> std::result::Result<(), String> {
        let n = self.sizes.len();
        for i in 0..n {
            let (oi, si) = (self.offsets[i], self.sizes[i]);
            if si > 0 && (oi % ARENA_ALIGN != 0 || oi + si > self.arena) {
                return Err(format!(
                    "temporary {i} ({si} bytes at {oi}) is outside the arena of {} bytes or unaligned",
                    self.arena
                ));
            }
            for j in i + 1..n {
                let (oj, sj) = (self.offsets[j], self.sizes[j]);
                let bytes = si > 0 && sj > 0 && oi < oj + sj && oj < oi + si;
                if bytes && overlap(self.lifetimes[i], self.lifetimes[j]) {
                    return Err(format!(
                        "temporaries {i} ({si} bytes at {oi}, steps {:?}) and {j} ({sj} bytes at \
                         {oj}, steps {:?}) are live at once and share bytes",
                        self.lifetimes[i], self.lifetimes[j]
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Whether two inclusive step ranges share a step.
fn overlap(a: (usize, usize), b: (usize, usize)) -> bool {
    a.0 <= b.1 && b.0 <= a.1
}

/// A compiled plan, ready to run: see the module's docs.
pub struct Plan {
    inner: Arc<PlanInner>,
}

struct PlanInner {
    stream: StreamId,
    /// Runs are ordered by the token (each writes it), so the lock is never contended.
    steps: Mutex<Vec<Step>>,
    inputs: usize,
    outputs: usize,
    temps: Vec<Counted<Blob>>,
    fixed: Vec<Counted<Blob>>,
    /// The inputs a step writes (in place): a run lists them as outputs too.
    inputs_written: Vec<usize>,
    fixed_reads: Vec<usize>,
    fixed_writes: Vec<usize>,
    /// A zero-byte blob every run writes: runs of one plan share its temporaries, so they run
    /// one after another.
    token: Counted<Blob>,
    memory: MemoryLayout,
    /// The temporaries' memory; it goes with the plan.
    _arena: Option<Allocation>,
    /// The engine, to release the fixed blobs the plan was the last to hold.
    vm: Vm,
}

/// The plan holds its fixed blobs as a tensor does (see [`Blob::hold`]): a user dropping the
/// last tensor on one does not release it while the plan may still run. The last holder
/// releases it.
impl Drop for PlanInner {
    fn drop(&mut self) {
        for b in &self.fixed {
            if b.unhold() {
                // An engine that is shut down has freed everything already.
                let _ = self.vm.release_unheld(b);
            }
        }
    }
}

impl Plan {
    /// Builds the plan: lays out and allocates its temporaries.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for a slot out of range or an unknown stream; `OutOfMemory` if the
    /// arena cannot be allocated.
    #[track_caller]
    pub fn new(vm: &Vm, spec: PlanSpec) -> Result<Plan> {
        let at = Caller::here();
        let sh = vm.shared();
        let bad = |message: String| Error::InvalidArgument {
            at,
            op: "Plan::new".into(),
            message,
        };
        let Some(entry) = sh.streams.get(spec.stream.0 as usize) else {
            return Err(bad(format!("unknown stream {}", spec.stream)));
        };
        let mut lifetimes: Vec<Option<(usize, usize)>> = vec![None; spec.temps.len()];
        let (mut reads, mut writes) =
            (vec![false; spec.fixed.len()], vec![false; spec.fixed.len()]);
        let mut inputs_written = vec![false; spec.inputs];
        for (i, step) in spec.steps.iter().enumerate() {
            for (slots, written) in [(&step.inputs, false), (&step.outputs, true)] {
                for &s in slots {
                    let ok = match s {
                        Slot::Input(k) => {
                            if written && k < spec.inputs {
                                inputs_written[k] = true;
                            }
                            k < spec.inputs
                        }
                        Slot::Output(k) => k < spec.outputs,
                        Slot::Temp(k) => {
                            let live = lifetimes.get_mut(k);
                            if let Some(l) = live {
                                *l = Some(l.map_or((i, i), |(a, _)| (a, i)));
                            }
                            k < spec.temps.len()
                        }
                        Slot::Fixed(k) => {
                            if k < spec.fixed.len() {
                                if written {
                                    writes[k] = true;
                                } else {
                                    reads[k] = true;
                                }
                            }
                            k < spec.fixed.len()
                        }
                    };
                    if !ok {
                        return Err(bad(format!(
                            "step {i} (`{}`): {s:?} out of range",
                            step.name()
                        )));
                    }
                }
            }
        }
        let lifetimes = lifetimes.into_iter().map(|l| l.unwrap_or((0, 0))).collect();
        let memory = MemoryLayout::pack(spec.temps.clone(), lifetimes);
        debug_assert_eq!(memory.check(), Ok(()));
        let arena = if memory.arena > 0 {
            let a = entry
                .allocator
                .allocate(memory.arena)
                .map_err(|e| Error::OutOfMemory {
                    at,
                    op: "Plan::new".into(),
                    requested: e.requested,
                    in_use: e.in_use,
                    cached: e.cached,
                    capacity: e.capacity,
                })?;
            Some(a)
        } else {
            None
        };
        let temps = spec
            .temps
            .iter()
            .enumerate()
            .map(|(k, &bytes)| {
                let b = vm.new_blob(bytes);
                if let Some(a) = &arena
                    && bytes > 0
                {
                    // SAFETY: `offsets[k] + bytes` lies inside the arena (`MemoryLayout::pack`),
                    // which the plan keeps alive as long as its temporaries; the layout gives
                    // temporaries live at once disjoint bytes, and runs are ordered by the token.
                    unsafe { b.bind_memory(a.ptr().add(memory.offsets[k])) };
                }
                b
            })
            .collect();
        for b in &spec.fixed {
            b.hold();
        }
        let pick = |flags: &[bool]| {
            flags
                .iter()
                .enumerate()
                .filter(|f| *f.1)
                .map(|f| f.0)
                .collect()
        };
        Ok(Plan {
            inner: Arc::new(PlanInner {
                stream: spec.stream,
                steps: Mutex::new(spec.steps),
                inputs: spec.inputs,
                outputs: spec.outputs,
                temps,
                inputs_written: pick(&inputs_written),
                fixed_reads: pick(&reads),
                fixed_writes: pick(&writes),
                fixed: spec.fixed,
                token: vm.new_blob(0),
                memory,
                _arena: arena,
                vm: vm.clone(),
            }),
        })
    }

    /// Submits one run on `inputs` and `outputs` (as many as the plan was built for) as one
    /// instruction. Its errors follow the engine's rules: an argument error here; an error of
    /// a step (named by its op and the line of its call) poisons the run's outputs and the
    /// fixed blobs it writes, and surfaces at their next sync.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for a wrong number of blobs; the errors of [`Vm::run`].
    #[track_caller]
    pub fn launch(
        &self,
        vm: &Vm,
        inputs: &[Counted<Blob>],
        outputs: &[Counted<Blob>],
    ) -> Result<()> {
        let p = &self.inner;
        if inputs.len() != p.inputs || outputs.len() != p.outputs {
            return Err(Error::InvalidArgument {
                at: Caller::here(),
                op: "plan".into(),
                message: format!(
                    "the plan runs on {} inputs and {} outputs, not {} and {}",
                    p.inputs,
                    p.outputs,
                    inputs.len(),
                    outputs.len()
                ),
            });
        }
        let mut ins: Blobs = inputs.iter().cloned().collect();
        ins.extend(p.fixed_reads.iter().map(|&k| p.fixed[k].clone()));
        let mut outs: Blobs = outputs.iter().cloned().collect();
        outs.extend(p.fixed_writes.iter().map(|&k| p.fixed[k].clone()));
        outs.extend(p.inputs_written.iter().map(|&k| inputs[k].clone()));
        outs.push(p.token.clone());
        let run = PlanRun {
            plan: p.clone(),
            inputs: ins,
            outputs: outs,
            at: Caller::here(),
        };
        // On the device's lazy-job launcher where the engine has one, else where the steps
        // were captured.
        let device = vm.shared().streams[p.stream.0 as usize].policy.device();
        vm.run(vm.launcher_stream(device).unwrap_or(p.stream), run)
    }

    /// Where the temporaries live.
    pub fn memory(&self) -> &MemoryLayout {
        &self.inner.memory
    }

    /// The number of steps.
    pub fn len(&self) -> usize {
        self.inner.steps.lock().len()
    }

    /// Whether it has no steps.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Calls `f` with the steps, in order.
    pub fn with_steps<R>(&self, f: impl FnOnce(&[Step]) -> R) -> R {
        f(&self.inner.steps.lock())
    }
}

/// One run of a plan: the instruction [`Plan::launch`] submits.
struct PlanRun {
    plan: Arc<PlanInner>,
    /// The run's inputs, then the fixed blobs read.
    inputs: Blobs,
    /// The run's outputs, then the fixed blobs written, then the token.
    outputs: Blobs,
    at: Caller,
}

/// Marks `slots` failed with `e`.
fn mark(failed: &mut Vec<(Slot, Error)>, slots: &[Slot], e: &Error) {
    for &s in slots {
        match failed.iter_mut().find(|f| f.0 == s) {
            Some(f) => f.1 = e.clone(),
            None => failed.push((s, e.clone())),
        }
    }
}

impl PlanRun {
    /// The slot that output `k` of this instruction is: the run's outputs, then the fixed blobs
    /// written, then the inputs written; `None` for the token.
    fn written_slot(&self, k: usize) -> Option<Slot> {
        let p = &self.plan;
        let (outs, fixed) = (p.outputs, p.fixed_writes.len());
        if k < outs {
            Some(Slot::Output(k))
        } else if k < outs + fixed {
            Some(Slot::Fixed(p.fixed_writes[k - outs]))
        } else {
            p.inputs_written
                .get(k - outs - fixed)
                .map(|&i| Slot::Input(i))
        }
    }

    /// The blob of `slot` in this run.
    fn blob(&self, slot: Slot) -> &Counted<Blob> {
        match slot {
            Slot::Input(k) => &self.inputs[k],
            Slot::Output(k) => &self.outputs[k],
            Slot::Temp(k) => &self.plan.temps[k],
            Slot::Fixed(k) => &self.plan.fixed[k],
        }
    }
}

impl InstructionPolicy for PlanRun {
    fn name(&self) -> &str {
        "plan"
    }
    fn inputs(&self) -> &[Counted<Blob>] {
        &self.inputs
    }
    fn outputs(&self) -> &[Counted<Blob>] {
        &self.outputs
    }
    fn caller(&self) -> Caller {
        self.at
    }
    fn fusable(&self) -> bool {
        false
    }
    /// A failed step marks only what depends on it: a run's outputs and written blobs that
    /// depend on a failed step (or on an input that had failed before) carry that error, and
    /// the others are written as usual, as if the steps had been eager ops.
    fn handles_poison(&self) -> bool {
        true
    }
    fn poisons_selectively(&self) -> bool {
        true
    }
    fn compute(&mut self, ctx: &mut ComputeCtx<'_>) -> Result<()> {
        // A failed prepare (out of memory) marked the outputs failed already: nothing runs.
        // (The run's own outputs are fresh blobs: only that marks them before it runs.)
        if self.outputs[..self.plan.outputs]
            .iter()
            .any(|o| o.is_poisoned())
        {
            return Ok(());
        }
        let plan = self.plan.clone();
        let mut steps = plan.steps.lock();
        // The slots that carry an error, and the error: empty unless something failed.
        let mut failed: Vec<(Slot, Error)> = Vec::new();
        for (k, b) in self.inputs[..plan.inputs].iter().enumerate() {
            if let Some(e) = b.poison() {
                failed.push((Slot::Input(k), e));
            }
        }
        for &k in &plan.fixed_reads {
            if let Some(e) = plan.fixed[k].poison() {
                failed.push((Slot::Fixed(k), e));
            }
        }
        let mut root = None;
        for step in steps.iter_mut() {
            if !failed.is_empty() {
                let from = step
                    .inputs
                    .iter()
                    .find_map(|s| failed.iter().find(|f| f.0 == *s).map(|f| f.1.clone()));
                if let Some(e) = from {
                    mark(&mut failed, &step.outputs, &e);
                    continue;
                }
            }
            let r = if step.inputs.len() <= SHALLOW_MAX && step.outputs.len() <= SHALLOW_MAX {
                let (mut ins, mut outs) = (Shallow::EMPTY, Shallow::EMPTY);
                // SAFETY: the copies stay in this frame, which holds the borrows (`self` and
                // `plan` keep every blob alive); they are gone before it returns.
                unsafe { ins.fill_with(step.inputs.len(), |k| self.blob(step.inputs[k])) };
                // SAFETY: as above.
                unsafe { outs.fill_with(step.outputs.len(), |k| self.blob(step.outputs[k])) };
                step.kernel.compute(ins.as_slice(), outs.as_slice(), ctx)
            } else {
                let own =
                    |ss: &[Slot]| ss.iter().map(|&s| self.blob(s).clone()).collect::<Vec<_>>();
                let (ins, outs) = (own(&step.inputs), own(&step.outputs));
                step.kernel.compute(&ins, &outs, ctx)
            };
            match r {
                Ok(()) if failed.is_empty() => {}
                // A fresh write replaces what an earlier failure left in a slot.
                Ok(()) => failed.retain(|f| !step.outputs.contains(&f.0)),
                Err(e) => {
                    let e = e.with_instr_id(ctx.instr_id()).at(step.at);
                    mark(&mut failed, &step.outputs, &e);
                    root.get_or_insert(e);
                }
            }
        }
        // Each written blob carries its error, or none.
        for (k, o) in self.outputs.iter().enumerate() {
            let slot = self.written_slot(k);
            match failed.iter().find(|f| Some(f.0) == slot) {
                Some((_, e)) => o.set_poison(e),
                None => o.clear_poison(),
            }
        }
        root.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::AddByte;

    /// Two chains of steps through temporaries, run twice: the arena's bytes are shared by
    /// temporaries never live at once, and each run's values are right (Miri checks the
    /// borrowed operand copies and the arena pointers).
    #[test]
    fn a_plan_runs_its_steps_through_the_arena() {
        let vm = Vm::builder().sync_mode(true).build().unwrap();
        let fixed = vm.new_blob(3);
        vm.write_blob(&fixed, |b| b.fill(100)).unwrap();
        let steps = vec![
            Step::new(
                Box::new(AddByte(1)),
                vec![Slot::Input(0)],
                vec![Slot::Temp(0)],
            ),
            Step::new(
                Box::new(AddByte(2)),
                vec![Slot::Temp(0)],
                vec![Slot::Temp(1)],
            ),
            Step::new(
                Box::new(AddByte(3)),
                vec![Slot::Temp(1)],
                vec![Slot::Temp(2)],
            ),
            Step::new(
                Box::new(AddByte(0)),
                vec![Slot::Temp(2)],
                vec![Slot::Output(0)],
            ),
            Step::new(
                Box::new(AddByte(1)),
                vec![Slot::Fixed(0)],
                vec![Slot::Output(1)],
            ),
        ];
        let spec = PlanSpec::new(StreamId::CPU, steps, 1, 2, vec![3, 3, 3], vec![fixed]);
        let plan = Plan::new(&vm, spec).unwrap();
        let m = plan.memory();
        m.check().unwrap();
        assert_eq!(
            m.offsets[0], m.offsets[2],
            "temporaries 0 and 2 are never live at once"
        );
        assert_eq!(m.arena, 2 * ARENA_ALIGN);
        for run in 0..2u8 {
            let (x, y, z) = (vm.new_blob(3), vm.new_blob(3), vm.new_blob(3));
            vm.write_blob(&x, move |b| b.fill(run * 10)).unwrap();
            plan.launch(&vm, &[x], &[y.clone(), z.clone()]).unwrap();
            assert_eq!(vm.read_blob(&y, |b| b.to_vec()).unwrap(), [run * 10 + 6; 3]);
            assert_eq!(vm.read_blob(&z, |b| b.to_vec()).unwrap(), [101; 3]);
        }
        assert!(
            plan.launch(&vm, &[], &[]).is_err(),
            "the wrong number of blobs"
        );
    }

    #[test]
    fn packing_keeps_live_temporaries_apart() {
        // Lifetimes that chain, nest and cross; sizes that are and are not aligned.
        let sizes = vec![10, 200, 64, 65, 1, 0, 128, 300];
        let lifetimes = vec![
            (0, 3),
            (1, 2),
            (2, 6),
            (4, 5),
            (0, 9),
            (3, 3),
            (6, 8),
            (7, 9),
        ];
        let m = MemoryLayout::pack(sizes.clone(), lifetimes.clone());
        m.check().unwrap();
        let total: usize = sizes
            .iter()
            .map(|s| s.div_ceil(ARENA_ALIGN) * ARENA_ALIGN)
            .sum();
        assert!(
            m.arena < total,
            "some bytes are shared: {} < {total}",
            m.arena
        );
    }
}
