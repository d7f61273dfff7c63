//! The interpreter behind `eddy repl`: tensor expressions in a small Python-like syntax, evaluated
//! eagerly on one engine.
//!
//! ```text
//! let a = randn(3, 4)
//! a.matmul(a.t()).relu().sum(1)
//! (a + 1) * 2 @ a.t()          # operators: + - * / ** @, comparisons == != < <= > >=
//! a[0, 1:3]                    # indexing: integers select, ranges narrow
//! :stats  :mem  :trace on|off|save FILE  :sync  :vars  :help  :quit
//! ```
//!
//! A line goes through the lexer (`lexer.rs`), the parser (`parser.rs`) and the evaluator
//! (`eval.rs`); the functions, methods and attributes it calls are the rows of one table
//! (`builtins/`), from which `:help` is written and which a test checks against the tensor API.
//! [`Session::eval_line`] returns the text to print, or a [`ReplError`] that leaves the session
//! usable.

mod arith;
mod builtins;
mod convert;
mod error;
mod eval;
mod lexer;
mod parser;
#[cfg(test)]
mod tests;

pub use error::ReplError;

use crate::plot::timeline_svg;
use crate::{DType, Tensor};
use convert::fits_i64;
use eddy_vm::Vm;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// The deepest an expression (or a list value) may nest. Parsing, evaluating, printing and
/// dropping one recurse once a level, so a line of 100000 `(` (or `1+1+…` of 100000 terms, a
/// left-nested tree) is refused with an error instead of overflowing the stack.
const MAX_DEPTH: usize = 256;

/// The most dims a tensor made in the REPL may have, as PyTorch's limit of 64: printing and
/// `tolist` recurse once a dim.
const MAX_RANK: usize = 64;

/// The text of `:help`: the syntax, then every function, method and attribute of the table,
/// then the commands.
///
/// # Examples
///
/// ```
/// let help = eddy::repl::help();
/// assert!(help.contains("matmul(a, b)") && help.contains("topk(k, dim=-1, largest=true, sorted=true)"));
/// assert!(help.contains(":trace on|off|save FILE"));
/// ```
pub fn help() -> String {
    builtins::help()
}

/// A value of the expression language.
///
/// # Examples
///
/// ```
/// use eddy::repl::Value;
/// assert_eq!(Value::Num(3.0, true).to_string(), "3");
/// assert_eq!(Value::Num(0.5, false).to_string(), "0.5");
/// assert_eq!(Value::Num(2f64.powi(63), true).to_string(), "9223372036854775808");
/// assert_eq!(Value::int(3).to_string(), "3"); // `Num(3.0, true)`
/// assert_eq!(Value::int((1 << 53) + 1).to_string(), "9007199254740993"); // `Int`, exact
/// let list = Value::List(vec![Value::Bool(true), Value::Str("hi".into()), Value::Unit]);
/// assert_eq!(list.to_string(), r#"[true, "hi", ]"#);
/// ```
#[derive(Clone, Debug)]
pub enum Value {
    /// A tensor.
    Tensor(Tensor),
    /// A number; `true` if it was written or computed as an integer.
    Num(f64, bool),
    /// An integer that `i64` holds but `f64` does not, exactly: beyond ±2^53 (smaller ones
    /// are `Num(_, true)`; see [`Value::int`]). Literals, integer arithmetic, `item()` and
    /// `tolist()` of `i64` tensors keep it exact, as Python's `int` does.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// A list.
    List(Vec<Value>),
    /// A dtype name.
    DType(DType),
    /// A string.
    Str(String),
    /// No value (`backward()`, `let`).
    Unit,
}

impl Value {
    /// The integer `i`: `Num(i as f64, true)` where `f64` holds it exactly, else `Int(i)`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::repl::Value;
    /// assert!(matches!(Value::int(-(1 << 53)), Value::Num(x, true) if x == -(2f64.powi(53))));
    /// assert!(matches!(Value::int(i64::MAX), Value::Int(i64::MAX)));
    /// ```
    pub fn int(i: i64) -> Value {
        if i.unsigned_abs() <= 1 << 53 {
            Value::Num(i as f64, true)
        } else {
            Value::Int(i)
        }
    }

