//! Evaluation: statements, expressions and indexing.

use super::arith::binary;
use super::builtins::{self, Args};
use super::convert::{as_int, as_tensor, kind, parse_dtype};
use super::error::{R, ReplError};
use super::parser::{Expr, IndexItem, Stmt};
use super::{MAX_DEPTH, Session, Value};
use crate::Tensor;

impl Session {
    /// Runs a parsed line: the text to print (empty for a `let`).
    pub(super) fn run(&mut self, stmt: Stmt) -> R<String> {
        match stmt {
            Stmt::Let(name, e) => {
                let v = self.eval(&e)?;
                self.vars.insert(name, v);
                Ok(String::new())
            }
            Stmt::Expr(e) => {
                let v = self.eval(&e)?;
                // Printing waits for the value: an asynchronous error surfaces here.
                if let Value::Tensor(t) = &v {
                    t.sync()?;
                }
                Ok(v.to_string())
            }
        }
    }

    pub(super) fn eval(&mut self, e: &Expr) -> R<Value> {
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
                    return Err(ReplError::TooDeep);
                }
                Value::List(items)
            }
            Expr::Neg(x) => match self.eval(x)? {
                Value::Num(v, i) => Value::Num(-v, i),
                Value::Int(i) => i
                    .checked_neg()
                    .map_or(Value::Num(-(i as f64), true), Value::int),
                Value::Tensor(t) => Value::Tensor(t.neg()?),
                v => return Err(ReplError::type_(format!("cannot negate {}", kind(&v)))),
            },
            Expr::Bin(op, a, b) => {
                let (a, b) = (self.eval(a)?, self.eval(b)?);
                binary(*op, a, b)?
            }
            Expr::Call(name, args) => {
                let args = self.eval_args(args)?;
                builtins::call_function(name, args)?
            }
            Expr::Method(recv, name, args) => {
                let recv = self.eval(recv)?;
                let args = self.eval_args(args)?;
                builtins::call_method(recv, name, args)?
            }
            Expr::Attr(recv, name) => {
                let recv = self.eval(recv)?;
                builtins::get_attribute(recv, name)?
            }
            Expr::Index(recv, items) => {
                let recv = self.eval(recv)?;
                self.index(recv, items)?
            }
        })
    }

    /// `recv[items]`: a list takes one index, as a Python tuple; a tensor is selected by each
    /// integer and narrowed by each range, dim by dim.
    fn index(&mut self, recv: Value, items: &[IndexItem]) -> R<Value> {
        if let (Value::List(l), [IndexItem::At(e)]) = (&recv, items) {
            let i = as_int(&self.eval(e)?, "index")?;
            let n = l.len() as i64;
            let j = if i < 0 { i + n } else { i };
            return l.get(j as usize).filter(|_| j >= 0).cloned().ok_or(
                ReplError::IndexOutOfRange {
                    index: i,
                    dim: None,
                    size: n,
                },
            );
        }
        let mut t = as_tensor(recv, "indexing")?;
        let mut dim = 0usize;
        let rest = |t: &Tensor| {
            let used = items
                .iter()
                .filter(|i| !matches!(i, IndexItem::Ellipsis))
                .count();
            t.rank().saturating_sub(used)
        };
        if items
            .iter()
            .filter(|i| matches!(i, IndexItem::Ellipsis))
            .count()
            > 1
        {
            return Err(ReplError::arg(
                "indexing",
                "an index can only have one `...`",
            ));
        }
        let skip = rest(&t);
        for it in items {
            match it {
                IndexItem::All => dim += 1,
                IndexItem::Ellipsis => dim += skip,
                IndexItem::At(e) => {
                    let v = self.eval(e)?;
                    if let Value::Tensor(ix) = &v
                        && ix.rank() > 0
                    {
                        // An index tensor (integers; negative ones count from the end): the
                        // rows it names along this dim, as PyTorch's advanced indexing.
                        t = index_by(&t, dim, ix)?;
                        dim += ix.rank();
                        continue;
                    }
                    let typed = as_int(&v, "index")?;
                    let size = t.dim(dim as isize)? as i64;
                    let i = if typed < 0 { typed + size } else { typed };
                    if i < 0 || i >= size {
                        // The index as typed, as PyTorch reports it.
                        return Err(ReplError::IndexOutOfRange {
                            index: typed,
                            dim: Some(dim),
                            size,
                        });
                    }
                    t = t.select(dim as isize, i as usize)?;
                }
                IndexItem::Range(lo, hi, step) => {
                    let size = t.dim(dim as isize)? as i64;
                    let mut bound = |e: &Option<Expr>, d: i64| -> R<i64> {
                        let v = match e {
                            None => d,
                            Some(e) => as_int(&self.eval(e)?, "slice bound")?,
                        };
                        Ok((if v < 0 { v + size } else { v }).clamp(0, size))
                    };
                    let lo = bound(lo, 0)?;
                    let hi = bound(hi, size)?.max(lo);
                    t = t.narrow(dim as isize, lo as usize, (hi - lo) as usize)?;
                    if let Some(e) = step {
                        let step = as_int(&self.eval(e)?, "slice step")?;
                        if step < 1 {
                            return Err(ReplError::arg("slice", "slice step must be positive"));
                        }
                        t = t.step(dim as isize, step as usize)?;
                    }
                    dim += 1;
                }
            }
        }
        Ok(Value::Tensor(t))
    }

    fn var(&self, name: &str) -> R<Value> {
        if let Some(v) = self.vars.get(name) {
            return Ok(v.clone());
        }
        Ok(match name {
            "true" | "True" => Value::Bool(true),
            "false" | "False" => Value::Bool(false),
            "pi" => Value::Num(std::f64::consts::PI, false),
            // `torch.nan`, `torch.inf`, `math.inf`
            "nan" => Value::Num(f64::NAN, false),
            "inf" => Value::Num(f64::INFINITY, false),
            n => match parse_dtype(n) {
                Some(d) => Value::DType(d),
                None => return Err(ReplError::UnknownName { name: n.into() }),
            },
        })
    }

    fn eval_args(&mut self, args: &[(Option<String>, Expr)]) -> R<Args> {
        let mut out = Args::default();
        for (name, e) in args {
            let v = self.eval(e)?;
            match name {
                None if !out.named.is_empty() => {
                    return Err(ReplError::parse("a positional argument after a named one"));
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

/// How deeply `v` nests lists: 0 for a value that is not a list.
fn list_depth(v: &Value) -> usize {
    match v {
        Value::List(items) => 1 + items.iter().map(list_depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// `t[ix]` along `dim` for an integer index tensor `ix` (negative entries count from the end):
/// `ix`'s shape in place of the dim. The REPL reads the entries, so one out of range fails
/// here, as in PyTorch.
fn index_by(t: &Tensor, dim: usize, ix: &Tensor) -> R<Tensor> {
    if ix.dtype().is_float() || ix.dtype() == crate::DType::Bool {
        return Err(ReplError::arg(
            "indexing",
            format!("an index tensor must hold integers, not {}", ix.dtype()),
        ));
    }
    let size = t.dim(dim as isize)? as i64;
    let mut rows = ix.to_dtype(crate::DType::I64)?.to_vec::<i64>()?;
    for r in &mut rows {
        let typed = *r;
        *r = if typed < 0 { typed + size } else { typed };
        if *r < 0 || *r >= size {
            return Err(ReplError::IndexOutOfRange {
                index: typed,
                dim: Some(dim),
                size,
            });
        }
    }
    let n = rows.len();
    let picked = t.index_select(dim as isize, &Tensor::from_vec(rows, [n])?)?;
    let mut dims = t.dims()[..dim].to_vec();
    dims.extend_from_slice(ix.dims());
    dims.extend_from_slice(&t.dims()[dim + 1..]);
    Ok(picked.reshape(dims)?)
}
