//! The tensor-level error type: every op checks its arguments on the caller's thread and returns
//! one of these before anything is enqueued; engine errors (asynchronous kernel failures, OOM,
//! deadlock) arrive wrapped in [`Error::Vm`].

use crate::DType;
pub use eddy_vm::error::Caller;

/// A `Result` whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong in an op call or at a sync point.
///
/// # Examples
///
/// ```
/// use eddy_ops::{Caller, Error, DType};
/// let e = Error::DTypeMismatch {
///     op: "matmul", lhs: DType::F32, rhs: DType::F64, at: Caller::UNKNOWN,
/// };
/// assert_eq!(e.to_string(), "dtype mismatch in `matmul`, lhs: f32, rhs: f64");
/// assert_eq!(e.op(), Some("matmul"));
/// // Made by an op, it names the line of the call: see `Error::caller`.
/// let e = eddy_ops::norm_dim("sum", 3, 2).unwrap_err();
/// assert_eq!(e.caller().unwrap().line(), line!() - 1);
/// assert!(e.to_string().ends_with(&format!("(called at {}:{}:9)", file!(), line!() - 2)));
/// ```
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // ---- shapes ------------------------------------------------------------------------------
    /// The operands' shapes do not fit (broadcast, matmul inner dims, cat, …).
    #[error("shape mismatch in `{op}`, lhs: {lhs:?}, rhs: {rhs:?}{at}")]
    ShapeMismatch {
        /// The op's name.
        op: &'static str,
        /// The first shape compared, usually the first operand's.
        lhs: Vec<usize>,
        /// The second shape compared: usually the other operand's, or the shape to fit.
        rhs: Vec<usize>,
        /// Where the user's code called the op.
        at: Caller,
    },
    /// The element counts of a reshape differ.
    #[error(
        "`{op}`: cannot view {from:?} ({} elements) as {to:?}{at}",
        crate::numel_of(from)
    )]
    ElementCountMismatch {
        /// The op's name.
        op: &'static str,
        /// The shape being viewed (for `from_vec`, the data's length).
        from: Vec<usize>,
        /// The shape asked for.
        to: Vec<usize>,
        /// Where the user's code called the op.
        at: Caller,
    },
    /// A dim is out of range for the tensor's rank.
    #[error("`{op}`: dim {dim} out of range for a tensor of rank {rank}{at}")]
    InvalidDim {
        /// The op's name.
        op: &'static str,
        /// The dim as given (negative counts from the end).
        dim: isize,
        /// The tensor's number of dims.
        rank: usize,
        /// Where the user's code called the op.
        at: Caller,
    },
    /// The element count or byte size overflows (F2); the allocator was not asked.
    #[error("shape {shape:?} of {dtype} overflows the address space{at}")]
    ShapeOverflow {
        /// The shape whose element count or byte size overflows (for `cat`, the first input's).
        shape: Vec<usize>,
        /// The element type.
        dtype: DType,
        /// Where the user's code called the op.
        at: Caller,
    },
    /// An index is out of range.
    #[error("`{op}`: index {index} out of range for a dim of size {size}{at}")]
    IndexOutOfRange {
        /// The op's name.
        op: &'static str,
        /// The index as given (may be negative; for `narrow`, `start + len`).
        index: i64,
        /// The size of the dim it indexes.
        size: usize,
        /// Where the user's code called the op.
        at: Caller,
    },
    /// A reduction without identity (max, argmax, …) over an empty dim.
    #[error("`{op}` over an empty dim has no identity{at}")]
    EmptyTensor {
        /// The op's name.
        op: &'static str,
        /// Where the user's code called the op.
        at: Caller,
    },
    /// An in-place write into a view where several elements share memory (an expanded view).
    #[error("`{op}`: in-place write into a view whose elements overlap (an expanded view){at}")]
    OverlappingWrite {
        /// The op's name.
        op: &'static str,
        /// Where the user's code called the op.
        at: Caller,
    },

    // ---- dtypes and devices --------------------------------------------------------------------
    /// The operands' dtypes must be equal (or the result cannot be stored in place).
    #[error("dtype mismatch in `{op}`, lhs: {lhs}, rhs: {rhs}{at}")]
    DTypeMismatch {
        /// The op's name.
        op: &'static str,
        /// The first dtype compared, usually the first operand's (an in-place op's destination).
        lhs: DType,
        /// The second dtype compared: usually the other operand's, or the dtype that was required.
        rhs: DType,
        /// Where the user's code called the op.
        at: Caller,
    },
    /// The op does not support this dtype.
    #[error("`{op}` does not support dtype {dtype}{at}")]
    UnsupportedDType {
        /// The op's name.
        op: &'static str,
        /// The dtype it was given.
        dtype: DType,
        /// Where the user's code called the op.
        at: Caller,
    },
    /// The operands live on different devices or engines.
    #[error(
        "device mismatch in `{op}`: expected all tensors on the same device and engine, found {lhs} and {rhs}{at}"
    )]
    DeviceMismatch {
        /// The op's name.
        op: &'static str,
        /// The first tensor's device and engine, in words.
        lhs: String,
        /// The other tensor's device and engine, in words.
        rhs: String,
        /// Where the user's code called the op.
        at: Caller,
    },
    /// The device is not available in this build or on this machine.
    #[error("`{op}`: device {device} is not available ({reason}){at}")]
    DeviceUnavailable {
        /// The op's name.
        op: &'static str,
        /// The device asked for, in its `Debug` form.
        device: String,
        /// Why it is not available.
        reason: &'static str,
        /// Where the user's code called the op.
        at: Caller,
    },

    /// The op has no kernel for the operands' device yet. Eddy never copies to another device
    /// behind the caller's back: move the operands with `to_device` if that is what you want.
    #[error("`{op}` has no kernel for device {device}{at}")]
    Unsupported {
        /// The op's name.
        op: &'static str,
        /// The operands' device.
        device: eddy_vm::Device,
        /// Where the user's code called the op.
        at: Caller,
    },

    // ---- arguments and autograd ------------------------------------------------------------------
    /// Any other bad argument.
    #[error("invalid argument to `{op}`: {message}{at}")]
    InvalidArgument {
        /// The op's name.
        op: &'static str,
        /// What is wrong with the argument.
        message: String,
        /// Where the user's code called the op.
        at: Caller,
    },
    /// `backward` on a tensor that does not require grad, or on a non-scalar without a gradient.
    #[error("`{op}`: {message}{at}")]
    Autograd {
        /// The op's name.
        op: &'static str,
        /// What is wrong.
        message: String,
        /// Where the user's code called the op.
        at: Caller,
    },

    /// Reading or writing a file failed, or its contents are not in the format expected
    /// (`safetensors::load`, `nn::load`).
    #[error("`{op}`: {path}: {message}{at}")]
    Io {
        /// The call's name.
        op: &'static str,
        /// The file.
        path: String,
        /// What went wrong: the operating system's message or the format's complaint.
        message: String,
        /// Where the user's code called the op.
        at: Caller,
    },

    // ---- the global view -------------------------------------------------------------------
    /// A global op whose inputs no SBP signature of the op takes (or an op without global
    /// rules): nothing ran.
    #[error("`{op}` has no SBP rule for inputs {inputs} on {placement}{at}")]
    NoSbpRule {
        /// The op's name.
        op: String,
        /// The placement, as `cpu:[0, 1]`.
        placement: String,
        /// The inputs' SBPs, as `[S(0), P(sum)]`.
        inputs: String,
        /// Where the user's code called the op.
        at: Caller,
    },
    /// The processes of a world reached a collective with different calls (a branch on the
    /// rank around one): found by comparing every process's fingerprint of it before any ran
    /// it, and reported by every process.
    #[error(
        "`{op}`: the processes diverged at collective #{seq}: its {field} is {mine} here \
         (process {rank}) and {theirs} in process {other}, called at {there}{at}",
        mine = .values.mine,
        theirs = .values.theirs,
        there = .values.there
    )]
    Diverged {
        /// The collective this process called.
        op: &'static str,
        /// Its sequence number in this process (from 0).
        seq: u64,
        /// The first field that differs: `sequence number`, `collective`, `dtype`, `shape`
        /// or `call site`.
        field: &'static str,
        /// This process's rank.
        rank: usize,
        /// The first process whose call differs.
        other: usize,
        /// The two values of the field, and where the other process called.
        values: Box<Divergence>,
        /// Where the user's code called this one.
        at: Caller,
    },
    /// A collective waited longer than the world's timeout for the other processes (one stuck
    /// in its own work, stopped or gone). The world accepts no further collective.
    #[error(
        "`{op}`: collective #{seq} waited {seconds} s for the other processes; this \
         process's last collectives:\n{flight}{at}"
    )]
    CollectiveTimeout {
        /// The collective.
        op: &'static str,
        /// Its sequence number in this process.
        seq: u64,
        /// The timeout, in seconds.
        seconds: f64,
        /// The flight record: one line per recent collective (sequence number, kind, bytes,
        /// state, caller).
        flight: String,
        /// Where the user's code called it.
        at: Caller,
    },
    /// The operands of an op live on different placements, or one is global and one local.
    #[error("placement mismatch in `{op}`, lhs: {lhs}, rhs: {rhs}{at}")]
    PlacementMismatch {
        /// The op's name.
        op: &'static str,
        /// The first operand's placement and SBP (or its device, for a local tensor).
        lhs: String,
        /// The other operand's.
        rhs: String,
        /// Where the user's code called the op.
        at: Caller,
    },

    // ---- the engine ----------------------------------------------------------------------------
    /// An engine error: a kernel that failed asynchronously (surfaced at this sync), out of
    /// memory, a released tensor, deadlock, shutdown.
    #[error(transparent)]
    Vm(#[from] eddy_vm::Error),
}

