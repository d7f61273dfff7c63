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
//! [`Session::eval_line`] returns the text to print; errors are returned as text too and leave
//! the session usable.

use crate::plot::timeline_svg;
use crate::{DType, Tensor};
use eddy_vm::Vm;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The help text of `:help`.
pub const HELP: &str = "\
expressions:
  let NAME = EXPR              bind a value (no output)
  EXPR                         evaluate and print
  numbers, [lists], \"strings\", f32 f64 f16 bf16 i64 i32 u8 bool, true false
  operators: + - * / ** @ (matmul) == != < <= > >=, unary -, (...), a[i, j:k, :]
functions:
  randn(dims..) rand(dims..) zeros(dims..) ones(dims..) full([dims], v) eye(n)
  arange(end) arange(start, end[, step]) linspace(start, end, steps) tensor([[..]])
  cat([a, b], dim) stack([a, b], dim) where(cond, a, b) manual_seed(n)
  creation functions take dtype=f64 etc.
methods (a.NAME(..)):
  neg abs exp log sqrt rsqrt sin cos tanh sigmoid relu gelu silu recip square sign
  floor ceil round trunc log1p expm1 log2 log10 tan atan erf
  leaky_relu(negative_slope=0.01) elu(alpha=1) softplus(beta=1, threshold=20)
  dropout(p=0.5, training=true)
  add sub mul div pow maximum minimum eq ne lt le gt ge matmul (tensor or number)
  sum mean prod (dims.., keepdim=true)  argmax argmin (dim, keepdim=true)
  max min: of all elements, or (dim, keepdim=true): [values, indices]
  softmax(dim) log_softmax(dim) cross_entropy(t) nll_loss(t) mse_loss(t)
  reshape view permute expand (dims..)  transpose(a, b) t() narrow(dim, start, len)
  select(dim, i) squeeze(dim) unsqueeze(dim) flatten(start_dim=0, end_dim=-1)
  contiguous() clamp(lo, hi)
  index_select(dim, idx) gather(dim, idx) to(dtype) float() long() detach()
  logical_and logical_or logical_xor (tensor) logical_not()
  cumsum(dim) var std (dims.., correction=1) logsumexp any all norm(p=2) (dims..)
  sort(dim=-1, descending=false) topk(k, dim=-1, largest=true) median(dim): [values, indices]
  argsort(dim) flip(dims..) tril(k) triu(k)
  add_ sub_ mul_ div_ copy_ fill_ zero_ (in place) requires_grad_() backward()
  item() tolist() sync()     attributes: .shape .dtype .device .grad .T .ndim .numel
commands:
  :stats  engine counters          :mem   allocator figures
  :trace on|off|save FILE(.json|.svg)   :sync  wait for all work, report errors
  :vars   list bindings            :help  this text      :quit  leave";

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
/// assert_eq!(s.eval_line("# a comment"), Ok(Outcome::Print(String::new())));
/// assert_eq!(s.eval_line(":quit"), Ok(Outcome::Quit));
/// # Ok::<(), eddy::vm::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Print this (possibly empty) text.
    Print(String),
    /// Leave the session.
    Quit,
}

/// An interactive session: variables and the engine they live on.
///
/// # Examples
///
/// ```
/// use eddy::repl::{Outcome, Session};
/// let mut s = Session::new(eddy::Vm::builder().build()?);
/// s.eval_line("let x = arange(4).reshape(2, 2)").unwrap();
/// assert_eq!(s.eval_line("x.sum().item()"), Ok(Outcome::Print("6".into())));
/// assert!(s.eval_line("x.reshape(3)").is_err()); // the session stays usable
/// assert_eq!(s.eval_line("x.shape"), Ok(Outcome::Print("[2, 2]".into())));
/// # Ok::<(), eddy::vm::Error>(())
/// ```
pub struct Session {
    vm: Vm,
    vars: BTreeMap<String, Value>,
}

type R<T> = Result<T, String>;

impl Session {
    /// A session whose tensors live on `vm`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::repl::{Outcome, Session};
    /// let mut s = Session::new(eddy::Vm::builder().build()?);
    /// s.eval_line("let a = tensor([[1., 2.], [3., 4.]])").unwrap();
    /// let out = s.eval_line("a.matmul(a.t()).relu().sum(1)").unwrap();
    /// assert_eq!(out, Outcome::Print("tensor([16.0000, 36.0000], dtype=f32)".into()));
    /// # Ok::<(), eddy::vm::Error>(())
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
    /// A message (syntax, unknown name, or the op's typed error); the session stays usable.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::repl::{Outcome, Session};
    /// let mut s = Session::new(eddy::Vm::builder().build()?);
    /// assert_eq!(s.eval_line("let n = 2 ** 10"), Ok(Outcome::Print(String::new())));
    /// assert_eq!(s.eval_line("n + 1"), Ok(Outcome::Print("1025".into())));
    /// assert_eq!(s.eval_line(":vars"), Ok(Outcome::Print("n = 1024".into())));
    /// let err = s.eval_line("m + 1").unwrap_err();
    /// assert!(err.contains('m'), "{err}");
    /// # Ok::<(), eddy::vm::Error>(())
    /// ```
    pub fn eval_line(&mut self, line: &str) -> R<Outcome> {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return Ok(Outcome::Print(String::new()));
        }
        if let Some(cmd) = line.strip_prefix(':') {
            return self.command(cmd);
        }
        let vm = self.vm.clone();
        eddy_tensor::with_engine(&vm, || {
            let toks = lex(line)?;
            let mut p = Parser {
                toks,
                pos: 0,
                nesting: 0,
            };
            let stmt = p.statement()?;
            p.expect_end()?;
            match stmt {
                Stmt::Let(name, e) => {
                    let v = self.eval(&e)?;
                    self.vars.insert(name, v);
                    Ok(Outcome::Print(String::new()))
                }
                Stmt::Expr(e) => {
                    let v = self.eval(&e)?;
                    // Printing waits for the value: an asynchronous error surfaces here.
                    if let Value::Tensor(t) = &v {
                        t.sync().map_err(|e| e.to_string())?;
                    }
                    Ok(Outcome::Print(v.to_string()))
                }
            }
        })
    }

    fn command(&mut self, cmd: &str) -> R<Outcome> {
        let words: Vec<&str> = cmd.split_whitespace().collect();
        let out = match words.as_slice() {
            ["q" | "quit" | "exit"] => return Ok(Outcome::Quit),
            ["help" | "h"] => HELP.to_string(),
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
                match r {
                    Ok(()) => "ok".into(),
                    Err(e) => return Err(format!("asynchronous error: {e}")),
                }
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
                save_trace(&self.vm, std::path::Path::new(file))?;
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
            _ => return Err(format!("unknown command `:{cmd}` (try :help)")),
        };
        Ok(Outcome::Print(out))
    }

    fn eval(&mut self, e: &Expr) -> R<Value> {
        Ok(match e {
            Expr::Num(v, int) => Value::Num(*v, *int),
            Expr::Int(i) => Value::int(*i),
            Expr::Str(s) => Value::Str(s.clone()),
            Expr::Var(name) => self.var(name)?,
            Expr::List(items) => {
                let items = items.iter().map(|i| self.eval(i)).collect::<R<Vec<_>>>()?;
                // Lists nest through variables too (`let a = [a]`, line after line): they stay
                // as shallow as the syntax, for printing and dropping one recurse a level.
                if 1 + items.iter().map(list_depth).max().unwrap_or(0) > MAX_DEPTH {
                    return Err(too_deep());
                }
                Value::List(items)
            }
            Expr::Neg(x) => match self.eval(x)? {
                Value::Num(v, i) => Value::Num(-v, i),
                Value::Int(i) => i
                    .checked_neg()
                    .map_or(Value::Num(-(i as f64), true), Value::int),
                Value::Tensor(t) => Value::Tensor(t.neg().map_err(err)?),
                v => return Err(format!("cannot negate {}", kind(&v))),
            },
            Expr::Bin(op, a, b) => {
                let (a, b) = (self.eval(a)?, self.eval(b)?);
                binary(*op, a, b)?
            }
            Expr::Call(name, args) => {
                let args = self.eval_args(args)?;
                within_rank(name, call(name, args)?)?
            }
            Expr::Method(recv, name, args) => {
                let recv = self.eval(recv)?;
                let args = self.eval_args(args)?;
                within_rank(name, method(recv, name, args)?)?
            }
            Expr::Attr(recv, name) => {
                let recv = self.eval(recv)?;
                attr(recv, name)?
            }
            Expr::Index(recv, items) => {
                let recv = self.eval(recv)?;
                if let (Value::List(l), [IndexItem::At(e)]) = (&recv, &items[..]) {
                    // A list (a pair of results) takes one index, as a Python tuple.
                    let i = as_int(&self.eval(e)?, "index")?;
                    let n = l.len() as i64;
                    let j = if i < 0 { i + n } else { i };
                    return l
                        .get(j as usize)
                        .filter(|_| j >= 0)
                        .cloned()
                        .ok_or(format!("index {i} out of range for a list of {n}"));
                }
                let t = as_tensor(recv, "indexing")?;
                let mut dim = 0isize;
                let mut t = t;
                for it in items {
                    match it {
                        IndexItem::All => dim += 1,
                        IndexItem::At(e) => {
                            let i = as_int(&self.eval(e)?, "index")?;
                            let size = t.dim(dim).map_err(err)? as i64;
                            let i = if i < 0 { i + size } else { i };
                            if i < 0 || i >= size {
                                return Err(format!(
                                    "index {i} out of range for dim {dim} of size {size}"
                                ));
                            }
                            t = t.select(dim, i as usize).map_err(err)?;
                        }
                        IndexItem::Range(lo, hi) => {
                            let size = t.dim(dim).map_err(err)? as i64;
                            let bound = |e: &Option<Expr>, s: &mut Self, d: i64| -> R<i64> {
                                let v = match e {
                                    None => d,
                                    Some(e) => as_int(&s.eval(e)?, "slice bound")?,
                                };
                                Ok((if v < 0 { v + size } else { v }).clamp(0, size))
                            };
                            let lo = bound(lo, self, 0)?;
                            let hi = bound(hi, self, size)?.max(lo);
                            t = t
                                .narrow(dim, lo as usize, (hi - lo) as usize)
                                .map_err(err)?;
                            dim += 1;
                        }
                    }
                }
                Value::Tensor(t)
            }
        })
    }

    fn var(&self, name: &str) -> R<Value> {
        if let Some(v) = self.vars.get(name) {
            return Ok(v.clone());
        }
        Ok(match name {
            "true" | "True" => Value::Bool(true),
            "false" | "False" => Value::Bool(false),
            "pi" => Value::Num(std::f64::consts::PI, false),
            n => match parse_dtype(n) {
                Some(d) => Value::DType(d),
                None => return Err(format!("unknown name `{n}`")),
            },
        })
    }

    fn eval_args(&mut self, args: &[(Option<String>, Expr)]) -> R<Args> {
        let mut out = Args::default();
        for (name, e) in args {
            let v = self.eval(e)?;
            match name {
                None if !out.named.is_empty() => {
                    return Err("a positional argument after a named one".into());
                }
                None => out.pos.push(v),
                Some(n) => {
                    out.named.insert(n.clone(), v);
                }
            }
        }
        Ok(out)
    }
}

