//! The choice of kernel by device: every op-layer constructor takes the operands' [`Device`]
//! and returns that device's kernel, or `None` where the device has none, which the caller
//! reports as [`Error::Unsupported`] ([`unsupported`]).
//!
//! The constructors return `Option` rather than `Result` on purpose: a kernel is moved a few
//! times per op, and one wrapped in a `Result` (whose error is large) cost the per-op path
//! about twenty instructions of moves under callgrind; an `Option` of a kernel is the
//! kernel's own size.
//!
//! Every CPU device (`cpu:0`, `cpu:1`, …) runs the same kernels on host memory, so an op gives
//! the same bits on each. A new device adds a kernel module beside [`cpu`](crate::cpu) and an
//! arm to the crate's `pick!` macro; no tensor code changes.

pub use eddy_vm::Device;

use crate::Error;
use eddy_vm::instruction::Kernel;

/// The error of an op with no kernel for `device`; out of line, off the per-op path.
///
/// # Examples
///
/// ```
/// use eddy_ops::{device::unsupported, Device};
/// let e = unsupported("exp", Device::Cuda(1)).without_caller();
/// assert_eq!(e.to_string(), "`exp` has no kernel for device cuda:1");
/// ```
#[cold]
#[inline(never)]
#[track_caller]
pub fn unsupported(op: &'static str, device: Device) -> Error {
    Error::Unsupported {
        at: crate::Caller::here(),
        op,
        device,
    }
}

/// The kernel for `device` from one of two device kinds' constructors: `$cpu` (an expression
/// giving a CPU kernel) on a CPU device, `$cuda` (an expression giving `Option` of a CUDA
/// kernel; only with the `cuda` feature) on a CUDA device, `None` elsewhere. Each expression is
/// evaluated only on its device kind. Without the `cuda` feature, or given only `$cpu`, the
/// kernel is the CPU one itself, not wrapped in an [`Either`]: the per-op path of a CPU-only
/// build pays nothing for the second device kind.
macro_rules! pick {
    ($device:expr, $cpu:expr) => {
        match $device {
            $crate::Device::Cpu(_) => Some($cpu),
            _ => None,
        }
    };
    ($device:expr, $cpu:expr, $cuda:expr) => {{
        #[cfg(feature = "cuda")]
        {
            match $device {
                $crate::Device::Cpu(_) => Some($crate::device::Either::Cpu($cpu)),
                $crate::Device::Cuda(_) => ($cuda).map($crate::device::Either::Cuda),
                _ => None,
            }
        }
        #[cfg(not(feature = "cuda"))]
        {
            pick!($device, $cpu)
        }
    }};
}
pub(crate) use pick;

/// A kernel of one of two device kinds, as the op layer hands it out.
///
/// # Examples
///
/// ```
/// use eddy_ops::device::Either;
/// use eddy_ops::FnKernel;
/// use eddy_vm::instruction::Kernel;
/// let nop = FnKernel::new("nop", |_, _| Ok(()));
/// let k: Either<_, FnKernel<fn(&[_], &[_]) -> Result<(), String>>> = Either::Cpu(nop);
/// assert_eq!(k.name(), "nop");
/// ```
pub enum Either<A, B> {
    /// A CPU kernel.
    Cpu(A),
    /// A CUDA kernel.
    Cuda(B),
}

/// Runs an expression on the kernel of either side (see [`eddy_vm::forward_kernel`]).
macro_rules! either_side {
    (ref $s:ident, $k:ident => $e:expr) => {
        match $s {
            Either::Cpu($k) => $e,
            Either::Cuda($k) => $e,
        }
    };
    (mut $s:ident, $k:ident => $e:expr) => {
        match $s {
            Either::Cpu($k) => $e,
            Either::Cuda($k) => $e,
        }
    };
}

impl<A: Kernel, B: Kernel> Kernel for Either<A, B> {
    eddy_vm::forward_kernel!(either_side);
}