/// The `at` field of an error's variant, by reference or mutable reference as `$e` is; `$vm`
/// for an engine error.
macro_rules! caller_field {
    ($e:expr, $vm:expr) => {
        match $e {
            Error::ShapeMismatch { at, .. }
            | Error::ElementCountMismatch { at, .. }
            | Error::InvalidDim { at, .. }
            | Error::ShapeOverflow { at, .. }
            | Error::IndexOutOfRange { at, .. }
            | Error::EmptyTensor { at, .. }
            | Error::OverlappingWrite { at, .. }
            | Error::DTypeMismatch { at, .. }
            | Error::UnsupportedDType { at, .. }
            | Error::DeviceMismatch { at, .. }
            | Error::DeviceUnavailable { at, .. }
            | Error::Unsupported { at, .. }
            | Error::InvalidArgument { at, .. }
            | Error::Autograd { at, .. }
            | Error::Io { at, .. }
            | Error::NoSbpRule { at, .. }
            | Error::Diverged { at, .. }
            | Error::CollectiveTimeout { at, .. }
            | Error::PlacementMismatch { at, .. } => at,
            Error::Vm(_) => $vm,
        }
    };
}

/// What two processes' calls of one collective differ in ([`Error::Diverged`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Divergence {
    /// This process's value of the field.
    pub mine: String,
    /// The other process's value of it.
    pub theirs: String,
    /// Where the other process called its collective, as `file:line:column`.
    pub there: String,
}

