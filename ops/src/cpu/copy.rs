//! Copies and casts between layouts and dtypes, and the creation kernels (fill, arange,
//! linspace, eye, seeded random).

use super::stream_store::{wants_streaming, write_chunk};
use crate::kernel::{FnKernel, input, output, par_out, walk};
use crate::random::{Distribution, mantissa_digits, random_value};
use crate::{DType, Elem, Layout, dispatch};
use eddy_vm::Counted;
use eddy_vm::{Blob, instruction::Kernel};

/// Copies `src` (any layout, broadcast allowed) into `dst` (any non-overlapping layout of the same
/// shape), converting `src_dtype` to `dst_dtype`. Input 0 is the source blob, output 0 the
/// destination; elements of `dst` outside its layout keep their values.
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::copy::copy;
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (src, dst) = (vm.new_blob(6 * 4), vm.new_blob(6 * 8));
/// vm.run_op(StreamId::CPU, from_host(vec![0i32, 1, 2, 3, 4, 5]), &[], &[&src], false)?;
/// // `src` as [2, 3] read transposed, into a contiguous [3, 2] of f64.
/// let (st, dl) = (Layout::contiguous([2, 3]).transpose(0, 1), Layout::contiguous([3, 2]));
/// let k = copy(st, DType::I32, dl.clone(), DType::F64);
/// vm.run_op(StreamId::CPU, k, &[&src], &[&dst], false)?;
/// let out = vm.read_blob(&dst, move |b| gather_host::<f64>(b, &dl))?;
/// assert_eq!(out, [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn copy(src: Layout, src_dtype: DType, dst: Layout, dst_dtype: DType) -> impl Kernel {
    FnKernel::new(
        "copy",
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            dispatch!(src_dtype, S => dispatch!(dst_dtype, D => {
                // SAFETY: input 0 is read and output 0 written by this instruction; they differ.
                let (s, d) = unsafe { (input::<S>(&ins[0]), output::<D>(&outs[0])) };
                copy_typed::<S, D>(s, &src, d, &dst);
            }));
            Ok(())
        },
    )
}

#[inline(always)]
fn conv<S: Elem, D: Elem>(v: S) -> D {
    if std::any::TypeId::of::<S>() == std::any::TypeId::of::<D>() {
        // SAFETY: S and D are the same type (checked just above), so this is a plain copy.
        unsafe { std::mem::transmute_copy::<S, D>(&v) }
    } else {
        crate::cast(v)
    }
}

pub(crate) fn copy_typed<S: Elem, D: Elem>(s: &[S], sl: &Layout, d: &mut [D], dl: &Layout) {
    let n = dl.numel();
    if n == 0 {
        return;
    }
    if let (Some(sr), Some(dr)) = (sl.contiguous_range(), dl.contiguous_range()) {
        let (s, d) = (&s[sr], &mut d[dr]);
        let streaming = wants_streaming::<D>(d.len());
        par_out(d, |start, chunk| {
            write_chunk(chunk, streaming, |i, dst| {
                let (st, len) = (start + i, dst.len());
                for (o, &v) in dst.iter_mut().zip(&s[st..st + len]) {
                    *o = conv(v);
                }
            })
        });
        return;
    }
    if let Some(dr) = dl.contiguous_range() {
        let d = &mut d[dr];
        let streaming = wants_streaming::<D>(d.len());
        let rows = contiguous_rows(sl);
        par_out(d, |start, chunk| {
            write_chunk(chunk, streaming, |i, dst| {
                let st = start + i;
                if rows {
                    return copy_rows(s, sl, st, dst);
                }
                walk(
                    sl.dims(),
                    [&sl.strides],
                    [sl.offset],
                    st,
                    st + dst.len(),
                    |j, [o]| dst[j - st] = conv(s[o]),
                );
            })
        });
        return;
    }
    walk(
        dl.dims(),
        [&sl.strides, &dl.strides],
        [sl.offset, dl.offset],
        0,
        n,
        |_, [so, dof]| d[dof] = conv(s[so]),
    );
}

/// Whether `l`'s rows (its last dim) are contiguous and long enough to copy as slices.
fn contiguous_rows(l: &Layout) -> bool {
    matches!((l.dims().last(), l.strides.last()), (Some(&n), Some(&1)) if n >= 8)
}

/// `dst[j] = s[element st + j of layout sl]`, row by row: `sl`'s rows are contiguous
/// ([`contiguous_rows`]), so each run of a row is one slice (a head split out of a batch of
/// rows, say), whose copy vectorises.
fn copy_rows<S: Elem, D: Elem>(s: &[S], sl: &Layout, st: usize, dst: &mut [D]) {
    let dims = sl.dims();
    let (rank, inner) = (dims.len(), dims[dims.len() - 1]);
    let (mut i, end) = (st, st + dst.len());
    while i < end {
        let col = i % inner;
        let run = (inner - col).min(end - i);
        // The storage offset of the row holding element `i`.
        let (mut r, mut o) = (i / inner, sl.offset);
        for k in (0..rank - 1).rev() {
            o += r % dims[k] * sl.strides[k];
            r /= dims[k];
        }
        let src = &s[o + col..o + col + run];
        for (x, &v) in dst[i - st..i - st + run].iter_mut().zip(src) {
            *x = conv(v);
        }
        i += run;
    }
}

