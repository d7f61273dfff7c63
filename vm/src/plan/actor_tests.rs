//! Tests of plans run by actors: values, errors, back-pressure counted per register, and
//! dropping a plan with runs in flight.

use super::*;
use crate::engine::Vm;
use crate::error::{Error, Result};
use crate::instruction::ComputeCtx;
use crate::testing::{AddByte, Gate};
use std::sync::atomic::{AtomicUsize, Ordering};

/// `AddByte`, counting its acts in `count` and the most runs in flight between the first and
/// the last stage in `most`, blocking at `gate` (where given) before it computes.
struct Stage {
    add: u8,
    role: Role,
    gate: Option<Arc<Gate>>,
    counts: Arc<Counts>,
}

#[derive(Clone, Copy, PartialEq)]
enum Role {
    First,
    Middle,
    Last,
}

#[derive(Default)]
struct Counts {
    started: AtomicUsize,
    ended: AtomicUsize,
    most: AtomicUsize,
}

impl Kernel for Stage {
    fn name(&self) -> &str {
        "stage"
    }
    fn compute(
        &mut self,
        ins: &[Counted<Blob>],
        outs: &[Counted<Blob>],
        ctx: &mut ComputeCtx<'_>,
    ) -> Result<()> {
        let c = &self.counts;
        if self.role == Role::First {
            let started = c.started.fetch_add(1, Ordering::SeqCst) + 1;
            let in_flight = started - c.ended.load(Ordering::SeqCst);
            c.most.fetch_max(in_flight, Ordering::SeqCst);
        }
        if let Some(g) = &self.gate {
            g.wait();
        }
        AddByte(self.add).compute(ins, outs, ctx)?;
        if self.role == Role::Last {
            c.ended.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

/// A chain of `m` stages, input → t0 → … → output, each adding 1, the last behind `gate`.
fn chain(vm: &Vm, m: usize, actors: Actors, gate: Option<Arc<Gate>>) -> (Plan, Arc<Counts>) {
    let counts = Arc::new(Counts::default());
    let steps = (0..m)
        .map(|i| {
            let role = match i {
                0 => Role::First,
                i if i == m - 1 => Role::Last,
                _ => Role::Middle,
            };
            let input = if i == 0 {
                Slot::Input(0)
            } else {
                Slot::Temp(i - 1)
            };
            let output = if i == m - 1 {
                Slot::Output(0)
            } else {
                Slot::Temp(i)
            };
            let stage = Stage {
                add: 1,
                role,
                gate: if role == Role::Last {
                    gate.clone()
                } else {
                    None
                },
                counts: counts.clone(),
            };
            Step::new(Box::new(stage), vec![input], vec![output])
        })
        .collect();
    let spec =
        PlanSpec::new(StreamId::CPU, steps, 1, 1, vec![4; m - 1], vec![]).with_actors(actors);
    (Plan::new(vm, spec).unwrap(), counts)
}

#[test]
fn a_plan_run_by_actors_computes_what_the_steps_compute() {
    let vm = Vm::builder().lazy_launcher(true).build().unwrap();
    let (plan, _) = chain(&vm, 5, Actors::new(2, 2), None);
    assert_eq!(
        plan.memory().arena,
        2 * 4 * ARENA_ALIGN,
        "two slots of four registers"
    );
    let runs: Vec<_> = (0..12u8)
        .map(|k| {
            let (x, y) = (vm.new_blob(4), vm.new_blob(4));
            vm.write_blob(&x, move |b| b.fill(k * 10)).unwrap();
            plan.launch(&vm, &[x], std::slice::from_ref(&y)).unwrap();
            (k, y)
        })
        .collect();
    for (k, y) in runs {
        assert_eq!(vm.read_blob(&y, |b| b.to_vec()).unwrap(), [k * 10 + 5; 4]);
    }
}

/// With the last stage held, the first acts exactly as often as the registers between them
/// have slots, and never more runs are in flight; released, every run ends.
#[test]
fn registers_bound_the_runs_in_flight() {
    for slots in [1, 2] {
        let vm = Vm::builder().lazy_launcher(true).build().unwrap();
        let gate = Gate::new();
        let m = 4;
        let (plan, counts) = chain(&vm, m, Actors::new(slots, 2), Some(gate.clone()));
        let outs: Vec<Counted<Blob>> = (0..20)
            .map(|_| {
                let (x, y) = (vm.new_blob(4), vm.new_blob(4));
                plan.launch(&vm, &[x], std::slice::from_ref(&y)).unwrap();
                y
            })
            .collect();
        let bound = slots * (m - 1);
        // The last stage holds run 0: everything before it fills its slots, then stops.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while counts.started.load(Ordering::SeqCst) < bound {
            assert!(
                std::time::Instant::now() < deadline,
                "the first stage stalled"
            );
            std::thread::yield_now();
        }
        gate.open();
        for y in &outs {
            assert_eq!(vm.read_blob(y, |b| b.to_vec()).unwrap(), [4; 4]);
        }
        assert_eq!(counts.ended.load(Ordering::SeqCst), 20);
        assert_eq!(
            counts.most.load(Ordering::SeqCst),
            bound,
            "{slots} slot(s): at most {bound} runs in flight, and that many when held"
        );
    }
}

/// A failed step fails only the outputs that depend on it, in its run only.
#[test]
fn a_failed_actor_fails_only_its_dependents_in_its_run() {
    let vm = Vm::builder().lazy_launcher(true).build().unwrap();
    // in0 → t0 → out0 and in1 → out1; the first step fails on an input byte of 99.
    struct FailOn99;
    impl Kernel for FailOn99 {
        fn name(&self) -> &str {
            "fail_on_99"
        }
        fn compute(
            &mut self,
            ins: &[Counted<Blob>],
            outs: &[Counted<Blob>],
            ctx: &mut ComputeCtx<'_>,
        ) -> Result<()> {
            // SAFETY: the runtime gives a kernel its inputs to read.
            if unsafe { ins[0].bytes_ref()[0] } == 99 {
                return Err(Error::kernel("fail_on_99", "byte 99"));
            }
            AddByte(1).compute(ins, outs, ctx)
        }
    }
    let steps = vec![
        Step::new(
            Box::new(FailOn99),
            vec![Slot::Input(0)],
            vec![Slot::Temp(0)],
        ),
        Step::new(
            Box::new(AddByte(1)),
            vec![Slot::Temp(0)],
            vec![Slot::Output(0)],
        ),
        Step::new(
            Box::new(AddByte(2)),
            vec![Slot::Input(1)],
            vec![Slot::Output(1)],
        ),
    ];
    let spec =
        PlanSpec::new(StreamId::CPU, steps, 2, 2, vec![1], vec![]).with_actors(Actors::new(2, 2));
    let plan = Plan::new(&vm, spec).unwrap();
    let run = |first: u8| {
        let (a, b, y, z) = (
            vm.new_blob(1),
            vm.new_blob(1),
            vm.new_blob(1),
            vm.new_blob(1),
        );
        vm.write_blob(&a, move |m| m[0] = first).unwrap();
        vm.write_blob(&b, |m| m[0] = 5).unwrap();
        plan.launch(&vm, &[a, b], &[y.clone(), z.clone()]).unwrap();
        (y, z)
    };
    let (y, z) = run(99);
    let (y2, z2) = run(1);
    assert_eq!(vm.read_blob(&z, |m| m[0]).unwrap(), 7);
    let e = vm.read_blob(&y, |m| m[0]).unwrap_err();
    assert!(e.to_string().contains("byte 99"), "{e}");
    assert_eq!(
        vm.read_blob(&y2, |m| m[0]).unwrap(),
        3,
        "the next run is not failed"
    );
    assert_eq!(vm.read_blob(&z2, |m| m[0]).unwrap(), 7);
    assert_eq!(vm.errors().len(), 1, "the engine records the failure once");
}

/// Dropping the plan with runs in flight: they end, with their values, and the runtime's
/// threads stop.
#[test]
fn dropping_a_plan_with_runs_in_flight_finishes_them() {
    let vm = Vm::builder().lazy_launcher(true).build().unwrap();
    let gate = Gate::new();
    let (plan, counts) = chain(&vm, 3, Actors::new(1, 2), Some(gate.clone()));
    let outs: Vec<Counted<Blob>> = (0..6)
        .map(|_| {
            let (x, y) = (vm.new_blob(4), vm.new_blob(4));
            plan.launch(&vm, &[x], std::slice::from_ref(&y)).unwrap();
            y
        })
        .collect();
    drop(plan);
    gate.open();
    for y in &outs {
        assert_eq!(vm.read_blob(y, |b| b.to_vec()).unwrap(), [3; 4]);
    }
    vm.sync().unwrap();
    assert_eq!(counts.ended.load(Ordering::SeqCst), 6);
}

#[test]
fn a_temporary_with_two_writers_cannot_run_by_actors() {
    let vm = Vm::builder().lazy_launcher(true).build().unwrap();
    let steps = vec![
        Step::new(
            Box::new(AddByte(1)),
            vec![Slot::Input(0)],
            vec![Slot::Temp(0)],
        ),
        Step::new(
            Box::new(AddByte(1)),
            vec![Slot::Temp(0)],
            vec![Slot::Temp(0)],
        ),
        Step::new(
            Box::new(AddByte(1)),
            vec![Slot::Temp(0)],
            vec![Slot::Output(0)],
        ),
    ];
    let spec =
        PlanSpec::new(StreamId::CPU, steps, 1, 1, vec![1], vec![]).with_actors(Actors::new(1, 1));
    let e = Plan::new(&vm, spec).err().expect("refused");
    assert!(e.to_string().contains("one producer"), "{e}");
}

#[test]
fn actors_need_a_launcher_stream() {
    let vm = Vm::builder().build().unwrap();
    let steps = vec![Step::new(
        Box::new(AddByte(1)),
        vec![Slot::Input(0)],
        vec![Slot::Output(0)],
    )];
    let spec =
        PlanSpec::new(StreamId::CPU, steps, 1, 1, vec![], vec![]).with_actors(Actors::new(1, 1));
    let e = Plan::new(&vm, spec).err().expect("refused");
    assert!(e.to_string().contains("lazy_launcher"), "{e}");
}
