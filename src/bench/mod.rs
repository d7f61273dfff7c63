//! The benchmark harness behind `eddy bench --json`: the workloads of the book's performance chapter, with
//! fixed keys, 7 repetitions after a warm-up, medians in `metrics` and every repetition in
//! `samples`.
//!
//! The training workload's memory figures need a fresh process, so [`run`] re-spawns the
//! current executable with `--only mlp_train_ms_per_step --child` and merges what it prints.

mod global;
mod graph;
mod keys;
mod models;
mod pipeline;
mod roof;
mod throughput;

pub use global::{boxing_large, boxing_p_to_b_small, global_add, parallel_train};
pub use graph::{chain_graph, mlp_infer_graph, mlp_train_graph, mlp_train_promoted};
pub use keys::{KEYS, PROCESS_KEYS};
pub use models::{
    attention_fwd, cnn_setup, cnn_train, conv2d_3x3, transformer_setup, transformer_train,
};
pub use pipeline::pipeline;
pub use roof::mlp_train_roof;

use crate::models::{mlp, train_step};
use crate::tensor::manual_seed as manual_seed_all;
use crate::tensor::nn::Module;
use crate::tensor::optim::Sgd;
use crate::{DType, Error, Result, Tensor, no_grad};
use std::collections::BTreeMap;
use std::time::Instant;
pub use throughput::{add_large, copy_large, matmul, matmul_in, matmul_with_roof};

const REPS: usize = 7;

/// Metrics and their samples.
///
/// # Examples
///
/// ```
/// use eddy::bench::Report;
/// let mut r = Report::default();
/// r.metrics.insert("add_large_gbps".into(), 12.5);
/// r.samples.insert("add_large_gbps".into(), vec![12.0, 12.5, 13.0]);
/// let j = r.to_json(2, "");
/// assert_eq!(j["metrics"]["add_large_gbps"], 12.5);
/// assert_eq!(j["samples"]["add_large_gbps"][2], 13.0);
/// ```
#[derive(Default, Debug)]
pub struct Report {
    /// Key → median.
    pub metrics: BTreeMap<String, f64>,
    /// Key → every repetition.
    pub samples: BTreeMap<String, Vec<f64>>,
    /// With `--roof`: key → the roof's samples, each taken right after the same repetition of
    /// Eddy's: for the matmul keys the `gemm` crate's own (see [`matmul_with_roof`]), for
    /// `mlp_infer_us_per_fwd` the forward through the kernels alone (see
    /// [`mlp_infer_with_roof`]); for `mlp_train_ms_per_step` the step's matrix products alone,
    /// after the training (see [`mlp_train_roof`]).
    pub roof: BTreeMap<String, Vec<f64>>,
}

impl Report {
    fn put(&mut self, key: &str, samples: Vec<f64>) {
        self.metrics.insert(key.into(), median(&samples));
        self.samples.insert(key.into(), samples);
    }

