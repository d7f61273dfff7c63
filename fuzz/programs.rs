//! Decoders from arbitrary bytes to programs, shared by the fuzz targets
//! (`fuzz/fuzz_targets/*.rs`, coverage-guided, nightly) and by `tests/fuzz_programs.rs`, which
//! runs them on random bytes and on the checked-in corpus with the stable toolchain.
//!
//! Every byte string decodes to a valid program (a read past the end gives zeros), and each
//! program checks its own properties; a violation panics, which is what a fuzzer reports.
//!
//! - [`alloc_trace`]: allocations, frees and shrinks on a capped `DeviceAllocator` (failure mode
//!   F10, book: reliability): the allocator's invariants after every step, no two live blocks overlapping (checked
//!   by the addresses and by marker bytes written into each block), statistics equal to a
//!   recount, typed failures with the right figures, and nothing held after free-all + shrink.
//! - [`shape_program`]: op calls with decoded shape arguments, dimensions drawn from
//!   {0, 1, small, 2^31, 2^32, 2^63, usize::MAX} and axes from small signed bytes (F2, F3): every
//!   call returns a result or a typed error without panicking, results have consistent shapes,
//!   no kernel panics, and the engine's memory returns to zero at the end.

#![allow(dead_code)] // each user takes one of the two decoders

use eddy::tensor::{DType, Error, Tensor, with_engine};
use eddy::vm::Vm;
use eddy::vm::alloc::caching::round_size;
use eddy::vm::alloc::{AllocMode, Allocation, CpuBackend, DeviceAllocator};

/// Reads bytes; past the end, zeros.
pub struct Bytes<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Bytes<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Bytes { data, pos: 0 }
    }
    pub fn done(&self) -> bool {
        self.pos >= self.data.len()
    }
    pub fn u8(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }
    fn u16(&mut self) -> u16 {
        u16::from(self.u8()) | u16::from(self.u8()) << 8
    }
    /// A dimension or a size argument: mostly small, sometimes one of the overflow edges.
    fn dim(&mut self) -> usize {
        match self.u8() % 16 {
            0..=2 => 0,
            3..=5 => 1,
            6..=11 => 2 + usize::from(self.u8() % 6),
            12 => 1 << 31,
            13 => 1 << 32,
            14 => 1 << 63,
            _ => usize::MAX - usize::from(self.u8() % 2),
        }
    }
    fn shape(&mut self) -> Vec<usize> {
        let rank = usize::from(self.u8() % 5);
        (0..rank).map(|_| self.dim()).collect()
    }
    /// An axis: small and signed, so mostly valid, sometimes out of range either way.
    fn axis(&mut self) -> isize {
        isize::from(self.u8() as i8 % 6)
    }
    fn dtype(&mut self) -> DType {
        const ALL: [DType; 8] = [
            DType::F32,
            DType::F64,
            DType::F16,
            DType::BF16,
            DType::I64,
            DType::I32,
            DType::U8,
            DType::Bool,
        ];
        ALL[usize::from(self.u8()) % ALL.len()]
    }
}

// ---- allocator traces ------------------------------------------------------------------------

/// A live block: its range and the marker written at both ends.
struct Live {
    alloc: Allocation,
    requested: usize,
    mark: u8,
}

fn check_marks(l: &Live) {
    let (p, n) = (l.alloc.ptr(), l.alloc.size());
    if n == 0 {
        return;
    }
    // SAFETY: `p..p + n` is the live allocation this block owns; only this trace writes it.
    let (a, b) = unsafe { (*p, *p.add(n - 1)) };
    assert_eq!((a, b), (l.mark, l.mark), "a live block was overwritten");
}

