//! Lays out the `eddy` binary's hot code together.
//!
//! `src/bin/eddy.order` lists the functions that the benchmark workloads run (the start of the
//! process, the small-op workloads, the training), hottest first in each part
//! (`benches/link-order.sh` writes it). Given to the linker, they come first in `.text`, one
//! after another, instead of spread over the whole binary: the kernel maps a binary's code
//! into memory in 64 KiB pieces around each first call, so a spread-out hot path makes most of
//! `.text` resident. With the list, the training workload's resident code goes from about
//! 4.3 MiB to 2 MiB (book, performance chapter, "mlp_train peak RSS").
//!
//! Only LLD reads such a list (`--symbol-ordering-file`). It is Rust's default linker for
//! `x86_64-unknown-linux-gnu` since 1.90; with another target, an older compiler or a linker
//! of the user's choosing, the binary links as before. A name the build does not have (the
//! list was made by another compiler, or the function is gone) is skipped in silence: the
//! layout is then only less compact, never wrong.

use std::env;
use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/bin/eddy.order");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    let order = Path::new(&env::var("CARGO_MANIFEST_DIR").unwrap_or_default())
        .join("src")
        .join("bin")
        .join("eddy.order");
    if order.exists() && links_with_lld() {
        println!(
            "cargo:rustc-link-arg-bin=eddy=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo:rustc-link-arg-bin=eddy=-Wl,--no-warn-symbol-ordering");
    }
}

/// Whether the binary is linked by the compiler's own LLD: the default linker of
/// `x86_64-unknown-linux-gnu` from Rust 1.90, unless the build names a linker or linker flags.
fn links_with_lld() -> bool {
    let var = |k: &str| env::var(k).unwrap_or_default();
    if var("TARGET") != "x86_64-unknown-linux-gnu" || env::var_os("RUSTC_LINKER").is_some() {
        return false;
    }
    let flags = var("CARGO_ENCODED_RUSTFLAGS");
    if ["linker", "fuse-ld", "link-self-contained"]
        .iter()
        .any(|f| flags.contains(f))
    {
        return false;
    }
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let Ok(out) = Command::new(rustc).arg("--version").output() else {
        return false;
    };
    // "rustc 1.95.0 (59807616e 2026-04-14)"
    let version = String::from_utf8_lossy(&out.stdout);
    let minor = (version.split_whitespace().nth(1))
        .and_then(|v| v.split('.').nth(1))
        .and_then(|m| m.parse::<u32>().ok());
    minor.is_some_and(|m| m >= 90)
}
