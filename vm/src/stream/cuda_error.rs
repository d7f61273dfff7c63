//! [`CudaError`]: what goes wrong below an op on a CUDA device (a driver call, NVRTC, cuBLAS,
//! a kernel's scratch memory), typed, and turned into the engine's [`Error`] once, where a
//! kernel's body returns ([`CudaError::into_error`]): device memory that runs out is
//! `OutOfMemory`, the rest `KernelFailed` naming the op.

use crate::error::{Caller, Error};
use cudarc::driver::DriverError;
use std::fmt;

/// A failure below an op on a CUDA device.
///
/// # Examples
///
/// ```
/// use eddy_vm::stream::cuda_error::CudaError;
/// let e = CudaError::OutOfMemory { requested: 1 << 20, in_use: 0, cached: 0 };
/// assert!(matches!(e.into_error("sort"), eddy_vm::Error::OutOfMemory { .. }));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CudaError {
    /// A driver call failed.
    Driver {
        /// What was being done (`"launching sort_f32"`, `"host to device copy"`).
        what: String,
        /// The driver's error.
        error: DriverError,
    },
    /// NVRTC refused to compile a kernel source: its log.
    Compile(String),
    /// The NVRTC library is not on this machine.
    NoCompiler,
    /// A cuBLAS call failed.
    Blas {
        /// What was being done.
        what: String,
        /// cuBLAS's status.
        status: String,
    },
    /// Device memory ran out for memory a kernel needs for itself (a sort's keys).
    OutOfMemory {
        /// Bytes asked for.
        requested: usize,
        /// Bytes in use on the stream's allocator.
        in_use: usize,
        /// Bytes it held free.
        cached: usize,
    },
    /// No kernel of this name in the device's module.
    NoKernel(String),
    /// An operand the device's kernels cannot take (a layout of more than 8 dims).
    Unsupported(String),
    /// An error of the engine on the way (the device's context could not be bound).
    Engine(Box<Error>),
}

impl CudaError {
    /// A failed driver call, doing `what`.
    pub fn driver(what: impl Into<String>, error: DriverError) -> CudaError {
        CudaError::Driver {
            what: what.into(),
            error,
        }
    }

    /// The engine's error for this failure in op `op`: `OutOfMemory` for device memory, the
    /// engine's own error as it is, `KernelFailed` naming `op` for the rest.
    pub fn into_error(self, op: &str) -> Error {
        match self {
            CudaError::OutOfMemory {
                requested,
                in_use,
                cached,
            } => Error::OutOfMemory {
                op: op.into(),
                requested,
                in_use,
                cached,
                capacity: None,
                at: Caller::UNKNOWN,
            },
            CudaError::Engine(e) => *e,
            other => Error::kernel(op, other),
        }
    }
}

impl fmt::Display for CudaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CudaError::Driver { what, error } => write!(f, "{what}: {error}"),
            CudaError::Compile(log) => write!(f, "NVRTC: {log}"),
            CudaError::NoCompiler => write!(f, "no NVRTC library (libnvrtc.so) on this machine"),
            CudaError::Blas { what, status } => write!(f, "cuBLAS {what}: {status}"),
            CudaError::OutOfMemory {
                requested,
                in_use,
                cached,
            } => write!(
                f,
                "out of device memory for {requested} bytes ({in_use} in use, {cached} cached)"
            ),
            CudaError::NoKernel(name) => write!(f, "no device kernel {name}"),
            CudaError::Unsupported(what) => write!(f, "{what}"),
            CudaError::Engine(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for CudaError {}

impl From<Error> for CudaError {
    fn from(e: Error) -> CudaError {
        CudaError::Engine(Box::new(e))
    }
}
