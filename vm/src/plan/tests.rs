//! Plans run through their arenas, with temporaries shared by lifetime and in place.

use super::*;
use crate::engine::Timed;
use crate::engine::Vm;
use crate::error::{Error, Result};
use crate::testing::{AddByte, AddByteOver};

/// A chain whose kernels may write over their inputs runs in one place, with the values
/// of separate places; kernels that may not are refused as stand-ins, with a typed error.
#[test]
fn steps_written_over_their_inputs_share_one_place() {
    let vm = Vm::builder().sync_mode(true).build().unwrap();
    let chain = |over: bool| -> Vec<Step> {
        let k = |n| -> Box<dyn Kernel> {
            if over {
                Box::new(AddByteOver(n))
            } else {
                Box::new(AddByte(n))
            }
        };
        vec![
            Step::new(k(1), vec![Slot::Input(0)], vec![Slot::Temp(0)]),
            Step::new(k(2), vec![Slot::Temp(0)], vec![Slot::Temp(1)]),
            Step::new(k(3), vec![Slot::Temp(1)], vec![Slot::Temp(2)]),
            Step::new(k(4), vec![Slot::Temp(2)], vec![Slot::Output(0)]),
        ]
    };
    let mut values = Vec::new();
    for over in [true, false] {
        let spec = PlanSpec::new(StreamId::CPU, chain(over), 1, 1, vec![5; 3], vec![]);
        let plan = Plan::new(&vm, spec).unwrap();
        let m = plan.memory();
        m.check().unwrap();
        let places = if over { 1 } else { 2 };
        assert_eq!(m.arena, places * ARENA_ALIGN, "over: {over}");
        assert_eq!(m.shares.len(), if over { 2 } else { 0 });
        let (x, y) = (vm.new_blob(5), vm.new_blob(5));
        vm.write_blob(&x, |b| b.copy_from_slice(&[0, 1, 2, 3, 4]))
            .unwrap();
        plan.launch(&vm, std::slice::from_ref(&x), std::slice::from_ref(&y))
            .unwrap();
        values.push(vm.read_blob(&y, |b| b.to_vec()).unwrap());
        if over {
            let plain = (1..=4).map(|n| Box::new(AddByte(n)) as Box<dyn Kernel>);
            let e = plan
                .launch_with(&vm, &[x], &[y], Some(plain.collect()))
                .unwrap_err();
            assert!(
                matches!(e, Error::InvalidArgument { .. })
                    && e.to_string().contains("step 1 (`add_byte`) may not write"),
                "{e}"
            );
        }
    }
    assert_eq!(values[0], [10, 11, 12, 13, 14]);
    assert_eq!(values[0], values[1]);
}

/// Two chains of steps through temporaries, run twice: the arena's bytes are shared by
/// temporaries never live at once, and each run's values are right (Miri checks the
/// borrowed operand copies and the arena pointers).
#[test]
fn a_plan_runs_its_steps_through_the_arena() {
    let vm = Vm::builder().sync_mode(true).build().unwrap();
    let fixed = vm.new_blob(3);
    vm.write_blob(&fixed, |b| b.fill(100)).unwrap();
    let steps = vec![
        Step::new(
            Box::new(AddByte(1)),
            vec![Slot::Input(0)],
            vec![Slot::Temp(0)],
        ),
        Step::new(
            Box::new(AddByte(2)),
            vec![Slot::Temp(0)],
            vec![Slot::Temp(1)],
        ),
        Step::new(
            Box::new(AddByte(3)),
            vec![Slot::Temp(1)],
            vec![Slot::Temp(2)],
        ),
        Step::new(
            Box::new(AddByte(0)),
            vec![Slot::Temp(2)],
            vec![Slot::Output(0)],
        ),
        Step::new(
            Box::new(AddByte(1)),
            vec![Slot::Fixed(0)],
            vec![Slot::Output(1)],
        ),
    ];
    let spec = PlanSpec::new(StreamId::CPU, steps, 1, 2, vec![3, 3, 3], vec![fixed]);
    let plan = Plan::new(&vm, spec).unwrap();
    let m = plan.memory();
    m.check().unwrap();
    assert_eq!(
        m.offsets[0], m.offsets[2],
        "temporaries 0 and 2 are never live at once"
    );
    assert_eq!(m.arena, 2 * ARENA_ALIGN);
    for run in 0..2u8 {
        let (x, y, z) = (vm.new_blob(3), vm.new_blob(3), vm.new_blob(3));
        vm.write_blob(&x, move |b| b.fill(run * 10)).unwrap();
        plan.launch(&vm, &[x], &[y.clone(), z.clone()]).unwrap();
        assert_eq!(vm.read_blob(&y, |b| b.to_vec()).unwrap(), [run * 10 + 6; 3]);
        assert_eq!(vm.read_blob(&z, |b| b.to_vec()).unwrap(), [101; 3]);
    }
    assert!(
        plan.launch(&vm, &[], &[]).is_err(),
        "the wrong number of blobs"
    );
}

