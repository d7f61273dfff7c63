//! The engine's invariants (book: architecture) and failure modes (F5, F6, F8, F9, F10,
//! F12–F16; book: reliability), pinned with mock policies. Every test runs under a watchdog.

mod common;

use common::{eventually, watchdog};
use eddy::vm::instruction::{ComputeCtx, InstructionPolicy};
use eddy::vm::stream::async_device::AsyncDevice;
use eddy::vm::stream::{Exec, cpu::CpuStream};
use eddy::vm::testing::{DeviceOp, Fail, Gate, Log, Noop, Panic, Record};
use eddy::vm::{Blob, Error, StreamId, Vm, VmBuilder};
use eddy_vm::Counted;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

const CPU: StreamId = StreamId::CPU;

/// An engine with two extra worker streams (1 and 2).
fn vm3(b: VmBuilder) -> (Vm, StreamId, StreamId) {
    let mut b = b;
    let s1 = b.add_stream(Arc::new(CpuStream::new("worker-1", Exec::Worker)));
    let s2 = b.add_stream(Arc::new(CpuStream::new("worker-2", Exec::Worker)));
    (b.build().unwrap(), s1, s2)
}

fn log_now(l: &Log) -> Vec<u64> {
    l.lock().clone()
}

#[test]
fn same_stream_program_order_is_kept() {
    watchdog(30, || {
        let vm = VmBuilder::new().build().unwrap();
        let (x, y) = (vm.new_blob(8), vm.new_blob(8));
        let log = Log::default();
        for i in 0..100 {
            let (r, w) = if i % 2 == 0 { (&x, &y) } else { (&y, &x) };
            vm.run(CPU, Record::new(i, vec![r.clone()], vec![w.clone()], &log))
                .unwrap();
        }
        vm.sync().unwrap();
        assert_eq!(log_now(&log), (0..100).collect::<Vec<_>>());
    });
}

#[test]
fn raw_across_streams_waits_for_the_writer_to_finish() {
    watchdog(30, || {
        let (vm, s1, _) = vm3(VmBuilder::new());
        let x = vm.new_blob(8);
        let log = Log::default();
        let gate = Gate::new();
        let g = gate.clone();
        vm.run(
            s1,
            Record::new(1, vec![], vec![x.clone()], &log).with_body(move || g.wait()),
        )
        .unwrap();
        vm.run(CPU, Record::new(2, vec![x.clone()], vec![], &log))
            .unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            log_now(&log).is_empty(),
            "the reader ran before the writer finished"
        );
        gate.open();
        vm.sync().unwrap();
        assert_eq!(log_now(&log), vec![1, 2]);
    });
}

#[test]
fn war_writer_waits_for_every_earlier_reader_on_other_streams() {
    watchdog(30, || {
        let (vm, s1, s2) = vm3(VmBuilder::new());
        let x = vm.new_blob(8);
        let log = Log::default();
        let gate = Gate::new();
        let (g1, g2) = (gate.clone(), gate.clone());
        vm.run(
            s1,
            Record::new(1, vec![x.clone()], vec![], &log).with_body(move || g1.wait()),
        )
        .unwrap();
        vm.run(
            s2,
            Record::new(2, vec![x.clone()], vec![], &log).with_body(move || g2.wait()),
        )
        .unwrap();
        vm.run(CPU, Record::new(3, vec![], vec![x.clone()], &log))
            .unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert!(log_now(&log).is_empty());
        gate.open();
        vm.sync().unwrap();
        let l = log_now(&log);
        assert_eq!(l.len(), 3);
        assert_eq!(l[2], 3, "the writer must come after both readers: {l:?}");
    });
}

