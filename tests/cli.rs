//! The `eddy` command: the benchmark JSON has the shape of BENCHMARKS.md, bad options fail with
//! a message, and `train` trains.

use std::process::Command;

fn eddy(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_eddy"))
        .args(args)
        .output()
        .expect("run eddy")
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

#[test]
fn bad_options_fail_with_a_message() {
    let out = eddy(&["bench", "--only", "no_such_key"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown key `no_such_key`"));
    let out = eddy(&["frobnicate"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown command"));
    let out = eddy(&["train", "--epochs", "many"]);
    assert!(!out.status.success());
}

#[test]
fn train_runs_and_reports_accuracy() {
    let out = eddy(&["train", "--epochs", "3"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap();
    let acc: f64 = last
        .split("accuracy")
        .nth(1)
        .unwrap()
        .trim()
        .trim_end_matches('%')
        .trim()
        .parse()
        .unwrap();
    assert!(acc > 80.0, "{text}");
}