impl Error {
    /// The name of the op the error concerns, if any.
    pub fn op(&self) -> Option<&str> {
        match self {
            Error::ShapeMismatch { op, .. }
            | Error::ElementCountMismatch { op, .. }
            | Error::InvalidDim { op, .. }
            | Error::IndexOutOfRange { op, .. }
            | Error::EmptyTensor { op, .. }
            | Error::OverlappingWrite { op, .. }
            | Error::DTypeMismatch { op, .. }
            | Error::UnsupportedDType { op, .. }
            | Error::DeviceMismatch { op, .. }
            | Error::DeviceUnavailable { op, .. }
            | Error::Unsupported { op, .. }
            | Error::InvalidArgument { op, .. }
            | Error::Autograd { op, .. }
            | Error::Io { op, .. }
            | Error::Diverged { op, .. }
            | Error::CollectiveTimeout { op, .. }
            | Error::PlacementMismatch { op, .. } => Some(op),
            Error::NoSbpRule { op, .. } => Some(op),
            Error::ShapeOverflow { .. } => None,
            Error::Vm(e) => e.op(),
        }
    }

    /// An `InvalidArgument` error, naming the caller of the (`#[track_caller]`) function
    /// that builds it.
    ///
    /// # Examples
    ///
    /// ```
    /// let e = eddy_ops::Error::invalid("topk", "k = 5 > 3");
    /// assert_eq!(e.caller().unwrap().file(), file!());
    /// ```
    #[track_caller]
    #[cold]
    pub fn invalid(op: &'static str, message: impl Into<String>) -> Self {
        Error::InvalidArgument {
            op,
            message: message.into(),
            at: Caller::here(),
        }
    }

    /// Where the user's code called the op this error concerns, if known. Every op of the
    /// tensor API is `#[track_caller]`: an argument error names the line of the call, and a
    /// kernel error that surfaces at a later sync names the line of the call that launched
    /// the failing kernel, not the line of the sync.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::{Error, DType};
    /// let e = Error::invalid("topk", "k = 5 > 3");
    /// assert_eq!(e.caller().map(|l| l.line()), Some(line!() - 1));
    /// assert!(e.to_string().contains(&format!("(called at {}:", file!())));
    /// ```
    pub fn caller(&self) -> Option<&'static std::panic::Location<'static>> {
        match self {
            Error::Vm(e) => e.caller(),
            e => e.at_ref().location(),
        }
    }

    /// This error with `caller` as the place of the call, unless it names one already.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::{Caller, Error};
    /// let e = Error::invalid("topk", "k = 5 > 3");
    /// let first = e.caller();
    /// assert_eq!(e.at(Caller::here()).caller(), first);
    /// ```
    pub fn at(self, caller: Caller) -> Self {
        match self {
            Error::Vm(e) => Error::Vm(e.at(caller)),
            mut e => {
                let at = e.at_mut();
                if !at.is_known() {
                    *at = caller;
                }
                e
            }
        }
    }

    /// This error without the place of its call: for tools whose users do not write the Rust
    /// that calls the op (a REPL), where the place would name the tool's own source.
    ///
    /// # Examples
    ///
    /// ```
    /// let e = eddy_ops::Error::invalid("topk", "k = 5 > 3").without_caller();
    /// assert!(e.caller().is_none());
    /// assert_eq!(e.to_string(), "invalid argument to `topk`: k = 5 > 3");
    /// ```
    pub fn without_caller(self) -> Self {
        match self {
            Error::Vm(e) => Error::Vm(e.without_caller()),
            mut e => {
                *e.at_mut() = Caller::UNKNOWN;
                e
            }
        }
    }

    fn at_ref(&self) -> &Caller {
        caller_field!(self, &Caller::UNKNOWN)
    }

    fn at_mut(&mut self) -> &mut Caller {
        caller_field!(
            self,
            unreachable!("the engine's errors keep their own caller")
        )
    }
}