/// Writes the engine's timeline as chrome-trace JSON, or as an SVG picture if `path` ends in
/// `.svg`.
fn save_trace(vm: &Vm, path: &std::path::Path) -> R<()> {
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
    res.map_err(|e| format!("{}: {e}", path.display()))
}

fn bytes(n: usize) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / (1 << 20) as f64)
    } else if n >= 1 << 10 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} B")
    }
}

fn err(e: crate::Error) -> String {
    e.to_string()
}

/// The deepest an expression (or a list value) may nest. Parsing, evaluating, printing and
/// dropping one recurse once a level, so a line of 100000 `(` (or `1+1+…` of 100000 terms, a
/// left-nested tree) is refused with an error instead of overflowing the stack.
const MAX_DEPTH: usize = 256;

/// The most dims a tensor made in the REPL may have, as PyTorch's limit of 64: printing and
/// `tolist` recurse once a dim.
const MAX_RANK: usize = 64;

/// The most values, and the most lists, `tolist` builds: each is a boxed [`Value`].
const TOLIST_MAX: usize = 10_000_000;

fn too_deep() -> String {
    format!("expression nested too deeply (more than {MAX_DEPTH} levels)")
}

/// How deeply `v` nests lists: 0 for a value that is not a list.
fn list_depth(v: &Value) -> usize {
    match v {
        Value::List(items) => 1 + items.iter().map(list_depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// Refuses `rank` dims for `f` past [`MAX_RANK`].
fn check_rank(f: &str, rank: usize) -> R<()> {
    if rank > MAX_RANK {
        return Err(format!(
            "{f}: {rank} dims, more than the {MAX_RANK} a tensor may have"
        ));
    }
    Ok(())
}

/// `v`, unless it is a tensor of more than [`MAX_RANK`] dims (`unsqueeze` or `stack` again and
/// again).
fn within_rank(f: &str, v: Value) -> R<Value> {
    if let Value::Tensor(t) = &v {
        check_rank(f, t.rank())?;
    }
    Ok(v)
}

/// Whether `v` is an `i64` value (so `v as i64` neither saturates nor is NaN's 0).
fn fits_i64(v: f64) -> bool {
    (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&v)
}

/// A number as the 0-d tensor that meets the tensor `other`, converted once from its `f64`
/// value: of `other`'s dtype (so `0.1` meets an `f64` tensor as f64's 0.1, not as f32's
/// widened), except that a fraction meeting an integer or bool tensor is `f32` and an integer
/// meeting a bool tensor is `i64`, as PyTorch promotes.
fn num_like(c: f64, int: bool, other: &Tensor) -> R<Tensor> {
    let d = other.dtype();
    let dt = if d.is_float() {
        d
    } else if !int || c.fract() != 0.0 {
        DType::F32
    } else if d == DType::Bool {
        DType::I64
    } else {
        d
    };
    // An operand, not a fill value: as PyTorch's scalar operands, an integer past the dtype
    // wraps (`u8 + 300` adds 44) and a float past a float dtype's range becomes infinite in
    // it, rather than being refused as `full` refuses it.
    match dt {
        DType::U8 => Tensor::full((), c.rem_euclid(256.0), dt),
        DType::I32 => {
            let w = c.rem_euclid(4_294_967_296.0);
            Tensor::full(
                (),
                if w >= 2_147_483_648.0 {
                    w - 4_294_967_296.0
                } else {
                    w
                },
                dt,
            )
        }
        DType::F32 | DType::F16 | DType::BF16 => {
            Tensor::full((), c, DType::F64).and_then(|t| t.to_dtype(dt))
        }
        _ => Tensor::full((), c, dt),
    }
    .map_err(err)
}

/// Whether `v` is a number (`Num` or `Int`).
fn is_number(v: &Value) -> bool {
    matches!(v, Value::Num(..) | Value::Int(_))
}

/// The number `v` as the 0-d tensor that meets the tensor `other`, as [`num_like`]; an
/// `Int` exactly where `other` has an integer dtype (wrapping past it), `i64` beside a bool
/// tensor.
fn number_like(v: &Value, other: &Tensor) -> R<Tensor> {
    match (v, other.dtype()) {
        (&Value::Int(i), DType::I64 | DType::Bool) => Tensor::scalar(i).map_err(err),
        (&Value::Int(i), DType::I32) => Tensor::scalar(i as i32).map_err(err), // wraps
        (&Value::Int(i), DType::U8) => Tensor::scalar(i as u8).map_err(err),   // wraps
        (&Value::Int(i), _) => num_like(i as f64, true, other),
        (&Value::Num(c, int), _) => num_like(c, int, other),
        _ => Err(format!("expected a number, got {}", kind(v))),
    }
}

fn parse_dtype(n: &str) -> Option<DType> {
    Some(match n {
        "f32" | "float32" | "float" => DType::F32,
        "f64" | "float64" | "double" => DType::F64,
        "f16" | "float16" | "half" => DType::F16,
        "bf16" | "bfloat16" => DType::BF16,
        "i64" | "int64" | "long" => DType::I64,
        "i32" | "int32" | "int" => DType::I32,
        "u8" | "uint8" => DType::U8,
        "bool" => DType::Bool,
        _ => return None,
    })
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Tensor(_) => "a tensor",
        Value::Num(..) | Value::Int(_) => "a number",
        Value::Bool(_) => "a boolean",
        Value::List(_) => "a list",
        Value::DType(_) => "a dtype",
        Value::Str(_) => "a string",
        Value::Unit => "nothing",
    }
}

fn as_tensor(v: Value, what: &str) -> R<Tensor> {
    match v {
        Value::Tensor(t) => Ok(t),
        Value::Num(x, true) => Tensor::scalar(x as i64).map_err(err),
        Value::Num(x, false) => Tensor::scalar(x as f32).map_err(err),
        Value::Int(i) => Tensor::scalar(i).map_err(err),
        Value::Bool(b) => Tensor::scalar(b).map_err(err),
        Value::List(_) => list_tensor(&v, None),
        v => Err(format!("{what}: expected a tensor, got {}", kind(&v))),
    }
}

fn as_num(v: &Value, what: &str) -> R<f64> {
    match v {
        Value::Num(x, _) => Ok(*x),
        Value::Int(i) => Ok(*i as f64),
        Value::Bool(b) => Ok(f64::from(u8::from(*b))),
        Value::Tensor(t) if t.numel() == 1 => t.to_scalar().map_err(err),
        v => Err(format!("{what}: expected a number, got {}", kind(v))),
    }
}

fn as_int(v: &Value, what: &str) -> R<i64> {
    if let Value::Int(i) = v {
        return Ok(*i);
    }
    let x = as_num(v, what)?;
    if x.fract() != 0.0 {
        return Err(format!("{what}: expected an integer, got {x}"));
    }
    Ok(x as i64)
}

fn as_usize(v: &Value, what: &str) -> R<usize> {
    let x = as_int(v, what)?;
    usize::try_from(x).map_err(|_| format!("{what}: expected a non-negative integer, got {x}"))
}

fn as_bool(v: &Value, what: &str) -> R<bool> {
    match v {
        Value::Bool(b) => Ok(*b),
        Value::Num(x, _) => Ok(*x != 0.0),
        Value::Int(_) => Ok(true), // never 0
        v => Err(format!("{what}: expected true or false, got {}", kind(v))),
    }
}

/// Positional and named arguments.
#[derive(Default)]
struct Args {
    pos: Vec<Value>,
    named: BTreeMap<String, Value>,
}

impl Args {
    fn named(&mut self, k: &str) -> Option<Value> {
        self.named.remove(k)
    }
    fn done(&self, f: &str) -> R<()> {
        match self.named.keys().next() {
            Some(k) => Err(format!("{f}: unknown argument `{k}`")),
            None => Ok(()),
        }
    }
    fn arity(&self, f: &str, lo: usize, hi: usize) -> R<()> {
        let n = self.pos.len();
        if n < lo || n > hi {
            let want = if lo == hi {
                format!("{lo}")
            } else {
                format!("{lo} to {hi}")
            };
            return Err(format!("{f}: expected {want} arguments, got {n}"));
        }
        Ok(())
    }
    /// The positional arguments as a list of sizes: `f(2, 3)` or `f([2, 3])`.
    fn dims(&self, f: &str) -> R<Vec<usize>> {
        match self.pos.as_slice() {
            [Value::List(l)] => l.iter().map(|v| as_usize(v, f)).collect(),
            vs => vs.iter().map(|v| as_usize(v, f)).collect(),
        }
    }
    /// As [`dims`](Self::dims) but signed (permute, reshape with -1, reductions).
    fn idims(&self, f: &str) -> R<Vec<i64>> {
        match self.pos.as_slice() {
            [Value::List(l)] => l.iter().map(|v| as_int(v, f)).collect(),
            vs => vs.iter().map(|v| as_int(v, f)).collect(),
        }
    }
    fn dtype(&mut self, f: &str, default: DType) -> R<DType> {
        match self.named("dtype") {
            None => Ok(default),
            Some(Value::DType(d)) => Ok(d),
            Some(v) => Err(format!("{f}: dtype= expects a dtype, got {}", kind(&v))),
        }
    }
    fn keepdim(&mut self, f: &str) -> R<bool> {
        self.named("keepdim").map_or(Ok(false), |v| as_bool(&v, f))
    }
    /// Takes a named `dim` as positional argument `at` (the dims, from there on); no other
    /// named one may be left. A dim given both ways is an error, as Python's "got multiple
    /// values for argument" (`x.sum(0, dim=1)` does not sum both).
    fn take_dim(&mut self, f: &str, at: usize) -> R<()> {
        if let Some(d) = self.named("dim") {
            if self.pos.len() > at {
                return Err(format!("{f}: got multiple values for argument `dim`"));
            }
            if self.pos.len() < at {
                return Err(format!(
                    "{f}: expected {at} arguments before `dim`, got {}",
                    self.pos.len()
                ));
            }
            self.pos.push(d);
        }
        self.done(f)
    }
    /// Argument `at`, given positionally or as `key=` (not both, as Python); `None` if neither.
    fn param(&mut self, f: &str, at: usize, key: &str) -> R<Option<Value>> {
        let named = self.named(key);
        match (self.pos.get(at), named) {
            (Some(_), Some(_)) => Err(format!("{f}: got multiple values for argument `{key}`")),
            (Some(v), None) => Ok(Some(v.clone())),
            (None, v) => Ok(v),
        }
    }
    /// The dims given (positionally or as `dim=`), or all `rank` of them when none is.
    fn dims_or_all(&mut self, f: &str, rank: usize) -> R<Vec<isize>> {
        self.take_dim(f, 0)?;
        let dims: Vec<isize> = self.idims(f)?.into_iter().map(|d| d as isize).collect();
        Ok(if dims.is_empty() {
            (0..rank as isize).collect()
        } else {
            dims
        })
    }
    /// One dim, given positionally or as `dim=`; the last when none is.
    fn dim_or_last(&mut self, f: &str) -> R<isize> {
        self.take_dim(f, 0)?;
        self.arity(f, 0, 1)?;
        self.pos
            .first()
            .map_or(Ok(-1), |v| as_int(v, f).map(|d| d as isize))
    }
}

/// Builds a tensor from a number or a (nested) list, as `torch.tensor`: every number at one
/// depth and the lists at each depth of one length. Without `dtype`, booleans alone give
/// `bool`, integers (with or without booleans) `i64`, and a fraction or no number at all
/// (`tensor([])`) `f32`. An `i64` tensor takes its integers exactly; otherwise the values
/// are converted once, from their `f64`, to the dtype. An integer dtype refuses a value
/// outside `i64`'s range instead of saturating.
fn list_tensor(v: &Value, dtype: Option<DType>) -> R<Tensor> {
    /// What the walk has gathered.
    #[derive(Default)]
    struct Walk {
        shape: Vec<usize>,
        vals: Vec<f64>,
        /// The same values as `i64`s: exact for integers, fractions truncated toward zero as
        /// `to_dtype` truncates them (used for an `i64` result).
        ints: Vec<i64>,
        /// Whether a number was seen: the shape is complete then, and a list one level deeper
        /// than every list before it (`[1, [2]]`) is ragged.
        leaf: bool,
        /// Whether an integer, a fraction was seen.
        int: bool,
        float: bool,
        /// The first number outside `i64`'s range.
        huge: Option<Value>,
    }
    impl Walk {
        fn walk(&mut self, v: &Value, depth: usize) -> R<()> {
            match v {
                Value::List(items) => {
                    if self.shape.len() == depth {
                        if self.leaf {
                            return Err(RAGGED.into());
                        }
                        check_rank("tensor", depth + 1)?;
                        self.shape.push(items.len());
                    } else if self.shape[depth] != items.len() {
                        return Err(format!(
                            "tensor: ragged list (length {} where {} was expected)",
                            items.len(),
                            self.shape[depth]
                        ));
                    }
                    items.iter().try_for_each(|i| self.walk(i, depth + 1))
                }
                &Value::Num(x, int) if self.shape.len() == depth => {
                    self.leaf = true;
                    if int {
                        self.int = true;
                    } else {
                        self.float = true;
                    }
                    if !fits_i64(x) && self.huge.is_none() {
                        self.huge = Some(Value::Num(x, int));
                    }
                    self.vals.push(x);
                    self.ints.push(x as i64);
                    Ok(())
                }
                &Value::Int(i) if self.shape.len() == depth => {
                    self.leaf = true;
                    self.int = true;
                    self.vals.push(i as f64);
                    self.ints.push(i);
                    Ok(())
                }
                &Value::Bool(b) if self.shape.len() == depth => {
                    self.leaf = true;
                    self.vals.push(f64::from(u8::from(b)));
                    self.ints.push(i64::from(b));
                    Ok(())
                }
                _ => Err(RAGGED.into()),
            }
        }
    }
    const RAGGED: &str = "tensor: expected a nested list of numbers of one depth";
    let mut w = Walk::default();
    w.walk(v, 0)?;
    let dtype = dtype.unwrap_or(match (w.leaf, w.float, w.int) {
        (true, false, true) => DType::I64,
        (true, false, false) => DType::Bool,
        _ => DType::F32,
    });
    // PyTorch's "Overflow when unpacking long": `tensor(2 ** 63)` is not `i64::MAX`.
    if let Some(h) = w.huge.filter(|_| !dtype.is_float() && dtype != DType::Bool) {
        return Err(format!(
            "tensor: {h} is outside the range of i64 (overflow)"
        ));
    }
    if dtype == DType::I64 {
        return Tensor::from_vec(w.ints, w.shape).map_err(err);
    }
    Tensor::from_vec(w.vals, w.shape)
        .and_then(|t| t.to_dtype(dtype))
        .map_err(err)
}

fn call(name: &str, mut a: Args) -> R<Value> {
    let f = name;
    let t = |r: crate::Result<Tensor>| r.map(Value::Tensor).map_err(err);
    let v = match name {
        "randn" | "rand" | "zeros" | "ones" => {
            let dt = a.dtype(f, DType::F32)?;
            a.done(f)?;
            let dims = a.dims(f)?;
            check_rank(f, dims.len())?;
            match name {
                "randn" => t(Tensor::randn(dims, 0.0, 1.0, dt))?,
                "rand" => t(Tensor::rand(dims, dt))?,
                "zeros" => t(Tensor::zeros(dims, dt))?,
                _ => t(Tensor::ones(dims, dt))?,
            }
        }
        "full" => {
            // PyTorch infers the dtype from the fill value: an integer gives i64, a bool bool.
            let dt = match a.pos.get(1) {
                Some(Value::Num(_, true) | Value::Int(_)) => DType::I64,
                Some(Value::Bool(_)) => DType::Bool,
                _ => DType::F32,
            };
            let dt = a.dtype(f, dt)?;
            a.done(f)?;
            a.arity(f, 2, 2)?;
            let dims = Args {
                pos: vec![a.pos[0].clone()],
                named: BTreeMap::new(),
            }
            .dims(f)?;
            check_rank(f, dims.len())?;
            if let (&Value::Int(i), DType::I64) = (&a.pos[1], dt) {
                // Exactly: `Tensor::full` takes an `f64`.
                let one = Tensor::scalar(i).map_err(err)?;
                return t(one.broadcast_to(dims).and_then(|o| o.contiguous()));
            }
            t(Tensor::full(dims, as_num(&a.pos[1], f)?, dt))?
        }
        "eye" => {
            let dt = a.dtype(f, DType::F32)?;
            a.done(f)?;
            a.arity(f, 1, 1)?;
            t(Tensor::eye(as_usize(&a.pos[0], f)?, dt))?
        }
        "arange" => {
            let all_int = a
                .pos
                .iter()
                .all(|v| matches!(v, Value::Num(_, true) | Value::Int(_)));
            let dt = a.dtype(f, if all_int { DType::I64 } else { DType::F32 })?;
            a.done(f)?;
            a.arity(f, 1, 3)?;
            let n: Vec<f64> = a.pos.iter().map(|v| as_num(v, f)).collect::<R<_>>()?;
            let (s, e, st) = match n.as_slice() {
                [e] => (0.0, *e, 1.0),
                [s, e] => (*s, *e, 1.0),
                [s, e, st] => (*s, *e, *st),
                _ => unreachable!("arity checked"),
            };
            t(Tensor::arange(s, e, st, dt))?
        }
        "linspace" => {
            let dt = a.dtype(f, DType::F32)?;
            a.done(f)?;
            a.arity(f, 3, 3)?;
            t(Tensor::linspace(
                as_num(&a.pos[0], f)?,
                as_num(&a.pos[1], f)?,
                as_usize(&a.pos[2], f)?,
                dt,
            ))?
        }
        "tensor" => {
            let dt = match a.named("dtype") {
                None => None,
                Some(Value::DType(d)) => Some(d),
                Some(v) => return Err(format!("tensor: dtype= expects a dtype, got {}", kind(&v))),
            };
            a.done(f)?;
            a.arity(f, 1, 1)?;
            // A number is a 0-d tensor, built as a list is: from its f64 value, converted once.
            Value::Tensor(list_tensor(&a.pos[0], dt)?)
        }
        "cat" | "stack" => {
            let dim = a.named("dim").map(|v| as_int(&v, f)).transpose()?;
            a.done(f)?;
            a.arity(f, 1, 2)?;
            let dim = match (dim, a.pos.get(1)) {
                (Some(d), None) => d,
                (None, Some(v)) => as_int(v, f)?,
                (None, None) => 0,
                (Some(_), Some(_)) => return Err(format!("{f}: dim given twice")),
            } as isize;
            let Value::List(items) = a.pos[0].clone() else {
                return Err(format!("{f}: expected a list of tensors"));
            };
            let ts: Vec<Tensor> = items
                .into_iter()
                .map(|v| as_tensor(v, f))
                .collect::<R<_>>()?;
            let refs: Vec<&Tensor> = ts.iter().collect();
            if name == "cat" {
                t(Tensor::cat(&refs, dim))?
            } else {
                t(Tensor::stack(&refs, dim))?
            }
        }
        "where" => {
            a.done(f)?;
            a.arity(f, 3, 3)?;
            let mut it = a.pos.into_iter();
            let c = as_tensor(it.next().expect("3"), f)?;
            let (x, y) = (it.next().expect("3"), it.next().expect("3"));
            // A number beside a tensor takes the tensor's dtype, as PyTorch's scalar operands
            // (`where(c, 0.1, x)` of an f64 `x` is f64's 0.1, not f32's).
            let (x, y) = match (x, y) {
                (x, Value::Tensor(y)) if is_number(&x) => (number_like(&x, &y)?, y),
                (Value::Tensor(x), y) if is_number(&y) => {
                    let y = number_like(&y, &x)?;
                    (x, y)
                }
                (x, y) => (as_tensor(x, f)?, as_tensor(y, f)?),
            };
            t(c.where_(&x, &y))?
        }
        "matmul" => {
            a.done(f)?;
            a.arity(f, 2, 2)?;
            let mut it = a.pos.into_iter();
            let x = as_tensor(it.next().expect("2"), f)?;
            let y = as_tensor(it.next().expect("2"), f)?;
            t(x.matmul(&y))?
        }
        "manual_seed" => {
            a.done(f)?;
            a.arity(f, 1, 1)?;
            eddy_tensor::manual_seed(as_int(&a.pos[0], f)? as u64);
            Value::Unit
        }
        _ => {
            // Any unary method also works as a function: relu(x), exp(x), ...
            if a.pos.len() == 1 && a.named.is_empty() && is_unary(name) {
                let x = a.pos.pop().expect("1");
                return method(x, name, Args::default());
            }
            return Err(format!("unknown function `{name}` (try :help)"));
        }
    };
    Ok(v)
}

fn is_unary(name: &str) -> bool {
    matches!(
        name,
        "neg"
            | "abs"
            | "exp"
            | "log"
            | "sqrt"
            | "rsqrt"
            | "sin"
            | "cos"
            | "tanh"
            | "sigmoid"
            | "relu"
            | "gelu"
            | "silu"
            | "recip"
            | "square"
            | "sign"
            | "floor"
            | "ceil"
            | "round"
            | "trunc"
            | "log1p"
            | "expm1"
            | "log2"
            | "log10"
            | "tan"
            | "atan"
            | "erf"
    )
}

fn unary(t: &Tensor, name: &str) -> crate::Result<Tensor> {
    match name {
        "neg" => t.neg(),
        "abs" => t.abs(),
        "exp" => t.exp(),
        "log" => t.log(),
        "sqrt" => t.sqrt(),
        "rsqrt" => t.rsqrt(),
        "sin" => t.sin(),
        "cos" => t.cos(),
        "tanh" => t.tanh(),
        "sigmoid" => t.sigmoid(),
        "relu" => t.relu(),
        "gelu" => t.gelu(),
        "silu" => t.silu(),
        "recip" => t.recip(),
        "square" => t.square(),
        "floor" => t.floor(),
        "ceil" => t.ceil(),
        "round" => t.round(),
        "trunc" => t.trunc(),
        "log1p" => t.log1p(),
        "expm1" => t.expm1(),
        "log2" => t.log2(),
        "log10" => t.log10(),
        "tan" => t.tan(),
        "atan" => t.atan(),
        "erf" => t.erf(),
        _ => t.sign(),
    }
}

fn attr(recv: Value, name: &str) -> R<Value> {
    let Value::Tensor(t) = recv else {
        return Err(format!("{} has no attribute `{name}`", kind(&recv)));
    };
    Ok(match name {
        "shape" => Value::List(
            t.dims()
                .iter()
                .map(|&d| Value::Num(d as f64, true))
                .collect(),
        ),
        "dtype" => Value::DType(t.dtype()),
        "device" => Value::Str(t.device().to_string()),
        "ndim" => Value::Num(t.rank() as f64, true),
        "numel" => Value::Num(t.numel() as f64, true),
        // PyTorch's `.T`: every dim reversed; a 0-d or 1-d tensor as it is.
        "T" if t.rank() < 2 => Value::Tensor(t),
        "T" => {
            let reversed: Vec<isize> = (0..t.rank() as isize).rev().collect();
            Value::Tensor(t.permute(&reversed).map_err(err)?)
        }
        "grad" => t.grad().map_or(Value::Unit, Value::Tensor),
        "requires_grad" => Value::Bool(t.requires_grad()),
        _ => return Err(format!("a tensor has no attribute `{name}`")),
    })
}

fn method(recv: Value, name: &str, mut a: Args) -> R<Value> {
    let f = name;
    if !matches!(recv, Value::Tensor(_)) {
        return Err(format!("{} has no method `{name}`", kind(&recv)));
    }
    if matches!(
        name,
        "shape" | "dtype" | "device" | "ndim" | "numel" | "grad"
    ) {
        a.done(f)?;
        a.arity(f, 0, 0)?;
        return attr(recv, name);
    }
    let x = as_tensor(recv, f)?;
    let t = |r: crate::Result<Tensor>| r.map(Value::Tensor).map_err(err);
    // (values, indices) as a two-element list, as PyTorch's tuple: `a.sort()[1]`.
    let pair = |r: crate::Result<(Tensor, Tensor)>| {
        r.map(|(v, i)| Value::List(vec![Value::Tensor(v), Value::Tensor(i)]))
            .map_err(err)
    };
    let dim_arg = |a: &Args, i: usize| -> R<isize> {
        a.pos
            .get(i)
            .ok_or(format!("{f}: expected a dim"))
            .and_then(|v| as_int(v, f))
            .map(|d| d as isize)
    };
    // Methods without parameters refuse stray arguments, as Python does.
    if matches!(
        name,
        "contiguous"
            | "detach"
            | "float"
            | "double"
            | "long"
            | "half"
            | "sync"
            | "tolist"
            | "to_vec"
    ) {
        a.done(f)?;
        a.arity(f, 0, 0)?;
    }
    let v = match name {
        _ if is_unary(name) => {
            a.done(f)?;
            a.arity(f, 0, 0)?;
            t(unary(&x, name))?
        }
        "add" | "sub" | "mul" | "div" | "pow" | "maximum" | "minimum" | "eq" | "ne" | "lt"
        | "le" | "gt" | "ge" | "matmul" => {
            a.done(f)?;
            a.arity(f, 1, 1)?;
            let op = match name {
                "add" => Op::Add,
                "sub" => Op::Sub,
                "mul" => Op::Mul,
                "div" => Op::Div,
                "pow" => Op::Pow,
                "maximum" => Op::Max,
                "minimum" => Op::Min,
                "eq" => Op::Eq,
                "ne" => Op::Ne,
                "lt" => Op::Lt,
                "le" => Op::Le,
                "gt" => Op::Gt,
                "ge" => Op::Ge,
                _ => Op::Matmul,
            };
            binary(op, Value::Tensor(x), a.pos.pop().expect("1"))?
        }
        "add_" | "sub_" | "mul_" | "div_" | "copy_" => {
            a.done(f)?;
            a.arity(f, 1, 1)?;
            let arg = a.pos.pop().expect("1");
            if let (Value::Num(c, _), "add_" | "sub_" | "mul_") = (&arg, name) {
                return t(match name {
                    "add_" => x.add_scalar_(*c),
                    "sub_" => x.add_scalar_(-*c),
                    _ => x.mul_scalar_(*c),
                });
            }
            let y = match arg {
                Value::Int(_) => number_like(&arg, &x)?,
                arg => as_tensor(arg, f)?,
            };
            t(match name {
                "add_" => x.add_(&y),
                "sub_" => x.sub_(&y),
                "mul_" => x.mul_(&y),
                "div_" => x.div_(&y),
                _ => x.copy_(&y),
            })?
        }
        "fill_" => {
            a.done(f)?;
            a.arity(f, 1, 1)?;
            t(x.fill_(as_num(&a.pos[0], f)?))?
        }
        "zero_" => {
            a.done(f)?;
            a.arity(f, 0, 0)?;
            t(x.zero_())?
        }
        "sum" | "mean" | "prod" => {
            // No dims: every dim, kept as size 1 with keepdim (`[[total]]` for a matrix).
            let keep = a.keepdim(f)?;
            let dims = a.dims_or_all(f, x.rank())?;
            t(match name {
                "sum" => x.sum(&dims, keep),
                "mean" => x.mean(&dims, keep),
                _ => x.prod(&dims, keep),
            })?
        }
        "var" | "std" => {
            // PyTorch's defaults: every dim, correction 1.
            let keep = a.keepdim(f)?;
            let correction = a.named("correction").map_or(Ok(1), |v| as_usize(&v, f))?;
            let dims = a.dims_or_all(f, x.rank())?;
            t(if name == "var" {
                x.var(&dims, correction, keep)
            } else {
                x.std(&dims, correction, keep)
            })?
        }
        "cumsum" => {
            a.take_dim(f, 0)?;
            a.arity(f, 1, 1)?;
            t(x.cumsum(dim_arg(&a, 0)?))?
        }
        "logsumexp" | "any" | "all" | "norm" => {
            // PyTorch's defaults: every dim (logsumexp needs one there), p = 2.
            let keep = a.keepdim(f)?;
            let p = if name == "norm" {
                a.named("p").map_or(Ok(2.0), |v| as_num(&v, f))?
            } else {
                0.0
            };
            let dims = a.dims_or_all(f, x.rank())?;
            t(match name {
                "logsumexp" => x.logsumexp(&dims, keep),
                "any" => x.any(&dims, keep),
                "all" => x.all(&dims, keep),
                _ => x.norm(p, &dims, keep),
            })?
        }
        "argsort" => {
            let descending = a
                .named("descending")
                .map_or(Ok(false), |v| as_bool(&v, f))?;
            t(x.argsort(a.dim_or_last(f)?, descending))?
        }
        "sort" => {
            let descending = a
                .named("descending")
                .map_or(Ok(false), |v| as_bool(&v, f))?;
            pair(x.sort(a.dim_or_last(f)?, descending))?
        }
        "topk" => {
            // PyTorch's form: topk(k, dim=-1, largest=True).
            let largest = a.named("largest").map_or(Ok(true), |v| as_bool(&v, f))?;
            a.take_dim(f, 1)?;
            a.arity(f, 1, 2)?;
            let k = as_usize(&a.pos[0], f)?;
            let dim = a.pos.get(1).map_or(Ok(-1), |v| as_int(v, f))? as isize;
            pair(x.topk(k, dim, largest))?
        }
        "median" => {
            // No dim: the median of every element (a value); a dim: (values, indices).
            let keep = a.keepdim(f)?;
            a.take_dim(f, 0)?;
            a.arity(f, 0, 1)?;
            match a.pos.first() {
                None => t(x
                    .flatten_all()
                    .and_then(|v| v.median(0, false))
                    .map(|p| p.0))?,
                Some(d) => pair(x.median(as_int(d, f)? as isize, keep))?,
            }
        }
        "logical_and" | "logical_or" | "logical_xor" => {
            a.done(f)?;
            a.arity(f, 1, 1)?;
            let y = as_tensor(a.pos.pop().expect("1"), f)?;
            t(match name {
                "logical_and" => x.logical_and(&y),
                "logical_or" => x.logical_or(&y),
                _ => x.logical_xor(&y),
            })?
        }
        "leaky_relu" | "elu" | "softplus" => {
            // PyTorch's parameter names and defaults.
            let (key, default) = match name {
                "leaky_relu" => ("negative_slope", 0.01),
                "elu" => ("alpha", 1.0),
                _ => ("beta", 1.0),
            };
            let threshold = if name == "softplus" {
                a.named("threshold").map_or(Ok(20.0), |v| as_num(&v, f))?
            } else {
                0.0
            };
            if let Some(v) = a.named(key) {
                a.pos.push(v);
            }
            a.done(f)?;
            a.arity(f, 0, 1)?;
            let p = a.pos.first().map_or(Ok(default), |v| as_num(v, f))?;
            t(match name {
                "leaky_relu" => x.leaky_relu(p),
                "elu" => x.elu(p),
                _ => x.softplus(p, threshold),
            })?
        }
        "dropout" => {
            // PyTorch's `F.dropout(x, p=0.5, training=True)`.
            let training = a.named("training").map_or(Ok(true), |v| as_bool(&v, f))?;
            if let Some(v) = a.named("p") {
                a.pos.push(v);
            }
            a.done(f)?;
            a.arity(f, 0, 1)?;
            let p = a.pos.first().map_or(Ok(0.5), |v| as_num(v, f))?;
            t(x.dropout(p, training))?
        }
        "logical_not" => {
            a.done(f)?;
            a.arity(f, 0, 0)?;
            t(x.logical_not())?
        }
        "flip" => {
            if let Some(d) = a.named("dims") {
                a.pos.push(d);
            }
            a.done(f)?;
            let dims: Vec<isize> = a.idims(f)?.into_iter().map(|d| d as isize).collect();
            t(x.flip(&dims))?
        }
        "tril" | "triu" => {
            if let Some(d) = a.named("diagonal") {
                a.pos.push(d);
            }
            a.done(f)?;
            a.arity(f, 0, 1)?;
            let k = a.pos.first().map_or(Ok(0), |v| as_int(v, f))?;
            t(if name == "tril" { x.tril(k) } else { x.triu(k) })?
        }
        "max" | "min" | "argmax" | "argmin" => {
            // No dim: over every element (max and min a value; argmax and argmin with keepdim
            // keep every dim as 1, as PyTorch). A dim: max and min give PyTorch's (values,
            // indices) pair, `x.max(1)[1]` the positions.
            let keep = a.keepdim(f)?;
            a.take_dim(f, 0)?;
            a.arity(f, 0, 1)?;
            if a.pos.is_empty() {
                let ones = vec![1usize; if keep { x.rank() } else { 0 }];
                match name {
                    // PyTorch has no max(keepdim=...) without a dim: a TypeError there.
                    "max" | "min" if keep => return Err(format!("{f}: keepdim needs a dim")),
                    "max" => t(x.max_all())?,
                    "min" => t(x.min_all())?,
                    "argmax" => t(x
                        .flatten_all()
                        .and_then(|v| v.argmax(0, false)?.reshape(ones)))?,
                    _ => t(x
                        .flatten_all()
                        .and_then(|v| v.argmin(0, false)?.reshape(ones)))?,
                }
            } else {
                let d = dim_arg(&a, 0)?;
                match name {
                    "max" => pair(
                        x.max(d, keep)
                            .and_then(|v| x.argmax(d, keep).map(|i| (v, i))),
                    )?,
                    "min" => pair(
                        x.min(d, keep)
                            .and_then(|v| x.argmin(d, keep).map(|i| (v, i))),
                    )?,
                    "argmax" => t(x.argmax(d, keep))?,
                    _ => t(x.argmin(d, keep))?,
                }
            }
        }
        "softmax" | "log_softmax" => {
            let d = a.dim_or_last(f)?;
            t(if name == "softmax" {
                x.softmax(d)
            } else {
                x.log_softmax(d)
            })?
        }
        "cross_entropy" | "nll_loss" | "mse_loss" | "where_" | "embedding" => {
            a.done(f)?;
            let n = if name == "where_" { 2 } else { 1 };
            a.arity(f, n, n)?;
            let mut it = a.pos.into_iter();
            let y = as_tensor(it.next().expect("arity"), f)?;
            match name {
                "cross_entropy" => t(x.cross_entropy(&y))?,
                "nll_loss" => t(x.nll_loss(&y))?,
                "mse_loss" => t(x.mse_loss(&y))?,
                "embedding" => t(x.embedding(&y))?,
                _ => {
                    let z = as_tensor(it.next().expect("arity"), f)?;
                    t(x.where_(&y, &z))?
                }
            }
        }
        "reshape" | "view" | "expand" | "broadcast_to" => {
            a.done(f)?;
            let dims = a.idims(f)?;
            check_rank(f, dims.len())?;
            // One -1 in reshape/view is inferred from the element count.
            let n_infer = dims.iter().filter(|&&d| d == -1).count();
            let dims: Vec<usize> = if n_infer == 1 && matches!(name, "reshape" | "view") {
                if let Some(&d) = dims.iter().find(|&&d| d < -1) {
                    return Err(format!("{f}: bad size {d}"));
                }
                // The other sizes' product, or None past i64 (then nothing divides evenly).
                let known = dims
                    .iter()
                    .filter(|&&d| d != -1)
                    .try_fold(1i64, |p, &d| p.checked_mul(d))
                    .unwrap_or(0);
                if known == 0 || x.numel() as i64 % known != 0 {
                    return Err(format!(
                        "{f}: cannot infer -1 in {dims:?} for {} elements",
                        x.numel()
                    ));
                }
                dims.iter()
                    .map(|&d| if d == -1 { x.numel() as i64 / known } else { d } as usize)
                    .collect()
            } else {
                dims.iter()
                    .map(|&d| usize::try_from(d).map_err(|_| format!("{f}: bad size {d}")))
                    .collect::<R<_>>()?
            };
            match name {
                "reshape" => t(x.reshape(dims))?,
                "view" => t(x.view(dims))?,
                _ => t(x.expand(dims))?,
            }
        }
        "permute" => {
            a.done(f)?;
            let p: Vec<isize> = a.idims(f)?.into_iter().map(|d| d as isize).collect();
            t(x.permute(&p))?
        }
        "transpose" => {
            a.done(f)?;
            a.arity(f, 2, 2)?;
            t(x.transpose(dim_arg(&a, 0)?, dim_arg(&a, 1)?))?
        }
        "t" => {
            a.done(f)?;
            a.arity(f, 0, 0)?;
            t(x.t())?
        }
        "narrow" => {
            a.done(f)?;
            a.arity(f, 3, 3)?;
            t(x.narrow(
                dim_arg(&a, 0)?,
                as_usize(&a.pos[1], f)?,
                as_usize(&a.pos[2], f)?,
            ))?
        }
        "select" => {
            a.done(f)?;
            a.arity(f, 2, 2)?;
            t(x.select(dim_arg(&a, 0)?, as_usize(&a.pos[1], f)?))?
        }
        "squeeze" | "unsqueeze" => {
            a.done(f)?;
            a.arity(f, 1, 1)?;
            let d = dim_arg(&a, 0)?;
            t(if name == "squeeze" {
                x.squeeze(d)
            } else {
                x.unsqueeze(d)
            })?
        }
        "flatten" => {
            // PyTorch's flatten(start_dim=0, end_dim=-1).
            let start = a.param(f, 0, "start_dim")?;
            let end = a.param(f, 1, "end_dim")?;
            a.done(f)?;
            a.arity(f, 0, 2)?;
            let start = start.map_or(Ok(0), |v| as_int(&v, f))?;
            let end = end.map_or(Ok(-1), |v| as_int(&v, f))?;
            t(x.flatten(start as isize, end as isize))?
        }
        "contiguous" => t(x.contiguous())?,
        "detach" => Value::Tensor(x.detach()),
        "clamp" => {
            let lo = a.named("min").map(|v| as_num(&v, f)).transpose()?;
            let hi = a.named("max").map(|v| as_num(&v, f)).transpose()?;
            a.done(f)?;
            a.arity(f, 0, 2)?;
            let lo = lo.or(a.pos.first().map(|v| as_num(v, f)).transpose()?);
            let hi = hi.or(a.pos.get(1).map(|v| as_num(v, f)).transpose()?);
            t(x.clamp(lo, hi))?
        }
        "index_select" | "gather" => {
            a.done(f)?;
            a.arity(f, 2, 2)?;
            let d = dim_arg(&a, 0)?;
            let idx = as_tensor(a.pos.pop().expect("2"), f)?;
            t(if name == "gather" {
                x.gather(d, &idx)
            } else {
                x.index_select(d, &idx)
            })?
        }
        "to" | "to_dtype" | "type" => {
            let dt = a.dtype(f, x.dtype())?;
            a.done(f)?;
            a.arity(f, 0, 1)?;
            let dt = match a.pos.first() {
                None => dt,
                Some(Value::DType(d)) => *d,
                Some(v) => return Err(format!("{f}: expected a dtype, got {}", kind(v))),
            };
            t(x.to_dtype(dt))?
        }
        "float" => t(x.to_dtype(DType::F32))?,
        "double" => t(x.to_dtype(DType::F64))?,
        "long" => t(x.to_dtype(DType::I64))?,
        "half" => t(x.to_dtype(DType::F16))?,
        "requires_grad_" => {
            a.done(f)?;
            a.arity(f, 0, 1)?;
            let on = a.pos.first().map_or(Ok(true), |v| as_bool(v, f))?;
            Value::Tensor(x.requires_grad_(on))
        }
        "backward" => {
            a.done(f)?;
            a.arity(f, 0, 0)?;
            x.backward().map_err(err)?;
            Value::Unit
        }
        "item" => {
            a.done(f)?;
            a.arity(f, 0, 0)?;
            if x.numel() != 1 {
                return Err(format!(
                    "item: the tensor has {} elements, not 1",
                    x.numel()
                ));
            }
            if x.dtype() == DType::I64 {
                return Ok(Value::int(x.item::<i64>().map_err(err)?));
            }
            let v = x.to_scalar().map_err(err)?;
            match x.dtype() {
                DType::Bool => Value::Bool(v != 0.0),
                d => Value::Num(v, !d.is_float()),
            }
        }
        "tolist" | "to_vec" => {
            // A list per index into every dim but the last: 1 + d0 + d0*d1 + … of them. Both
            // counts saturate, and past TOLIST_MAX the call is refused rather than exhaust
            // memory (`zeros(4294967296, 0)` has no values but 2^32 lists).
            let (mut lists, mut values) = (0usize, 1usize);
            for &d in x.dims() {
                lists = lists.saturating_add(values);
                values = values.saturating_mul(d);
            }
            if values > TOLIST_MAX || lists > TOLIST_MAX {
                return Err(format!(
                    "{f}: a tensor of shape {:?} makes {values} values in {lists} lists, more than {TOLIST_MAX}",
                    x.dims()
                ));
            }
            // Python's element types: bool, int (exact for `i64`) or float.
            if x.dtype() == DType::I64 {
                let vals = x.to_vec::<i64>().map_err(err)?;
                return Ok(nest(x.dims(), &vals, Value::int));
            }
            let vals = x.to_f64_vec().map_err(err)?;
            let leaf = match x.dtype() {
                DType::Bool => |v: f64| Value::Bool(v != 0.0),
                d if d.is_float() => |v: f64| Value::Num(v, false),
                _ => |v: f64| Value::Num(v, true),
            };
            fn nest<T: Copy>(dims: &[usize], vals: &[T], leaf: fn(T) -> Value) -> Value {
                match dims.split_first() {
                    None => leaf(vals[0]),
                    Some((&n, rest)) => {
                        // Saturating: with `n` 0 the others may be huge (`[0, 2^32, 2^32]`);
                        // else their product is at most the element count.
                        let inner = rest.iter().fold(1usize, |p, &d| p.saturating_mul(d));
                        Value::List(
                            (0..n)
                                .map(|i| nest(rest, &vals[i * inner..(i + 1) * inner], leaf))
                                .collect(),
                        )
                    }
                }
            }
            nest(x.dims(), &vals, leaf)
        }
        "sync" => {
            x.sync().map_err(err)?;
            Value::Tensor(x)
        }
        _ => return Err(format!("a tensor has no method `{name}` (try :help)")),
    };
    Ok(v)
}

/// Binary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Matmul,
    Max,
    Min,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

fn binary(op: Op, a: Value, b: Value) -> R<Value> {
    use Op::*;
    let t = |r: crate::Result<Tensor>| r.map(Value::Tensor).map_err(err);
    // Integers within `i64` compute exactly, as Python's do; one that overflows `i64` goes on
    // as an `f64` below (`2 ** 63` is 9223372036854775808.0's integer).
    if let (Some(x), Some(y)) = (a.exact_int(), b.exact_int()) {
        let r = match op {
            Add => x.checked_add(y),
            Sub => x.checked_sub(y),
            Mul => x.checked_mul(y),
            Pow => u32::try_from(y).ok().and_then(|y| x.checked_pow(y)),
            Max => Some(x.max(y)),
            Min => Some(x.min(y)),
            Eq => return Ok(Value::Bool(x == y)),
            Ne => return Ok(Value::Bool(x != y)),
            Lt => return Ok(Value::Bool(x < y)),
            Le => return Ok(Value::Bool(x <= y)),
            Gt => return Ok(Value::Bool(x > y)),
            Ge => return Ok(Value::Bool(x >= y)),
            Div | Matmul => None,
        };
        if let Some(r) = r {
            return Ok(Value::int(r));
        }
    }
    // Beside another number an `Int` is its `f64`; beside a tensor or a list it takes the
    // path of `Num` operands that meet the other's dtype (below), exactly (`number_like`).
    let (a, b) = if is_number(&a) && is_number(&b) {
        let float = |v| match v {
            Value::Int(i) => Value::Num(i as f64, true),
            v => v,
        };
        (float(a), float(b))
    } else {
        (a, b)
    };
    match (a, b) {
        (Value::Num(x, xi), Value::Num(y, yi)) => {
            let int = xi && yi;
            Ok(match op {
                Add => Value::Num(x + y, int),
                Sub => Value::Num(x - y, int),
                Mul => Value::Num(x * y, int),
                Div => Value::Num(x / y, false),
                Pow => Value::Num(x.powf(y), int && y >= 0.0),
                Max => Value::Num(x.max(y), int),
                Min => Value::Num(x.min(y), int),
                Eq => Value::Bool(x == y),
                Ne => Value::Bool(x != y),
                Lt => Value::Bool(x < y),
                Le => Value::Bool(x <= y),
                Gt => Value::Bool(x > y),
                Ge => Value::Bool(x >= y),
                Matmul => return Err("@ needs tensors".into()),
            })
        }
        (Value::Tensor(x), Value::Num(c, _)) if op != Matmul && op != Max && op != Min => {
            t(match op {
                Add => x.add_scalar(c),
                Sub => x.sub_scalar(c),
                Mul => x.mul_scalar(c),
                Div => x.div_scalar(c),
                Pow => x.pow_scalar(c),
                Eq => x.eq_scalar(c),
                Ne => x.ne_scalar(c),
                Lt => x.lt_scalar(c),
                Le => x.le_scalar(c),
                Gt => x.gt_scalar(c),
                _ => x.ge_scalar(c),
            })
        }
        (Value::Num(c, _), Value::Tensor(y)) if matches!(op, Add | Sub | Mul) => t(match op {
            Add => y.add_scalar(c),
            Sub => y.rsub_scalar(c),
            _ => y.mul_scalar(c),
        }),
        // A number left of a comparison is the mirrored comparison with it on the right, which
        // compares it exactly at the tensor's dtype (`0.1 > t` for an f64 `t` of 0.1 is false).
        (Value::Num(c, int), Value::Tensor(y)) if matches!(op, Eq | Ne | Lt | Le | Gt | Ge) => {
            let mirrored = match op {
                Lt => Gt,
                Le => Ge,
                Gt => Lt,
                Ge => Le,
                same => same,
            };
            binary(mirrored, Value::Tensor(y), Value::Num(c, int))
        }
        (a, b) => {
            // A number meets the other operand's dtype, converted once from its f64 value
            // (`2 / t` stays f32 for an f32 `t`; `0.1 ** t` is f64's 0.1 for an f64 `t`).
            let (x, y) = match (a, b) {
                (a, b) if is_number(&a) => {
                    let y = as_tensor(b, "operator")?;
                    (number_like(&a, &y)?, y)
                }
                (a, b) if is_number(&b) => {
                    let x = as_tensor(a, "operator")?;
                    let y = number_like(&b, &x)?;
                    (x, y)
                }
                (a, b) => (as_tensor(a, "operator")?, as_tensor(b, "operator")?),
            };
            // A 0-d tensor on the left takes the other's dtype of its own category (float or
            // integer): PyTorch's 0-d operands do not promote within one (`x.sum() / t` stays
            // f16 for an f16 `t`), while `x.sum() / i` is a float for an integer `i`.
            let (dx, dy) = (x.dtype(), y.dtype());
            let x = if x.rank() == 0
                && dx != dy
                && ((dx.is_float() && dy.is_float()) || (dx.is_int() && dy.is_int()))
            {
                x.to_dtype(y.dtype()).map_err(err)?
            } else {
                x
            };
            t(match op {
                Add => x.add(&y),
                Sub => x.sub(&y),
                Mul => x.mul(&y),
                Div => x.div(&y),
                Pow => x.pow(&y),
                Matmul => x.matmul(&y),
                Max => x.maximum(&y),
                Min => x.minimum(&y),
                Eq => x.eq(&y),
                Ne => x.ne(&y),
                Lt => x.lt(&y),
                Le => x.le(&y),
                Gt => x.gt(&y),
                Ge => x.ge(&y),
            })
        }
    }
}

// ---- syntax ----

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Num(f64, bool),
    /// An integer literal beyond ±2^53 that `i64` holds (see [`Value::Int`]).
    Int(i64),
    Str(String),
    Sym(&'static str),
}

fn lex(s: &str) -> R<Vec<Tok>> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    const SYMS: [&str; 20] = [
        "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "@", "<", ">", "(", ")", "[", "]", ",",
        ".", "=", ":",
    ];
    while i < b.len() {
        let c = b[i] as char;
        if c.is_whitespace() {
            i += 1;
        } else if c == '#' {
            break;
        } else if c.is_ascii_digit() || (c == '.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            let st = i;
            let mut int = true;
            while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.' || b[i] == b'_') {
                if b[i] == b'.' {
                    // `1.relu()` is not a thing; `1.5` and `1.` are numbers.
                    if b.get(i + 1).is_some_and(|c| c.is_ascii_alphabetic()) {
                        break;
                    }
                    int = false;
                }
                i += 1;
            }
            if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
                let mut j = i + 1;
                if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
                    j += 1;
                }
                if j < b.len() && b[j].is_ascii_digit() {
                    int = false;
                    i = j;
                    while i < b.len() && b[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            let text: String = s[st..i].chars().filter(|&c| c != '_').collect();
            match text.parse::<i64>() {
                Ok(v) if int && v.unsigned_abs() > 1 << 53 => out.push(Tok::Int(v)),
                _ => {
                    let v: f64 = text
                        .parse()
                        .map_err(|_| format!("bad number `{}`", &s[st..i]))?;
                    out.push(Tok::Num(v, int));
                }
            }
        } else if c.is_ascii_alphabetic() || c == '_' {
            let st = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Ident(s[st..i].to_string()));
        } else if c == '"' || c == '\'' {
            let end = s[i + 1..].find(c).ok_or("unterminated string")?;
            out.push(Tok::Str(s[i + 1..i + 1 + end].to_string()));
            i += end + 2;
        } else if let Some(sym) = SYMS.iter().find(|p| s[i..].starts_with(**p)) {
            out.push(Tok::Sym(sym));
            i += sym.len();
        } else {
            let ch = s[i..].chars().next().unwrap_or('?');
            return Err(format!("unexpected character `{ch}` at column {}", i + 1));
        }
    }
    Ok(out)
}

