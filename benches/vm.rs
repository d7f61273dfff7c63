//! Engine benchmarks (issue 2): `cargo bench --bench vm [-- --quick] [-- --only KEY]`.
//!
//! | key | what |
//! |---|---|
//! | `vm_chain` | 1,000,000 no-op instructions, each writing one dependence and reading the previous one's, one stream, one submitting thread; ns per instruction from first submit to last release (fusion on, fusion off, compute on a worker thread, synchronous mode) |
//! | `vm_fanout` | the same over 64 independent chains round-robin on 2 streams |
//! | `vm_roundtrip` | one tiny instruction plus a sync; p50 and p99, back to back (warm) and after the engine went to sleep (idle), the idle one also for a cheap instruction (run at once) and beside the operating system's floor (wake a parked thread, wait for its answer) |
//! | `vm_idle_cpu` | CPU time an idle engine burns per second |
//!
//! `--only` takes keys or variant labels, comma-separated (`--only "vm_chain (fusion on)",vm_fanout`).
//!
//! Each figure is the median of 5 repetitions, printed with the spread (min..max).

use eddy::vm::stream::{Exec, cpu::CpuStream};
use eddy::vm::testing::{Cheap, Link};
use eddy::vm::{Blob, StreamId, Vm, VmBuilder};
use eddy_vm::Counted;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn report(key: &str, mut v: Vec<f64>, unit: &str) {
    let (lo, hi) = (
        v.iter().cloned().fold(f64::MAX, f64::min),
        v.iter().cloned().fold(0.0, f64::max),
    );
    let m = median(&mut v);
    println!(
        "{key:<28} {m:>10.1} {unit:<6} (min {lo:.1}, max {hi:.1}, n={})",
        v.len()
    );
}

/// Submits `n` chain ops over `chains` independent chains spread on `streams`; returns ns/instr.
fn chain(vm: &Vm, n: usize, chains: usize, streams: &[StreamId]) -> f64 {
    let ring = 4; // blobs per chain: instruction i reads blob i-1, writes blob i (mod ring)
    let blobs: Vec<Vec<Counted<Blob>>> = (0..chains)
        .map(|_| (0..ring).map(|_| vm.new_blob(0)).collect())
        .collect();
    let mut pos = vec![0usize; chains];
    vm.sync().unwrap();
    let t0 = Instant::now();
    for i in 0..n {
        let c = i % chains;
        let k = pos[c];
        pos[c] += 1;
        let op = Link([blobs[c][k % ring].clone(), blobs[c][(k + 1) % ring].clone()]);
        vm.run(streams[c % streams.len()], op).unwrap();
    }
    vm.sync().unwrap();
    t0.elapsed().as_nanos() as f64 / n as f64
}

