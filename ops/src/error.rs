//! The tensor-level error type: every op checks its arguments on the caller's thread and returns
//! one of these before anything is enqueued; engine errors (asynchronous kernel failures, OOM,
//! deadlock) arrive wrapped in [`Error::Vm`].

use crate::DType;

/// A `Result` whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong in an op call or at a sync point.
///
/// # Examples
///
/// ```
/// use eddy_ops::{Error, DType};
/// let e = Error::DTypeMismatch { op: "matmul", lhs: DType::F32, rhs: DType::F64 };
/// assert_eq!(e.to_string(), "dtype mismatch in `matmul`, lhs: f32, rhs: f64");
/// assert_eq!(e.op(), Some("matmul"));
/// ```
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // ---- shapes ------------------------------------------------------------------------------
    /// The operands' shapes do not fit (broadcast, matmul inner dims, cat, …).
    #[error("shape mismatch in `{op}`, lhs: {lhs:?}, rhs: {rhs:?}")]
    ShapeMismatch {
        op: &'static str,
        lhs: Vec<usize>,
        rhs: Vec<usize>,
    },
    /// The element counts of a reshape differ.
    #[error(
        "`{op}`: cannot view {from:?} ({} elements) as {to:?}",
        crate::numel_of(from)
    )]
    ElementCountMismatch {
        op: &'static str,
        from: Vec<usize>,
        to: Vec<usize>,
    },
    /// A dim is out of range for the tensor's rank.
    #[error("`{op}`: dim {dim} out of range for a tensor of rank {rank}")]
    InvalidDim {
        op: &'static str,
        dim: isize,
        rank: usize,
    },
    /// The element count or byte size overflows (F2); the allocator was not asked.
    #[error("shape {shape:?} of {dtype} overflows the address space")]
    ShapeOverflow { shape: Vec<usize>, dtype: DType },
    /// An index is out of range.
    #[error("`{op}`: index {index} out of range for a dim of size {size}")]
    IndexOutOfRange {
        op: &'static str,
        index: i64,
        size: usize,
    },
    /// A reduction without identity (max, argmax, …) over an empty dim.
    #[error("`{op}` over an empty dim has no identity")]
    EmptyTensor { op: &'static str },
    /// An in-place write into a view where several elements share memory (an expanded view).
    #[error("`{op}`: in-place write into a view whose elements overlap (an expanded view)")]
    OverlappingWrite { op: &'static str },

    // ---- dtypes and devices --------------------------------------------------------------------
    /// The operands' dtypes must be equal (or the result cannot be stored in place).
    #[error("dtype mismatch in `{op}`, lhs: {lhs}, rhs: {rhs}")]
    DTypeMismatch {
        op: &'static str,
        lhs: DType,
        rhs: DType,
    },
    /// The op does not support this dtype.
    #[error("`{op}` does not support dtype {dtype}")]
    UnsupportedDType { op: &'static str, dtype: DType },
    /// The operands live on different devices or engines.
    #[error("device mismatch in `{op}`: expected all tensors on the same device and engine, found {lhs} and {rhs}")]
    DeviceMismatch {
        op: &'static str,
        lhs: String,
        rhs: String,
    },
    /// The device is not available in this build or on this machine.
    #[error("`{op}`: device {device} is not available ({reason})")]
    DeviceUnavailable {
        op: &'static str,
        device: String,
        reason: &'static str,
    },

    // ---- arguments and autograd ------------------------------------------------------------------
    /// Any other bad argument.
    #[error("invalid argument to `{op}`: {message}")]
    InvalidArgument { op: &'static str, message: String },
    /// `backward` on a tensor that does not require grad, or on a non-scalar without a gradient.
    #[error("`{op}`: {message}")]
    Autograd { op: &'static str, message: String },

    // ---- the engine ----------------------------------------------------------------------------
    /// An engine error: a kernel that failed asynchronously (surfaced at this sync), out of
    /// memory, a released tensor, deadlock, shutdown.
    #[error(transparent)]
    Vm(#[from] eddy_vm::Error),
}

impl Error {
    /// The name of the op the error concerns, if any.
    pub fn op(&self) -> Option<&str> {
        match self {
            Error::ShapeMismatch { op, .. }
            | Error::ElementCountMismatch { op, .. }
            | Error::InvalidDim { op, .. }
            | Error::IndexOutOfRange { op, .. }
            | Error::EmptyTensor { op }
            | Error::OverlappingWrite { op }
            | Error::DTypeMismatch { op, .. }
            | Error::UnsupportedDType { op, .. }
            | Error::DeviceMismatch { op, .. }
            | Error::DeviceUnavailable { op, .. }
            | Error::InvalidArgument { op, .. }
            | Error::Autograd { op, .. } => Some(op),
            Error::ShapeOverflow { .. } => None,
            Error::Vm(e) => e.op(),
        }
    }

    /// An `InvalidArgument` error.
    pub fn invalid(op: &'static str, message: impl Into<String>) -> Self {
        Error::InvalidArgument {
            op,
            message: message.into(),
        }
    }
}
