//! Asynchronous device streams (F11), on the test device: done means launched, so a host read,
//! a consumer on another device stream and a release each wait for the device's work.

use crate::common::{eventually, watchdog};
use crate::{CPU, log_now};
use eddy::vm::VmBuilder;
use eddy::vm::stream::async_device::AsyncDevice;
use eddy::vm::testing::{Cheap, DeviceOp, Log, Noop, Record};
use std::sync::Arc;
use std::time::Duration;

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

/// On a stream whose memory is stream-ordered (a CUDA stream), a release frees its own
/// allocator's memory when launched: the next op on the stream gets the same block while the
/// device has not yet run either op, and the device still runs them in order.
#[test]
fn a_release_of_stream_ordered_memory_frees_at_launch() {
    watchdog(30, || {
        let dev = AsyncDevice::new(0);
        let mut b = VmBuilder::new();
        let q = b.add_stream(Arc::new(dev.stream("compute").with_ordered_memory()));
        let vm = b.build().unwrap();
        dev.set_waker(vm.waker());
        let alloc = vm.allocator(eddy::vm::Device::Test(0)).unwrap();
        let log = Log::default();
        let x = vm.new_blob(1 << 20);
        let l1 = log.clone();
        vm.run(
            q,
            DeviceOp::new(vec![], vec![x.clone()], move || l1.lock().push(1)),
        )
        .unwrap();
        vm.sync().unwrap();
        let first = x.as_ptr();
        vm.release(&x).unwrap();
        drop(x);
        // Launched, not run: yet the memory is back, with no event to wait for.
        vm.sync().unwrap();
        assert_eq!(alloc.stats().in_use, 0, "freed at launch");
        assert_eq!(
            dev.queued(0),
            1,
            "only the op is queued: no event for the free"
        );
        let y = vm.new_blob(1 << 20);
        let l2 = log.clone();
        vm.run(
            q,
            DeviceOp::new(vec![], vec![y.clone()], move || l2.lock().push(2)),
        )
        .unwrap();
        vm.sync().unwrap();
        assert_eq!(
            y.as_ptr(),
            first,
            "the next op on the stream reuses the block"
        );
        assert!(log.lock().is_empty(), "the device has run nothing yet");
        dev.run_all();
        assert_eq!(log_now(&log), vec![1, 2], "in stream order");
    });
}

/// Memory from another stream's allocator is not the releasing stream's to hand out: its
/// free still waits for the device to finish the stream's work.
#[test]
fn memory_of_another_streams_allocator_goes_back_after_the_device_finishes() {
    watchdog(30, || {
        let dev = AsyncDevice::new(0);
        let pool = eddy::vm::alloc::DeviceAllocator::new(
            Box::new(eddy::vm::alloc::CpuBackend::new(None)),
            eddy::vm::alloc::AllocMode::Caching,
        );
        let mut b = VmBuilder::new();
        let q0 = b.add_stream(Arc::new(dev.stream("compute").with_ordered_memory()));
        let q1 = b.add_stream(Arc::new(
            dev.stream("copy")
                .with_ordered_memory()
                .with_allocator(pool.clone()),
        ));
        let vm = b.build().unwrap();
        dev.set_waker(vm.waker());
        let y = vm.new_blob(1 << 20);
        vm.run(q1, DeviceOp::new(vec![], vec![y.clone()], || {}))
            .unwrap();
        vm.run(q0, DeviceOp::new(vec![y.clone()], vec![], || {}))
            .unwrap();
        vm.release(&y).unwrap();
        drop(y);
        assert!(eventually(5_000, || pool.stats().in_use >= 1 << 20));
        std::thread::sleep(Duration::from_millis(30));
        assert!(
            pool.stats().in_use >= 1 << 20,
            "the copy stream's memory went back while the compute stream may read it"
        );
        dev.run_all();
        assert!(eventually(5_000, || pool.stats().in_use == 0));
        vm.sync().unwrap();
    });
}

