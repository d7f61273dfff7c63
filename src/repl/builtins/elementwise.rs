//! Elementwise methods: maps, operators by name, logical ops, `where_`, `clamp`, and the
//! in-place forms.

use super::{Args, Builtin, method, out};
use crate::repl::Value;
use crate::repl::arith::binary as binary_op;
use crate::repl::convert::{as_int, as_num, as_scalar, as_tensor, number_like};
use crate::repl::error::{R, ReplError};
use crate::repl::parser::Op;
use crate::{Scalar, Tensor};

/// Rows for methods without arguments that map each element, `x.NAME()`; each also works as a
/// function, `NAME(x)`.
macro_rules! unary_rows {
    ($($name:ident)*) => {
        pub(super) const UNARY: &[Builtin] = &[$(
            method(stringify!($name), concat!(stringify!($name), "()"), |f, x, a| {
                a.none(f)?;
                out(x.$name())
            }),
        )*];
    };
}

unary_rows!(
    neg abs exp log sqrt rsqrt sin cos tanh sigmoid relu gelu silu recip square sign
    floor ceil trunc log1p expm1 log2 log10 tan atan erf
);

/// Whether `name` is an elementwise map, callable as a function.
pub(super) fn is_unary(name: &str) -> bool {
    name == "round" || UNARY.iter().any(|b| b.name == name)
}

/// `round(decimals=0)`: to the nearest, halves to even; with `decimals`, as PyTorch's:
/// `round(x · 10^d) / 10^d` in the tensor's dtype (a negative `d` rounds to tens, hundreds…).
fn round(f: &'static str, x: Tensor, mut a: Args) -> R<Value> {
    let d = a.param(f, 0, "decimals")?;
    a.done(f)?;
    a.arity(f, 0, 0)?;
    let d = d.map_or(Ok(0), |v| as_int(&v, f))?;
    if d == 0 {
        return out(x.round());
    }
    let scale =
        10f64.powi(i32::try_from(d).map_err(|_| ReplError::arg(f, "decimals out of range"))?);
    out(x
        .mul_scalar(scale)
        .and_then(|y| y.round())
        .and_then(|y| y.div_scalar(scale)))
}

pub(super) const BINARY: &[Builtin] = &[
    method(
        "reciprocal",
        "reciprocal(): 1 / a, PyTorch's name for recip",
        |f, x, a| {
            a.none(f)?;
            out(x.recip())
        },
    ),
    method("round", "round(decimals=0)", round),
    method("add", "add(b)", operator),
    method("sub", "sub(b)", operator),
    method("mul", "mul(b)", operator),
    method("div", "div(b, rounding_mode=None)", operator),
    method("floor_divide", "floor_divide(b): a // b", operator),
    method("remainder", "remainder(b): a % b", operator),
    method("pow", "pow(b)", operator),
    method("maximum", "maximum(b)", operator),
    method("minimum", "minimum(b)", operator),
    method("eq", "eq(b)", operator),
    method("ne", "ne(b)", operator),
    method("lt", "lt(b)", operator),
    method("le", "le(b)", operator),
    method("gt", "gt(b)", operator),
    method("ge", "ge(b)", operator),
    method("matmul", "matmul(b)", operator),
    method("logical_and", "logical_and(b)", logical),
    method("logical_or", "logical_or(b)", logical),
    method("logical_xor", "logical_xor(b)", logical),
    method("logical_not", "logical_not()", |f, x, a| {
        a.none(f)?;
        out(x.logical_not())
    }),
    method("where_", "where_(a, b)", where_),
    method("clamp", "clamp(min, max)", clamp),
    method("clamp_min", "clamp_min(min)", clamp_one),
    method("clamp_max", "clamp_max(max)", clamp_one),
];

pub(super) const IN_PLACE: &[Builtin] = &[
    method("add_", "add_(b)", in_place),
    method("sub_", "sub_(b)", in_place),
    method("mul_", "mul_(b)", in_place),
    method("div_", "div_(b)", in_place),
    method("copy_", "copy_(b)", in_place),
    method("fill_", "fill_(value)", |f, x, a| {
        a.done(f)?;
        a.arity(f, 1, 1)?;
        out(x.fill_(as_num(&a.pos[0], f)?))
    }),
    method("zero_", "zero_()", |f, x, a| {
        a.none(f)?;
        out(x.zero_())
    }),
];

