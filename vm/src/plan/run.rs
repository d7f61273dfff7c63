//! One run of a plan as one engine instruction: the steps in order, each failure marking only
//! what depends on it.

use super::actors::RunRec;
use super::{PlanInner, Slot};
use crate::Counted;
use crate::blob::Blob;
use crate::error::{Caller, Error, Result};
use crate::instruction::op_call::{Blobs, SHALLOW_MAX, Shallow};
use crate::instruction::{ComputeCtx, InstructionPolicy};
use std::sync::Arc;

/// One run of a plan: the instruction [`Plan::launch`] submits.
pub(super) struct PlanRun {
    pub(super) plan: Arc<PlanInner>,
    /// The run's inputs, then the fixed blobs read.
    pub(super) inputs: Blobs,
    /// The run's outputs, then the fixed blobs written, then the token.
    pub(super) outputs: Blobs,
    pub(super) at: Caller,
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
        if let Some(rt) = &plan.runtime {
            // By actors: the run is handed over, and the instruction completes when its last
            // actor has acted.
            let written = (0..self.outputs.len())
                .map(|k| (self.outputs[k].clone(), self.written_slot(k)))
                .collect();
            let run = RunRec::new(
                ctx.instr_id(),
                self.inputs[..plan.inputs].to_vec(),
                self.outputs[..plan.outputs].to_vec(),
                written,
                failed,
            );
            ctx.complete_when(run.done());
            rt.start(run);
            return Ok(());
        }
        let mut steps = plan.steps.lock();
        let mut root = None;
        // The errors a step's outputs inherit from failed inputs, where some output does.
        let mut inherited: Vec<Option<Error>> = Vec::new();
        for step in steps.iter_mut() {
            inherited.clear();
            if !failed.is_empty() {
                let from = |s: &Slot| failed.iter().find(|f| f.0 == *s).map(|f| f.1.clone());
                inherited.extend((0..step.outputs.len()).map(|k| match step.depends(k) {
                    Some(d) => d.iter().find_map(|&i| from(&step.inputs[i])),
                    None => step.inputs.iter().find_map(from),
                }));
                if inherited.iter().all(Option::is_some) {
                    for (o, e) in step.outputs.iter().zip(&inherited) {
                        mark(
                            &mut failed,
                            std::slice::from_ref(o),
                            e.as_ref().expect("all"),
                        );
                    }
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
                // A fresh write replaces what an earlier failure left in a slot, except where
                // the output was computed from a failed input.
                Ok(()) => {
                    failed.retain(|f| !step.outputs.contains(&f.0));
                    for (o, e) in step.outputs.iter().zip(&inherited) {
                        if let Some(e) = e {
                            mark(&mut failed, std::slice::from_ref(o), e);
                        }
                    }
                }
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
