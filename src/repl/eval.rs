//! Evaluation: statements, expressions, indexing and the binary operators.

use super::builtins::{self, Args};
use super::convert::{as_int, as_tensor, is_number, kind, number_like, parse_dtype};
use super::error::{R, ReplError};
use super::parser::{Expr, IndexItem, Op, Stmt};
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
                    let typed = as_int(&self.eval(e)?, "index")?;
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

/// `a op b`, for numbers, tensors and lists (as tensors), with PyTorch's promotion.
pub(super) fn binary(op: Op, a: Value, b: Value) -> R<Value> {
    use Op::*;
    let t = |r: crate::Result<Tensor>| Ok(Value::Tensor(r?));
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
            FloorDiv | Rem if y == 0 => {
                return Err(ReplError::arg(
                    "operator",
                    "integer division or modulo by zero",
                ));
            }
            FloorDiv | Rem => {
                // Python's: toward negative infinity, the remainder with `y`'s sign.
                let (q, r) = (x.wrapping_div(y), x.wrapping_rem(y));
                let adjust = r != 0 && (r < 0) != (y < 0);
                Some(match (op, adjust) {
                    (FloorDiv, true) => q - 1,
                    (FloorDiv, false) => q,
                    (_, true) => r + y,
                    (_, false) => r,
                })
            }
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
                FloorDiv => Value::Num((x / y).floor(), int),
                Rem => {
                    let m = x % y;
                    let m = if m != 0.0 && (y < 0.0) != (m < 0.0) {
                        m + y
                    } else {
                        m
                    };
                    Value::Num(m, int)
                }
                Pow => Value::Num(x.powf(y), int && y >= 0.0),
                Max => Value::Num(x.max(y), int),
                Min => Value::Num(x.min(y), int),
                Eq => Value::Bool(x == y),
                Ne => Value::Bool(x != y),
                Lt => Value::Bool(x < y),
                Le => Value::Bool(x <= y),
                Gt => Value::Bool(x > y),
                Ge => Value::Bool(x >= y),
                Matmul => return Err(ReplError::type_("@ needs tensors")),
            })
        }
        (Value::Tensor(x), Value::Num(c, _))
            if !matches!(op, Matmul | Max | Min | FloorDiv | Rem) =>
        {
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
                x.to_dtype(y.dtype())?
            } else {
                x
            };
            t(match op {
                Add => x.add(&y),
                Sub => x.sub(&y),
                Mul => x.mul(&y),
                Div => x.div(&y),
                FloorDiv => x.floor_divide(&y),
                Rem => x.remainder(&y),
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
