//! The end of a held window: its plan run (compiling the plan the first time), or its calls
//! run as usual.

use super::shelf::Shelf;
use super::window::{Found, Held, Ref, Window};
use super::{PromotionStats, SUBMITTING, Seen, Then};
use crate::blob::Blob;
use crate::captured::Captured;
use crate::engine::Vm;
use crate::error::Caller;
use crate::instruction::{Kernel, OpCall};
use crate::plan::{Plan, PlanPass, PlanSpec, Slot, StandIn, Step};
use crate::{Counted, StreamId};
use std::any::Any;

/// What a plan compiled through a plan pass keeps so that later windows of its kind reuse the
/// steps the pass made (merged kernels, say) instead of running the pass again: a window
/// whose kernels describe themselves as the kernels its steps were made from, and whose calls
/// that went into those steps were made where theirs were (a step's errors name its call),
/// runs the plan's made steps as they are, and its own kernels in the others (see
/// [`PlanPass`]).
pub(super) struct Reuse {
    /// What each call's kernel described ([`Kernel::describe`]).
    described: Vec<Option<Box<dyn Any + Send>>>,
    /// For each step of the plan, the call whose kernel it runs; `None` for a step the pass
    /// made.
    origin: Vec<Option<usize>>,
    /// Where each call that went into a step the pass made was called (`None`: a call whose
    /// kernel a step of its own runs).
    merged_at: Vec<Option<Caller>>,
}

impl Reuse {
    /// For a plan whose steps are `steps`, made by the pass from calls whose kernels described
    /// themselves as `described`; `None` where a kernel that describes nothing went into a
    /// step the pass made (the step could depend on that kernel's parameters).
    fn new(
        described: Vec<Option<Box<dyn Any + Send>>>,
        steps: &[Step],
        called_at: &[Caller],
    ) -> Option<Reuse> {
        let origin: Vec<Option<usize>> = steps.iter().map(Step::origin).collect();
        let mut kept = vec![false; described.len()];
        for &i in origin.iter().flatten() {
            *kept.get_mut(i)? = true;
        }
        let sound = (described.iter().zip(&kept)).all(|(d, &k)| d.is_some() || k);
        let merged_at = (called_at.iter().zip(&kept))
            .map(|(&at, &k)| (!k).then_some(at))
            .collect();
        sound.then_some(Reuse {
            described,
            origin,
            merged_at,
        })
    }

    /// Whether a window's calls (`call(i)`: each one's kernel and caller) describe themselves
    /// as when the plan was compiled, were made where those the pass merged were, and let the
    /// plan's memory layout stand (`admits`).
    fn fits<'k>(&self, plan: &Plan, call: impl Fn(usize) -> (&'k dyn Kernel, Caller)) -> bool {
        (self.described.iter().enumerate()).all(|(i, d)| match d {
            Some(d) => call(i).0.is_described_by(&**d),
            None => call(i).0.describe().is_none(),
        }) && (self.merged_at.iter().enumerate()).all(|(i, at)| at.is_none_or(|a| a == call(i).1))
            && plan.admits(|s| self.origin[s].map(|i| call(i).0)).is_ok()
    }

    /// The stand-ins for the plan's steps from a window's calls: each step the pass kept gets
    /// its call's kernel and caller, each it made keeps its own (`None`).
    fn kernels(&self, calls: Vec<Captured>) -> Vec<Option<StandIn>> {
        let mut calls: Vec<Option<Captured>> = calls.into_iter().map(Some).collect();
        (self.origin.iter())
            .map(|o| o.and_then(|i| calls[i].take()).map(stand_in))
            .collect()
    }
}

/// A call standing in for the step made from its kernel.
fn stand_in(c: Captured) -> StandIn {
    StandIn {
        kernel: c.kernel,
        at: Some(c.at),
    }
}

