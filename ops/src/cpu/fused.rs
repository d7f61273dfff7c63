//! The kernel of a step merged from elementwise ops ([`crate::fuse`]): its program run block
//! by block, each value of a block in scratch memory that stays in the cache.
//!
//! Every element goes through the same arithmetic as in the kernels the step replaces
//! (`apply_float`, `apply_binary_float`, narrowed to the dtype after each op), so the results
//! are the same bit for bit.

use super::elementwise::{FloatElem, apply_binary_float, apply_float, params};
use crate::DType;
use crate::kernel::PAR_MIN;
use crate::kinds::{BinaryOp, UnaryOp};
use crate::program::{Code, Pos, Program, Src};
use eddy_vm::instruction::{ComputeCtx, Kernel};
use eddy_vm::{Blob, Counted};

/// Elements per block: a value's block (2 KiB of `f32`) and a few others fit in L1.
pub(crate) const BLOCK: usize = 512;

/// Whether merged kernels exist for `dtype`: `f32` and `f64`. (The 16-bit floats would
/// double the merged kernels' code, which every process maps, for a case rare on a CPU; their
/// ops stay separate steps.)
pub(crate) fn supports(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F64)
}

/// A float type whose merged kernels keep their registers in one scratch buffer per thread,
/// shared by every merged kernel the thread runs: a kernel made for one plan run (a promoted
/// window makes its merged kernels anew each time) or one chunk of a run allocates nothing.
trait ScratchElem: Sized {
    /// Calls `f` with at least `len` elements of this thread's scratch (values left by earlier
    /// runs: a program writes each register before it reads it).
    fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [Self]) -> R) -> R;
}

macro_rules! scratch_elem {
    ($t:ty) => {
        impl ScratchElem for $t {
            fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [$t]) -> R) -> R {
                thread_local! {
                    static SCRATCH: std::cell::RefCell<Vec<$t>> =
                        const { std::cell::RefCell::new(Vec::new()) };
                }
                SCRATCH.with(|s| match s.try_borrow_mut() {
                    Ok(mut v) => {
                        if v.len() < len {
                            v.resize(len, 0.0);
                        }
                        f(&mut v[..len])
                    }
                    // Taken further up this thread's stack: a buffer of its own.
                    Err(_) => f(&mut vec![0.0; len]),
                })
            }
        }
    };
}
scratch_elem!(f32);
scratch_elem!(f64);

/// The kernel running `p`.
pub(crate) fn kernel(p: Program) -> Box<dyn Kernel> {
    match p.dtype {
        DType::F64 => Box::new(Fused::<f64>::new(p)),
        _ => Box::new(Fused::<f32>::new(p)),
    }
}

struct Fused<T: FloatElem> {
    p: Program,
    /// Each op's two parameters in the compute type, by position in the code.
    params: Vec<(T::A, T::A)>,
    /// For each input, the elements it must hold and the position that needs the most (so
    /// that a run checks its inputs once each, not once per op).
    needs: Vec<(usize, Pos)>,
}

impl<T: FloatElem + ScratchElem> Fused<T> {
    fn new(p: Program) -> Fused<T> {
        let params = (p.code.iter())
            .map(|c| match c {
                Code::Unary { op, .. } => {
                    let (c, d) = params(*op);
                    (T::param(c), T::param(d))
                }
                _ => (T::param(0.0), T::param(0.0)),
            })
            .collect();
        // What the runs' unchecked register accesses rely on: every register is one of the
        // program's, and no op's destination is one of its sources.
        for c in &p.code {
            let (srcs, d) = match *c {
                Code::Unary { a, d, .. } => ([Some(a), None], d),
                Code::Binary { a, b, d, .. } => ([Some(a), Some(b)], d),
                Code::Store { r, .. } => ([Some(Src::Reg(r)), None], usize::MAX),
            };
            assert!(d == usize::MAX || d < p.regs, "a register of the program");
            for s in srcs.into_iter().flatten() {
                if let Src::Reg(r) = s {
                    assert!(
                        r < p.regs && r != d,
                        "a source register other than the result"
                    );
                }
            }
        }
        let mut needs: Vec<(usize, Pos)> = Vec::new();
        for c in &p.code {
            let srcs = match c {
                Code::Unary { a, .. } => [Some(a), None],
                Code::Binary { a, b, .. } => [Some(a), Some(b)],
                Code::Store { .. } => [None, None],
            };
            for s in srcs.into_iter().flatten() {
                if let Src::Input(k, pos) = *s {
                    let need = match pos {
                        Pos::Dense(o) => o + p.n,
                        Pos::Splat(o) => o + 1,
                    };
                    if needs.len() <= k {
                        needs.resize(k + 1, (0, Pos::Dense(0)));
                    }
                    if need > needs[k].0 {
                        needs[k] = (need, pos);
                    }
                }
            }
        }
        Fused { p, params, needs }
    }
}

