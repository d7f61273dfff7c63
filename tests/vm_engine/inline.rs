//! Work run on the calling thread: the synchronous mode, a waiting thread that runs the passes
//! while the scheduler sleeps, cheap instructions run by their submitter, and `Vm::run_op`.

use crate::common::{eventually, watchdog};
use crate::{CPU, log_now, vm3};
use eddy::vm::testing::{Fail, Gate, Log, Noop, Panic, Record};
use eddy::vm::{Blob, Error, StreamId, Vm, VmBuilder};
use eddy_vm::Counted;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

#[test]
fn synchronous_mode_runs_on_the_caller_in_program_order() {
    watchdog(30, || {
        let (vm, s1, _) = vm3(VmBuilder::new().sync_mode(true));
        let x = vm.new_blob(8);
        let log = Log::default();
        let me = std::thread::current().id();
        let l = log.clone();
        vm.run(
            s1,
            Record::new(1, vec![], vec![x.clone()], &log)
                .with_body(move || assert_eq!(std::thread::current().id(), me)),
        )
        .unwrap();
        // Already done when `run` returns.
        assert_eq!(log_now(&l), vec![1]);
        vm.run(CPU, Fail::new(vec![x.clone()], vec![x.clone()]))
            .unwrap();
        assert!(vm.sync().is_err());
    });
}

/// A thread that waits on an engine whose scheduler sleeps runs the passes itself: with a zero
/// spin the scheduler thread sleeps as soon as it is idle, so after each pause the waiting
/// thread usually takes the scheduler before the thread woken by the submissions does; once
/// it holds the scheduler, `sync` queues its barrier there and keeps it (CI once lost all 50
/// races under load when `sync` let go to push its barrier). Order and results are
/// those of the scheduler thread; a failing kernel run there poisons as anywhere else; and a
/// panic of the engine itself there (not of a kernel) is covered in `vm_failpoints`.
#[test]
#[cfg_attr(
    miri,
    ignore = "needs the scheduler thread to fall asleep in real time"
)]
fn a_waiting_thread_runs_the_passes_while_the_scheduler_sleeps() {
    watchdog(60, || {
        let vm = VmBuilder::new()
            .spin(Duration::ZERO)
            .trace(true)
            .build()
            .unwrap();
        let log = Log::default();
        let x = vm.new_blob(8);
        let me = std::thread::current().name().unwrap_or("user").to_string();
        let ran_here = || vm.trace_events().iter().any(|e| e.thread == me);
        // Whether this thread or the scheduler thread woken by the submissions takes the
        // scheduler first is a race, which a loaded machine can make this thread lose many
        // times in a row: at least 50 rounds, then more, 50 at a time, until an instruction
        // ran here. A waiting thread that never runs the passes still fails, at the deadline.
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut rounds = 0u64;
        while rounds < 50
            || ((!rounds.is_multiple_of(50) || !ran_here()) && Instant::now() < deadline)
        {
            let round = rounds;
            rounds += 1;
            std::thread::sleep(Duration::from_millis(2));
            vm.run(CPU, Record::new(2 * round, vec![], vec![x.clone()], &log))
                .unwrap();
            vm.run(
                CPU,
                Record::new(2 * round + 1, vec![x.clone()], vec![], &log),
            )
            .unwrap();
            vm.sync().unwrap();
            // The barrier queued by a waiting thread that holds the scheduler comes after
            // everything received before it, still in the pending stack or not.
            assert_eq!(
                log.lock().len() as u64,
                2 * round + 2,
                "sync waited for round {round}"
            );
        }
        assert_eq!(
            std::mem::take(&mut *log.lock()),
            (0..2 * rounds).collect::<Vec<u64>>(),
            "program order"
        );
        assert!(
            ran_here(),
            "no instruction of {rounds} rounds ran on the waiting thread {me:?}"
        );
        // A failing kernel run by the waiting thread poisons its output and surfaces at sync.
        std::thread::sleep(Duration::from_millis(2));
        vm.run(CPU, Fail::new(vec![], vec![x.clone()])).unwrap();
        let e = vm.sync().unwrap_err();
        assert_eq!(e.op(), Some("fail_op"), "{e}");
        assert!(x.is_poisoned());
        vm.clear_errors();
        vm.run(CPU, Noop::new(vec![], vec![x.clone()])).unwrap();
        vm.sync().unwrap();
        assert!(!x.is_poisoned(), "overwritten by a successful writer");
    });
}