    /// This value as an exact `i64`, if it is an integer within `i64`'s range.
    fn exact_int(&self) -> Option<i64> {
        match *self {
            Value::Int(i) => Some(i),
            Value::Num(x, true) if fits_i64(x) => Some(x as i64),
            _ => None,
        }
    }
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Tensor(t) => write!(f, "{t}"),
            Value::Num(v, true) if fits_i64(*v) => write!(f, "{}", *v as i64),
            // Beyond `i64` an integer prints as the `f64` it is, every digit (`2 ** 63` is
            // 9223372036854775808, not `i64::MAX`), or `inf`.
            Value::Num(v, true) => write!(f, "{v:.0}"),
            Value::Num(v, false) => write!(f, "{v}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::List(l) => {
                write!(f, "[")?;
                for (i, v) in l.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{v}")?;
                }
                write!(f, "]")
            }
            Value::DType(d) => write!(f, "{d}"),
            Value::Str(s) => write!(f, "{s:?}"),
            Value::Unit => Ok(()),
        }
    }
}

/// What a line asks of the caller.
///
/// # Examples
///
/// ```
/// use eddy::repl::{Outcome, Session};
/// let mut s = Session::new(eddy::Vm::builder().build()?);
/// assert_eq!(s.eval_line("# a comment")?, Outcome::Print(String::new()));
/// assert_eq!(s.eval_line(":quit")?, Outcome::Quit);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Print this (possibly empty) text.
    Print(String),
    /// Leave the REPL.
    Quit,
}

/// The REPL's state: its variables and the engine they live on.
///
/// # Examples
///
/// ```
/// use eddy::repl::{Outcome, Session};
/// let mut s = Session::new(eddy::Vm::builder().build()?);
/// s.eval_line("let x = arange(4).reshape(2, 2)")?;
/// assert_eq!(s.eval_line("x.sum().item()")?, Outcome::Print("6".into()));
/// assert!(s.eval_line("x.reshape(3)").is_err()); // the REPL stays usable
/// assert_eq!(s.eval_line("x.shape")?, Outcome::Print("[2, 2]".into()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Session {
    vm: Vm,
    vars: BTreeMap<String, Value>,
}

