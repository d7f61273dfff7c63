//! Instructions: what the scheduler orders and runs.
//!
//! An [`Instruction`] is a stream, a policy ([`InstructionPolicy`]) and an intrusive link, so
//! that moving it between the pending list, a worker's queue and the completion list never
//! allocates. A group of fused instructions is its first member with the others hanging off it
//! on the same kind of list (OneFlow's `FuseInstructionPolicy`): a group of one is never wrapped.
//!
//! ```text
//!  new ──receive──► pending ──window──► waiting on its stream (in-edges from other streams)
//!                                          │ in-degree 0 and at the head of the stream
//!                                          ▼
//!                         dispatch: prepare (allocate; OOM path) → compute (inline or worker)
//!                                          │ done (returned, or its event completed)
//!                                          ▼
//!            release (from the front of the stream's running list): erase accesses and
//!            out-edges, ready successors, drop the policy
//! ```

pub mod access_blob;
pub mod barrier;
pub mod op_call;
pub mod policy;
pub mod release;
pub mod stream_wait;

pub use access_blob::AccessBlobByCallback;
pub use barrier::Barrier;
pub use op_call::{Kernel, OpCall};
pub(crate) use policy::Run;
pub use policy::{ComputeCtx, InstructionPolicy, PrepareCtx, PrepareError};
pub use release::ReleaseTensor;
pub use stream_wait::{EventSlot, RecordEvent, StreamWait};

use crate::error::Error;
use crate::stream::{Event, StreamId};
use intrusive_collections::{LinkedList, LinkedListLink, intrusive_adapter};
use smallbox::space::S16;
use smallbox::{SmallBox, smallbox};
use std::sync::Arc;

/// One instruction: a policy to run on a stream.
///
/// # Examples
///
/// ```
/// use eddy_vm::{Instruction, StreamId, instruction::Barrier};
/// let i = Instruction::new(StreamId::CPU, Barrier::new(|| {}));
/// assert_eq!(i.name(), "barrier");
/// ```
#[repr(C, align(64))]
pub struct Instruction {
    // The layout is fixed (`repr(C)`) and line-aligned because the node crosses between
    // cores twice per instruction (the submitter fills it, the scheduler runs and empties it,
    // the pool brings it back), and every line either side touches is a transfer. The first
    // line holds what both sides touch outside the policy: the links, the stream, the flags;
    // the second starts with the policy's vtable and its first 48 bytes (all of a small
    // policy). What only the scheduler touches comes last.
    pub(crate) link: LinkedListLink,
    /// The next (older) instruction on the pending stack (see `pending`).
    pub(crate) pending_next: crate::sync::AtomicPtr<Instruction>,
    /// A prefetch hint for the pending stack's consumer: the node its submitting thread pushed
    /// a few pushes before this one (see `pending`): an address, never dereferenced.
    pub(crate) pending_hint: usize,
    pub(crate) stream: StreamId,
    /// Engine-assigned: the scheduler slot while live.
    pub(crate) slot: u32,
    /// The policy's constant answers ([`Flags`]), asked once when the node is filled, where the
    /// policy's type is known, instead of through its vtable at every step.
    pub(crate) flags: Flags,
    /// Engine-assigned: submission sequence number (the instruction id).
    pub(crate) id: u64,
    /// Starts the policy on the second line.
    _pad: [u8; 8],
    pub(crate) policy: Option<PolicyBox>,
    /// Fused members after this one (empty unless this heads a group).
    pub(crate) followers: LinkedList<InstrAdapter>,
    /// Set by a kernel through [`ComputeCtx::complete_when`]: done only when this completes.
    pub(crate) completion: Option<Arc<dyn Event>>,
    /// An error from `prepare` (the member is then not computed; its outputs are poisoned).
    pub(crate) prep_error: Option<Error>,
}

/// A policy's answers to [`InstructionPolicy::fusable`], [`handles_poison`](
/// InstructionPolicy::handles_poison) and [`is_barrier`](InstructionPolicy::is_barrier), which
/// do not change while it is live.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Flags {
    pub fusable: bool,
    pub frees_memory: bool,
    pub handles_poison: bool,
    pub barrier: bool,
    pub cheap: bool,
    pub deferred_drop: bool,
}

impl Flags {
    fn of<P: InstructionPolicy + ?Sized>(p: &P) -> Self {
        Flags {
            fusable: p.fusable(),
            frees_memory: p.frees_memory(),
            handles_poison: p.handles_poison(),
            barrier: p.is_barrier(),
            cheap: p.cheap(),
            deferred_drop: p.deferred_drop(),
        }
    }
}

/// A policy, stored inline in the instruction when it fits in 16 words (no allocation).
pub type PolicyBox = SmallBox<dyn InstructionPolicy, S16>;

intrusive_adapter!(pub(crate) InstrAdapter = Box<Instruction>: Instruction { link => LinkedListLink });

/// A list of instructions, built by an [`InstructionsBuilder`](crate::InstructionsBuilder) and
/// handed to the engine whole.
pub(crate) type InstrList = LinkedList<InstrAdapter>;

