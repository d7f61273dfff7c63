//! Copies and casts on the device, fills, and transfers between host and device.

use super::{arg, bits_of, by_size, dev_layout, launch_fill, numel};
use crate::cuda::launch::{CudaError, CudaKernel, Launch, dptr};
use crate::random::{Distribution, mantissa_digits, random_value};
use crate::{DType, Elem, Layout};
use cudarc::driver::result;
use eddy_vm::instruction::Kernel;
use eddy_vm::{Blob, Counted};

/// Element i of `src` to element i of `dst` on the device, between any two dtypes: the bits
/// moved when the dtypes match, else converted as the CPU's [`cast`](crate::cast) converts.
pub fn copy(
    src: Layout,
    src_dtype: DType,
    dst: Layout,
    dst_dtype: DType,
) -> Option<impl Kernel + use<>> {
    Some(CudaKernel::new(
        "copy",
        move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let n = src.numel();
            let (mut x, mut y) = (dptr::<u8>(&ins[0], 0), dptr::<u8>(&outs[0], 0));
            let (mut dx, mut dy) = (dev_layout(&src)?, dev_layout(&dst)?);
            let mut n64 = n as i64;
            if src_dtype == dst_dtype {
                let name = by_size(src_dtype, ["copy_b1", "copy_b2", "copy_b4", "copy_b8"]);
                let args = &mut [
                    arg(&mut x),
                    arg(&mut dx),
                    arg(&mut y),
                    arg(&mut dy),
                    arg(&mut n64),
                ];
                // SAFETY: x, dx, y, dy, n64 (`args`) are, in order, the parameters of the
                // `copy_b*` kernel `name` names in `kernels/elementwise.cu`, each of the declared
                // type and alive for the call; the device addresses are this instruction's
                // operands, allocated until the kernel has run.
                return unsafe { l.elementwise(name, n, args) };
            }
            let (mut sk, mut dk) = (cast_code(src_dtype), cast_code(dst_dtype));
            // SAFETY: sk, dk, x, dx, y, dy, n64 are, in order, the parameters of `cast` in
            // `kernels/elementwise.cu`, each of the declared type and alive for the call; the
            // device addresses are this instruction's operands (or its scratch), allocated until
            // the kernel has run.
            unsafe {
                l.elementwise(
                    "cast",
                    n,
                    &mut [
                        arg(&mut sk),
                        arg(&mut dk),
                        arg(&mut x),
                        arg(&mut dx),
                        arg(&mut y),
                        arg(&mut dy),
                        arg(&mut n64),
                    ],
                )
            }
        },
    ))
}

/// The `cast` kernel's code for `dtype` (`kernels/elementwise.cu`).
fn cast_code(dtype: DType) -> i32 {
    match dtype {
        DType::F32 => 0,
        DType::F64 => 1,
        DType::F16 => 2,
        DType::BF16 => 3,
        DType::I64 => 4,
        DType::I32 => 5,
        DType::U8 => 6,
        DType::Bool => 7,
    }
}

/// Fills the elements of output 0 that `layout` covers with `value`, any dtype (converted on
/// the host, as the CPU's fill converts it).
pub fn fill(dtype: DType, layout: Layout, value: f64) -> Option<impl Kernel + use<>> {
    let bits = bits_of(dtype, value);
    Some(CudaKernel::new(
        "fill",
        move |l: &Launch<'_>, _: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let mut dl = dev_layout(&layout)?;
            launch_fill(
                l,
                &outs[0],
                &mut dl,
                dtype.size_in_bytes(),
                layout.numel(),
                bits,
            )
        },
    ))
}

/// Copies `bytes` (the storage of a contiguous tensor) into output `out`, on the stream.
fn upload_bytes(l: &Launch<'_>, out: &Blob, bytes: &[u8]) -> Result<(), CudaError> {
    if bytes.is_empty() {
        return Ok(());
    }
    // SAFETY: the destination is `out`'s device memory, at least `bytes.len()` long (the
    // tensor's size), this instruction's output; the source is copied out (to pinned staging)
    // before this returns, so `bytes` may go.
    unsafe { l.copy_from_host(dptr::<u8>(out, 0), bytes) }
}

/// Host values to device memory: output 0 gets `bytes`, copied on the stream.
fn upload(name: &'static str, bytes: Vec<u8>) -> impl Kernel {
    CudaKernel::new(
        name,
        move |l: &Launch<'_>, _: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            upload_bytes(l, &outs[0], &bytes)
        },
    )
}

