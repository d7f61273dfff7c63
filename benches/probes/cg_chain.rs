//! The loops of `vm_chain` and `vm_fanout` for callgrind: `N` no-op chain instructions (each
//! reads blob i-1 and writes blob i of its chain's ring of 4). Modes: the default (one chain,
//! one stream, threaded, fusion on), `sync`, `nofuse`, and `fan` (64 chains round-robin on two
//! inline streams, as `vm_fanout`). The difference of two runs' totals over the difference of
//! their `N` is the cost of one instruction:
//!
//! ```text
//! cargo bench --bench cg_chain --no-run   # prints the binary: target/release/deps/cg_chain-HASH
//! valgrind --tool=callgrind target/release/deps/cg_chain-HASH 20000 fan
//! valgrind --tool=callgrind target/release/deps/cg_chain-HASH 40000 fan
//! ```
//!
//! `STATS=1` prints the engine's counters (how many instructions fused) at the end.

#[global_allocator]
static GLOBAL: eddy::Malloc = eddy::Malloc;

use eddy::vm::testing::Link;
use eddy::vm::{Blob, StreamId, VmBuilder};
use eddy_vm::Counted;
use std::sync::Arc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args()
        .filter(|a| a != "--bench")
        .nth(1)
        .map_or(Ok(100_000), |s| s.parse())?;
    let mode = std::env::args()
        .filter(|a| a != "--bench")
        .nth(2)
        .unwrap_or_default();
    let mut b = match mode.as_str() {
        "sync" => VmBuilder::from_env().sync_mode(true),
        "nofuse" => VmBuilder::from_env().fusion(false),
        _ => VmBuilder::from_env(),
    };
    let fan = mode == "fan";
    let s1 = b.add_stream(Arc::new(eddy::vm::stream::cpu::CpuStream::new(
        "cpu-2",
        eddy::vm::stream::Exec::Inline,
    )));
    let vm = b.build()?;
    let chains = if fan { 64 } else { 1 };
    let blobs: Vec<Vec<Counted<Blob>>> = (0..chains)
        .map(|_| (0..4).map(|_| vm.new_blob(0)).collect())
        .collect();
    let mut pos = vec![0usize; chains];
    for i in 0..n {
        let c = i % chains;
        let k = pos[c];
        pos[c] += 1;
        let op = Link([blobs[c][k % 4].clone(), blobs[c][(k + 1) % 4].clone()]);
        vm.run(if c % 2 == 0 { StreamId::CPU } else { s1 }, op)?;
    }
    vm.sync()?;
    if std::env::var_os("STATS").is_some() {
        eprintln!("{:?}", vm.stats());
    }
    Ok(())
}
