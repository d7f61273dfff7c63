//! One run of a plan as one engine instruction: the steps in order, each failure marking only
//! what depends on it.

use super::actors::RunRec;
use super::failures::{all_inherited, inherited, record, settle};
use super::{PlanInner, Slot, StandIn};
use crate::Counted;
use crate::blob::Blob;
use crate::error::{Caller, Error, Result};
use crate::instruction::op_call::{Blobs, SHALLOW_MAX, Shallow};
use crate::instruction::{ComputeCtx, InstructionPolicy};
use std::sync::Arc;

/// One run of a plan: the instruction [`Plan::launch`] submits.
pub(crate) struct PlanRun {
    pub(super) plan: Arc<PlanInner>,
    /// The run's inputs, then the fixed blobs read.
    pub(super) inputs: Blobs,
    /// The run's outputs, then the fixed blobs written, then the token.
    pub(super) outputs: Blobs,
    /// Kernels for the steps, in place of theirs (see `Plan::launch_with`).
    pub(super) kernels: Option<Vec<Option<StandIn>>>,
    pub(super) at: Caller,
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
        if let Some(kernels) = self.kernels.take() {
            for (step, k) in steps.iter_mut().zip(kernels) {
                if let Some(k) = k {
                    step.kernel = k.kernel;
                    step.at = k.at.unwrap_or(step.at);
                }
            }
        }
        let mut root = None;
        // The errors a step's outputs inherit from failed inputs, where some output does.
        let mut inh: Vec<Option<Error>> = Vec::new();
        for step in steps.iter_mut() {
            let (ins, n, depends) = (&step.inputs, step.outputs.len(), step.depends.as_deref());
            inherited(&failed, ins, n, depends, &mut inh);
            if all_inherited(&inh) {
                record(&mut failed, &step.outputs, &inh, None);
                continue;
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
            let error = r.err().map(|e| e.with_instr_id(ctx.instr_id()).at(step.at));
            record(&mut failed, &step.outputs, &inh, error.as_ref());
            if let Some(e) = error {
                root.get_or_insert(e);
            }
        }
        let written = (self.outputs.iter().enumerate()).map(|(k, o)| (o, self.written_slot(k)));
        settle(written, &failed);
        root.map_or(Ok(()), Err)
    }
}
