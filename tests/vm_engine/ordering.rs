//! Ordering (invariants 1 to 6): program order on one stream; read after write, write after
//! read and write after write across streams, each checked with a gate holding the earlier
//! access; readers on different streams overlap.

use crate::common::{eventually, watchdog};
use crate::{CPU, log_now, vm3};
use eddy::vm::VmBuilder;
use eddy::vm::testing::{Gate, Log, Record};
use std::time::Duration;

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
