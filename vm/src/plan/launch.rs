//! Building a plan on an engine (its memory laid out and allocated, its actors started) and
//! launching its runs as engine instructions.

use super::actors;
use super::run::PlanRun;
use super::{MemoryLayout, Overwrite, Plan, PlanInner, PlanSpec, Slot, StandIn, Step};
use crate::Counted;
use crate::blob::Blob;
use crate::error::{Caller, Error, Result};
use crate::instruction::Kernel;
use crate::instruction::op_call::Blobs;
use crate::shared::Shared;
use crate::stream::{Device, StreamId};
use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Where the step that reads a temporary for the last time writes one of the same size, and
/// its kernel may write it over the first ([`Kernel::may_alias`]): the plan lays each such
/// pair out in one place.
fn written_over(steps: &[Step], sizes: &[usize], lifetimes: &[(usize, usize)]) -> Vec<Overwrite> {
    let mut found = Vec::new();
    let mut claimed = vec![false; sizes.len()];
    for (i, step) in steps.iter().enumerate() {
        for (k, &out) in step.outputs.iter().enumerate() {
            let Slot::Temp(b) = out else { continue };
            if lifetimes[b].0 != i || sizes[b] == 0 || step.inputs.contains(&out) {
                continue;
            }
            let over = step.inputs.iter().find_map(|&s| {
                let Slot::Temp(a) = s else { return None };
                let ends_here = lifetimes[a].1 == i && lifetimes[a].0 < i && sizes[a] == sizes[b];
                if !ends_here || claimed[a] || step.outputs.contains(&s) {
                    return None;
                }
                // Every position that reads `a` must allow it.
                let inputs: Vec<usize> = (step.inputs.iter().enumerate())
                    .filter(|(_, x)| **x == s)
                    .map(|(j, _)| j)
                    .collect();
                (inputs.iter().all(|&j| step.kernel.may_alias(k, j))).then_some((a, inputs))
            });
            if let Some((a, inputs)) = over {
                claimed[a] = true;
                found.push(Overwrite {
                    step: i,
                    output: k,
                    inputs,
                    pair: (a, b),
                });
            }
        }
    }
    found
}

/// A checked spec's memory layout, with what its steps do to the plan's operands.
struct Layout {
    memory: MemoryLayout,
    /// For a plan run by actors.
    wiring: Option<actors::Wiring>,
    overwrites: Vec<Overwrite>,
    /// Which inputs a step writes.
    inputs_written: Vec<bool>,
    /// Which fixed blobs a step reads, and which one writes.
    reads: Vec<bool>,
    writes: Vec<bool>,
}

/// What building and launching a plan needs of the engine: the engine's handle implements it
/// (`engine/plan.rs`, with the public `Plan::new` and `Plan::launch`), so that the plans, a
/// layer below the engine, never name the handle.
pub(crate) trait Host {
    /// The engine's shared state.
    fn shared_state(&self) -> &Arc<Shared>;
    /// A new blob of `bytes` (allocated when first written).
    fn new_blob(&self, bytes: usize) -> Counted<Blob>;
    /// Gives the cached, unused memory of `device` back (the out-of-memory retry).
    fn empty_cache(&self, device: Device);
    /// The lazy-job launcher stream of `device`, if the engine has one.
    fn launcher_stream(&self, device: Device) -> Option<StreamId>;
    /// Whether a capture takes this thread's op calls.
    fn capturing_here(&self) -> bool;
    /// Submits a plan's run as one instruction on `stream`.
    fn run_plan(&self, stream: StreamId, run: PlanRun) -> Result<()>;
    /// What gives a temporary back when the plan goes: the engine's release of a blob that no
    /// tensor holds (nothing once the engine is shut down).
    fn releaser(&self) -> super::Release;
}

impl Plan {
    /// [`Plan::new`] on `vm`, its errors naming `at`.
    pub(crate) fn new_on(vm: &dyn Host, spec: PlanSpec, at: Caller) -> Result<Plan> {
        let stream = spec.stream.0 as usize;
        Plan::build(vm, spec, at).map_err(|(e, _)| {
            // Counted as an eager op's failed allocation is, in the engine's and the
            // allocator's statistics.
            let sh = vm.shared_state();
            if let (Error::OutOfMemory { .. }, Some(entry)) = (&*e, sh.streams.get(stream)) {
                entry.allocator.note_retry(false);
                (sh.stats.ooms).fetch_add(1, Ordering::Relaxed);
            }
            *e
        })
    }

