//! Running an instruction's compute: poison checks, panic capture, error recording, tracing.
//! Shared by inline streams (on the scheduler thread) and worker threads.

use crate::Counted;
use crate::alloc::DeviceAllocator;
use crate::blob::Blob;
use crate::error::{Caller, Error, Result};
use crate::instruction::{
    ComputeCtx, InstrList, Instruction, Kernel, PrepareCtx, PrepareError, Run,
};
use crate::merge::{Member, UnitMerge};
use crate::shared::Shared;
use crate::stream::{Event, StreamId, StreamPolicy};
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

thread_local! {
    /// Set on engine threads (scheduler, workers) and while a synchronous-mode pass runs, so a
    /// blocking engine call from a kernel or callback fails with `ReentrantWait`.
    pub(crate) static IN_ENGINE: Cell<bool> = const { Cell::new(false) };
}

/// Whether the current thread is running engine code.
pub(crate) fn in_engine() -> bool {
    IN_ENGINE.with(|c| c.get())
}

/// A thread's flag set until dropped, then restored to what it was, also on unwind.
pub(crate) struct FlagScope {
    flag: &'static std::thread::LocalKey<Cell<bool>>,
    was: bool,
}

impl FlagScope {
    fn set(flag: &'static std::thread::LocalKey<Cell<bool>>) -> FlagScope {
        FlagScope {
            flag,
            was: flag.with(|c| c.replace(true)),
        }
    }
}

impl Drop for FlagScope {
    fn drop(&mut self) {
        self.flag.with(|c| c.set(self.was));
    }
}

/// Marks the current thread as running engine code (a user thread that ran a pass must not
/// stay marked when it unwinds: its later blocking calls would fail with `ReentrantWait`).
pub(crate) struct EngineScope;

impl EngineScope {
    pub(crate) fn enter() -> FlagScope {
        FlagScope::set(&IN_ENGINE)
    }
}

thread_local! {
    /// Set while a user thread submits with the scheduler held (`Vm::promotion_boundary`).
    static HOLDS_SCHEDULER: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread holds the scheduler while it submits: back-pressure must not block it,
/// as only a pass, which it alone may run, would bring the count down.
pub(crate) fn holds_scheduler() -> bool {
    HOLDS_SCHEDULER.with(|c| c.get())
}

/// Marks this thread as submitting with the scheduler held.
pub(crate) struct SchedulerHeld;

impl SchedulerHeld {
    pub(crate) fn enter() -> FlagScope {
        FlagScope::set(&HOLDS_SCHEDULER)
    }
}

/// What compute needs from its stream.
pub(crate) struct ExecEnv<'a> {
    pub stream_id: StreamId,
    pub policy: &'a dyn StreamPolicy,
    pub allocator: &'a Arc<DeviceAllocator>,
    pub shared: &'a Shared,
}

/// Runs every member of a unit (an instruction and its fused followers) in order.
pub(crate) fn run_unit(node: &mut Instruction, env: &ExecEnv<'_>) {
    if node.followers.is_empty() {
        run_member(node, env);
        return;
    }
    // Where the stream's device merges units of op calls, its leading op calls run as one
    // kernel (`merged` members, the head first); the rest as usual. (The test stays here, so
    // that a stream without a merge calls nothing more.)
    let merged = match env.shared.streams[env.stream_id.0 as usize].merge.get() {
        Some(merge) => run_merged(node, env, merge),
        None => 0,
    };
    if merged == 0 {
        run_member(node, env);
    }
    // Members are reached by value (intrusive lists lend only shared references): pop each,
    // run it, and push it onto a second list; both are O(1) and allocate nothing.
    let mut rest = node.followers.take();
    let mut back = InstrList::new(crate::instruction::InstrAdapter::new());
    let mut k = 1;
    while let Some(mut m) = rest.pop_front() {
        if k >= merged {
            run_member(&mut m, env);
            if let Some(c) = m.completion.take() {
                node.completion = Some(c);
            }
        }
        k += 1;
        back.push_back(m);
    }
    node.followers = back;
}