impl Instruction {
    /// An instruction that runs `policy` on `stream`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Instruction, StreamId, testing::Noop};
    /// let i = Instruction::new(StreamId::CPU, Noop::new(vec![], vec![]));
    /// assert_eq!((i.name(), i.stream()), ("noop", StreamId::CPU));
    /// ```
    pub fn new<P: InstructionPolicy>(stream: StreamId, policy: P) -> Box<Self> {
        let mut node = Self::empty();
        node.set(stream, policy);
        node
    }

    /// An empty node (no policy), for the pool.
    pub(crate) fn empty() -> Box<Self> {
        Box::new(Instruction {
            link: LinkedListLink::new(),
            pending_next: crate::sync::AtomicPtr::new(std::ptr::null_mut()),
            pending_hint: 0,
            _pad: [0; 8],
            stream: StreamId::CPU,
            policy: None,
            id: 0,
            slot: u32::MAX,
            followers: LinkedList::new(InstrAdapter::new()),
            prep_error: None,
            completion: None,
            flags: Flags::default(),
        })
    }

    /// Fills an empty node.
    pub(crate) fn set<P: InstructionPolicy>(&mut self, stream: StreamId, policy: P) {
        debug_assert!(self.policy.is_none() && self.followers.is_empty());
        self.stream = stream;
        self.flags = Flags::of(&policy);
        self.policy = Some(smallbox!(policy));
    }

    /// Empties a node for reuse (its followers must have been taken). Drops the policy, which
    /// runs user drop glue: callers guard against panics.
    pub(crate) fn clear(&mut self) {
        self.clear_keeping_policy();
        self.policy = None;
    }

    /// Empties a node for reuse except for its policy, which its next user drops (see
    /// [`InstructionPolicy::deferred_drop`]).
    pub(crate) fn clear_keeping_policy(&mut self) {
        debug_assert!(self.followers.is_empty());
        self.prep_error = None;
        self.completion = None;
        self.slot = u32::MAX;
    }

    pub(crate) fn p(&self) -> &dyn InstructionPolicy {
        self.policy
            .as_deref()
            .expect("a live instruction has a policy")
    }

    pub(crate) fn p_mut(&mut self) -> &mut dyn InstructionPolicy {
        self.policy
            .as_deref_mut()
            .expect("a live instruction has a policy")
    }

    /// The policy's name.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Instruction, StreamId, instruction::ReleaseTensor};
    /// let vm = eddy_vm::Vm::builder().build().unwrap();
    /// let i = Instruction::new(StreamId::CPU, ReleaseTensor::new(vm.new_blob(8)));
    /// assert_eq!(i.name(), "release_tensor");
    /// ```
    pub fn name(&self) -> &str {
        self.policy.as_deref().map_or("(empty)", |p| p.name())
    }

    /// The stream it runs on.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Instruction, StreamId, instruction::Barrier};
    /// let i = Instruction::new(StreamId(2), Barrier::new(|| {}));
    /// assert_eq!(i.stream(), StreamId(2));
    /// ```
    pub fn stream(&self) -> StreamId {
        self.stream
    }

    /// Calls `f` on this instruction and each fused follower, in order.
    pub(crate) fn for_each_member(&self, mut f: impl FnMut(&Instruction)) {
        f(self);
        for m in self.followers.iter() {
            f(m);
        }
    }

    /// Number of members (1 unless fused).
    pub(crate) fn members(&self) -> usize {
        1 + self.followers.iter().count()
    }
}

/// For the model checkers' tests (loom, shuttle): a list of no-op instructions with `ids`.
#[cfg(all(test, any(loom, shuttle)))]
pub(crate) fn model_batch(ids: &[u64]) -> InstrList {
    let mut l = InstrList::new(InstrAdapter::new());
    for &id in ids {
        let mut i = Instruction::new(StreamId::CPU, Barrier::new(|| {}));
        i.id = id;
        l.push_back(i);
    }
    l
}

#[cfg(all(test, not(loom), not(shuttle)))]
mod tests {
    use super::*;
    use std::mem::offset_of;

    /// The layout the hand-offs rely on (see `Instruction`): line-aligned nodes, what both
    /// threads touch outside the policy in the first line, the policy's vtable and first
    /// 48 bytes in the second.
    #[test]
    fn an_instruction_keeps_its_shared_fields_in_its_first_two_lines() {
        assert_eq!(align_of::<Instruction>(), 64);
        for end in [
            offset_of!(Instruction, link) + size_of::<LinkedListLink>(),
            offset_of!(Instruction, pending_next) + 8,
            offset_of!(Instruction, pending_hint) + 8,
            offset_of!(Instruction, stream) + size_of::<StreamId>(),
            offset_of!(Instruction, flags) + size_of::<Flags>(),
        ] {
            assert!(end <= 64, "a shared field ends at byte {end}");
        }
        assert_eq!(offset_of!(Instruction, policy), 64);
        let node = Instruction::new(StreamId::CPU, Barrier::new(|| {}));
        assert_eq!(
            &*node as *const Instruction as usize % 64,
            0,
            "a line-aligned box"
        );
    }
}
