//! Per-instruction durations of the benchmark's training step: each instruction name's total
//! duration per step, in µs, for those above 2 µs, against the step's wall time.
//!
//! `EDDY_VM_TRACE=1 cargo bench --bench train_trace -- [STEPS]` (20 steps by default;
//! the engine records its trace only with `EDDY_VM_TRACE=1`).
#[global_allocator]
static GLOBAL: eddy::Malloc = eddy::Malloc;

use eddy::models::{mlp, train_step};
use eddy::tensor::optim::Sgd;
use eddy::tensor::{DType, Tensor, manual_seed as manual_seed_all};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let steps: usize = std::env::args()
        .filter(|a| a != "--bench")
        .nth(1)
        .map_or(Ok(20), |s| s.parse())?;
    if steps == 0 {
        return Err("STEPS must be at least 1".into());
    }
    manual_seed_all(0);
    let model = mlp(&[784, 512, 512, 10])?;
    use eddy::tensor::nn::Module;
    let mut opt = Sgd::new(model.parameters(), 0.01)?;
    let x = Tensor::randn([128, 784], 0.0, 1.0, DType::F32)?;
    let y = Tensor::uniform([128], 0.0, 10.0, DType::F32)?
        .to_dtype(DType::I64)?
        .clamp(Some(0), Some(9))?;
    let vm = eddy::tensor::default_engine()?;
    for _ in 0..5 {
        train_step(&model, &mut opt, &x, &y)?.item::<f32>()?;
    }
    // `item` returns once the loss is known, before the step's updates run: wait for them, so
    // the trace holds whole steps only.
    vm.barrier()?;
    vm.clear_trace();
    let mut walls = vec![];
    for _ in 0..steps {
        let t = Instant::now();
        train_step(&model, &mut opt, &x, &y)?.item::<f32>()?;
        walls.push(t.elapsed().as_secs_f64() * 1e6);
    }
    vm.barrier()?;
    let ev = vm.trace_events();
    if ev.is_empty() {
        return Err("no trace events: run with EDDY_VM_TRACE=1".into());
    }
    // Fused runs of small instructions make the count per step vary: sum by name instead of by
    // position.
    let mut rows: Vec<(String, usize, f64)> = vec![];
    for e in &ev {
        match rows.iter_mut().find(|(n, ..)| *n == e.name) {
            Some(r) => {
                r.1 += 1;
                r.2 += e.dur_us;
            }
            None => rows.push((e.name.clone(), 1, e.dur_us)),
        }
    }
    rows.sort_by(|a, b| b.2.total_cmp(&a.2));
    println!(
        "{} events, {:.1} per step",
        ev.len(),
        ev.len() as f64 / steps as f64
    );
    println!("{:24} {:>8} {:>10}", "instruction", "per step", "µs / step");
    let mut total = 0.0;
    for (n, count, dur) in &rows {
        let per = dur / steps as f64;
        total += per;
        if per > 2.0 {
            println!("{n:24} {:8.1} {per:10.1}", *count as f64 / steps as f64);
        }
    }
    walls.sort_by(f64::total_cmp);
    println!(
        "sum of durations {total:.1} µs per step; wall median {:.1} µs",
        walls[walls.len() / 2]
    );
    Ok(())
}
