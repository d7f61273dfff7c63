//! Whether this machine has CUDA, asked without a CUDA call that could panic: the driver
//! library is loaded at run time, and its absence is a typed error.

use crate::error::{Error, Result};
use cudarc::driver::{result, sys};

/// A `DeviceUnavailable` error for `op` on `device`.
pub(super) fn unavailable(op: &str, device: &str, reason: impl Into<String>) -> Error {
    Error::DeviceUnavailable {
        at: crate::error::Caller::UNKNOWN,
        op: op.into(),
        device: device.into(),
        reason: reason.into(),
    }
}

/// Whether the CUDA driver library can be loaded on this machine.
///
/// # Examples
///
/// ```
/// // On a machine without the driver this is false, and nothing panics.
/// let _present: bool = eddy_vm::stream::cuda::driver_present();
/// ```
pub fn driver_present() -> bool {
    // SAFETY: only tries to load the library; no CUDA call is made.
    unsafe { sys::is_culib_present() }
}

/// How many CUDA devices the machine has.
///
/// # Errors
///
/// `DeviceUnavailable` if the driver library is missing or fails to initialise.
///
/// # Examples
///
/// ```
/// match eddy_vm::stream::cuda::device_count() {
///     Ok(n) => println!("{n} CUDA devices"),
///     Err(e) => println!("no CUDA here: {e}"),
/// }
/// ```
pub fn device_count() -> Result<u32> {
    if !driver_present() {
        return Err(unavailable(
            "cuda",
            "cuda",
            "no CUDA driver library (libcuda.so) on this machine",
        ));
    }
    result::init().map_err(|e| unavailable("cuda", "cuda", format!("cuInit failed: {e}")))?;
    let n = result::device::get_count()
        .map_err(|e| unavailable("cuda", "cuda", format!("cuDeviceGetCount failed: {e}")))?;
    Ok(n.max(0) as u32)
}