    /// The JSON object the benchmark workloads print (book: performance).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::bench::Report;
    /// let mut r = Report::default();
    /// r.metrics.insert("matmul_256_gflops".into(), 80.0);
    /// r.metrics.insert("not_a_key".into(), 1.0); // only `KEYS` are written
    /// let j = r.to_json(4, "quiet host");
    /// assert_eq!(j["framework"], "eddy");
    /// assert_eq!(j["meta"]["threads"], 4);
    /// assert_eq!(j["metrics"].as_object().unwrap().len(), 1);
    /// assert!(j.get("roof").is_none()); // no `--roof` samples
    /// ```
    pub fn to_json(&self, threads: usize, notes: &str) -> serde_json::Value {
        let order = |m: &BTreeMap<String, f64>| -> serde_json::Map<String, serde_json::Value> {
            KEYS.iter()
                .filter_map(|k| m.get(*k).map(|v| (k.to_string(), (*v).into())))
                .collect()
        };
        let samples: serde_json::Map<_, _> = KEYS
            .iter()
            .filter_map(|k| {
                self.samples
                    .get(*k)
                    .map(|v| (k.to_string(), serde_json::json!(v)))
            })
            .collect();
        let mut v = serde_json::json!({
            "framework": "eddy",
            "meta": {"version": env!("CARGO_PKG_VERSION"), "threads": threads, "notes": notes},
            "metrics": order(&self.metrics),
            "samples": samples,
        });
        // Under `mpirun`, the processes are the global keys' ranks.
        if let Ok(w) = crate::tensor::global::world()
            && w.size > 1
        {
            v["meta"]["ranks"] = w.size.into();
            v["meta"]["backend"] = "mpi".into();
        }
        if !self.roof.is_empty() {
            let medians: serde_json::Map<_, _> = (self.roof.iter())
                .map(|(k, s)| (k.clone(), median(s).into()))
                .collect();
            v["roof"] = serde_json::json!({
                "what": "each repetition right after Eddy's: for matmul, the gemm crate called \
                         directly on plain buffers (its own rayon split); for mlp_infer, the \
                         same forward through Eddy's single-row kernel on plain buffers, \
                         without the engine",
                "metrics": medians,
                "samples": self.roof,
            });
        }
        v
    }
}

/// The median (mean of the middle two for an even count).
///
/// # Examples
///
/// ```
/// use eddy::bench::median;
/// assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
/// assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
/// assert!(median(&[]).is_nan());
/// ```
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

fn reps(warmup: usize, mut f: impl FnMut() -> Result<f64>) -> Result<Vec<f64>> {
    for _ in 0..warmup {
        f()?;
    }
    (0..REPS).map(|_| f()).collect()
}

/// The host's own speed, with no engine: 10,000 steps of plain Rust of the kind the small-op
/// path does (a small allocation, a hash-map entry, an indirect call); ns per step. On a
/// shared virtual machine this moves with the host's phases (another guest on the same
/// physical core), so it tells a slow process of Eddy's from a slow moment of the host
/// (`benches/spread.sh`).
///
/// # Examples
///
/// ```
/// let ns = eddy::bench::host()?;
/// assert_eq!(ns.len(), 7);
/// assert!(ns.iter().all(|&x| x > 0.0));
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn host() -> Result<Vec<f64>> {
    reps(1, || Ok(host_chunk()))
}

/// One repetition of [`host`]: ns per step of 10,000 steps of plain Rust.
///
/// ```
/// assert!(eddy::bench::host_chunk() > 0.0);
/// ```
pub fn host_chunk() -> f64 {
    let steps: [fn(u64) -> u64; 3] = [|x| x ^ 7, |x| x.rotate_left(3), |x| x.wrapping_mul(3)];
    let mut acc = 0u64;
    let t = Instant::now();
    let mut m: std::collections::HashMap<u64, Vec<u64>> = Default::default();
    for i in 0..10_000u64 {
        let v = std::hint::black_box(vec![i; 4]);
        let k = steps[(i % 3) as usize](i) % 64;
        m.entry(k).or_default().push(v[0] + v[3]);
        if m.len() > 32 {
            m.clear();
        }
        acc = acc.wrapping_add(k);
    }
    std::hint::black_box(acc);
    t.elapsed().as_nanos() as f64 / 10_000.0
}

/// `y = y + x` chained 10,000 times on 16 elements; ns per op including one sync.
///
/// # Examples
///
/// ```no_run
/// // Seconds of work: run it from `eddy bench`, not in a doctest.
/// let ns_per_op = eddy::bench::dispatch_small()?;
/// assert_eq!(ns_per_op.len(), 7); // one sample per repetition
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn dispatch_small() -> Result<Vec<f64>> {
    let x = Tensor::ones([16], DType::F32)?;
    reps(1, || {
        let mut y = Tensor::zeros([16], DType::F32)?;
        y.sync()?;
        let t = Instant::now();
        for _ in 0..10_000 {
            y = y.add(&x)?;
        }
        y.sync()?;
        let ns = t.elapsed().as_nanos() as f64 / 10_000.0;
        check(
            y.to_vec::<f32>()?[0] == 10_000.0,
            "dispatch_small: wrong sum",
        )?;
        Ok(ns)
    })
}

