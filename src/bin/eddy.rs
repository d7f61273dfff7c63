//! The `eddy` command: `train` (the main job), `bench`, `repl` and `trace`, parsed by `clap`
//! (`--help` for each command, `--version`, suggestions for a mistyped option or command).
//!
//! Exit codes: 0 on success (and for `--help`, `--version`), 2 for bad input (options, data
//! files, scripts that cannot be read), 1 when the engine fails.

#[path = "eddy/train.rs"]
mod train_cmd;

use eddy::data::{Dataset, default_path};
use eddy::repl::{Outcome, Session};
use eddy::train::{TrainOptions, train};
use eddy::{Vm, bench, plot};
use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// mimalloc, through its fast entry points (see [`eddy::Malloc`]).
#[global_allocator]
static GLOBAL: eddy::Malloc = eddy::Malloc;

/// One option of a command: its name, the placeholder of its value (`None` for a flag) and
/// its help.
struct Opt {
    name: &'static str,
    value: Option<&'static str>,
    help: &'static str,
}

const fn opt(name: &'static str, value: &'static str, help: &'static str) -> Opt {
    Opt {
        name,
        value: Some(value),
        help,
    }
}

const fn flag(name: &'static str, help: &'static str) -> Opt {
    Opt {
        name,
        value: None,
        help,
    }
}

const THREADS: Opt = opt(
    "--threads",
    "N",
    "kernel threads (default: the machine's cores)",
);
const SYNC_MODE: Opt = flag("--sync-mode", "run every instruction on the calling thread");
const DEVICE: Opt = opt(
    "--device",
    "cpu|cuda[:N]",
    "the device to run on (default: cpu)",
);

const TRAIN: &[Opt] = &[
    opt(
        "--epochs",
        "N",
        "passes over the training rows (default: 20)",
    ),
    opt(
        "--batch-size",
        "N",
        "rows per step (default: 64; 16 windows for the transformer)",
    ),
    opt(
        "--steps",
        "N",
        "with --model transformer: steps per epoch (default: 100)",
    ),
    opt("--lr", "X", "Adam's learning rate (default: 0.01)"),
    opt(
        "--model",
        "mlp|cnn|transformer",
        "an MLP, a CNN over the rows as square images, or a character transformer on a text \
         (default: mlp)",
    ),
    opt(
        "--hidden",
        "N[,N..]",
        "hidden layer widths of the MLP (default: 128)",
    ),
    opt(
        "--seed",
        "S",
        "seed of the initial weights and the shuffles (default: 0)",
    ),
    opt(
        "--data",
        "FILE.csv[.gz]",
        "the data set (default: the bundled digits; with --model transformer, the bundled text)",
    ),
    THREADS,
    SYNC_MODE,
    opt("--trace", "FILE.json", "record the instruction timeline"),
    opt(
        "--plot",
        "FILE.png",
        "the loss and accuracy curves (default: eddy-train.png)",
    ),
    DEVICE,
    flag(
        "--graph",
        "run each step after the first as one compiled graph",
    ),
    opt(
        "--plan",
        "FILE.svg",
        "draw the compiled step's memory (with --graph)",
    ),
    flag(
        "--promote",
        "the engine promotes the recurring eager step to a plan by itself",
    ),
    DEVICES,
    PARALLEL,
    flag(
        "--all-ranks",
        "under mpirun: every process prints its progress (default: process 0 alone)",
    ),
];

const DEVICES: Opt = opt(
    "--devices",
    "N",
    "train on N devices of --device's kind as global tensors (default: 1)",
);
const PARALLEL: Opt = opt(
    "--parallel",
    "data|tensor",
    "with --devices: split each batch (data) or each layer (tensor) (default: data)",
);

const BENCH: &[Opt] = &[
    flag("--json", "print the report as JSON"),
    THREADS,
    opt("--only", "KEY,...", "run only these workloads"),
    flag("--child", ""),
    flag("--graph", ""),
    flag(
        "--roof",
        "matmul beside the gemm crate called directly, the batch-1 forward beside its \
         kernels alone, the training step's matrix products alone",
    ),
    DEVICE,
];

const REPL: &[Opt] = &[THREADS, SYNC_MODE];

