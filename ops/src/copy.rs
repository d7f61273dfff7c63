//! Copies, fills and generators: the kernel for the operands' device, and the copy between
//! two devices that `to_device` enqueues.

use crate::device::{Device, pick};
use crate::random::Distribution;
use crate::{DType, Elem, Layout, cpu};
use eddy_vm::instruction::Kernel;
use eddy_vm::stream::StreamKind;

/// The kernel copying `src` (any layout, broadcast allowed) of `src_dtype` into `dst` (a
/// non-overlapping layout of the same shape) of `dst_dtype`, on `device` (a cast when the
/// dtypes differ).
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`](crate::Error::Unsupported)).
///
/// # Examples
///
/// ```
/// use eddy_ops::{copy::copy, DType, Device, Layout};
/// let l = Layout::contiguous([4]);
/// assert!(copy(Device::CPU, l.clone(), DType::I32, l, DType::F32).is_some());
/// ```
pub fn copy(
    device: Device,
    src: Layout,
    src_dtype: DType,
    dst: Layout,
    dst_dtype: DType,
) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::copy::copy(src, src_dtype, dst, dst_dtype),
        crate::cuda::ops::copy(src, src_dtype, dst, dst_dtype)
    )
}

/// The kernel copying `src` on device `from` into a contiguous output of `src`'s shape on
/// device `to`, in one `dtype`. It runs on the stream [`transfer_stream`] names; the engine
/// orders it after every earlier write of the source and before every later access of either
/// side.
///
/// `None` for a pair of devices with no copy between them yet, and between a CPU and a CUDA
/// device for a source that is not contiguous (make it contiguous first).
///
/// # Examples
///
/// ```
/// use eddy_ops::{copy::transfer, DType, Device, Layout};
/// let l = Layout::contiguous([2, 3]);
/// assert!(transfer(Device::Cpu(0), Device::Cpu(1), DType::F32, l.clone()).is_some());
/// assert!(transfer(Device::Cpu(0), Device::Test(0), DType::F32, l).is_none());
/// ```
pub fn transfer(
    from: Device,
    to: Device,
    dtype: DType,
    src: Layout,
) -> Option<impl Kernel + use<>> {
    #[cfg(feature = "cuda")]
    {
        use crate::device::Either;
        match (from, to) {
            (Device::Cpu(_), Device::Cpu(_)) => {
                let dst = Layout::contiguous(src.shape.clone());
                Some(Either::Cpu(cpu::copy::copy(src, dtype, dst, dtype)))
            }
            (Device::Cpu(_), Device::Cuda(_)) if src.is_contiguous() => Some(Either::Cuda(
                Either::Cpu(crate::cuda::ops::upload_tensor(dtype, src)),
            )),
            (Device::Cuda(_), Device::Cpu(_)) if src.is_contiguous() => Some(Either::Cuda(
                Either::Cuda(crate::cuda::ops::download(dtype, src)),
            )),
            _ => None,
        }
    }
    #[cfg(not(feature = "cuda"))]
    match (from, to) {
        (Device::Cpu(_), Device::Cpu(_)) => {
            let dst = Layout::contiguous(src.shape.clone());
            Some(cpu::copy::copy(src, dtype, dst, dtype))
        }
        _ => None,
    }
}

/// Where the copy from device `from` to device `to` runs: the device and the kind of stream.
/// Between the host and a CUDA device that is the CUDA device's copy stream of that direction,
/// so that copies overlap its kernels; between CPU devices, the destination's compute stream.
///
/// # Examples
///
/// ```
/// use eddy_ops::{copy::transfer_stream, Device};
/// use eddy_vm::stream::StreamKind;
/// assert_eq!(transfer_stream(Device::Cpu(0), Device::Cpu(1)), (Device::Cpu(1), StreamKind::Compute));
/// assert_eq!(transfer_stream(Device::Cpu(0), Device::Cuda(0)), (Device::Cuda(0), StreamKind::Host2Device));
/// assert_eq!(transfer_stream(Device::Cuda(1), Device::Cpu(0)), (Device::Cuda(1), StreamKind::Device2Host));
/// ```
pub fn transfer_stream(from: Device, to: Device) -> (Device, StreamKind) {
    match (from, to) {
        (Device::Cpu(_), Device::Cuda(_)) => (to, StreamKind::Host2Device),
        (Device::Cuda(_), Device::Cpu(_)) => (from, StreamKind::Device2Host),
        _ => (to, StreamKind::Compute),
    }
}