/// Once cheap work is queued (here: behind a gate), a loop of cheap ops goes back to running
/// them at once on the submitting thread: a submitter that finds the scheduler free, or whose
/// pass over cheap work ends within its short spin, runs the queued work itself, then its own.
/// Without that, every op found the engine busy because of the one before, and a loop could
/// stay queued for good, at two to five times the cost per op. (That trap's onset is random,
/// so this fails only in some runs without the catch-up; `engine.rs`'s unit tests pin the
/// mechanism itself deterministically.)
#[test]
#[cfg_attr(miri, ignore = "real-time scheduling")]
fn a_loop_of_cheap_ops_returns_to_running_them_at_once_after_a_queue() {
    use eddy::vm::testing::Cheap;
    watchdog(60, || {
        let vm = VmBuilder::new().build().unwrap();
        let (log, x) = (Log::default(), vm.new_blob(8));
        let gate = Gate::new();
        vm.run(CPU, gate.hold(vec![x.clone()])).unwrap();
        for tag in 0..100 {
            let op = Cheap(Record::new(tag, vec![x.clone()], vec![x.clone()], &log));
            vm.run(CPU, op).unwrap();
        }
        gate.open();
        let (n, before) = (100_000, vm.stats().inlined);
        for _ in 0..n {
            vm.run(CPU, Cheap(Noop::new(vec![x.clone()], vec![x.clone()])))
                .unwrap();
        }
        vm.sync().unwrap();
        assert_eq!(*log.lock(), (0..100).collect::<Vec<_>>(), "in order");
        let inlined = vm.stats().inlined - before;
        assert!(
            inlined * 2 >= n,
            "only {inlined} of {n} cheap ops ran at once after the queue drained"
        );
    });
}

/// A cheap instruction submitted to an idle engine runs before `run` returns, on the
/// submitting thread, with the same errors, poison and reentrancy rules as on the scheduler;
/// one submitted while earlier work is live is queued behind it.
#[test]
#[cfg_attr(
    miri,
    ignore = "needs the scheduler thread to fall asleep in real time"
)]
fn an_idle_engine_runs_a_cheap_instruction_on_the_submitting_thread() {
    use eddy::vm::testing::Cheap;
    watchdog(60, || {
        let vm = VmBuilder::new().trace(true).build().unwrap();
        let me = std::thread::current().name().unwrap_or("user").to_string();
        let log = Log::default();
        let x = vm.new_blob(8);
        // The scheduler thread may still hold the engine for a moment after a sync (a loaded
        // machine); then the instruction is queued instead, and we try again once it has run.
        // After one run at once nothing wakes the scheduler thread, so what follows runs at
        // once too.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            vm.sync().unwrap();
            log.lock().clear();
            let before = vm.stats().inlined;
            vm.run(CPU, Cheap(Record::new(1, vec![], vec![x.clone()], &log)))
                .unwrap();
            if vm.stats().inlined == before + 1 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the idle engine never ran a cheap instruction at once"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(log_now(&log), vec![1], "ran before `run` returned");
        assert!(x.is_allocated(), "prepared");
        let ev = vm.trace_events();
        assert_eq!(ev.last().map(|e| e.thread.as_str()), Some(me.as_str()));

        // Live work ahead of it: queued, and run in order after it.
        let (vm2, s1, _) = vm3(VmBuilder::new());
        let y = vm2.new_blob(8);
        let gate = Gate::new();
        let g = gate.clone();
        vm2.run(
            s1,
            Record::new(2, vec![], vec![y.clone()], &log).with_body(move || g.wait()),
        )
        .unwrap();
        vm2.run(CPU, Cheap(Record::new(3, vec![y.clone()], vec![], &log)))
            .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(log_now(&log), vec![1], "ran ahead of the writer it reads");
        gate.open();
        vm2.sync().unwrap();
        assert_eq!(log_now(&log), vec![1, 2, 3]);
        assert_eq!(vm2.stats().inlined, 0);

        // A failure poisons at once and surfaces at sync; a dependent is skipped.
        vm.run(CPU, Cheap(Fail::new(vec![], vec![x.clone()])))
            .unwrap();
        assert!(x.is_poisoned());
        vm.run(CPU, Cheap(Record::new(4, vec![x.clone()], vec![], &log)))
            .unwrap();
        let e = vm.sync().unwrap_err();
        assert_eq!(e.op(), Some("fail_op"), "{e}");
        assert_eq!(log_now(&log), vec![1, 2, 3], "the dependent was skipped");
        vm.clear_errors();
        vm.run(CPU, Cheap(Noop::new(vec![], vec![x.clone()])))
            .unwrap();
        assert!(!x.is_poisoned(), "overwritten by a successful writer");

        // A panic is caught and reported with the op's name.
        let z = vm.new_blob(8);
        vm.run(CPU, Cheap(Panic::new(vec![z.clone()]))).unwrap();
        assert!(matches!(vm.sync(), Err(Error::KernelPanic { .. })));
        vm.clear_errors();

        // A kernel that waits on its engine gets `ReentrantWait`, as on the scheduler thread.
        let (vm3_, got) = (vm.clone(), Arc::new(parking_lot::Mutex::new(None)));
        let got2 = got.clone();
        vm.run(
            CPU,
            Cheap(
                Record::new(5, vec![], vec![z.clone()], &log)
                    .with_body(move || *got2.lock() = Some(vm3_.sync())),
            ),
        )
        .unwrap();
        vm.sync().unwrap();
        assert!(matches!(
            got.lock().take(),
            Some(Err(Error::ReentrantWait { .. }))
        ));

        // A released blob is refused at the call, as on the queued path.
        vm.release(&z).unwrap();
        assert!(matches!(
            vm.run(CPU, Cheap(Noop::new(vec![z.clone()], vec![]))),
            Err(Error::TensorReleased { .. })
        ));
        let st = vm.stats();
        assert_eq!(st.inserted, st.erased);
        assert_eq!(st.in_flight, 0);
    });
}

