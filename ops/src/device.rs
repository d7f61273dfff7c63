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
use eddy_vm::instruction::{ComputeCtx, Kernel};
use eddy_vm::{Blob, Counted};

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

impl<A: Kernel, B: Kernel> Kernel for Either<A, B> {
    #[inline]
    fn name(&self) -> &str {
        match self {
            Either::Cpu(k) => k.name(),
            Either::Cuda(k) => k.name(),
        }
    }
    #[inline]
    #[track_caller]
    fn compute(
        &mut self,
        inputs: &[Counted<Blob>],
        outputs: &[Counted<Blob>],
        ctx: &mut ComputeCtx<'_>,
    ) -> eddy_vm::Result<()> {
        match self {
            Either::Cpu(k) => k.compute(inputs, outputs, ctx),
            Either::Cuda(k) => k.compute(inputs, outputs, ctx),
        }
    }
    #[inline]
    fn fusable(&self) -> bool {
        match self {
            Either::Cpu(k) => k.fusable(),
            Either::Cuda(k) => k.fusable(),
        }
    }
    #[inline]
    fn cheap(&self) -> bool {
        match self {
            Either::Cpu(k) => k.cheap(),
            Either::Cuda(k) => k.cheap(),
        }
    }
    #[inline]
    fn deferred_drop(&self) -> bool {
        match self {
            Either::Cpu(k) => k.deferred_drop(),
            Either::Cuda(k) => k.deferred_drop(),
        }
    }
    fn describe(&self) -> Option<Box<dyn std::any::Any + Send>> {
        match self {
            Either::Cpu(k) => k.describe(),
            Either::Cuda(k) => k.describe(),
        }
    }
    fn is_described_by(&self, description: &dyn std::any::Any) -> bool {
        match self {
            Either::Cpu(k) => k.is_described_by(description),
            Either::Cuda(k) => k.is_described_by(description),
        }
    }
    fn may_alias(&self, output: usize, input: usize) -> bool {
        match self {
            Either::Cpu(k) => k.may_alias(output, input),
            Either::Cuda(k) => k.may_alias(output, input),
        }
    }
}
