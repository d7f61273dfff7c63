//! Fault injection (failure modes F19, F9, book: reliability): fail points inside the scheduler loop, the dispatch
//! step and the allocator, enabled one at a time. An engine thread that fails moves the engine
//! to `EngineFailed`: every waiter wakes with it, new work is refused, `Drop` returns.
//! Each test holds a `FailScenario`, which serialises the tests of this binary.

mod common;

use common::watchdog;
use eddy::vm::testing::{Log, Noop, Record};
use eddy::vm::{Error, StreamId, VmBuilder};
use std::time::Duration;

const CPU: StreamId = StreamId::CPU;

#[test]
fn a_failing_engine_thread_fails_waiters_refuses_work_and_still_drops() {
    for (fp, sync_mode) in [
        ("vm::pass", false),
        ("vm::dispatch", false),
        ("vm::pass", true),
        ("vm::dispatch", true),
    ] {
        let scenario = fail::FailScenario::setup();
        eddy::vm::testing::arm_failpoints(true);
        watchdog(30, move || {
            let vm = VmBuilder::new()
                .sync_mode(sync_mode)
                .timeout(Duration::from_secs(20))
                .build()
                .unwrap();
            let x = vm.new_blob(64);
            let log = Log::default();
            vm.run(CPU, Record::new(1, vec![], vec![x.clone()], &log))
                .unwrap();
            vm.sync().unwrap();
            fail::cfg(fp, "panic(injected engine fault)").unwrap();
            // Whichever of these sees the failure first, the sync must report it (not hang).
            let r = vm.run(CPU, Record::new(2, vec![x.clone()], vec![x.clone()], &log));
            let e = r.and_then(|()| vm.sync()).unwrap_err();
            assert!(
                matches!(&e, Error::EngineFailed { cause } if cause.contains("injected engine fault")),
                "{fp}: {e}"
            );
            fail::cfg(fp, "off").unwrap();
            assert!(
                matches!(
                    vm.run(CPU, Noop::new(vec![], vec![])),
                    Err(Error::EngineFailed { .. })
                ),
                "{fp}: new work refused"
            );
            assert!(matches!(
                vm.read_blob(&x, |_| ()),
                Err(Error::EngineFailed { .. })
            ));
            drop(vm); // returns
        });
        scenario.teardown();
    }
}

#[test]
fn an_allocation_that_fails_once_is_retried_invisibly() {
    let scenario = fail::FailScenario::setup();
    eddy::vm::testing::arm_failpoints(true);
    watchdog(30, || {
        let vm = VmBuilder::new().build().unwrap();
        let x = vm.new_blob(4096);
        fail::cfg("vm::alloc", "1*return").unwrap();
        vm.run(CPU, Noop::new(vec![], vec![x.clone()])).unwrap();
        vm.sync().unwrap();
        assert_eq!(vm.stats().oom_retries, 1);
        assert_eq!(vm.stats().ooms, 0);
        // Failing both attempts reports the OOM for that op only.
        fail::cfg("vm::alloc", "2*return").unwrap();
        let y = vm.new_blob(4096);
        vm.run(CPU, Noop::new(vec![], vec![y.clone()])).unwrap();
        let e = vm.sync().unwrap_err();
        assert!(e.is_oom(), "{e}");
        vm.clear_errors();
        let z = vm.new_blob(4096);
        vm.run(CPU, Noop::new(vec![], vec![z])).unwrap();
        vm.sync().unwrap();
    });
    scenario.teardown();
}

/// Automatic promotion: a window whose plan finds no room for its arena (the allocation
/// fails, and again once the caches went back) runs its calls eagerly after all, merged or
/// not, with the values of an engine without the switch and no error; the kind waits a while,
/// and its plan is compiled once there is room.
#[test]
fn a_promoted_window_without_room_for_its_arena_runs_eagerly() {
    use eddy::tensor::{DType, Tensor, with_engine};
    let scenario = fail::FailScenario::setup();
    eddy::vm::testing::arm_failpoints(true);
    watchdog(120, || {
        // Window `k`, read: a merged chain, a product and a merged tail, whose two
        // intermediates live in the plan's arena. `full` stands for the device's state.
        let run = |vm: &eddy::vm::Vm, full: &dyn Fn(usize)| {
            with_engine(vm, || {
                let x = Tensor::linspace(-2.0, 2.0, 128, DType::F32).unwrap();
                let x = x.reshape([8, 16]).unwrap();
                let m = Tensor::linspace(-1.0, 1.0, 256, DType::F32).unwrap();
                let m = m.reshape([16, 16]).unwrap();
                (0..24)
                    .map(|k| {
                        full(k);
                        let a = x.mul_scalar(0.25 + k as f64 / 32.0).unwrap().exp().unwrap();
                        let y = a.matmul(&m).unwrap().tanh().unwrap().add(&x).unwrap();
                        common::bits(&y)
                    })
                    .collect::<Vec<_>>()
            })
        };
        let eager = run(&VmBuilder::new().build().unwrap(), &|_| ());
        let vm = VmBuilder::new()
            .promotion(true)
            .promotion_measured(false)
            .build()
            .unwrap();
        let stats = || vm.promotion_stats().unwrap();
        let full = |k: usize| {
            vm.sync().unwrap();
            // The third window is the first held, its plan compiled at its end: both
            // attempts at the arena fail, and nothing else allocates before it.
            if k == 2 {
                assert_eq!(stats().compiled, 0, "{:?}", stats());
                fail::cfg("vm::alloc", "2*return").unwrap();
            }
            if k == 3 {
                fail::cfg("vm::alloc", "off").unwrap();
                let s = stats();
                assert_eq!((s.compiled, s.plan_runs), (0, 0), "{s:?}");
                assert_eq!((s.fallbacks, s.backed_off), (1, 1), "{s:?}");
            }
        };
        assert_eq!(run(&vm, &full), eager);
        let s = stats();
        assert_eq!(s.compiled, 1, "compiled once there was room: {s:?}");
        assert!(s.plan_runs >= 4 && s.merged >= 2, "{s:?}");
        assert_eq!(vm.stats().ooms, 0, "the eager calls found room");
    });
    scenario.teardown();
}
