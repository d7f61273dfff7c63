//! Per-instruction durations of the benchmark's training step: the median of each position's
//! duration over the steps, in µs, for those above 5 µs.
//!
//! `EDDY_VM_TRACE=1 cargo run --release --example train_trace [STEPS]` (20 steps by default;
//! the engine records its trace only with `EDDY_VM_TRACE=1`).
#[global_allocator]
static GLOBAL: eddy::Malloc = eddy::Malloc;

use eddy::models::{mlp, train_step};
use eddy::tensor::optim::Sgd;
use eddy::tensor::{DType, Tensor, manual_seed as manual_seed_all};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let steps: usize = std::env::args().nth(1).map_or(Ok(20), |s| s.parse())?;
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
        .clamp(Some(0.0), Some(9.0))?;
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
    if ev.is_empty() || ev.len() % steps != 0 {
        return Err(format!(
            "{} trace events for {steps} steps: run with EDDY_VM_TRACE=1",
            ev.len()
        )
        .into());
    }
    let per = ev.len() / steps;
    println!("{} events, {per} per step", ev.len());
    let mut rows: Vec<(String, Vec<f64>)> = vec![];
    for (i, e) in ev.iter().enumerate() {
        let k = i % per;
        if rows.len() <= k {
            rows.push((e.name.clone(), vec![]));
        }
        rows[k].1.push(e.dur_us);
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    let mut total = 0.0;
    for (k, (n, v)) in rows.iter_mut().enumerate() {
        let m = med(v);
        total += m;
        if m > 5.0 {
            println!("{k:3} {n:24} {m:8.1}");
        }
    }
    // gaps: first start to last end in each step
    println!(
        "sum of medians {total:.1} us; wall median {:.1} us",
        med(&mut walls)
    );
    Ok(())
}