/// An operand of one block: a slice of it, or one element for all.
#[derive(Clone, Copy)]
enum Opd<'a, T> {
    Slice(&'a [T]),
    Value(T),
}

/// The outputs' memory, shared by the threads that write disjoint blocks of it.
#[derive(Clone, Copy)]
struct Out<T>(*mut T);

// SAFETY: each thread writes only the elements of its own blocks (see `run_blocks`).
unsafe impl<T: Send> Send for Out<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Out<T> {}

impl<T: FloatElem + ScratchElem> Kernel for Fused<T> {
    fn name(&self) -> &str {
        &self.p.name
    }

    /// An output may overwrite an input that every op reads at its own element (dense, from
    /// the start) and none reads after the output's store: within a block, all reads of the
    /// input come before the store, and blocks (and threads' chunks) are disjoint.
    fn may_alias(&self, output: usize, input: usize) -> bool {
        let mut last_read = None;
        let mut first_store = None;
        for (i, c) in self.p.code.iter().enumerate() {
            let srcs = match *c {
                Code::Unary { a, .. } => [Some(a), None],
                Code::Binary { a, b, .. } => [Some(a), Some(b)],
                Code::Store { out, .. } => {
                    if out == output && first_store.is_none() {
                        first_store = Some(i);
                    }
                    [None, None]
                }
            };
            for s in srcs.into_iter().flatten() {
                if let Src::Input(k, pos) = s
                    && k == input
                {
                    if pos != Pos::Dense(0) {
                        return false;
                    }
                    last_read = Some(i);
                }
            }
        }
        match (last_read, first_store) {
            (Some(r), Some(s)) => r < s,
            _ => false,
        }
    }

    fn compute(
        &mut self,
        inputs: &[Counted<Blob>],
        outputs: &[Counted<Blob>],
        _ctx: &mut ComputeCtx<'_>,
    ) -> eddy_vm::Result<()> {
        let n = self.p.n;
        // Raw pointers, not slices: an output may be an input's memory (`may_alias`), so a
        // slice of either lives only while one op of one block reads or writes it.
        let ins: Vec<In<T>> = inputs.iter().map(|b| In::of(b)).collect();
        let mut outs: Vec<Out<T>> = Vec::with_capacity(outputs.len());
        for b in outputs {
            let o = In::<T>::of(b);
            if o.len < n {
                return Err(self.fail(format!("an output of {} elements, not {n}", o.len)));
            }
            outs.push(Out(o.ptr.cast_mut()));
        }
        self.check_inputs(&ins)?;
        let regs = self.p.regs * BLOCK;
        let threads = eddy_vm::par::threads();
        if n < PAR_MIN || threads < 2 {
            T::with_scratch(regs, |scratch| {
                // SAFETY: this thread writes all of `0..n`, and nothing else runs on the
                // outputs.
                unsafe { self.run_blocks(&ins, &outs, 0, n, scratch) }
            });
        } else {
            let chunk = n.div_ceil(threads * 4).max(4 * BLOCK);
            let this = &*self;
            eddy_vm::par::for_each(n.div_ceil(chunk), |c| {
                let (lo, hi) = (c * chunk, ((c + 1) * chunk).min(n));
                T::with_scratch(regs, |scratch| {
                    // SAFETY: chunk `c` covers elements `lo..hi` only; chunks are disjoint.
                    unsafe { this.run_blocks(&ins, &outs, lo, hi, scratch) }
                });
            });
        }
        Ok(())
    }
}

impl<T: FloatElem + ScratchElem> Fused<T> {
    fn fail(&self, message: String) -> eddy_vm::Error {
        eddy_vm::Error::kernel(&self.p.name, message)
    }

