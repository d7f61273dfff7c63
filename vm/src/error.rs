//! The engine's one error type.
//!
//! Errors are grouped by where they arise: at submission (synchronous), inside an instruction
//! (asynchronous, surfaced at the next sync), and from waiting or shutting down. Every variant
//! that concerns an instruction carries the op's name and, as a [`Caller`], the place in the
//! user's code that called it. `OutOfMemory` is the only retriable one.

use std::fmt;
use std::panic::Location;

/// Where the user's code called the op an error concerns: the file, line and column of the
/// call, as `#[track_caller]` reports it, or unknown.
///
/// The engine's entry points (`Vm::run_op` and the tensor API above it) are `#[track_caller]`:
/// the instruction remembers the call, so a kernel that fails later, on another thread, still
/// names the line that launched it when its error surfaces at a sync.
///
/// Errors compare by what went wrong, not by where: two `Caller`s are always equal, so an
/// error built in a test compares equal to the one a call returned.
///
/// # Examples
///
/// ```
/// use eddy_vm::error::Caller;
/// let here = Caller::here();
/// assert_eq!(here.location().map(|l| l.file()), Some(file!()));
/// assert_eq!(here.to_string(), format!(" (called at {})", here.location().unwrap()));
/// assert_eq!(Caller::UNKNOWN.to_string(), "");
/// assert_eq!(here, Caller::UNKNOWN); // equal: where is not what
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Caller(Option<&'static Location<'static>>);

impl Caller {
    /// No known place.
    pub const UNKNOWN: Caller = Caller(None);

    /// The caller of the (`#[track_caller]`) function that calls this.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::error::Caller;
    /// #[track_caller]
    /// fn op() -> Caller { Caller::here() }
    /// assert_eq!(op().location().unwrap().line(), line!());
    /// ```
    #[track_caller]
    #[inline]
    pub fn here() -> Caller {
        Caller(Some(Location::caller()))
    }

    /// A known place.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::error::Caller;
    /// let at = Caller::at(std::panic::Location::caller());
    /// assert!(at.location().is_some());
    /// ```
    pub const fn at(location: &'static Location<'static>) -> Caller {
        Caller(Some(location))
    }

    /// The place, if known.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::error::Caller;
    /// assert!(Caller::UNKNOWN.location().is_none());
    /// ```
    pub fn location(self) -> Option<&'static Location<'static>> {
        self.0
    }

    /// Whether the place is known.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::error::Caller;
    /// assert!(Caller::here().is_known() && !Caller::UNKNOWN.is_known());
    /// ```
    pub fn is_known(self) -> bool {
        self.0.is_some()
    }
}

/// Always equal: see the type's docs.
impl PartialEq for Caller {
    fn eq(&self, _: &Caller) -> bool {
        true
    }
}
impl Eq for Caller {}