/// A fault the device reports for awaited work poisons what the waiting instruction covers:
/// a host read of a device op's output fails with the device's message instead of reading
/// what the device never wrote, and the engine goes on.
#[test]
fn a_device_fault_reported_by_an_event_reaches_the_host_read() {
    watchdog(30, || {
        let dev = AsyncDevice::new(0);
        let mut b = VmBuilder::new();
        let q = b.add_stream(Arc::new(dev.stream("compute")));
        let vm = b.build().unwrap();
        dev.set_waker(vm.waker());
        let x = vm.new_blob(8);
        vm.run(q, DeviceOp::new(vec![], vec![x.clone()], || {}))
            .unwrap();
        let (v2, x2) = (vm.clone(), x.clone());
        let reader = std::thread::spawn(move || v2.read_blob(&x2, |b| b.len()));
        assert!(
            eventually(5_000, || dev.queued(0) == 2),
            "op and event queued"
        );
        dev.fault("an illegal address");
        dev.run_all();
        let e = reader.join().unwrap().unwrap_err();
        assert!(e.to_string().contains("an illegal address"), "{e}");
        // Work on other blobs still runs.
        let z = vm.new_blob(8);
        vm.write_blob(&z, |b| b.fill(3)).unwrap();
        assert_eq!(vm.read_blob(&z, |b| b[0]).unwrap(), 3);
    });
}

/// An engine with a device stream keeps the host's direct path for host work that never
/// touched the device (a cheap op on an idle engine runs on the caller's thread), while host
/// work after device work still waits for the device.
#[test]
fn host_work_keeps_its_direct_path_on_an_engine_with_a_device() {
    watchdog(30, || {
        let dev = AsyncDevice::new(0);
        let mut b = VmBuilder::new();
        let q = b.add_stream(Arc::new(dev.stream("compute")));
        let vm = b.build().unwrap();
        dev.set_waker(vm.waker());
        let host = vm.new_blob(8);
        vm.write_blob(&host, |b| b.fill(1)).unwrap();
        // Most of a loop of cheap host ops runs at once on this thread (through the builder and
        // the scheduler thread, none would); "most", as a loaded machine may hold the
        // scheduler at times.
        let (n, before) = (10_000, vm.stats().inlined);
        for _ in 0..n {
            vm.run(
                CPU,
                Cheap(Noop::new(vec![host.clone()], vec![host.clone()])),
            )
            .unwrap();
        }
        vm.sync().unwrap();
        let inlined = vm.stats().inlined - before;
        assert!(
            inlined * 2 >= n,
            "only {inlined} of {n} host ops ran at once on an engine with a device stream"
        );
        // After device work on the blob, the same op waits for the device.
        let log = Log::default();
        let l1 = log.clone();
        vm.run(
            q,
            DeviceOp::new(vec![], vec![host.clone()], move || l1.lock().push(1)),
        )
        .unwrap();
        vm.run(CPU, Record::new(2, vec![host.clone()], vec![], &log))
            .unwrap();
        std::thread::sleep(Duration::from_millis(30));
        assert!(
            log_now(&log).is_empty(),
            "the host op ran before the device"
        );
        dev.run_all();
        vm.sync().unwrap();
        assert_eq!(log_now(&log), vec![1, 2]);
    });
}