/// 2,500 cycles of `y+x`, `y*x`, `relu`, `sum` broadcast back (a view) on 64 elements.
///
/// # Examples
///
/// ```no_run
/// // Seconds of work: run it from `eddy bench`, not in a doctest.
/// let ns_per_op = eddy::bench::dispatch_mixed()?;
/// assert_eq!(ns_per_op.len(), 7);
/// assert!(ns_per_op.iter().all(|&ns| ns > 0.0));
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn dispatch_mixed() -> Result<Vec<f64>> {
    let x = Tensor::full([64], 1.0 / 64.0, DType::F32)?;
    reps(1, || {
        let mut y = Tensor::ones([64], DType::F32)?;
        y.sync()?;
        let t = Instant::now();
        for _ in 0..2_500 {
            y = y.add(&x)?;
            y = y.mul(&x)?;
            y = y.relu()?;
            y = y.sum_all()?.broadcast_to([64])?;
        }
        y.sync()?;
        let ns = t.elapsed().as_nanos() as f64 / 10_000.0;
        let v = y.to_vec::<f32>()?;
        check(
            v.iter().all(|v| v.is_finite() && *v > 0.0),
            "dispatch_mixed: values not finite",
        )?;
        Ok(ns)
    })
}

/// The fixed MLP, batch and optimizer of the training workloads.
///
/// # Examples
///
/// ```
/// let (model, _opt, x, y) = eddy::bench::mlp_setup()?;
/// assert_eq!((x.dims(), y.dims()), (&[128, 784][..], &[128][..]));
/// # let _ = model;
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn mlp_setup() -> Result<(crate::tensor::nn::Sequential, Sgd, Tensor, Tensor)> {
    manual_seed_all(0);
    let model = mlp(&[784, 512, 512, 10])?;
    let opt = Sgd::new(model.parameters(), 0.01)?;
    let x = Tensor::randn([128, 784], 0.0, 1.0, DType::F32)?;
    let y = Tensor::uniform([128], 0.0, 10.0, DType::F32)?
        .to_dtype(DType::I64)?
        .clamp(Some(0), Some(9))?;
    Ok((model, opt, x, y))
}

/// Training steps each synced on the loss: (step times in ms, first loss, last loss).
///
/// # Examples
///
/// ```no_run
/// // Seconds of training: run it from `eddy bench`, not in a doctest.
/// let (ms_per_step, first_loss, last_loss) = eddy::bench::mlp_train()?;
/// assert!(!ms_per_step.is_empty());
/// assert!(last_loss < first_loss);
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn mlp_train() -> Result<(Vec<f64>, f64, f64)> {
    let (model, mut opt, x, y) = mlp_setup()?;
    for _ in 0..5 {
        train_step(&model, &mut opt, &x, &y)?.item::<f32>()?;
    }
    let mut times = Vec::with_capacity(50);
    let (mut first, mut last) = (f64::NAN, f64::NAN);
    for i in 0..50 {
        let t = Instant::now();
        let l = train_step(&model, &mut opt, &x, &y)?.item::<f32>()? as f64;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        if i == 0 {
            first = l;
        }
        last = l;
    }
    Ok((times, first, last))
}

/// 5 chunks of 10 steps with one sync per chunk: each chunk's mean ms per step.
///
/// # Examples
///
/// ```no_run
/// // Seconds of training: run it from `eddy bench`, not in a doctest.
/// let ms_per_step = eddy::bench::mlp_train_nosync()?;
/// assert_eq!(ms_per_step.len(), 5); // one mean per chunk of 10 steps
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn mlp_train_nosync() -> Result<Vec<f64>> {
    let (model, mut opt, x, y) = mlp_setup()?;
    for _ in 0..5 {
        train_step(&model, &mut opt, &x, &y)?.item::<f32>()?;
    }
    (0..5)
        .map(|_| {
            let t = Instant::now();
            let mut l = None;
            for _ in 0..10 {
                l = Some(train_step(&model, &mut opt, &x, &y)?);
            }
            l.expect("ten steps").sync()?;
            Ok(t.elapsed().as_secs_f64() * 1e3 / 10.0)
        })
        .collect()
}