fn poison_outputs<P: Run + ?Sized>(p: &P, e: &Error) {
    for o in p.outputs() {
        o.set_poison(e);
    }
}

fn run_member(m: &mut Instruction, env: &ExecEnv<'_>) {
    let prep_error = m.prep_error.take();
    let id = m.id;
    let handles_poison = m.flags.handles_poison;
    if let Some(c) = run_policy(m.p_mut(), id, prep_error, handles_poison, env) {
        m.completion = Some(c);
    }
}

/// Runs one policy's compute as instruction `id`: a failed `prepare` (`prep_error`) or a
/// poisoned input poisons the outputs and skips it (unless it handles poison: `handles_poison`
/// is the policy's answer, which callers already have); an error or a panic poisons the
/// outputs and is recorded for the next sync. Returns the event the compute declared its
/// completion by, if any.
///
/// Generic, so that the submitting thread's run of a cheap op call (`scheduler/inline.rs`)
/// reaches the hooks by direct, inlinable calls; the scheduler's instructions use it with
/// `dyn InstructionPolicy`.
pub(crate) fn run_policy<P: Run + ?Sized>(
    p: &mut P,
    id: u64,
    prep_error: Option<Error>,
    handles_poison: bool,
    env: &ExecEnv<'_>,
) -> Option<Arc<dyn Event>> {
    if let Some(e) = prep_error {
        poison_outputs(p, &e);
        env.shared.record_error(id, e);
        if !handles_poison {
            return None;
        }
        // Host accesses and releases run anyway and see the poison (a waiting callback
        // learns of the OOM instead of being dropped).
    }
    if !handles_poison && let Some(e) = p.inputs().iter().find_map(|b| b.poison()) {
        // A dependent of a failure: skipped, poisoned with the root error, not re-reported.
        poison_outputs(p, &e);
        return None;
    }
    let trace_start = env.shared.trace_now();
    let mut ctx = ComputeCtx {
        instr_id: id,
        stream_id: env.stream_id,
        stream: env.policy,
        allocator: env.allocator,
        completion: None,
    };
    // The span only where a subscriber takes trace-level spans: a disabled span still costs
    // its construction and drop (about a fiftieth of a small op's instructions); the level
    // test is one load.
    let r = if tracing::level_enabled!(tracing::Level::TRACE) {
        let _span = tracing::trace_span!("instr", id, stream = env.stream_id.0).entered();
        catch_unwind(AssertUnwindSafe(|| p.compute(&mut ctx)))
    } else {
        catch_unwind(AssertUnwindSafe(|| p.compute(&mut ctx)))
    };
    // Test, then take: `ctx` was just built with only the pointer word of `completion`
    // written, and moving the whole option at once (a 16-byte load of two 8-byte stores) is
    // a store-forwarding stall on the path every instruction takes.
    let completion = if ctx.completion.is_some() {
        ctx.completion.take()
    } else {
        None
    };
    let r = match r {
        Ok(r) => r.map_err(|e| e.with_instr_id(id).at(p.caller())),
        Err(panic) => Err(Error::KernelPanic {
            at: p.caller(),
            op: p.name().to_string(),
            instr_id: id,
            message: crate::error::panic_message(&*panic),
        }),
    };
    match r {
        Ok(()) => {
            if !handles_poison {
                for o in p.outputs() {
                    o.clear_poison();
                }
            }
        }
        Err(e) => {
            if !p.poisons_selectively() {
                poison_outputs(p, &e);
            }
            env.shared.record_error(id, e);
        }
    }
    if let Some(t0) = trace_start {
        env.shared.trace_record(p.name(), id, env.stream_id, t0);
    }
    completion
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
fn run_merged(node: &mut Instruction, env: &ExecEnv<'_>, merge: &UnitMerge) -> usize {
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