/// Runs the allocator trace that `data` decodes to; panics on any violated property.
pub fn alloc_trace(data: &[u8]) {
    let mut r = Bytes::new(data);
    let head = r.u8();
    let mode = if head & 1 == 0 {
        AllocMode::Caching
    } else {
        AllocMode::Passthrough
    };
    // Always capped, so that no request reaches the system for more than this.
    let capacity = [1usize << 20, 16 << 20, 64 << 20, 200 << 20][usize::from(head >> 1) % 4];
    let a = DeviceAllocator::new(Box::new(CpuBackend::new(Some(capacity))), mode);
    let mut live: Vec<Live> = Vec::new();
    let mut next_mark = 1u8;
    for _ in 0..256 {
        if r.done() {
            break;
        }
        match r.u8() % 8 {
            0..=3 => {
                // Log-uniform sizes from 0 to past the cap, and the overflow edge.
                let e = u32::from(r.u8() % 32);
                let m = usize::from(r.u16());
                let size = if e == 31 {
                    usize::MAX - m
                } else {
                    (m << e) >> 8
                };
                let before = a.stats();
                match a.allocate(size) {
                    Ok(alloc) => {
                        let (p, n) = (alloc.ptr() as usize, alloc.size());
                        assert!(n >= size, "{n} bytes handed out for {size}");
                        if n > 0 {
                            assert_eq!(p % 64, 0, "alignment of a {n}-byte block");
                        }
                        for l in &live {
                            let (q, m) = (l.alloc.ptr() as usize, l.alloc.size());
                            assert!(
                                n == 0 || m == 0 || p + n <= q || q + m <= p,
                                "[{p:#x}, +{n}) overlaps [{q:#x}, +{m})"
                            );
                        }
                        let l = Live {
                            alloc,
                            requested: size,
                            mark: next_mark,
                        };
                        next_mark = next_mark.wrapping_add(1).max(1);
                        if n > 0 {
                            // SAFETY: the block is `n` bytes, live and owned by `l`.
                            unsafe {
                                *l.alloc.ptr() = l.mark;
                                *l.alloc.ptr().add(n - 1) = l.mark;
                            }
                        }
                        live.push(l);
                    }
                    Err(e) => {
                        assert_eq!(e.requested, size);
                        assert_eq!(e.capacity, Some(capacity));
                        assert_eq!(e.in_use, before.in_use, "in use at the failure");
                        assert_eq!(e.cached, before.cached, "cached at the failure");
                        // Passing through, a refusal is exact: the rounded size did not fit
                        // beside what is in use. (Caching may refuse for its chunk rounding.)
                        if mode == AllocMode::Passthrough {
                            let free = capacity - before.in_use;
                            assert!(
                                round_size(size).is_none_or(|n| n > free),
                                "{size} bytes refused with {free} free"
                            );
                        }
                    }
                }
            }
            4 | 5 if !live.is_empty() => {
                let i = usize::from(r.u8()) % live.len();
                let l = live.swap_remove(i);
                check_marks(&l);
                drop(l);
            }
            6 => {
                let before = a.stats();
                let freed = a.shrink();
                let after = a.stats();
                assert_eq!(after.reserved + freed, before.reserved, "shrink's count");
                assert_eq!(
                    after.in_use, before.in_use,
                    "shrink frees only cached bytes"
                );
            }
            _ => live.iter().for_each(check_marks),
        }
        a.check_invariants().unwrap();
        let s = a.stats();
        let recount: usize = live.iter().map(|l| l.alloc.size()).sum();
        assert_eq!(s.in_use, recount, "in use against a recount");
        assert_eq!(s.reserved, s.in_use + s.cached);
        assert!(
            s.reserved <= capacity,
            "{} reserved over the cap",
            s.reserved
        );
        assert!(live.iter().all(|l| l.alloc.size() >= l.requested));
    }
    live.iter().for_each(check_marks);
    drop(live);
    a.shrink();
    let s = a.stats();
    assert_eq!(
        (s.in_use, s.reserved),
        (0, 0),
        "held after free-all and shrink"
    );
}

// ---- shape programs --------------------------------------------------------------------------

/// Results larger than this are checked, then dropped rather than used further (a broadcast
/// view can have 2^63 elements; a kernel over it would not finish).
const MAX_NUMEL: usize = 1 << 14;

/// A typed error is fine; an error that reports a kernel panic is a bug.
fn check_err(op: &str, e: &Error) {
    let text = e.to_string();
    assert!(!text.is_empty());
    assert!(
        !matches!(e, Error::Vm(eddy::vm::Error::KernelPanic { .. })),
        "{op}: a kernel panicked: {text}"
    );
}