/// A device's three streams, as a CUDA device has them (host-to-device, compute,
/// device-to-host) and a host reader: each consumer waits for its producer whatever order the
/// device runs its queues in (here: the last queue first, one step at a time).
#[test]
fn copies_and_compute_on_three_device_streams_keep_their_order() {
    watchdog(30, || {
        let dev = AsyncDevice::new(0);
        let mut b = VmBuilder::new();
        let h2d = b.add_stream(Arc::new(dev.stream("h2d").with_ordered_memory()));
        let compute = b.add_stream(Arc::new(dev.stream("compute").with_ordered_memory()));
        let d2h = b.add_stream(Arc::new(dev.stream("d2h").with_ordered_memory()));
        let vm = b.build().unwrap();
        dev.set_waker(vm.waker());
        let log = Log::default();
        let (x, y, z) = (vm.new_blob(64), vm.new_blob(64), vm.new_blob(64));
        let step = |id: u64| {
            let l = log.clone();
            move || l.lock().push(id)
        };
        vm.run(h2d, DeviceOp::new(vec![], vec![x.clone()], step(1)))
            .unwrap();
        vm.run(
            compute,
            DeviceOp::new(vec![x.clone()], vec![y.clone()], step(2)),
        )
        .unwrap();
        vm.run(
            d2h,
            DeviceOp::new(vec![y.clone()], vec![z.clone()], step(3)),
        )
        .unwrap();
        // WAR: the upload stream overwrites its source only after the compute read it.
        vm.run(h2d, DeviceOp::new(vec![], vec![x.clone()], step(4)))
            .unwrap();
        let (v2, z2, l2) = (vm.clone(), z.clone(), log.clone());
        let reader = std::thread::spawn(move || v2.read_blob(&z2, move |_| l2.lock().push(5)));
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let pump = std::thread::spawn({
            let (dev, done) = (dev.clone(), done.clone());
            move || {
                while !done.load(std::sync::atomic::Ordering::SeqCst) {
                    for q in [2, 1, 0] {
                        dev.run_next(q);
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        });
        reader.join().unwrap().unwrap();
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        let order = log_now(&log);
        let pos = |id| order.iter().position(|&k| k == id).expect("ran");
        assert!(
            pos(1) < pos(2) && pos(2) < pos(3) && pos(3) < pos(5),
            "{order:?}"
        );
        assert!(
            pos(2) < pos(4),
            "the upload overwrote x before compute read it: {order:?}"
        );
        pump.join().unwrap();
        vm.sync().unwrap();
    });
}

/// Out of memory on a device stream whose freed memory waits for an event: the out-of-memory
/// path waits for the device to reach that event, frees, shrinks and retries, and the caller
/// never sees it.
#[test]
fn out_of_memory_on_a_device_waits_for_a_deferred_free_and_retries() {
    watchdog(30, || {
        let dev = AsyncDevice::new(0);
        let pool = eddy::vm::alloc::DeviceAllocator::new(
            Box::new(eddy::vm::alloc::CpuBackend::new(Some(2 << 20))),
            eddy::vm::alloc::AllocMode::Caching,
        );
        let mut b = VmBuilder::new();
        let compute = b.add_stream(Arc::new(dev.stream("compute").with_ordered_memory()));
        let copy = b.add_stream(Arc::new(
            dev.stream("copy")
                .with_ordered_memory()
                .with_allocator(pool.clone()),
        ));
        let vm = b.build().unwrap();
        dev.set_waker(vm.waker());
        let big = 3 << 19; // 1.5 MiB: two do not fit
        let y = vm.new_blob(big);
        vm.run(copy, DeviceOp::new(vec![], vec![y.clone()], || {}))
            .unwrap();
        vm.run(compute, DeviceOp::new(vec![y.clone()], vec![], || {}))
            .unwrap();
        vm.release(&y).unwrap(); // on the compute stream: memory of the copy stream's pool
        drop(y);
        let z = vm.new_blob(big);
        vm.run(copy, DeviceOp::new(vec![], vec![z.clone()], || {}))
            .unwrap();
        // The device runs later: until then the retry has nothing to free.
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (d, stop) = (dev.clone(), done.clone());
        let pump = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                d.run_all();
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        vm.sync().unwrap();
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        assert!(z.is_allocated());
        let stats = pool.stats();
        assert!(stats.oom_retries >= 1, "{stats:?}");
        assert_eq!(vm.stats().ooms, 0, "the caller never saw it");
        pump.join().unwrap();
    });
}
