//! The benchmark's training step run three ways, each in a fresh process of its own, in
//! turns: eager, eager on an engine with automatic promotion, and as a compiled graph. A slow
//! phase of the host hits the three alike. Prints each way's median ms per step (over the
//! processes' medians), its ratio to eager, the time until the step's last call returned
//! (the rest is waiting for the loss), and the share of the compiled graph's gain that
//! promotion gets, from the medians and as the median of the rounds' own shares.
//!
//! `cargo bench --bench train_modes -- [ROUNDS] [STEPS]` (10 rounds of 50 steps by default).
//! `-- eager|promoted|graph STEPS` runs one process's part and prints its medians; with
//! `EDDY_VM_TRACE=1` it also prints the median plan run, the median gap between runs, and the engine's instructions by
//! name (µs and runs per step) to standard error.
#[global_allocator]
static GLOBAL: eddy::Malloc = eddy::Malloc;

use eddy::models::train_step;
use eddy::tensor::graph::Graph;
use eddy::tensor::nn::Module;
use eddy::tensor::optim::Optimizer;
use eddy::tensor::{Tensor, with_engine};
use std::cell::RefCell;
use std::time::Instant;

type R<T> = Result<T, Box<dyn std::error::Error>>;

const MODES: [&str; 3] = ["eager", "promoted", "graph"];

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One way's steps in this process: (median ms per step, median ms until the last call
/// returned, the last loss's bits).
fn part(mode: &str, steps: usize) -> R<(f64, f64, u32)> {
    let (model, opt, x, y) = eddy::bench::mlp_setup()?;
    let opt = RefCell::new(opt);
    let graph = Graph::new(|xs: &[Tensor]| {
        let mut opt = opt.borrow_mut();
        opt.zero_grad();
        let loss = model.forward(&xs[0])?.cross_entropy(&xs[1])?;
        loss.backward()?;
        opt.step()?;
        Ok(vec![loss])
    });
    let step = || -> R<Tensor> {
        Ok(match mode {
            "graph" => graph.run(&[&x, &y])?.remove(0),
            _ => train_step(&model, &mut *opt.borrow_mut(), &x, &y)?,
        })
    };
    let (mut walls, mut calls, mut last) = (vec![], vec![], 0.0f32);
    for i in 0..steps + 5 {
        let t = Instant::now();
        let loss = step()?;
        let c = t.elapsed().as_secs_f64() * 1e3;
        last = loss.item::<f32>()?;
        if i >= 5 {
            walls.push(t.elapsed().as_secs_f64() * 1e3);
            calls.push(c);
        }
    }
    Ok((median(&mut walls), median(&mut calls), last.to_bits()))
}

/// With `EDDY_VM_TRACE=1`: the engine's instructions by name, µs and runs per step, to standard error.
fn trace_summary(vm: &eddy::vm::Vm, steps: usize) -> R<()> {
    vm.barrier()?;
    let mut rows: Vec<(String, f64, usize)> = vec![];
    let events = vm.trace_events();
    let runs: Vec<(f64, f64)> = (events.iter())
        .filter(|e| e.name == "plan")
        .map(|e| (e.start_us, e.dur_us))
        .collect();
    if runs.len() > 1 {
        let mut durs: Vec<f64> = runs.iter().map(|r| r.1).collect();
        let mut gaps: Vec<f64> = (runs.windows(2))
            .map(|w| w[1].0 - (w[0].0 + w[0].1))
            .collect();
        eprintln!(
            "plan runs: {}, median {:.1} µs, median gap between runs {:.1} µs",
            runs.len(),
            median(&mut durs),
            median(&mut gaps)
        );
    }
    for e in events {
        match rows.iter_mut().find(|(n, ..)| *n == e.name) {
            Some(r) => {
                r.1 += e.dur_us;
                r.2 += 1;
            }
            None => rows.push((e.name.clone(), e.dur_us, 1)),
        }
    }
    rows.sort_by(|a, b| b.1.total_cmp(&a.1));
    for (n, d, k) in rows.iter().take(16) {
        let per = steps as f64;
        eprintln!("{n:32} {:10.1} µs {:6.1} runs", d / per, *k as f64 / per);
    }
    Ok(())
}

fn main() -> R<()> {
    let args: Vec<String> = (std::env::args().skip(1))
        .filter(|a| a != "--bench")
        .collect();
    if let Some(mode) = args.first().filter(|a| MODES.contains(&a.as_str())) {
        let steps = args.get(1).map_or(Ok(50), |s| s.parse())?.max(1);
        let (wall, calls, bits) = if *mode == "promoted" {
            let vm = (eddy::vm::Vm::builder().promotion(true))
                .promotion_measured(false)
                .build()?;
            let r = with_engine(&vm, || {
                let r = part(mode, steps)?;
                if std::env::var_os("EDDY_VM_TRACE").is_some() {
                    trace_summary(&vm, steps + 5)?;
                }
                Ok::<_, Box<dyn std::error::Error>>(r)
            })?;
            let s = vm.promotion_stats().ok_or("promotion is off")?;
            if s.plan_runs + 10 < steps as u64 {
                return Err(format!("only {} of {steps} steps ran as plans", s.plan_runs).into());
            }
            r
        } else {
            part(mode, steps)?
        };
        println!("{wall} {calls} {bits}");
        if std::env::var_os("EDDY_VM_TRACE").is_some() && *mode != "promoted" {
            trace_summary(&eddy::tensor::default_engine()?, steps + 5)?;
        }
        return Ok(());
    }
    let rounds: usize = args.first().map_or(Ok(10), |s| s.parse())?;
    let steps: usize = args.get(1).map_or(Ok(50), |s| s.parse())?;
    let me = std::env::current_exe()?;
    let mut got: [(Vec<f64>, Vec<f64>); 3] = Default::default();
    let mut bits: [Option<String>; 3] = Default::default();
    for _ in 0..rounds.max(1) {
        for (k, mode) in MODES.iter().enumerate() {
            let out = std::process::Command::new(&me)
                .args([*mode, &steps.to_string()])
                .output()?;
            if !out.status.success() {
                let err = String::from_utf8_lossy(&out.stderr);
                return Err(format!("{mode}: {err}").into());
            }
            let text = String::from_utf8(out.stdout)?;
            let v: Vec<&str> = text.split_whitespace().collect();
            got[k].0.push(v[0].parse()?);
            got[k].1.push(v[1].parse()?);
            bits[k] = Some(v[2].to_string());
        }
    }
    if bits[0] != bits[1] || bits[0] != bits[2] {
        return Err(format!("the three ways' last losses differ (bits {bits:?})").into());
    }
    // Each round's own share (before the medians sort the rounds): a slow phase of the host
    // longer than a round moves the three ways of that round alike.
    let mut shares: Vec<f64> = (0..got[0].0.len())
        .map(|r| (got[0].0[r] - got[1].0[r]) / (got[0].0[r] - got[2].0[r]))
        .collect();
    let [e, a, g] = got.each_mut().map(|(w, c)| (median(w), median(c)));
    println!(
        "eager     {:.3} ms/step                (calls {:.3})",
        e.0, e.1
    );
    for (name, m) in [("promoted ", a), ("graph    ", g)] {
        println!(
            "{name} {:.3} ms/step  {:.3} × eager  (calls {:.3})",
            m.0,
            m.0 / e.0,
            m.1
        );
    }
    println!(
        "promotion gets {:.0} % of the graph's gain (the median round: {:.0} %)",
        100.0 * (e.0 - a.0) / (e.0 - g.0),
        100.0 * median(&mut shares)
    );
    Ok(())
}
