//! The engine's one error type.
//!
//! Errors are grouped by where they arise: at submission (synchronous), inside an instruction
//! (asynchronous, surfaced at the next sync), and from waiting or shutting down. Every variant
//! that concerns an instruction carries the op's name. `OutOfMemory` is the only retriable one.

use std::fmt;

/// A `Result` whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the engine.
///
/// The type is `Clone` so that one root failure can poison many outputs and be returned by every
/// sync point that observes it.
///
/// # Examples
///
/// ```
/// use eddy_vm::Error;
/// let e = Error::KernelFailed { op: "div".into(), instr_id: 7, message: "division by zero".into() };
/// assert_eq!(e.op(), Some("div"));
/// assert!(e.to_string().contains("div"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // ---- asynchronous failures of one instruction -------------------------------------------
    /// A kernel returned an error.
    #[error("kernel `{op}` (instruction {instr_id}) failed: {message}")]
    KernelFailed {
        /// The op's name.
        op: String,
        /// The id of the instruction that ran the kernel.
        instr_id: u64,
        /// What went wrong, as the kernel reported it.
        message: String,
    },
    /// A kernel panicked; the panic was caught on the thread that ran it.
    #[error("kernel `{op}` (instruction {instr_id}) panicked: {message}")]
    KernelPanic {
        /// The op's name.
        op: String,
        /// The id of the instruction that ran the kernel.
        instr_id: u64,
        /// The panic's message (its payload, if a string).
        message: String,
    },
    /// `Prepare` could not allocate an output even after waiting for running work, shrinking
    /// the caches and retrying.
    #[error(
        "out of memory in `{op}`: tried to allocate {requested} bytes with {in_use} bytes in use, \
         {cached} bytes cached, capacity {}",
        fmt_capacity(*capacity)
    )]
    OutOfMemory {
        /// The op whose output could not be allocated.
        op: String,
        /// Bytes asked for.
        requested: usize,
        /// Bytes the allocator had handed out at the time.
        in_use: usize,
        /// Bytes the allocator held but had free at the time.
        cached: usize,
        /// The backend's capacity in bytes; `None` if unlimited.
        capacity: Option<usize>,
    },

    // ---- synchronous failures at submission ------------------------------------------------
    /// A blob was used after it was released.
    #[error("`{op}`: blob {id} was already released")]
    TensorReleased {
        /// The op that was given the blob.
        op: String,
        /// The blob's id.
        id: u64,
    },
    /// A blob belongs to another engine.
    #[error("`{op}`: blob {id} belongs to another engine")]
    ForeignBlob {
        /// The op that was given the blob.
        op: String,
        /// The blob's id.
        id: u64,
    },
    /// A stream id that the engine does not know.
    #[error("`{op}`: unknown stream {stream}")]
    UnknownStream {
        /// The op that was given the stream.
        op: String,
        /// The stream's index, as given.
        stream: usize,
    },
    /// A configuration value or argument is invalid.
    #[error("invalid argument to `{op}`: {message}")]
    InvalidArgument {
        /// The op or engine call that reported it.
        op: String,
        /// What is wrong.
        message: String,
    },

    /// A device the engine was asked for cannot be used: the build lacks its backend, the
    /// machine lacks its driver library or the device, or the driver refused it.
    #[error("`{op}`: device {device} is not available ({reason})")]
    DeviceUnavailable {
        /// The call that asked for it.
        op: String,
        /// The device, as `cuda:0`.
        device: String,
        /// Why it is not available.
        reason: String,
    },

    // ---- waiting and lifecycle --------------------------------------------------------------
    /// A wait saw no instruction released for a whole timeout.
    #[error(
        "deadlock: no instruction was released for {timeout_ms} ms while waiting; live instructions:\n{dump}"
    )]
    Deadlock {
        /// The engine's deadlock timeout, in milliseconds.
        timeout_ms: u64,
        /// A dump of the live instructions when the wait gave up.
        dump: String,
    },
    /// A blocking engine call was made from code that the engine itself runs (a kernel or a
    /// callback); it would wait for itself.
    #[error("`{op}` called from inside the engine (a kernel or callback) would deadlock")]
    ReentrantWait {
        /// The blocking call that was made.
        op: String,
    },
    /// An engine thread (not a kernel) failed; the engine accepts no more work.
    #[error("the engine failed: {cause}")]
    EngineFailed {
        /// The message of the panic that failed the engine thread.
        cause: String,
    },
    /// The engine was shut down.
    #[error("the engine is shut down")]
    EngineShutDown,
    /// `shutdown_timeout` gave up with instructions still live.
    #[error("shutdown timed out with {pending} instructions still live")]
    ShutdownTimeout {
        /// Instructions received and not yet released when it gave up.
        pending: u64,
    },
}

fn fmt_capacity(capacity: Option<usize>) -> String {
    capacity.map_or_else(|| "unlimited".to_string(), |c| format!("{c} bytes"))
}

impl Error {
    /// The name of the op this error concerns, if any.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::Error;
    /// assert_eq!(Error::ReentrantWait { op: "sync".into() }.op(), Some("sync"));
    /// assert_eq!(Error::EngineShutDown.op(), None);
    /// ```
    pub fn op(&self) -> Option<&str> {
        match self {
            Error::KernelFailed { op, .. }
            | Error::KernelPanic { op, .. }
            | Error::OutOfMemory { op, .. }
            | Error::TensorReleased { op, .. }
            | Error::ForeignBlob { op, .. }
            | Error::UnknownStream { op, .. }
            | Error::InvalidArgument { op, .. }
            | Error::DeviceUnavailable { op, .. }
            | Error::ReentrantWait { op } => Some(op),
            Error::Deadlock { .. }
            | Error::EngineShutDown
            | Error::EngineFailed { .. }
            | Error::ShutdownTimeout { .. } => None,
        }
    }

    /// Whether this is an out-of-memory error.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::Error;
    /// let e = Error::OutOfMemory {
    ///     op: "matmul".into(), requested: 1 << 20, in_use: 0, cached: 0, capacity: Some(1024),
    /// };
    /// assert!(e.is_oom());
    /// assert!(!Error::EngineShutDown.is_oom());
    /// ```
    pub fn is_oom(&self) -> bool {
        matches!(self, Error::OutOfMemory { .. })
    }

    /// Builds a [`Error::KernelFailed`] for `op` from any displayable message. Kernels use this
    /// to report failures; the engine fills in the instruction id.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::Error;
    /// let e = Error::kernel("div", "division by zero");
    /// assert_eq!(e.op(), Some("div"));
    /// assert!(matches!(e, Error::KernelFailed { instr_id: 0, .. }));
    /// assert!(e.to_string().ends_with("failed: division by zero"));
    /// ```
    pub fn kernel(op: &str, message: impl fmt::Display) -> Self {
        Error::KernelFailed {
            op: op.to_string(),
            instr_id: 0,
            message: message.to_string(),
        }
    }

    pub(crate) fn with_instr_id(mut self, id: u64) -> Self {
        if let Error::KernelFailed { instr_id, .. } | Error::KernelPanic { instr_id, .. } =
            &mut self
            && *instr_id == 0
        {
            *instr_id = id;
        }
        self
    }
}

/// Turns a panic payload into a message.
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_string()
    }
}
