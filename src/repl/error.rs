//! The typed error of a REPL line.

use super::{MAX_DEPTH, MAX_RANK};
use std::ops::RangeInclusive;
use std::path::PathBuf;

/// A `Result` whose error is [`ReplError`].
pub(super) type R<T> = Result<T, ReplError>;

/// Why a line failed. The REPL stays usable after any of them; `Display` is the message
/// `eddy repl` prints after `error: `.
///
/// # Examples
///
/// ```
/// use eddy::repl::{ReplError, Session};
/// let mut s = Session::new(eddy::Vm::builder().build()?);
/// let e = s.eval_line("zeros(2).frobnicate()").unwrap_err();
/// assert!(matches!(&e, ReplError::UnknownMethod { name, .. } if name == "frobnicate"));
/// assert_eq!(e.to_string(), "a tensor has no method `frobnicate` (try :help)");
/// let e = s.eval_line("zeros(2).reshape(3)").unwrap_err();
/// assert!(matches!(e, ReplError::Tensor(eddy::Error::ElementCountMismatch { .. })));
/// # Ok::<(), eddy::vm::Error>(())
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplError {
    /// A character or number the lexer cannot read.
    #[error("{message} at column {col}")]
    Lex {
        /// Where it starts, from 1 (in bytes).
        col: usize,
        /// What is wrong there.
        message: String,
    },
    /// A line that does not parse.
    #[error("{message}")]
    Parse {
        /// What was expected or found.
        message: String,
    },
    /// An expression, or a list, nested deeper than the REPL allows.
    #[error("expression nested too deeply (more than {MAX_DEPTH} levels)")]
    TooDeep,
    /// A name that is neither bound nor a constant or dtype.
    #[error("unknown name `{name}`")]
    UnknownName {
        /// The name.
        name: String,
    },
    /// A call of a function the REPL does not have.
    #[error("unknown function `{name}` (try :help)")]
    UnknownFunction {
        /// The function's name.
        name: String,
    },
    /// A method the receiver does not have.
    #[error("{on} has no method `{name}`{}", try_help(on))]
    UnknownMethod {
        /// The method's name.
        name: String,
        /// The receiver's kind: "a tensor", "a number", …
        on: &'static str,
    },
    /// An attribute the receiver does not have.
    #[error("{on} has no attribute `{name}`")]
    UnknownAttribute {
        /// The attribute's name.
        name: String,
        /// The receiver's kind: "a tensor", "a number", …
        on: &'static str,
    },
    /// A `:command` the REPL does not have.
    #[error("unknown command `:{command}` (try :help)")]
    UnknownCommand {
        /// The command as typed, without its colon.
        command: String,
    },
    /// A call with too few or too many positional arguments.
    #[error("{name}: expected {} arguments, got {got}", count(expected))]
    Arity {
        /// The function or method.
        name: &'static str,
        /// How many it takes.
        expected: RangeInclusive<usize>,
        /// How many it was given.
        got: usize,
    },
    /// An argument of the wrong kind or value, or a named one the call does not take.
    #[error("{name}: {message}")]
    Argument {
        /// The function, method or construct (`index`, `operator`) that refused it.
        name: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// A value of the wrong kind where no call names it (`-"a"`, `1 @ 2`).
    #[error("{message}")]
    Type {
        /// What is wrong.
        message: String,
    },
    /// An index past the end of a list or of a tensor's dim.
    #[error("index {index} out of range for {}", indexed(*dim, *size))]
    IndexOutOfRange {
        /// The index, counted from the start.
        index: i64,
        /// The tensor's dim it indexes; `None` for a list.
        dim: Option<usize>,
        /// The list's length or the dim's size.
        size: i64,
    },
    /// A tensor of more dims than the REPL allows.
    #[error("{name}: {rank} dims, more than the {MAX_RANK} a tensor may have")]
    TooManyDims {
        /// The function or method that would make it.
        name: &'static str,
        /// Its rank.
        rank: usize,
    },
    /// The tensor library's typed error, from an op call or a sync point. It names no place
    /// of a call: the place would be in the REPL's own source, not in what the user typed.
    #[error(transparent)]
    Tensor(crate::Error),
    /// An asynchronous engine error that `:sync` collected.
    #[error("asynchronous error: {0}")]
    Async(#[source] eddy_vm::Error),
    /// A file that could not be written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl From<crate::Error> for ReplError {
    fn from(e: crate::Error) -> ReplError {
        ReplError::Tensor(e.without_caller())
    }
}

impl ReplError {
    /// An [`Argument`](Self::Argument) error of `name`.
    pub(super) fn arg(name: &'static str, message: impl Into<String>) -> ReplError {
        ReplError::Argument {
            name,
            message: message.into(),
        }
    }

    /// A [`Parse`](Self::Parse) error.
    pub(super) fn parse(message: impl Into<String>) -> ReplError {
        ReplError::Parse {
            message: message.into(),
        }
    }

    /// A [`Type`](Self::Type) error.
    pub(super) fn type_(message: impl Into<String>) -> ReplError {
        ReplError::Type {
            message: message.into(),
        }
    }
}

/// `:help` lists a tensor's methods; it has nothing for other values.
fn try_help(on: &str) -> &'static str {
    if on == "a tensor" { " (try :help)" } else { "" }
}

/// "2" or "1 to 3".
fn count(r: &RangeInclusive<usize>) -> String {
    if r.start() == r.end() {
        r.start().to_string()
    } else {
        format!("{} to {}", r.start(), r.end())
    }
}

/// "a list of 2" or "dim 0 of size 3".
fn indexed(dim: Option<usize>, size: i64) -> String {
    match dim {
        None => format!("a list of {size}"),
        Some(d) => format!("dim {d} of size {size}"),
    }
}
