//! The choice of kernel by device: every op-layer constructor takes the operands' [`Device`]
//! and returns that device's kernel, or [`Error::Unsupported`] where the device has none.
//!
//! Every CPU device (`cpu:0`, `cpu:1`, …) runs the same kernels on host memory, so an op gives
//! the same bits on each. A new device adds a kernel module beside [`cpu`](crate::cpu) and an
//! arm to [`choose`]; no tensor code changes.

pub use eddy_vm::Device;

use crate::{Error, Result};

/// The kernel for `device`: `cpu()` on a CPU device, else `Unsupported` naming `op` and the
/// device. Never a silent copy to the host.
///
/// # Examples
///
/// ```
/// use eddy_ops::{device::{choose, Device}, Error};
/// assert_eq!(choose("add", Device::Cpu(1), || 7).unwrap(), 7);
/// let e = choose("add", Device::Cuda(0), || 7).unwrap_err();
/// assert_eq!(e, Error::Unsupported { op: "add", device: Device::Cuda(0) });
/// assert_eq!(e.to_string(), "`add` has no kernel for device cuda:0");
/// ```
#[inline(always)]
pub fn choose<K>(op: &'static str, device: Device, cpu: impl FnOnce() -> K) -> Result<K> {
    match device {
        Device::Cpu(_) => Ok(cpu()),
        device => Err(Error::Unsupported { op, device }),
    }
}
