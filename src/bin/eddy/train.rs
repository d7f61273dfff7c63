//! `eddy train`: options, the banner, progress bars, the summary and the curves.

use super::{Fail, Opts, builder_for, device_opt, mib, set_threads, write_trace};
use eddy::data::{Dataset, default_path, default_text_path, load_text};
use eddy::plot;
use eddy::train::{ModelKind, Progress, TrainOptions, TrainReport, train};
use eddy::train_text::{TextOptions, train_text};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::path::PathBuf;

/// `eddy train`: the digits (or a CSV) with the MLP or the CNN, or a text with the
/// character transformer.
/// `--devices N` and `--parallel data|tensor`, checked.
pub(crate) fn devices_opts(o: &Opts) -> Result<(u32, eddy::train::Parallel), Fail> {
    let devices: u32 = o.get("--devices", 1)?;
    let parallel = match o.str("--parallel") {
        None | Some("data") => eddy::train::Parallel::Data,
        Some("tensor") => eddy::train::Parallel::Tensor,
        Some(p) => {
            return Err(Fail::Usage(format!(
                "bad value for --parallel: `{p}` (data or tensor)"
            )));
        }
    };
    if devices == 0 || devices > 64 {
        return Err(Fail::Usage(format!(
            "--devices must be in 1..=64, not {devices}"
        )));
    }
    if o.has("--parallel") && devices == 1 && eddy::tensor::global::world()?.size == 1 {
        return Err(Fail::Usage(
            "--parallel needs --devices N (N > 1), or several processes (mpirun)".into(),
        ));
    }
    Ok((devices, parallel))
}

/// Under `mpirun`, the processes other than process 0 print nothing on their standard
/// output (unless `--all-ranks`): the job's progress and results print once. Their errors
/// still reach their error stream. A build without the `mpi` feature refuses a job of
/// several processes here.
pub(crate) fn quiet_other_processes(o: &Opts) -> Result<(), Fail> {
    let w = eddy::tensor::global::world()?;
    if w.rank == 0 || o.has("--all-ranks") {
        return Ok(());
    }
    #[cfg(all(feature = "mpi", unix))]
    {
        use std::os::fd::AsRawFd;
        let null = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .map_err(|e| Fail::Run(format!("/dev/null: {e}")))?;
        // SAFETY: both are open descriptors of this process; `dup2` makes 1 a copy of the
        // null device's (the copy outlives `null`, closed at the end of this block).
        if unsafe { libc::dup2(null.as_raw_fd(), 1) } < 0 {
            return Err(Fail::Run("cannot silence the standard output".into()));
        }
    }
    Ok(())
}