#[test]
fn waw_second_writer_waits_for_first() {
    watchdog(30, || {
        let (vm, s1, _) = vm3(VmBuilder::new());
        let x = vm.new_blob(8);
        let log = Log::default();
        let gate = Gate::new();
        let g = gate.clone();
        vm.run(
            s1,
            Record::new(1, vec![], vec![x.clone()], &log).with_body(move || g.wait()),
        )
        .unwrap();
        vm.run(CPU, Record::new(2, vec![], vec![x.clone()], &log))
            .unwrap();
        std::thread::sleep(Duration::from_millis(30));
        assert!(log_now(&log).is_empty());
        gate.open();
        vm.sync().unwrap();
        assert_eq!(log_now(&log), vec![1, 2]);
    });
}

#[test]
fn readers_on_different_streams_overlap() {
    watchdog(30, || {
        let (vm, s1, s2) = vm3(VmBuilder::new());
        let x = vm.new_blob(8);
        let log = Log::default();
        vm.run(CPU, Record::new(0, vec![], vec![x.clone()], &log))
            .unwrap();
        let gate = Gate::new();
        let g = gate.clone();
        vm.run(
            s1,
            Record::new(1, vec![x.clone()], vec![], &log).with_body(move || g.wait()),
        )
        .unwrap();
        vm.run(s2, Record::new(2, vec![x.clone()], vec![], &log))
            .unwrap();
        // Reader 2 must finish while reader 1 is still blocked: readers never wait on readers.
        assert!(
            eventually(5_000, || log_now(&log) == vec![0, 2]),
            "got {:?}",
            log_now(&log)
        );
        gate.open();
        vm.sync().unwrap();
        assert_eq!(log_now(&log), vec![0, 2, 1]);
    });
}

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

#[test]
fn every_instruction_is_released_exactly_once_and_counters_balance() {
    watchdog(60, || {
        let (vm, s1, s2) = vm3(VmBuilder::new());
        let xs: Vec<Counted<Blob>> = (0..8).map(|_| vm.new_blob(64)).collect();
        let drops = Arc::new(AtomicUsize::new(0));
        let computes = Arc::new(AtomicUsize::new(0));
        for i in 0..3000usize {
            let s = [CPU, s1, s2][i % 3];
            let op = CountingOp {
                outs: vec![xs[i % 8].clone()],
                ins: vec![xs[(i * 7 + 1) % 8].clone()],
                drops: drops.clone(),
                computes: computes.clone(),
            };
            vm.run(s, op).unwrap();
        }
        vm.sync().unwrap();
        let st = vm.stats();
        assert_eq!(
            computes.load(Ordering::SeqCst),
            3000,
            "computed at most once each, and all"
        );
        assert_eq!(
            drops.load(Ordering::SeqCst),
            3000,
            "released (dropped) exactly once each"
        );
        assert_eq!(st.inserted, st.erased, "inserted − erased == live == 0");
        assert_eq!(st.in_flight, 0);
        assert!(st.dispatched >= 3000);
    });
}

