//! The `eddy` command: `eddy bench --json`, `eddy train`.

use eddy::bench;
use eddy::data::{default_path, Digits};
use eddy::models::{accuracy, mlp, train_step};
use eddy::tensor::nn::Module;
use eddy::tensor::optim::Adam;
use std::process::ExitCode;

/// mimalloc: frees made on the scheduler thread of memory allocated on the user thread are
/// cheap (glibc malloc takes the owning arena's lock for each, which serialises the threads).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const USAGE: &str = "\
usage:
  eddy bench [--json] [--threads N] [--only KEY,...]   run the benchmark workloads
  eddy train [--epochs N] [--data PATH] [--seed S]      train an MLP on the digits data set";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let r = match args.first().map(String::as_str) {
        Some("bench") => cmd_bench(&args[1..]),
        Some("train") => cmd_train(&args[1..]),
        Some("-h" | "--help" | "help") | None => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Some(other) => Err(format!("unknown command `{other}`\n{USAGE}")),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("eddy: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Returns the value after flag `name`, if present.
fn flag<'a>(args: &'a [String], name: &str) -> Result<Option<&'a str>, String> {
    match args.iter().position(|a| a == name) {
        None => Ok(None),
        Some(i) => args
            .get(i + 1)
            .map(|s| Some(s.as_str()))
            .ok_or(format!("{name} needs a value")),
    }
}

fn parse<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> Result<T, String> {
    match flag(args, name)? {
        None => Ok(default),
        Some(v) => v
            .parse()
            .map_err(|_| format!("bad value for {name}: `{v}`")),
    }
}

fn cmd_bench(args: &[String]) -> Result<(), String> {
    let known = ["--json", "--threads", "--only", "--child"];
    for (i, a) in args.iter().enumerate() {
        let is_value = i > 0 && matches!(args[i - 1].as_str(), "--threads" | "--only");
        if !is_value && !known.contains(&a.as_str()) {
            return Err(format!("unknown option `{a}`\n{USAGE}"));
        }
    }
    let threads: usize = parse(
        args,
        "--threads",
        std::thread::available_parallelism().map_or(2, |n| n.get()),
    )?;
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .build_global()
        .map_err(|e| e.to_string())?;
    let child = args.iter().any(|a| a == "--child");
    let report = if child {
        bench::run_train_child().map_err(|e| e.to_string())?
    } else {
        let only: Vec<String> = flag(args, "--only")?
            .map(|s| s.split(',').map(str::to_string).collect())
            .unwrap_or_default();
        if let Some(k) = only.iter().find(|k| !bench::KEYS.contains(&k.as_str())) {
            return Err(format!(
                "unknown key `{k}`; keys: {}",
                bench::KEYS.join(", ")
            ));
        }
        let exe = std::env::current_exe().ok();
        bench::run(&only, exe.as_deref(), threads).map_err(|e| e.to_string())?
    };
    let notes = "CPU, f32; medians of 7 repetitions (training: of 50 steps)";
    let json = report.to_json(threads, notes);
    if args.iter().any(|a| a == "--json") {
        println!("{json}");
    } else {
        for (k, v) in &report.metrics {
            println!("{k:32} {v:>12.3}");
        }
    }
    Ok(())
}

fn cmd_train(args: &[String]) -> Result<(), String> {
    let epochs: usize = parse(args, "--epochs", 30)?;
    let seed: u64 = parse(args, "--seed", 0)?;
    let path = flag(args, "--data")?.map_or_else(default_path, Into::into);
    let e = |e: eddy::Error| e.to_string();
    let data = Digits::load(&path).map_err(e)?;
    let (train, test) = data.split(0.2, seed);
    eddy::tensor::manual_seed(seed);
    let model = mlp(&[64, 128, 10]).map_err(e)?;
    let mut opt = Adam::new(model.parameters(), 1e-2).map_err(e)?;
    let (tx, _) = test.batch(0..test.len()).map_err(e)?;
    let batch = 64;
    for epoch in 0..epochs {
        let mut sum = 0.0;
        let mut n = 0;
        for s in (0..train.len()).step_by(batch) {
            let (x, y) = train.batch(s..(s + batch).min(train.len())).map_err(e)?;
            sum += train_step(&model, &mut opt, &x, &y)
                .map_err(e)?
                .item::<f32>()
                .map_err(e)? as f64;
            n += 1;
        }
        let acc = accuracy(&model, &tx, &test.labels).map_err(e)?;
        println!(
            "epoch {:>3}  loss {:.4}  test accuracy {:.2} %",
            epoch + 1,
            sum / n as f64,
            acc * 100.0
        );
    }
    Ok(())
}
