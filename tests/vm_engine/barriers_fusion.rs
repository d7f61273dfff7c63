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

/// A test kernel: adds its byte to every byte of its input (or of zeros) into its output, and
/// says so ([`Kernel::describe`]), so that a unit merge can take it.
struct Inc(u8);

impl eddy::vm::instruction::Kernel for Inc {
    fn name(&self) -> &str {
        "inc"
    }
    fn compute(
        &mut self,
        ins: &[Counted<Blob>],
        outs: &[Counted<Blob>],
        _: &mut eddy::vm::instruction::ComputeCtx<'_>,
    ) -> eddy::vm::Result<()> {
        inc(self.0, ins.first(), &outs[0]);
        Ok(())
    }
    fn describe(&self) -> Option<Box<dyn std::any::Any + Send>> {
        Some(Box::new((self.0, 0usize)))
    }
}

/// `out = in + k`, bytewise (wrapping), reading before writing.
fn inc(k: u8, input: Option<&Counted<Blob>>, out: &Counted<Blob>) {
    // SAFETY: the engine gives the running instruction its input to read and its output to
    // write; the bytes are copied out before the output is borrowed.
    let src: Vec<u8> = input.map_or_else(
        || vec![0; out.bytes()],
        |b| unsafe { b.bytes_ref() }.to_vec(),
    );
    // SAFETY: as above.
    let dst = unsafe { out.bytes_mut() };
    for (d, s) in dst.iter_mut().zip(src) {
        *d = s.wrapping_add(k);
    }
}

/// An op call of `Inc(by)` reading `input` (or nothing) and writing `out`.
fn inc_call(
    by: u8,
    input: Option<&Counted<Blob>>,
    out: &Counted<Blob>,
) -> eddy::vm::instruction::OpCall<Inc> {
    let ins: Vec<Counted<Blob>> = input.into_iter().cloned().collect();
    eddy::vm::instruction::OpCall::new(Inc(by), ins.into(), vec![out.clone()].into())
}

/// The kernel a test merge makes of a unit of `Inc`s: each member in turn, on its own slice
/// of the concatenated operands.
struct Incs(Vec<(u8, usize)>);

impl eddy::vm::instruction::Kernel for Incs {
    fn name(&self) -> &str {
        "incs"
    }
    fn compute(
        &mut self,
        ins: &[Counted<Blob>],
        outs: &[Counted<Blob>],
        _: &mut eddy::vm::instruction::ComputeCtx<'_>,
    ) -> eddy::vm::Result<()> {
        let mut at = 0;
        for (k, &(by, n_in)) in self.0.iter().enumerate() {
            inc(by, ins[at..at + n_in].first(), &outs[k]);
            at += n_in;
        }
        Ok(())
    }
}