/// `Vm::run_op` borrows its operands: run at once (bitwise copies of the handles, never
/// dropped) or queued behind busy work (owned clones, dropped on release), every blob's handle
/// count is back where it started once the engine is idle, and the kernel saw its operands.
#[test]
fn run_op_keeps_handle_counts_balanced() {
    watchdog(30, || {
        use eddy::ops::FnKernel;
        let vm = Vm::builder().build().unwrap();
        let (a, b, out) = (vm.new_blob(4), vm.new_blob(4), vm.new_blob(4));
        let counts = || [&a, &b, &out].map(Counted::count);
        let before = counts();
        let ran = Arc::new(AtomicUsize::new(0));
        let count_run = || {
            let ran = ran.clone();
            FnKernel::new(
                "count",
                move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
                    assert_eq!((ins.len(), outs.len()), (2, 1));
                    ran.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                },
            )
        };
        // Idle engine, cheap: runs at once on this thread. The scheduler thread may still hold
        // the engine for a moment after a sync (a loaded machine, Miri); then the call is
        // queued instead, and we try again once it has run.
        let mut inline_runs = 0;
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            vm.sync().unwrap();
            let (ran0, inlined0) = (ran.load(Ordering::SeqCst), vm.stats().inlined);
            vm.run_op(StreamId::CPU, count_run(), &[&a, &b], &[&out], true)
                .unwrap();
            if vm.stats().inlined == inlined0 + 1 {
                assert_eq!(ran.load(Ordering::SeqCst), ran0 + 1, "ran before returning");
                assert_eq!(counts(), before, "no handle taken or lost");
                inline_runs += 1;
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(inline_runs, 1, "the idle engine never ran the call at once");
        vm.sync().unwrap();
        assert!(eventually(5_000, || counts() == before));
        let ran0 = ran.load(Ordering::SeqCst);
        // Busy engine: queued with its own handles, which it holds until it runs.
        let gate = Gate::new();
        vm.run(StreamId::CPU, gate.hold(vec![a.clone()])).unwrap();
        vm.run_op(StreamId::CPU, count_run(), &[&a, &b], &[&out], true)
            .unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), ran0, "queued behind the gate");
        assert!(counts()[1] > before[1], "the queued call holds b");
        gate.open();
        vm.sync().unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), ran0 + 1);
        assert!(eventually(5_000, || counts() == before));
    });
}

/// `run_op` with more operands than its borrowed copies hold (`SHALLOW_MAX`, 4) takes owned
/// handles instead: the kernel sees every operand in order, writes every output, and the
/// handle counts are balanced once it ran, whether it ran at once or was queued.
#[test]
fn run_op_with_many_operands_sees_them_all() {
    watchdog(30, || {
        use eddy::ops::FnKernel;
        let vm = Vm::builder().build().unwrap();
        let ins: Vec<_> = (0..6).map(|_| vm.new_blob(1)).collect();
        let outs: Vec<_> = (0..5).map(|_| vm.new_blob(1)).collect();
        for (k, b) in ins.iter().enumerate() {
            vm.write_blob(b, move |m| m[0] = k as u8 + 1).unwrap();
        }
        let counts = || {
            ins.iter()
                .chain(&outs)
                .map(Counted::count)
                .collect::<Vec<_>>()
        };
        vm.sync().unwrap();
        let before = counts();
        let k = FnKernel::new(
            "sum_each",
            |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
                // SAFETY: the engine runs this kernel with its inputs readable and its (distinct)
                // outputs exclusively writable.
                let total: u8 = ins.iter().map(|b| unsafe { b.bytes_ref()[0] }).sum();
                for (j, o) in outs.iter().enumerate() {
                    // SAFETY: as above; each output is a distinct blob, written once.
                    unsafe { o.bytes_mut()[0] = total + j as u8 };
                }
                Ok(())
            },
        );
        let (ri, ro): (Vec<&Counted<Blob>>, Vec<&Counted<Blob>>) =
            (ins.iter().collect(), outs.iter().collect());
        vm.run_op(StreamId::CPU, k, &ri, &ro, true).unwrap();
        for (j, o) in outs.iter().enumerate() {
            assert_eq!(vm.read_blob(o, |m| m[0]).unwrap(), 21 + j as u8);
        }
        vm.sync().unwrap();
        assert!(eventually(5_000, || counts() == before));
    });
}
