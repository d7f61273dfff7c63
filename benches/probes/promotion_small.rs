//! Windows of small ops under automatic promotion: `dispatch_small`'s chain of adds on 16
//! elements, ended by a sync, repeated many times, in a fresh process for each way in turns:
//! eager, promotion measured (the default of `EDDY_VM_PROMOTION=1`) and every window promoted
//! (`always`). Prints each way's ns per op: the median over the later half of the windows
//! (after the timing verdicts are in), the median over the processes; and, for promotion,
//! what it did in the last process.
//!
//! `cargo bench --bench promotion_small -- [ROUNDS] [WINDOWS] [OPS]` (5 rounds of 400 windows of
//! 100 adds by default). `-- eager|measured|always WINDOWS OPS` runs one process's part.
#[global_allocator]
static GLOBAL: eddy::Malloc = eddy::Malloc;

use eddy::tensor::{DType, Tensor, with_engine};
use eddy::vm::Vm;
use std::time::Instant;

type R<T> = Result<T, Box<dyn std::error::Error>>;

const MODES: [&str; 3] = ["eager", "measured", "always"];

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One way's windows: the median ns per op over the later half, and the promotion summary.
fn part(mode: &str, windows: usize, ops: usize) -> R<(f64, String)> {
    let vm = match mode {
        "eager" => Vm::builder().promotion(false).build()?,
        m => (Vm::builder().promotion(true))
            .promotion_measured(m == "measured")
            .build()?,
    };
    let per_op = with_engine(&vm, || -> R<Vec<f64>> {
        let x = Tensor::ones([16], DType::F32)?;
        let mut per_op = Vec::with_capacity(windows);
        for _ in 0..windows {
            let mut y = Tensor::zeros([16], DType::F32)?;
            y.sync()?;
            let t = Instant::now();
            for _ in 0..ops {
                y = y.add(&x)?;
            }
            y.sync()?;
            per_op.push(t.elapsed().as_nanos() as f64 / ops as f64);
            if y.to_vec::<f32>()?[0] != ops as f32 {
                return Err("wrong sum".into());
            }
        }
        Ok(per_op)
    })?;
    let mut later = per_op[windows / 2..].to_vec();
    let s = vm
        .promotion_stats()
        .map_or(String::new(), |s| format!("{s:?}"));
    Ok((median(&mut later), s))
}

fn main() -> R<()> {
    let args: Vec<String> = (std::env::args().skip(1))
        .filter(|a| a != "--bench")
        .collect();
    let num = |k: usize, d: usize| args.get(k).map_or(Ok(d), |s| s.parse()).map(|n| n.max(1));
    if let Some(mode) = args.first().filter(|a| MODES.contains(&a.as_str())) {
        let (ns, stats) = part(mode, num(1, 400)?, num(2, 100)?)?;
        println!("{ns} {stats}");
        return Ok(());
    }
    let (rounds, windows, ops) = (num(0, 5)?, num(1, 400)?, num(2, 100)?);
    let me = std::env::current_exe()?;
    let mut got: [Vec<f64>; 3] = Default::default();
    let mut stats: [String; 3] = Default::default();
    for _ in 0..rounds {
        for (k, mode) in MODES.iter().enumerate() {
            let out = std::process::Command::new(&me)
                .args([*mode, &windows.to_string(), &ops.to_string()])
                .output()?;
            if !out.status.success() {
                let err = String::from_utf8_lossy(&out.stderr);
                return Err(format!("{mode}: {err}").into());
            }
            let text = String::from_utf8(out.stdout)?;
            let (ns, s) = text.trim().split_once(' ').unwrap_or((text.trim(), ""));
            got[k].push(ns.parse()?);
            stats[k] = s.to_string();
        }
    }
    let eager = median(&mut got[0]);
    println!("{windows} windows of {ops} adds, {rounds} processes each; ns per op, later half");
    for (k, mode) in MODES.iter().enumerate() {
        let m = median(&mut got[k]);
        println!("{mode:9} {m:7.1}  {:.2} × eager  {}", m / eager, stats[k]);
    }
    Ok(())
}
