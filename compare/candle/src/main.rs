//! The benchmark workloads (book: performance) written for candle, printing the same JSON object as
//! `eddy bench --json` (`"framework": "candle"`), so that `compare/run.sh` can run both on one
//! host, interleaved, and report ratios instead of figures taken on different days.
//!
//! Each workload follows Eddy's `src/bench.rs` line for line: the same sizes, warm-ups, 7
//! repetitions and checks, except that candle cannot seed its CPU generator, so its random
//! weights and batch differ from run to run. candle is synchronous, so where Eddy syncs, nothing is needed; where
//! Eddy turns autograd off (`mlp_infer`), the weights are detached from their variables.
//!
//! ```text
//! cargo run --release -- --json [--only KEY,...]
//! ```

use candle_core::{DType, Device, Module, Result, Tensor};
use candle_nn::{Linear, Optimizer, VarBuilder, VarMap, SGD};
use std::collections::BTreeMap;
use std::time::Instant;

const REPS: usize = 7;

fn reps(warmup: usize, mut f: impl FnMut() -> Result<f64>) -> Result<Vec<f64>> {
    for _ in 0..warmup {
        f()?;
    }
    (0..REPS).map(|_| f()).collect()
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

fn check(ok: bool, msg: &str) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(candle_core::Error::Msg(msg.into()))
    }
}

fn dispatch_small(dev: &Device) -> Result<Vec<f64>> {
    let x = Tensor::ones(16, DType::F32, dev)?;
    reps(1, || {
        let mut y = Tensor::zeros(16, DType::F32, dev)?;
        let t = Instant::now();
        for _ in 0..10_000 {
            y = y.add(&x)?;
        }
        let ns = t.elapsed().as_nanos() as f64 / 10_000.0;
        check(
            y.to_vec1::<f32>()?[0] == 10_000.0,
            "dispatch_small: wrong sum",
        )?;
        Ok(ns)
    })
}

fn dispatch_mixed(dev: &Device) -> Result<Vec<f64>> {
    let x = Tensor::full(1.0f32 / 64.0, 64, dev)?;
    reps(1, || {
        let mut y = Tensor::ones(64, DType::F32, dev)?;
        let t = Instant::now();
        for _ in 0..2_500 {
            y = y.add(&x)?;
            y = y.mul(&x)?;
            y = y.relu()?;
            y = y.sum_all()?.broadcast_as(64)?;
        }
        let ns = t.elapsed().as_nanos() as f64 / 10_000.0;
        let v = y.to_vec1::<f32>()?;
        check(
            v.iter().all(|v| v.is_finite() && *v > 0.0),
            "dispatch_mixed: values not finite",
        )?;
        Ok(ns)
    })
}

fn add_large(dev: &Device) -> Result<Vec<f64>> {
    let n = 16 << 20;
    let a = Tensor::rand(0f32, 1f32, n, dev)?;
    let b = Tensor::rand(0f32, 1f32, n, dev)?;
    let mut c = a.add(&b)?;
    reps(2, || {
        let iters = 10;
        let t = Instant::now();
        for _ in 0..iters {
            drop(c.clone());
            c = a.add(&b)?;
        }
        Ok(3.0 * (n * 4) as f64 * iters as f64 / t.elapsed().as_secs_f64() / 1e9)
    })
}

fn matmul(n: usize, dev: &Device) -> Result<Vec<f64>> {
    let a = Tensor::randn(0f32, 1f32, (n, n), dev)?;
    let b = Tensor::randn(0f32, 1f32, (n, n), dev)?;
    a.matmul(&b)?; // warm-up
    let t = Instant::now();
    a.matmul(&b)?;
    let one = t.elapsed().as_secs_f64();
    let iters = ((0.25 / one.max(1e-6)) as usize).clamp(1, 10_000);
    reps(1, || {
        let t = Instant::now();
        for _ in 0..iters {
            a.matmul(&b)?;
        }
        Ok(2.0 * (n * n * n) as f64 * iters as f64 / t.elapsed().as_secs_f64() / 1e9)
    })
}

/// The MLP 784-512-512-10 with ReLU between the layers.
struct Mlp(Vec<Linear>);

impl Mlp {
    fn new(vb: VarBuilder) -> Result<Mlp> {
        let sizes = [784, 512, 512, 10];
        let layers = sizes
            .windows(2)
            .enumerate()
            .map(|(i, w)| candle_nn::linear(w[0], w[1], vb.pp(format!("l{i}"))))
            .collect::<Result<_>>()?;
        Ok(Mlp(layers))
    }

    /// The same model with its weights detached from their variables: no autograd graph.
    fn detached(&self) -> Mlp {
        Mlp(self
            .0
            .iter()
            .map(|l| Linear::new(l.weight().detach(), l.bias().map(|b| b.detach())))
            .collect())
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut h = x.clone();
        for (i, l) in self.0.iter().enumerate() {
            h = l.forward(&h)?;
            if i + 1 < self.0.len() {
                h = h.relu()?;
            }
        }
        Ok(h)
    }
}

fn mlp_setup(dev: &Device) -> Result<(Mlp, SGD, Tensor, Tensor)> {
    let vars = VarMap::new();
    let vb = VarBuilder::from_varmap(&vars, DType::F32, dev);
    let model = Mlp::new(vb)?;
    let opt = SGD::new(vars.all_vars(), 0.01)?;
    let x = Tensor::randn(0f32, 1f32, (128, 784), dev)?;
    let y = Tensor::rand(0f32, 10f32, 128, dev)?
        .clamp(0f32, 9f32)?
        .to_dtype(DType::U32)?;
    Ok((model, opt, x, y))
}