    /// [`Plan::new`], handing the steps back where the spec is refused or the arena cannot be
    /// allocated, even after the device's caches went back: their kernels can still run as
    /// eager calls.
    pub(crate) fn build(
        vm: &dyn Host,
        spec: PlanSpec,
        at: Caller,
    ) -> std::result::Result<Plan, (Box<Error>, Option<Vec<Step>>)> {
        let layout = match Plan::lay_out(vm, &spec, at) {
            Ok(l) => l,
            Err(e) => return Err((Box::new(e), Some(spec.steps))),
        };
        // `lay_out` checked the stream.
        let entry = &vm.shared_state().streams[spec.stream.0 as usize];
        let arena = if layout.memory.arena > 0 {
            let device = entry.policy.device();
            let bytes = layout.memory.arena;
            let got = entry.allocator.allocate(bytes).or_else(|_| {
                // As an eager op's outputs would: what the device's caches keep goes back
                // first, and the retry counts in the engine's and the allocator's statistics.
                // A retry that succeeds counts here; one that fails counts where it is reported
                // (`Plan::new`), not where a promoted window runs eagerly instead.
                vm.empty_cache(device);
                let got = entry.allocator.allocate(bytes);
                if got.is_ok() {
                    entry.allocator.note_retry(true);
                    (vm.shared_state().stats.oom_retries).fetch_add(1, Ordering::Relaxed);
                }
                got
            });
            match got {
                Ok(a) => Some(a),
                Err(e) => {
                    let error = Error::OutOfMemory {
                        at,
                        op: "Plan::new".into(),
                        requested: e.requested,
                        in_use: e.in_use,
                        cached: e.cached,
                        capacity: e.capacity,
                    };
                    return Err((Box::new(error), Some(spec.steps)));
                }
            }
        } else {
            None
        };
        Plan::assemble(vm, spec, layout, arena).map_err(|e| (Box::new(e), None))
    }

    /// Checks `spec` and lays out its memory: the layout, the actors' wiring (for a plan run
    /// by actors) and the places where a step writes over its input.
    fn lay_out(vm: &dyn Host, spec: &PlanSpec, at: Caller) -> Result<Layout> {
        let sh = vm.shared_state();
        let bad = |message: String| Error::InvalidArgument {
            at,
            op: "Plan::new".into(),
            message,
        };
        let Some(entry) = sh.streams.get(spec.stream.0 as usize) else {
            return Err(bad(format!("unknown stream {}", spec.stream)));
        };
        if spec.actors.is_some() && vm.launcher_stream(entry.policy.device()).is_none() {
            return Err(bad(format!(
                "a plan run by actors launches on its device's lazy-job launcher stream, and \
                 {} has none (see `VmBuilder::lazy_launcher`)",
                entry.policy.device()
            )));
        }
        let mut lifetimes: Vec<Option<(usize, usize)>> = vec![None; spec.temps.len()];
        let (mut reads, mut writes) =
            (vec![false; spec.fixed.len()], vec![false; spec.fixed.len()]);
        let mut inputs_written = vec![false; spec.inputs];
        for (i, step) in spec.steps.iter().enumerate() {
            for (slots, written) in [(&step.inputs, false), (&step.outputs, true)] {
                for &s in slots {
                    let ok = match s {
                        Slot::Input(k) => {
                            if written && k < spec.inputs {
                                inputs_written[k] = true;
                            }
                            k < spec.inputs
                        }
                        Slot::Output(k) => k < spec.outputs,
                        Slot::Temp(k) => {
                            let live = lifetimes.get_mut(k);
                            if let Some(l) = live {
                                *l = Some(l.map_or((i, i), |(a, _)| (a, i)));
                            }
                            k < spec.temps.len()
                        }
                        Slot::Fixed(k) => {
                            if k < spec.fixed.len() {
                                if written {
                                    writes[k] = true;
                                } else {
                                    reads[k] = true;
                                }
                            }
                            k < spec.fixed.len()
                        }
                    };
                    if !ok {
                        return Err(bad(format!(
                            "step {i} (`{}`): {s:?} out of range",
                            step.name()
                        )));
                    }
                }
            }
        }
        // A temporary no step touches (a compiler merged its steps away) takes no memory.
        let sizes: Vec<usize> = (spec.temps.iter().zip(&lifetimes))
            .map(|(&n, l)| if l.is_some() { n } else { 0 })
            .collect();
        let lifetimes: Vec<(usize, usize)> =
            lifetimes.into_iter().map(|l| l.unwrap_or((0, 0))).collect();
        // By actors, each slot of each register has memory of its own: temporary `k` of slot
        // `s` is entry `s * temps + k`.
        let mut overwrites = Vec::new();
        let (wiring, memory) = match spec.actors {
            None => {
                overwrites = written_over(&spec.steps, &sizes, &lifetimes);
                let shares = overwrites.iter().map(|o| o.pair).collect();
                let m = MemoryLayout::pack_sharing(sizes, lifetimes, shares);
                overwrites.retain(|o| m.shares.contains(&o.pair));
                (None, m)
            }
            Some(a) => {
                let wiring = actors::Wiring::of(&spec.steps, spec.temps.len()).map_err(bad)?;
                let all = (0, spec.steps.len().max(1) - 1);
                let n = sizes.len() * a.slots();
                let sizes = sizes.iter().copied().cycle().take(n).collect();
                (Some(wiring), MemoryLayout::pack(sizes, vec![all; n]))
            }
        };
        debug_assert_eq!(memory.check(), Ok(()));
        Ok(Layout {
            memory,
            wiring,
            overwrites,
            inputs_written,
            reads,
            writes,
        })
    }

