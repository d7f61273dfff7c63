//! Index kernels: `index_select`, `gather`, `index_add`, `scatter_add`, every dtype, by i64 or
//! i32 indices.

use super::{arg, bits_of, by_size, dev_layout, fill_bits};
use crate::cuda::launch::{CudaKernel, Launch, dptr};
use crate::kinds::IndexDims;
use crate::{DType, Layout};
use eddy_vm::instruction::Kernel;
use eddy_vm::{Blob, Counted};

/// The kernels' code for the indices' dtype (`load_index` in `kernels/index.cu`); `None` for
/// a dtype the CPU refuses as indices too.
fn index_kind(idx_dtype: DType) -> Option<i32> {
    match idx_dtype {
        DType::I64 => Some(0),
        DType::I32 => Some(1),
        _ => None,
    }
}

/// What an index out of range that the device computed reads (the op layer checks the indices
/// it knows on the host): NaN in float dtypes, each in its own format; 0 in the others.
fn missing(dtype: DType) -> u64 {
    bits_of(dtype, if dtype.is_float() { f64::NAN } else { 0.0 })
}

/// The arguments a kernel takes for an element of `elem` bytes: `v` in its own width.
struct Wide {
    b1: u8,
    b2: u16,
    b4: u32,
    b8: u64,
    elem: usize,
}

impl Wide {
    fn new(v: u64, elem: usize) -> Wide {
        Wide {
            b1: v as u8,
            b2: v as u16,
            b4: v as u32,
            b8: v,
            elem,
        }
    }
    fn arg(&mut self) -> *mut std::ffi::c_void {
        match self.elem {
            1 => arg(&mut self.b1),
            2 => arg(&mut self.b2),
            4 => arg(&mut self.b4),
            _ => arg(&mut self.b8),
        }
    }
}

/// `index_select` of values of any dtype (their bits moved by element size).
pub fn index_select(d: IndexDims) -> Option<impl Kernel + use<>> {
    let name = select_name(d.dtype);
    let mut ik = index_kind(d.idx_dtype)?;
    let miss = missing(d.dtype);
    Some(CudaKernel::new(
        "index_select",
        move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let n = d.outer * d.nidx * d.inner;
            let (mut s, mut off) = (dptr::<u8>(&ins[0], 0), d.offset as i64);
            let (mut idx, mut ioff) = (dptr::<u8>(&ins[1], 0), d.idx_offset as i64);
            let mut y = dptr::<u8>(&outs[0], 0);
            let (mut outer, mut size, mut inner, mut nidx) =
                (d.outer as i64, d.size as i64, d.inner as i64, d.nidx as i64);
            let (mut bad, mut miss) = (0u64, Wide::new(miss, d.dtype.size_in_bytes()));
            // SAFETY: s, off, idx, ik, ioff, y, outer, size, inner, nidx, bad, miss are, in order,
            // the parameters of the kernel `name` names in `kernels/index.cu`, each of the
            // declared type and alive for the call; the device addresses are this instruction's
            // operands (or its scratch), allocated until the kernel has run.
            unsafe {
                l.elementwise(
                    name,
                    n,
                    &mut [
                        arg(&mut s),
                        arg(&mut off),
                        arg(&mut idx),
                        arg(&mut ik),
                        arg(&mut ioff),
                        arg(&mut y),
                        arg(&mut outer),
                        arg(&mut size),
                        arg(&mut inner),
                        arg(&mut nidx),
                        arg(&mut bad),
                        miss.arg(),
                    ],
                )
            }
        },
    ))
}

fn select_name(dtype: DType) -> &'static str {
    by_size(
        dtype,
        [
            "index_select_b1",
            "index_select_b2",
            "index_select_b4",
            "index_select_b8",
        ],
    )
}

fn gather_name(dtype: DType) -> &'static str {
    by_size(dtype, ["gather_b1", "gather_b2", "gather_b4", "gather_b8"])
}

/// `gather` of values of any dtype (their bits moved by element size).
pub fn gather(
    op: &'static str,
    dtype: DType,
    idx_dtype: DType,
    ls: Layout,
    stride_dim: usize,
    size: usize,
    idx_offset: usize,
) -> Option<impl Kernel + use<>> {
    let name = gather_name(dtype);
    let mut ik = index_kind(idx_dtype)?;
    let miss = missing(dtype);
    Some(CudaKernel::new(
        op,
        move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let n = ls.numel();
            let (mut s, mut dl) = (dptr::<u8>(&ins[0], 0), dev_layout(&ls)?);
            let (mut sd, mut size) = (stride_dim as i64, size as i64);
            let (mut idx, mut ioff) = (dptr::<u8>(&ins[1], 0), idx_offset as i64);
            let (mut y, mut n64, mut bad) = (dptr::<u8>(&outs[0], 0), n as i64, 0u64);
            let mut miss = Wide::new(miss, dtype.size_in_bytes());
            // SAFETY: s, dl, sd, size, idx, ik, ioff, y, n64, bad, miss are, in order, the
            // parameters of the kernel `name` names in `kernels/index.cu`, each of the declared
            // type and alive for the call; the device addresses are this instruction's operands
            // (or its scratch), allocated until the kernel has run.
            unsafe {
                l.elementwise(
                    name,
                    n,
                    &mut [
                        arg(&mut s),
                        arg(&mut dl),
                        arg(&mut sd),
                        arg(&mut size),
                        arg(&mut idx),
                        arg(&mut ik),
                        arg(&mut ioff),
                        arg(&mut y),
                        arg(&mut n64),
                        arg(&mut bad),
                        miss.arg(),
                    ],
                )
            }
        },
    ))
}