/// Counts its computes and drops.
struct CountingOp {
    ins: Vec<Counted<Blob>>,
    outs: Vec<Counted<Blob>>,
    drops: Arc<AtomicUsize>,
    computes: Arc<AtomicUsize>,
}
impl InstructionPolicy for CountingOp {
    fn name(&self) -> &str {
        "counted"
    }
    fn inputs(&self) -> &[Counted<Blob>] {
        &self.ins
    }
    fn outputs(&self) -> &[Counted<Blob>] {
        &self.outs
    }
    fn fusable(&self) -> bool {
        true
    }
    fn compute(&mut self, _: &mut ComputeCtx<'_>) -> eddy::vm::Result<()> {
        self.computes.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}
impl Drop for CountingOp {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

/// Like [`CountingOp`], but its drop panics when `panic_on_drop` is set.
struct DropPanics {
    out: Counted<Blob>,
    panic_on_drop: bool,
    drops: Arc<AtomicUsize>,
}
impl InstructionPolicy for DropPanics {
    fn name(&self) -> &str {
        "drop_panics"
    }
    fn outputs(&self) -> &[Counted<Blob>] {
        std::slice::from_ref(&self.out)
    }
    fn fusable(&self) -> bool {
        true
    }
    fn compute(&mut self, _: &mut ComputeCtx<'_>) -> eddy::vm::Result<()> {
        Ok(())
    }
}
impl Drop for DropPanics {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
        if self.panic_on_drop {
            panic!("drop glue panics");
        }
    }
}

/// A policy whose drop panics in the middle of a fused group: the engine logs it and goes on,
/// every other member of the group is dropped exactly once, and later work runs.
#[test]
fn a_panicking_drop_inside_a_fused_group_spares_the_other_members() {
    watchdog(30, || {
        let vm = VmBuilder::new().window(16).build().unwrap();
        let x = vm.new_blob(8);
        let drops = Arc::new(AtomicUsize::new(0));
        let fused_before = vm.stats().fused;
        let mut b = vm.instructions();
        for i in 0..10 {
            let op = DropPanics {
                out: x.clone(),
                panic_on_drop: i == 0 || i == 4,
                drops: drops.clone(),
            };
            b.push(CPU, op).unwrap();
        }
        b.submit().unwrap();
        vm.sync().unwrap();
        assert!(vm.stats().fused > fused_before, "the ten must have fused");
        assert_eq!(drops.load(Ordering::SeqCst), 10, "each dropped once");
        // The engine, and its node pool, still work.
        let log = Log::default();
        for i in 0..100u64 {
            vm.run(CPU, Record::new(i, vec![], vec![x.clone()], &log))
                .unwrap();
        }
        vm.sync().unwrap();
        assert_eq!(log_now(&log), (0..100).collect::<Vec<_>>());
    });
}

// ---- errors (F6, F8) -------------------------------------------------------------------------

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

// ---- submission-time errors (F5) --------------------------------------------------------------

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
            matches!(&e, Error::TensorReleased { op, id } if op == "noop" && *id == x.id()),
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

#[test]
fn release_frees_only_after_an_in_flight_reader_on_another_stream() {
    watchdog(30, || {
        let (vm, s1, _) = vm3(VmBuilder::new());
        let x = vm.new_blob(1 << 20);
        vm.run(CPU, Noop::new(vec![], vec![x.clone()])).unwrap();
        vm.sync().unwrap();
        let in_use = vm.alloc_stats().in_use;
        assert!(in_use >= 1 << 20);
        let gate = Gate::new();
        let g = gate.clone();
        let log = Log::default();
        vm.run(
            s1,
            Record::new(1, vec![x.clone()], vec![], &log).with_body(move || g.wait()),
        )
        .unwrap();
        vm.run(CPU, Noop::new(vec![x.clone()], vec![])).unwrap(); // last use on CPU
        vm.release(&x).unwrap();
        drop(x);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            vm.alloc_stats().in_use,
            in_use,
            "freed under a running reader"
        );
        gate.open();
        vm.sync().unwrap();
        assert_eq!(vm.alloc_stats().in_use, 0);
    });
}

// ---- memory (F9, F10) -----------------------------------------------------------------------