/// A fused unit of op calls on a stream whose device has a unit merge runs as the one kernel
/// the merge makes, on every member's operands, with the values member-by-member execution
/// computes; a unit with a failed input, or one the merge refuses, runs member by member.
#[test]
fn a_device_with_a_unit_merge_runs_a_fused_unit_as_one_kernel() {
    use eddy::vm::merge::{Member, UnitMerge};
    watchdog(30, || {
        let vm = VmBuilder::new().window(16).trace(true).build().unwrap();
        let offered = Arc::new(parking_lot::Mutex::new(Vec::<usize>::new()));
        let refuse = Arc::new(AtomicBool::new(false));
        let (o, r) = (offered.clone(), refuse.clone());
        let merge: UnitMerge = Arc::new(move |members: &[Member<'_>]| {
            o.lock().push(members.len());
            if r.load(Ordering::SeqCst) {
                return None;
            }
            let parts = (members.iter())
                .map(|m| {
                    let (by, _) = *m.kernel.describe()?.downcast::<(u8, usize)>().ok()?;
                    Some((by, m.inputs.len()))
                })
                .collect::<Option<Vec<_>>>()?;
            Some(Box::new(Incs(parts)) as Box<dyn eddy::vm::instruction::Kernel>)
        });
        assert!(vm.set_unit_merge(eddy::vm::Device::CPU, merge.clone()));
        assert!(
            !vm.set_unit_merge(eddy::vm::Device::CPU, merge),
            "the first stays"
        );
        // x = 1; y = x + 2; z = y + 3; w = z + 4: one unit of four.
        let chain = |vm: &eddy::vm::Vm| {
            let b: Vec<Counted<Blob>> = (0..4).map(|_| vm.new_blob(64)).collect();
            let mut s = vm.instructions();
            s.push(CPU, inc_call(1, None, &b[0])).unwrap();
            for k in 1..4 {
                s.push(CPU, inc_call(k as u8 + 1, Some(&b[k - 1]), &b[k]))
                    .unwrap();
            }
            s.submit().unwrap();
            b
        };
        let b = chain(&vm);
        let bytes = |x: &Counted<Blob>| vm.read_blob(x, |m| m.to_vec()).unwrap();
        assert_eq!(bytes(&b[3]), [10; 64]);
        assert_eq!(bytes(&b[1]), [3; 64], "every member's output is written");
        assert_eq!(*offered.lock(), [4]);
        let names = |vm: &eddy::vm::Vm| -> Vec<String> {
            vm.trace_events().into_iter().map(|e| e.name).collect()
        };
        assert!(names(&vm).contains(&"incs".to_string()), "{:?}", names(&vm));
        assert!(!names(&vm).contains(&"inc".to_string()), "{:?}", names(&vm));
        vm.clear_trace();
        // Refused: member by member, the same values.
        refuse.store(true, Ordering::SeqCst);
        let b = chain(&vm);
        assert_eq!(bytes(&b[3]), [10; 64]);
        assert_eq!(*offered.lock(), [4, 4]);
        let n = names(&vm).iter().filter(|n| *n == "inc").count();
        assert_eq!(n, 4, "{:?}", names(&vm));
        refuse.store(false, Ordering::SeqCst);
        // A unit that ends with a release (as most do): its leading op calls are offered.
        let (p, q, gone) = (vm.new_blob(64), vm.new_blob(64), vm.new_blob(64));
        let mut s = vm.instructions();
        s.push(CPU, inc_call(7, None, &gone)).unwrap();
        s.submit().unwrap();
        vm.sync().unwrap();
        let mut s = vm.instructions();
        s.push(CPU, inc_call(1, None, &p)).unwrap();
        s.push(CPU, inc_call(2, Some(&p), &q)).unwrap();
        s.release(&gone).unwrap();
        s.submit().unwrap();
        assert_eq!(bytes(&q), [3; 64]);
        assert_eq!(
            *offered.lock(),
            [4, 4, 2],
            "the two op calls, not the release"
        );
        // A failed input: not offered; the failure reaches what depends on it only.
        let bad = vm.new_blob(64);
        bad.poison_with(&eddy::vm::Error::kernel("earlier", "failed on purpose"));
        let (p, q, fine) = (vm.new_blob(64), vm.new_blob(64), vm.new_blob(64));
        let mut s = vm.instructions();
        s.push(CPU, inc_call(1, None, &fine)).unwrap();
        s.push(CPU, inc_call(1, Some(&bad), &p)).unwrap();
        s.push(CPU, inc_call(1, Some(&p), &q)).unwrap();
        s.submit().unwrap();
        assert_eq!(bytes(&fine), [1; 64]);
        assert!(vm.read_blob(&q, |m| m.to_vec()).is_err());
        assert_eq!(
            *offered.lock(),
            [4, 4, 2],
            "a unit with a failed input is not offered"
        );
    });
}

/// In a fused unit, a member whose input carries an earlier error that an earlier member of the
/// unit overwrites is prepared (its output allocated) and computes on the clean value, as it
/// would unfused; a member reading a value that stays failed is skipped and fails.
#[test]
fn a_unit_member_reading_a_value_its_unit_rewrites_computes_on_it() {
    use eddy::vm::instruction::OpCall;
    use eddy::vm::testing::AddByte;
    watchdog(30, || {
        let vm = VmBuilder::new().window(16).build().unwrap();
        let (x, y, bad, z) = (
            vm.new_blob(64),
            vm.new_blob(64),
            vm.new_blob(64),
            vm.new_blob(64),
        );
        x.poison_with(&eddy::vm::Error::kernel("earlier", "failed on purpose"));
        bad.poison_with(&eddy::vm::Error::kernel("earlier", "failed on purpose"));
        // x = 5 (clears x's error); y = x + 1; z = bad + 1: one unit of three.
        let mut s = vm.instructions();
        s.push(
            CPU,
            OpCall::new(AddByte(5), vec![].into(), vec![x.clone()].into()),
        )
        .unwrap();
        s.push(
            CPU,
            OpCall::new(AddByte(1), vec![x.clone()].into(), vec![y.clone()].into()),
        )
        .unwrap();
        s.push(
            CPU,
            OpCall::new(AddByte(1), vec![bad].into(), vec![z.clone()].into()),
        )
        .unwrap();
        s.submit().unwrap();
        assert_eq!(vm.read_blob(&x, |m| m.to_vec()).unwrap(), [5; 64]);
        assert_eq!(vm.read_blob(&y, |m| m.to_vec()).unwrap(), [6; 64]);
        assert!(vm.read_blob(&z, |m| m.to_vec()).is_err());
    });
}