/// ` (called at FILE:LINE:COLUMN)`, with its leading space, or nothing when unknown: the
/// suffix of an error's message.
impl fmt::Display for Caller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(l) => write!(f, " (called at {l})"),
            None => Ok(()),
        }
    }
}

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
/// use eddy_vm::error::Caller;
/// let e = Error::KernelFailed {
///     op: "div".into(), instr_id: 7, message: "division by zero".into(), at: Caller::UNKNOWN,
/// };
/// assert_eq!(e.op(), Some("div"));
/// assert!(e.to_string().contains("div"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // ---- asynchronous failures of one instruction -------------------------------------------
    /// A kernel returned an error.
    #[error("kernel `{op}` (instruction {instr_id}) failed: {message}{at}")]
    KernelFailed {
        /// The op's name.
        op: String,
        /// The id of the instruction that ran the kernel.
        instr_id: u64,
        /// What went wrong, as the kernel reported it.
        message: String,
        /// Where the user's code called the op.
        at: Caller,
    },
    /// A kernel panicked; the panic was caught on the thread that ran it.
    #[error("kernel `{op}` (instruction {instr_id}) panicked: {message}{at}")]
    KernelPanic {
        /// The op's name.
        op: String,
        /// The id of the instruction that ran the kernel.
        instr_id: u64,
        /// The panic's message (its payload, if a string).
        message: String,
        /// Where the user's code called the op.
        at: Caller,
    },
    /// The device faulted (an illegal address, a trap) while running queued work. Launches
    /// are asynchronous, so the fault surfaces at a later call: this names the device's first
    /// instruction not yet confirmed complete when the fault was seen, which is the earliest
    /// that can have caused it. The device's later work fails with the same error.
    #[error(
        "`{op}` on {device}: the device faulted ({message}); the first instruction not \
         confirmed complete: {first_unconfirmed}{at}"
    )]
    DeviceFault {
        /// The op that saw the fault.
        op: String,
        /// The device, as `cuda:0`.
        device: String,
        /// The driver's report.
        message: String,
        /// The earliest instruction that can have caused it, as `name (instruction id)`.
        first_unconfirmed: String,
        /// Where the user's code called the op.
        at: Caller,
    },
    /// `Prepare` could not allocate an output even after waiting for running work, shrinking
    /// the caches and retrying.
    #[error(
        "out of memory in `{op}`: tried to allocate {requested} bytes with {in_use} bytes in use, \
         {cached} bytes cached, capacity {}{at}",
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
        /// Where the user's code called the op.
        at: Caller,
    },

    // ---- synchronous failures at submission ------------------------------------------------
    /// A blob was used after it was released.
    #[error("`{op}`: blob {id} was already released{at}")]
    TensorReleased {
        /// The op that was given the blob.
        op: String,
        /// The blob's id.
        id: u64,
        /// Where the user's code called the op.
        at: Caller,
    },
    /// A blob belongs to another engine.
    #[error("`{op}`: blob {id} belongs to another engine{at}")]
    ForeignBlob {
        /// The op that was given the blob.
        op: String,
        /// The blob's id.
        id: u64,
        /// Where the user's code called the op.
        at: Caller,
    },
    /// A stream id that the engine does not know.
    #[error("`{op}`: unknown stream {stream}{at}")]
    UnknownStream {
        /// The op that was given the stream.
        op: String,
        /// The stream's index, as given.
        stream: usize,
        /// Where the user's code called the op.
        at: Caller,
    },
    /// A configuration value or argument is invalid.
    #[error("invalid argument to `{op}`: {message}{at}")]
    InvalidArgument {
        /// The op or engine call that reported it.
        op: String,
        /// What is wrong.
        message: String,
        /// Where the user's code called the op.
        at: Caller,
    },

    /// A device the engine was asked for cannot be used: the build lacks its backend, the
    /// machine lacks its driver library or the device, or the driver refused it.
    #[error("`{op}`: device {device} is not available ({reason}){at}")]
    DeviceUnavailable {
        /// The call that asked for it.
        op: String,
        /// The device, as `cuda:0`.
        device: String,
        /// Why it is not available.
        reason: String,
        /// Where the user's code called the op.
        at: Caller,
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
    #[error("`{op}` called from inside the engine (a kernel or callback) would deadlock{at}")]
    ReentrantWait {
        /// The blocking call that was made.
        op: String,
        /// Where the user's code called the op.
        at: Caller,
    },
    /// An engine thread (not a kernel) failed; the engine accepts no more work.
    #[error("the engine failed: {cause}")]
    EngineFailed {
        /// The message of the panic that failed the engine thread.
        cause: String,
    },
    /// The engine could not start one of its threads (the operating system refused it: too
    /// many threads, no memory for a stack).
    #[error("cannot start the engine's thread {thread}: {message}")]
    ThreadSpawn {
        /// The thread's name (`eddy-scheduler`, `eddy-worker-0`, `eddy-actors-1`, …).
        thread: String,
        /// The operating system's message.
        message: String,
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

impl Error {
    /// A `ThreadSpawn` for thread `thread`, from the operating system's error.
    pub(crate) fn spawn(thread: &str, e: &std::io::Error) -> Error {
        Error::ThreadSpawn {
            thread: thread.into(),
            message: e.to_string(),
        }
    }
}

/// The `at` field of an error's variant, by reference or mutable reference as `$e` is.
macro_rules! caller_field {
    ($e:expr) => {
        match $e {
            Error::KernelFailed { at, .. }
            | Error::KernelPanic { at, .. }
            | Error::OutOfMemory { at, .. }
            | Error::TensorReleased { at, .. }
            | Error::ForeignBlob { at, .. }
            | Error::UnknownStream { at, .. }
            | Error::InvalidArgument { at, .. }
            | Error::DeviceUnavailable { at, .. }
            | Error::DeviceFault { at, .. }
            | Error::ReentrantWait { at, .. } => Some(at),
            Error::Deadlock { .. }
            | Error::EngineShutDown
            | Error::EngineFailed { .. }
            | Error::ThreadSpawn { .. }
            | Error::ShutdownTimeout { .. } => None,
        }
    };
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
    /// use eddy_vm::error::Caller;
    /// let e = Error::ReentrantWait { op: "sync".into(), at: Caller::UNKNOWN };
    /// assert_eq!(e.op(), Some("sync"));
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
            | Error::DeviceFault { op, .. }
            | Error::ReentrantWait { op, .. } => Some(op),
            Error::Deadlock { .. }
            | Error::EngineShutDown
            | Error::EngineFailed { .. }
            | Error::ThreadSpawn { .. }
            | Error::ShutdownTimeout { .. } => None,
        }
    }

    /// Where the user's code called the op this error concerns, if known: for an error that
    /// surfaced at a sync, the call that launched the failing op.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Error, error::Caller};
    /// let e = Error::kernel("gather", "index 9 out of range").at(Caller::here());
    /// assert_eq!(e.caller().unwrap().file(), file!());
    /// assert!(Error::EngineShutDown.caller().is_none());
    /// ```
    pub fn caller(&self) -> Option<&'static Location<'static>> {
        self.at_ref().and_then(|c| c.location())
    }

    /// This error with `caller` as the place of the call, unless it names one already (the
    /// place nearest the failure wins: the first to be set is the user's line when every
    /// function in between is `#[track_caller]`).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Error, error::Caller};
    /// let first = Caller::here();
    /// let e = Error::kernel("div", "division by zero").at(first).at(Caller::here());
    /// assert_eq!(e.caller(), first.location());
    /// ```
    pub fn at(mut self, caller: Caller) -> Self {
        if let Some(at) = self.at_mut()
            && !at.is_known()
        {
            *at = caller;
        }
        self
    }

    /// This error without the place of its call: for tools that show errors of code the user
    /// did not write in Rust (a REPL), where the place would name the tool's own source.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Error, error::Caller};
    /// let e = Error::kernel("div", "division by zero").at(Caller::here()).without_caller();
    /// assert!(e.caller().is_none());
    /// assert!(!e.to_string().contains("called at"));
    /// ```
    pub fn without_caller(mut self) -> Self {
        if let Some(at) = self.at_mut() {
            *at = Caller::UNKNOWN;
        }
        self
    }

    fn at_ref(&self) -> Option<&Caller> {
        caller_field!(self)
    }

    fn at_mut(&mut self) -> Option<&mut Caller> {
        caller_field!(self)
    }

    /// Whether this is an out-of-memory error.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::Error;
    /// let e = Error::OutOfMemory {
    ///     op: "matmul".into(), requested: 1 << 20, in_use: 0, cached: 0, capacity: Some(1024),
    ///     at: eddy_vm::error::Caller::UNKNOWN,
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
            at: Caller::UNKNOWN,
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
