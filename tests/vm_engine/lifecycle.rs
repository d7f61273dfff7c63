//! Waits and lifecycle (F14, F16, F17, F18): a wait without progress reports a deadlock,
//! dropping the engine drains its work, `shutdown_timeout` gives up on a stuck worker, a kernel
//! that waits gets `ReentrantWait`, back-pressure stops a fast submitter, long chains use
//! constant stack, and huge durations mean forever.

use crate::common::{eventually, watchdog};
use crate::{CPU, CountingOp, vm3};
use eddy::vm::stream::Exec;
use eddy::vm::stream::async_device::AsyncDevice;
use eddy::vm::testing::{DeviceOp, Gate, Log, Noop, Record};
use eddy::vm::{Blob, Error, VmBuilder};
use eddy_vm::Counted;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

#[test]
fn a_wait_that_sees_no_progress_reports_a_deadlock_with_a_dump() {
    watchdog(30, || {
        let dev = AsyncDevice::new(0);
        let mut b = VmBuilder::new().timeout(Duration::from_millis(300));
        let q = b.add_stream(Arc::new(dev.stream("fake-compute")));
        let vm = b.build().unwrap();
        let w = vm.waker();
        dev.set_waker(w);
        let x = vm.new_blob(8);
        vm.run(q, DeviceOp::new(vec![], vec![x.clone()], || {}))
            .unwrap();
        // The host read waits for a device event that the test never lets complete.
        let mut asked = 0;
        let dump = loop {
            match vm.read_blob(&x, |_| ()).unwrap_err() {
                // The scheduler thread has 500 ms to answer the dump request, which a loaded
                // machine can exceed: then the wait times out again and asks again.
                Error::Deadlock { dump, .. } if dump.contains("did not answer") && asked < 20 => {
                    asked += 1;
                }
                Error::Deadlock { dump, .. } => break dump,
                other => panic!("expected Deadlock, got {other}"),
            }
        };
        assert!(
            dump.contains("record_event") && dump.contains("device event"),
            "{dump}"
        );
        // Once the device runs, the engine proceeds. With a 300 ms timeout, a scheduler thread
        // stalled that long by a loaded machine also reads as a deadlock: only one that lasts
        // fails the test.
        dev.run_all();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match vm.read_blob(&x, |_| ()) {
                Ok(()) => break,
                Err(Error::Deadlock { .. }) if Instant::now() < deadline => {}
                Err(e) => panic!("the engine did not proceed once the device ran: {e}"),
            }
        }
    });
}

#[test]
fn dropping_the_engine_drains_100k_instructions_in_flight() {
    watchdog(120, || {
        let drops = Arc::new(AtomicUsize::new(0));
        let computes = Arc::new(AtomicUsize::new(0));
        {
            // Water marks above 100,000, so that all of them can be in flight at the drop.
            let vm = VmBuilder::new()
                .water_marks(200_000, 100_000)
                .build()
                .unwrap();
            let xs: Vec<Counted<Blob>> = (0..16).map(|_| vm.new_blob(16)).collect();
            for i in 0..100_000usize {
                let op = CountingOp {
                    ins: vec![],
                    outs: vec![xs[i % 16].clone()],
                    drops: drops.clone(),
                    computes: computes.clone(),
                };
                vm.run(CPU, op).unwrap();
            }
        } // dropped with work in flight
        assert_eq!(computes.load(Ordering::SeqCst), 100_000);
        assert_eq!(drops.load(Ordering::SeqCst), 100_000);
    });
}

#[test]
fn shutdown_timeout_gives_up_on_a_stuck_worker() {
    watchdog(30, || {
        let (vm, s1, _) = vm3(VmBuilder::new());
        let gate = Gate::new();
        vm.run(s1, gate.hold(vec![vm.new_blob(0)])).unwrap();
        let t0 = std::time::Instant::now();
        let e = vm.shutdown_timeout(Duration::from_millis(100)).unwrap_err();
        assert!(
            matches!(e, Error::ShutdownTimeout { pending } if pending >= 1),
            "{e}"
        );
        // Far below the watchdog, so that a shutdown that waits for the stuck worker still
        // fails, and far above the 100 ms asked for, which a loaded machine can stretch.
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
        // Submissions after shutdown are refused.
        assert!(matches!(
            vm.run(CPU, Noop::new(vec![], vec![])),
            Err(Error::EngineShutDown)
        ));
        gate.open(); // let the worker finish so the engine's threads exit
        vm.shutdown_timeout(Duration::from_secs(10)).unwrap();
    });
}

#[test]
fn a_kernel_that_waits_on_the_engine_gets_reentrant_wait() {
    watchdog(30, || {
        for b in [
            VmBuilder::new(),
            VmBuilder::new().cpu_exec(Exec::Worker),
            VmBuilder::new().sync_mode(true),
        ] {
            let vm = b.build().unwrap();
            let got = Arc::new(parking_lot::Mutex::new(None));
            let (v2, g2) = (vm.clone(), got.clone());
            vm.run(
                CPU,
                Record::new(1, vec![], vec![], &Log::default())
                    .with_body(move || *g2.lock() = Some(v2.sync())),
            )
            .unwrap();
            vm.sync().unwrap();
            let r = got.lock().take().expect("the kernel ran");
            assert!(matches!(r, Err(Error::ReentrantWait { .. })), "{r:?}");
        }
    });
}

