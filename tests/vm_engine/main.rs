//! The engine's invariants (book: architecture) and failure modes (F5, F6, F8, F9, F10,
//! F12–F16; book: reliability), pinned with mock policies. Every test runs under a watchdog.
//!
//! Each module covers one concern of the engine; the helpers below build an engine with two
//! worker streams and count an instruction's computes and drops.

#[path = "../common/mod.rs"]
mod common;

mod barriers_fusion;
mod conservation;
mod devices;
mod errors;
mod inline;
mod lifecycle;
mod memory;
mod observability;
mod ordering;

use eddy::vm::instruction::{ComputeCtx, InstructionPolicy};
use eddy::vm::stream::{Exec, cpu::CpuStream};
use eddy::vm::testing::Log;
use eddy::vm::{Blob, StreamId, Vm, VmBuilder};
use eddy_vm::Counted;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

const CPU: StreamId = StreamId::CPU;

/// An engine with two extra worker streams (1 and 2).
fn vm3(b: VmBuilder) -> (Vm, StreamId, StreamId) {
    let mut b = b;
    let s1 = b.add_stream(Arc::new(CpuStream::new("worker-1", Exec::Worker)));
    let s2 = b.add_stream(Arc::new(CpuStream::new("worker-2", Exec::Worker)));
    (b.build().unwrap(), s1, s2)
}

fn log_now(l: &Log) -> Vec<u64> {
    l.lock().clone()
}

/// Counts its computes and drops.
struct CountingOp {
    ins: Vec<Counted<Blob>>,
    outs: Vec<Counted<Blob>>,
    drops: Arc<AtomicUsize>,
    computes: Arc<AtomicUsize>,
}

impl InstructionPolicy for CountingOp {
    fn name(&self) -> &str {
        "counted"
    }
    fn inputs(&self) -> &[Counted<Blob>] {
        &self.ins
    }
    fn outputs(&self) -> &[Counted<Blob>] {
        &self.outs
    }
    fn fusable(&self) -> bool {
        true
    }
    fn compute(&mut self, _: &mut ComputeCtx<'_>) -> eddy::vm::Result<()> {
        self.computes.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

impl Drop for CountingOp {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}