fn builder() -> VmBuilder {
    // The defaults, unless `EDDY_VM_*` variables override them (to compare settings).
    VmBuilder::from_env()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .cloned();
    // A key selects a benchmark and all its variants; a variant's label (`--only "vm_chain
    // (fusion on)"`) selects that variant alone.
    let want = |k: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|x| k.starts_with(x) || x.starts_with(k)))
    };
    let reps = if quick { 3 } else { 5 };
    let n = if quick { 200_000 } else { 1_000_000 };

    if want("vm_chain") {
        for (label, b) in [
            ("vm_chain (fusion on)", builder()),
            ("vm_chain (fusion off)", builder().fusion(false)),
            ("vm_chain (worker stream)", builder().cpu_exec(Exec::Worker)),
            ("vm_chain (synchronous)", builder().sync_mode(true)),
        ] {
            if !want(label) {
                continue;
            }
            let vm = b.build().unwrap();
            chain(&vm, n / 10, 1, &[StreamId::CPU]); // warm-up
            let v: Vec<f64> = (0..reps)
                .map(|_| chain(&vm, n, 1, &[StreamId::CPU]))
                .collect();
            report(label, v, "ns/op");
        }
    }
    if want("vm_fanout") {
        let mut b = builder();
        let s1 = b.add_stream(Arc::new(CpuStream::new("cpu-2", Exec::Inline)));
        let vm = b.build().unwrap();
        chain(&vm, n / 10, 64, &[StreamId::CPU, s1]);
        let v: Vec<f64> = (0..reps)
            .map(|_| chain(&vm, n, 64, &[StreamId::CPU, s1]))
            .collect();
        report("vm_fanout", v, "ns/op");
    }
    if want("vm_roundtrip") {
        let vm = builder().build().unwrap();
        let b = [vm.new_blob(0), vm.new_blob(0)];
        let mut lat = Vec::new();
        for i in 0..(if quick { 2_000 } else { 10_000 }) {
            let op = Link(b.clone());
            let t0 = Instant::now();
            vm.run(StreamId::CPU, op).unwrap();
            vm.sync().unwrap();
            let dt = t0.elapsed().as_nanos() as f64 / 1e3;
            if i >= 100 {
                lat.push(dt);
            }
            // Let the engine go idle now and then, as the workload demands ("an idle engine").
            if i % 100 == 99 {
                std::thread::sleep(Duration::from_millis(3));
            }
        }
        lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let p = |v: &[f64], q: f64| v[((v.len() as f64 - 1.0) * q) as usize];
        let line = |k: &str, v: &[f64]| {
            println!(
                "{k:<28} {:>10.1} us     (p99 {:.1} us, n={})",
                p(v, 0.5),
                p(v, 0.99),
                v.len()
            )
        };
        line("vm_roundtrip p50 (warm)", &lat);
        // Idle: the scheduler has stopped spinning and sleeps on its notifier before each op.
        // Interleaved with the same round trip for a cheap instruction (which an idle engine
        // runs at once on the submitting thread, as it does a small tensor op) and with the
        // operating system's floor for any hand-off to a sleeping thread: wake a parked thread
        // through a mutex and condvar and wait for its answer. On a virtual machine that wake
        // is an interrupt to a halted virtual CPU, and it bounds the first figure.
        let os = OsPingPong::new();
        let (mut cold, mut cheap, mut floor) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..(if quick { 100 } else { 400 }) {
            std::thread::sleep(Duration::from_millis(3));
            let op = Link(b.clone());
            let t0 = Instant::now();
            vm.run(StreamId::CPU, op).unwrap();
            vm.sync().unwrap();
            cold.push(t0.elapsed().as_nanos() as f64 / 1e3);

            std::thread::sleep(Duration::from_millis(3));
            let op = Cheap(Link(b.clone()));
            let t0 = Instant::now();
            vm.run(StreamId::CPU, op).unwrap();
            vm.sync().unwrap();
            cheap.push(t0.elapsed().as_nanos() as f64 / 1e3);

            std::thread::sleep(Duration::from_millis(3));
            floor.push(os.round_trip().as_nanos() as f64 / 1e3);
        }
        for v in [&mut cold, &mut cheap, &mut floor] {
            v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        }
        line("vm_roundtrip p50 (idle)", &cold);
        line("vm_roundtrip p50 (idle, cheap)", &cheap);
        line("os wake round trip p50", &floor);
    }
    if want("vm_idle_cpu") {
        let vm = builder().build().unwrap();
        vm.sync().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let v: Vec<f64> = (0..reps)
            .map(|_| {
                let c0 = cpu_time();
                let t0 = Instant::now();
                std::thread::sleep(Duration::from_millis(if quick { 300 } else { 1000 }));
                (cpu_time() - c0).as_secs_f64() * 1e3 / t0.elapsed().as_secs_f64()
            })
            .collect();
        report("vm_idle_cpu", v, "ms/s");
        drop(vm);
    }
}

/// A helper thread parked on a condvar, for the operating system's floor under a hand-off to a
/// sleeping thread: `round_trip` wakes it and waits (spinning, as `Vm::sync` first does) for its
/// answer.
struct OsPingPong {
    state: Arc<(
        parking_lot::Mutex<u64>,
        parking_lot::Condvar,
        std::sync::atomic::AtomicU64,
    )>,
    next: std::cell::Cell<u64>,
}

impl OsPingPong {
    fn new() -> Self {
        let state = Arc::new((
            parking_lot::Mutex::new(0u64),
            parking_lot::Condvar::new(),
            std::sync::atomic::AtomicU64::new(0),
        ));
        let s = state.clone();
        std::thread::spawn(move || {
            let (m, cv, done) = &*s;
            let mut seen = 0;
            loop {
                let mut g = m.lock();
                while *g == seen {
                    cv.wait(&mut g);
                }
                seen = *g;
                drop(g);
                if seen == u64::MAX {
                    return;
                }
                done.store(seen, std::sync::atomic::Ordering::Release);
            }
        });
        OsPingPong {
            state,
            next: std::cell::Cell::new(0),
        }
    }

    fn round_trip(&self) -> Duration {
        let (m, cv, done) = &*self.state;
        let n = self.next.get() + 1;
        self.next.set(n);
        let t0 = Instant::now();
        *m.lock() = n;
        cv.notify_one();
        while done.load(std::sync::atomic::Ordering::Acquire) != n {
            std::hint::spin_loop();
        }
        t0.elapsed()
    }
}

impl Drop for OsPingPong {
    fn drop(&mut self) {
        *self.state.0.lock() = u64::MAX;
        self.state.1.notify_one();
    }
}

/// Process CPU time (user + system) from /proc/self/stat.
fn cpu_time() -> Duration {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = s.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = f.get(11).and_then(|x| x.parse().ok()).unwrap_or(0)
        + f.get(12).and_then(|x| x.parse().ok()).unwrap_or(0);
    Duration::from_millis(ticks * 10) // USER_HZ = 100
}
