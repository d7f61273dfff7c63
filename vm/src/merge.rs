//! Merging a fused unit's op calls into one kernel, where a device says how.
//!
//! The scheduler fuses runs of small instructions of one stream into a unit that one dispatch
//! runs, member after member. On a device where each kernel is a launch (a CUDA stream), a
//! unit of elementwise op calls can do better: one kernel that computes them all, one launch
//! for the unit. The engine knows nothing of ops, so the device's op library gives it a
//! [`UnitMerge`] ([`Vm::set_unit_merge`]); at dispatch, the op calls that lead a unit (two or
//! more, up to its first other instruction, such as the release that ends most units), when
//! none has a failed input, are offered to it, and what it returns runs in their place on all
//! their inputs and outputs; the rest of the unit runs as usual. What it refuses runs as
//! before.
//!
//! The merged kernel is one instruction's compute: an error in it fails every member's
//! outputs (a member's failure would have failed only what depends on it; a merge only takes
//! members that cannot fail one by one, such as elementwise maps whose operands were checked
//! when they were made).

use crate::Counted;
use crate::blob::Blob;
use crate::engine::Vm;
use crate::error::{Caller, Result};
use crate::exec::{ExecEnv, run_policy};
use crate::instruction::policy::Run;
use crate::instruction::{ComputeCtx, Instruction, Kernel, PrepareCtx, PrepareError};
use crate::stream::Device;
use std::sync::Arc;

/// One member of a fused unit, as a [`UnitMerge`] sees it: its kernel and operands.
pub struct Member<'a> {
    /// The member's kernel.
    pub kernel: &'a dyn Kernel,
    /// Its inputs.
    pub inputs: &'a [Counted<Blob>],
    /// Its outputs.
    pub outputs: &'a [Counted<Blob>],
}

/// Merges the members of a fused unit (in order) into one kernel, or refuses (`None`). The
/// kernel is run with every member's inputs, in member order, as its inputs, and every
/// member's outputs, in member order, as its outputs.
///
/// # Examples
///
/// ```
/// use eddy_vm::merge::{Member, UnitMerge};
/// // A merge that takes nothing: every unit runs member by member.
/// let refuse: UnitMerge = std::sync::Arc::new(|_: &[Member<'_>]| None);
/// let vm = eddy_vm::Vm::builder().build()?;
/// assert!(vm.set_unit_merge(eddy_vm::Device::CPU, refuse));
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub type UnitMerge = Arc<dyn Fn(&[Member<'_>]) -> Option<Box<dyn Kernel>> + Send + Sync>;

impl Vm {
    /// Gives the streams of `device` a way to merge their fused units of op calls into one
    /// kernel (see [the module](crate::merge)). Returns whether some stream took it: `false`
    /// where the engine has no stream on `device`, or each of its streams has one already
    /// (the first given stays).
    ///
    /// # Examples
    ///
    /// See [`UnitMerge`].
    pub fn set_unit_merge(&self, device: Device, merge: UnitMerge) -> bool {
        let mut took = false;
        for st in &self.shared().streams {
            if st.policy.device() == device {
                took |= st.merge.set(merge.clone()).is_ok();
            }
        }
        took
    }
}

/// The merged kernel, run as one instruction on the members' operands.
struct Merged {
    kernel: Box<dyn Kernel>,
    inputs: Vec<Counted<Blob>>,
    outputs: Vec<Counted<Blob>>,
    at: Caller,
}

impl Run for Merged {
    fn name(&self) -> &str {
        self.kernel.name()
    }
    fn inputs(&self) -> &[Counted<Blob>] {
        &self.inputs
    }
    fn outputs(&self) -> &[Counted<Blob>] {
        &self.outputs
    }
    fn handles_poison(&self) -> bool {
        false
    }
    fn poisons_selectively(&self) -> bool {
        false
    }
    fn caller(&self) -> Caller {
        self.at
    }
    fn prepare(&mut self, _: &mut PrepareCtx<'_>) -> std::result::Result<(), PrepareError> {
        Ok(()) // the members were prepared
    }
    fn compute(&mut self, ctx: &mut ComputeCtx<'_>) -> Result<()> {
        self.kernel.compute(&self.inputs, &self.outputs, ctx)
    }
}

/// Offers the leading op calls of unit `node` (it has followers) to `merge`, its stream's,
/// and runs the kernel it makes in their place. Returns how many members ran so (the head
/// first): 0 where fewer than two op calls lead the unit, or one of them has a failed input
/// or a failed prepare, or the merge refuses (a panic in it counts as a refusal).
#[cold]
#[inline(never)]
pub(crate) fn run_merged(node: &mut Instruction, env: &ExecEnv<'_>, merge: &UnitMerge) -> usize {
    let mut members: Vec<Member<'_>> = Vec::new();
    for m in std::iter::once(&*node).chain(node.followers.iter()) {
        let p = m.p();
        // The leading op calls: a release (which ends most units) and what follows run as
        // usual.
        let Some(kernel) = p.kernel() else {
            break;
        };
        // A failed prepare or a failed input: the members' own path fails what it must.
        if m.prep_error.is_some() || p.inputs().iter().any(|b| b.is_poisoned()) {
            return 0;
        }
        members.push(Member {
            kernel,
            inputs: p.inputs(),
            outputs: p.outputs(),
        });
    }
    if members.len() < 2 {
        return 0;
    }
    let offered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| merge(&members)));
    let Ok(Some(kernel)) = offered else {
        return 0;
    };
    let taken = members.len();
    let mut run = Merged {
        kernel,
        inputs: members
            .iter()
            .flat_map(|m| m.inputs.iter().cloned())
            .collect(),
        outputs: members
            .iter()
            .flat_map(|m| m.outputs.iter().cloned())
            .collect(),
        at: node.p().caller(),
    };
    drop(members);
    if let Some(c) = run_policy(&mut run, node.id, None, false, env) {
        node.completion = Some(c);
    }
    taken
}
