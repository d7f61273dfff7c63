//! The `eddy` command, run as a user runs it: the benchmark JSON has the shape the
//! book's performance chapter gives; `train` trains, writes a real PNG, is reproducible and rejects bad data with
//! exit code 2 and one line naming file and row; `repl` runs scripts and survives errors;
//! `trace` writes parseable chrome-trace JSON and an SVG.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn eddy(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_eddy"))
        .args(args)
        .output()
        .expect("run eddy")
}

/// Runs `eddy args` with `stdin` piped in.
fn eddy_stdin(args: &[&str], stdin: impl AsRef<[u8]>) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_eddy"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run eddy");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_ref())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// A fresh directory for one test's files.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("eddy-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn bench_json_has_the_documented_shape() {
    let out = eddy(&[
        "bench",
        "--json",
        "--threads",
        "2",
        "--only",
        "dispatch_small_ns_per_op,mlp_train_peak_rss_mb",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["framework"], "eddy");
    assert_eq!(v["meta"]["threads"], 2);
    let m = &v["metrics"];
    assert!(m["dispatch_small_ns_per_op"].as_f64().unwrap() > 0.0);
    assert_eq!(
        v["samples"]["dispatch_small_ns_per_op"]
            .as_array()
            .unwrap()
            .len(),
        7
    );
    // The training workload ran in a fresh child: its peak is above its base, and it trained.
    let (peak, base) = (
        m["mlp_train_peak_rss_mb"].as_f64().unwrap(),
        m["mlp_train_base_rss_mb"].as_f64().unwrap(),
    );
    assert!(peak > base && base > 0.0, "peak {peak} base {base}");
    assert!(
        m["mlp_train_loss_last"].as_f64().unwrap() < m["mlp_train_loss_first"].as_f64().unwrap()
    );
    assert_eq!(
        v["samples"]["mlp_train_ms_per_step"]
            .as_array()
            .unwrap()
            .len(),
        50
    );
}

