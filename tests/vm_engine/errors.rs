//! Errors (F5, F6, F8): a failing kernel poisons its dependents and surfaces at `sync`, a panic
//! is caught and the engine survives, `sync` returns the first root error, a successful
//! overwrite clears poison, released, foreign and unknown operands are refused at submission,
//! and a panicking host access panics its caller at once.

use crate::common::watchdog;
use crate::{CPU, log_now, vm3};
use eddy::vm::stream::Exec;
use eddy::vm::testing::{Fail, Gate, Log, Noop, Panic, Record};
use eddy::vm::{Error, StreamId, VmBuilder};
use std::time::Duration;

#[test]
fn failing_kernel_poisons_dependents_and_surfaces_at_sync() {
    watchdog(30, || {
        let vm = VmBuilder::new().build().unwrap();
        let (x, y, z, other) = (
            vm.new_blob(8),
            vm.new_blob(8),
            vm.new_blob(8),
            vm.new_blob(8),
        );
        let log = Log::default();
        vm.run(CPU, Fail::new(vec![], vec![x.clone()])).unwrap();
        vm.run(CPU, Record::new(1, vec![x.clone()], vec![y.clone()], &log))
            .unwrap(); // dependent
        vm.run(CPU, Record::new(2, vec![y.clone()], vec![z.clone()], &log))
            .unwrap(); // chain
        vm.run(CPU, Record::new(3, vec![], vec![other.clone()], &log))
            .unwrap(); // independent
        let e = vm.sync().unwrap_err();
        assert_eq!(e.op(), Some("fail_op"), "{e}");
        assert!(matches!(e, Error::KernelFailed { instr_id, .. } if instr_id > 0));
        assert_eq!(
            log_now(&log),
            vec![3],
            "dependents are skipped, independent work runs"
        );
        // Reading a poisoned blob returns the root error; reading a good one works.
        let ez = vm.read_blob(&z, |_| ()).unwrap_err();
        assert_eq!(ez.op(), Some("fail_op"));
        vm.read_blob(&other, |b| b.len()).unwrap();
        assert_eq!(
            vm.errors().len(),
            1,
            "the failure is reported once, not per dependent"
        );
        // Errors are sticky until cleared; the engine keeps working.
        assert!(vm.sync().is_err());
        vm.clear_errors();
        for i in 0..1000 {
            vm.run(
                CPU,
                Record::new(100 + i, vec![other.clone()], vec![other.clone()], &log),
            )
            .unwrap();
        }
        vm.sync().unwrap();
        assert_eq!(log_now(&log).len(), 1001);
    });
}

#[test]
fn panicking_kernel_is_caught_and_engine_survives() {
    watchdog(30, || {
        for exec in [Exec::Inline, Exec::Worker] {
            let vm = VmBuilder::new().cpu_exec(exec).build().unwrap();
            let (x, y) = (vm.new_blob(8), vm.new_blob(8));
            let log = Log::default();
            vm.run(CPU, Panic::new(vec![x.clone()])).unwrap();
            vm.run(CPU, Record::new(1, vec![x.clone()], vec![], &log))
                .unwrap();
            vm.run(CPU, Record::new(2, vec![], vec![y.clone()], &log))
                .unwrap();
            let e = vm.sync().unwrap_err();
            match &e {
                Error::KernelPanic { op, message, .. } => {
                    assert_eq!(op, "panic_op");
                    assert!(message.contains("injected panic"), "{message}");
                }
                other => panic!("expected KernelPanic, got {other}"),
            }
            assert_eq!(log_now(&log), vec![2]);
            vm.clear_errors();
            for i in 0..1000 {
                vm.run(
                    CPU,
                    Record::new(10 + i, vec![y.clone()], vec![y.clone()], &log),
                )
                .unwrap();
            }
            vm.sync().unwrap();
            assert_eq!(log_now(&log).len(), 1001);
        }
    });
}