/// Forward only, batch 1, no autograd, synced every time: µs per forward (300 per repetition).
///
/// # Examples
///
/// ```no_run
/// // 300 forwards per repetition: run it from `eddy bench`, not in a doctest.
/// let us_per_forward = eddy::bench::mlp_infer()?;
/// assert_eq!(us_per_forward.len(), 7);
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn mlp_infer() -> Result<Vec<f64>> {
    manual_seed_all(0);
    let model = mlp(&[784, 512, 512, 10])?;
    let x = Tensor::randn([1, 784], 0.0, 1.0, DType::F32)?;
    let _g = no_grad();
    reps(1, || {
        let t = Instant::now();
        for _ in 0..300 {
            model.forward(&x)?.sync()?;
        }
        Ok(t.elapsed().as_secs_f64() * 1e6 / 300.0)
    })
}

/// [`mlp_infer`] with its floor measured side by side: each repetition of Eddy's 300 synced
/// forwards is followed by 300 of the same forward computed by calling Eddy's single-row
/// kernel ([`eddy_ops::cpu::gemv::gemv`], both threads) straight on plain buffers, with the
/// bias and ReLU in plain loops: no instruction, allocation or sync. The gap between the two
/// is what the engine costs; the roof itself is bound by reading the model's 2.6 MB of
/// weights, each core its half from its own L2. Returns (Eddy's samples, the roof's), the
/// roof empty where the CPU lacks AVX2 and FMA.
///
/// # Errors
///
/// Engine errors, or the two forwards disagreeing.
///
/// # Examples
///
/// ```no_run
/// // 2 × 300 forwards per repetition: run it from `eddy bench --roof`, not in a doctest.
/// let (eddy, roof) = eddy::bench::mlp_infer_with_roof()?;
/// assert!(roof.is_empty() || roof.len() == eddy.len()); // one pair per repetition
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn mlp_infer_with_roof() -> Result<(Vec<f64>, Vec<f64>)> {
    manual_seed_all(0);
    let model = mlp(&[784, 512, 512, 10])?;
    let x = Tensor::randn([1, 784], 0.0, 1.0, DType::F32)?;
    let _g = no_grad();
    // Each buffer starts on a cache line, as the engine's blobs do: from a line's middle every
    // 64-byte load of the kernel would split across two lines.
    let aligned = |v: Vec<f32>| -> (Vec<f32>, usize) {
        let mut buf = vec![0f32; v.len() + 16];
        let at = buf.as_ptr().align_offset(64).min(16);
        buf[at..at + v.len()].copy_from_slice(&v);
        (buf, at)
    };
    let bufs = (model.parameters().iter())
        .map(|p| Ok(aligned(p.to_vec::<f32>()?)))
        .collect::<Result<Vec<_>>>()?;
    let params: Vec<&[f32]> = (model.parameters().iter().zip(&bufs))
        .map(|(p, (b, at))| &b[*at..*at + p.numel()])
        .collect();
    let (xbuf, xat) = aligned(x.to_vec::<f32>()?);
    let xv = &xbuf[xat..xat + 784];
    // Layer `l`'s output in `acts[l]`; weight `[out, in]` read as `Bᵀ` (row stride 1, column
    // stride `in`), as `x @ w.t()` reads it.
    let mut acts: Vec<Vec<f32>> = params.chunks(2).map(|p| vec![0.0; p[1].len()]).collect();
    let layers = params.len() / 2;
    let direct = |acts: &mut [Vec<f32>]| -> bool {
        for (l, p) in params.chunks(2).enumerate() {
            let (done, rest) = acts.split_at_mut(l);
            let input = done.last().map_or(xv, |a| &a[..]);
            if !eddy_ops::cpu::gemv::gemv(input, p[0], 1, input.len(), &mut rest[0]) {
                return false;
            }
            let hidden = l + 1 < layers;
            for (v, &b) in rest[0].iter_mut().zip(p[1]) {
                *v += b;
                if hidden {
                    *v = v.max(0.0);
                }
            }
        }
        true
    };
    let forwards = |n: usize| -> Result<()> {
        for _ in 0..n {
            model.forward(&x)?.sync()?;
        }
        Ok(())
    };
    if !direct(&mut acts) {
        return Ok((mlp_infer()?, Vec::new()));
    }
    let want = model.forward(&x)?.to_vec::<f32>()?;
    let worst = (want.iter().zip(acts.last().expect("three layers")))
        .map(|(a, b)| (a - b).abs() / (1.0 + a.abs()))
        .fold(0.0f32, f32::max);
    check(
        worst <= 1e-5,
        "mlp_infer roof: the direct forward disagrees",
    )?;
    forwards(300)?; // warm-up
    let (mut es, mut gs) = (Vec::new(), Vec::new());
    for _ in 0..REPS {
        let t = Instant::now();
        forwards(300)?;
        es.push(t.elapsed().as_secs_f64() * 1e6 / 300.0);
        let t = Instant::now();
        for _ in 0..300 {
            direct(&mut acts);
        }
        std::hint::black_box(&acts);
        gs.push(t.elapsed().as_secs_f64() * 1e6 / 300.0);
    }
    Ok((es, gs))
}