const TRACE: &[Opt] = &[
    opt("--steps", "N", "training steps to record (default: 3)"),
    opt("--script", "FILE", "record a REPL script instead"),
    opt(
        "--out",
        "FILE.json",
        "the timeline (default: eddy-trace.json)",
    ),
    opt("--svg", "FILE.svg", "its picture (default: next to --out)"),
    SYNC_MODE,
    THREADS,
    DEVICES,
    PARALLEL,
];

/// The commands, their options and help, for `clap`.
fn cli() -> clap::Command {
    use clap::{Arg, ArgAction, Command};
    let command = |name: &'static str, about: &'static str, opts: &[Opt]| {
        Command::new(name)
            .about(about)
            .args_override_self(true)
            .args(opts.iter().map(|o| {
                let a = Arg::new(o.name).long(&o.name[2..]).help(o.help);
                let a = a.hide(o.help.is_empty());
                match o.value {
                    // The next word is the value, whatever it looks like (`--lr -1`).
                    Some(v) => a
                        .value_name(v)
                        .allow_hyphen_values(true)
                        .action(ArgAction::Set),
                    None => a.action(ArgAction::SetTrue),
                }
            }))
    };
    Command::new("eddy")
        .version(env!("CARGO_PKG_VERSION"))
        .about("Eddy, an eager virtual machine for tensors")
        .subcommand_required(true)
        .subcommand(command(
            "train",
            "train an MLP on the bundled digits data (the main job)",
            TRAIN,
        ))
        .subcommand(command("bench", "run the benchmark workloads", BENCH))
        .subcommand(command(
            "repl",
            "interactive tensor expressions (:help inside); also `eddy repl < script`",
            REPL,
        ))
        .subcommand(command(
            "trace",
            "record the instruction timeline of a workload",
            TRACE,
        ))
}

/// A failure and its exit code.
enum Fail {
    /// Bad input: exit code 2.
    Usage(String),
    /// The engine or the system failed: exit code 1.
    Run(String),
    /// Help or the version was asked for and printed: exit code 0.
    Shown,
}

impl From<eddy::Error> for Fail {
    fn from(e: eddy::Error) -> Self {
        Fail::Run(e.to_string())
    }
}

impl From<eddy::vm::Error> for Fail {
    fn from(e: eddy::vm::Error) -> Self {
        Fail::Run(e.to_string())
    }
}

fn main() -> ExitCode {
    // The parser and what it parsed are gone before the command runs: its memory is not
    // part of a workload's (`mlp_train_peak_rss_mb`).
    let parsed = cli().try_get_matches().map(|m| match m.subcommand() {
        Some(("train", m)) => (Cmd::Train, Opts::of(m, TRAIN)),
        Some(("bench", m)) => (Cmd::Bench, Opts::of(m, BENCH)),
        Some(("repl", m)) => (Cmd::Repl, Opts::of(m, REPL)),
        Some(("trace", m)) => (Cmd::Trace, Opts::of(m, TRACE)),
        _ => unreachable!("clap knows the commands"),
    });
    let r = match parsed {
        Ok((Cmd::Train, o)) => {
            train_cmd::quiet_other_processes(&o).and_then(|()| train_cmd::cmd_train(&o))
        }
        Ok((Cmd::Bench, o)) => train_cmd::quiet_other_processes(&o).and_then(|()| cmd_bench(&o)),
        Ok((Cmd::Repl, o)) => cmd_repl(&o),
        Ok((Cmd::Trace, o)) => cmd_trace(&o),
        Err(e) => Err(usage(e)),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(Fail::Usage(m)) => {
            eprintln!("eddy: {m}");
            ExitCode::from(2)
        }
        Err(Fail::Run(m)) => {
            eprintln!("eddy: {m}");
            ExitCode::FAILURE
        }
        Err(Fail::Shown) => ExitCode::SUCCESS,
    }
}

/// The commands.
enum Cmd {
    Train,
    Bench,
    Repl,
    Trace,
}