/// Writes the bytewise sum of its inputs plus a constant into each output; it reads every
/// input in full before it writes, so it may write over any of them when `over` says so.
struct SumBytes {
    add: u8,
    over: bool,
}

impl Kernel for SumBytes {
    fn name(&self) -> &str {
        "sum_bytes"
    }
    fn compute(
        &mut self,
        inputs: &[Counted<Blob>],
        outputs: &[Counted<Blob>],
        _ctx: &mut crate::instruction::ComputeCtx<'_>,
    ) -> Result<()> {
        let n = outputs.iter().map(|o| o.bytes()).max().unwrap_or(0);
        let mut acc = vec![self.add; n];
        for i in inputs {
            // SAFETY: the engine gives a kernel its inputs to read; the slice is gone before
            // any output is borrowed.
            let bytes = unsafe { i.bytes_ref() };
            for (a, x) in acc.iter_mut().zip(bytes) {
                *a = a.wrapping_add(*x);
            }
        }
        for o in outputs {
            // SAFETY: the engine gives a kernel its outputs to write, alone.
            let out = unsafe { o.bytes_mut() };
            let len = out.len();
            out.copy_from_slice(&acc[..len]);
        }
        Ok(())
    }
    fn may_alias(&self, _output: usize, _input: usize) -> bool {
        self.over
    }
}

mod random {
    use super::*;
    use proptest::prelude::*;

    /// A random program: step `k` reads one or two earlier values (the input or earlier
    /// steps' temporaries) and writes temporary `k`; a last step reads two of them into the
    /// output.
    fn program() -> impl Strategy<Value = Vec<(usize, Option<usize>)>> {
        (1usize..14).prop_flat_map(|n| {
            (0..=n)
                .map(|k| (0..k + 1, proptest::option::of(0..k + 1)))
                .collect::<Vec<_>>()
        })
    }

    /// The output's bytes, and the memory layout, of `program` as a plan whose kernels may
    /// (`over`) or may not write over their inputs. Value 0 is the input; value `k + 1` is
    /// step `k`'s temporary.
    fn run(vm: &Vm, program: &[(usize, Option<usize>)], over: bool) -> (Vec<u8>, MemoryLayout) {
        let n = program.len() - 1;
        let slot = |v: usize| {
            if v == 0 {
                Slot::Input(0)
            } else {
                Slot::Temp(v - 1)
            }
        };
        let steps = (program.iter().enumerate())
            .map(|(k, &(a, b))| {
                let ins = std::iter::once(slot(a)).chain(b.map(slot)).collect();
                let out = if k == n {
                    Slot::Output(0)
                } else {
                    Slot::Temp(k)
                };
                let kernel = SumBytes {
                    add: k as u8 + 1,
                    over,
                };
                Step::new(Box::new(kernel), ins, vec![out])
            })
            .collect();
        let spec = PlanSpec::new(StreamId::CPU, steps, 1, 1, vec![8; n], vec![]);
        let plan = Plan::new(vm, spec).unwrap();
        let (x, y) = (vm.new_blob(8), vm.new_blob(8));
        vm.write_blob(&x, |b| b.copy_from_slice(&[3, 1, 4, 1, 5, 9, 2, 6]))
            .unwrap();
        plan.launch(vm, &[x], std::slice::from_ref(&y)).unwrap();
        let out = vm.read_blob(&y, |b| b.to_vec()).unwrap();
        (out, plan.memory().clone())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Values written over the inputs their steps consume give the values of separate
        /// places, the layout passes its check, and each pair it shares meets as it must.
        #[test]
        fn random_programs_written_in_place_compute_the_same_bytes(program in program()) {
            let vm = Vm::builder().sync_mode(true).build().unwrap();
            let (apart, plain) = run(&vm, &program, false);
            let (shared, m) = run(&vm, &program, true);
            prop_assert_eq!(&shared, &apart);
            prop_assert!(plain.shares.is_empty());
            m.check().map_err(TestCaseError::fail)?;
            for &(a, b) in &m.shares {
                prop_assert_eq!(m.offsets[a], m.offsets[b]);
                prop_assert_eq!(m.lifetimes[a].1, m.lifetimes[b].0);
            }
        }
    }
}