/// A kernel may submit work on every engine, the synchronous one included: the pass that runs
/// it takes the new instructions in after it returns, and they run in submission order.
#[test]
fn a_kernel_that_submits_work_gets_it_run_in_order() {
    watchdog(30, || {
        for b in [
            VmBuilder::new(),
            VmBuilder::new().cpu_exec(Exec::Worker),
            VmBuilder::new().sync_mode(true),
        ] {
            let vm = b.build().unwrap();
            let log = Log::default();
            let x = vm.new_blob(8);
            let (v2, l2, x2) = (vm.clone(), log.clone(), x.clone());
            vm.run(
                CPU,
                Record::new(1, vec![], vec![x.clone()], &log).with_body(move || {
                    v2.run(CPU, Record::new(2, vec![x2.clone()], vec![], &l2))
                        .unwrap();
                    v2.run(CPU, Record::new(3, vec![], vec![x2.clone()], &l2))
                        .unwrap();
                }),
            )
            .unwrap();
            vm.run(CPU, Record::new(4, vec![x.clone()], vec![], &log))
                .unwrap();
            // A sync waits for what was received before it: on a threaded engine the kernel
            // may submit 2 and 3 only after this thread's sync queued its barrier (a loaded
            // machine, or a sync that runs the passes itself), so sync until they ran too.
            let deadline = Instant::now() + Duration::from_secs(20);
            vm.sync().unwrap();
            while log.lock().len() < 4 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
                vm.sync().unwrap();
            }
            let order = log.lock().clone();
            assert_eq!(order.len(), 4, "{order:?}");
            assert_eq!(order[0], 1, "{order:?}");
            let (p2, p3) = (
                order.iter().position(|&t| t == 2).unwrap(),
                order.iter().position(|&t| t == 3).unwrap(),
            );
            assert!(p2 < p3, "submitted in that order: {order:?}");
        }
    });
}

#[test]
fn back_pressure_blocks_a_fast_submitter_at_the_high_water_mark() {
    watchdog(30, || {
        let (vm, s1, _) = vm3(VmBuilder::new().water_marks(100, 50));
        let gate = Gate::new();
        let x = vm.new_blob(8);
        vm.run(s1, gate.hold(vec![x.clone()])).unwrap();
        let submitted = Arc::new(AtomicUsize::new(0));
        let (v2, s2, x2) = (vm.clone(), submitted.clone(), x.clone());
        let t = std::thread::spawn(move || {
            for _ in 0..1000 {
                v2.run(s1, Noop::new(vec![x2.clone()], vec![])).unwrap();
                s2.fetch_add(1, Ordering::SeqCst);
            }
        });
        // Until the submitter has reached the mark (on a loaded machine it may not even have
        // started after a fixed sleep, and the check below would prove nothing), then a while
        // longer, in which it must not get past it.
        assert!(
            eventually(20_000, || submitted.load(Ordering::SeqCst) >= 50),
            "the submitter made no progress: {}",
            submitted.load(Ordering::SeqCst)
        );
        std::thread::sleep(Duration::from_millis(100));
        let n = submitted.load(Ordering::SeqCst);
        assert!(n <= 101, "submitter ran past the high-water mark: {n}");
        gate.open();
        t.join().unwrap();
        vm.sync().unwrap();
        assert_eq!(vm.stats().in_flight, 0);
    });
}

#[test]
fn long_chains_use_constant_stack() {
    // A 100 k chain built, run and dropped from a thread with a 256 KiB stack.
    let h = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(|| {
            let vm = VmBuilder::new().build().unwrap();
            let x = vm.new_blob(8);
            for _ in 0..100_000 {
                vm.run(CPU, Noop::new(vec![x.clone()], vec![x.clone()]))
                    .unwrap();
            }
            vm.sync().unwrap();
            vm.stats().erased
        })
        .unwrap();
    assert!(h.join().unwrap() >= 100_000);
}

/// `Duration::MAX` as a timeout or spin means "forever", not an overflow panic on the
/// scheduler thread; a zero timeout, which would fail every wait, is refused.
#[test]
fn huge_durations_mean_forever_and_a_zero_timeout_is_refused() {
    watchdog(30, || {
        let vm = VmBuilder::new()
            .timeout(Duration::MAX)
            .spin(Duration::MAX)
            .capacity(Some(1 << 20))
            .build()
            .unwrap();
        let x = vm.new_blob(64);
        vm.run(CPU, Noop::new(vec![], vec![x.clone()])).unwrap();
        vm.sync().unwrap();
        // The OOM path computes a deadline from the timeout.
        let big = vm.new_blob(2 << 20);
        vm.run(CPU, Noop::new(vec![], vec![big.clone()])).unwrap();
        assert!(vm.sync().unwrap_err().is_oom());
        vm.clear_errors();
        vm.run(CPU, Noop::new(vec![x.clone()], vec![])).unwrap();
        vm.sync().unwrap();
        vm.shutdown_timeout(Duration::MAX).unwrap();
        let e = VmBuilder::new()
            .timeout(Duration::ZERO)
            .build()
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
    });
}
