//! The choice of kernel by device: every op-layer constructor takes the operands' [`Device`]
//! and returns that device's kernel, or `None` where the device has none, which the caller
//! reports as [`Error::Unsupported`] ([`unsupported`]).
//!
//! Every CPU device (`cpu:0`, `cpu:1`, …) runs the same kernels on host memory, so an op gives
//! the same bits on each. A new device adds a kernel module beside [`cpu`](crate::cpu) and an
//! arm to [`choose`]; no tensor code changes.

pub use eddy_vm::Device;

use crate::Error;

/// The kernel for `device`: `cpu()` on a CPU device, else `None` (the device has no kernel
/// for the op; the caller reports [`unsupported`]). Never a silent copy to the host.
///
/// The op-layer constructors return `Option` rather than `Result` on purpose: a kernel is
/// moved a few times per op, and one wrapped in a `Result` (whose error is large) cost the
/// per-op path about twenty instructions of moves under callgrind; an `Option` of a kernel
/// is the kernel's own size.
///
/// # Examples
///
/// ```
/// use eddy_ops::device::{choose, Device};
/// assert_eq!(choose(Device::Cpu(1), || 7), Some(7));
/// assert_eq!(choose(Device::Cuda(0), || 7), None);
/// ```
#[inline(always)]
pub fn choose<K>(device: Device, cpu: impl FnOnce() -> K) -> Option<K> {
    match device {
        Device::Cpu(_) => Some(cpu()),
        _ => None,
    }
}

/// The error of an op with no kernel for `device`; out of line, off the per-op path.
///
/// # Examples
///
/// ```
/// use eddy_ops::{device::unsupported, Device};
/// assert_eq!(unsupported("exp", Device::Cuda(1)).to_string(), "`exp` has no kernel for device cuda:1");
/// ```
#[cold]
#[inline(never)]
pub fn unsupported(op: &'static str, device: Device) -> Error {
    Error::Unsupported { op, device }
}
