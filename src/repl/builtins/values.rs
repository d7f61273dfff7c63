//! Dtypes, autograd, values on the host, and attributes.

use super::{Args, Builtin, attribute, method, out};
use crate::repl::Value;
use crate::repl::convert::{as_bool, kind};
use crate::repl::error::{R, ReplError};
use crate::{DType, Tensor};

pub(super) const ROWS: &[Builtin] = &[
    method("to", "to(dtype)", to),
    method("to_dtype", "to_dtype(dtype)", to),
    method("type", "type(dtype)", to),
    method("float", "float()", cast),
    method("double", "double()", cast),
    method("long", "long()", cast),
    method("half", "half()", cast),
    method("detach", "detach()", |f, x, a| {
        a.none(f)?;
        Ok(Value::Tensor(x.detach()))
    }),
    method("requires_grad_", "requires_grad_(on=true)", |f, x, a| {
        a.done(f)?;
        a.arity(f, 0, 1)?;
        let on = a.pos.first().map_or(Ok(true), |v| as_bool(v, f))?;
        Ok(Value::Tensor(x.requires_grad_(on)?))
    }),
    method("backward", "backward(retain_graph=false)", |f, x, mut a| {
        let named = a.named("retain_graph");
        a.done(f)?;
        a.arity(f, 0, 1)?;
        let retain = match (a.pos.first(), &named) {
            (Some(_), Some(_)) => return Err(ReplError::arg(f, "`retain_graph` given twice")),
            (Some(v), None) | (None, Some(v)) => as_bool(v, f)?,
            (None, None) => false,
        };
        if retain {
            x.backward_retaining_graph(None)?;
        } else {
            x.backward()?;
        }
        Ok(Value::Unit)
    }),
    method("item", "item()", item),
    method("tolist", "tolist()", tolist),
    method("to_vec", "to_vec()", tolist),
    method("sync", "sync()", |f, x, a| {
        a.none(f)?;
        x.sync()?;
        Ok(Value::Tensor(x))
    }),
];

pub(super) const ATTRIBUTES: &[Builtin] = &[
    attribute(
        "shape",
        |x| {
            let dims = x.dims().iter().map(|&d| Value::Num(d as f64, true));
            Ok(Value::List(dims.collect()))
        },
        true,
    ),
    attribute("dtype", |x| Ok(Value::DType(x.dtype())), true),
    // PyTorch's CPU device has no index: the first CPU device prints as it does.
    attribute(
        "device",
        |x| {
            Ok(Value::Str(match x.device() {
                crate::Device::Cpu(0) => "cpu".to_string(),
                d => d.to_string(),
            }))
        },
        true,
    ),
    attribute("ndim", |x| Ok(Value::Num(x.rank() as f64, true)), true),
    attribute("numel", |x| Ok(Value::Num(x.numel() as f64, true)), true),
    // PyTorch's `.T`: every dim reversed; a 0-d or 1-d tensor as it is.
    attribute(
        "T",
        |x| {
            if x.rank() < 2 {
                return Ok(Value::Tensor(x));
            }
            let reversed: Vec<isize> = (0..x.rank() as isize).rev().collect();
            out(x.permute(&reversed))
        },
        false,
    ),
    // PyTorch's `.mT`: the last two dims swapped, for 2 dims or more.
    attribute(
        "mT",
        |x| {
            if x.rank() < 2 {
                return Err(ReplError::arg(
                    "mT",
                    format!("expects a tensor of at least 2 dims, got {}", x.rank()),
                ));
            }
            out(x.transpose(-2, -1))
        },
        false,
    ),
    attribute(
        "grad",
        |x| Ok(x.grad().map_or(Value::Unit, Value::Tensor)),
        true,
    ),
    attribute(
        "requires_grad",
        |x| Ok(Value::Bool(x.requires_grad())),
        false,
    ),
];

/// The most values, and the most lists, `tolist` builds: each is a boxed [`Value`].
const TOLIST_MAX: usize = 10_000_000;

/// `to`, `to_dtype`, `type`: the dtype positionally or as `dtype=`.
fn to(f: &'static str, x: Tensor, mut a: Args) -> R<Value> {
    let dt = a.dtype(f, x.dtype())?;
    a.done(f)?;
    a.arity(f, 0, 1)?;
    let dt = match a.pos.first() {
        None => dt,
        Some(Value::DType(d)) => *d,
        Some(v) => {
            return Err(ReplError::arg(
                f,
                format!("expected a dtype, got {}", kind(v)),
            ));
        }
    };
    out(x.to_dtype(dt))
}

/// PyTorch's casts by name: `float`, `double`, `long`, `half`.
fn cast(f: &'static str, x: Tensor, a: Args) -> R<Value> {
    a.none(f)?;
    out(x.to_dtype(match f {
        "float" => DType::F32,
        "double" => DType::F64,
        "long" => DType::I64,
        _ => DType::F16,
    }))
}

/// The one element as Python's bool, int (exact for `i64`) or float.
fn item(f: &'static str, x: Tensor, a: Args) -> R<Value> {
    a.none(f)?;
    if x.numel() != 1 {
        return Err(ReplError::arg(
            f,
            format!("the tensor has {} elements, not 1", x.numel()),
        ));
    }
    if x.dtype() == DType::I64 {
        return Ok(Value::int(x.item::<i64>()?));
    }
    let v = x.to_scalar()?;
    Ok(match x.dtype() {
        DType::Bool => Value::Bool(v != 0.0),
        d => Value::Num(v, !d.is_float()),
    })
}

/// The values as nested lists of Python's element types: bool, int (exact for `i64`) or float.
fn tolist(f: &'static str, x: Tensor, a: Args) -> R<Value> {
    a.none(f)?;
    // A list per index into every dim but the last: 1 + d0 + d0*d1 + … of them. Both counts
    // saturate, and past TOLIST_MAX the call is refused rather than exhaust memory
    // (`zeros(4294967296, 0)` has no values but 2^32 lists).
    let (mut lists, mut values) = (0usize, 1usize);
    for &d in x.dims() {
        lists = lists.saturating_add(values);
        values = values.saturating_mul(d);
    }
    if values > TOLIST_MAX || lists > TOLIST_MAX {
        return Err(ReplError::arg(
            f,
            format!(
                "a tensor of shape {:?} makes {values} values in {lists} lists, more than {TOLIST_MAX}",
                x.dims()
            ),
        ));
    }
    if x.dtype() == DType::I64 {
        let vals = x.to_vec::<i64>()?;
        return Ok(nest(x.dims(), &vals, Value::int));
    }
    let vals = x.to_f64_vec()?;
    let leaf = match x.dtype() {
        DType::Bool => |v: f64| Value::Bool(v != 0.0),
        d if d.is_float() => |v: f64| Value::Num(v, false),
        _ => |v: f64| Value::Num(v, true),
    };
    Ok(nest(x.dims(), &vals, leaf))
}

/// `vals` of shape `dims` as nested lists of `leaf`s.
fn nest<T: Copy>(dims: &[usize], vals: &[T], leaf: fn(T) -> Value) -> Value {
    match dims.split_first() {
        None => leaf(vals[0]),
        Some((&n, rest)) => {
            // Saturating: with `n` 0 the others may be huge (`[0, 2^32, 2^32]`); else their
            // product is at most the element count.
            let inner = rest.iter().fold(1usize, |p, &d| p.saturating_mul(d));
            Value::List(
                (0..n)
                    .map(|i| nest(rest, &vals[i * inner..(i + 1) * inner], leaf))
                    .collect(),
            )
        }
    }
}