/// `--roof` adds the gemm crate's figures for the matmul keys asked for, one sample per
/// repetition of Eddy's, and nothing for the others; without it there is no `roof`.
#[test]
fn bench_roof_measures_gemm_beside_each_matmul() {
    let out = eddy(&[
        "bench",
        "--json",
        "--roof",
        "--only",
        "matmul_256_gflops,dispatch_small_ns_per_op",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let roof = &v["roof"];
    let samples = roof["samples"]["matmul_256_gflops"].as_array().unwrap();
    assert_eq!(samples.len(), 7);
    assert!(samples.iter().all(|s| s.as_f64().unwrap() > 0.0));
    assert!(roof["metrics"]["matmul_256_gflops"].as_f64().unwrap() > 0.0);
    assert_eq!(roof["metrics"].as_object().unwrap().len(), 1);
    assert_eq!(
        v["samples"]["matmul_256_gflops"].as_array().unwrap().len(),
        7
    );
    let plain = eddy(&["bench", "--json", "--only", "dispatch_small_ns_per_op"]);
    let v: serde_json::Value = serde_json::from_slice(&plain.stdout).unwrap();
    assert!(v.get("roof").is_none());
}

/// The compiled-graph workloads report their keys; the compiled training's peak comes from a
/// process of its own, as the eager one's.
#[test]
fn bench_runs_the_compiled_graph_workloads() {
    let out = eddy(&[
        "bench",
        "--json",
        "--only",
        "chain_graph_ns_per_op,mlp_infer_graph_us_per_fwd,mlp_train_graph_peak_rss_mb",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for k in ["chain_graph_ns_per_op", "mlp_infer_graph_us_per_fwd"] {
        assert_eq!(v["samples"][k].as_array().unwrap().len(), 7, "{k}");
        assert!(v["metrics"][k].as_f64().unwrap() > 0.0, "{k}");
    }
    let peak = v["metrics"]["mlp_train_graph_peak_rss_mb"]
        .as_f64()
        .unwrap();
    assert!(peak > 1.0 && peak < 1024.0, "{peak}");
    assert!(
        v["metrics"]["mlp_train_graph_ms_per_step"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert!(
        v["metrics"].get("mlp_train_peak_rss_mb").is_none(),
        "no eager child"
    );
}

/// `--roof` measures the batch-1 forward beside the same forward through its kernels alone
/// (where the CPU has the AVX2 and FMA the single-row kernel needs).
#[test]
fn bench_roof_measures_the_forward_beside_its_kernels() {
    let out = eddy(&[
        "bench",
        "--json",
        "--roof",
        "--only",
        "mlp_infer_us_per_fwd",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["samples"]["mlp_infer_us_per_fwd"]
            .as_array()
            .unwrap()
            .len(),
        7
    );
    let has_kernel = cfg!(target_arch = "x86_64") && {
        #[cfg(target_arch = "x86_64")]
        let k = std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma");
        #[cfg(not(target_arch = "x86_64"))]
        let k = false;
        k
    };
    if has_kernel {
        let samples = v["roof"]["samples"]["mlp_infer_us_per_fwd"]
            .as_array()
            .unwrap();
        assert_eq!(samples.len(), 7);
        assert!(samples.iter().all(|s| s.as_f64().unwrap() > 0.0));
    } else {
        assert!(v.get("roof").is_none());
    }
}

#[test]
fn bad_options_exit_with_code_2_and_a_message() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["bench", "--only", "no_such_key"],
            "unknown key `no_such_key`",
        ),
        (&["frobnicate"], "unknown command"),
        (&[], "no command"),
        (
            &["train", "--epochs", "many"],
            "bad value for --epochs: `many`",
        ),
        (&["train", "--hidden", "12,x"], "bad value for --hidden"),
        (&["train", "--lr", "-1"], "--lr must be a positive number"),
        (&["train", "--batch-size", "0"], "must be at least 1"),
        (&["train", "--bogus"], "unknown option `--bogus`"),
        (&["train", "--seed"], "--seed needs a value"),
        (&["trace", "--steps", "2", "--script", "x"], "not both"),
        (&["train", "--devices", "0"], "--devices must be in 1..=64"),
        (
            &["train", "--parallel", "tensor"],
            "--parallel needs --devices",
        ),
        (
            &["train", "--devices", "2", "--parallel", "pipe"],
            "bad value for --parallel: `pipe`",
        ),
        (
            &["train", "--devices", "2", "--graph"],
            "cannot go with --devices",
        ),
    ];
    for (args, msg) in cases {
        let out = eddy(args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(msg), "{args:?}: {err}");
    }
}

#[test]
fn train_a_cnn_on_the_digits_as_images() {
    let dir = scratch("train-cnn");
    let png = dir.join("cnn.png");
    let out = eddy(&[
        "train",
        "--model",
        "cnn",
        "--epochs",
        "3",
        "--plot",
        png.to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.contains("a CNN") && stdout.contains("8×8 images"),
        "{stdout}"
    );
    let acc_line = stdout
        .lines()
        .find(|l| l.starts_with("test accuracy"))
        .unwrap_or_else(|| panic!("{stdout}"));
    let acc: f64 = acc_line.split_whitespace().nth(2).unwrap().parse().unwrap();
    assert!(acc > 85.0, "{stdout}");
    check_png(&png);
    for (args, msg) in [
        (&["train", "--model", "rnn"][..], "unknown model `rnn`"),
        (
            &["train", "--model", "cnn", "--hidden", "32"],
            "no --hidden",
        ),
        (&["train", "--model", "cnn", "--devices", "2"], "one device"),
    ] {
        let out = eddy(args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(msg), "{args:?}: {err}");
    }
}

#[test]
fn train_a_character_transformer_on_a_text() {
    let dir = scratch("train-transformer");
    let (png, txt) = (dir.join("t.png"), dir.join("t.txt"));
    std::fs::write(
        &txt,
        "the quick brown fox jumps over the lazy dog. ".repeat(60),
    )
    .unwrap();
    // Two epochs of 6 steps of one window: the test binary is built without optimisation.
    let (txt_s, png_s) = (txt.to_str().unwrap(), png.to_str().unwrap());
    let out = eddy(&[
        "train",
        "--model",
        "transformer",
        "--epochs",
        "2",
        "--steps",
        "6",
        "--batch-size",
        "1",
        "--data",
        txt_s,
        "--plot",
        png_s,
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.contains("character transformer") && stdout.contains("2700 bytes"),
        "{stdout}"
    );
    let losses: Vec<f64> = (stdout.lines())
        .filter(|l| l.starts_with("epoch"))
        .map(|l| l.split_whitespace().nth(3).unwrap().parse().unwrap())
        .collect();
    assert!(losses.len() == 2 && losses[1] < losses[0], "{stdout}");
    check_png(&png);
    for (args, msg) in [
        (
            &["train", "--model", "transformer", "--hidden", "8"][..],
            "no --hidden",
        ),
        (
            &["train", "--model", "transformer", "--devices", "2"],
            "one device",
        ),
    ] {
        let out = eddy(args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(msg), "{args:?}: {err}");
    }
}

/// The PNG decodes to the expected size and is a picture, not a blank canvas.
fn check_png(path: &std::path::Path) {
    let dec = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = dec.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (960, 400));
    let px = info.color_type.samples();
    let colours: std::collections::HashSet<&[u8]> = buf[..info.buffer_size()].chunks(px).collect();
    let non_white = buf[..info.buffer_size()]
        .chunks(px)
        .filter(|c| c.iter().take(3).any(|&v| v < 200))
        .count();
    assert!(colours.len() > 20, "{} colours", colours.len());
    assert!(non_white > 2000, "{non_white} dark pixels");
}

#[test]
fn train_one_epoch_reports_and_writes_its_png() {
    let dir = scratch("train");
    let png = dir.join("curve.png");
    let out = eddy(&["train", "--epochs", "1", "--plot", png.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let acc_line = stdout
        .lines()
        .find(|l| l.starts_with("test accuracy"))
        .unwrap_or_else(|| panic!("{stdout}"));
    let acc: f64 = acc_line.split_whitespace().nth(2).unwrap().parse().unwrap();
    assert!(acc > 80.0, "{stdout}");
    assert!(
        stdout.contains("engine: ") && stdout.contains("instructions"),
        "{stdout}"
    );
    assert!(
        stdout.contains("OOM retries") && stdout.contains("peak memory"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("curves to {}", png.display())),
        "{stdout}"
    );
    check_png(&png);
}

#[test]
fn train_is_reproducible_and_takes_its_options() {
    let dir = scratch("seed");
    let run = |seed: &str, extra: &[&str]| {
        let png = dir.join(format!("c{seed}.png"));
        let mut args = vec![
            "train",
            "--epochs",
            "2",
            "--seed",
            seed,
            "--plot",
            png.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = eddy(&args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        // Epoch lines without the steps/s figure, which is a timing.
        text(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("epoch"))
            .map(|l| {
                // Drop the figure and its padding, whose width follows the figure's digits.
                let before = l.split("steps/s").next().unwrap().trim_end();
                before.rsplit_once(' ').unwrap().0.trim_end().to_string()
            })
            .collect::<Vec<_>>()
    };
    let a = run("7", &[]);
    assert_eq!(a.len(), 2);
    assert_eq!(
        a,
        run("7", &["--threads", "1"]),
        "same seed, another thread count"
    );
    assert_eq!(
        a,
        run("7", &["--sync-mode"]),
        "same seed, synchronous engine"
    );
    assert_eq!(
        a,
        run("7", &["--graph"]),
        "same seed, compiled steps: the same values"
    );
    assert_eq!(
        a,
        run("7", &["--promote"]),
        "same seed, recurring steps promoted by the engine: the same values"
    );
    assert_eq!(
        a,
        run("7", &["--devices", "2"]),
        "same seed, data parallel over two CPU devices: the same values"
    );
    assert_eq!(
        a,
        run("7", &["--devices", "3", "--parallel", "tensor"]),
        "same seed, tensor parallel over three CPU devices: the same values"
    );
    assert_ne!(a, run("8", &[]), "another seed");
    let b = run(
        "7",
        &["--hidden", "32,16", "--batch-size", "100", "--lr", "0.005"],
    );
    assert_ne!(a, b);
}

/// `--promote` promotes the recurring windows of the later epochs to plans, prints what it
/// did, and trains to the same losses and accuracies. (`EDDY_VM_PROMOTION=always`: every
/// recurring window, whatever the timing verdicts say on a busy machine.)
#[test]
fn train_promote_runs_the_recurring_steps_as_plans() {
    let dir = scratch("auto");
    let png = dir.join("a.png");
    let run = |extra: &[&str]| {
        let mut args = vec!["train", "--epochs", "4", "--plot", png.to_str().unwrap()];
        args.extend_from_slice(extra);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_eddy"));
        if extra.contains(&"--promote") {
            cmd.env("EDDY_VM_PROMOTION", "always");
        }
        let out = cmd.args(&args).output().expect("run eddy");
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let (eager, auto) = (run(&[]), run(&["--promote"]));
    // The accuracy line without its time.
    let accuracy = |s: &str| {
        s.lines()
            .find(|l| l.starts_with("test accuracy"))
            .map(|l| l.split(" in ").next().unwrap_or("").to_string())
    };
    assert_eq!(accuracy(&auto), accuracy(&eager));
    let line = auto
        .lines()
        .find(|l| l.starts_with("automatic plans:"))
        .expect("a summary");
    let promoted: u64 = line["automatic plans: ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(promoted > 0, "{line}");
    assert!(!eager.contains("automatic plans:"));
}

/// `--graph --plan` draws the compiled step's memory plan: one rectangle per intermediate.
#[test]
fn train_graph_draws_its_memory_plan() {
    let dir = scratch("plan");
    let (png, svg) = (dir.join("c.png"), dir.join("plan.svg"));
    let out = eddy(&[
        "train",
        "--epochs",
        "1",
        "--graph",
        "--plot",
        png.to_str().unwrap(),
        "--plan",
        svg.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("memory plan"),
        "{}",
        text(&out.stdout)
    );
    let pic = std::fs::read_to_string(&svg).unwrap();
    assert!(pic.starts_with("<svg") && pic.trim_end().ends_with("</svg>"));
    // One rectangle per intermediate the title counts: the step's activations and their
    // gradients (the optimizer's update is one instruction per parameter, with none).
    let count: usize = pic
        .split(" intermediates")
        .next()
        .and_then(|h| h.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("the title counts the intermediates");
    assert!(count >= 6, "{pic}");
    assert_eq!(pic.matches("<rect class=\"t\"").count(), count, "{pic}");
    let out = eddy(&["train", "--epochs", "1", "--plan", svg.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "--plan without --graph");
}

#[test]
fn train_reads_any_csv_and_writes_a_trace() {
    let dir = scratch("csv");
    // Three well-separated classes in 3 features, with a header row.
    let mut csv = String::from("x,y,z,label\n");
    for i in 0..150 {
        let c = i % 3;
        let j = (i * 7 % 10) as f64 / 10.0;
        csv += &format!("{},{},{},{c}\n", c as f64 * 3.0 + j, -(c as f64) + j, j,);
    }
    let data = dir.join("three.csv");
    std::fs::write(&data, csv).unwrap();
    let trace = dir.join("t.json");
    let png = dir.join("p.png");
    let out = eddy(&[
        "train",
        "--data",
        data.to_str().unwrap(),
        "--epochs",
        "30",
        "--trace",
        trace.to_str().unwrap(),
        "--plot",
        png.to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(stdout.contains("MLP 3-128-3"), "{stdout}");
    assert!(stdout.contains("test accuracy 100.00 %"), "{stdout}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    assert!(v["traceEvents"].as_array().unwrap().len() > 100);
}

#[test]
fn bad_data_files_give_one_line_naming_file_and_row() {
    let dir = scratch("bad");
    let cases = [
        (
            "ragged.csv",
            "1,2,0\n3,4,1\n5,1\n",
            "ragged.csv: row 3: 2 cells, but the first row has 3",
        ),
        (
            "text.csv",
            "1,2,0\n3,abc,1\n",
            "text.csv: row 2: column 2: `abc` is not a finite number",
        ),
        (
            "label.csv",
            "1,2,0\n3,4,-2\n",
            "label.csv: row 2: label `-2` is not an integer",
        ),
        (
            "frac.csv",
            "1,2,0\n3,4,1.5\n",
            "frac.csv: row 2: label `1.5` is not an integer",
        ),
        ("empty.csv", "", "empty.csv: no data rows"),
        ("few.csv", "1,2,0\n", "rows are too few"),
    ];
    for (name, body, msg) in cases {
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        let out = eddy(&["train", "--data", p.to_str().unwrap(), "--epochs", "1"]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(msg), "{name}: {err}");
        assert!(
            text(&out.stdout).is_empty(),
            "{name}: refused before the banner"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
    }
    let missing = dir.join("missing.csv");
    let out = eddy(&["train", "--data", missing.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("missing.csv: cannot read"), "{err}");
}

#[test]
fn repl_runs_a_script_and_survives_errors() {
    let script = "\
let a = tensor([[1., 2.], [3., 4.]])
a.matmul(a.t()).relu().sum(1)
a.frobnicate()
let b = randn(3, 4)
b.matmul(b)
(a * 2 - 1)[1]
a.sum(0, keepdim=true).shape
tensor([1, 2, 3]).index_select(0, tensor([5]))
:sync
a.max().item()
:stats
:quit
a.sum()
";
    let out = eddy_stdin(&["repl"], script);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let o = text(&out.stdout);
    let lines: Vec<&str> = o.lines().collect();
    assert_eq!(lines[0], "tensor([16.0000, 36.0000], dtype=f32)", "{o}");
    assert!(
        lines[1].starts_with("error: stdin:3: a tensor has no method `frobnicate`"),
        "{o}"
    );
    assert!(
        lines[2].starts_with("error: stdin:5: ") && lines[2].contains("matmul"),
        "{o}"
    );
    assert_eq!(lines[3], "tensor([5.0000, 7.0000], dtype=f32)", "{o}");
    assert_eq!(lines[4], "[1, 2]", "{o}");
    assert!(
        lines[5].starts_with("error: stdin:8: ") && lines[5].contains("index_select"),
        "{o}"
    );
    assert!(lines.contains(&"4"), "{o}");
    assert!(o.contains("instructions inserted"), "{o}");
    assert!(!o.contains("tensor(10."), ":quit stops the script: {o}");
}

/// `reshape`'s -1 is inferred without overflow, a size below -1 is refused, and an integer
/// tensor to a whole power stays integer (to a negative one is an error): each bad line is one
/// error line, and the script goes on.
#[test]
fn repl_reshape_sizes_and_integer_powers() {
    let script = "\
tensor([1., 2, 3, 4]).reshape(-1, 4611686018427387904, 4)
tensor([1., 2, 3, 4]).reshape(-1, -2)
tensor([1., 2, 3, 4]).reshape(2, -1).shape
tensor([2, 3]) ** 2
tensor([2, 3]) ** -1
";
    let out = eddy_stdin(&["repl"], script);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let o = text(&out.stdout);
    let lines: Vec<&str> = o.lines().collect();
    assert!(
        lines[0].starts_with("error: stdin:1: reshape: cannot infer -1"),
        "{o}"
    );
    assert!(
        lines[1].starts_with("error: stdin:2: reshape: bad size -2"),
        "{o}"
    );
    assert_eq!(lines[2], "[2, 2]", "{o}");
    assert_eq!(lines[3], "tensor([4, 9], dtype=i64)", "{o}");
    assert!(
        lines[4].starts_with("error: stdin:5: ") && lines[4].contains("pow_scalar"),
        "{o}"
    );
}

/// A line that is not UTF-8 is one error line naming it, and the lines after it still run:
/// in a script piped to `repl` and in `trace --script`, which exit as for any failed line.
#[test]
fn an_undecodable_line_is_an_error_and_the_script_goes_on() {
    let script: &[u8] = b"1+1\n\xff\xfe\n40+2\r\n";
    let out = eddy_stdin(&["repl"], script);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let o = text(&out.stdout);
    let lines: Vec<&str> = o.lines().collect();
    assert_eq!(lines.len(), 3, "{o}");
    assert_eq!(lines[0], "2", "{o}");
    assert!(lines[1].starts_with("error: stdin:2: not UTF-8"), "{o}");
    assert_eq!(lines[2], "42", "{o}");

    let dir = scratch("undecodable");
    let (file, json) = (dir.join("s.eddy"), dir.join("t.json"));
    std::fs::write(&file, script).unwrap();
    let out = eddy(&[
        "trace",
        "--script",
        file.to_str().unwrap(),
        "--out",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let o = text(&out.stdout);
    let at = format!("error: {}:2: not UTF-8", file.display());
    assert!(o.lines().any(|l| l.starts_with(&at)), "{o}");
    assert!(o.lines().any(|l| l == "42"), "{o}");
    assert!(
        text(&out.stderr).contains("1 line(s) of"),
        "{}",
        text(&out.stderr)
    );
    assert!(json.exists());
}

/// Runs `script` through `eddy repl`, which must exit successfully (not abort on a stack
/// overflow), and returns its output lines.
fn repl_lines(script: &str) -> Vec<String> {
    let out = eddy_stdin(&["repl"], script);
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        text(&out.stderr)
    );
    text(&out.stdout).lines().map(str::to_string).collect()
}

/// Deep nesting is an error line, not a stack overflow that aborts the process: 100000 `(`,
/// unary minuses or `[`, `1+1+…` of 100000 terms (a left-nested tree), lists nested through a
/// variable line after line; tensors of more than 64 dims are refused where they would be made.
/// Nesting within the limits still evaluates.
#[test]
fn repl_refuses_deep_nesting_and_huge_ranks() {
    let n = 100_000;
    let ones = |k: usize| vec!["1"; k].join(", ");
    let mut script = [
        format!("{}1", "(".repeat(n)),
        format!("{}1", "-".repeat(n)),
        format!("{}1{}", "[".repeat(n), "]".repeat(n)),
        format!("1{}", "+1".repeat(n)),
        format!("zeros({})", ones(n)),
        format!("tensor({}1{})", "[".repeat(100), "]".repeat(100)),
        format!("{}1{}", "(".repeat(200), ")".repeat(200)),
        format!("1{}", "+1".repeat(199)),
        format!("zeros({}).shape", ones(64)),
        format!("let u = zeros({})", ones(64)),
        "u.unsqueeze(0)".to_string(),
        format!("zeros(1).reshape({})", ones(65)),
        "let a = 1".to_string(),
    ]
    .join("\n");
    // Lines 14 to 269: `a` one list deeper each time, to 256; line 270 would be 257.
    for _ in 0..257 {
        script += "\nlet a = [a]";
    }
    script.push('\n');
    let lines = repl_lines(&script);
    let too_deep = "expression nested too deeply (more than 256 levels)";
    for (i, line) in lines[..4].iter().enumerate() {
        assert_eq!(
            line,
            &format!("error: stdin:{}: {too_deep}", i + 1),
            "{lines:?}"
        );
    }
    assert_eq!(
        lines[4],
        "error: stdin:5: zeros: 100000 dims, more than the 64 a tensor may have"
    );
    assert_eq!(
        lines[5],
        "error: stdin:6: tensor: 65 dims, more than the 64 a tensor may have"
    );
    assert_eq!(lines[6], "1");
    assert_eq!(lines[7], "200");
    assert_eq!(lines[8], format!("[{}]", ones(64)));
    assert_eq!(
        lines[9],
        "error: stdin:11: unsqueeze: 65 dims, more than the 64 a tensor may have"
    );
    assert_eq!(
        lines[10],
        "error: stdin:12: reshape: 65 dims, more than the 64 a tensor may have"
    );
    assert_eq!(lines[11], format!("error: stdin:270: {too_deep}"));
    assert_eq!(lines.len(), 12, "{lines:?}");
}

/// `tensor(..)` as `torch.tensor`: every number at one depth (a later sibling list does not add
/// a dim), booleans give `bool` and an empty list `f32`, a float constant is converted once to
/// an `f64` tensor's dtype (not rounded to `f32` first), and an integer outside `i64` is an
/// error rather than `i64::MAX`.
#[test]
fn repl_tensor_literals_and_constants_follow_pytorch() {
    let script = "\
tensor([1, [2]])
tensor([1, 2, [3]])
tensor([true, false])
tensor([])
tensor([[], []]).dtype
tensor(0.1, dtype=f64).item()
0.1 > tensor([0.1], dtype=f64)
(0.1 / tensor(1., dtype=f64)).item()
2 ** 63
tensor(2 ** 63)
tensor([1, -2 ** 63 - 4096])
1.5 / tensor([1, 2])
";
    let lines = repl_lines(script);
    let ragged = "tensor: expected a nested list of numbers of one depth";
    assert_eq!(lines[0], format!("error: stdin:1: {ragged}"), "{lines:?}");
    assert_eq!(lines[1], format!("error: stdin:2: {ragged}"), "{lines:?}");
    assert_eq!(lines[2], "tensor([ True, False], dtype=bool)");
    assert_eq!(lines[3], "tensor([], dtype=f32)");
    assert_eq!(lines[4], "f32");
    assert_eq!(lines[5], "0.1");
    assert_eq!(lines[6], "tensor([False], dtype=bool)");
    assert_eq!(lines[7], "0.1");
    assert_eq!(lines[8], "9223372036854775808");
    assert_eq!(
        lines[9],
        "error: stdin:10: tensor: 9223372036854775808 is outside the range of i64 (overflow)"
    );
    assert_eq!(
        lines[10],
        "error: stdin:11: tensor: -9223372036854779904 is outside the range of i64 (overflow)"
    );
    assert_eq!(lines[11], "tensor([1.5000, 0.7500], dtype=f32)");
    assert_eq!(lines.len(), 12, "{lines:?}");
}

/// Methods take PyTorch's arguments: `max(dim)`/`min(dim)` give (values, indices), `flatten`
/// its start and end dims, methods without parameters refuse arguments, `.T` reverses every
/// dim, a reduction without dims reduces all of them (keeping them with keepdim), and a dim
/// given positionally and as `dim=` is an error; `max(keepdim=true)` needs a dim and
/// `argmax(keepdim=true)` keeps every dim as 1, as PyTorch; a fill value the dtype cannot
/// hold is refused.
#[test]
fn repl_methods_take_pytorch_arguments() {
    let script = "\
let m = tensor([[1., 5, 2], [7, 0, 3]])
m.max(1)[0]
m.max(1)[1]
m.min(dim=0)[1]
m.max(1, keepdim=true)[1].shape
zeros(2, 3, 4).flatten(1).shape
zeros(2, 3, 4).flatten(0, 1).shape
zeros(2, 3, 4).flatten(end_dim=-2).shape
zeros(2, 3, 4).flatten(1, start_dim=0)
zeros(2, 3, 4).flatten(2, 1)
m.contiguous(1)
m.float(dtype=f64)
m.detach(0)
m.sync(0)
m.tolist(0)
zeros(2, 3, 4).T.shape
arange(3).T.shape
m.sum(keepdim=true).tolist()
m.mean(keepdim=true).shape
m.prod(keepdim=true).shape
m.sum(0, dim=1)
m.var(0, dim=1)
m.max(keepdim=true)
m.argmax(keepdim=true)
m.argmin()
full([2], 300, dtype=u8)
full([2], -1, dtype=u8).tolist()
full([2], 3).dtype
full([2], true).dtype
full([2], 2.5).dtype
";
    let lines = repl_lines(script);
    let expected = [
        "tensor([5.0000, 7.0000], dtype=f32)",
        "tensor([1, 0], dtype=i64)",
        "tensor([0, 1, 0], dtype=i64)",
        "[2, 1]",
        "[2, 12]",
        "[6, 4]",
        "[6, 4]",
        "error: stdin:9: flatten: got multiple values for argument `start_dim`",
        "error: stdin:10: invalid argument to `flatten`: start_dim 2 comes after end_dim 1",
        "error: stdin:11: contiguous: expected 0 arguments, got 1",
        "error: stdin:12: float: unknown argument `dtype`",
        "error: stdin:13: detach: expected 0 arguments, got 1",
        "error: stdin:14: sync: expected 0 arguments, got 1",
        "error: stdin:15: tolist: expected 0 arguments, got 1",
        "[4, 3, 2]",
        "[3]",
        "[[18]]",
        "[1, 1]",
        "[1, 1]",
        "error: stdin:21: sum: got multiple values for argument `dim`",
        "error: stdin:22: var: got multiple values for argument `dim`",
        "error: stdin:23: max: keepdim needs a dim",
        "tensor([[3]], dtype=i64)",
        "tensor(4, dtype=i64)",
        "error: stdin:26: invalid argument to `full`: value 300 cannot be converted to u8 without overflow",
        "[255, 255]",
        "i64",
        "bool",
        "f32",
    ];
    assert_eq!(lines, expected);
}

/// `tolist` neither overflows its size arithmetic (a `[0, 2^32, 2^32]` tensor is `[]`) nor
/// builds more than 10 million values or lists (`[20000000, 0]` has no values but 20000001
/// lists).
#[test]
fn repl_tolist_is_bounded() {
    let script = "\
zeros(0, 4294967296, 4294967296).tolist()
zeros(20000000, 0).tolist()
zeros(3, 4000000).tolist()
";
    let lines = repl_lines(script);
    assert_eq!(lines[0], "[]");
    assert_eq!(
        lines[1],
        "error: stdin:2: tolist: a tensor of shape [20000000, 0] makes 0 values in 20000001 \
         lists, more than 10000000"
    );
    // The old output of this line was 12 million numbers: show only its start.
    let start: String = lines[2].chars().take(200).collect();
    assert_eq!(
        start,
        "error: stdin:3: tolist: a tensor of shape [3, 4000000] makes 12000000 values in 4 \
         lists, more than 10000000"
    );
    assert_eq!(lines.len(), 3);
}

/// Each stream named in the trace's metadata has at least one instruction.
fn check_trace(path: &std::path::Path) -> usize {
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let ev = v["traceEvents"].as_array().unwrap();
    let streams: Vec<&serde_json::Value> = ev
        .iter()
        .filter(|e| e["ph"] == "M")
        .map(|e| &e["tid"])
        .collect();
    assert!(!streams.is_empty());
    for s in streams {
        assert!(
            ev.iter().any(|e| e["ph"] == "X"
                && &e["tid"] == s
                && e["name"].as_str().is_some_and(|n| !n.is_empty())),
            "no instruction on stream {s}"
        );
    }
    ev.iter().filter(|e| e["ph"] == "X").count()
}

#[test]
fn trace_writes_json_and_svg_for_training_and_scripts() {
    let dir = scratch("trace");
    let json = dir.join("train.json");
    let out = eddy(&["trace", "--steps", "2", "--out", json.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(check_trace(&json) > 50);
    let svg = std::fs::read_to_string(dir.join("train.svg")).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("matmul") && svg.trim_end().ends_with("</svg>")
    );

    let script = dir.join("s.eddy");
    std::fs::write(
        &script,
        "let x = randn(64, 64)\nx.matmul(x).softmax(-1).sum()\n",
    )
    .unwrap();
    let (json, svg) = (dir.join("s.json"), dir.join("pic.svg"));
    let out = eddy(&[
        "trace",
        "--script",
        script.to_str().unwrap(),
        "--out",
        json.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(check_trace(&json) >= 3);
    assert!(std::fs::read_to_string(&svg).unwrap().contains("softmax"));
}

#[test]
fn trace_of_a_tensor_parallel_step_has_collective_lanes() {
    let dir = scratch("trace-tp");
    let json = dir.join("tp.json");
    let out = eddy(&[
        "trace",
        "--steps",
        "2",
        "--devices",
        "2",
        "--parallel",
        "tensor",
        "--out",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let ev = v["traceEvents"].as_array().unwrap();
    let lane = |name: &str| {
        (ev.iter())
            .find(|e| e["ph"] == "M" && e["args"]["name"].as_str().unwrap().ends_with(name))
            .map(|e| e["tid"].clone())
            .unwrap_or_else(|| panic!("no lane {name}"))
    };
    let (kernels, collectives) = (lane(": cpu:1"), lane(": cpu:0:collective"));
    let on = |tid: &serde_json::Value, what: &dyn Fn(&str) -> bool| {
        (ev.iter()).any(|e| e["ph"] == "X" && &e["tid"] == tid && what(e["name"].as_str().unwrap()))
    };
    assert!(
        on(&kernels, &|n| n == "matmul"),
        "the second device's products"
    );
    assert!(
        on(&collectives, &|n| n == "all_reduce" || n == "all_gather"),
        "the step's collectives in their own lane"
    );
    let out = eddy(&[
        "trace",
        "--devices",
        "2",
        "--script",
        json.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

/// Option values the parser used to let through: a thread count no host can start (it
/// panicked with exit 101), a step count whose row count overflows, and `=value` on an
/// option that takes none (`--sync-mode=false` turned sync mode on). Each exits 2 naming the
/// option, or runs within bounds.
#[test]
fn out_of_range_and_misattached_option_values_are_usage_errors() {
    for args in [
        &["repl", "--threads", "18446744073709551615"][..],
        &[
            "bench",
            "--threads",
            "100000",
            "--only",
            "dispatch_small_ns_per_op",
        ],
        &["trace", "--sync-mode=false", "--steps", "1"],
    ] {
        let out = eddy(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
        let err = text(&out.stderr);
        assert!(
            err.contains("--threads") || err.contains("--sync-mode"),
            "{args:?}: {err}"
        );
    }
    // A huge step count traces the whole (small) data set instead of overflowing.
    let dir = scratch("huge-steps");
    let out = eddy(&[
        "trace",
        "--steps",
        "1000000000000000000",
        "--out",
        dir.join("t.json").to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("traced"),
        "{}",
        text(&out.stdout)
    );
}

/// Numbers beside tensors take the tensor's dtype as PyTorch's scalar operands do: `where`'s
/// 0.1 beside an f64 tensor is f64's 0.1, an integer past `u8` wraps (`+ 300` adds 44), and a
/// float past `f16`'s range is infinite there; none of them is refused as a fill value is.
#[test]
fn repl_scalar_operands_take_the_tensors_dtype() {
    let script = "\
let c = tensor([true, false])
let x = tensor([1., 2.]).double()
where(c, 0.1, x).tolist()
where(c, x, 0.1).tolist()
where(c, 0.1, x).dtype
let u = tensor([1, 2]).to(u8)
(u + 300).tolist()
(tensor([1., 2.]).half() + 1e6).tolist()
where(c, 3, u).dtype
";
    let lines = repl_lines(script);
    assert_eq!(
        lines,
        [
            "[0.1, 2]",
            "[1, 0.1]",
            "f64",
            "[45, 46]",
            "[inf, inf]",
            "u8"
        ],
        "{lines:?}"
    );
}

/// Elements of f32 in a square matrix of twice the host's memory (physical or the cgroup's
/// limit): granted by an overcommitting host, and fatal once touched, if the allocator did not
/// refuse it first.
#[cfg(target_os = "linux")]
fn side_of_twice_the_host() -> usize {
    let limit = eddy::vm::alloc::host_limit().expect("Linux reports its memory");
    ((limit / 4 * 2) as f64).sqrt().ceil() as usize
}

#[cfg(target_os = "linux")]
#[test]
fn the_repl_survives_a_tensor_twice_the_host() {
    let n = side_of_twice_the_host();
    let script = format!("let big = zeros({n}, {n})\nbig.sum()\n40 + 2\n");
    let out = eddy_stdin(&["repl"], script);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}{stdout}", text(&out.stderr));
    assert!(
        stdout.contains("error: stdin:2: out of memory"),
        "a typed error for the line that waits for it: {stdout}"
    );
    assert!(
        stdout.trim_end().ends_with("42"),
        "the next line runs: {stdout}"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn train_with_a_layer_twice_the_host_exits_1_with_the_error() {
    // A hidden layer whose bias alone is twice the host: every parameter of that size is
    // refused, and the command fails fast even in a debug build.
    let hidden = (side_of_twice_the_host() * side_of_twice_the_host()).to_string();
    let out = eddy(&["train", "--epochs", "1", "--hidden", &hidden]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("out of memory"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// Every command answers `--help` (exit 0, its options listed), `eddy --version` names the
/// version, and a mistyped option or command gets a suggestion with exit code 2.
#[test]
fn help_version_and_suggestions() {
    for (cmd, option) in [
        ("train", "--batch-size"),
        ("bench", "--only"),
        ("repl", "--sync-mode"),
        ("trace", "--script"),
    ] {
        let out = eddy(&[cmd, "--help"]);
        assert!(out.status.success(), "{cmd} --help: {}", text(&out.stderr));
        assert!(
            text(&out.stdout).contains(option),
            "{cmd}: {}",
            text(&out.stdout)
        );
    }
    let out = eddy(&["--help"]);
    assert!(out.status.success() && text(&out.stdout).contains("train"));
    let out = eddy(&["--version"]);
    assert!(out.status.success());
    assert_eq!(
        text(&out.stdout).trim(),
        format!("eddy {}", env!("CARGO_PKG_VERSION"))
    );
    for (args, tip) in [
        (&["train", "--epoch", "3"][..], "'--epochs'"),
        (&["trian"][..], "'train'"),
    ] {
        let out = eddy(args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("tip:") && err.contains(tip), "{args:?}: {err}");
    }
}