/// The adding kernel of `family` (`"index_add"` or `"scatter_add"`) for `dtype`.
fn add_name(scatter: bool, dtype: DType) -> Option<&'static str> {
    if scatter {
        super::by_dtype!("scatter_add", dtype, F32 => "f32", F64 => "f64", F16 => "f16",
            BF16 => "bf16", I64 => "i64", I32 => "i32", U8 => "u8", Bool => "bool")
    } else {
        super::by_dtype!("index_add", dtype, F32 => "f32", F64 => "f64", F16 => "f16",
            BF16 => "bf16", I64 => "i64", I32 => "i32", U8 => "u8", Bool => "bool")
    }
}

/// `out = 0; out[o, idx[j], q] += src[o, j, q]`, any dtype (added atomically: float sums in
/// an order the device chooses; bools add as "or").
pub fn index_add(d: IndexDims) -> Option<impl Kernel + use<>> {
    let name = add_name(false, d.dtype)?;
    let mut ik = index_kind(d.idx_dtype)?;
    Some(CudaKernel::new(
        "index_add",
        move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let elem = d.dtype.size_in_bytes();
            fill_bits(l, &outs[0], elem, d.outer * d.size * d.inner, 0)?;
            let (mut s, mut off) = (dptr::<u8>(&ins[0], 0), d.offset as i64);
            let (mut idx, mut ioff) = (dptr::<u8>(&ins[1], 0), d.idx_offset as i64);
            let mut y = dptr::<u8>(&outs[0], 0);
            let (mut outer, mut size, mut inner, mut nidx) =
                (d.outer as i64, d.size as i64, d.inner as i64, d.nidx as i64);
            // SAFETY: s, off, idx, ik, ioff, y, outer, size, inner, nidx are, in order, the
            // parameters of the kernel `name` names in `kernels/index.cu`, each of the declared
            // type and alive for the call; the device addresses are this instruction's operands
            // (or its scratch), allocated until the kernel has run.
            unsafe {
                l.elementwise(
                    name,
                    d.outer * d.nidx * d.inner,
                    &mut [
                        arg(&mut s),
                        arg(&mut off),
                        arg(&mut idx),
                        arg(&mut ik),
                        arg(&mut ioff),
                        arg(&mut y),
                        arg(&mut outer),
                        arg(&mut size),
                        arg(&mut inner),
                        arg(&mut nidx),
                    ],
                )
            }
        },
    ))
}

/// `out = 0; out[pos(i) with dim replaced by idx[i]] += src[i]`, any dtype, as [`index_add`].
#[allow(clippy::too_many_arguments)] // the CPU kernel's parameters, passed through
pub fn scatter_add(
    dtype: DType,
    idx_dtype: DType,
    offset: usize,
    lo: Layout,
    stride_dim: usize,
    size: usize,
    out_numel: usize,
    idx_offset: usize,
) -> Option<impl Kernel + use<>> {
    let name = add_name(true, dtype)?;
    let mut ik = index_kind(idx_dtype)?;
    Some(CudaKernel::new(
        "scatter_add",
        move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            fill_bits(l, &outs[0], dtype.size_in_bytes(), out_numel, 0)?;
            let n = lo.numel();
            let (mut s, mut off, mut dl) =
                (dptr::<u8>(&ins[0], 0), offset as i64, dev_layout(&lo)?);
            let (mut sd, mut size) = (stride_dim as i64, size as i64);
            let (mut idx, mut ioff) = (dptr::<u8>(&ins[1], 0), idx_offset as i64);
            let (mut y, mut n64) = (dptr::<u8>(&outs[0], 0), n as i64);
            // SAFETY: s, off, dl, sd, size, idx, ik, ioff, y, n64 are, in order, the parameters of
            // the kernel `name` names in `kernels/index.cu`, each of the declared type and alive
            // for the call; the device addresses are this instruction's operands (or its scratch),
            // allocated until the kernel has run.
            unsafe {
                l.elementwise(
                    name,
                    n,
                    &mut [
                        arg(&mut s),
                        arg(&mut off),
                        arg(&mut dl),
                        arg(&mut sd),
                        arg(&mut size),
                        arg(&mut idx),
                        arg(&mut ik),
                        arg(&mut ioff),
                        arg(&mut y),
                        arg(&mut n64),
                    ],
                )
            }
        },
    ))
}

/// Every kernel name this family may launch.
#[cfg(test)]
pub(super) fn names() -> Vec<&'static str> {
    let mut v = Vec::new();
    for dt in super::DTYPES {
        v.push(select_name(dt));
        v.push(gather_name(dt));
        v.extend(add_name(false, dt));
        v.extend(add_name(true, dt));
    }
    v
}