/// The storage bytes of host values.
fn storage_bytes<T: Elem>(data: &[T]) -> Vec<u8> {
    if T::DTYPE == DType::Bool {
        return data.iter().map(|v| (v.to_f64() != 0.0) as u8).collect();
    }
    // SAFETY: `T` is a plain element type; its bytes are read as they are stored.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
        .to_vec()
}

/// `data` into a contiguous output 0 on the device.
pub fn from_host<T: Elem>(data: Vec<T>) -> impl Kernel {
    upload("from_vec", storage_bytes(&data))
}

/// Values `f(i)` computed on the host, in `dtype`, uploaded.
fn host_values(dtype: DType, n: usize, f: impl Fn(usize) -> f64) -> Vec<u8> {
    crate::dispatch!(dtype, T => {
        let v: Vec<T> = (0..n).map(|i| T::from_f64(f(i))).collect();
        storage_bytes(&v)
    })
}

/// `f(i)` into element i of output 0 (arange, linspace, eye, a dropout mask): computed on the
/// host, exactly as on a CPU device, and uploaded.
pub fn generate(
    name: &'static str,
    dtype: DType,
    f: impl Fn(usize) -> f64 + Send + Sync + 'static,
) -> impl Kernel {
    CudaKernel::new(
        name,
        move |l: &Launch<'_>, _: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let n = numel(&outs[0], dtype.size_in_bytes().max(1));
            upload_bytes(l, &outs[0], &host_values(dtype, n, &f))
        },
    )
}

/// Random values of `dist`: the same counter-based values as on a CPU device, uploaded.
pub fn random(dtype: DType, dist: Distribution, seed: u64, offset: u64) -> impl Kernel {
    let digits = mantissa_digits(dtype);
    generate("rand", dtype, move |i| {
        random_value(dist, seed, offset, i, digits)
    })
}

/// A contiguous device tensor (input 0, `src` a contiguous layout) to host memory (output 0,
/// contiguous), for the device's device-to-host stream: an asynchronous copy straight into the
/// output, whose memory that stream allocates as pinned host memory. A host consumer of the
/// output waits for the event the engine records after it.
pub fn download(dtype: DType, src: Layout) -> impl Kernel {
    CudaKernel::new(
        "to_device",
        move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let size = dtype.size_in_bytes();
            let bytes = src.numel() * size;
            if bytes == 0 {
                return Ok(());
            }
            // SAFETY: output 0 is this instruction's fresh host blob of `bytes`; the engine gives
            // the kernel exclusive access to it until the copy's completion event.
            let out = unsafe { std::slice::from_raw_parts_mut(outs[0].as_ptr(), bytes) };
            // SAFETY: the source range is inside input 0's device memory (its layout is
            // contiguous from `offset`); the stream waits on the device for its writers.
            unsafe {
                result::memcpy_dtoh_async(out, dptr::<u8>(&ins[0], src.offset * size), l.stream())
            }
            .map_err(|e| CudaError::driver("device to host copy", e))
        },
    )
}

/// A contiguous host tensor (input 0 from `offset` elements) to device memory (output 0), for
/// the device's host-to-device stream: through pinned staging when large, so that the copy
/// overlaps the compute stream's kernels.
pub fn upload_tensor(dtype: DType, src: Layout) -> impl Kernel {
    CudaKernel::new(
        "to_device",
        move |l: &Launch<'_>, ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let size = dtype.size_in_bytes();
            let bytes = src.numel() * size;
            if bytes == 0 {
                return Ok(());
            }
            // SAFETY: input 0 is a host blob the engine keeps readable during this instruction,
            // holding at least `offset + numel` elements.
            let host = unsafe { ins[0].bytes_ref() };
            let from = src.offset * size;
            // SAFETY: output 0's device memory holds `bytes` and is this instruction's alone;
            // the host range is copied out (to pinned staging or by the driver) before this
            // returns.
            unsafe { l.copy_from_host(dptr::<u8>(&outs[0], 0), &host[from..from + bytes]) }
        },
    )
}

/// Every kernel name this family may launch.
#[cfg(test)]
pub(super) fn names() -> Vec<&'static str> {
    let mut v = vec!["cast"];
    for dt in super::DTYPES {
        v.push(by_size(dt, ["copy_b1", "copy_b2", "copy_b4", "copy_b8"]));
        v.push(by_size(dt, ["fill_b1", "fill_b2", "fill_b4", "fill_b8"]));
    }
    v
}