#[test]
fn sync_returns_the_first_root_error_in_submission_order() {
    watchdog(30, || {
        let (vm, s1, _) = vm3(VmBuilder::new());
        let (a, b) = (vm.new_blob(8), vm.new_blob(8));
        let gate = Gate::new();
        let g = gate.clone();
        // The first failure (in submission order) finishes last.
        vm.run(
            s1,
            Record::new(0, vec![], vec![a.clone()], &Log::default()).with_body(move || g.wait()),
        )
        .unwrap();
        vm.run(s1, Panic::new(vec![a.clone()])).unwrap();
        vm.run(CPU, Fail::new(vec![], vec![b.clone()])).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        gate.open();
        let e = vm.sync().unwrap_err();
        assert_eq!(e.op(), Some("panic_op"), "{e}");
        let all = vm.errors();
        assert_eq!(
            all.iter().map(|e| e.op().unwrap()).collect::<Vec<_>>(),
            vec!["panic_op", "fail_op"]
        );
    });
}

#[test]
fn a_successful_overwrite_clears_poison() {
    watchdog(30, || {
        let vm = VmBuilder::new().build().unwrap();
        let x = vm.new_blob(8);
        vm.run(CPU, Fail::new(vec![], vec![x.clone()])).unwrap();
        assert!(vm.read_blob(&x, |_| ()).is_err());
        vm.run(CPU, Noop::new(vec![], vec![x.clone()])).unwrap();
        vm.read_blob(&x, |_| ()).unwrap();
    });
}

#[test]
fn released_foreign_and_unknown_operands_are_rejected_at_submission() {
    watchdog(30, || {
        let vm = VmBuilder::new().build().unwrap();
        let other = VmBuilder::new().build().unwrap();
        // Bigger than a blob keeps inside, so its release is an instruction.
        let x = vm.new_blob(1024);
        vm.run(CPU, Noop::new(vec![], vec![x.clone()])).unwrap();
        vm.sync().unwrap();
        let before = vm.stats();
        vm.release(&x).unwrap();
        let e = vm.run(CPU, Noop::new(vec![x.clone()], vec![])).unwrap_err();
        assert!(
            matches!(&e, Error::TensorReleased { at: _, op, id } if op == "noop" && *id == x.id()),
            "{e}"
        );
        assert!(matches!(vm.release(&x), Err(Error::TensorReleased { .. })));
        let f = other.new_blob(8);
        assert!(matches!(
            vm.run(CPU, Noop::new(vec![f], vec![])),
            Err(Error::ForeignBlob { .. })
        ));
        assert!(matches!(
            vm.run(StreamId(9), Noop::new(vec![], vec![])),
            Err(Error::UnknownStream { stream: 9, .. })
        ));
        vm.sync().unwrap();
        // Only the release went in (and the syncs' barriers).
        assert_eq!(
            vm.stats().erased - before.erased,
            2,
            "only the release and the last barrier went in"
        );
    });
}

/// A panic in the closure of `read_blob` or `write_blob` reaches the caller as a panic at
/// once; it used to leave the caller waiting out the deadlock timeout.
#[test]
fn a_panicking_host_access_panics_the_caller_at_once() {
    watchdog(30, || {
        let vm = VmBuilder::new()
            .timeout(Duration::from_secs(20))
            .build()
            .unwrap();
        let b = vm.new_blob(4);
        vm.write_blob(&b, |m| m.fill(1)).unwrap();
        let t = std::time::Instant::now();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            vm.read_blob(&b, |m| assert_eq!(m[0], 2, "the value read"))
        }));
        let p = r.expect_err("the closure's assert panics the caller");
        let msg = p.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.contains("the value read"), "{msg}");
        let w = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            vm.write_blob(&b, |_| panic!("a write panics"))
        }));
        assert!(w.is_err());
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        // The engine goes on.
        assert_eq!(vm.read_blob(&b, |m| m.len()).unwrap(), 4);
        vm.sync().unwrap();
    });
}