/// Automatic promotion reuses a window's plan with the next windows' kernels only where they
/// allow what its memory layout relies on: kernels of the same name that may not write over
/// their inputs get a plan of their own, with the same values.
#[test]
fn a_promoted_window_whose_kernels_may_not_write_in_place_gets_its_own_plan() {
    let vm = (Vm::builder().promotion(true))
        .promotion_measured(false)
        .build()
        .unwrap();
    let x = vm.new_blob(8);
    vm.write_blob(&x, |b| b.copy_from_slice(&[0, 1, 2, 3, 4, 5, 6, 7]))
        .unwrap();
    // x → t0 → t1 → y, with t0 and t1 released in the window: temporaries of its plan.
    let window = |over: bool| -> Vec<u8> {
        let (t0, t1, y) = (vm.new_blob(8), vm.new_blob(8), vm.new_blob(8));
        for (add, i, o) in [(1, &x, &t0), (2, &t0, &t1), (3, &t1, &y)] {
            let k = SumBytes { add, over };
            vm.run_op(StreamId::CPU, k, &[i], &[o], false).unwrap();
        }
        vm.release(&t0).unwrap();
        vm.release(&t1).unwrap();
        vm.read_blob(&y, |b| b.to_vec()).unwrap()
    };
    let expect: Vec<u8> = (6..14).collect();
    for _ in 0..4 {
        assert_eq!(window(true), expect);
    }
    let before = vm.promotion_stats().unwrap();
    assert!(before.plan_runs >= 1, "promoted: {before:?}");
    for _ in 0..2 {
        assert_eq!(window(false), expect);
    }
    let after = vm.promotion_stats().unwrap();
    assert_eq!(
        after.compiled,
        before.compiled + 1,
        "{before:?} → {after:?}"
    );
    assert_eq!(
        after.plan_runs,
        before.plan_runs + 2,
        "{before:?} → {after:?}"
    );
    assert_eq!(after.fallbacks, before.fallbacks);
}

/// What `f` returns, run on a thread of its own, or a failure if it takes a minute: a test
/// of a hang must fail, not hang.
fn finishes<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(f());
    });
    finished
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("finishes within a minute")
}

/// The sum of `b`'s bytes, read from the host.
fn byte_sum(vm: &Vm, b: &Counted<Blob>) -> u32 {
    vm.read_blob(b, |b| b.iter().map(|&x| u32::from(x)).sum())
        .unwrap()
}

/// The sync that ends a promoted window holds the scheduler while it submits the window's
/// run and the releases the window held: more of them than the back-pressure mark must not
/// wait for a scheduler that only this thread can run.
#[test]
fn a_promoted_window_ending_above_the_back_pressure_mark_does_not_hang() {
    let (read, stats) = finishes(|| {
        let vm = Vm::builder()
            .promotion(true)
            .promotion_measured(false)
            .water_marks(8, 4)
            .build()
            .unwrap();
        let mut read = Vec::new();
        for _ in 0..5 {
            // Larger than a blob's inline bytes: releasing them frees memory through the engine.
            let xs: Vec<_> = (0..20).map(|_| vm.new_blob(1024)).collect();
            for x in &xs {
                vm.write_blob(x, |b| b.fill(1)).unwrap();
            }
            // Twenty calls on blobs from before the window, then twenty releases of them,
            // held with the calls.
            let ys: Vec<_> = (0..20).map(|_| vm.new_blob(1024)).collect();
            for (x, y) in xs.iter().zip(&ys) {
                let k = SumBytes {
                    add: 1,
                    over: false,
                };
                vm.run_op(StreamId::CPU, k, &[x], &[y], false).unwrap();
            }
            for x in &xs {
                vm.release(x).unwrap();
            }
            read.push(byte_sum(&vm, &ys[19]));
            for y in &ys {
                vm.release(y).unwrap();
            }
        }
        vm.sync().unwrap();
        (read, vm.promotion_stats().unwrap())
    });
    assert_eq!(read, vec![2 * 1024; 5]);
    assert!(stats.plan_runs >= 2, "promoted: {stats:?}");
}

