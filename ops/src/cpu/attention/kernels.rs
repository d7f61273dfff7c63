//! The two kernels' instructions: the problems shared among the kernel threads, each task's
//! operands gathered where their rows are not consecutive, its outputs written in place or
//! scattered.

#[cfg(target_arch = "x86_64")]
use super::avx512;
use super::{
    BwdProblem, FwdProblem, backward_chunk, backward_chunk_wide, forward_chunk, forward_chunk_wide,
    has_avx2, has_avx512,
};
use crate::DType;
use crate::attention::{Attention, MaskLayout, Rows};
use crate::cpu::elementwise::{FloatElem, dispatch_float};
use crate::kernel::{FnKernel, input, output};
use eddy_vm::Counted;
use eddy_vm::{Blob, instruction::Kernel};
use num_traits::Zero;

/// The first `n · size` elements of `v` as `n` slices of `size` (empty ones when `size` is 0).
fn split<T>(v: &mut [T], n: usize, size: usize) -> Vec<&mut [T]> {
    let mut rest = &mut v[..n * size];
    (0..n)
        .map(|_| {
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(size);
            rest = tail;
            head
        })
        .collect()
}

/// Problems per task when `batch` problems of `work` multiply-adds each are shared.
fn per_task(batch: usize, work: usize) -> usize {
    if batch * work < crate::kernel::PAR_MIN || batch < 2 {
        return batch.max(1);
    }
    batch.div_ceil(eddy_vm::par::threads() * crate::kernel::CHUNKS_PER_THREAD)
}

/// An output blob's elements, written by several tasks at once at places that
/// [`check_outputs`] showed to be disjoint.
struct Dst<T>(*mut T);
impl<T> Clone for Dst<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Dst<T> {}
// SAFETY: each task writes its own problems' elements, which no other task touches.
unsafe impl<T: Send> Send for Dst<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Dst<T> {}

impl<T> Dst<T> {
    /// The base pointer (a method, so that a closure captures the whole `Sync` wrapper).
    fn ptr(self) -> *mut T {
        self.0
    }
}

/// Where a task finds one problem's operand: at its place in the operand (its rows
/// consecutive there) or in the task's gathered copy.
#[derive(Clone, Copy)]
enum At {
    Src(usize),
    Buf(usize),
}

/// Problem `b`'s `rows` rows of `w` from `src` laid out as `lay`: where they are already,
/// when consecutive, else appended to `buf`.
fn gather<T: Copy>(src: &[T], lay: &Rows, b: usize, [rows, w]: [usize; 2], buf: &mut Vec<T>) -> At {
    if rows <= 1 || lay.rs == w {
        return At::Src(lay.at(b, 0));
    }
    let start = buf.len();
    for i in 0..rows {
        buf.extend_from_slice(&src[lay.at(b, i)..][..w]);
    }
    At::Buf(start)
}

/// The operand `at` names.
fn resolve<'a, T>(at: At, src: &'a [T], buf: &'a [T]) -> &'a [T] {
    match at {
        At::Src(i) => &src[i..],
        At::Buf(i) => &buf[i..],
    }
}

/// Checks that every input's problems lie inside its blob, and every output's too, without
/// two places in common (outputs named by one index share a blob).
fn check_outputs(
    what: &[(&Rows, [usize; 3], usize)],
    outs: &[(&[Rows], [usize; 3], usize)],
) -> Result<(), String> {
    for &(lay, [batch, rows, w], len) in what {
        if lay.end(batch, rows, w) > len {
            return Err(format!("an operand's rows {lay:?} pass its {len} elements"));
        }
    }
    for &(lays, [batch, rows, w], len) in outs {
        for lay in lays {
            if lay.end(batch, rows, w) > len || !lay.disjoint(batch, rows, w) {
                return Err(format!(
                    "output rows {lay:?} overlap or pass {len} elements"
                ));
            }
        }
        if let [a, rest @ ..] = lays
            && !rest.is_empty()
        {
            // Several outputs in one blob: the same rows at offsets a fixed step apart, that
            // step one more axis of the test.
            let step = rest[0].offset.wrapping_sub(a.offset);
            let spaced = rest.iter().enumerate().all(|(i, r)| {
                *r == Rows {
                    offset: a.offset.wrapping_add((i + 1).wrapping_mul(step)),
                    ..*a
                }
            });
            let [n, h, r, c] = a.axes(batch, rows, w);
            let mut axes = [(lays.len(), step), n, h, r, c];
            if !spaced || step == 0 || step > len || !crate::attention::disjoint_axes(&mut axes) {
                return Err(format!("outputs {lays:?} share places"));
            }
        }
    }
    Ok(())
}

