//! A call's arguments and the checks every handler makes of them, with Python's rules: a
//! parameter given both positionally and by name is an error, and so is a name it does not
//! take.

use crate::DType;
use crate::repl::Value;
use crate::repl::convert::{as_bool, as_int, as_usize, kind};
use crate::repl::error::{R, ReplError};
use std::collections::BTreeMap;

/// Positional and named arguments.
#[derive(Default)]
pub(in crate::repl) struct Args {
    pub(in crate::repl) pos: Vec<Value>,
    pub(in crate::repl) named: BTreeMap<String, Value>,
}

impl Args {
    /// Takes the named argument `k`.
    pub(super) fn named(&mut self, k: &str) -> Option<Value> {
        self.named.remove(k)
    }
    /// Refuses a named argument left over.
    pub(super) fn done(&self, f: &'static str) -> R<()> {
        match self.named.keys().next() {
            Some(k) => Err(ReplError::arg(f, format!("unknown argument `{k}`"))),
            None => Ok(()),
        }
    }
    /// Refuses fewer than `lo` or more than `hi` positional arguments.
    pub(super) fn arity(&self, f: &'static str, lo: usize, hi: usize) -> R<()> {
        let got = self.pos.len();
        if got < lo || got > hi {
            return Err(ReplError::Arity {
                name: f,
                expected: lo..=hi,
                got,
            });
        }
        Ok(())
    }
    /// Refuses every argument: for methods without parameters, as Python does.
    pub(super) fn none(&self, f: &'static str) -> R<()> {
        self.done(f)?;
        self.arity(f, 0, 0)
    }
    /// The positional arguments as a list of sizes: `f(2, 3)` or `f([2, 3])`.
    pub(super) fn dims(&self, f: &'static str) -> R<Vec<usize>> {
        match self.pos.as_slice() {
            [Value::List(l)] => l.iter().map(|v| as_usize(v, f)).collect(),
            vs => vs.iter().map(|v| as_usize(v, f)).collect(),
        }
    }
    /// As [`dims`](Self::dims) but signed (permute, reshape with -1, reductions).
    pub(super) fn idims(&self, f: &'static str) -> R<Vec<i64>> {
        match self.pos.as_slice() {
            [Value::List(l)] => l.iter().map(|v| as_int(v, f)).collect(),
            vs => vs.iter().map(|v| as_int(v, f)).collect(),
        }
    }
    /// Positional argument `i` as a dim.
    pub(super) fn dim_at(&self, f: &'static str, i: usize) -> R<isize> {
        let v = self
            .pos
            .get(i)
            .ok_or_else(|| ReplError::arg(f, "expected a dim"))?;
        Ok(as_int(v, f)? as isize)
    }
    /// The named `dtype`, or `default`.
    pub(super) fn dtype(&mut self, f: &'static str, default: DType) -> R<DType> {
        match self.named("dtype") {
            None => Ok(default),
            Some(Value::DType(d)) => Ok(d),
            Some(v) => Err(ReplError::arg(
                f,
                format!("dtype= expects a dtype, got {}", kind(&v)),
            )),
        }
    }
    /// The named `keepdim`, false by default.
    pub(super) fn keepdim(&mut self, f: &'static str) -> R<bool> {
        self.named("keepdim").map_or(Ok(false), |v| as_bool(&v, f))
    }
    /// Takes a named `dim` as positional argument `at` (the dims, from there on); no other
    /// named one may be left. A dim given both ways is an error, as Python's "got multiple
    /// values for argument" (`x.sum(0, dim=1)` does not sum both).
    pub(super) fn take_dim(&mut self, f: &'static str, at: usize) -> R<()> {
        if let Some(d) = self.named("dim") {
            if self.pos.len() > at {
                return Err(ReplError::arg(f, "got multiple values for argument `dim`"));
            }
            if self.pos.len() < at {
                return Err(ReplError::arg(
                    f,
                    format!(
                        "expected {at} arguments before `dim`, got {}",
                        self.pos.len()
                    ),
                ));
            }
            self.pos.push(d);
        }
        self.done(f)
    }
    /// Argument `at`, given positionally or as `key=` (not both, as Python); `None` if neither.
    pub(super) fn param(&mut self, f: &'static str, at: usize, key: &str) -> R<Option<Value>> {
        let named = self.named(key);
        match (self.pos.get(at), named) {
            (Some(_), Some(_)) => Err(ReplError::arg(
                f,
                format!("got multiple values for argument `{key}`"),
            )),
            (Some(v), None) => Ok(Some(v.clone())),
            (None, v) => Ok(v),
        }
    }
    /// The dims given (positionally or as `dim=`), or all `rank` of them when none is.
    pub(super) fn dims_or_all(&mut self, f: &'static str, rank: usize) -> R<Vec<isize>> {
        self.take_dim(f, 0)?;
        let dims: Vec<isize> = self.idims(f)?.into_iter().map(|d| d as isize).collect();
        Ok(if dims.is_empty() {
            (0..rank as isize).collect()
        } else {
            dims
        })
    }
    /// One dim, given positionally or as `dim=`; the last when none is.
    pub(super) fn dim_or_last(&mut self, f: &'static str) -> R<isize> {
        self.take_dim(f, 0)?;
        self.arity(f, 0, 1)?;
        self.pos
            .first()
            .map_or(Ok(-1), |v| as_int(v, f).map(|d| d as isize))
    }
}