/// A binary operator by name: `x.add(b)` is `x + b`, with a tensor or a number.
fn operator(f: &'static str, x: Tensor, mut a: Args) -> R<Value> {
    // PyTorch's `div(b, rounding_mode=...)`: "floor" is `//`; "trunc" rounds toward zero.
    let mode = match a.named("rounding_mode") {
        Some(Value::Str(m)) if f == "div" => Some(m),
        Some(_) => {
            return Err(ReplError::arg(f, "rounding_mode is \"floor\" or \"trunc\""));
        }
        None => None,
    };
    a.done(f)?;
    a.arity(f, 1, 1)?;
    let op = match f {
        "add" => Op::Add,
        "sub" => Op::Sub,
        "mul" => Op::Mul,
        "div" => Op::Div,
        "floor_divide" => Op::FloorDiv,
        "remainder" => Op::Rem,
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
    let b = a.pos.pop().expect("1");
    match mode.as_deref() {
        None => binary_op(op, Value::Tensor(x), b),
        Some("floor") => binary_op(Op::FloorDiv, Value::Tensor(x), b),
        Some("trunc") => {
            let y = match binary_op(Op::Div, Value::Tensor(x.clone()), b.clone())? {
                Value::Tensor(q) if !x.dtype().is_float() => {
                    // Integers: the floor, moved up by one where the quotient is negative
                    // and inexact, in the operands' dtype.
                    let fl = as_tensor(binary_op(Op::FloorDiv, Value::Tensor(x), b)?, f)?;
                    let up = q.lt_scalar(0.0)?.logical_and(&q.ne(&q.floor()?)?)?;
                    fl.add(&up.to_dtype(fl.dtype())?)
                }
                Value::Tensor(q) => q.trunc(),
                v => return Ok(v),
            };
            out(y)
        }
        Some(m) => Err(ReplError::arg(
            f,
            format!("rounding_mode is \"floor\" or \"trunc\", not {m:?}"),
        )),
    }
}

fn logical(f: &'static str, x: Tensor, mut a: Args) -> R<Value> {
    a.done(f)?;
    a.arity(f, 1, 1)?;
    let y = as_tensor(a.pos.pop().expect("1"), f)?;
    out(match f {
        "logical_and" => x.logical_and(&y),
        "logical_or" => x.logical_or(&y),
        _ => x.logical_xor(&y),
    })
}

fn where_(f: &'static str, x: Tensor, a: Args) -> R<Value> {
    a.done(f)?;
    a.arity(f, 2, 2)?;
    let mut it = a.pos.into_iter();
    let y = as_tensor(it.next().expect("2"), f)?;
    let z = as_tensor(it.next().expect("2"), f)?;
    out(x.where_(&y, &z))
}

fn clamp(f: &'static str, x: Tensor, mut a: Args) -> R<Value> {
    let lo = a.named("min").map(|v| as_scalar(&v, f)).transpose()?;
    let hi = a.named("max").map(|v| as_scalar(&v, f)).transpose()?;
    a.done(f)?;
    a.arity(f, 0, 2)?;
    let lo = lo.or(a.pos.first().map(|v| as_scalar(v, f)).transpose()?);
    let hi = hi.or(a.pos.get(1).map(|v| as_scalar(v, f)).transpose()?);
    out(x.clamp(lo, hi))
}

/// `clamp_min(c)`, `clamp_max(c)`: one bound, of its kind.
fn clamp_one(f: &'static str, x: Tensor, a: Args) -> R<Value> {
    a.done(f)?;
    a.arity(f, 1, 1)?;
    let c = as_scalar(&a.pos[0], f)?;
    out(if f == "clamp_min" {
        x.clamp_min(c)
    } else {
        x.clamp_max(c)
    })
}

/// `add_`, `sub_`, `mul_`, `div_`, `copy_`: a tensor, or a number (in the tensor's dtype).
fn in_place(f: &'static str, x: Tensor, mut a: Args) -> R<Value> {
    a.done(f)?;
    a.arity(f, 1, 1)?;
    let arg = a.pos.pop().expect("1");
    // The number's kind decides, as in PyTorch: `add_(1.0)` on an integer tensor is refused
    // (a float result), `add_(1)` is not. An integer subtracted wraps in the tensor's dtype
    // (below, as a tensor of it).
    let c = as_scalar(&arg, f).ok();
    if let (Value::Num(..), Some(c), "add_" | "sub_" | "mul_") = (&arg, c, f)
        && !(f == "sub_" && matches!(c, Scalar::Int(_)))
    {
        return out(match f {
            "add_" => x.add_scalar_(c),
            "sub_" => x.add_scalar_(Scalar::Float(-c.to_f64())),
            _ => x.mul_scalar_(c),
        });
    }
    let y = match arg {
        Value::Int(_) | Value::Num(_, true) => number_like(&arg, &x)?,
        arg => as_tensor(arg, f)?,
    };
    out(match f {
        "add_" => x.add_(&y),
        "sub_" => x.sub_(&y),
        "mul_" => x.mul_(&y),
        "div_" => x.div_(&y),
        _ => x.copy_(&y),
    })
}
