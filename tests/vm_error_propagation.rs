//! Failure mode F8 (book: reliability) as a property: for random programs over a few blobs on three streams with
//! random failing ops, the engine's poisoned blobs, the root attributed to each, the list of
//! root errors and the first one returned by `sync` equal those of a sequential reference.

mod common;

use eddy::vm::instruction::{ComputeCtx, InstructionPolicy};
use eddy::vm::stream::{Exec, cpu::CpuStream};
use eddy::vm::{Blob, Error, StreamId, VmBuilder};
use eddy_vm::Counted;
use proptest::prelude::*;
use std::sync::Arc;

const BLOBS: usize = 6;

#[derive(Debug, Clone)]
struct Op {
    reads: Vec<usize>,
    writes: Vec<usize>,
    fails: bool,
    stream: usize,
}

struct PropOp {
    k: usize,
    fails: bool,
    ins: Vec<Counted<Blob>>,
    outs: Vec<Counted<Blob>>,
}

impl InstructionPolicy for PropOp {
    fn name(&self) -> &str {
        "prop_op"
    }
    fn inputs(&self) -> &[Counted<Blob>] {
        &self.ins
    }
    fn outputs(&self) -> &[Counted<Blob>] {
        &self.outs
    }
    fn fusable(&self) -> bool {
        self.k.is_multiple_of(2)
    }
    fn compute(&mut self, _: &mut ComputeCtx<'_>) -> eddy::vm::Result<()> {
        if self.fails {
            Err(Error::kernel("prop_op", format!("op {}", self.k)))
        } else {
            Ok(())
        }
    }
}

fn op() -> impl Strategy<Value = Op> {
    (
        proptest::collection::vec(0..BLOBS, 0..3),
        proptest::collection::vec(0..BLOBS, 1..3),
        proptest::bool::weighted(0.15),
        0..3usize,
    )
        .prop_map(|(mut reads, mut writes, fails, stream)| {
            writes.sort();
            writes.dedup();
            reads.sort();
            reads.dedup();
            Op {
                reads,
                writes,
                fails,
                stream,
            }
        })
}

/// Which op's failure poisons each blob at the end (`None`: clean), and the failing roots.
fn reference(ops: &[Op]) -> (Vec<Option<usize>>, Vec<usize>) {
    let mut poison: Vec<Option<usize>> = vec![None; BLOBS];
    let mut roots = vec![];
    for (k, o) in ops.iter().enumerate() {
        // An op that reads a poisoned blob is skipped and passes the root on (the first
        // poisoned input in its input order, as the engine checks them).
        let inherited = o.reads.iter().find_map(|&r| poison[r]);
        let new = match inherited {
            Some(root) => Some(root),
            None if o.fails => {
                roots.push(k);
                Some(k)
            }
            None => None,
        };
        for &w in &o.writes {
            poison[w] = new;
        }
    }
    (poison, roots)
}

fn root_of(e: &Error) -> usize {
    match e {
        Error::KernelFailed { message, .. } => message.trim_start_matches("op ").parse().unwrap(),
        other => panic!("unexpected error {other}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn failures_propagate_exactly_along_the_data_flow(ops in proptest::collection::vec(op(), 1..40)) {
        let mut b = VmBuilder::new();
        let s1 = b.add_stream(Arc::new(CpuStream::new("worker-1", Exec::Worker)));
        let s2 = b.add_stream(Arc::new(CpuStream::new("inline-2", Exec::Inline)));
        let vm = b.build().unwrap();
        let streams = [StreamId::CPU, s1, s2];
        let blobs: Vec<Counted<Blob>> = (0..BLOBS).map(|_| vm.new_blob(8)).collect();
        // Give every blob memory and a clean state first.
        for x in &blobs {
            vm.write_blob(x, |b| b.fill(0)).unwrap();
        }
        for (k, o) in ops.iter().enumerate() {
            let op = PropOp {
                k,
                fails: o.fails,
                ins: o.reads.iter().map(|&i| blobs[i].clone()).collect(),
                outs: o.writes.iter().map(|&i| blobs[i].clone()).collect(),
            };
            vm.run(streams[o.stream], op).unwrap();
        }
        let (want_poison, want_roots) = reference(&ops);
        let synced = vm.sync();
        match want_roots.first() {
            Some(&first) => prop_assert_eq!(root_of(&synced.unwrap_err()), first),
            None => prop_assert!(synced.is_ok()),
        }
        let roots: Vec<usize> = vm.errors().iter().map(root_of).collect();
        prop_assert_eq!(roots, want_roots);
        for (i, x) in blobs.iter().enumerate() {
            let got = vm.read_blob(x, |_| ()).err().map(|e| root_of(&e));
            prop_assert_eq!(got, want_poison[i], "blob {}", i);
        }
    }
}
