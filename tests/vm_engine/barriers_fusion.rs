//! Barriers (invariant 8, F15): a barrier waits for earlier work, delays nothing after it, runs
//! in order, and sees what other threads submitted before it. Fusion (invariant 9): only
//! consecutive fusable instructions of one stream, stepping over other streams only when nothing
//! orders them.

use crate::common::{eventually, watchdog};
use crate::{CPU, log_now, vm3};
use eddy::vm::testing::{Gate, Log, Noop, Record};
use eddy::vm::{Blob, VmBuilder};
use eddy_vm::Counted;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

#[test]
fn barrier_waits_for_earlier_work_and_delays_nothing_after_it() {
    watchdog(30, || {
        let (vm, s1, _) = vm3(VmBuilder::new());
        let (x, y) = (vm.new_blob(8), vm.new_blob(8));
        let log = Log::default();
        let gate = Gate::new();
        let g = gate.clone();
        vm.run(
            s1,
            Record::new(1, vec![], vec![x.clone()], &log).with_body(move || g.wait()),
        )
        .unwrap();
        let fired = Arc::new(AtomicUsize::new(0));
        let order = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let mut b = vm.instructions();
        for k in 0..3 {
            let (f, o) = (fired.clone(), order.clone());
            b.barrier(move || {
                f.fetch_add(1, Ordering::SeqCst);
                o.lock().push(k);
            });
        }
        b.submit().unwrap();
        vm.run(CPU, Record::new(2, vec![], vec![y.clone()], &log))
            .unwrap();
        assert!(
            eventually(5_000, || log_now(&log) == vec![2]),
            "work after the barrier was delayed"
        );
        assert_eq!(
            fired.load(Ordering::SeqCst),
            0,
            "a barrier ran before earlier work was released"
        );
        gate.open();
        vm.sync().unwrap();
        assert_eq!(fired.load(Ordering::SeqCst), 3);
        assert_eq!(*order.lock(), vec![0, 1, 2], "barriers run in order");
    });
}

#[test]
fn barrier_from_one_thread_sees_everything_other_threads_submitted_before_it() {
    watchdog(120, || {
        // Bounded backlog (back-pressure), as a real engine runs.
        let vm = VmBuilder::new().water_marks(2_000, 1_000).build().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let submitted = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        let mut ts = vec![];
        for _ in 0..3 {
            let (vm, stop, submitted, done) =
                (vm.clone(), stop.clone(), submitted.clone(), done.clone());
            ts.push(std::thread::spawn(move || {
                let x = vm.new_blob(8);
                while !stop.load(Ordering::Relaxed) {
                    let d = done.clone();
                    let op = Record::new(0, vec![], vec![x.clone()], &Log::default()).with_body(
                        move || {
                            d.fetch_add(1, Ordering::SeqCst);
                        },
                    );
                    vm.run(CPU, op).unwrap();
                    submitted.fetch_add(1, Ordering::SeqCst);
                }
            }));
        }
        for _ in 0..1000 {
            // Everything whose submission happened-before the call has completed when it returns.
            let before = submitted.load(Ordering::SeqCst);
            vm.barrier().unwrap();
            let after = done.load(Ordering::SeqCst);
            assert!(
                after >= before,
                "barrier returned with {before} submitted but {after} done"
            );
        }
        stop.store(true, Ordering::Relaxed);
        for t in ts {
            t.join().unwrap();
        }
        vm.sync().unwrap();
        assert_eq!(
            done.load(Ordering::SeqCst),
            submitted.load(Ordering::SeqCst)
        );
    });
}