/// Promotion on a synchronous engine, whose submissions run the passes themselves: the sync
/// that ends a promoted window runs its plan without holding the scheduler first.
#[test]
fn a_synchronous_engine_promotes_windows_too() {
    let (read, stats) = finishes(|| {
        let vm = Vm::builder()
            .promotion(true)
            .promotion_measured(false)
            .sync_mode(true)
            .build()
            .unwrap();
        let x = vm.new_blob(1024);
        vm.write_blob(&x, |b| b.fill(1)).unwrap();
        let mut read = Vec::new();
        for _ in 0..5 {
            let (t, y) = (vm.new_blob(1024), vm.new_blob(1024));
            for (i, o) in [(&x, &t), (&t, &y)] {
                let k = SumBytes {
                    add: 1,
                    over: false,
                };
                vm.run_op(StreamId::CPU, k, &[i], &[o], false).unwrap();
            }
            vm.release(&t).unwrap();
            read.push(byte_sum(&vm, &y));
        }
        (read, vm.promotion_stats().unwrap())
    });
    assert_eq!(read, vec![3 * 1024; 5]);
    assert!(stats.plan_runs >= 2, "promoted: {stats:?}");
}

/// An engine with measured promotion on `clock`, and a blob of the bytes 0 to 7.
fn measured(clock: fn(Timed) -> std::time::Duration) -> (Vm, Counted<Blob>) {
    let vm = Vm::builder().promotion(true).build().unwrap();
    let promotion = vm.inner.promotion.as_ref().expect("promotion is on");
    promotion.set_clock(clock);
    let x = vm.new_blob(8);
    vm.write_blob(&x, |b| b.copy_from_slice(&[0, 1, 2, 3, 4, 5, 6, 7]))
        .unwrap();
    (vm, x)
}

/// Eager windows take 100 µs, plan runs 200, held calls nothing.
fn clock_plans_lose(t: Timed) -> std::time::Duration {
    us(match t {
        Timed::Eager => 100,
        Timed::Plan => 200,
        Timed::HeldCalls => 0,
    })
}

/// Eager windows take 100 µs, plan runs 50, but held calls alone 150.
fn clock_held_calls_lose(t: Timed) -> std::time::Duration {
    us(match t {
        Timed::Eager => 100,
        Timed::Plan => 50,
        Timed::HeldCalls => 150,
    })
}

/// `n` microseconds.
fn us(n: u64) -> std::time::Duration {
    std::time::Duration::from_micros(n)
}

/// Measured promotion, on a clock that times every plan run at twice an eager window: a
/// kind of window is run as a plan three times (after the run that compiled its plan), then
/// eagerly for 8 windows, tried once, then eagerly for 16, and so on; every window has the
/// eager values whichever way it runs.
#[test]
fn a_kind_of_window_whose_plan_runs_lose_runs_eagerly_for_a_while() {
    let (vm, x) = measured(clock_plans_lose);
    let window = || -> Vec<u8> {
        let (t, y) = (vm.new_blob(8), vm.new_blob(8));
        for (add, i, o) in [(1, &x, &t), (2, &t, &y)] {
            let k = SumBytes { add, over: false };
            vm.run_op(StreamId::CPU, k, &[i], &[o], false).unwrap();
        }
        vm.release(&t).unwrap();
        vm.read_blob(&y, |b| b.to_vec()).unwrap()
    };
    let expect: Vec<u8> = (3..11).collect();
    let mut as_plans = Vec::new();
    let mut runs = 0;
    for n in 1..=40 {
        assert_eq!(window(), expect, "window {n}");
        let s = vm.promotion_stats().unwrap();
        if s.plan_runs > runs {
            as_plans.push(n);
            runs = s.plan_runs;
        }
    }
    // 3 compiles; 4–6 are timed and lose; 7–14 eager; 15 loses; 16–31 eager; 32 loses.
    assert_eq!(as_plans, [3, 4, 5, 6, 15, 32]);
    let s = vm.promotion_stats().unwrap();
    assert_eq!((s.compiled, s.backed_off, s.fallbacks), (1, 3, 0), "{s:?}");
    assert_eq!(s.windows, 40);
    // The eager windows between tries (7–14, 16–31, 33–40) were not noted.
    assert_eq!(s.quiet, 8 + 16 + 8, "{s:?}");
}

