//! Plans: a captured sequence of op calls, compiled once and replayed as one instruction.
//!
//! [`Vm::capture`](crate::Vm::capture) runs a closure with the op calls
//! ([`Vm::run_op`](crate::Vm::run_op)) it makes on this engine recorded instead of run: each
//! becomes a [`Captured`] (its kernel, stream, operands and the caller's line). A compiler above
//! the engine (the tensor layer's graph API) maps every operand to a [`Slot`] (an input or output
//! of a run, a temporary of the plan, or a fixed blob such as a parameter) and builds a [`Plan`].
//! The plan lays its temporaries out in one arena by their lifetimes ([`MemoryLayout`]): the memory
//! is allocated once, when the plan is built, and no run allocates or frees any. [`Plan::launch`]
//! submits one run as one instruction whose operands are the run's inputs and outputs and the fixed
//! blobs the plan reads and writes, so the engine orders it against eager work as it orders any op;
//! inside, the steps run in their captured order.
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
use crate::error::Caller;
use crate::instruction::Kernel;
use crate::stream::StreamId;
use parking_lot::Mutex;
use std::sync::Arc;

pub use crate::captured::{Captured, Operands};
pub use actors::Actors;
pub use memory::{ARENA_ALIGN, MemoryLayout};

#[cfg(test)]
mod actor_tests;
mod actors;
mod board;
mod failures;
mod launch;
pub(crate) use launch::Host;
pub(crate) use run::PlanRun;

mod memory;
mod run;

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
    /// For each output, the inputs (by position) it is computed from; `None`: all of them.
    depends: Option<Vec<Vec<usize>>>,
    /// Automatic promotion: the window's call whose kernel this step is, kept through a plan
    /// pass that moves the step as it is; `None` for a step a pass made.
    origin: Option<u32>,
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
            depends: None,
            origin: None,
        }
    }

    /// This step, with output `k` computed from the inputs at the positions `depends[k]` only
    /// (by default each output depends on every input). A run whose input failed marks only
    /// the outputs computed from it failed: a step merged from several ops says which of its
    /// outputs came from which inputs.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::plan::{Slot, Step};
    /// let s = Step::new(Box::new(eddy_vm::testing::AddByte(0)), vec![Slot::Input(0), Slot::Input(1)],
    ///     vec![Slot::Output(0), Slot::Output(1)]).with_depends(vec![vec![0], vec![1]]);
    /// assert_eq!(s.depends(1), Some(&[1][..]));
    /// ```
    pub fn with_depends(mut self, depends: Vec<Vec<usize>>) -> Step {
        debug_assert_eq!(depends.len(), self.outputs.len());
        self.depends = Some(depends);
        self
    }

    /// The positions of the inputs output `k` is computed from; `None`: every input.
    pub fn depends(&self, k: usize) -> Option<&[usize]> {
        self.depends.as_ref().map(|d| &d[k][..])
    }

    /// The kernel.
    pub fn kernel(&self) -> &dyn Kernel {
        &*self.kernel
    }

    /// The kernel, taken out of the step (to merge it into another).
    pub fn into_kernel(self) -> Box<dyn Kernel> {
        self.kernel
    }

    /// The kernel, moved to an actor: the step keeps a stand-in of the same name.
    fn move_kernel(&mut self) -> Box<dyn Kernel> {
        let name = self.kernel.name().to_string();
        std::mem::replace(&mut self.kernel, Box::new(actors::Moved(name)))
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

    /// This step, as the kernel of a promoted window's call `i`.
    pub(crate) fn made_by_call(mut self, i: usize) -> Step {
        self.origin = u32::try_from(i).ok();
        self
    }

    /// The promoted window's call whose kernel this step is (see `made_by_call`).
    pub(crate) fn origin(&self) -> Option<usize> {
        self.origin.map(|i| i as usize)
    }

    /// Whether `other` has this step's name, operands and dependences (its kernel may carry
    /// other parameters).
    pub(crate) fn same_shape(&self, other: &Step) -> bool {
        self.name() == other.name()
            && self.inputs == other.inputs
            && self.outputs == other.outputs
            && self.depends == other.depends
    }
}

