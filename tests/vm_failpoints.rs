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