/// A call's arguments: each with its keyword, if named.
type CallArgs = Vec<(Option<String>, Expr)>;

#[derive(Clone, Debug)]
enum Expr {
    Num(f64, bool),
    Int(i64),
    Str(String),
    Var(String),
    List(Vec<Expr>),
    Neg(Box<Expr>),
    Bin(Op, Box<Expr>, Box<Expr>),
    Call(String, CallArgs),
    Method(Box<Expr>, String, CallArgs),
    Attr(Box<Expr>, String),
    Index(Box<Expr>, Vec<IndexItem>),
}

#[derive(Clone, Debug)]
enum IndexItem {
    All,
    At(Expr),
    Range(Option<Expr>, Option<Expr>),
}

enum Stmt {
    Let(String, Expr),
    Expr(Expr),
}

/// A parsed expression and the depth of its tree (a leaf is 1).
type Node = (Expr, usize);

/// The depth of a node over children at most `below` deep, or the error past [`MAX_DEPTH`]:
/// checked before the node is built, so no tree deeper than that exists, even the partial one of
/// a refused line (whose dropping recurses too).
fn deeper(below: usize) -> R<usize> {
    if below >= MAX_DEPTH {
        return Err(too_deep());
    }
    Ok(below + 1)
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
    /// How many [`unary`](Self::unary) calls are open: every nesting of the grammar (brackets,
    /// arguments, unary signs, `**`) passes there, so this bounds the parser's own recursion,
    /// also where no node is built (`((((1))))`, `+ + 1`).
    nesting: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }
    fn is(&self, sym: &str) -> bool {
        matches!(self.peek(), Some(Tok::Sym(s)) if *s == sym)
    }
    fn eat(&mut self, sym: &str) -> bool {
        if self.is(sym) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, sym: &str) -> R<()> {
        if self.eat(sym) {
            Ok(())
        } else {
            Err(format!("expected `{sym}`, found {}", self.found()))
        }
    }
    fn found(&self) -> String {
        match self.peek() {
            None => "the end of the line".into(),
            Some(Tok::Ident(s)) => format!("`{s}`"),
            Some(Tok::Num(v, _)) => format!("`{v}`"),
            Some(Tok::Int(i)) => format!("`{i}`"),
            Some(Tok::Str(s)) => format!("{s:?}"),
            Some(Tok::Sym(s)) => format!("`{s}`"),
        }
    }
    fn expect_end(&self) -> R<()> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(format!("unexpected {}", self.found())),
        }
    }
    fn ident(&mut self) -> R<String> {
        match self.peek() {
            Some(Tok::Ident(s)) => {
                let s = s.clone();
                self.pos += 1;
                Ok(s)
            }
            _ => Err(format!("expected a name, found {}", self.found())),
        }
    }
    fn statement(&mut self) -> R<Stmt> {
        if matches!(self.peek(), Some(Tok::Ident(s)) if s == "let") {
            self.pos += 1;
            let name = self.ident()?;
            self.expect("=")?;
            return Ok(Stmt::Let(name, self.expr()?.0));
        }
        // `a = expr` also binds.
        if let (Some(Tok::Ident(name)), Some(Tok::Sym("="))) = (self.toks.first(), self.toks.get(1))
        {
            let name = name.clone();
            self.pos = 2;
            return Ok(Stmt::Let(name, self.expr()?.0));
        }
        Ok(Stmt::Expr(self.expr()?.0))
    }
    fn expr(&mut self) -> R<Node> {
        let (a, da) = self.additive()?;
        let op = match self.peek() {
            Some(Tok::Sym("==")) => Op::Eq,
            Some(Tok::Sym("!=")) => Op::Ne,
            Some(Tok::Sym("<")) => Op::Lt,
            Some(Tok::Sym("<=")) => Op::Le,
            Some(Tok::Sym(">")) => Op::Gt,
            Some(Tok::Sym(">=")) => Op::Ge,
            _ => return Ok((a, da)),
        };
        self.pos += 1;
        let (b, db) = self.additive()?;
        let d = deeper(da.max(db))?;
        Ok((Expr::Bin(op, Box::new(a), Box::new(b)), d))
    }
    fn additive(&mut self) -> R<Node> {
        // The loop builds a left-nested tree: `1+1+…+1` is as deep as it is long.
        let (mut a, mut da) = self.term()?;
        loop {
            let op = if self.eat("+") {
                Op::Add
            } else if self.eat("-") {
                Op::Sub
            } else {
                return Ok((a, da));
            };
            let (b, db) = self.term()?;
            da = deeper(da.max(db))?;
            a = Expr::Bin(op, Box::new(a), Box::new(b));
        }
    }
    fn term(&mut self) -> R<Node> {
        let (mut a, mut da) = self.unary()?;
        loop {
            let op = if self.eat("*") {
                Op::Mul
            } else if self.eat("/") {
                Op::Div
            } else if self.eat("@") {
                Op::Matmul
            } else {
                return Ok((a, da));
            };
            let (b, db) = self.unary()?;
            da = deeper(da.max(db))?;
            a = Expr::Bin(op, Box::new(a), Box::new(b));
        }
    }
    /// Counts itself in [`nesting`](Self::nesting) around [`signed`](Self::signed).
    fn unary(&mut self) -> R<Node> {
        if self.nesting >= MAX_DEPTH {
            return Err(too_deep());
        }
        self.nesting += 1;
        let r = self.signed();
        self.nesting -= 1;
        r
    }
    fn signed(&mut self) -> R<Node> {
        if self.eat("-") {
            let (x, d) = self.unary()?;
            return Ok((Expr::Neg(Box::new(x)), deeper(d)?));
        }
        if self.eat("+") {
            return self.unary();
        }
        let (base, db) = self.postfix()?;
        if self.eat("**") {
            // Right-associative and tighter than unary minus on its left: -2**2 == -4.
            let (exp, de) = self.unary()?;
            let d = deeper(db.max(de))?;
            return Ok((Expr::Bin(Op::Pow, Box::new(base), Box::new(exp)), d));
        }
        Ok((base, db))
    }
    fn postfix(&mut self) -> R<Node> {
        let (mut e, mut d) = self.primary()?;
        loop {
            if self.eat(".") {
                let name = self.ident()?;
                if self.eat("(") {
                    let (args, da) = self.args(")")?;
                    d = deeper(d.max(da))?;
                    e = Expr::Method(Box::new(e), name, args);
                } else {
                    d = deeper(d)?;
                    e = Expr::Attr(Box::new(e), name);
                }
            } else if self.eat("[") {
                let (mut items, mut di) = (Vec::new(), 0);
                loop {
                    let (item, depth) = self.index_item()?;
                    items.push(item);
                    di = di.max(depth);
                    if !self.eat(",") {
                        break;
                    }
                }
                self.expect("]")?;
                d = deeper(d.max(di))?;
                e = Expr::Index(Box::new(e), items);
            } else {
                return Ok((e, d));
            }
        }
    }
    /// An index item and the depth of its deepest bound (0 for `:`).
    fn index_item(&mut self) -> R<(IndexItem, usize)> {
        let lo = if self.is(":") {
            None
        } else {
            Some(self.expr()?)
        };
        if !self.eat(":") {
            return lo
                .map(|(e, d)| (IndexItem::At(e), d))
                .ok_or("empty index".into());
        }
        let hi = if self.is(",") || self.is("]") {
            None
        } else {
            Some(self.expr()?)
        };
        let d = lo
            .as_ref()
            .map_or(0, |n| n.1)
            .max(hi.as_ref().map_or(0, |n| n.1));
        let item = match (lo, hi) {
            (None, None) => IndexItem::All,
            (lo, hi) => IndexItem::Range(lo.map(|n| n.0), hi.map(|n| n.0)),
        };
        Ok((item, d))
    }
    /// Arguments up to `close`, and the depth of the deepest (0 for none).
    fn args(&mut self, close: &str) -> R<(CallArgs, usize)> {
        let (mut out, mut depth) = (Vec::new(), 0);
        if self.eat(close) {
            return Ok((out, depth));
        }
        loop {
            let named = match (self.peek(), self.toks.get(self.pos + 1)) {
                (Some(Tok::Ident(n)), Some(Tok::Sym("="))) => Some(n.clone()),
                _ => None,
            };
            if named.is_some() {
                self.pos += 2;
            }
            let (e, d) = self.expr()?;
            depth = depth.max(d);
            out.push((named, e));
            if self.eat(close) {
                return Ok((out, depth));
            }
            self.expect(",")?;
            if self.eat(close) {
                return Ok((out, depth));
            }
        }
    }
    fn primary(&mut self) -> R<Node> {
        match self.peek().cloned() {
            Some(Tok::Num(v, int)) => {
                self.pos += 1;
                Ok((Expr::Num(v, int), 1))
            }
            Some(Tok::Int(i)) => {
                self.pos += 1;
                Ok((Expr::Int(i), 1))
            }
            Some(Tok::Str(s)) => {
                self.pos += 1;
                Ok((Expr::Str(s), 1))
            }
            Some(Tok::Ident(name)) => {
                self.pos += 1;
                if self.eat("(") {
                    let (args, d) = self.args(")")?;
                    Ok((Expr::Call(name, args), deeper(d)?))
                } else {
                    Ok((Expr::Var(name), 1))
                }
            }
            Some(Tok::Sym("(")) => {
                self.pos += 1;
                let e = self.expr()?;
                self.expect(")")?;
                Ok(e)
            }
            Some(Tok::Sym("[")) => {
                self.pos += 1;
                let (items, d) = self.args("]")?;
                if items.iter().any(|(n, _)| n.is_some()) {
                    return Err("a list cannot have named items".into());
                }
                let list = Expr::List(items.into_iter().map(|(_, e)| e).collect());
                Ok((list, deeper(d)?))
            }
            _ => Err(format!("expected a value, found {}", self.found())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> Session {
        Session::new(Vm::builder().build().unwrap())
    }

    fn out(s: &mut Session, line: &str) -> String {
        match s.eval_line(line) {
            Ok(Outcome::Print(p)) => p,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn integers_beyond_2_pow_53_stay_exact() {
        let mut s = session();
        // Literals and integer arithmetic, as Python's `int` (2^53 + 1 is not an `f64`).
        assert_eq!(out(&mut s, "9007199254740993"), "9007199254740993");
        assert_eq!(out(&mut s, "2 ** 53 + 1"), "9007199254740993");
        assert_eq!(out(&mut s, "-9007199254740993 - 2"), "-9007199254740995");
        assert_eq!(out(&mut s, "9007199254740993 == 9007199254740992"), "false");
        assert_eq!(out(&mut s, "9007199254740993 / 1"), "9007199254740992"); // a float
        // Past `i64` an integer goes on as the `f64` it is.
        assert_eq!(
            out(&mut s, "9223372036854775807 + 1"),
            "9223372036854775808"
        );
        assert_eq!(
            out(&mut s, "-(-9223372036854775807 - 1)"),
            "9223372036854775808"
        );
        // Into and out of `i64` tensors, exactly.
        out(
            &mut s,
            "let x = tensor([9007199254740993, -9007199254740995, 1])",
        );
        assert_eq!(out(&mut s, "x.dtype"), "i64");
        assert_eq!(
            out(&mut s, "x.tolist()"),
            "[9007199254740993, -9007199254740995, 1]"
        );
        assert_eq!(out(&mut s, "x[0].item()"), "9007199254740993");
        assert_eq!(out(&mut s, "(x + 2).tolist()[0]"), "9007199254740995");
        assert_eq!(out(&mut s, "(x - 9007199254740993).tolist()[0]"), "0");
        assert_eq!(
            out(&mut s, "(9007199254740993 - x).tolist()[2]"),
            "9007199254740992"
        );
        assert_eq!(
            out(&mut s, "x.eq(9007199254740993).tolist()"),
            "[true, false, false]"
        );
        assert_eq!(out(&mut s, "(x == 9007199254740992).sum().item()"), "0");
        assert_eq!(
            out(&mut s, "where(x.gt(0), 9007199254740995, x).tolist()"),
            "[9007199254740995, -9007199254740995, 9007199254740995]"
        );
        assert_eq!(
            out(&mut s, "full([2], 9007199254740993).tolist()"),
            "[9007199254740993, 9007199254740993]"
        );
        assert_eq!(
            out(&mut s, "([1, 2] + 9007199254740993).tolist()"),
            "[9007199254740994, 9007199254740995]"
        );
        out(&mut s, "x.add_(9007199254740993)");
        assert_eq!(out(&mut s, "x.tolist()[2]"), "9007199254740994");
        // Other integer dtypes wrap, as PyTorch's scalar operands do (2^53 + 1 ≡ 1 mod 256).
        assert_eq!(
            out(
                &mut s,
                "(tensor([1], dtype=u8) + 9007199254740993).tolist()"
            ),
            "[2]"
        );
        // An `f64` tensor takes the nearest `f64`.
        assert_eq!(
            out(&mut s, "tensor([9007199254740993], dtype=f64).item()"),
            "9007199254740992"
        );
    }

    #[test]
    fn evaluates_expressions_like_pytorch() {
        let mut s = session();
        out(&mut s, "let a = tensor([[1., 2.], [3., 4.]])");
        assert_eq!(out(&mut s, "a.sum()"), "tensor(10.0000, dtype=f32)");
        assert_eq!(
            out(&mut s, "(a @ a.t()).sum(1)"),
            "tensor([16.0000, 36.0000], dtype=f32)"
        );
        assert_eq!(out(&mut s, "a[1, 0].item()"), "3");
        assert_eq!(out(&mut s, "a[:, 1:].shape"), "[2, 1]");
        assert_eq!(out(&mut s, "-2 ** 2 + 10 / 4"), "-1.5");
        assert_eq!(out(&mut s, "(1 - a).max()"), "tensor(0.0000, dtype=f32)");
        assert_eq!(out(&mut s, "a.gt(2).sum().item()"), "2");
        assert_eq!(out(&mut s, "relu(a - 3).tolist()"), "[[0, 0], [0, 1]]");
        assert_eq!(out(&mut s, "arange(4).reshape(2, -1).dtype"), "i64");
        assert_eq!(out(&mut s, "zeros(2, 3, dtype=f64).dtype"), "f64");
        assert_eq!(
            out(&mut s, "a.var().item()"),
            format!("{}", (5.0f32 / 3.0) as f64)
        );
        assert_eq!(
            out(&mut s, "a.std(1, correction=0, keepdim=true).tolist()"),
            "[[0.5], [0.5]]"
        );
        assert_eq!(out(&mut s, "a.cumsum(dim=0).tolist()"), "[[1, 2], [4, 6]]");
        assert_eq!(out(&mut s, "a.flip(1).tolist()"), "[[2, 1], [4, 3]]");
        assert_eq!(out(&mut s, "a.tril().tolist()"), "[[1, 0], [3, 4]]");
        assert_eq!(
            out(&mut s, "a.triu(diagonal=1).tolist()"),
            "[[0, 2], [0, 0]]"
        );
        assert_eq!(
            out(&mut s, "a.argsort(descending=true).tolist()"),
            "[[1, 0], [1, 0]]"
        );
        assert_eq!(
            out(&mut s, "a.sort(0, descending=true)[0].tolist()"),
            "[[3, 4], [1, 2]]"
        );
        assert_eq!(out(&mut s, "a.topk(1, dim=0)[1].tolist()"), "[[1, 1]]");
        assert_eq!(
            out(&mut s, "a.topk(1, largest=false)[-2].tolist()"),
            "[[1], [3]]"
        );
        assert_eq!(out(&mut s, "a.median().item()"), "2");
        assert_eq!(out(&mut s, "a.median(1)[1].tolist()"), "[0, 0]");
        assert!(
            s.eval_line("a.sort()[2]")
                .is_err_and(|e| e.contains("out of range for a list of 2"))
        );
        assert_eq!(
            out(&mut s, "a.gt(1).logical_and(a.lt(4)).tolist()"),
            "[[false, true], [true, false]]"
        );
        assert_eq!(
            out(&mut s, "a.gt(3).logical_or(a.eq(1)).logical_not().tolist()"),
            "[[false, true], [true, false]]"
        );
        assert_eq!(
            out(&mut s, "a.gt(2).logical_xor(a.gt(1)).sum().item()"),
            "1"
        );
        assert_eq!(
            out(&mut s, "(a - 2.5).round().tolist()"),
            "[[-2, -0], [0, 2]]"
        );
        assert_eq!(
            out(&mut s, "(a - 3).leaky_relu(negative_slope=0.5).tolist()"),
            "[[-1, -0.5], [0, 1]]"
        );
        assert_eq!(out(&mut s, "(a - 3).elu(2)[1].tolist()"), "[0, 1]");
        assert!(out(&mut s, "(a - 3).elu(2)[0, 1].item()").starts_with("-1.264"));
        assert_eq!(
            out(&mut s, "(a * 10).softplus(threshold=15).tolist()"),
            "[[10.000045776367188, 20], [30, 40]]"
        );
        assert_eq!(out(&mut s, "a.gt(3).any(dim=1).sum().item()"), "1");
        assert_eq!(out(&mut s, "a.all().sum().item()"), "1");
        assert_eq!(out(&mut s, "a.norm(p=1).item()"), "10");
        assert_eq!(out(&mut s, "a.logsumexp(0, keepdim=true).shape"), "[1, 2]");
        assert_eq!(
            out(&mut s, "a.dropout(0.5, training=false).tolist()"),
            "[[1, 2], [3, 4]]"
        );
        assert_eq!(out(&mut s, "a.dropout(p=1).sum().item()"), "0");
        let kept = out(&mut s, "ones(1000).dropout(0.25).ne(0).sum().item()");
        let kept: f64 = kept.parse().unwrap();
        assert!((650.0..850.0).contains(&kept), "{kept}");
        assert!(s.eval_line("a.dropout(2)").is_err());
    }

    #[test]
    fn errors_are_messages_and_the_session_goes_on() {
        let mut s = session();
        out(&mut s, "let a = randn(3, 4)");
        let e = s.eval_line("a.matmul(a)").unwrap_err();
        assert!(e.contains("matmul"), "{e}");
        assert!(
            s.eval_line("b + 1")
                .unwrap_err()
                .contains("unknown name `b`")
        );
        assert!(
            s.eval_line("a.sum(")
                .unwrap_err()
                .contains("expected a value")
        );
        assert!(s.eval_line("a[7]").unwrap_err().contains("out of range"));
        assert!(
            s.eval_line(":bogus")
                .unwrap_err()
                .contains("unknown command")
        );
        assert_eq!(out(&mut s, "a.shape"), "[3, 4]");
        assert_eq!(s.eval_line(":quit").unwrap(), Outcome::Quit);
    }

    #[test]
    fn asynchronous_index_errors_surface_when_printed() {
        let mut s = session();
        out(&mut s, "let e = randn(4, 2)");
        out(&mut s, "let i = tensor([1, 9])");
        let msg = s.eval_line("e.index_select(0, i)").unwrap_err();
        assert!(msg.contains("index_select") && msg.contains('9'), "{msg}");
        assert_eq!(
            out(&mut s, "e.index_select(0, tensor([3])).shape"),
            "[1, 2]"
        );
    }

    #[test]
    fn autograd_and_commands() {
        let mut s = session();
        out(&mut s, "let w = tensor([1., 2., 3.]).requires_grad_()");
        out(&mut s, "(w * w).sum().backward()");
        assert_eq!(out(&mut s, "w.grad.tolist()"), "[2, 4, 6]");
        assert!(out(&mut s, ":stats").contains("instructions inserted"));
        assert!(out(&mut s, ":mem").contains("peak in use"));
        assert_eq!(out(&mut s, ":trace on"), "tracing on");
        out(&mut s, "randn(8, 8).exp().sum()");
        let path = std::env::temp_dir().join(format!("eddy-repl-{}.json", std::process::id()));
        let msg = out(&mut s, &format!(":trace save {}", path.display()));
        assert!(msg.starts_with("wrote "), "{msg}");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"exp\""), "{text}");
        std::fs::remove_file(&path).unwrap();
        assert!(out(&mut s, ":vars").contains("w = tensor [3] f32"));
    }
}