/// `clap`'s error as Eddy says it (exit code 2), with clap's tips (a similar option or command
/// for a typo); help and the version are printed here (exit code 0).
fn usage(e: clap::Error) -> Fail {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let context = |k: ContextKind| match e.get(k) {
        Some(ContextValue::String(v)) => v.clone(),
        _ => String::new(),
    };
    let rendered = e.render().to_string();
    let tips: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("tip:"))
        .collect();
    let tips = tips.iter().map(|t| format!("\n  {t}")).collect::<String>();
    let message = match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            print!("{rendered}");
            return Fail::Shown;
        }
        ErrorKind::MissingSubcommand | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            format!("no command given\n{}", cli().render_help())
        }
        ErrorKind::InvalidSubcommand => format!(
            "unknown command `{}`{tips}\n{}",
            context(ContextKind::InvalidSubcommand),
            cli().render_usage()
        ),
        ErrorKind::UnknownArgument => format!(
            "unknown option `{}`{tips}",
            context(ContextKind::InvalidArg)
        ),
        ErrorKind::InvalidValue if context(ContextKind::InvalidValue).is_empty() => {
            let arg = context(ContextKind::InvalidArg);
            let name = arg.split_whitespace().next().unwrap_or(&arg);
            format!("{name} needs a value")
        }
        // Its first line: the rest is clap's usage line and a pointer to `--help`.
        _ => rendered
            .lines()
            .next()
            .unwrap_or("")
            .trim_start_matches("error: ")
            .to_string(),
    };
    Fail::Usage(message)
}

/// A command's options as given: `--name value` and `--flag`, by name.
struct Opts(BTreeMap<&'static str, Option<String>>);

impl Opts {
    /// The options of `spec` that `m` holds.
    fn of(m: &clap::ArgMatches, spec: &[Opt]) -> Opts {
        let mut o = BTreeMap::new();
        for s in spec {
            match s.value {
                Some(_) => {
                    if let Some(v) = m.get_one::<String>(s.name) {
                        o.insert(s.name, Some(v.clone()));
                    }
                }
                None => {
                    if m.get_flag(s.name) {
                        o.insert(s.name, None);
                    }
                }
            }
        }
        Opts(o)
    }

    fn has(&self, k: &str) -> bool {
        self.0.contains_key(k)
    }

    fn str(&self, k: &str) -> Option<&str> {
        self.0.get(k).and_then(|v| v.as_deref())
    }

    fn get<T: std::str::FromStr>(&self, k: &str, default: T) -> Result<T, Fail> {
        match self.str(k) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| Fail::Usage(format!("bad value for {k}: `{v}`"))),
        }
    }
}

/// The `--device` option: `cpu` (the default) or `cuda`, `cuda:N`.
fn device_opt(o: &Opts) -> Result<eddy::Device, Fail> {
    let Some(d) = o.str("--device") else {
        return Ok(eddy::Device::CPU);
    };
    let bad = || {
        Fail::Usage(format!(
            "bad value for --device: `{d}` (cpu, cuda or cuda:N)"
        ))
    };
    match d.split_once(':') {
        None if d == "cpu" => Ok(eddy::Device::CPU),
        None if d == "cuda" => Ok(eddy::Device::Cuda(0)),
        Some(("cuda", n)) => n.parse().map(eddy::Device::Cuda).map_err(|_| bad()),
        _ => Err(bad()),
    }
}

/// An engine builder that has `device` (a CUDA device opens the devices up to it).
fn builder_for(device: eddy::Device) -> eddy::VmBuilder {
    match device {
        eddy::Device::Cuda(n) => Vm::builder().cuda_devices(n + 1),
        _ => Vm::builder(),
    }
}

fn set_threads(o: &Opts) -> Result<usize, Fail> {
    let threads: usize = o.get(
        "--threads",
        std::thread::available_parallelism().map_or(2, |n| n.get()),
    )?;
    if threads == 0 || threads > eddy::vm::par::MAX_THREADS {
        return Err(Fail::Usage(format!(
            "--threads must be in 1..={}, not {threads}",
            eddy::vm::par::MAX_THREADS
        )));
    }
    if !eddy::vm::par::set_threads(threads) {
        return Err(Fail::Run("the kernel pool was already started".into()));
    }
    Ok(threads)
}

fn mib(b: usize) -> String {
    format!("{:.1} MiB", b as f64 / (1 << 20) as f64)
}

