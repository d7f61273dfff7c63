//! Observability: the chrome trace names instructions per stream; a probe that panics is
//! dropped and the engine goes on.

use crate::common::{eventually, watchdog};
use crate::{CPU, vm3};
use eddy::vm::testing::Noop;
use eddy::vm::{Vm, VmBuilder};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

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
