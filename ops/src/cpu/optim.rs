//! Optimizers' updates, one kernel per parameter.

use crate::DType;
use crate::kernel::{FnKernel, input, output};
use crate::kinds::AdamStep;
use eddy_vm::Counted;
use eddy_vm::{Blob, instruction::Kernel};

/// The element type of an update: `f32` or `f64`, whose arithmetic is the composed ops' own.
trait Real:
    crate::Elem
    + Copy
    + Send
    + Sync
    + std::ops::Add<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
{
    fn from(v: f64) -> Self;
    fn sqrt(self) -> Self;
}

impl Real for f32 {
    #[inline(always)]
    fn from(v: f64) -> f32 {
        v as f32
    }
    #[inline(always)]
    fn sqrt(self) -> f32 {
        f32::sqrt(self)
    }
}

impl Real for f64 {
    #[inline(always)]
    fn from(v: f64) -> f64 {
        v
    }
    #[inline(always)]
    fn sqrt(self) -> f64 {
        f64::sqrt(self)
    }
}

/// Pointers to one parameter's operands, shared by the tasks, each of which updates its own
/// range of elements.
#[derive(Clone, Copy)]
struct Operands<T> {
    g: *const T,
    p: *mut T,
    m: *mut T,
    v: *mut T,
}
// SAFETY: each task reads and writes only its own range of elements of the four arrays.
unsafe impl<T: Send> Send for Operands<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Operands<T> {}

impl<T> Operands<T> {
    /// The operands (a method, so that a closure captures the whole `Sync` value).
    fn get(self) -> Self {
        self
    }
}

/// Elements `range` of one Adam step, each op rounded as the composed ops round it:
/// `p ← p·(1 − lr·wd)` (decoupled) or `g ← g + p·wd`; `m ← m·β₁ + (1 − β₁)·g`;
/// `v ← v·β₂ + (1 − β₂)·g²`; `p ← p + m / (√(v / bc₂) + ε) · step`.
#[inline(always)]
fn update<T: Real>(o: Operands<T>, range: std::ops::Range<usize>, s: &AdamStep, bc2: T, step: T) {
    let (b1, b2) = s.betas;
    let (b1, omb1, b2, omb2) = (
        T::from(b1),
        T::from(1.0 - b1),
        T::from(b2),
        T::from(1.0 - b2),
    );
    let (eps, wd, shrink) = (
        T::from(s.eps),
        T::from(s.weight_decay),
        T::from(1.0 - s.lr * s.weight_decay),
    );
    let n = range.len();
    // SAFETY: the caller's range lies inside the four arrays, and no other task touches it.
    let (g, p, m, v) = unsafe {
        (
            std::slice::from_raw_parts(o.g.add(range.start), n),
            std::slice::from_raw_parts_mut(o.p.add(range.start), n),
            std::slice::from_raw_parts_mut(o.m.add(range.start), n),
            std::slice::from_raw_parts_mut(o.v.add(range.start), n),
        )
    };
    let decay = s.weight_decay != 0.0;
    for i in 0..n {
        let mut gi = g[i];
        if decay {
            if s.decoupled {
                p[i] = p[i] * shrink;
            } else {
                gi = gi + p[i] * wd;
            }
        }
        let mi = m[i] * b1 + omb1 * gi;
        let vi = v[i] * b2 + omb2 * (gi * gi);
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] + mi / ((vi / bc2).sqrt() + eps) * step;
    }
}

/// [`update`] compiled for AVX-512F, so that it runs 16 lanes at a time.
///
/// # Safety
///
/// The CPU has AVX-512F; as [`update`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn update_wide<T: Real>(
    o: Operands<T>,
    r: std::ops::Range<usize>,
    s: &AdamStep,
    bc2: T,
    step: T,
) {
    update(o, r, s, bc2, step)
}