#[test]
fn small_blobs_keep_their_bytes_inside_and_bigger_ones_use_the_allocator() {
    watchdog(30, || {
        use eddy::vm::blob::INLINE_BYTES;
        let vm = VmBuilder::new().build().unwrap();
        let small = vm.new_blob(INLINE_BYTES);
        let big = vm.new_blob(INLINE_BYTES + 1);
        let fill = |b: &Counted<Blob>, v: u8| vm.write_blob(b, move |m| m.fill(v)).unwrap();
        fill(&small, 7);
        assert!(small.is_allocated());
        assert_eq!(
            vm.alloc_stats().allocations,
            0,
            "a small blob asked the allocator"
        );
        assert_eq!(vm.alloc_stats().in_use, 0);
        let p = small.as_ptr() as usize;
        assert_eq!(p % 16, 0, "inline bytes are 16-byte aligned");
        let inside = Counted::as_ptr(&small) as usize;
        assert!(
            (inside..inside + std::mem::size_of::<Blob>()).contains(&p),
            "the bytes live inside the blob"
        );
        fill(&big, 9);
        assert_eq!(vm.alloc_stats().allocations, 1);
        assert!(vm.alloc_stats().in_use > INLINE_BYTES);
        // Both hold what was written, and a second write reuses the inline bytes.
        assert_eq!(
            vm.read_blob(&small, |m| m.to_vec()).unwrap(),
            vec![7; INLINE_BYTES]
        );
        assert_eq!(
            vm.read_blob(&big, |m| m.to_vec()).unwrap(),
            vec![9; INLINE_BYTES + 1]
        );
        fill(&small, 3);
        assert_eq!(small.as_ptr() as usize, p);
        assert_eq!(vm.read_blob(&small, |m| m[INLINE_BYTES - 1]).unwrap(), 3);
        // Releasing inline memory frees nothing (the bytes go with the blob), so it is no
        // instruction; the big blob's release is one, and its memory goes back to the cache.
        vm.sync().unwrap();
        let before = vm.stats();
        vm.release(&small).unwrap();
        assert_eq!(
            vm.stats().inserted,
            before.inserted,
            "an instruction for inline memory"
        );
        assert!(!small.is_allocated());
        assert!(matches!(
            vm.write_blob(&small, |m| m.fill(0)),
            Err(Error::TensorReleased { .. })
        ));
        vm.release(&big).unwrap();
        vm.sync().unwrap();
        assert!(vm.stats().inserted > before.inserted);
        assert!(!big.is_allocated());
        assert_eq!(vm.alloc_stats().in_use, 0);
        // Pass-through mode (for valgrind) gives every blob its own heap block.
        let vm = VmBuilder::new()
            .alloc_mode(eddy::vm::alloc::AllocMode::Passthrough)
            .build()
            .unwrap();
        let small = vm.new_blob(16);
        vm.write_blob(&small, |m| m.fill(1)).unwrap();
        assert_eq!(vm.alloc_stats().allocations, 1);
        vm.release(&small).unwrap();
        vm.sync().unwrap();
    });
}

#[test]
fn oom_retry_after_shrinking_the_cache_is_invisible() {
    watchdog(30, || {
        let vm = VmBuilder::new().capacity(Some(4 << 20)).build().unwrap();
        let a = vm.new_blob(3 << 20);
        vm.run(CPU, Noop::new(vec![], vec![a.clone()])).unwrap();
        vm.release(&a).unwrap();
        vm.sync().unwrap();
        assert!(
            vm.alloc_stats().cached >= 3 << 20,
            "the freed piece stays cached"
        );
        // 3.5 MiB does not fit the cached 3 MiB piece nor the 1 MiB left: shrink, then retry.
        let b = vm.new_blob(3 << 20 | 1 << 19);
        vm.run(CPU, Noop::new(vec![], vec![b.clone()])).unwrap();
        vm.read_blob(&b, |s| assert_eq!(s.len(), 3 << 20 | 1 << 19))
            .unwrap();
        vm.sync().unwrap();
        let st = vm.stats();
        assert_eq!((st.oom_retries, st.ooms), (1, 0));
        assert_eq!(st.alloc.oom_retries, 1);
    });
}