/// Writes the chrome-trace JSON to `json` and, if given, the SVG timeline to `svg`.
fn write_trace(vm: &Vm, json: &Path, svg: Option<&Path>) -> Result<(), Fail> {
    vm.sync()?;
    let events = vm.trace_events();
    let io = |p: &Path, e: std::io::Error| Fail::Run(format!("{}: {e}", p.display()));
    std::fs::File::create(json)
        .and_then(|f| vm.write_chrome_trace(std::io::BufWriter::new(f)))
        .map_err(|e| io(json, e))?;
    let streams: std::collections::BTreeSet<u32> = events.iter().map(|e| e.stream).collect();
    println!(
        "wrote {} instructions on {} stream(s) to {} (open it in ui.perfetto.dev or chrome://tracing)",
        events.len(),
        streams.len(),
        json.display()
    );
    if let Some(svg) = svg {
        let names: Vec<String> = (0..vm.stream_count())
            .map(|i| {
                vm.stream_policy(eddy::vm::StreamId(i as u32))
                    .map_or("?".into(), |p| p.name().to_string())
            })
            .collect();
        std::fs::write(svg, plot::timeline_svg(&events, &names)).map_err(|e| io(svg, e))?;
        println!("wrote the timeline picture to {}", svg.display());
    }
    Ok(())
}

fn cmd_bench(o: &Opts) -> Result<(), Fail> {
    let threads = set_threads(o)?;
    let device = device_opt(o)?;
    if device != eddy::Device::CPU && o.has("--roof") {
        return Err(Fail::Usage(
            "--roof measures CPU kernels: not with --device".into(),
        ));
    }
    // The CPU workloads run on the process-wide engine, as a user's program does (its tensors
    // hold an uncounted handle to it); a device gets an engine that has it.
    let vm = match device {
        eddy::Device::Cpu(0) => None,
        d => Some(builder_for(d).build()?),
    };
    let on_device = |f: &dyn Fn() -> eddy::Result<bench::Report>| match &vm {
        None => f(),
        Some(vm) => eddy::tensor::with_engine(vm, || eddy::tensor::with_device(device, f)),
    };
    let report = if o.has("--child") && o.has("--graph") {
        on_device(&bench::run_train_graph_child)?
    } else if o.has("--child") {
        on_device(&bench::run_train_child)?
    } else {
        // Under `mpirun`, the global tensors' keys: their ranks are the processes.
        let several = eddy::tensor::global::world()?.size > 1;
        let only: Vec<String> = o
            .str("--only")
            .map(|s| s.split(',').map(str::to_string).collect())
            .unwrap_or_else(|| match several {
                true => bench::PROCESS_KEYS.iter().map(|k| k.to_string()).collect(),
                false => Vec::new(),
            });
        if let Some(k) = only.iter().find(|k| !bench::KEYS.contains(&k.as_str())) {
            return Err(Fail::Usage(format!(
                "unknown key `{k}`; keys: {}",
                bench::KEYS.join(", ")
            )));
        }
        let exe = std::env::current_exe().ok();
        on_device(&|| bench::run(&only, exe.as_deref(), threads, o.has("--roof"), device))?
    };
    let notes = format!("{device}, f32; medians of 7 repetitions (training: of 50 steps)");
    let notes = notes.as_str();
    if o.has("--json") {
        println!("{}", report.to_json(threads, notes));
    } else {
        println!("{:34} {:>12}", "metric", "value");
        for (k, v) in &report.metrics {
            println!("{k:34} {v:>12.3}");
        }
        for (k, s) in &report.roof {
            println!("{:34} {:>12.3}", format!("(roof) {k}"), bench::median(s));
        }
        println!("({notes}; {threads} threads; --json for the machine-readable report)");
    }
    Ok(())
}

/// Evaluates one REPL line and prints its result, or its error after `place`; `None` if it
/// failed.
fn eval_and_print(repl: &mut Session, line: &str, place: &str) -> Option<Outcome> {
    match repl.eval_line(line) {
        Ok(Outcome::Print(p)) => {
            if !p.is_empty() {
                println!("{p}");
            }
            Some(Outcome::Print(p))
        }
        Ok(o) => Some(o),
        Err(e) => {
            println!("error: {place}{e}");
            None
        }
    }
}