/// One Adam step of a dense parameter of `n` elements (see [`crate::optim::adam_step`]).
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::optim::adam_step;
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::optim::AdamStep;
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (g, p, m, v, t) = (vm.new_blob(4), vm.new_blob(4), vm.new_blob(4), vm.new_blob(4), vm.new_blob(8));
/// vm.run_op(StreamId::CPU, from_host(vec![0.5f32]), &[], &[&g], false)?;
/// vm.run_op(StreamId::CPU, from_host(vec![1f32]), &[], &[&p], false)?;
/// vm.run_op(StreamId::CPU, from_host(vec![0f32]), &[], &[&m], false)?;
/// vm.run_op(StreamId::CPU, from_host(vec![0f32]), &[], &[&v], false)?;
/// vm.run_op(StreamId::CPU, from_host(vec![0f64]), &[], &[&t], false)?;
/// let s = AdamStep { lr: 0.1, betas: (0.9, 0.999), eps: 1e-8, weight_decay: 0.0, decoupled: false };
/// vm.run_op(StreamId::CPU, adam_step(DType::F32, 1, [0; 4], s), &[&g], &[&p, &m, &v, &t], false)?;
/// let p = vm.read_blob(&p, |b| gather_host::<f32>(b, &Layout::contiguous([1])))?;
/// assert!((p[0] - 0.9).abs() < 1e-6); // Adam's first step moves by about lr
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn adam_step(dtype: DType, n: usize, offsets: [usize; 4], s: AdamStep) -> impl Kernel {
    fn run<T: Real>(
        ins: &[Counted<Blob>],
        outs: &[Counted<Blob>],
        n: usize,
        off: [usize; 4],
        s: &AdamStep,
    ) -> Result<(), String> {
        // SAFETY: input 0 is read and outputs 0–3 read and written by this instruction alone;
        // the op definition made the five tensors distinct.
        let (g, p, m, v, t) = unsafe {
            (
                input::<T>(&ins[0]),
                output::<T>(&outs[0]),
                output::<T>(&outs[1]),
                output::<T>(&outs[2]),
                output::<f64>(&outs[3]),
            )
        };
        let (Some(g), Some(p), Some(m), Some(v), Some(t)) = (
            g.get(off[0]..off[0] + n),
            p.get_mut(off[1]..off[1] + n),
            m.get_mut(off[2]..off[2] + n),
            v.get_mut(off[3]..off[3] + n),
            t.first_mut(),
        ) else {
            return Err("Adam operands out of their storage".to_string());
        };
        *t += 1.0;
        // 1 − β^t and −lr / (1 − β₁^t) in f64, as the composed ops' scalar tensors.
        let bc1 = 1.0 - s.betas.0.powf(*t);
        let bc2 = T::from(1.0 - s.betas.1.powf(*t));
        let step = T::from(-s.lr / bc1);
        let o = Operands {
            g: g.as_ptr(),
            p: p.as_mut_ptr(),
            m: m.as_mut_ptr(),
            v: v.as_mut_ptr(),
        };
        #[cfg(target_arch = "x86_64")]
        let wide = std::arch::is_x86_feature_detected!("avx512f");
        let chunk = n
            .div_ceil(eddy_vm::par::threads() * crate::kernel::CHUNKS_PER_THREAD)
            .max(8192);
        let task = |c: usize| {
            let r = c * chunk..n.min((c + 1) * chunk);
            #[cfg(target_arch = "x86_64")]
            if wide {
                // SAFETY: the CPU has AVX-512F; the chunks are disjoint ranges of `0..n`.
                return unsafe { update_wide(o.get(), r, s, bc2, step) };
            }
            update(o.get(), r, s, bc2, step)
        };
        eddy_vm::par::for_each(n.div_ceil(chunk), task);
        Ok(())
    }
    FnKernel::new(
        "adam_step",
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| match dtype {
            DType::F32 => run::<f32>(ins, outs, n, offsets, &s),
            DType::F64 => run::<f64>(ins, outs, n, offsets, &s),
            _ => Err(format!("adam_step does not take {dtype}")),
        },
    )
}