#[test]
fn oom_that_persists_fails_only_that_op_and_later_fitting_allocations_work() {
    watchdog(30, || {
        let vm = VmBuilder::new().capacity(Some(4 << 20)).build().unwrap();
        let (big, small, later) = (
            vm.new_blob(8 << 20),
            vm.new_blob(1024),
            vm.new_blob(2 << 20),
        );
        let log = Log::default();
        vm.run(CPU, Record::new(1, vec![], vec![big.clone()], &log))
            .unwrap();
        vm.run(CPU, Record::new(2, vec![big.clone()], vec![], &log))
            .unwrap();
        vm.run(CPU, Record::new(3, vec![], vec![small.clone()], &log))
            .unwrap();
        let e = vm.sync().unwrap_err();
        match &e {
            Error::OutOfMemory {
                op,
                requested,
                capacity,
                ..
            } => {
                assert_eq!(op, "record");
                assert_eq!(*requested, 8 << 20);
                assert_eq!(*capacity, Some(4 << 20));
            }
            other => panic!("expected OutOfMemory, got {other}"),
        }
        assert!(
            e.to_string().contains("tried to allocate 8388608 bytes"),
            "{e}"
        );
        assert_eq!(log_now(&log), vec![3]);
        assert!(vm.read_blob(&big, |_| ()).unwrap_err().is_oom());
        vm.clear_errors();
        vm.run(CPU, Noop::new(vec![], vec![later.clone()])).unwrap();
        vm.sync().unwrap();
        assert_eq!(vm.stats().ooms, 1);
    });
}

#[test]
fn oom_path_waits_for_running_work_that_frees_memory() {
    watchdog(30, || {
        let (vm, s1, _) = vm3(VmBuilder::new().capacity(Some(4 << 20)));
        let a = vm.new_blob(3 << 20);
        vm.run(s1, Noop::new(vec![], vec![a.clone()])).unwrap();
        vm.barrier().unwrap(); // `a` holds 3 of the 4 MiB from here on
        let gate = Gate::new();
        vm.run(s1, gate.hold(vec![vm.new_blob(0)])).unwrap();
        vm.release(&a).unwrap(); // on s1, behind the gate
        drop(a);
        let g = gate.clone();
        let opener = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            g.open();
        });
        // Needs the memory that the release behind the gate frees: the OOM path must wait.
        let b = vm.new_blob(3 << 20);
        vm.run(CPU, Noop::new(vec![], vec![b.clone()])).unwrap();
        vm.sync().unwrap();
        opener.join().unwrap();
        assert_eq!(vm.stats().oom_retries, 1);
        assert_eq!(vm.stats().ooms, 0);
    });
}

// ---- waits, shutdown, back-pressure (F15, F16, F17, F18) -------------------------------------

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
        let e = vm.read_blob(&x, |_| ()).unwrap_err();
        match &e {
            Error::Deadlock { dump, .. } => assert!(
                dump.contains("record_event") && dump.contains("device event"),
                "{dump}"
            ),
            other => panic!("expected Deadlock, got {other}"),
        }
        // Once the device runs, the engine proceeds.
        dev.run_all();
        vm.read_blob(&x, |_| ()).unwrap();
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
        assert!(t0.elapsed() < Duration::from_secs(1));
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

// ---- asynchronous device semantics (soft sync) ------------------------------------------------

#[test]
fn host_read_of_device_output_waits_for_the_device_work() {
    watchdog(30, || {
        let dev = AsyncDevice::new(0);
        let mut b = VmBuilder::new();
        let q = b.add_stream(Arc::new(dev.stream("fake-compute")));
        let vm = b.build().unwrap();
        dev.set_waker(vm.waker());
        let x = vm.new_blob(8);
        let log = Log::default();
        let l2 = log.clone();
        vm.run(
            q,
            DeviceOp::new(vec![], vec![x.clone()], move || l2.lock().push(1)),
        )
        .unwrap();
        // "Done" on the device stream only means launched: the host read must wait for the event.
        let (v2, x2, l3) = (vm.clone(), x.clone(), log.clone());
        let reader = std::thread::spawn(move || v2.read_blob(&x2, move |_| l3.lock().push(2)));
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            log_now(&log).is_empty(),
            "host read ran before the device work"
        );
        assert!(
            eventually(5_000, || dev.queued(0) == 2),
            "the op and its event are queued"
        );
        assert!(
            log_now(&log).is_empty(),
            "nothing ran before the device did"
        );
        dev.run_all();
        reader.join().unwrap().unwrap();
        assert_eq!(log_now(&log), vec![1, 2]);
    });
}