/// Fills the elements of output 0 that `layout` covers with `value` (`zeros`, `zero_`, `fill_`).
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::copy::fill;
/// use eddy_ops::kernel::gather_host;
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let out = vm.new_blob(4 * 4);
/// let all = Layout::contiguous([4]);
/// vm.run_op(StreamId::CPU, fill(DType::F32, all.clone(), 0.0), &[], &[&out], false)?;
/// let mut odd = Layout::contiguous([2]); // elements 1 and 3
/// (odd.strides[0], odd.offset) = (2, 1);
/// vm.run_op(StreamId::CPU, fill(DType::F32, odd, 7.0), &[], &[&out], false)?;
/// assert_eq!(vm.read_blob(&out, move |b| gather_host::<f32>(b, &all))?, [0.0, 7.0, 0.0, 7.0]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn fill(dtype: DType, layout: Layout, value: f64) -> impl Kernel {
    FnKernel::new(
        "fill",
        move |_: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            dispatch!(dtype, T => {
                // SAFETY: output 0 is written only by this instruction.
                let o = unsafe { output::<T>(&outs[0]) };
                let v = T::from_f64(value);
                if let Some(r) = layout.contiguous_range() {
                    let streaming = wants_streaming::<T>(r.len());
                    par_out(&mut o[r], |_, c| write_chunk(c, streaming, |_, dst| dst.fill(v)));
                } else {
                    walk(layout.dims(), [&layout.strides], [layout.offset], 0, layout.numel(), |_, [i]| o[i] = v);
                }
            });
            Ok(())
        },
    )
}

/// Writes `f(i)` to element `i` of output 0 (arange, linspace, eye).
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::copy::generate;
/// use eddy_ops::kernel::gather_host;
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let out = vm.new_blob(4 * 8);
/// let k = generate("arange", DType::I64, |i| 10.0 + 2.0 * i as f64);
/// vm.run_op(StreamId::CPU, k, &[], &[&out], false)?;
/// let l = Layout::contiguous([4]);
/// assert_eq!(vm.read_blob(&out, move |b| gather_host::<i64>(b, &l))?, [10, 12, 14, 16]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn generate(
    name: &'static str,
    dtype: DType,
    f: impl Fn(usize) -> f64 + Send + Sync + 'static,
) -> impl Kernel {
    FnKernel::new(name, move |_: &[Counted<Blob>], outs: &[Counted<Blob>]| {
        dispatch!(dtype, T => {
            // SAFETY: output 0 is written only by this instruction.
            let o = unsafe { output::<T>(&outs[0]) };
            par_out(o, |start, c| {
                for (k, v) in c.iter_mut().enumerate() {
                    *v = T::from_f64(f(start + k));
                }
            });
        });
        Ok(())
    })
}

/// Fills output 0 with values of `dist` from the counter-based generator (`seed`, `offset`),
/// rounded once to `dtype`. A uniform value that rounds up to `hi` in the dtype (possible for
/// bounds other than `[0, 1)`) becomes `lo`, so every value is in `[lo, hi)`.
///
/// # Examples
///
/// ```
/// use eddy_ops::{cpu::copy::random, random::{random_value, Distribution}};
/// use eddy_ops::kernel::gather_host;
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let out = vm.new_blob(3 * 8);
/// let d = Distribution::Uniform { lo: 0.0, hi: 10.0 };
/// vm.run_op(StreamId::CPU, random(DType::F64, d, 9, 100), &[], &[&out], false)?;
/// let l = Layout::contiguous([3]);
/// let v = vm.read_blob(&out, move |b| gather_host::<f64>(b, &l))?;
/// assert_eq!(v, (0..3).map(|i| random_value(d, 9, 100, i, 53)).collect::<Vec<_>>());
/// assert!(v.iter().all(|x| (0.0..10.0).contains(x)));
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn random(dtype: DType, dist: Distribution, seed: u64, offset: u64) -> impl Kernel {
    let digits = mantissa_digits(dtype);
    FnKernel::new(
        "rand",
        move |_: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            dispatch!(dtype, T => {
                // SAFETY: output 0 is written only by this instruction.
                let o = unsafe { output::<T>(&outs[0]) };
                par_out(o, |start, c| {
                    for (k, v) in c.iter_mut().enumerate() {
                        let mut x = T::from_f64(random_value(dist, seed, offset, start + k, digits));
                        if let Distribution::Uniform { lo, hi } = dist
                            && x.to_f64() >= hi
                            && lo < hi
                        {
                            x = T::from_f64(lo);
                        }
                        *v = x;
                    }
                });
            });
            Ok(())
        },
    )
}