    /// The plan of `spec`, laid out as `layout`, its temporaries in `arena`.
    fn assemble(
        vm: &dyn Host,
        spec: PlanSpec,
        layout: Layout,
        arena: Option<crate::alloc::Allocation>,
    ) -> Result<Plan> {
        let Layout {
            memory,
            wiring,
            overwrites,
            inputs_written,
            reads,
            writes,
        } = layout;
        let entry = &vm.shared_state().streams[spec.stream.0 as usize];
        let temps = (memory.sizes.iter().enumerate())
            .map(|(k, &bytes)| {
                let b = vm.new_blob(bytes);
                if let Some(a) = &arena
                    && bytes > 0
                {
                    // SAFETY: `offsets[k] + bytes` lies inside the arena (`MemoryLayout::pack`),
                    // which the plan keeps alive as long as its temporaries; the layout gives
                    // temporaries live at once disjoint bytes, and runs are ordered by the token
                    // (by actors, every slot has bytes of its own, and a slot is written only
                    // once its readers have returned it).
                    unsafe { b.bind_memory(a.ptr().add(memory.offsets[k])) };
                }
                b
            })
            .collect::<Vec<Counted<Blob>>>();
        let mut steps = spec.steps;
        let runtime = match (spec.actors, wiring) {
            (Some(config), Some(w)) => {
                let place = actors::Place {
                    stream: spec.stream,
                    policy: entry.policy.clone(),
                    allocator: entry.allocator.clone(),
                    engine: Arc::downgrade(vm.shared_state()),
                };
                let t = spec.temps.len();
                let registers = (w.registers.iter().enumerate())
                    .map(|(r, (producer, readers, temp))| actors::Register {
                        producer: *producer,
                        consumers: (readers.iter())
                            .map(|&c| (c, w.consumes[c].iter().position(|&x| x == r).unwrap_or(0)))
                            .collect(),
                        temp: *temp,
                        blobs: temp.map_or_else(Vec::new, |k| {
                            (0..config.slots())
                                .map(|s| temps[s * t + k].clone())
                                .collect()
                        }),
                    })
                    .collect();
                let specs = (steps.iter_mut().zip(w.consumes).zip(w.produces))
                    .map(|((step, consumes), produces)| actors::ActorSpec {
                        kernel: step.move_kernel(),
                        inputs: step.inputs.clone(),
                        outputs: step.outputs.clone(),
                        depends: step.depends.clone(),
                        at: step.at,
                        consumes,
                        produces,
                    })
                    .collect();
                let rt = actors::Runtime::new(specs, registers, spec.fixed.clone(), place, config)
                    .map_err(|e| Error::spawn("eddy-actors", &e))?;
                Some(rt)
            }
            _ => None,
        };
        for b in &spec.fixed {
            b.hold();
        }
        let pick = |flags: &[bool]| {
            flags
                .iter()
                .enumerate()
                .filter(|f| *f.1)
                .map(|f| f.0)
                .collect()
        };
        Ok(Plan {
            inner: Arc::new(PlanInner {
                stream: spec.stream,
                steps: Mutex::new(steps),
                inputs: spec.inputs,
                outputs: spec.outputs,
                temps,
                inputs_written: pick(&inputs_written),
                fixed_reads: pick(&reads),
                fixed_writes: pick(&writes),
                fixed: spec.fixed,
                token: vm.new_blob(0),
                memory,
                overwrites,
                runtime,
                _arena: arena,
                release: vm.releaser(),
            }),
        })
    }