impl Vm {
    /// The plan run for the held window `w` (matching the notes seen at `c`), compiling the
    /// plan if there is none for these notes. With a plan pass, a window whose kernels describe
    /// themselves as those the plan's steps were made from reuses those steps ([`Reuse`]);
    /// otherwise the pass runs on the window's own steps (their kernels carry its parameters),
    /// and a result shaped unlike the plan's steps gets a plan of its own.
    pub(super) fn promotion_launch(
        &self,
        seen: &mut Seen,
        stats: &mut PromotionStats,
        w: &mut Window,
        pass: Option<&PlanPass>,
        shelf: &Shelf,
    ) -> Then {
        let notes = &seen.notes;
        let mut calls = Vec::with_capacity(notes.calls.len());
        let mut releases = Vec::with_capacity(w.outer.len());
        // Blobs made in the window and released in it never exist outside a plan run: their
        // releases matter only to a window that runs eagerly after all.
        let mut made_releases = Vec::with_capacity(w.made.len());
        for h in std::mem::take(&mut w.held) {
            match h {
                Held::Op(c) => calls.push(c),
                Held::Release(b, u) => match w.find(&b) {
                    Some(Found::Made(k)) => made_releases.push((k, Held::Release(b, u))),
                    _ => releases.push(Held::Release(b, u)),
                },
            }
        }
        let outputs: Vec<Counted<Blob>> = (w.made.iter().zip(&notes.kept))
            .filter(|(_, kept)| **kept)
            .map(|(m, _)| m.0.clone())
            .collect();
        let compiled = shelf.get(seen.id);
        // The run's own errors (its outputs' memory) name the call that made its first
        // output, or the window's first call.
        let first_made = (w.made_at.iter().zip(&notes.kept))
            .find(|(_, kept)| **kept)
            .map_or(0, |((i, _), _)| *i);
        let at = calls
            .get(first_made)
            .or(calls.first())
            .map_or(Caller::UNKNOWN, |c| c.at);
        let launch = |plan: Plan, kernels: Option<Vec<Option<StandIn>>>, releases| Then::Launch {
            plan,
            inputs: w.outer.clone(),
            outputs: outputs.clone(),
            kernels,
            at,
            releases,
        };
        // Kernels with other parameters may read an operand elsewhere: a plan is reused only
        // where they allow the in-place places of its memory layout.
        if let (Some(p), None) = (&compiled, pass)
            && p.admits(|i| Some(&*calls[i].kernel)).is_ok()
        {
            stats.plan_runs += 1;
            let kernels = calls.into_iter().map(|c| Some(stand_in(c))).collect();
            return launch(p.clone(), Some(kernels), releases);
        }
        // With a pass: the steps it made of an earlier window, where this window's calls
        // describe themselves alike.
        if let (Some(p), Some(reuse)) = (&compiled, &seen.reuse)
            && reuse.described.len() == calls.len()
            && reuse.fits(p, |i| (&*calls[i].kernel, calls[i].at))
        {
            stats.plan_runs += 1;
            let kernels = reuse.kernels(calls);
            return launch(p.clone(), Some(kernels), releases);
        }
        let called_at: Vec<Caller> = calls.iter().map(|c| c.at).collect();
        // Slots: blobs from before → inputs; made and kept → outputs; the rest → temporaries.
        let mut slot_of_made = Vec::with_capacity(w.made.len());
        let (mut out_bytes, mut temps) = (Vec::new(), Vec::new());
        // The made blob each output and temporary stands for.
        let (mut made_output, mut made_temp) = (Vec::new(), Vec::new());
        for (k, made) in w.made.iter().enumerate() {
            slot_of_made.push(if notes.kept[k] {
                out_bytes.push(made.0.bytes());
                made_output.push(k);
                Slot::Output(out_bytes.len() - 1)
            } else {
                temps.push(made.0.bytes());
                made_temp.push(k);
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
        let device = self.shared().streams[stream.0 as usize].policy.device();
        let mut steps: Vec<Step> = (calls.into_iter().zip(&notes.calls).enumerate())
            .map(|(i, (c, n))| {
                let ins = n.inputs.iter().map(|&r| slot(r)).collect();
                let outs = (n.outputs.iter().enumerate())
                    .map(|(k, o)| match o {
                        Ok(r) => slot(*r),
                        Err(_) => slot(Ref::Made(i as u32, k as u32)),
                    })
                    .collect();
                Step::new(c.kernel, ins, outs)
                    .called_at(c.at)
                    .made_by_call(i)
            })
            .collect();
        // What the pass's steps are made from, to reuse them.
        let mut described = None;
        if let Some(pass) = pass {
            stats.passes += 1;
            described = Some(steps.iter().map(|s| s.kernel().describe()).collect());
            let bytes = |s: Slot| match s {
                Slot::Input(k) => notes.outer_bytes[k],
                Slot::Output(k) => out_bytes[k],
                Slot::Temp(k) => temps[k],
                Slot::Fixed(_) => 0,
            };
            steps = pass(device, steps, &bytes);
        }
        if let Some(p) = compiled
            && p.with_steps(|ps| {
                ps.len() == steps.len() && ps.iter().zip(&steps).all(|(a, b)| a.same_shape(b))
            })
            && p.admits(|i| Some(steps[i].kernel())).is_ok()
        {
            stats.plan_runs += 1;
            // The run leaves these kernels in the plan's steps.
            seen.reuse = described.and_then(|d| Reuse::new(d, &steps, &called_at));
            let kernels = (steps.into_iter())
                .map(|s| {
                    let at = Some(s.caller());
                    let kernel = s.into_kernel();
                    Some(StandIn { kernel, at })
                })
                .collect();
            return launch(p, Some(kernels), releases);
        }
        let reuse = described.and_then(|d| Reuse::new(d, &steps, &called_at));
        let spec = PlanSpec::new(stream, steps, w.outer.len(), out_bytes.len(), temps, vec![]);
        match Plan::build(self, spec, at) {
            Ok(p) => {
                stats.compiled += 1;
                stats.merged += notes.calls.len().saturating_sub(p.len()) as u64;
                stats.plan_runs += 1;
                shelf.put(seen.id, device, &p);
                seen.reuse = reuse;
                launch(p, None, releases)
            }
            // No arena (the device is full): the window runs eagerly after all, step by step,
            // as its own calls or the steps the pass made of them, and is noted as it was.
            Err((_, Some(steps))) => {
                stats.fallbacks += 1;
                stats.backed_off += 1;
                seen.profit.no_room();
                let blob = |s: Slot| match s {
                    Slot::Input(k) => w.outer[k].clone(),
                    Slot::Output(k) => w.made[made_output[k]].0.clone(),
                    Slot::Temp(k) => w.made[made_temp[k]].0.clone(),
                    Slot::Fixed(_) => unreachable!("a window's plan holds no fixed blobs"),
                };
                Then::Flush(eager_steps(
                    steps,
                    stream,
                    blob,
                    &slot_of_made,
                    made_releases,
                    releases,
                ))
            }
            // The kernels went with the failed plan: what the window writes carries the
            // error, as an eager op's outputs would.
            Err((e, None)) => {
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
                    error: *e,
                    releases,
                }
            }
        }
    }

    /// Does what the state decided, with its lock let go (and the order lock held).
    /// Nothing fails here: a call or run that cannot be submitted leaves its error on what it
    /// would have written, to surface at that blob's next sync, as a failed kernel's does (the
    /// thread doing this may not be the one whose calls they are).
    pub(super) fn promotion_then(&self, then: Then) {
        if matches!(then, Then::Nothing) {
            return;
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
            Then::Nothing => {}
            Then::Flush(held) => self.promotion_flush(held),
            Then::Fail {
                blobs,
                error,
                releases,
            } => {
                self.fail_blobs(&blobs, error);
                self.promotion_flush(releases)
            }
            Then::Launch {
                plan,
                inputs,
                outputs,
                kernels,
                at,
                releases,
            } => {
                if let Err(e) = plan.launch_each(self, &inputs, &outputs, kernels, at) {
                    let written = plan.written_inputs().iter().map(|&k| &inputs[k]);
                    let blobs: Vec<_> = outputs.iter().chain(written).cloned().collect();
                    self.fail_blobs(&blobs, e);
                }
                self.promotion_flush(releases)
            }
        }
    }

    /// Runs held calls and releases as usual, in order. A release fails only for a blob
    /// released already: it is done either way.
    fn promotion_flush(&self, held: Vec<Held>) {
        for h in held {
            match h {
                Held::Op(c) => {
                    let outputs = c.outputs.clone();
                    let call = OpCall::new(c.kernel, c.inputs, c.outputs);
                    if let Err(e) = self.run(c.stream, call) {
                        self.fail_blobs(&outputs, e.at(c.at));
                    }
                }
                Held::Release(b, true) => drop(self.release_unheld(&b)),
                Held::Release(b, false) => drop(self.release(&b)),
            }
        }
    }

    /// `blobs` carry `error`, which the engine records.
    fn fail_blobs(&self, blobs: &[Counted<Blob>], error: crate::Error) {
        for b in blobs {
            b.set_poison(&error);
        }
        self.shared().record_error(0, error);
    }
}

/// A window's `steps` as eager calls on `stream`, operands from `blob`, each released made
/// blob (`made_releases`, by index in the window's made blobs, whose slots are `slot_of_made`)
/// released after the last step that uses it, and the window's other `releases` last.
fn eager_steps(
    steps: Vec<Step>,
    stream: StreamId,
    blob: impl Fn(Slot) -> Counted<Blob>,
    slot_of_made: &[Slot],
    made_releases: Vec<(usize, Held)>,
    releases: Vec<Held>,
) -> Vec<Held> {
    // The last step that uses each output and temporary (past the end: none does, as for
    // a temporary the pass merged away).
    let (mut last_output, mut last_temp) = (Vec::new(), Vec::new());
    for (i, step) in steps.iter().enumerate() {
        for &s in step.inputs().iter().chain(step.outputs()) {
            let (last, k) = match s {
                Slot::Output(k) => (&mut last_output, k),
                Slot::Temp(k) => (&mut last_temp, k),
                _ => continue,
            };
            if last.len() <= k {
                last.resize(k + 1, steps.len());
            }
            last[k] = i;
        }
    }
    let last_use = |k: usize| match slot_of_made[k] {
        Slot::Output(o) => last_output.get(o).copied(),
        Slot::Temp(t) => last_temp.get(t).copied(),
        _ => None,
    };
    // By step, then those no step uses.
    let mut after: Vec<Vec<Held>> = (0..=steps.len()).map(|_| Vec::new()).collect();
    for (k, r) in made_releases {
        after[last_use(k).unwrap_or(steps.len())].push(r);
    }
    let mut after = after.into_iter();
    let mut held = Vec::with_capacity(steps.len() * 2 + releases.len());
    for step in steps {
        let call = Captured {
            stream,
            inputs: step.inputs().iter().map(|&s| blob(s)).collect(),
            outputs: step.outputs().iter().map(|&s| blob(s)).collect(),
            at: step.caller(),
            kernel: step.into_kernel(),
        };
        held.push(Held::Op(call));
        held.extend(after.next().into_iter().flatten());
    }
    held.extend(after.flatten());
    held.extend(releases);
    held
}