/// The resident set (`VmRSS`) and its peak (`VmHWM`) of this process, in MiB.
///
/// # Examples
///
/// ```
/// let (rss, peak) = eddy::bench::rss_mb();
/// if cfg!(target_os = "linux") {
///     assert!(rss > 0.0 && peak >= rss, "{rss} {peak}");
/// }
/// ```
pub fn rss_mb() -> (f64, f64) {
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

fn check(ok: bool, msg: &str) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::invalid("bench", msg))
    }
}

/// [`run_train_child`] for the compiled step: `mlp_train_graph_ms_per_step` and
/// `mlp_train_graph_peak_rss_mb` (the peak of a process that ran only the compiled training).
///
/// # Examples
///
/// ```no_run
/// // Seconds of training: `eddy bench --child --graph` runs this in a fresh process.
/// let r = eddy::bench::run_train_graph_child()?;
/// assert!(r.metrics.contains_key("mlp_train_graph_peak_rss_mb"));
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn run_train_graph_child() -> Result<Report> {
    let mut r = Report::default();
    let times = mlp_train_graph()?;
    let (_, peak) = rss_mb();
    r.put("mlp_train_graph_ms_per_step", times);
    r.put("mlp_train_graph_peak_rss_mb", vec![peak]);
    Ok(r)
}

/// Runs the training workload in this (fresh) process and reports its memory too.
///
/// # Examples
///
/// ```no_run
/// // Seconds of training: `eddy bench` runs it in a child process of its own.
/// let r = eddy::bench::run_train_child()?;
/// assert!(r.metrics.contains_key("mlp_train_peak_rss_mb"));
/// assert!(r.metrics["mlp_train_loss_last"] < r.metrics["mlp_train_loss_first"]);
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn run_train_child() -> Result<Report> {
    let mut r = Report::default();
    let (base, _) = rss_mb();
    let (times, first, last) = mlp_train()?;
    let (_, peak) = rss_mb();
    r.put("mlp_train_ms_per_step", times);
    r.put("mlp_train_peak_rss_mb", vec![peak]);
    r.put("mlp_train_base_rss_mb", vec![base]);
    r.put("mlp_train_loss_first", vec![first]);
    r.put("mlp_train_loss_last", vec![last]);
    Ok(r)
}

