//! Running an instruction's compute: poison checks, panic capture, error recording, tracing.
//! Shared by inline streams (on the scheduler thread) and worker threads.

use crate::alloc::DeviceAllocator;
use crate::engine::Shared;
use crate::error::Error;
use crate::instruction::{ComputeCtx, InstrList, Instruction};
use crate::stream::{StreamId, StreamPolicy};
use std::any::Any;
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
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

/// What compute needs from its stream.
pub(crate) struct ExecEnv<'a> {
    pub stream_id: StreamId,
    pub policy: &'a dyn StreamPolicy,
    pub allocator: &'a Arc<DeviceAllocator>,
    pub shared: &'a Shared,
}

/// Turns a panic payload into a message.
pub(crate) fn panic_message(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_string()
    }
}

/// Runs every member of a unit (an instruction and its fused followers) in order.
pub(crate) fn run_unit(node: &mut Instruction, env: &ExecEnv<'_>) {
    run_member(node, env);
    if node.followers.is_empty() {
        return;
    }
    // Members are reached by value (intrusive lists lend only shared references): pop each,
    // run it, and push it onto a second list; both are O(1) and allocate nothing.
    let mut rest = node.followers.take();
    let mut back = InstrList::new(crate::instruction::InstrAdapter::new());
    while let Some(mut m) = rest.pop_front() {
        run_member(&mut m, env);
        if let Some(c) = m.completion.take() {
            node.completion = Some(c);
        }
        back.push_back(m);
    }
    node.followers = back;
}

fn poison_outputs(m: &Instruction, e: &Error) {
    for o in m.p().outputs() {
        o.set_poison(e);
    }
}

fn run_member(m: &mut Instruction, env: &ExecEnv<'_>) {
    if let Some(e) = m.prep_error.take() {
        poison_outputs(m, &e);
        env.shared.record_error(m.id, e);
        if !m.p().handles_poison() {
            return;
        }
        // Host accesses and releases run anyway and see the poison (a waiting callback
        // learns of the OOM instead of being dropped).
    }
    if !m.p().handles_poison() {
        if let Some(e) = m.p().inputs().iter().find_map(|b| b.poison()) {
            // A dependent of a failure: skipped, poisoned with the root error, not re-reported.
            poison_outputs(m, &e);
            return;
        }
    }
    let trace_start = env.shared.trace_now();
    let mut ctx = ComputeCtx {
        instr_id: m.id,
        stream_id: env.stream_id,
        stream: env.policy,
        allocator: env.allocator,
        completion: None,
    };
    let r = {
        let _span = tracing::trace_span!("instr", id = m.id, stream = env.stream_id.0).entered();
        catch_unwind(AssertUnwindSafe(|| m.p_mut().compute(&mut ctx)))
    };
    let completion = ctx.completion.take();
    let r = match r {
        Ok(r) => r.map_err(|e| e.with_instr_id(m.id)),
        Err(p) => Err(Error::KernelPanic {
            op: m.p().name().to_string(),
            instr_id: m.id,
            message: panic_message(&*p),
        }),
    };
    match r {
        Ok(()) => {
            if !m.p().handles_poison() {
                for o in m.p().outputs() {
                    o.clear_poison();
                }
            }
        }
        Err(e) => {
            poison_outputs(m, &e);
            env.shared.record_error(m.id, e);
        }
    }
    if completion.is_some() {
        m.completion = completion;
    }
    if let Some(t0) = trace_start {
        env.shared
            .trace_record(m.p().name(), m.id, env.stream_id, t0);
    }
}