/// Scaled dot-product attention: inputs queries (`l` rows of `e` per problem), keys (`s` of
/// `e`) and values (`s` of `ev`) where `lays[..3]` put them, and an additive mask of the same
/// float `dtype` when `mask` says where it is (input 3); outputs the attention (`l` rows of
/// `ev`, `dtype`) where `lays[3]` puts it (output 0) and each row's log-sum-exp `[batch, l]`
/// (output 1, dense, `f64` for `f64`, else `f32`; `+inf` for a row that sees no key, whose
/// output is zero as in PyTorch). Operands whose rows are not consecutive are gathered per
/// problem; the kernel fails on layouts that pass their blob or outputs that overlap.
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::attention::attention;
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::nn::{Attention, Rows};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// // One query [1, 0] against keys [1, 0] and [0, 0]: scores 1 and 0, values 1 and 0.
/// let (q, k, v) = (vm.new_blob(8), vm.new_blob(16), vm.new_blob(8));
/// vm.run_op(StreamId::CPU, from_host(vec![1f32, 0.]), &[], &[&q], false)?;
/// vm.run_op(StreamId::CPU, from_host(vec![1f32, 0., 0., 0.]), &[], &[&k], false)?;
/// vm.run_op(StreamId::CPU, from_host(vec![1f32, 0.]), &[], &[&v], false)?;
/// let (o, lse) = (vm.new_blob(4), vm.new_blob(4));
/// let g = Attention { batch: 1, l: 1, s: 2, e: 2, ev: 1, scale: 1.0, causal: false };
/// let lays = [Rows::dense(0, 1, 2), Rows::dense(0, 2, 2), Rows::dense(0, 2, 1), Rows::dense(0, 1, 1)];
/// vm.run_op(StreamId::CPU, attention(DType::F32, g, lays, None), &[&q, &k, &v], &[&o, &lse], false)?;
/// let l = Layout::contiguous([1]);
/// let o = vm.read_blob(&o, move |m| gather_host::<f32>(m, &l))?;
/// let e = std::f32::consts::E;
/// assert!((o[0] - e / (e + 1.0)).abs() < 1e-6);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn attention(
    dtype: DType,
    g: Attention,
    lays: [Rows; 4],
    mask: Option<MaskLayout>,
) -> impl Kernel {
    FnKernel::new(
        "scaled_dot_product_attention",
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            dispatch_float!(dtype, T => {
            type A = <T as FloatElem>::A;
            // SAFETY: the inputs are read and the outputs written by this instruction; the
            // outputs are fresh blobs, none of them an input.
            let (q, k, v, o, lse) = unsafe {
                (input::<T>(&ins[0]), input::<T>(&ins[1]), input::<T>(&ins[2]),
                 output::<T>(&outs[0]), output::<A>(&outs[1]))
            };
            // SAFETY: as above; input 3 is the mask when one was given.
            let m = mask.as_ref().map(|lay| (unsafe { input::<T>(&ins[3]) }, lay));
            let [lq, lk, lv, lo] = &lays;
            let (bt, l, s) = (g.batch, g.l, g.s);
            check_outputs(
                &[(lq, [bt, l, g.e], q.len()), (lk, [bt, s, g.e], k.len()),
                  (lv, [bt, s, g.ev], v.len())],
                &[(std::slice::from_ref(lo), [bt, l, g.ev], o.len())],
            )?;
            let dst = Dst(o.as_mut_ptr());
            let mut items = split(lse, bt, l);
            let wide = has_avx2();
            let f32_wide = has_avx512() && dtype == DType::F32;
            let run = |start: usize, chunk: &mut [&mut [A]]| {
                // The task's operands, gathered where their rows are not consecutive.
                let (mut ins, mut outb) = (Vec::new(), Vec::new());
                let at: Vec<[At; 3]> = (start..start + chunk.len())
                    .map(|b| {
                        [(q, lq, g.e, l), (k, lk, g.e, s), (v, lv, g.ev, s)]
                            .map(|(t, lay, w, r)| gather(t, lay, b, [r, w], &mut ins))
                    })
                    .collect();
                let direct = l <= 1 || lo.rs == g.ev;
                if !direct {
                    outb.resize(chunk.len() * l * g.ev, T::down(A::zero()));
                }
                let mut bufs = outb.chunks_mut((l * g.ev).max(1));
                let mut probs: Vec<FwdProblem<'_, T, A>> = chunk
                    .iter_mut()
                    .zip(&at)
                    .enumerate()
                    .map(|(i, (lse, at))| {
                        let b = start + i;
                        let ops = [(at[0], q), (at[1], k), (at[2], v)]
                            .map(|(a, t)| resolve(a, t, &ins));
                        let o: &mut [T] = if direct {
                            // SAFETY: problem `b`'s output rows are consecutive, inside the
                            // blob and apart from every other problem's (`check_outputs`),
                            // and this task alone works problem `b`.
                            unsafe {
                                std::slice::from_raw_parts_mut(
                                    dst.ptr().add(lo.at(b, 0)), l * g.ev)
                            }
                        } else {
                            bufs.next().unwrap_or_default()
                        };
                        (b, ops, o, &mut **lse)
                    })
                    .collect();
                #[cfg(target_arch = "x86_64")]
                if f32_wide {
                    // SAFETY: the CPU has AVX-512F and AVX2 (`has_avx512`), and `T` and `A`
                    // are `f32` (the dtype is `F32`).
                    unsafe { avx512::forward_chunk(&g, m, &mut probs) };
                } else if wide {
                    // SAFETY: the CPU has AVX2 and FMA (`has_avx2`).
                    unsafe { forward_chunk_wide(&g, m, &mut probs) };
                } else {
                    forward_chunk::<T, false>(&g, m, &mut probs);
                }
                #[cfg(not(target_arch = "x86_64"))]
                {
                    let _ = (wide, f32_wide);
                    forward_chunk::<T, false>(&g, m, &mut probs);
                }
                drop(probs);
                if !direct {
                    for (i, rows) in outb.chunks(l * g.ev).enumerate() {
                        // SAFETY: as above, row by row.
                        unsafe { scatter(dst, lo, start + i, g.ev, rows) };
                    }
                }
            };
            let per = per_task(bt, l * s * (g.e + g.ev));
            eddy_vm::par::for_each_chunk_mut(&mut items, per, run);
            Ok(())
        }, else => Err(format!("unsupported dtype {dtype}")))
        },
    )
}