/// Runs the selected workloads (`only` empty: all) on the current engine and device (see
/// `with_device`; `device` is passed on to the training child). `exe` re-spawns this program for the
/// training workload, so that its peak RSS is a fresh process's.
///
/// # Errors
///
/// A workload's error, or the child process failing.
///
/// With `roof`, each matmul workload is measured side by side with the `gemm` crate called
/// directly ([`matmul_with_roof`]), and the batch-1 forward beside its kernels alone
/// ([`mlp_infer_with_roof`]), and the training step's products are timed alone
/// ([`mlp_train_roof`]); their figures go to [`Report::roof`].
///
/// # Examples
///
/// ```no_run
/// // Seconds of work: `eddy bench --json --only dispatch_small_ns_per_op` does this.
/// let only = ["dispatch_small_ns_per_op".to_string()];
/// let report = eddy::bench::run(&only, None, 1, false, eddy::Device::CPU)?;
/// assert_eq!(report.metrics.len(), 1);
/// println!("{}", report.to_json(1, ""));
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn run(
    only: &[String],
    exe: Option<&std::path::Path>,
    threads: usize,
    roof: bool,
    device: crate::Device,
) -> Result<Report> {
    let want = |k: &str| only.is_empty() || only.iter().any(|o| o == k);
    let mut r = Report::default();
    if want("host_ns_per_step") {
        r.put("host_ns_per_step", host()?);
    }
    if want("dispatch_small_ns_per_op") {
        r.put("dispatch_small_ns_per_op", dispatch_small()?);
    }
    if want("dispatch_mixed_ns_per_op") {
        r.put("dispatch_mixed_ns_per_op", dispatch_mixed()?);
    }
    if want("add_large_gbps") {
        r.put("add_large_gbps", add_large()?);
    }
    for n in [256, 512, 1024] {
        let k = format!("matmul_{n}_gflops");
        if want(&k) && roof {
            let (e, g) = matmul_with_roof(n, threads)?;
            r.put(&k, e);
            r.roof.insert(k, g);
        } else if want(&k) {
            r.put(&k, matmul(n)?);
        }
    }
    // On a CUDA device, the copy bandwidth `add_large` is held against (on the CPU, memory
    // bandwidth is what `add_large` measures already).
    if want("copy_large_gbps") && matches!(device, crate::Device::Cuda(_)) {
        r.put("copy_large_gbps", copy_large()?);
    }
    // Half-precision products run on the tensor cores of a CUDA device; on the CPU they are
    // f32 products with casts, which `matmul_*_gflops` already measure.
    for (key, dtype) in [
        ("matmul_4096_f16_tflops", DType::F16),
        ("matmul_4096_bf16_tflops", DType::BF16),
    ] {
        if want(key) && matches!(device, crate::Device::Cuda(_)) {
            let gflops = matmul_in(4096, dtype)?;
            r.put(key, gflops.iter().map(|g| g / 1e3).collect());
        }
    }
    let train_keys = KEYS
        .iter()
        .filter(|k| k.starts_with("mlp_train") && !k.ends_with("nosync") && !k.contains("graph"));
    // The compiled step's keys come from a child of their own.
    if train_keys.clone().any(|k| want(k)) {
        let child = match exe {
            Some(exe) => spawn_child(exe, threads, device, false)?,
            None => run_train_child()?,
        };
        r.metrics.extend(child.metrics);
        r.samples.extend(child.samples);
    }
    if want("mlp_train_ms_per_step") && roof && device == crate::Device::CPU {
        r.roof
            .insert("mlp_train_ms_per_step".into(), mlp_train_roof()?);
    }
    if want("mlp_train_ms_per_step_nosync") {
        r.put("mlp_train_ms_per_step_nosync", mlp_train_nosync()?);
    }
    if want("mlp_infer_us_per_fwd") && roof {
        let (e, g) = mlp_infer_with_roof()?;
        r.put("mlp_infer_us_per_fwd", e);
        if !g.is_empty() {
            r.roof.insert("mlp_infer_us_per_fwd".into(), g);
        }
    } else if want("mlp_infer_us_per_fwd") {
        r.put("mlp_infer_us_per_fwd", mlp_infer()?);
    }
    if want("chain_graph_ns_per_op") {
        r.put("chain_graph_ns_per_op", chain_graph()?);
    }
    if want("mlp_train_graph_ms_per_step") || want("mlp_train_graph_peak_rss_mb") {
        let child = match exe {
            Some(exe) => spawn_child(exe, threads, device, true)?,
            None => run_train_graph_child()?,
        };
        r.metrics.extend(child.metrics);
        r.samples.extend(child.samples);
    }
    if want("mlp_infer_graph_us_per_fwd") {
        r.put("mlp_infer_graph_us_per_fwd", mlp_infer_graph()?);
    }
    if want("mlp_train_promoted_ms_per_step") {
        r.put("mlp_train_promoted_ms_per_step", mlp_train_promoted()?);
    }
    for (key, slots) in [
        ("pipeline_1slot_ms_per_batch", 1),
        ("pipeline_2slot_ms_per_batch", 2),
    ] {
        if want(key) {
            r.put(key, pipeline(slots)?);
        }
    }
    if want("cnn_train_ms_per_step") {
        r.put("cnn_train_ms_per_step", cnn_train()?.0);
    }
    if want("conv2d_3x3_gflops") {
        r.put("conv2d_3x3_gflops", conv2d_3x3()?);
    }
    if want("transformer_train_ms_per_step") {
        r.put("transformer_train_ms_per_step", transformer_train()?.0);
    }
    if want("attention_fwd_us") {
        r.put("attention_fwd_us", attention_fwd()?);
    }
    // Global tensors over `cpu:0` and `cpu:1` (CPU only: the workloads name their devices).
    if device == crate::Device::CPU {
        if want("global_add_ns_per_op") {
            r.put("global_add_ns_per_op", global_add()?);
        }
        if want("boxing_p_to_b_small_us") {
            r.put("boxing_p_to_b_small_us", boxing_p_to_b_small()?);
        }
        let large = [
            "boxing_p_to_b_gbps",
            "boxing_s_to_b_gbps",
            "boxing_s0_to_s1_gbps",
            "memcpy_gbps",
        ];
        if large.iter().any(|k| want(k)) {
            for (k, v) in large.iter().zip(boxing_large()?) {
                r.put(k, v);
            }
        }
        if want("dp_train_ms_per_step") {
            r.put("dp_train_ms_per_step", parallel_train(true)?);
        }
        if want("tp_train_ms_per_step") {
            r.put("tp_train_ms_per_step", parallel_train(false)?);
        }
        // MPI's own all-reduce, under `mpirun` only.
        if crate::tensor::global::world()?.size > 1 {
            let (small, large) = global::raw_allreduce()?;
            if want("raw_allreduce_small_us") {
                r.put("raw_allreduce_small_us", small);
            }
            if want("raw_allreduce_gbps") {
                r.put("raw_allreduce_gbps", large);
            }
        }
    }
    Ok(r)
}

/// Runs the training workload (`graph`: compiled) in a fresh process, `exe bench --child`.
fn spawn_child(
    exe: &std::path::Path,
    threads: usize,
    device: crate::Device,
    graph: bool,
) -> Result<Report> {
    let bad = |m: String| Error::invalid("bench", m);
    let device = match device {
        crate::Device::Cuda(n) => format!("cuda:{n}"),
        _ => "cpu".to_string(),
    };
    let out = std::process::Command::new(exe)
        .args([
            "bench",
            "--json",
            "--child",
            "--threads",
            &threads.to_string(),
            "--device",
            &device,
        ])
        .args(graph.then_some("--graph"))
        .output()
        .map_err(|e| bad(format!("spawning {}: {e}", exe.display())))?;
    if !out.status.success() {
        return Err(bad(format!(
            "training child failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| bad(e.to_string()))?;
    let mut r = Report::default();
    for (k, x) in v["metrics"].as_object().into_iter().flatten() {
        r.metrics.insert(k.clone(), x.as_f64().unwrap_or(f64::NAN));
    }
    for (k, x) in v["samples"].as_object().into_iter().flatten() {
        let s = x
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_f64())
            .collect();
        r.samples.insert(k.clone(), s);
    }
    Ok(r)
}