pub(crate) fn cmd_train(o: &Opts) -> Result<(), Fail> {
    if o.str("--plan").is_some() && !o.has("--graph") {
        return Err(Fail::Usage(
            "--plan draws the compiled step: it needs --graph".into(),
        ));
    }
    let d = TrainOptions::default();
    let device = device_opt(o)?;
    let hidden = match o.str("--hidden") {
        None => d.hidden.clone(),
        Some(h) => h
            .split(',')
            .map(|w| w.trim().parse::<usize>().ok().filter(|&w| w > 0))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                Fail::Usage(format!(
                    "bad value for --hidden: `{h}` (widths like 128 or 256,128)"
                ))
            })?,
    };
    let (devices, parallel) = devices_opts(o)?;
    if devices > 1 && o.has("--graph") {
        return Err(Fail::Usage(
            "--graph compiles a one-device step: it cannot go with --devices".into(),
        ));
    }
    let model: eddy::train::ModelKind = match o.str("--model") {
        None => d.model,
        Some(m) => m
            .parse()
            .map_err(|e| Fail::Usage(format!("bad value for --model: {e}")))?,
    };
    let processes = eddy::tensor::global::world()?.size as u32;
    if processes > 1 && (model != ModelKind::Mlp || o.has("--graph")) {
        return Err(Fail::Usage(
            "over several processes, eddy train runs the MLP eagerly (no --graph, --model mlp)"
                .into(),
        ));
    }
    if model == ModelKind::Transformer {
        return cmd_train_text(o, devices);
    }
    if o.has("--steps") {
        return Err(Fail::Usage(
            "--steps is for --model transformer (an epoch of the others is a pass over the rows)"
                .into(),
        ));
    }
    if model == eddy::train::ModelKind::Cnn && (devices > 1 || o.has("--hidden")) {
        return Err(Fail::Usage(
            "--model cnn trains on one device and has no --hidden widths".into(),
        ));
    }
    let opts = TrainOptions {
        epochs: o.get("--epochs", d.epochs)?,
        batch_size: o.get("--batch-size", d.batch_size)?,
        lr: o.get("--lr", d.lr)?,
        hidden,
        seed: o.get("--seed", d.seed)?,
        device,
        graph: o.has("--graph"),
        devices,
        parallel,
        model,
        ..d
    };
    if opts.epochs == 0 || opts.batch_size == 0 {
        return Err(Fail::Usage(
            "--epochs and --batch-size must be at least 1".into(),
        ));
    }
    if !(opts.lr > 0.0 && opts.lr.is_finite()) {
        return Err(Fail::Usage(format!(
            "--lr must be a positive number, got {}",
            opts.lr
        )));
    }
    let threads = set_threads(o)?;
    let path = o.str("--data").map_or_else(default_path, PathBuf::from);
    let plot_path = PathBuf::from(o.str("--plot").unwrap_or("eddy-train.png"));
    let trace = o.str("--trace").map(PathBuf::from);
    let data = Dataset::load(&path).map_err(|e| Fail::Usage(e.to_string()))?;
    let mut b = builder_for(device)
        .sync_mode(o.has("--sync-mode"))
        .trace(trace.is_some());
    if devices > 1 {
        b = match device {
            eddy::Device::Cuda(_) => b.cuda_devices(devices),
            _ => b.cpu_devices(devices),
        };
    }
    if o.has("--promote") {
        b = b.promotion(true);
    }
    // The process's one engine: living until it ends, its tensors hold it without a count.
    let vm = b.build()?.leak();
    let (n_test, n_train) = {
        let t = (data.len() as f64 * opts.test_fraction).round() as usize;
        (t, data.len() - t)
    };
    if n_test == 0 || n_train == 0 {
        // Bad data, found before the banner: the same exit as for any other bad file.
        return Err(Fail::Usage(format!(
            "{}: {} rows are too few to hold out {} % for testing",
            path.display(),
            data.len(),
            opts.test_fraction * 100.0
        )));
    }
    let arch: Vec<String> = std::iter::once(data.n_features)
        .chain(opts.hidden.iter().copied())
        .chain([data.n_classes.max(2)])
        .map(|w| w.to_string())
        .collect();
    let side = (data.n_features as f64).sqrt().round() as usize;
    let name = match model {
        eddy::train::ModelKind::Mlp => format!("an MLP {}", arch.join("-")),
        eddy::train::ModelKind::Cnn => {
            format!("a CNN (conv 16, pool, conv 32, pool, linear) of {side}×{side} images")
        }
        ModelKind::Transformer => unreachable!("trained by cmd_train_text"),
    };
    println!(
        "training {name} on {} ({n_train} rows, {n_test} held out), Adam lr {}, batch {}, seed {}, {threads} threads{}{}",
        path.file_name()
            .map_or(path.display().to_string(), |f| f.to_string_lossy().into()),
        opts.lr,
        opts.batch_size,
        opts.seed,
        if o.has("--sync-mode") {
            ", synchronous mode"
        } else {
            ""
        },
        match (devices * processes, parallel) {
            (1, _) => String::new(),
            (n, p) => format!(
                ", {} parallel over {n} devices{}",
                match p {
                    eddy::train::Parallel::Data => "data",
                    eddy::train::Parallel::Tensor => "tensor",
                },
                if processes > 1 {
                    format!(" in {processes} processes")
                } else {
                    String::new()
                }
            ),
        }
    );
    let mut bars = Bars::new(opts.epochs);
    let report = train(&opts, &data, vm, |p| bars.show(p, "test accuracy"))?;
    summary(vm, device, &report, opts.epochs, &plot_path, trace)?;
    if let Some(path) = o.str("--plan") {
        let Some(c) = &report.plan else {
            return Err(Fail::Usage(
                "--plan: no step was compiled (one batch per epoch runs eagerly)".into(),
            ));
        };
        std::fs::write(path, plot::plan_svg(c.memory(), c.step_names()))
            .map_err(|e| Fail::Run(format!("{path}: {e}")))?;
        println!(
            "wrote the compiled step's memory plan ({} steps, arena {}) to {path}",
            c.len(),
            mib(c.arena_bytes())
        );
    }
    Ok(())
}

