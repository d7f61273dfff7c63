//! An idle engine must not burn a core (OneFlow's VM keeps ~1.9 cores busy here), nor must the
//! kernel pool's helpers once their spin after the last job is over. Its own test binary, so no
//! other test's threads run while the process's CPU time is measured.

use eddy::vm::stream::{Exec, cpu::CpuStream};
use eddy::vm::testing::Noop;
use eddy::vm::{StreamId, VmBuilder};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Process CPU time (user + system), from /proc/self/stat (ticks of 10 ms).
fn cpu_time() -> Duration {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap();
    let f: Vec<&str> = s.rsplit(')').next().unwrap().split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

#[test]
fn an_idle_engine_and_kernel_pool_use_under_one_percent_of_a_core() {
    let mut b = VmBuilder::new();
    b.add_stream(Arc::new(CpuStream::new("worker", Exec::Worker)));
    let vm = b.build().unwrap();
    // Some work first, so every thread has run and gone back to sleep.
    let x = vm.new_blob(64);
    for s in [StreamId::CPU, StreamId(1)] {
        for _ in 0..1000 {
            vm.run(s, Noop::new(vec![], vec![x.clone()])).unwrap();
        }
    }
    vm.sync().unwrap();
    // Jobs on the kernel pool, so its helpers have started, spun, and must have parked.
    let hits = std::sync::atomic::AtomicUsize::new(0);
    for _ in 0..100 {
        eddy::vm::par::for_each(8, |_| {
            hits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        });
    }
    assert_eq!(hits.into_inner(), 800);
    std::thread::sleep(Duration::from_millis(100));
    let (c0, t0) = (cpu_time(), Instant::now());
    std::thread::sleep(Duration::from_secs(1));
    let used = cpu_time() - c0;
    let per_s = used.as_secs_f64() / t0.elapsed().as_secs_f64();
    assert!(
        per_s < 0.01,
        "idle engine used {:.1} ms of CPU per second",
        per_s * 1e3
    );
    // And it still works after idling.
    vm.run(StreamId::CPU, Noop::new(vec![x.clone()], vec![]))
        .unwrap();
    vm.sync().unwrap();
}