/// A pass over a plan's steps before it is built, such as an op layer's merging of
/// elementwise steps: it takes the steps, the device they run on, and the size in bytes of the
/// blob each slot stands for, and returns steps that compute the same values. The engine runs
/// the pass it was given ([`Vm::set_plan_pass`](crate::Vm::set_plan_pass)) on the plans it
/// compiles itself (automatic promotion).
///
/// The engine reuses what the pass made of one window for the next windows of its kind,
/// whose steps have the same slots and sizes, where each step's kernel describes itself as
/// the same step's kernel did ([`Kernel::is_described_by`]): the steps the pass made stay,
/// and each step it returned as it was given (moved, not rebuilt) runs the new window's
/// kernel. So a pass decides from the steps' slots, the sizes and what the kernels describe
/// ([`Kernel::describe`]). Where a kernel that does not describe itself is not returned in a
/// step as it was given, the engine runs the pass on every window.
///
/// # Examples
///
/// ```
/// use eddy_vm::plan::{PlanPass, Step};
/// // A pass that changes nothing.
/// let pass: PlanPass = std::sync::Arc::new(|_device, steps: Vec<Step>, _bytes| steps);
/// assert!(pass(eddy_vm::Device::CPU, Vec::new(), &|_| 0).is_empty());
/// ```
pub type PlanPass = std::sync::Arc<
    dyn Fn(crate::Device, Vec<Step>, &dyn Fn(Slot) -> usize) -> Vec<Step> + Send + Sync,
>;

/// What a plan is built from.
pub struct PlanSpec {
    stream: StreamId,
    steps: Vec<Step>,
    inputs: usize,
    outputs: usize,
    temps: Vec<usize>,
    fixed: Vec<Counted<Blob>>,
    actors: Option<Actors>,
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
            actors: None,
        }
    }

    /// This plan, its steps run as actors ([`Actors`]): each temporary a register of
    /// `actors.slots()` slots, each slot its own memory, so that consecutive runs pipeline.
    /// Without it the steps run one after another in each run, their temporaries sharing
    /// memory by lifetime, and a run starts when the previous one has ended.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{StreamId, plan::{Actors, PlanSpec}};
    /// let spec = PlanSpec::new(StreamId::CPU, vec![], 0, 0, vec![], vec![]).with_actors(Actors::new(2, 2));
    /// # let _ = spec;
    /// ```
    pub fn with_actors(mut self, actors: Actors) -> PlanSpec {
        self.actors = Some(actors);
        self
    }
}

/// A compiled plan, ready to run: see the module's docs. Cloning it is cheap: the clones
/// share the plan.
#[derive(Clone)]
pub struct Plan {
    inner: Arc<PlanInner>,
}

/// A kernel standing in for a step's at one run ([`Plan::launch_with`]): the same op with
/// other parameters, called from `at` (`None`: where the step's own kernel was called).
pub(crate) struct StandIn {
    pub(crate) kernel: Box<dyn Kernel>,
    pub(crate) at: Option<Caller>,
}

/// How a plan releases a fixed blob it was the last to hold.
pub(crate) type Release = Box<dyn Fn(&Counted<Blob>) + Send + Sync>;

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
    /// Where the memory plan has a step write an output over an input: kernels standing in
    /// for the steps' must allow it.
    overwrites: Vec<Overwrite>,
    /// The actors, where the plan runs by actors; stopped before the arena goes.
    runtime: Option<actors::Runtime>,
    /// The temporaries' memory; it goes with the plan.
    _arena: Option<Allocation>,
    /// Releases a fixed blob the plan was the last to hold (through the engine that built
    /// the plan).
    release: Release,
}

/// The plan holds its fixed blobs as a tensor does (see [`Blob::hold`]): a user dropping the
/// last tensor on one does not release it while the plan may still run. The last holder
/// releases it.
impl Drop for PlanInner {
    fn drop(&mut self) {
        for b in &self.fixed {
            if b.unhold() {
                (self.release)(b);
            }
        }
    }
}

/// A step's output written over one of its inputs: temporary `pair.1` over `pair.0`.
struct Overwrite {
    step: usize,
    /// The output's position.
    output: usize,
    /// The positions that read the input.
    inputs: Vec<usize>,
    pair: (usize, usize),
}

#[cfg(test)]
mod tests;
