//! Memory (F5, F9, F10; invariants 10 and 11): a release frees only after every use, small
//! blobs keep their bytes inside, and the out-of-memory path retries invisibly, fails only the
//! op that cannot fit, and waits for running work that frees memory.

use crate::common::{eventually, watchdog};
use crate::{CPU, log_now, vm3};
use eddy::vm::testing::{Gate, Log, Noop, Record};
use eddy::vm::{Blob, Error, VmBuilder};
use eddy_vm::Counted;
use std::time::Duration;

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
        let taken_in = vm.stats().inserted;
        let gate = Gate::new();
        vm.run(s1, gate.hold(vec![vm.new_blob(0)])).unwrap();
        vm.release(&a).unwrap(); // on s1, behind the gate
        drop(a);
        // The gate opens once the scheduler has taken in the gate, the release and `b`'s
        // writer, so once it has tried to allocate `b` with the gate shut: it dispatches what
        // it takes in within the same pass, and the OOM path's wait publishes the counters. (A
        // fixed sleep let a loaded machine open the gate before, and `b` then simply fitted.)
        let (g, v) = (gate.clone(), vm.clone());
        let opener = std::thread::spawn(move || {
            let seen = eventually(20_000, || v.stats().inserted >= taken_in + 3);
            g.open();
            seen
        });
        // Needs the memory that the release behind the gate frees: the OOM path must wait.
        let b = vm.new_blob(3 << 20);
        vm.run(CPU, Noop::new(vec![], vec![b.clone()])).unwrap();
        vm.sync().unwrap();
        assert!(
            opener.join().unwrap(),
            "the allocation of `b` was never taken in"
        );
        assert_eq!(vm.stats().oom_retries, 1);
        assert_eq!(vm.stats().ooms, 0);
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