/// Checks a result's shape and keeps it if it is small enough to compute with.
fn keep(op: &str, r: eddy::tensor::Result<Tensor>, stack: &mut Vec<Tensor>) {
    match r {
        Ok(t) => {
            // Zero-sized tensors may have huge other dims; any other shape's count must fit.
            let n = if t.dims().contains(&0) {
                0
            } else {
                t.dims()
                    .iter()
                    .try_fold(1usize, |a, &d| a.checked_mul(d))
                    .expect("an op returned a shape whose element count overflows")
            };
            assert_eq!(t.numel(), n, "{op}: numel against the dims {:?}", t.dims());
            if n <= MAX_NUMEL {
                if stack.len() >= 8 {
                    stack.remove(0);
                }
                stack.push(t);
            }
        }
        Err(e) => check_err(op, &e),
    }
}

/// Runs the op program that `data` decodes to, on a private synchronous engine with a 64 MiB
/// cap; panics on any violated property.
pub fn shape_program(data: &[u8]) {
    let vm = Vm::builder()
        .sync_mode(true)
        .capacity(Some(64 << 20))
        .build()
        .unwrap();
    with_engine(&vm, || run_program(data));
    vm.sync().ok();
    let s = vm.alloc_stats();
    assert_eq!(s.in_use, 0, "memory held after every tensor dropped: {s:?}");
}

fn run_program(data: &[u8]) {
    let mut r = Bytes::new(data);
    let mut stack: Vec<Tensor> = Vec::new();
    for _ in 0..48 {
        if r.done() {
            break;
        }
        let op = r.u8() % 24;
        if stack.is_empty() || op == 0 {
            // A new tensor: counting values, of any shape and dtype.
            let (shape, dtype) = (r.shape(), r.dtype());
            let t = Tensor::zeros(shape.clone(), dtype).and_then(|z| {
                let n = z.numel();
                if n > MAX_NUMEL {
                    return Ok(z);
                }
                Tensor::arange(0.0, n as f64, 1.0, DType::F64)?
                    .to_dtype(dtype)?
                    .reshape(shape)
            });
            keep("create", t, &mut stack);
            continue;
        }
        let a = stack[usize::from(r.u8()) % stack.len()].clone();
        let b = stack[usize::from(r.u8()) % stack.len()].clone();
        let res = match op {
            1 => a.reshape(r.shape()),
            2 => a.transpose(r.axis(), r.axis()),
            3 => {
                let n = usize::from(r.u8() % 5);
                let perm: Vec<isize> = (0..n).map(|_| r.axis()).collect();
                a.permute(&perm)
            }
            4 => a.narrow(r.axis(), r.dim(), r.dim()),
            5 => a.squeeze(r.axis()),
            6 => a.unsqueeze(r.axis()),
            7 => a.broadcast_to(r.shape()),
            8 => {
                let n = usize::from(r.u8() % 3);
                let dims: Vec<isize> = (0..n).map(|_| r.axis()).collect();
                a.sum(&dims, r.u8() & 1 == 1)
            }
            9 => a.max(r.axis(), r.u8() & 1 == 1),
            10 => a.argmax(r.axis(), r.u8() & 1 == 1),
            11 => a.matmul(&b),
            12 => Tensor::cat(&[&a, &b], r.axis()),
            13 => Tensor::stack(&[&a, &b], r.axis()),
            14 => {
                let idx: Vec<i64> = (0..usize::from(r.u8() % 4))
                    .map(|_| i64::from(r.u8() as i8))
                    .collect();
                let n = idx.len();
                Tensor::from_vec(idx, [n]).and_then(|i| a.index_select(r.axis(), &i))
            }
            15 => b.to_dtype(DType::I64).and_then(|i| a.gather(r.axis(), &i)),
            16 => a.softmax(r.axis()),
            17 => a.add(&b),
            18 => a.contiguous(),
            19 => a.to_dtype(r.dtype()),
            20 => a.select(r.axis(), r.dim()),
            21 => a.expand(r.shape()),
            22 => a.mean(&[r.axis()], r.u8() & 1 == 1),
            _ => a.where_(&b, &a),
        };
        keep("op", res, &mut stack);
    }
    // Every surviving result reads back, or reports a typed error of its own.
    for t in stack {
        assert!(!format!("{t}").is_empty());
        match t.to_dtype(DType::F64).and_then(|t| t.to_vec::<f64>()) {
            Ok(v) => assert_eq!(v.len(), t.numel()),
            Err(e) => check_err("to_vec", &e),
        }
    }
}