/// Runs the REPL lines of the script `input`, named `name`; errors name their line, and a line
/// that is not UTF-8 is one of them. Returns the number of lines that failed.
fn run_script(repl: &mut Session, mut input: impl BufRead, name: &str) -> Result<usize, Fail> {
    let mut failed = 0;
    for n in 1usize.. {
        let mut line = Vec::new();
        let read = input.read_until(b'\n', &mut line);
        if read.map_err(|e| Fail::Usage(format!("{name}: {e}")))? == 0 {
            break;
        }
        // As `BufRead::lines`: without the `\n` or `\r\n`.
        if line.ends_with(b"\n") {
            line.pop();
            if line.ends_with(b"\r") {
                line.pop();
            }
        }
        let place = format!("{name}:{n}: ");
        match String::from_utf8(line) {
            Ok(line) => match eval_and_print(repl, &line, &place) {
                Some(Outcome::Quit) => break,
                Some(_) => {}
                None => failed += 1,
            },
            Err(e) => {
                println!("error: {place}not UTF-8 ({e})");
                failed += 1;
            }
        }
    }
    Ok(failed)
}

fn cmd_repl(o: &Opts) -> Result<(), Fail> {
    set_threads(o)?;
    let vm = Vm::builder().sync_mode(o.has("--sync-mode")).build()?;
    let mut repl = Session::new(vm);
    if !std::io::stdin().is_terminal() {
        run_script(&mut repl, std::io::stdin().lock(), "stdin")?;
        return Ok(());
    }
    println!("eddy repl: tensor expressions, :help for the list, :quit to leave");
    let mut rl = rustyline::DefaultEditor::new().map_err(|e| Fail::Run(e.to_string()))?;
    let history = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".eddy_history"));
    if let Some(h) = &history {
        let _ = rl.load_history(h);
    }
    loop {
        match rl.readline(">>> ") {
            Ok(line) => {
                if !line.trim().is_empty() {
                    let _ = rl.add_history_entry(line.as_str());
                }
                if eval_and_print(&mut repl, &line, "") == Some(Outcome::Quit) {
                    break;
                }
            }
            Err(rustyline::error::ReadlineError::Interrupted) => continue,
            Err(rustyline::error::ReadlineError::Eof) => break,
            Err(e) => return Err(Fail::Run(e.to_string())),
        }
    }
    if let Some(h) = &history {
        let _ = rl.save_history(h);
    }
    Ok(())
}

fn cmd_trace(o: &Opts) -> Result<(), Fail> {
    if o.has("--steps") && o.has("--script") {
        return Err(Fail::Usage("give --steps or --script, not both".into()));
    }
    set_threads(o)?;
    let json = PathBuf::from(o.str("--out").unwrap_or("eddy-trace.json"));
    let svg = o
        .str("--svg")
        .map_or_else(|| json.with_extension("svg"), PathBuf::from);
    let (devices, parallel) = train_cmd::devices_opts(o)?;
    if devices > 1 && o.has("--script") {
        return Err(Fail::Usage(
            "--devices traces training steps: it cannot go with --script".into(),
        ));
    }
    let vm = Vm::builder()
        .sync_mode(o.has("--sync-mode"))
        .cpu_devices(devices)
        .trace(true)
        .build()?;
    if let Some(script) = o.str("--script") {
        let f = std::fs::File::open(script)
            .map_err(|e| Fail::Usage(format!("{script}: cannot read: {e}")))?;
        let mut repl = Session::new(vm.clone());
        let failed = run_script(&mut repl, std::io::BufReader::new(f), script)?;
        if failed > 0 {
            eprintln!("eddy: {failed} line(s) of {script} failed; tracing what ran");
        }
    } else {
        let steps: usize = o.get("--steps", 3)?;
        if steps == 0 {
            return Err(Fail::Usage("--steps must be at least 1".into()));
        }
        let data = Dataset::load(&default_path()).map_err(|e| Fail::Usage(e.to_string()))?;
        // `steps` training steps of the digits MLP: one epoch cut to that many batches.
        let opts = TrainOptions {
            epochs: 1,
            devices,
            parallel,
            ..TrainOptions::default()
        };
        // 80 rows per step: 64 train (one batch), 16 held out.
        let rows = steps.saturating_mul(80).min(data.len());
        let small = Dataset {
            features: data.features[..rows * data.n_features].to_vec(),
            labels: data.labels[..rows].to_vec(),
            ..data
        };
        let r = train(&opts, &small, &vm, |_| {})?;
        println!(
            "traced {} training step(s) of the digits MLP (loss {:.4})",
            r.sizes.0.div_ceil(opts.batch_size),
            r.epochs[0].loss
        );
    }
    write_trace(&vm, &json, Some(&svg))
}
