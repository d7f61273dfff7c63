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
        /// The op's name.
        op: &'static str,
        /// The first shape compared, usually the first operand's.
        lhs: Vec<usize>,
        /// The second shape compared: usually the other operand's, or the shape to fit.
        rhs: Vec<usize>,
    },
    /// The element counts of a reshape differ.
    #[error(
        "`{op}`: cannot view {from:?} ({} elements) as {to:?}",
        crate::numel_of(from)
    )]
    ElementCountMismatch {
        /// The op's name.
        op: &'static str,
        /// The shape being viewed (for `from_vec`, the data's length).
        from: Vec<usize>,
        /// The shape asked for.
        to: Vec<usize>,
    },
    /// A dim is out of range for the tensor's rank.
    #[error("`{op}`: dim {dim} out of range for a tensor of rank {rank}")]
    InvalidDim {
        /// The op's name.
        op: &'static str,
        /// The dim as given (negative counts from the end).
        dim: isize,
        /// The tensor's number of dims.
        rank: usize,
    },
    /// The element count or byte size overflows (F2); the allocator was not asked.
    #[error("shape {shape:?} of {dtype} overflows the address space")]
    ShapeOverflow {
        /// The shape whose element count or byte size overflows (for `cat`, the first input's).
        shape: Vec<usize>,
        /// The element type.
        dtype: DType,
    },
    /// An index is out of range.
    #[error("`{op}`: index {index} out of range for a dim of size {size}")]
    IndexOutOfRange {
        /// The op's name.
        op: &'static str,
        /// The index as given (may be negative; for `narrow`, `start + len`).
        index: i64,
        /// The size of the dim it indexes.
        size: usize,
    },
    /// A reduction without identity (max, argmax, …) over an empty dim.
    #[error("`{op}` over an empty dim has no identity")]
    EmptyTensor {
        /// The op's name.
        op: &'static str,
    },
    /// An in-place write into a view where several elements share memory (an expanded view).
    #[error("`{op}`: in-place write into a view whose elements overlap (an expanded view)")]
    OverlappingWrite {
        /// The op's name.
        op: &'static str,
    },

    // ---- dtypes and devices --------------------------------------------------------------------
    /// The operands' dtypes must be equal (or the result cannot be stored in place).
    #[error("dtype mismatch in `{op}`, lhs: {lhs}, rhs: {rhs}")]
    DTypeMismatch {
        /// The op's name.
        op: &'static str,
        /// The first dtype compared, usually the first operand's (an in-place op's destination).
        lhs: DType,
        /// The second dtype compared: usually the other operand's, or the dtype that was required.
        rhs: DType,
    },
    /// The op does not support this dtype.
    #[error("`{op}` does not support dtype {dtype}")]
    UnsupportedDType {
        /// The op's name.
        op: &'static str,
        /// The dtype it was given.
        dtype: DType,
    },
    /// The operands live on different devices or engines.
    #[error(
        "device mismatch in `{op}`: expected all tensors on the same device and engine, found {lhs} and {rhs}"
    )]
    DeviceMismatch {
        /// The op's name.
        op: &'static str,
        /// The first tensor's device and engine, in words.
        lhs: String,
        /// The other tensor's device and engine, in words.
        rhs: String,
    },
    /// The device is not available in this build or on this machine.
    #[error("`{op}`: device {device} is not available ({reason})")]
    DeviceUnavailable {
        /// The op's name.
        op: &'static str,
        /// The device asked for, in its `Debug` form.
        device: String,
        /// Why it is not available.
        reason: &'static str,
    },

    /// The op has no kernel for the operands' device yet. Eddy never copies to another device
    /// behind the caller's back: move the operands with `to_device` if that is what you want.
    #[error("`{op}` has no kernel for device {device}")]
    Unsupported {
        /// The op's name.
        op: &'static str,
        /// The operands' device.
        device: eddy_vm::Device,
    },

    // ---- arguments and autograd ------------------------------------------------------------------
    /// Any other bad argument.
    #[error("invalid argument to `{op}`: {message}")]
    InvalidArgument {
        /// The op's name.
        op: &'static str,
        /// What is wrong with the argument.
        message: String,
    },
    /// `backward` on a tensor that does not require grad, or on a non-scalar without a gradient.
    #[error("`{op}`: {message}")]
    Autograd {
        /// The op's name.
        op: &'static str,
        /// What is wrong.
        message: String,
    },

    /// Reading or writing a file failed, or its contents are not in the format expected
    /// (`safetensors::load`, `nn::load`).
    #[error("`{op}`: {path}: {message}")]
    Io {
        /// The call's name.
        op: &'static str,
        /// The file.
        path: String,
        /// What went wrong: the operating system's message or the format's complaint.
        message: String,
    },

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
            | Error::Unsupported { op, .. }
            | Error::InvalidArgument { op, .. }
            | Error::Autograd { op, .. }
            | Error::Io { op, .. } => Some(op),
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
