//! Merging a fused unit's op calls into one kernel, where a device says how.
//!
//! The scheduler fuses runs of small instructions of one stream into a unit that one dispatch
//! runs, member after member. On a device where each kernel is a launch (a CUDA stream), a
//! unit of elementwise op calls can do better: one kernel that computes them all, one launch
//! for the unit. The engine knows nothing of ops, so the device's op library gives it a
//! [`UnitMerge`] ([`Vm::set_unit_merge`](crate::Vm::set_unit_merge)); at dispatch, the op calls that lead a unit (two or
//! more, up to its first other instruction, such as the release that ends most units), when
//! none has a failed input, are offered to it, and what it returns runs in their place on all
//! their inputs and outputs; the rest of the unit runs as usual. What it refuses runs as
//! before.
//!
//! The merged kernel is one instruction's compute: an error in it fails every member's
//! outputs (a member's failure would have failed only what depends on it; a merge only takes
//! members that cannot fail one by one, such as elementwise maps whose operands were checked
//! when they were made).
//!
//! This module holds the types; the engine runs a merge (`exec`) and takes one
//! (`Vm::set_unit_merge`).

use crate::Counted;
use crate::blob::Blob;
use crate::instruction::Kernel;
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