/// The kernel giving rank `rank`'s result of collective `c` over the components of a group of
/// ranks on `devices` (laid out as `parts`, rank by rank; see
/// [`cpu::collective::collective`] for the operands).
///
/// `None` unless every device is a CPU device: a group that spans other devices runs the
/// collective as copies between them.
///
/// # Examples
///
/// ```
/// use eddy_ops::{copy::collective, global::Collective, DType, Device, Layout};
/// let parts = vec![Layout::contiguous([2]); 2];
/// let c = Collective::AllGather { dim: 0 };
/// assert!(collective(c, &[Device::Cpu(0), Device::Cpu(1)], DType::F32, parts.clone(), 1).is_some());
/// assert!(collective(c, &[Device::Cpu(0), Device::Cuda(0)], DType::F32, parts, 0).is_none());
/// ```
pub fn collective(
    c: crate::collective::Collective,
    devices: &[Device],
    dtype: DType,
    parts: Vec<Layout>,
    rank: usize,
) -> Option<impl Kernel + use<>> {
    (devices.iter().all(|d| d.is_cpu())).then(|| cpu::collective::collective(c, dtype, parts, rank))
}

/// The kernel filling the elements of output 0 that `layout` covers with `value`, on `device`.
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`](crate::Error::Unsupported)).
///
/// # Examples
///
/// ```
/// use eddy_ops::{copy::fill, DType, Device, Layout};
/// assert!(fill(Device::CPU, DType::F32, Layout::contiguous([4]), 0.0).is_some());
/// ```
pub fn fill(
    device: Device,
    dtype: DType,
    layout: Layout,
    value: f64,
) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::copy::fill(dtype, layout, value),
        crate::cuda::ops::fill(dtype, layout, value)
    )
}

/// The kernel writing `f(i)` to element `i` of a contiguous output 0 (`arange`, `linspace`,
/// `eye`), on `device`; `name` is the op's.
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`](crate::Error::Unsupported)).
///
/// # Examples
///
/// ```
/// use eddy_ops::{copy::generate, DType, Device};
/// assert!(generate(Device::CPU, "arange", DType::I64, |i| i as f64).is_some());
/// ```
pub fn generate<F: Fn(usize) -> f64 + Send + Sync + 'static>(
    device: Device,
    name: &'static str,
    dtype: DType,
    f: F,
) -> Option<impl Kernel + use<F>> {
    pick!(
        device,
        cpu::copy::generate(name, dtype, f),
        Some(crate::cuda::ops::generate(name, dtype, f))
    )
}

/// The kernel filling output 0 with values of `dist` from the counter-based generator
/// ([`crate::random`]), on `device`: the same values on every device for one seed and offset.
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`](crate::Error::Unsupported)).
///
/// # Examples
///
/// ```
/// use eddy_ops::{copy::random, random::Distribution, DType, Device};
/// let d = Distribution::Uniform { lo: 0.0, hi: 1.0 };
/// assert!(random(Device::CPU, DType::F32, d, 7, 0).is_some());
/// ```
pub fn random(
    device: Device,
    dtype: DType,
    dist: Distribution,
    seed: u64,
    offset: u64,
) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::copy::random(dtype, dist, seed, offset),
        Some(crate::cuda::ops::random(dtype, dist, seed, offset))
    )
}

/// The kernel writing host values `data` into a contiguous output 0 on `device`.
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`](crate::Error::Unsupported)).
///
/// # Examples
///
/// ```
/// use eddy_ops::{copy::from_host, Device};
/// assert!(from_host(Device::Cpu(2), vec![1.0f32, 2.0]).is_some());
/// ```
pub fn from_host<T: Elem>(device: Device, data: Vec<T>) -> Option<impl Kernel + use<T>> {
    pick!(
        device,
        crate::kernel::from_host(data),
        Some(crate::cuda::ops::from_host(data))
    )
}