#[test]
fn device_streams_synchronise_device_side_with_record_and_wait() {
    record_and_wait(false);
}

/// A builder dropped without submitting changes no blob's last-used stream: the consumer
/// submitted after it on the same stream still waits for the producer's event (the dropped
/// builder used to record its stream as the blob's last user, and the sync was skipped).
#[test]
fn a_dropped_builder_leaves_the_cross_stream_sync_in_place() {
    record_and_wait(true);
}

/// A producer on one device stream and a consumer on another: the consumer's queue holds a
/// device-side wait before it, and cannot run before the producer. With `drop_a_builder`, a
/// builder that pushed a consumer on the second stream is dropped in between.
fn record_and_wait(drop_a_builder: bool) {
    watchdog(30, move || {
        let dev = AsyncDevice::new(0);
        let mut b = VmBuilder::new();
        let q0 = b.add_stream(Arc::new(dev.stream("compute")));
        let q1 = b.add_stream(Arc::new(dev.stream("copy")));
        let vm = b.build().unwrap();
        dev.set_waker(vm.waker());
        let x = vm.new_blob(8);
        let log = Log::default();
        let (l1, l2) = (log.clone(), log.clone());
        vm.run(
            q0,
            DeviceOp::new(vec![], vec![x.clone()], move || l1.lock().push(1)),
        )
        .unwrap();
        if drop_a_builder {
            let mut dropped = vm.instructions();
            dropped
                .push(q1, DeviceOp::new(vec![x.clone()], vec![], || ()))
                .unwrap();
            assert_eq!(dropped.len(), 3, "record, wait, op");
        }
        vm.run(
            q1,
            DeviceOp::new(vec![x.clone()], vec![], move || l2.lock().push(2)),
        )
        .unwrap();
        // No host wait: both launches happen without the device running anything.
        assert!(
            eventually(5_000, || dev.queued(1) == 2),
            "q1 holds the wait and the consumer"
        );
        assert!(
            !dev.run_next(1),
            "the consumer's queue must wait for the producer's event"
        );
        assert!(log_now(&log).is_empty());
        dev.run_all();
        assert_eq!(log_now(&log), vec![1, 2]);
        vm.sync().unwrap();
    });
}

// ---- observability -----------------------------------------------------------------------------

