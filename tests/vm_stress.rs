//! Stress: 4 user threads × 100,000 instructions with random read/write sets over 64
//! dependences on 3 streams, checked against a sequential reference; every instruction computed
//! and released exactly once. `EDDY_STRESS_OPS` scales the per-thread count (valgrind, miri).
//!
//! Each thread owns 15 dependences and shares 4 read-only constants (4 × 15 + 4 = 64). A
//! dependence's value lives in a side table; an instruction writes
//! `v[w] = mix(v[w], Σ v[r], id)` for each `w` it writes, so any reordering of conflicting
//! accesses changes the final values, which the thread's sequential replay checks.

mod common;

use common::watchdog;
use eddy::vm::instruction::{ComputeCtx, InstructionPolicy};
use eddy::vm::stream::{Exec, cpu::CpuStream};
use eddy::vm::{Blob, StreamId, VmBuilder};
use eddy_vm::Counted;
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering::Relaxed};

const THREADS: usize = 4;
const OWN: usize = 15;
const SHARED: usize = 4;

fn mix(old: u64, sum: u64, id: u64) -> u64 {
    (old ^ sum.rotate_left(17))
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(id)
}

struct Op {
    id: u64,
    ins: Vec<Counted<Blob>>,
    outs: Vec<Counted<Blob>>,
    ins_idx: Vec<usize>,
    outs_idx: Vec<usize>,
    values: Arc<Vec<AtomicU64>>,
    seen: Arc<Vec<AtomicU8>>,
    drops: Arc<AtomicU64>,
    slot: usize,
}

impl InstructionPolicy for Op {
    fn name(&self) -> &str {
        "stress_op"
    }
    fn inputs(&self) -> &[Counted<Blob>] {
        &self.ins
    }
    fn outputs(&self) -> &[Counted<Blob>] {
        &self.outs
    }
    fn fusable(&self) -> bool {
        !self.id.is_multiple_of(3)
    }
    fn cheap(&self) -> bool {
        // Some run at once on the submitting thread whenever they find the engine idle.
        self.id.is_multiple_of(4)
    }
    fn compute(&mut self, _: &mut ComputeCtx<'_>) -> eddy::vm::Result<()> {
        let sum = self
            .ins_idx
            .iter()
            .fold(0u64, |a, &i| a.wrapping_add(self.values[i].load(Relaxed)));
        for &w in &self.outs_idx {
            let old = self.values[w].load(Relaxed);
            self.values[w].store(mix(old, sum, self.id), Relaxed);
        }
        self.seen[self.slot].fetch_add(1, Relaxed);
        Ok(())
    }
}

impl Drop for Op {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Relaxed);
    }
}

/// A random program for thread `t`: (reads, writes) per instruction, over dependence indices.
fn program(t: usize, n: usize) -> Vec<(Vec<usize>, Vec<usize>, usize)> {
    let mut rng = StdRng::seed_from_u64(0xEDD7 + t as u64);
    let own = |rng: &mut StdRng| SHARED + t * OWN + rng.random_range(0..OWN);
    (0..n)
        .map(|_| {
            let mut reads: Vec<usize> =
                (0..rng.random_range(0..3)).map(|_| own(&mut rng)).collect();
            if rng.random_bool(0.3) {
                reads.push(rng.random_range(0..SHARED));
            }
            let mut writes: Vec<usize> =
                (0..rng.random_range(0..3)).map(|_| own(&mut rng)).collect();
            writes.sort();
            writes.dedup();
            reads.retain(|r| !writes.contains(r));
            reads.sort();
            reads.dedup();
            (reads, writes, rng.random_range(0..3))
        })
        .collect()
}

#[test]
fn four_threads_random_programs_match_the_sequential_reference() {
    let n: usize = std::env::var("EDDY_STRESS_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    watchdog(600, move || {
        let mut b = VmBuilder::new();
        let s1 = b.add_stream(Arc::new(CpuStream::new("worker-1", Exec::Worker)));
        let s2 = b.add_stream(Arc::new(CpuStream::new("inline-2", Exec::Inline)));
        let vm = b.build().unwrap();
        let streams = [StreamId::CPU, s1, s2];
        let total = SHARED + THREADS * OWN;
        let blobs: Arc<Vec<Counted<Blob>>> = Arc::new((0..total).map(|_| vm.new_blob(8)).collect());
        let values: Arc<Vec<AtomicU64>> = Arc::new(
            (0..total)
                .map(|i| AtomicU64::new(i as u64 * 1000 + 1))
                .collect(),
        );
        let seen: Arc<Vec<AtomicU8>> =
            Arc::new((0..THREADS * n).map(|_| AtomicU8::new(0)).collect());
        let drops = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (vm, blobs, values, seen, drops) = (
                    vm.clone(),
                    blobs.clone(),
                    values.clone(),
                    seen.clone(),
                    drops.clone(),
                );
                std::thread::spawn(move || {
                    for (k, (r, w, s)) in program(t, n).into_iter().enumerate() {
                        let op = Op {
                            id: (t * n + k) as u64,
                            ins: r.iter().map(|&i| blobs[i].clone()).collect(),
                            outs: w.iter().map(|&i| blobs[i].clone()).collect(),
                            ins_idx: r,
                            outs_idx: w,
                            values: values.clone(),
                            seen: seen.clone(),
                            drops: drops.clone(),
                            slot: t * n + k,
                        };
                        vm.run(streams[s], op).unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        vm.sync().unwrap();

        // Exactly once: every instruction computed once and its policy dropped (released) once.
        let not_once = seen.iter().filter(|s| s.load(Relaxed) != 1).count();
        assert_eq!(
            not_once, 0,
            "{not_once} instructions were not computed exactly once"
        );
        assert_eq!(drops.load(Relaxed), (THREADS * n) as u64);
        let st = vm.stats();
        assert_eq!(st.inserted, st.erased);
        assert_eq!(st.in_flight, 0);

        // The sequential reference: each thread's program replayed in order.
        let mut reference: Vec<u64> = (0..total).map(|i| i as u64 * 1000 + 1).collect();
        for t in 0..THREADS {
            for (k, (r, w, _)) in program(t, n).into_iter().enumerate() {
                let sum = r.iter().fold(0u64, |a, &i| a.wrapping_add(reference[i]));
                for &x in &w {
                    reference[x] = mix(reference[x], sum, (t * n + k) as u64);
                }
            }
        }
        let got: Vec<u64> = values.iter().map(|v| v.load(Relaxed)).collect();
        let bad: Vec<usize> = (0..total).filter(|&i| got[i] != reference[i]).collect();
        assert!(
            bad.is_empty(),
            "dependences {bad:?} differ from the sequential reference"
        );
    });
}
