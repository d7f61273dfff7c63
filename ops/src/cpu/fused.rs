//! The kernel of a step merged from elementwise ops ([`crate::fuse`]): its program run block
//! by block, each value of a block in scratch memory that stays in the cache.
//!
//! Every element goes through the same arithmetic as in the kernels the step replaces
//! (`apply_float`, `apply_binary_float`, narrowed to the dtype after each op), so the results
//! are the same bit for bit.

use super::elementwise::{FloatElem, apply_binary_float, apply_float, params};
use crate::DType;
use crate::fuse::program::{Code, Pos, Program, Src};
use crate::kernel::{PAR_MIN, input, output};
use crate::kinds::{BinaryOp, UnaryOp};
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
    /// The registers of a run on this thread, kept between runs.
    scratch: Vec<T>,
}

impl<T: FloatElem> Fused<T> {
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
        Fused {
            p,
            params,
            scratch: Vec::new(),
        }
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

impl<T: FloatElem> Kernel for Fused<T> {
    fn name(&self) -> &str {
        &self.p.name
    }

    fn compute(
        &mut self,
        inputs: &[Counted<Blob>],
        outputs: &[Counted<Blob>],
        _ctx: &mut ComputeCtx<'_>,
    ) -> eddy_vm::Result<()> {
        let n = self.p.n;
        // SAFETY: the instruction reads its inputs and writes its outputs, and the pass never
        // makes a merged step's output one of its inputs.
        let ins: Vec<&[T]> = inputs.iter().map(|b| unsafe { input::<T>(b) }).collect();
        let mut outs: Vec<Out<T>> = Vec::with_capacity(outputs.len());
        for b in outputs {
            // SAFETY: as above.
            let o = unsafe { output::<T>(b) };
            if o.len() < n {
                return Err(self.fail(format!("an output of {} elements, not {n}", o.len())));
            }
            outs.push(Out(o.as_mut_ptr()));
        }
        self.check_inputs(&ins)?;
        let regs = self.p.regs * BLOCK;
        let threads = eddy_vm::par::threads();
        if n < PAR_MIN || threads < 2 {
            let mut scratch = std::mem::take(&mut self.scratch);
            scratch.resize(regs, T::down(T::param(0.0)));
            // SAFETY: this thread writes all of `0..n`, and nothing else runs on the outputs.
            unsafe { self.run_blocks(&ins, &outs, 0, n, &mut scratch) };
            self.scratch = scratch;
        } else {
            let chunk = n.div_ceil(threads * 4).max(4 * BLOCK);
            let this = &*self;
            eddy_vm::par::for_each(n.div_ceil(chunk), |c| {
                let mut scratch = vec![T::down(T::param(0.0)); regs];
                let (lo, hi) = (c * chunk, ((c + 1) * chunk).min(n));
                // SAFETY: chunk `c` covers elements `lo..hi` only; chunks are disjoint.
                unsafe { this.run_blocks(&ins, &outs, lo, hi, &mut scratch) };
            });
        }
        Ok(())
    }
}

impl<T: FloatElem> Fused<T> {
    fn fail(&self, message: String) -> eddy_vm::Error {
        eddy_vm::Error::kernel(&self.p.name, message)
    }

    /// Every operand's elements lie inside its input.
    fn check_inputs(&self, ins: &[&[T]]) -> eddy_vm::Result<()> {
        let n = self.p.n;
        for c in &self.p.code {
            let srcs = match c {
                Code::Unary { a, .. } => [Some(a), None],
                Code::Binary { a, b, .. } => [Some(a), Some(b)],
                Code::Store { .. } => [None, None],
            };
            for s in srcs.into_iter().flatten() {
                if let Src::Input(k, p) = *s {
                    let len = ins.get(k).map_or(0, |x| x.len());
                    let fits = match p {
                        Pos::Dense(o) => o + n <= len,
                        Pos::Splat(o) => o < len,
                    };
                    if !fits {
                        return Err(self.fail(format!(
                            "input {k} has {len} elements, too few for {p:?} over {n}"
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// Runs the program on elements `lo..hi`, block by block.
    ///
    /// # Safety
    ///
    /// Every output holds at least `hi` elements, and no other thread reads or writes
    /// elements `lo..hi` of any output while this runs.
    unsafe fn run_blocks(
        &self,
        ins: &[&[T]],
        outs: &[Out<T>],
        lo: usize,
        hi: usize,
        scratch: &mut [T],
    ) {
        let mut regs: Vec<&mut [T]> = scratch.chunks_mut(BLOCK).collect();
        let mut start = lo;
        while start < hi {
            let len = BLOCK.min(hi - start);
            for (c, &(p, q)) in self.p.code.iter().zip(&self.params) {
                match *c {
                    Code::Unary { op, a, d } => {
                        let dst = std::mem::take(&mut regs[d]);
                        unary::<T>(op, opd(a, ins, &regs, start, len), &mut dst[..len], p, q);
                        regs[d] = dst;
                    }
                    Code::Binary { op, a, b, d } => {
                        let dst = std::mem::take(&mut regs[d]);
                        binary::<T>(
                            op,
                            opd(a, ins, &regs, start, len),
                            opd(b, ins, &regs, start, len),
                            &mut dst[..len],
                        );
                        regs[d] = dst;
                    }
                    Code::Store { r, out } => {
                        // SAFETY: elements `start..start + len` of the output are this call's
                        // (the caller's promise), and the output holds them.
                        let o =
                            unsafe { std::slice::from_raw_parts_mut(outs[out].0.add(start), len) };
                        o.copy_from_slice(&regs[r][..len]);
                    }
                }
            }
            start += len;
        }
    }
}

/// Source `s` over elements `start..start + len`.
#[inline(always)]
fn opd<'a, T: Copy>(
    s: Src,
    ins: &[&'a [T]],
    regs: &'a [&mut [T]],
    start: usize,
    len: usize,
) -> Opd<'a, T> {
    match s {
        Src::Input(k, Pos::Dense(o)) => Opd::Slice(&ins[k][o + start..o + start + len]),
        Src::Input(k, Pos::Splat(o)) => Opd::Value(ins[k][o]),
        Src::Reg(r) => Opd::Slice(&regs[r][..len]),
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