impl Session {
    /// A REPL whose tensors live on `vm`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::repl::{Outcome, Session};
    /// let mut s = Session::new(eddy::Vm::builder().build()?);
    /// s.eval_line("let a = tensor([[1., 2.], [3., 4.]])")?;
    /// let out = s.eval_line("a.matmul(a.t()).relu().sum(1)")?;
    /// assert_eq!(out, Outcome::Print("tensor([16.0000, 36.0000], dtype=f32)".into()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(vm: Vm) -> Session {
        Session {
            vm,
            vars: BTreeMap::new(),
        }
    }

    /// The engine.
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy::Vm::builder().build()?;
    /// let s = eddy::repl::Session::new(vm.clone());
    /// assert!(s.engine().same_engine(&vm));
    /// # Ok::<(), eddy::vm::Error>(())
    /// ```
    pub fn engine(&self) -> &Vm {
        &self.vm
    }

    /// Evaluates one line: a `let`, an expression, a `:command`, or a blank or `#` comment.
    ///
    /// # Errors
    ///
    /// A [`ReplError`]: syntax, an unknown name, a bad argument, or the op's typed error
    /// ([`ReplError::Tensor`]). The REPL stays usable.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::repl::{Outcome, ReplError, Session};
    /// let mut s = Session::new(eddy::Vm::builder().build()?);
    /// assert_eq!(s.eval_line("let n = 2 ** 10")?, Outcome::Print(String::new()));
    /// assert_eq!(s.eval_line("n + 1")?, Outcome::Print("1025".into()));
    /// assert_eq!(s.eval_line(":vars")?, Outcome::Print("n = 1024".into()));
    /// let err = s.eval_line("m + 1").unwrap_err();
    /// assert!(matches!(&err, ReplError::UnknownName { name } if name == "m"));
    /// assert_eq!(err.to_string(), "unknown name `m`");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn eval_line(&mut self, line: &str) -> Result<Outcome, ReplError> {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return Ok(Outcome::Print(String::new()));
        }
        if let Some(cmd) = line.strip_prefix(':') {
            return self.command(cmd);
        }
        let vm = self.vm.clone();
        eddy_tensor::with_engine(&vm, || {
            let stmt = parser::parse(line)?;
            self.run(stmt).map(Outcome::Print)
        })
    }

    /// Evaluates the expression `expr` and returns its value, waited for (an asynchronous
    /// error of a tensor surfaces here): what tools and tests compare, where
    /// [`eval_line`](Self::eval_line) prints.
    ///
    /// # Errors
    ///
    /// As [`eval_line`](Self::eval_line); a `let` or a `:command` is a parse error.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::repl::{Session, Value};
    /// let mut s = Session::new(eddy::Vm::builder().build()?);
    /// let Value::Tensor(t) = s.eval_value("tensor([1, 2]) * 3")? else { panic!() };
    /// assert_eq!(t.to_vec::<i64>()?, [3, 6]);
    /// assert!(matches!(s.eval_value("7 // 2")?, Value::Num(v, true) if v == 3.0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn eval_value(&mut self, expr: &str) -> Result<Value, ReplError> {
        let vm = self.vm.clone();
        eddy_tensor::with_engine(&vm, || match parser::parse(expr.trim())? {
            parser::Stmt::Expr(e) => {
                let v = self.eval(&e)?;
                if let Value::Tensor(t) = &v {
                    t.sync()?;
                }
                Ok(v)
            }
            parser::Stmt::Let(..) => Err(ReplError::parse("expected an expression, not a `let`")),
        })
    }

    /// Runs a `:command` (without its colon).
    fn command(&mut self, cmd: &str) -> Result<Outcome, ReplError> {
        let words: Vec<&str> = cmd.split_whitespace().collect();
        let out = match words.as_slice() {
            ["q" | "quit" | "exit"] => return Ok(Outcome::Quit),
            ["help" | "h"] => help(),
            ["stats"] => {
                let s = self.vm.stats();
                format!(
                    "instructions inserted {}, erased {}, fused {}, dispatched {}, in flight {}, OOM retries {}, OOMs {}",
                    s.inserted, s.erased, s.fused, s.dispatched, s.in_flight, s.oom_retries, s.ooms
                )
            }
            ["mem"] => {
                let a = self.vm.alloc_stats();
                format!(
                    "in use {}, cached {}, reserved {}, peak in use {}, allocations {}, from the system {}",
                    bytes(a.in_use),
                    bytes(a.cached),
                    bytes(a.reserved),
                    bytes(a.peak_in_use),
                    a.allocations,
                    a.system_allocations
                )
            }
            ["sync"] => {
                let r = self.vm.sync();
                self.vm.clear_errors();
                r.map_err(|e| ReplError::Async(e.without_caller()))?;
                "ok".into()
            }
            ["trace", "on"] => {
                self.vm.set_trace(true);
                "tracing on".into()
            }
            ["trace", "off"] => {
                self.vm.set_trace(false);
                "tracing off".into()
            }
            ["trace", "save", file] => {
                self.vm.sync().ok();
                let n = self.vm.trace_events().len();
                save_trace(&self.vm, Path::new(file))?;
                format!("wrote {n} instructions to {file}")
            }
            ["vars"] => {
                let mut s = String::new();
                for (k, v) in &self.vars {
                    let desc = match v {
                        Value::Tensor(t) => format!("tensor {:?} {}", t.dims(), t.dtype()),
                        other => other.to_string(),
                    };
                    let _ = writeln!(s, "{k} = {desc}");
                }
                s.trim_end().to_string()
            }
            _ => {
                return Err(ReplError::UnknownCommand {
                    command: cmd.to_string(),
                });
            }
        };
        Ok(Outcome::Print(out))
    }
}

/// Writes the engine's timeline as chrome-trace JSON, or as an SVG picture if `path` ends in
/// `.svg`.
fn save_trace(vm: &Vm, path: &Path) -> Result<(), ReplError> {
    let res = if path.extension().is_some_and(|e| e == "svg") {
        let names: Vec<String> = (0..vm.stream_count())
            .map(|i| {
                vm.stream_policy(eddy_vm::StreamId(i as u32))
                    .map_or("?".into(), |p| p.name().to_string())
            })
            .collect();
        std::fs::write(path, timeline_svg(&vm.trace_events(), &names))
    } else {
        std::fs::File::create(path).and_then(|f| vm.write_chrome_trace(std::io::BufWriter::new(f)))
    };
    res.map_err(|source| ReplError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// `n` bytes in B, KiB or MiB.
fn bytes(n: usize) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / (1 << 20) as f64)
    } else if n >= 1 << 10 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} B")
    }
}