/// Whether calls go to promotion's hook now.
fn noting(vm: &Vm) -> bool {
    vm.shared()
        .divert_flags
        .load(std::sync::atomic::Ordering::Relaxed)
        & crate::shared::PROMOTION_ON
        != 0
}

/// Once a kind of window runs eagerly for a while, a window that begins like it is not noted
/// past its first call, whatever its other calls are, and computes what eager execution
/// computes; its own host access ends that (counting it as the kind), and so does another
/// thread's (counting nothing).
#[test]
fn a_window_like_a_kind_that_runs_eagerly_for_now_is_not_noted() {
    let (vm, x) = measured(clock_plans_lose);
    let sum = |add, i: &Counted<Blob>, o: &Counted<Blob>| {
        let k = SumBytes { add, over: false };
        vm.run_op(StreamId::CPU, k, &[i], &[o], false).unwrap();
    };
    // Adds 1, then each of `then`, to `x`.
    let window = |then: &[u8], read: &dyn Fn(&Counted<Blob>) -> Vec<u8>| -> Vec<u8> {
        let mut t = vm.new_blob(8);
        sum(1, &x, &t);
        let quiet = !noting(&vm);
        for &add in then {
            let y = vm.new_blob(8);
            sum(add, &t, &y);
            vm.release(&t).unwrap();
            t = y;
        }
        assert_eq!(noting(&vm), !quiet, "calls after the first");
        let v = read(&t);
        assert!(noting(&vm), "after the window's host access");
        v
    };
    let own = |b: &Counted<Blob>| vm.read_blob(b, |b| b.to_vec()).unwrap();
    let expect = |adds: u8| -> Vec<u8> { (adds..adds + 8).collect() };
    while vm.promotion_stats().unwrap().backed_off == 0 {
        assert_eq!(window(&[2], &own), expect(3));
    }
    let s = vm.promotion_stats().unwrap();
    assert_eq!(s.quiet, 0);
    // Other calls after a like first call: eager values, unnoted, counted as the kind.
    assert_eq!(window(&[2, 4, 8], &own), expect(15));
    assert_eq!(vm.promotion_stats().unwrap().quiet, 1);
    // Another thread's host access ends the quiet window; the owner's then counts nothing.
    let other = |b: &Counted<Blob>| {
        std::thread::scope(|s| s.spawn(|| vm.sync().unwrap()).join().unwrap());
        own(b)
    };
    assert_eq!(window(&[2], &other), expect(3));
    let now = vm.promotion_stats().unwrap();
    assert_eq!(now.quiet, 1, "{now:?}");
    assert_eq!(
        now.windows,
        s.windows + 1,
        "the quiet window counts, not the one ended for it"
    );
    // A quiet window that begins while another thread captures leaves that capture its
    // calls, cheap ones included (which the fast path would run at once), and runs its own.
    let (capturing, quiet) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
    let (t, taken) = std::thread::scope(|s| {
        let other = s.spawn(|| {
            let z = vm.new_blob(8);
            let k = SumBytes {
                add: 5,
                over: false,
            };
            let (r, ops) = (vm.capture(|| {
                capturing.wait();
                quiet.wait();
                vm.run_op(StreamId::CPU, k, &[&x], &[&z], true)
            }))
            .unwrap();
            r.unwrap();
            ops.len()
        });
        capturing.wait();
        let t = vm.new_blob(8);
        sum(1, &x, &t);
        assert!(!noting(&vm));
        quiet.wait();
        (t, other.join().unwrap())
    });
    assert_eq!(taken, 1, "the capture took its call");
    let y = vm.new_blob(8);
    sum(2, &t, &y);
    vm.release(&t).unwrap();
    assert_eq!(own(&y), expect(3));
    assert_eq!(vm.promotion_stats().unwrap().quiet, 2);
    // The kind is tried again once its wait is over, and its plan runs give eager values.
    while vm.promotion_stats().unwrap().plan_runs == s.plan_runs {
        assert_eq!(window(&[2], &own), expect(3));
    }
}

