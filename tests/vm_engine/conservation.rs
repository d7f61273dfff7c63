//! Conservation (invariant 7): every instruction is computed and released once and its policy
//! dropped once, also when a drop panics inside a fused group or is deferred; the counters
//! balance.

use crate::common::{eventually, watchdog};
use crate::{CPU, CountingOp, log_now, vm3};
use eddy::vm::instruction::{ComputeCtx, InstructionPolicy};
use eddy::vm::testing::{Log, Record};
use eddy::vm::{Blob, StreamId, Vm, VmBuilder};
use eddy_vm::Counted;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

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