    /// Every operand's elements lie inside its input.
    fn check_inputs(&self, ins: &[In<T>]) -> eddy_vm::Result<()> {
        for (k, &(need, p)) in self.needs.iter().enumerate() {
            let len = ins.get(k).map_or(0, |x| x.len);
            if len < need {
                let n = self.p.n;
                return Err(self.fail(format!(
                    "input {k} has {len} elements, too few for {p:?} over {n}"
                )));
            }
        }
        Ok(())
    }

    /// Runs the program on elements `lo..hi`, block by block.
    ///
    /// # Safety
    ///
    /// Every output holds at least `hi` elements, every input what `check_inputs` asks, and
    /// no other thread reads or writes elements `lo..hi` of any output while this runs; an
    /// output that is an input's memory is one that `may_alias` allows.
    unsafe fn run_blocks(
        &self,
        ins: &[In<T>],
        outs: &[Out<T>],
        lo: usize,
        hi: usize,
        scratch: &mut [T],
    ) {
        assert!(scratch.len() >= self.p.regs * BLOCK, "a block per register");
        let regs = Regs(scratch.as_mut_ptr());
        let mut start = lo;
        while start < hi {
            let len = BLOCK.min(hi - start);
            for (c, &(p, q)) in self.p.code.iter().zip(&self.params) {
                match *c {
                    Code::Unary { op, a, d } => {
                        // SAFETY: `d` is a register and none of the op's sources (checked by
                        // `Fused::new`), and the scratch holds a block per register.
                        let dst = unsafe { regs.block_mut(d, len) };
                        // SAFETY: the inputs hold what `check_inputs` checked, and no output
                        // block is borrowed while the op runs.
                        let a = unsafe { opd(a, ins, regs, start, len) };
                        unary::<T>(op, a, dst, p, q);
                    }
                    Code::Binary { op, a, b, d } => {
                        // SAFETY: as above.
                        let dst = unsafe { regs.block_mut(d, len) };
                        // SAFETY: as above.
                        let (a, b) = unsafe {
                            (opd(a, ins, regs, start, len), opd(b, ins, regs, start, len))
                        };
                        binary::<T>(op, a, b, dst);
                    }
                    Code::Store { r, out } => {
                        // SAFETY: elements `start..start + len` of the output are this call's
                        // (the caller's promise), and the output holds them; no slice of an
                        // input is alive here, and an input this output overwrites is not
                        // read after this store (`may_alias`).
                        let o =
                            unsafe { std::slice::from_raw_parts_mut(outs[out].0.add(start), len) };
                        // SAFETY: `r` is a register (checked by `Fused::new`), and the scratch
                        // holds a block per register; no block is written while this reads.
                        o.copy_from_slice(unsafe { regs.block(r, len) });
                    }
                }
            }
            start += len;
        }
    }
}

/// The registers of a run: a block of `BLOCK` values each, from the start of the scratch.
#[derive(Clone, Copy)]
struct Regs<T>(*mut T);

impl<T> Regs<T> {
    /// The first `len` values of register `r`'s block.
    ///
    /// # Safety
    ///
    /// The scratch holds block `r`, `len <= BLOCK`, and nothing writes the block while the
    /// slice lives.
    #[inline(always)]
    unsafe fn block<'a>(self, r: usize, len: usize) -> &'a [T] {
        // SAFETY: the caller's promise.
        unsafe { std::slice::from_raw_parts(self.0.add(r * BLOCK), len) }
    }

    /// The first `len` values of register `r`'s block, to write.
    ///
    /// # Safety
    ///
    /// As [`Regs::block`], and nothing else reads or writes the block while the slice lives.
    #[inline(always)]
    unsafe fn block_mut<'a>(self, r: usize, len: usize) -> &'a mut [T] {
        // SAFETY: the caller's promise.
        unsafe { std::slice::from_raw_parts_mut(self.0.add(r * BLOCK), len) }
    }
}

/// An input's memory: where it starts and how many elements it holds.
#[derive(Clone, Copy)]
struct In<T> {
    ptr: *const T,
    len: usize,
}

// SAFETY: the threads of one run only read through it (a dense input in their own chunk, a
// broadcast element in every chunk; see `run_blocks`), while the instruction holds the input.
unsafe impl<T: Sync> Send for In<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for In<T> {}

impl<T> In<T> {
    fn of(b: &Blob) -> In<T> {
        let ptr = b.as_ptr().cast_const().cast::<T>();
        debug_assert_eq!(ptr as usize % std::mem::align_of::<T>(), 0);
        let len = if ptr.is_null() {
            0
        } else {
            b.bytes() / std::mem::size_of::<T>()
        };
        In { ptr, len }
    }