/// Measured promotion, where a held window's calls alone take longer than an eager window:
/// the window runs eagerly at its end, no plan is compiled, and the kind waits as after lost
/// plan runs (8 windows, then 16); the values are eager ones throughout.
#[test]
fn held_calls_slower_than_an_eager_window_run_eagerly_uncompiled() {
    let (vm, x) = measured(clock_held_calls_lose);
    let expect: Vec<u8> = (3..11).collect();
    let mut lost_at = Vec::new();
    for n in 1..=30 {
        let (t, y) = (vm.new_blob(8), vm.new_blob(8));
        for (add, i, o) in [(1, &x, &t), (2, &t, &y)] {
            let k = SumBytes { add, over: false };
            vm.run_op(StreamId::CPU, k, &[i], &[o], false).unwrap();
        }
        vm.release(&t).unwrap();
        let before = vm.promotion_stats().unwrap().backed_off;
        assert_eq!(
            vm.read_blob(&y, |b| b.to_vec()).unwrap(),
            expect,
            "window {n}"
        );
        if vm.promotion_stats().unwrap().backed_off > before {
            lost_at.push(n);
        }
    }
    // Held at 3, 12 and 29: eagerly for the 8 and the 16 windows between.
    assert_eq!(lost_at, [3, 12, 29]);
    let s = vm.promotion_stats().unwrap();
    assert_eq!((s.compiled, s.plan_runs, s.fallbacks), (0, 0, 0), "{s:?}");
    assert_eq!(s.quiet, 8 + 16 + 1, "{s:?}");
}

/// A promoted window's plan made through a pass is reused with each later window's kernels
/// in the steps the pass kept as they were; where the pass rebuilt a step around a kernel
/// that does not describe itself, the pass runs on every window instead, since that step
/// would keep the first window's kernel. The values are the eager ones either way.
#[test]
fn a_pass_that_rebuilds_steps_runs_on_every_window() {
    use crate::plan::PlanPass;
    use std::sync::Arc;
    let kept: PlanPass = Arc::new(|_device, steps: Vec<Step>, _bytes| steps);
    let rebuilt: PlanPass = Arc::new(|_device, steps: Vec<Step>, _bytes| {
        (steps.into_iter())
            .map(|s| {
                let (i, o) = (s.inputs().to_vec(), s.outputs().to_vec());
                Step::new(s.into_kernel(), i, o)
            })
            .collect()
    });
    for (pass, reused) in [(kept, true), (rebuilt, false)] {
        let vm = (Vm::builder().promotion(true))
            .promotion_measured(false)
            .build()
            .unwrap();
        assert!(vm.set_plan_pass(pass));
        let x = vm.new_blob(4);
        vm.write_blob(&x, |b| b.fill(10)).unwrap();
        // Window `k`: x → t → y, adding k + 1 and then k + 2.
        for k in 0..8u8 {
            let (t, y) = (vm.new_blob(4), vm.new_blob(4));
            vm.run_op(StreamId::CPU, AddByte(k + 1), &[&x], &[&t], false)
                .unwrap();
            vm.run_op(StreamId::CPU, AddByte(k + 2), &[&t], &[&y], false)
                .unwrap();
            vm.release(&t).unwrap();
            assert_eq!(vm.read_blob(&y, |b| b.to_vec()).unwrap(), [13 + 2 * k; 4]);
        }
        let s = vm.promotion_stats().unwrap();
        assert!(s.plan_runs >= 4, "{s:?}");
        let passes = if reused { 1 } else { s.plan_runs };
        assert_eq!(s.passes, passes, "reused: {reused}, {s:?}");
    }
}