#[test]
fn fusion_groups_consecutive_fusable_same_stream_instructions_in_order() {
    watchdog(30, || {
        let (vm, s1, _) = vm3(VmBuilder::new().window(16));
        let xs: Vec<Counted<Blob>> = (0..4).map(|_| vm.new_blob(8)).collect();
        let log = Log::default();
        let mut b = vm.instructions();
        for i in 0..12u64 {
            let x = &xs[i as usize % 4];
            let s = if (4..8).contains(&i) { s1 } else { CPU };
            b.push(s, Record::new(i, vec![x.clone()], vec![x.clone()], &log))
                .unwrap();
        }
        b.submit().unwrap();
        vm.sync().unwrap();
        // Runs on one stream fuse: [0..4) cpu, [4..8) s1, [8..12) cpu → 3 groups, 9 followers.
        assert_eq!(vm.stats().fused, 9);
        let l = log_now(&log);
        let pos = |t| l.iter().position(|&v| v == t).unwrap();
        for w in [
            (0, 1),
            (1, 2),
            (2, 3),
            (4, 5),
            (5, 6),
            (6, 7),
            (8, 9),
            (9, 10),
            (10, 11),
        ] {
            assert!(pos(w.0) < pos(w.1), "members must compute in order: {l:?}");
        }
        // A group of one is never wrapped.
        let before = vm.stats().fused;
        vm.run(CPU, Record::new(99, vec![], vec![xs[0].clone()], &log))
            .unwrap();
        vm.sync().unwrap();
        assert_eq!(vm.stats().fused, before);
        // Unfusable instructions and fusion off never fuse.
        let vm2 = VmBuilder::new().fusion(false).build().unwrap();
        let y = vm2.new_blob(8);
        let mut b = vm2.instructions();
        for _ in 0..20 {
            b.push(CPU, Noop::new(vec![], vec![y.clone()])).unwrap();
        }
        b.submit().unwrap();
        vm2.sync().unwrap();
        assert_eq!(vm2.stats().fused, 0);
    });
}

/// Fusion steps over instructions of other streams to reach a follower, but only when no
/// blob orders the two: a follower that reads what a stepped-over instruction writes stays
/// queued behind it, and so does everything after it on its stream.
#[test]
fn fusion_steps_over_other_streams_only_when_nothing_orders_them() {
    watchdog(30, || {
        let (vm, s1, _) = vm3(VmBuilder::new().window(16));
        let log = Log::default();
        // Alternating streams, a blob each: both streams' runs fuse.
        let own: Vec<Counted<Blob>> = (0..8).map(|_| vm.new_blob(8)).collect();
        let mut b = vm.instructions();
        for (i, x) in own.iter().enumerate() {
            let s = if i % 2 == 0 { CPU } else { s1 };
            b.push(s, Record::new(i as u64, vec![], vec![x.clone()], &log))
                .unwrap();
        }
        b.submit().unwrap();
        vm.sync().unwrap();
        assert_eq!(vm.stats().fused, 6, "two groups of four");
        let l = log_now(&log);
        let pos = |l: &[u64], t| l.iter().position(|&v| v == t).unwrap();
        for w in [(0, 2), (2, 4), (4, 6), (1, 3), (3, 5), (5, 7)] {
            assert!(pos(&l, w.0) < pos(&l, w.1), "stream order: {l:?}");
        }
        // 12 reads the blob 11 (another stream) writes: it may not jump 11, and 13 may not
        // jump 12 on their stream; 13 joins 12 once 11 is out of the way.
        let before = vm.stats().fused;
        let (x, y, z) = (vm.new_blob(8), vm.new_blob(8), vm.new_blob(8));
        let mut b = vm.instructions();
        b.push(CPU, Record::new(10, vec![], vec![x.clone()], &log))
            .unwrap();
        b.push(s1, Record::new(11, vec![], vec![y.clone()], &log))
            .unwrap();
        b.push(CPU, Record::new(12, vec![y.clone()], vec![z.clone()], &log))
            .unwrap();
        b.push(CPU, Record::new(13, vec![], vec![x.clone()], &log))
            .unwrap();
        b.submit().unwrap();
        vm.sync().unwrap();
        assert_eq!(vm.stats().fused - before, 1, "only 13 joins 12");
        let l = log_now(&log);
        assert!(pos(&l, 11) < pos(&l, 12), "read after write: {l:?}");
        assert!(pos(&l, 10) < pos(&l, 12) && pos(&l, 12) < pos(&l, 13));
    });
}
