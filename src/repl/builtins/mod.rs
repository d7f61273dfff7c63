//! The REPL's functions, tensor methods and attributes, as one table: a row each, with its
//! name, its kind and handler, and its signature for `:help`. Calls are looked up here, `:help`
//! is written from here, and a test (`api.rs`) checks the rows against the tensor API, so a new
//! tensor method cannot be added without deciding whether the REPL offers it.
//!
//! The handlers live by group of ops, one file each; adding a builtin is adding a row there.

#[cfg(test)]
mod api;
mod args;
mod elementwise;
mod functions;
mod nn;
mod reduce;
mod shape;
mod values;

pub(super) use args::Args;

use super::Value;
use super::convert::{kind, within_rank};
use super::error::{R, ReplError};
use crate::Tensor;
use std::fmt::Write as _;

/// One row of the table.
struct Builtin {
    /// What the user types.
    name: &'static str,
    /// The signature `:help` shows, with PyTorch's defaults.
    help: &'static str,
    /// Function, method or attribute, with its handler.
    kind: Kind,
}

/// What a builtin is, with its handler. A handler gets its row's name, for its messages.
#[derive(Clone, Copy)]
enum Kind {
    /// `NAME(args)`.
    Function(fn(&'static str, Args) -> R<Value>),
    /// `a.NAME(args)` of a tensor `a`.
    Method(fn(&'static str, Tensor, Args) -> R<Value>),
    /// `a.NAME` of a tensor `a`; with `true`, also `a.NAME()`.
    Attribute(fn(Tensor) -> R<Value>, bool),
}

/// A row for the function `name`.
const fn function(
    name: &'static str,
    help: &'static str,
    run: fn(&'static str, Args) -> R<Value>,
) -> Builtin {
    Builtin {
        name,
        help,
        kind: Kind::Function(run),
    }
}

/// A row for the tensor method `name`.
const fn method(
    name: &'static str,
    help: &'static str,
    run: fn(&'static str, Tensor, Args) -> R<Value>,
) -> Builtin {
    Builtin {
        name,
        help,
        kind: Kind::Method(run),
    }
}

/// A row for the tensor attribute `name`; `callable` if `a.NAME()` works too.
const fn attribute(name: &'static str, get: fn(Tensor) -> R<Value>, callable: bool) -> Builtin {
    Builtin {
        name,
        help: name,
        kind: Kind::Attribute(get, callable),
    }
}

/// A titled group of rows: a section of `:help`.
struct Section {
    title: &'static str,
    rows: &'static [Builtin],
}

/// The table, in the order `:help` lists it.
const TABLE: &[Section] = &[
    Section {
        title: "functions (creation functions take dtype=f64 etc.)",
        rows: functions::ROWS,
    },
    Section {
        title: "methods (a.NAME(..)), elementwise (each also NAME(a))",
        rows: elementwise::UNARY,
    },
    Section {
        title: "elementwise with operands (a tensor or a number)",
        rows: elementwise::BINARY,
    },
    Section {
        title: "in place",
        rows: elementwise::IN_PLACE,
    },
    Section {
        title: "reductions (no dims: every dim; max and min with a dim: [values, indices])",
        rows: reduce::REDUCTIONS,
    },
    Section {
        title: "ordering (sort, topk and median with a dim: [values, indices])",
        rows: reduce::ORDERING,
    },
    Section {
        title: "shape and views",
        rows: shape::VIEWS,
    },
    Section {
        title: "indexing and masks",
        rows: shape::INDEXING,
    },
    Section {
        title: "activations and losses",
        rows: nn::ROWS,
    },
    Section {
        title: "dtypes, autograd and values",
        rows: values::ROWS,
    },
    Section {
        title: "attributes (a.NAME; all but T and requires_grad also a.NAME())",
        rows: values::ATTRIBUTES,
    },
];

/// Every row.
fn rows() -> impl Iterator<Item = &'static Builtin> {
    TABLE.iter().flat_map(|s| s.rows)
}

/// The name and kind of the row named `name` whose kind passes `want`.
fn find(name: &str, want: impl Fn(&Kind) -> bool) -> Option<(&'static str, Kind)> {
    rows()
        .find(|b| b.name == name && want(&b.kind))
        .map(|b| (b.name, b.kind))
}

/// A tensor result as a value.
fn out(r: crate::Result<Tensor>) -> R<Value> {
    Ok(Value::Tensor(r?))
}

/// (values, indices) as a two-element list, as PyTorch's tuple: `a.sort()[1]`.
fn pair(r: crate::Result<(Tensor, Tensor)>) -> R<Value> {
    let (v, i) = r?;
    Ok(Value::List(vec![Value::Tensor(v), Value::Tensor(i)]))
}

/// Calls the function `name`; an elementwise method also works as one (`relu(x)`).
pub(super) fn call_function(name: &str, mut a: Args) -> R<Value> {
    if let Some((name, Kind::Function(run))) = find(name, |k| matches!(k, Kind::Function(_))) {
        return within_rank(name, run(name, a)?);
    }
    if a.pos.len() == 1 && a.named.is_empty() && elementwise::is_unary(name) {
        let x = a.pos.pop().expect("1");
        return call_method(x, name, Args::default());
    }
    Err(ReplError::UnknownFunction { name: name.into() })
}

/// Calls the method `name` of `recv`.
pub(super) fn call_method(recv: Value, name: &str, a: Args) -> R<Value> {
    let Value::Tensor(x) = recv else {
        return Err(ReplError::UnknownMethod {
            name: name.into(),
            on: kind(&recv),
        });
    };
    let callable = |k: &Kind| matches!(k, Kind::Method(_) | Kind::Attribute(_, true));
    match find(name, callable) {
        Some((name, Kind::Method(run))) => within_rank(name, run(name, x, a)?),
        Some((name, Kind::Attribute(get, _))) => {
            a.none(name)?;
            get(x)
        }
        _ => Err(ReplError::UnknownMethod {
            name: name.into(),
            on: "a tensor",
        }),
    }
}

/// The attribute `name` of `recv`.
pub(super) fn get_attribute(recv: Value, name: &str) -> R<Value> {
    let Value::Tensor(x) = recv else {
        return Err(ReplError::UnknownAttribute {
            name: name.into(),
            on: kind(&recv),
        });
    };
    match find(name, |k| matches!(k, Kind::Attribute(..))) {
        Some((_, Kind::Attribute(get, _))) => get(x),
        _ => Err(ReplError::UnknownAttribute {
            name: name.into(),
            on: "a tensor",
        }),
    }
}

/// The syntax part of `:help`.
const SYNTAX: &str = "\
expressions:
  let NAME = EXPR              bind a value (no output)
  EXPR                         evaluate and print
  numbers, [lists], \"strings\", f32 f64 f16 bf16 i64 i32 u8 bool, true false
  operators: + - * / ** @ (matmul) == != < <= > >=, unary -, (...), a[i, j:k, :]
";

/// The commands part of `:help`.
const COMMANDS: &str = "\
commands:
  :stats  engine counters          :mem   allocator figures
  :trace on|off|save FILE(.json|.svg)   :sync  wait for all work, report errors
  :vars   list bindings            :help  this text      :quit  leave";

/// How wide `:help` fills its lines of signatures.
const HELP_WIDTH: usize = 96;

/// The text of `:help`: the syntax, each section of the table with its signatures filled into
/// lines, and the commands.
pub(super) fn help() -> String {
    let mut s = String::from(SYNTAX);
    for section in TABLE {
        let _ = writeln!(s, "{}:", section.title);
        let mut line = String::new();
        for b in section.rows {
            if !line.is_empty() && 2 + line.len() + 2 + b.help.len() > HELP_WIDTH {
                let _ = writeln!(s, "  {line}");
                line.clear();
            }
            if !line.is_empty() {
                line.push_str("  ");
            }
            line.push_str(b.help);
        }
        let _ = writeln!(s, "  {line}");
    }
    s.push_str(COMMANDS);
    s
}