fn train_step(model: &Mlp, opt: &mut SGD, x: &Tensor, y: &Tensor) -> Result<Tensor> {
    let loss = candle_nn::loss::cross_entropy(&model.forward(x)?, y)?;
    opt.backward_step(&loss)?;
    Ok(loss)
}

fn mlp_train(dev: &Device) -> Result<(Vec<f64>, f64, f64)> {
    let (model, mut opt, x, y) = mlp_setup(dev)?;
    for _ in 0..5 {
        train_step(&model, &mut opt, &x, &y)?.to_scalar::<f32>()?;
    }
    let mut times = Vec::with_capacity(50);
    let (mut first, mut last) = (f64::NAN, f64::NAN);
    for i in 0..50 {
        let t = Instant::now();
        let l = train_step(&model, &mut opt, &x, &y)?.to_scalar::<f32>()? as f64;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        if i == 0 {
            first = l;
        }
        last = l;
    }
    Ok((times, first, last))
}

fn mlp_train_nosync(dev: &Device) -> Result<Vec<f64>> {
    let (model, mut opt, x, y) = mlp_setup(dev)?;
    for _ in 0..5 {
        train_step(&model, &mut opt, &x, &y)?.to_scalar::<f32>()?;
    }
    (0..5)
        .map(|_| {
            let t = Instant::now();
            let mut l = None;
            for _ in 0..10 {
                l = Some(train_step(&model, &mut opt, &x, &y)?);
            }
            l.expect("ten steps").to_scalar::<f32>()?;
            Ok(t.elapsed().as_secs_f64() * 1e3 / 10.0)
        })
        .collect()
}

fn mlp_infer(dev: &Device) -> Result<Vec<f64>> {
    let vars = VarMap::new();
    let model = Mlp::new(VarBuilder::from_varmap(&vars, DType::F32, dev))?.detached();
    let x = Tensor::randn(0f32, 1f32, (1, 784), dev)?;
    reps(1, || {
        let t = Instant::now();
        for _ in 0..300 {
            let out = model.forward(&x)?;
            check(out.dims() == [1, 10], "mlp_infer: wrong shape")?;
        }
        Ok(t.elapsed().as_secs_f64() * 1e6 / 300.0)
    })
}

/// `VmRSS` and `VmHWM` of this process, in MiB.
fn rss_mb() -> (f64, f64) {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let get = |k: &str| {
        s.lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    };
    (get("VmRSS:"), get("VmHWM:"))
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let only: Vec<String> = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.split(',').map(String::from).collect())
        .unwrap_or_default();
    let child = args.iter().any(|a| a == "--child");
    let want = |k: &str| only.is_empty() || only.iter().any(|o| o == k);
    let dev = Device::Cpu;
    let mut samples: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    if child {
        // A fresh process that runs only the training workload: its memory figures.
        let (base, _) = rss_mb();
        let (t, first, last) = mlp_train(&dev)?;
        let (_, peak) = rss_mb();
        samples.insert("mlp_train_ms_per_step".into(), t);
        samples.insert("mlp_train_base_rss_mb".into(), vec![base]);
        samples.insert("mlp_train_peak_rss_mb".into(), vec![peak]);
        samples.insert("mlp_train_loss_first".into(), vec![first]);
        samples.insert("mlp_train_loss_last".into(), vec![last]);
    } else {
        if want("dispatch_small_ns_per_op") {
            samples.insert("dispatch_small_ns_per_op".into(), dispatch_small(&dev)?);
        }
        if want("dispatch_mixed_ns_per_op") {
            samples.insert("dispatch_mixed_ns_per_op".into(), dispatch_mixed(&dev)?);
        }
        if want("add_large_gbps") {
            samples.insert("add_large_gbps".into(), add_large(&dev)?);
        }
        for n in [256, 512, 1024] {
            let k = format!("matmul_{n}_gflops");
            if want(&k) {
                samples.insert(k, matmul(n, &dev)?);
            }
        }
        if want("mlp_train_ms_per_step") {
            let exe = std::env::current_exe()?;
            let out = std::process::Command::new(exe).arg("--child").output()?;
            if !out.status.success() {
                return Err(String::from_utf8_lossy(&out.stderr).into_owned().into());
            }
            let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
            for (k, s) in v["samples"].as_object().ok_or("child output")? {
                let s = s.as_array().ok_or("child samples")?;
                samples.insert(k.clone(), s.iter().filter_map(|x| x.as_f64()).collect());
            }
        }
        if want("mlp_train_ms_per_step_nosync") {
            samples.insert("mlp_train_ms_per_step_nosync".into(), mlp_train_nosync(&dev)?);
        }
        if want("mlp_infer_us_per_fwd") {
            samples.insert("mlp_infer_us_per_fwd".into(), mlp_infer(&dev)?);
        }
    }
    let metrics: serde_json::Map<_, _> = samples
        .iter()
        .map(|(k, s)| (k.clone(), median(s).into()))
        .collect();
    let threads = candle_core::utils::get_num_threads();
    let v = serde_json::json!({
        "framework": "candle",
        "meta": {"version": "0.11", "threads": threads, "notes": "compare/candle: Eddy's benchmark workloads"},
        "metrics": metrics,
        "samples": samples,
    });
    println!("{v}");
    Ok(())
}
