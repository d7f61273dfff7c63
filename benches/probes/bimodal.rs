//! Whether a slow repetition of a small workload is Eddy's or the host's: each repetition
//! first times a calibration chunk of plain Rust (`eddy::bench::host_chunk`: small
//! allocations, a hash map, indirect calls; no engine), then the workload, and prints both
//! with what the engine did (how many ops ran at once on the calling thread,
//! `VmStats::inlined`, of those dispatched) and the process's context switches. A slow
//! workload beside a fast calibration is Eddy's; both slow together is the host.
//!
//! `cargo bench --bench bimodal -- [small|infer] [REPS]`: `small` is `dispatch_small`'s
//! loop (10,000 adds on 16 floats between two syncs), `infer` `mlp_infer`'s (30 batch-1
//! forwards of the 784-512-512-10 MLP, each synced). Run it in several fresh processes.

#[global_allocator]
static GLOBAL: eddy::Malloc = eddy::Malloc;

use eddy::models::mlp;
use eddy::tensor::nn::Module;
use eddy::tensor::{DType, Tensor, no_grad};
use std::time::Instant;

/// Each thread's name and its voluntary and involuntary context switches.
fn switches() -> Vec<(String, u64, u64)> {
    let mut out = Vec::new();
    for t in std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
    {
        let s = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        let (mut name, mut v, mut n) = (String::new(), 0, 0);
        for line in s.lines() {
            let field = || line.split_whitespace().nth(1).unwrap_or("").to_string();
            if line.starts_with("Name:") {
                name = field();
            } else if line.starts_with("voluntary_ctxt_switches") {
                v = field().parse().unwrap_or(0);
            } else if line.starts_with("nonvoluntary_ctxt_switches") {
                n = field().parse().unwrap_or(0);
            }
        }
        out.push((name, v, n));
    }
    out.sort();
    out
}

/// The switches between two readings, per thread that had any: `name vol/invol`.
fn delta(a: &[(String, u64, u64)], b: &[(String, u64, u64)]) -> String {
    let mut s = String::new();
    for (x, y) in a.iter().zip(b) {
        let (v, n) = (y.1 - x.1, y.2 - x.2);
        if v + n > 0 {
            s += &format!(" {} {v}/{n}", x.0);
        }
    }
    s
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let what = args.next().unwrap_or_else(|| "small".into());
    let reps: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let x = Tensor::ones([16], DType::F32)?;
    let vm = x.engine().clone();
    let model = mlp(&[784, 512, 512, 10])?;
    let input = Tensor::randn([1, 784], 0.0, 1.0, DType::F32)?;
    let _g = no_grad();
    for r in 0..reps {
        let cal = eddy::bench::host_chunk();
        let (s0, c0) = (vm.stats(), switches());
        let t = Instant::now();
        let (per, unit) = if what == "infer" {
            for _ in 0..30 {
                model.forward(&input)?.sync()?;
            }
            (t.elapsed().as_nanos() as f64 / 30_000.0, "us/fwd")
        } else {
            let mut y = Tensor::zeros([16], DType::F32)?;
            for _ in 0..10_000 {
                y = y.add(&x)?;
            }
            y.sync()?;
            (t.elapsed().as_nanos() as f64 / 10_000.0, "ns/op")
        };
        let (s1, c1) = (vm.stats(), switches());
        println!(
            "rep {r:3}: calibration {cal:5.1} ns/step | {what} {per:7.1} {unit}, inlined {:5} of {:5}, switches (vol/invol):{}",
            s1.inlined - s0.inlined,
            s1.dispatched - s0.dispatched,
            delta(&c0, &c1),
        );
    }
    Ok(())
}