    /// [`launch_with`](Self::launch_with), each step computing with its stand-in in `kernels`
    /// where there is one, else with the kernel it has; the run's own errors (its outputs'
    /// memory) name `at`.
    pub(crate) fn launch_each(
        &self,
        vm: &dyn Host,
        inputs: &[Counted<Blob>],
        outputs: &[Counted<Blob>],
        kernels: Option<Vec<Option<StandIn>>>,
        at: Caller,
    ) -> Result<()> {
        let p = &self.inner;
        if vm.capturing_here() {
            // Launched now, the run would happen once, not at the capture's replays.
            return Err(Error::InvalidArgument {
                at,
                op: "plan".into(),
                message: "a plan launched inside a capture (a graph being compiled) would run \
                          now, once, not at each replay of the capture"
                    .into(),
            });
        }
        if let Some(k) = &kernels
            && (k.len() != self.len() || p.runtime.is_some())
        {
            return Err(Error::InvalidArgument {
                at: Caller::here(),
                op: "plan".into(),
                message: format!(
                    "{} kernels for a plan of {} steps{}",
                    k.len(),
                    self.len(),
                    if p.runtime.is_some() {
                        " run by actors"
                    } else {
                        ""
                    }
                ),
            });
        }
        if let Some(k) = &kernels
            && let Err(message) = self.admits(|i| k[i].as_ref().map(|s| &*s.kernel))
        {
            return Err(Error::InvalidArgument {
                at: Caller::here(),
                op: "plan".into(),
                message,
            });
        }
        if inputs.len() != p.inputs || outputs.len() != p.outputs {
            return Err(Error::InvalidArgument {
                at: Caller::here(),
                op: "plan".into(),
                message: format!(
                    "the plan runs on {} inputs and {} outputs, not {} and {}",
                    p.inputs,
                    p.outputs,
                    inputs.len(),
                    outputs.len()
                ),
            });
        }
        let mut ins: Blobs = inputs.iter().cloned().collect();
        ins.extend(p.fixed_reads.iter().map(|&k| p.fixed[k].clone()));
        let mut outs: Blobs = outputs.iter().cloned().collect();
        outs.extend(p.fixed_writes.iter().map(|&k| p.fixed[k].clone()));
        outs.extend(p.inputs_written.iter().map(|&k| inputs[k].clone()));
        if p.runtime.is_none() {
            outs.push(p.token.clone());
        }
        let run = PlanRun {
            plan: p.clone(),
            inputs: ins,
            outputs: outs,
            kernels,
            at,
        };
        // On the device's lazy-job launcher where the engine has one, else where the steps
        // were captured.
        let device = vm.shared_state().streams[p.stream.0 as usize]
            .policy
            .device();
        vm.run_plan(vm.launcher_stream(device).unwrap_or(p.stream), run)
    }

    /// Whether `kernel(i)` may stand in for each step `i` that the memory plan has write an
    /// output over an input ([`Kernel::may_alias`]), where it is some; else why not.
    pub(crate) fn admits<'k>(
        &self,
        kernel: impl Fn(usize) -> Option<&'k dyn Kernel>,
    ) -> std::result::Result<(), String> {
        for o in &self.inner.overwrites {
            let Some(k) = kernel(o.step) else { continue };
            if let Some(j) = o.inputs.iter().find(|&&j| !k.may_alias(o.output, j)) {
                return Err(format!(
                    "the kernel for step {} (`{}`) may not write its output {} over its input \
                     {j}, which the plan's memory puts in one place",
                    o.step,
                    k.name(),
                    o.output
                ));
            }
        }
        Ok(())
    }

    /// The inputs (by position) that a run writes.
    pub(crate) fn written_inputs(&self) -> &[usize] {
        &self.inner.inputs_written
    }

    /// Where the temporaries live.
    pub fn memory(&self) -> &MemoryLayout {
        &self.inner.memory
    }

    /// The number of steps.
    pub fn len(&self) -> usize {
        self.inner.steps.lock().len()
    }

    /// Whether it has no steps.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Calls `f` with the steps, in order.
    pub fn with_steps<R>(&self, f: impl FnOnce(&[Step]) -> R) -> R {
        f(&self.inner.steps.lock())
    }
}