    /// Elements `at..at + len`.
    ///
    /// # Safety
    ///
    /// They lie inside the input, and nothing writes them while the slice lives.
    #[inline(always)]
    unsafe fn slice<'a>(self, at: usize, len: usize) -> &'a [T] {
        debug_assert!(at + len <= self.len);
        // SAFETY: the caller's promise.
        unsafe { std::slice::from_raw_parts(self.ptr.add(at), len) }
    }
}

/// Source `s` over elements `start..start + len`.
///
/// # Safety
///
/// An input source's elements lie inside its input (`check_inputs`), and nothing writes them
/// while the result lives.
#[inline(always)]
unsafe fn opd<'a, T: Copy>(
    s: Src,
    ins: &[In<T>],
    regs: Regs<T>,
    start: usize,
    len: usize,
) -> Opd<'a, T> {
    match s {
        // SAFETY: the caller's promise.
        Src::Input(k, Pos::Dense(o)) => Opd::Slice(unsafe { ins[k].slice(o + start, len) }),
        // SAFETY: as above.
        Src::Input(k, Pos::Splat(o)) => Opd::Value(unsafe { ins[k].slice(o, 1) }[0]),
        // SAFETY: a source register is one of the program's and not the op's destination
        // (checked by `Fused::new`); the run's caller holds a block per register.
        Src::Reg(r) => Opd::Slice(unsafe { regs.block(r, len) }),
    }
}

/// `d[i] = f(a[i])`.
#[inline(always)]
fn map1<T: Copy>(a: Opd<'_, T>, d: &mut [T], f: impl Fn(T) -> T) {
    match a {
        Opd::Slice(a) => {
            for (o, &x) in d.iter_mut().zip(a) {
                *o = f(x);
            }
        }
        Opd::Value(x) => d.fill(f(x)),
    }
}

/// `d[i] = f(a[i], b[i])`.
#[inline(always)]
fn map2<T: Copy>(a: Opd<'_, T>, b: Opd<'_, T>, d: &mut [T], f: impl Fn(T, T) -> T) {
    match (a, b) {
        (Opd::Slice(a), Opd::Slice(b)) => {
            for ((o, &x), &y) in d.iter_mut().zip(a).zip(b) {
                *o = f(x, y);
            }
        }
        (Opd::Slice(a), Opd::Value(y)) => map1(Opd::Slice(a), d, |x| f(x, y)),
        (Opd::Value(x), Opd::Slice(b)) => map1(Opd::Slice(b), d, |y| f(x, y)),
        (Opd::Value(x), Opd::Value(y)) => d.fill(f(x, y)),
    }
}

/// One unary op on a block, as the unary kernel computes it.
#[inline(never)]
fn unary<T: FloatElem>(op: UnaryOp, a: Opd<'_, T>, d: &mut [T], c: T::A, e: T::A) {
    macro_rules! go {
        ($($v:ident),*) => {
            match op {
                $(UnaryOp::$v { .. } => map1(a, d, |x: T| T::down(apply_float(UnaryOp::$v, x.up(), c, e))),)*
                other => map1(a, d, |x: T| T::down(apply_float(other, x.up(), c, e))),
            }
        };
    }
    match op {
        UnaryOp::AddScalar(_) => map1(a, d, |x: T| T::down(x.up() + c)),
        UnaryOp::MulScalar(_) => map1(a, d, |x: T| T::down(x.up() * c)),
        _ => go!(Neg, Relu, Exp, Tanh, Sigmoid),
    }
}

/// One binary op on a block, as the binary kernel computes it.
#[inline(never)]
fn binary<T: FloatElem>(op: BinaryOp, a: Opd<'_, T>, b: Opd<'_, T>, d: &mut [T]) {
    macro_rules! go {
        ($($v:ident),*) => {
            match op {
                $(BinaryOp::$v => map2(a, b, d, |x: T, y: T| {
                    T::down(apply_binary_float(BinaryOp::$v, x.up(), y.up()))
                }),)*
                other => map2(a, b, d, |x: T, y: T| {
                    T::down(apply_binary_float(other, x.up(), y.up()))
                }),
            }
        };
    }
    // The common ops get a loop each (the op's match hoisted, so it vectorises).
    go!(Add, Sub, Mul, Div, Maximum, ReluBackward);
}