/// Writes problem `b`'s dense rows of `w` (`rows`) where `lay` puts them in `dst`.
///
/// # Safety
///
/// Those places are inside `dst`'s blob and no other thread touches them meanwhile.
unsafe fn scatter<T: Copy>(dst: Dst<T>, lay: &Rows, b: usize, w: usize, rows: &[T]) {
    for (i, row) in rows.chunks_exact(w.max(1)).enumerate() {
        // SAFETY: the caller's promise, for row `i`.
        unsafe { std::ptr::copy_nonoverlapping(row.as_ptr(), dst.ptr().add(lay.at(b, i)), w) };
    }
}

/// The gradient of [`attention`]: inputs queries, keys, values, the forward's output and the
/// output's gradient where `lays[..5]` put them, the forward's log-sum-exp (dense, output 1 of
/// [`attention`]) and the mask (input 6, when `mask` is given); outputs the gradients of the
/// queries, keys and values where `lays[5..]` put them: three blobs, or one blob holding all
/// three (the gradient of a packed `[n, l, 3·e]` projection, its three layouts the same rows
/// a fixed step apart).
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::attention::attention_backward;
/// use eddy_ops::nn::{Attention, Rows};
/// use eddy_ops::DType;
/// let g = Attention { batch: 2, l: 3, s: 3, e: 4, ev: 4, scale: 0.5, causal: true };
/// let _kernel = attention_backward(DType::F32, g, [Rows::dense(0, 3, 4); 8], None);
/// ```
pub fn attention_backward(
    dtype: DType,
    g: Attention,
    lays: [Rows; 8],
    mask: Option<MaskLayout>,
) -> impl Kernel {
    FnKernel::new(
        "scaled_dot_product_attention_backward",
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            dispatch_float!(dtype, T => {
            type A = <T as FloatElem>::A;
            // SAFETY: the inputs are read and the outputs written by this instruction; the
            // outputs are fresh blobs, none of them an input.
            let (ops, lse) = unsafe {
                let ops: [&[T]; 5] = std::array::from_fn(|i| input::<T>(&ins[i]));
                (ops, input::<A>(&ins[5]))
            };
            // One output blob for the three gradients, or one each.
            let one = outs.len() == 1;
            // SAFETY: as above.
            let grads: Vec<&mut [T]> = outs.iter().map(|o| unsafe { output::<T>(o) }).collect();
            // SAFETY: as above; input 6 is the mask when one was given.
            let m = mask.as_ref().map(|lay| (unsafe { input::<T>(&ins[6]) }, lay));
            let (bt, l, s, e, ev) = (g.batch, g.l, g.s, g.e, g.ev);
            let sizes = [[l, e], [s, e], [s, ev], [l, ev], [l, ev]];
            let what: Vec<(&Rows, [usize; 3], usize)> = (0..5)
                .map(|i| (&lays[i], [bt, sizes[i][0], sizes[i][1]], ops[i].len()))
                .collect();
            let glays = &lays[5..];
            if one {
                if (e, l) != (ev, s) {
                    return Err("one gradient blob needs queries, keys and values alike".into());
                }
                check_outputs(&what, &[(glays, [bt, l, e], grads[0].len())])?;
            } else {
                let outs: Vec<_> = (0..3)
                    .map(|i| (std::slice::from_ref(&glays[i]), [bt, sizes[i][0], sizes[i][1]],
                              grads[i].len()))
                    .collect();
                check_outputs(&what, &outs)?;
            }
            let dst: Vec<Dst<T>> = grads.into_iter().map(|g| Dst(g.as_mut_ptr())).collect();
            let dst = [0, 1, 2].map(|i| dst[if one { 0 } else { i }]);
            let mut items: Vec<usize> = (0..bt).collect();
            let wide = has_avx2();
            let f32_wide = has_avx512() && dtype == DType::F32;
            let run = |start: usize, chunk: &mut [usize]| {
                let mut buf = Vec::new();
                let at: Vec<[At; 5]> = chunk
                    .iter()
                    .map(|&b| std::array::from_fn(|i| {
                        gather(ops[i], &lays[i], b, sizes[i], &mut buf)
                    }))
                    .collect();
                // Each gradient written in place where its rows are consecutive, else into
                // the task's buffer and scattered after.
                let direct: [bool; 3] = std::array::from_fn(|i| {
                    sizes[i][0] <= 1 || glays[i].rs == sizes[i][1]
                });
                let mut gbuf: [Vec<T>; 3] = std::array::from_fn(|i| {
                    let n = if direct[i] { 0 } else { chunk.len() * sizes[i][0] * sizes[i][1] };
                    vec![T::down(A::zero()); n]
                });
                let [g0, g1, g2] = &mut gbuf;
                let n = |i: usize| (sizes[i][0] * sizes[i][1]).max(1);
                let mut parts = [g0.chunks_mut(n(0)), g1.chunks_mut(n(1)), g2.chunks_mut(n(2))];
                let mut probs: Vec<BwdProblem<'_, T, A>> = chunk
                    .iter()
                    .zip(&at)
                    .map(|(&b, at)| {
                        let ops: [&[T]; 5] = std::array::from_fn(|i| resolve(at[i], ops[i], &buf));
                        let gs: [&mut [T]; 3] = std::array::from_fn(|i| {
                            if direct[i] {
                                let n = sizes[i][0] * sizes[i][1];
                                // SAFETY: problem `b`'s rows of gradient `i` are consecutive,
                                // inside the blob and apart from every other place written
                                // (`check_outputs`), and this task alone works problem `b`.
                                unsafe {
                                    std::slice::from_raw_parts_mut(
                                        dst[i].ptr().add(glays[i].at(b, 0)), n)
                                }
                            } else {
                                parts[i].next().unwrap_or_default()
                            }
                        });
                        (b, ops, &lse[b * l..], gs)
                    })
                    .collect();
                #[cfg(target_arch = "x86_64")]
                if f32_wide {
                    // SAFETY: the CPU has AVX-512F and AVX2 (`has_avx512`), and `T` and `A`
                    // are `f32` (the dtype is `F32`).
                    unsafe { avx512::backward_chunk(&g, m, &mut probs) };
                } else if wide {
                    // SAFETY: the CPU has AVX2 and FMA (`has_avx2`).
                    unsafe { backward_chunk_wide(&g, m, &mut probs) };
                } else {
                    backward_chunk::<T, false>(&g, m, &mut probs);
                }
                #[cfg(not(target_arch = "x86_64"))]
                {
                    let _ = (wide, f32_wide);
                    backward_chunk::<T, false>(&g, m, &mut probs);
                }
                drop(probs);
                for i in 0..3 {
                    let (n, w) = (sizes[i][0] * sizes[i][1], sizes[i][1]);
                    if direct[i] || n == 0 {
                        continue;
                    }
                    for (k, rows) in gbuf[i].chunks(n).enumerate() {
                        // SAFETY: as above, row by row.
                        unsafe { scatter(dst[i], &glays[i], start + k, w, rows) };
                    }
                }
            };
            let per = per_task(bt, l * s * (2 * e + 2 * ev));
            eddy_vm::par::for_each_chunk_mut(&mut items, per, run);
            Ok(())
        }, else => Err(format!("unsupported dtype {dtype}")))
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::from_host;
    use eddy_vm::{StreamId, Vm};

    /// Layouts that pass their blob or write a place twice fail the instruction, with what
    /// is wrong; none writes anything.
    #[test]
    fn layouts_that_overlap_or_pass_the_blob_fail_the_kernel() -> eddy_vm::Result<()> {
        let vm = Vm::builder().build()?;
        let g = Attention {
            batch: 2,
            l: 2,
            s: 2,
            e: 2,
            ev: 2,
            scale: 1.0,
            causal: false,
        };
        let blob = |n: usize| vm.new_blob(4 * n);
        let (x, lse) = (blob(8), blob(4));
        vm.run_op(StreamId::CPU, from_host(vec![1f32; 8]), &[], &[&x], false)?;
        vm.run_op(StreamId::CPU, from_host(vec![0f32; 4]), &[], &[&lse], false)?;
        let d = Rows::dense(0, 2, 2);
        // A kernel's error surfaces when its output is read.
        let run = |lays: [Rows; 4]| {
            let (o, m) = (blob(8), blob(4));
            let k = attention(DType::F32, g, lays, None);
            vm.run_op(StreamId::CPU, k, &[&x, &x, &x], &[&o, &m], false)?;
            vm.read_blob(&o, |_| ())
        };
        run([d; 4])?;
        let overlap = run([d, d, d, Rows { rs: 1, ..d }]).unwrap_err().to_string();
        assert!(overlap.contains("overlap"), "{overlap}");
        let past = run([
            Rows {
                offset: 1 << 20,
                ..d
            },
            d,
            d,
            d,
        ])
        .unwrap_err()
        .to_string();
        assert!(past.contains("pass"), "{past}");
        // The three gradients in one blob must be a fixed step apart.
        let back = |grads: [Rows; 3]| {
            let lays = [d, d, d, d, d, grads[0], grads[1], grads[2]];
            let k = attention_backward(DType::F32, g, lays, None);
            let dx = blob(24);
            vm.run_op(StreamId::CPU, k, &[&x, &x, &x, &x, &x, &lse], &[&dx], false)?;
            vm.read_blob(&dx, |_| ())
        };
        let at = |offset| Rows::dense(offset, 2, 2);
        back([at(0), at(8), at(16)])?;
        let shared = back([at(0), at(4), at(16)]).unwrap_err().to_string();
        assert!(shared.contains("share"), "{shared}");
        Ok(())
    }
}