/// `eddy train --model transformer`: the character transformer on a text (the bundled one by
/// default), AdamW, epochs of 100 steps each followed by the next-byte accuracy on the
/// held-out tenth.
fn cmd_train_text(o: &Opts, devices: u32) -> Result<(), Fail> {
    for (flag, why) in [
        ("--hidden", "its sizes are fixed"),
        ("--graph", "it trains eagerly"),
        ("--parallel", "it trains on one device"),
        ("--plan", "it trains eagerly"),
    ] {
        if o.has(flag) {
            return Err(Fail::Usage(format!(
                "--model transformer takes no {flag}: {why}"
            )));
        }
    }
    if devices > 1 {
        return Err(Fail::Usage(
            "--model transformer trains on one device".into(),
        ));
    }
    let d = TextOptions::default();
    let opts = TextOptions {
        epochs: o.get("--epochs", d.epochs)?,
        steps_per_epoch: o.get("--steps", d.steps_per_epoch)?,
        batch_size: o.get("--batch-size", d.batch_size)?,
        lr: o.get("--lr", d.lr)?,
        seed: o.get("--seed", d.seed)?,
        ..d
    };
    if opts.epochs == 0
        || opts.steps_per_epoch == 0
        || opts.batch_size == 0
        || !(opts.lr > 0.0 && opts.lr.is_finite())
    {
        return Err(Fail::Usage(
            "--epochs, --steps and --batch-size must be at least 1, --lr a positive number".into(),
        ));
    }
    let device = device_opt(o)?;
    let threads = set_threads(o)?;
    let path = o
        .str("--data")
        .map_or_else(default_text_path, PathBuf::from);
    let text = load_text(&path).map_err(|e| Fail::Usage(e.to_string()))?;
    let plot_path = PathBuf::from(o.str("--plot").unwrap_or("eddy-train.png"));
    let trace = o.str("--trace").map(PathBuf::from);
    let vm = builder_for(device)
        .sync_mode(o.has("--sync-mode"))
        .trace(trace.is_some())
        .build()?
        .leak();
    let c = opts.config;
    println!(
        "training a character transformer ({} pre-norm causal blocks of width {}, {} heads, \
         feed-forward {}, windows of {}) on {} ({} bytes, the last tenth held out), AdamW lr {}, \
         batch {}, seed {}, {threads} threads",
        c.layers,
        c.d_model,
        c.heads,
        c.ffn,
        c.seq,
        path.file_name()
            .map_or(path.display().to_string(), |f| f.to_string_lossy().into()),
        text.len(),
        opts.lr,
        opts.batch_size,
        opts.seed
    );
    let mut bars = Bars::new(opts.epochs);
    let report = eddy::tensor::with_device(device, || {
        train_text(&opts, &text, vm, |p| bars.show(p, "next-byte accuracy"))
    })?;
    summary(vm, device, &report, opts.epochs, &plot_path, trace)?;
    Ok(())
}

/// The progress bar of the running epoch, and a line per finished epoch.
struct Bars {
    bar: Option<ProgressBar>,
    style: ProgressStyle,
    epochs: usize,
}

impl Bars {
    fn new(epochs: usize) -> Bars {
        let style = ProgressStyle::with_template(
            "{prefix} [{bar:30.cyan/blue}] {pos}/{len} {per_sec} {msg}",
        )
        .expect("a valid template")
        .progress_chars("=> ");
        Bars {
            bar: None,
            style,
            epochs,
        }
    }

    /// Shows `p`; `accuracy` names the epoch's test figure.
    fn show(&mut self, p: Progress, accuracy: &str) {
        let epochs = self.epochs;
        match p {
            Progress::Step {
                epoch,
                step,
                steps,
                loss,
            } => {
                let b = self.bar.get_or_insert_with(|| {
                    let target = ProgressDrawTarget::stderr();
                    let b = ProgressBar::with_draw_target(Some(steps as u64), target);
                    b.set_style(self.style.clone());
                    b.set_prefix(format!("epoch {epoch:>3}/{epochs}"));
                    b
                });
                b.set_position(step as u64);
                if let Some(l) = loss {
                    b.set_message(format!("loss {l:.4}"));
                }
            }
            Progress::Epoch(e) => {
                if let Some(b) = self.bar.take() {
                    b.finish_and_clear();
                }
                println!(
                    "epoch {:>3}/{epochs}  loss {:.4}  {accuracy} {:6.2} %  {:7.1} steps/s",
                    e.epoch,
                    e.loss,
                    e.test_accuracy * 100.0,
                    e.steps_per_s
                );
            }
        }
    }
}

/// The lines after training, the curves' picture and the trace.
fn summary(
    vm: &eddy::Vm,
    device: eddy::Device,
    report: &TrainReport,
    epochs: usize,
    plot_path: &std::path::Path,
    trace: Option<PathBuf>,
) -> Result<(), Fail> {
    let s = &report.stats;
    println!(
        "test accuracy {:.2} % after {} epochs in {:.2} s",
        report.test_accuracy * 100.0,
        epochs,
        report.seconds
    );
    // The memory of the device the model trained on (the engine's summary is `cpu:0`'s).
    let mem = vm.allocator(device).map_or(s.alloc, |a| a.stats());
    println!(
        "engine: {} instructions ({} fused into others), {} OOM retries, peak memory {} (cached {})",
        s.inserted,
        s.fused,
        s.oom_retries,
        mib(mem.peak_in_use),
        mib(mem.cached)
    );
    if let Some(a) = vm.promotion_stats() {
        println!(
            "automatic plans: {} of {} windows between syncs ran as one plan run ({} compiled, {} calls merged, {} fell back, {} times back to eager windows as slower, {} windows run eagerly unnoted)",
            a.plan_runs, a.windows, a.compiled, a.merged, a.fallbacks, a.backed_off, a.quiet
        );
    }
    plot::training_curve_png(&report.epochs, plot_path, (960, 400)).map_err(Fail::Run)?;
    println!(
        "wrote the loss and accuracy curves to {}",
        plot_path.display()
    );
    if let Some(t) = trace {
        write_trace(vm, &t, None)?;
    }
    Ok(())
}