/// A held window's call that fails its checks (a released operand) fails as it would
/// eagerly; the calls held before it run first, the rest of the window runs as usual, and
/// nothing runs with another call's operands.
#[test]
fn a_held_call_that_fails_its_checks_ends_the_holding() {
    let vm = (Vm::builder().promotion(true))
        .promotion_measured(false)
        .build()
        .unwrap();
    let x = vm.new_blob(4);
    vm.write_blob(&x, |b| b.fill(10)).unwrap();
    // Window: w → t (+1), x → u (+2), u → y (+3); `w` is released in the held window.
    let window = |w: &Counted<Blob>| {
        let (t, u, y) = (vm.new_blob(4), vm.new_blob(4), vm.new_blob(4));
        let first = vm.run_op(StreamId::CPU, AddByte(1), &[w], &[&t], false);
        vm.run_op(StreamId::CPU, AddByte(2), &[&x], &[&u], false)
            .unwrap();
        vm.run_op(StreamId::CPU, AddByte(3), &[&u], &[&y], false)
            .unwrap();
        (first, vm.read_blob(&y, |b| b.to_vec()).unwrap())
    };
    for _ in 0..3 {
        let w = vm.new_blob(4);
        vm.write_blob(&w, |b| b.fill(0)).unwrap();
        let (first, y) = window(&w);
        assert!(first.is_ok());
        assert_eq!(y, [15; 4]);
    }
    let before = vm.promotion_stats().unwrap();
    assert!(before.plan_runs >= 1, "{before:?}");
    let w = vm.new_blob(4);
    vm.write_blob(&w, |b| b.fill(0)).unwrap();
    vm.release(&w).unwrap();
    let (first, y) = window(&w);
    assert!(
        matches!(first, Err(Error::TensorReleased { .. })),
        "{first:?}"
    );
    assert_eq!(y, [15; 4]);
    let after = vm.promotion_stats().unwrap();
    assert_eq!(after.plan_runs, before.plan_runs, "{after:?}");
    assert_eq!(after.fallbacks, before.fallbacks + 1, "{after:?}");
}

/// Promotion holds `w → t → y` windows after two of them; in the held one, `between` runs
/// after the first call. Returns the window's `y` and what `between` returned.
fn held_window_with<T>(between: impl Fn(&Vm, &Counted<Blob>, &Counted<Blob>) -> T) -> (Vec<u8>, T) {
    let vm = (Vm::builder().promotion(true))
        .promotion_measured(false)
        .build()
        .unwrap();
    let mut last = None;
    for k in 0..3 {
        let w = vm.new_blob(4);
        vm.write_blob(&w, |b| b.fill(10)).unwrap();
        let (t, y) = (vm.new_blob(4), vm.new_blob(4));
        vm.run_op(StreamId::CPU, AddByte(1), &[&w], &[&t], false)
            .unwrap();
        let r = (k == 2).then(|| between(&vm, &w, &t));
        vm.run_op(StreamId::CPU, AddByte(2), &[&t], &[&y], false)
            .unwrap();
        vm.release(&t).unwrap();
        last = Some((vm.read_blob(&y, |b| b.to_vec()).unwrap(), r));
        if k < 2 {
            vm.release(&w).unwrap();
        }
    }
    let s = vm.promotion_stats().unwrap();
    assert!(s.fallbacks >= 1, "the third window was held: {s:?}");
    let (y, r) = last.unwrap();
    (y, r.unwrap())
}

/// Another thread's release of a blob that a held call reads comes after that call, as it
/// would without promotion.
#[test]
fn another_threads_release_lets_the_held_calls_run_first() {
    let (y, released) = held_window_with(|vm, w, _| {
        std::thread::scope(|s| s.spawn(|| vm.release(w)).join().unwrap())
    });
    assert!(released.is_ok(), "{released:?}");
    assert_eq!(y, [13; 4]);
}

/// Instructions handed over through a builder while calls are held come after them.
#[test]
fn a_builders_instructions_come_after_the_held_calls() {
    use crate::instruction::OpCall;
    let (y, z) = held_window_with(|vm, _, t| {
        let z = vm.new_blob(4);
        let mut b = vm.instructions();
        let call = OpCall::new(
            AddByte(5),
            smallvec::smallvec![t.clone()],
            smallvec::smallvec![z.clone()],
        );
        b.push(StreamId::CPU, call).unwrap();
        b.submit().unwrap();
        vm.read_blob(&z, |b| b.to_vec()).unwrap()
    });
    assert_eq!((y, z), (vec![13; 4], vec![16; 4]));
}
