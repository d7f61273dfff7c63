//! The end of a held window: its plan run (compiling the plan the first time), or its calls
//! run as usual.

use super::window::{Boxed, Found, Held, Ref, Window};
use super::{AutoPlanStats, SUBMITTING, Seen, Then};
use crate::Counted;
use crate::blob::Blob;
use crate::engine::Vm;
use crate::error::Result;
use crate::instruction::{Kernel, OpCall};
use crate::plan::{Plan, PlanPass, PlanSpec, Slot, Step};

impl Vm {
    /// The plan run for the held window `w` (matching the notes seen at `c`), compiling the
    /// plan if there is none for these notes. With a plan pass, the pass runs on each window's
    /// steps (their kernels carry that window's parameters); a result shaped unlike the plan's
    /// steps gets a plan of its own.
    pub(super) fn auto_launch(
        &self,
        seen: &mut Seen,
        stats: &mut AutoPlanStats,
        w: &mut Window,
        pass: Option<&PlanPass>,
    ) -> Then {
        let notes = &seen.notes;
        let mut calls = Vec::new();
        let mut releases = Vec::new();
        for h in std::mem::take(&mut w.held) {
            match h {
                Held::Op(c) => calls.push(c),
                // Blobs made in the window and released in it never existed outside the plan.
                Held::Release(b, u) if matches!(w.find(&b), Some(Found::Made(_))) => {
                    drop((b, u));
                }
                r => releases.push(r),
            }
        }
        let outputs: Vec<Counted<Blob>> = (w.made.iter().zip(&notes.kept))
            .filter(|(_, kept)| **kept)
            .map(|(m, _)| m.0.clone())
            .collect();
        let compiled = seen.plan.clone();
        let launch = |plan: Plan, kernels: Vec<Box<dyn Kernel>>, releases| Then::Launch {
            plan,
            inputs: w.outer.clone(),
            outputs: outputs.clone(),
            kernels: (!kernels.is_empty()).then_some(kernels),
            releases,
        };
        // Kernels with other parameters may read an operand elsewhere: a plan is reused only
        // where they allow the in-place places of its memory layout.
        if let (Some(p), None) = (&compiled, pass)
            && p.admits(|i| &*calls[i].kernel).is_ok()
        {
            stats.plan_runs += 1;
            return launch(
                p.clone(),
                calls.into_iter().map(|c| c.kernel).collect(),
                releases,
            );
        }
        // Slots: blobs from before → inputs; made and kept → outputs; the rest → temporaries.
        let mut slot_of_made = Vec::with_capacity(w.made.len());
        let (mut out_bytes, mut temps) = (Vec::new(), Vec::new());
        for (k, made) in w.made.iter().enumerate() {
            slot_of_made.push(if notes.kept[k] {
                out_bytes.push(made.0.bytes());
                Slot::Output(out_bytes.len() - 1)
            } else {
                temps.push(made.0.bytes());
                Slot::Temp(temps.len() - 1)
            });
        }
        // `made_at` is in call order, so sorted: the blob output `o` of call `i` made.
        let made = |i: u32, o: u32| w.made_at.binary_search(&(i as usize, o as usize));
        let slot = |r: Ref| match r {
            Ref::Outer(k) => Slot::Input(k as usize),
            Ref::Made(i, o) => slot_of_made[made(i, o).expect("the notes match the window")],
        };
        let stream = notes.calls[0].stream;
        let mut steps: Vec<Step> = (calls.into_iter().zip(&notes.calls).enumerate())
            .map(|(i, (c, n))| {
                let ins = n.inputs.iter().map(|&r| slot(r)).collect();
                let outs = (n.outputs.iter().enumerate())
                    .map(|(k, o)| match o {
                        Ok(r) => slot(*r),
                        Err(_) => slot(Ref::Made(i as u32, k as u32)),
                    })
                    .collect();
                Step::new(c.kernel, ins, outs).called_at(c.at)
            })
            .collect();
        if let Some(pass) = pass {
            let bytes = |s: Slot| match s {
                Slot::Input(k) => notes.outer_bytes[k],
                Slot::Output(k) => out_bytes[k],
                Slot::Temp(k) => temps[k],
                Slot::Fixed(_) => 0,
            };
            let device = self.shared().streams[stream.0 as usize].policy.device();
            steps = pass(device, steps, &bytes);
        }
        if let Some(p) = compiled
            && p.with_steps(|ps| {
                ps.len() == steps.len() && ps.iter().zip(&steps).all(|(a, b)| a.same_shape(b))
            })
            && p.admits(|i| steps[i].kernel()).is_ok()
        {
            stats.plan_runs += 1;
            return launch(
                p,
                steps.into_iter().map(Step::into_kernel).collect(),
                releases,
            );
        }
        let spec = PlanSpec::new(stream, steps, w.outer.len(), out_bytes.len(), temps, vec![]);
        match Plan::new(self, spec) {
            Ok(p) => {
                stats.compiled += 1;
                stats.merged += notes.calls.len().saturating_sub(p.len()) as u64;
                stats.plan_runs += 1;
                seen.plan = Some(p.clone());
                launch(p, Vec::new(), releases)
            }
            // The kernels went with the failed spec (the construction fails only for memory):
            // what the window writes carries the error, as an eager op's outputs would.
            Err(e) => {
                let mut failed = outputs.clone();
                for n in &notes.calls {
                    for o in &n.outputs {
                        if let Ok(Ref::Outer(k)) = o {
                            failed.push(w.outer[*k as usize].clone());
                        }
                    }
                }
                Then::Fail {
                    blobs: failed,
                    error: e,
                    releases,
                }
            }
        }
    }

    /// Does what the state decided, with its lock let go (and the order lock held).
    pub(super) fn auto_then(&self, then: Then) -> Result<()> {
        if matches!(then, Then::Nothing) {
            return Ok(());
        }
        /// Clears the flag on return or unwind.
        struct Submitting;
        impl Drop for Submitting {
            fn drop(&mut self) {
                SUBMITTING.with(|s| s.set(false));
            }
        }
        SUBMITTING.with(|s| s.set(true));
        let _submitting = Submitting;
        match then {
            Then::Nothing => Ok(()),
            Then::Flush(held) => self.auto_flush(held),
            Then::Fail {
                blobs,
                error,
                releases,
            } => {
                for b in &blobs {
                    b.set_poison(&error);
                }
                self.shared().record_error(0, error);
                self.auto_flush(releases)
            }
            Then::Launch {
                plan,
                inputs,
                outputs,
                kernels,
                releases,
            } => {
                plan.launch_with(self, &inputs, &outputs, kernels)?;
                self.auto_flush(releases)
            }
        }
    }

    /// Runs held calls and releases as usual, in order.
    fn auto_flush(&self, held: Vec<Held>) -> Result<()> {
        let mut first = Ok(());
        for h in held {
            let r = match h {
                Held::Op(c) => {
                    let call = OpCall::new(Boxed(c.kernel), c.inputs.into(), c.outputs.into());
                    self.run(c.stream, call).map_err(|e| e.at(c.at))
                }
                Held::Release(b, true) => self.release_unheld(&b),
                Held::Release(b, false) => self.release(&b),
            };
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}