#[test]
fn chrome_trace_names_instructions_per_stream() {
    watchdog(30, || {
        let (vm, s1, _) = vm3(VmBuilder::new().trace(true));
        let x = vm.new_blob(8);
        vm.run(CPU, Noop::new(vec![], vec![x.clone()])).unwrap();
        vm.run(s1, Noop::new(vec![x.clone()], vec![])).unwrap();
        vm.sync().unwrap();
        let mut out = Vec::new();
        vm.write_chrome_trace(&mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let evs = v["traceEvents"].as_array().unwrap();
        let tids: std::collections::BTreeSet<u64> = evs
            .iter()
            .filter(|e| e["ph"] == "X" && e["name"] == "noop")
            .map(|e| e["tid"].as_u64().unwrap())
            .collect();
        assert_eq!(tids, [0, 1].into_iter().collect());
    });
}

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

#[test]
fn write_blob_that_cannot_allocate_reports_out_of_memory() {
    watchdog(30, || {
        let vm = VmBuilder::new().capacity(Some(1 << 20)).build().unwrap();
        let x = vm.new_blob(2 << 20);
        let e = vm.write_blob(&x, |b| b.fill(1)).unwrap_err();
        assert!(e.is_oom(), "{e}");
        let y = vm.new_blob(1024);
        vm.write_blob(&y, |b| b.fill(7)).unwrap();
        assert_eq!(
            vm.read_blob(&y, |b| b.iter().map(|&v| v as u32).sum::<u32>())
                .unwrap(),
            7 * 1024
        );
    });
}

#[test]
fn release_on_a_launch_only_stream_frees_after_the_device_finishes() {
    watchdog(30, || {
        let dev = AsyncDevice::new(0);
        let mut b = VmBuilder::new();
        let q = b.add_stream(Arc::new(dev.stream("fake-compute")));
        let vm = b.build().unwrap();
        dev.set_waker(vm.waker());
        let alloc = vm.allocator(eddy::vm::Device::Test(0)).unwrap();
        let x = vm.new_blob(1 << 20);
        vm.run(q, DeviceOp::new(vec![], vec![x.clone()], || {}))
            .unwrap();
        vm.release(&x).unwrap();
        drop(x);
        // Launched (so allocated) first; then, however long we wait, not freed.
        assert!(eventually(5_000, || alloc.stats().in_use >= 1 << 20));
        std::thread::sleep(Duration::from_millis(30));
        assert!(
            alloc.stats().in_use >= 1 << 20,
            "freed while the device may still use it"
        );
        dev.run_all();
        assert!(eventually(5_000, || alloc.stats().in_use == 0));
        vm.sync().unwrap();
    });
}

/// In synchronous mode a `sync` that finds the engine busy (a host op waiting for a device
/// that runs later) lets go of the scheduler it took to look before it submits its barrier,
/// whose submission takes the scheduler to run the passes (holding on deadlocked here), and a
/// host read waits for the device the same way.
#[test]
fn synchronous_mode_waits_for_a_device_that_finishes_later() {
    watchdog(30, || {
        let dev = AsyncDevice::new(0);
        let mut b = VmBuilder::new().sync_mode(true);
        let q = b.add_stream(Arc::new(dev.stream("fake-compute")));
        let vm = b.build().unwrap();
        dev.set_waker(vm.waker());
        let x = vm.new_blob(8);
        vm.run(q, DeviceOp::new(vec![], vec![x.clone()], || {}))
            .unwrap();
        // A host op after it waits for the device: the engine stays busy until the device runs.
        let log = Log::default();
        vm.run(CPU, Record::new(1, vec![x.clone()], vec![], &log))
            .unwrap();
        assert!(log.lock().is_empty(), "ran before the device did");
        let d = dev.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            d.run_all();
        });
        vm.sync().unwrap();
        assert_eq!(*log.lock(), vec![1]);
        vm.run(q, DeviceOp::new(vec![], vec![x.clone()], || {}))
            .unwrap();
        let d = dev.clone();
        let t2 = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            d.run_all();
        });
        assert_eq!(vm.read_blob(&x, |b| b.len()).unwrap(), 8);
        t.join().unwrap();
        t2.join().unwrap();
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
        for round in 0..50u64 {
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
            (0..100).collect::<Vec<u64>>(),
            "program order"
        );
        let threads: Vec<String> = vm.trace_events().into_iter().map(|e| e.thread).collect();
        assert!(
            threads.contains(&me),
            "no instruction ran on the waiting thread {me:?}: {threads:?}"
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
        vm.sync().unwrap();
        let before = vm.stats().inlined;
        vm.run(CPU, Cheap(Record::new(1, vec![], vec![x.clone()], &log)))
            .unwrap();
        assert_eq!(log_now(&log), vec![1], "ran before `run` returned");
        assert!(x.is_allocated(), "prepared");
        assert_eq!(vm.stats().inlined, before + 1);
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
        for _ in 0..1_000 {
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

// ---- found by a review of the engine's internals ---------------------------------------------

/// A free fused ahead of an allocation in one unit used to be prepared after it: the unit's
/// members are all prepared before any computes, so `b` could not use `a`'s memory and failed
/// with OutOfMemory where the same program without fusion ran. A free now ends its unit.
#[test]
fn a_free_then_an_allocation_that_needs_its_memory_succeed_with_fusion_on() {
    watchdog(30, || {
        for fusion in [true, false] {
            let vm = VmBuilder::new()
                .capacity(Some(4 << 20))
                .fusion(fusion)
                .build()
                .unwrap();
            let a = vm.new_blob(3 << 20);
            vm.run(CPU, Noop::new(vec![], vec![a.clone()])).unwrap();
            vm.sync().unwrap();
            // Hold the stream, so that a use of `a`, its free and the allocation arrive in one
            // window and fuse (the scheduler ingests them while the gate waits).
            let gate = Gate::new();
            let g = gate.clone();
            let log = Log::default();
            let hold = vm.new_blob(8);
            vm.run(
                CPU,
                Record::new(1, vec![], vec![hold.clone()], &log).with_body(move || g.wait()),
            )
            .unwrap();
            vm.run(CPU, Noop::new(vec![a.clone()], vec![])).unwrap();
            vm.release(&a).unwrap();
            let b = vm.new_blob(3 << 20);
            vm.run(CPU, Noop::new(vec![], vec![b.clone()])).unwrap();
            gate.open();
            vm.sync().unwrap_or_else(|e| panic!("fusion {fusion}: {e}"));
            assert_eq!(vm.stats().ooms, 0, "fusion {fusion}");
            assert!(b.is_allocated());
        }
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

/// A probe that panics is dropped; the engine and the other probes go on.
#[test]
fn a_panicking_probe_does_not_fail_the_engine() {
    watchdog(30, || {
        let vm = Vm::builder().build().unwrap();
        let polls = Arc::new(AtomicUsize::new(0));
        let p = polls.clone();
        vm.add_probe(|| panic!("a probe panics"));
        vm.add_probe(move || p.fetch_add(1, Ordering::SeqCst) + 1 == 3);
        assert!(eventually(10_000, || polls.load(Ordering::SeqCst) >= 3));
        let x = vm.new_blob(8);
        vm.run(CPU, Noop::new(vec![], vec![x.clone()])).unwrap();
        vm.sync().unwrap();
    });
}

/// A policy whose drop is deferred (`InstructionPolicy::deferred_drop`: `Link`) is dropped by
/// a submitting thread or a sweep, not at release; either way its blob handles are gone by the
/// time `sync` returns, and, without a sync, once the engine goes idle; and a blob whose last
/// handle such a policy held is freed with it.
#[test]
fn deferred_drops_are_done_by_sync_and_by_an_idle_engine() {
    watchdog(60, || {
        use eddy::vm::testing::Link;
        let vm = Vm::builder().build().unwrap();
        let (a, b) = (vm.new_blob(64), vm.new_blob(64));
        assert!(Link([a.clone(), b.clone()]).deferred_drop());
        for round in 0..20 {
            for _ in 0..5_000 {
                vm.run(StreamId::CPU, Link([a.clone(), b.clone()])).unwrap();
            }
            vm.sync().unwrap();
            assert_eq!(
                (Counted::count(&a), Counted::count(&b)),
                (1, 1),
                "round {round}: every handle an instruction held is dropped once sync returns"
            );
        }
        // No sync: the scheduler drops what is left when it goes to sleep.
        for _ in 0..5_000 {
            vm.run(StreamId::CPU, Link([a.clone(), b.clone()])).unwrap();
        }
        assert!(
            eventually(10_000, || Counted::count(&a) == 1
                && Counted::count(&b) == 1),
            "left held: {} {}",
            Counted::count(&a),
            Counted::count(&b)
        );
        // The last handle goes with the blob's memory, wherever the policy was dropped.
        let before = vm.stats().alloc.in_use;
        let c = vm.new_blob(1 << 20);
        vm.run(StreamId::CPU, Link([a.clone(), c.clone()])).unwrap();
        vm.sync().unwrap();
        assert!(vm.stats().alloc.in_use >= before + (1 << 20));
        drop(c);
        assert_eq!(
            vm.stats().alloc.in_use,
            before,
            "freed with its last handle"
        );
    });
}
