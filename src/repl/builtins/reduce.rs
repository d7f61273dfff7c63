//! Reductions and ordering, with PyTorch's defaults: no dims reduce every dim, and the ops that
//! give PyTorch's (values, indices) tuple give a two-element list.

use super::{Args, Builtin, method, out, pair};
use crate::Tensor;
use crate::repl::Value;
use crate::repl::convert::{as_bool, as_int, as_num, as_usize};
use crate::repl::error::{R, ReplError};

pub(super) const REDUCTIONS: &[Builtin] = &[
    method("sum", "sum(dims.., keepdim=false)", reduce),
    method("mean", "mean(dims.., keepdim=false)", reduce),
    method("prod", "prod(dims.., keepdim=false)", reduce),
    method("var", "var(dims.., correction=1, keepdim=false)", var_std),
    method("std", "std(dims.., correction=1, keepdim=false)", var_std),
    method("logsumexp", "logsumexp(dims.., keepdim=false)", reduce),
    method("any", "any(dims.., keepdim=false)", reduce),
    method("all", "all(dims.., keepdim=false)", reduce),
    method("norm", "norm(p=2, dims.., keepdim=false)", reduce),
    method("cumsum", "cumsum(dim, dtype=None)", cumulative),
    method("cumprod", "cumprod(dim, dtype=None)", cumulative),
    method("max", "max([dim], keepdim=false)", extreme),
    method("min", "min([dim], keepdim=false)", extreme),
    method("argmax", "argmax([dim], keepdim=false)", extreme),
    method("argmin", "argmin([dim], keepdim=false)", extreme),
    method("amax", "amax(dims.., keepdim=false)", amax_amin),
    method("amin", "amin(dims.., keepdim=false)", amax_amin),
];

/// `amax`, `amin`: the extreme over several dims (every dim without any), values only.
fn amax_amin(f: &'static str, x: Tensor, mut a: Args) -> R<Value> {
    let keep = a.keepdim(f)?;
    let dims = a.dims_or_all(f, x.rank())?;
    out(if f == "amax" {
        x.amax(&dims, keep)
    } else {
        x.amin(&dims, keep)
    })
}

pub(super) const ORDERING: &[Builtin] = &[
    method("sort", "sort(dim=-1, descending=false)", sort),
    method("argsort", "argsort(dim=-1, descending=false)", sort),
    method("topk", "topk(k, dim=-1, largest=true, sorted=true)", topk),
    method("median", "median([dim], keepdim=false)", median),
    method(
        "kthvalue",
        "kthvalue(k, dim=-1, keepdim=false)",
        |f, x, mut a| {
            let keep = a.keepdim(f)?;
            a.take_dim(f, 1)?;
            a.arity(f, 1, 2)?;
            let k = as_usize(&a.pos[0], f)?;
            let dim = a.pos.get(1).map_or(Ok(-1), |v| as_int(v, f))? as isize;
            pair(x.kthvalue(k, dim, keep))
        },
    ),
];

/// `cumsum`, `cumprod`: along a dim, in `dtype` where given (the input converted first, as
/// PyTorch's `dtype=`).
fn cumulative(f: &'static str, x: Tensor, mut a: Args) -> R<Value> {
    let x = match a.named("dtype") {
        Some(Value::DType(d)) => x.to_dtype(d)?,
        Some(v) => {
            return Err(ReplError::arg(
                f,
                format!(
                    "dtype: expected a dtype, got {}",
                    crate::repl::convert::kind(&v)
                ),
            ));
        }
        None => x,
    };
    a.take_dim(f, 0)?;
    a.arity(f, 1, 1)?;
    let d = a.dim_at(f, 0)?;
    out(if f == "cumsum" {
        x.cumsum(d)
    } else {
        x.cumprod(d)
    })
}

/// `sum`, `mean`, `prod`, `logsumexp`, `any`, `all`, `norm`.
fn reduce(f: &'static str, x: Tensor, mut a: Args) -> R<Value> {
    // PyTorch's defaults: every dim, kept as size 1 with keepdim (`[[total]]` for a matrix);
    // p = 2.
    let keep = a.keepdim(f)?;
    // PyTorch's `norm(p, dim, keepdim)`: a first positional argument is `p`, not a dim.
    let p = match (f, a.named("p")) {
        // The Frobenius norm is the 2-norm of every element.
        ("norm", Some(Value::Str(s))) if s == "fro" => 2.0,
        ("norm", Some(Value::Str(s))) => {
            return Err(ReplError::arg(
                f,
                format!("p: only 'fro' among names (got '{s}')"),
            ));
        }
        ("norm", Some(v)) => as_num(&v, f)?,
        ("norm", None) if !a.pos.is_empty() => as_num(&a.pos.remove(0), f)?,
        ("norm", None) => 2.0,
        _ => 0.0,
    };
    let dims = a.dims_or_all(f, x.rank())?;
    out(match f {
        "sum" => x.sum(&dims, keep),
        "mean" => x.mean(&dims, keep),
        "prod" => x.prod(&dims, keep),
        "logsumexp" => x.logsumexp(&dims, keep),
        "any" => x.any(&dims, keep),
        "all" => x.all(&dims, keep),
        _ => x.norm(p, &dims, keep),
    })
}

/// `var`, `std`.
fn var_std(f: &'static str, x: Tensor, mut a: Args) -> R<Value> {
    // PyTorch's defaults: every dim, correction 1.
    let keep = a.keepdim(f)?;
    let correction = a.named("correction").map_or(Ok(1), |v| as_usize(&v, f))?;
    let dims = a.dims_or_all(f, x.rank())?;
    out(if f == "var" {
        x.var(&dims, correction, keep)
    } else {
        x.std(&dims, correction, keep)
    })
}

/// `max`, `min`, `argmax`, `argmin`.
fn extreme(f: &'static str, x: Tensor, mut a: Args) -> R<Value> {
    // No dim: over every element (max and min a value; argmax and argmin with keepdim keep
    // every dim as 1, as PyTorch). A dim: max and min give PyTorch's (values, indices) pair,
    // `x.max(1)[1]` the positions.
    let keep = a.keepdim(f)?;
    a.take_dim(f, 0)?;
    a.arity(f, 0, 1)?;
    if a.pos.is_empty() {
        let ones = vec![1usize; if keep { x.rank() } else { 0 }];
        return match f {
            // PyTorch has no max(keepdim=...) without a dim: a TypeError there.
            "max" | "min" if keep => Err(ReplError::arg(f, "keepdim needs a dim")),
            "max" => out(x.max_all()),
            "min" => out(x.min_all()),
            "argmax" => out(x
                .flatten_all()
                .and_then(|v| v.argmax(0, false)?.reshape(ones))),
            _ => out(x
                .flatten_all()
                .and_then(|v| v.argmin(0, false)?.reshape(ones))),
        };
    }
    let d = a.dim_at(f, 0)?;
    match f {
        "max" => pair(
            x.max(d, keep)
                .and_then(|v| x.argmax(d, keep).map(|i| (v, i))),
        ),
        "min" => pair(
            x.min(d, keep)
                .and_then(|v| x.argmin(d, keep).map(|i| (v, i))),
        ),
        "argmax" => out(x.argmax(d, keep)),
        _ => out(x.argmin(d, keep)),
    }
}

/// `sort` (a pair) and `argsort`.
fn sort(f: &'static str, x: Tensor, mut a: Args) -> R<Value> {
    // PyTorch's `sort(dim=-1, descending=False)`, by position or by name.
    // Eddy's sort is always stable, which `stable=False` allows too.
    if let Some(v) = a.named("stable") {
        as_bool(&v, f)?;
    }
    let descending = match a.named("descending") {
        Some(v) => as_bool(&v, f)?,
        None if a.pos.len() == 2 => as_bool(&a.pos.pop().expect("two"), f)?,
        None => false,
    };
    let dim = a.dim_or_last(f)?;
    if f == "sort" {
        pair(x.sort(dim, descending))
    } else {
        out(x.argsort(dim, descending))
    }
}

fn topk(f: &'static str, x: Tensor, mut a: Args) -> R<Value> {
    // PyTorch's form: topk(k, dim=-1, largest=True, sorted=True), by position or by name.
    if a.pos.len() == 4 {
        // The values come out sorted either way.
        as_bool(&a.pos.pop().expect("four"), f)?;
    }
    let largest = match a.named("largest") {
        Some(v) => as_bool(&v, f)?,
        None if a.pos.len() == 3 => as_bool(&a.pos.pop().expect("three"), f)?,
        None => true,
    };
    a.take_dim(f, 1)?;
    a.arity(f, 1, 2)?;
    let k = as_usize(&a.pos[0], f)?;
    let dim = a.pos.get(1).map_or(Ok(-1), |v| as_int(v, f))? as isize;
    pair(x.topk(k, dim, largest))
}

fn median(f: &'static str, x: Tensor, mut a: Args) -> R<Value> {
    // No dim: the median of every element (a value); a dim: (values, indices).
    let keep = a.keepdim(f)?;
    a.take_dim(f, 0)?;
    a.arity(f, 0, 1)?;
    match a.pos.first() {
        // As PyTorch: the median of no elements is NaN (a dim of size 0 stays an error).
        None if x.numel() == 0 && x.dtype().is_float() => {
            out(Tensor::full([], f64::NAN, x.dtype()))
        }
        None => out(x
            .flatten_all()
            .and_then(|v| v.median(0, false))
            .map(|p| p.0)),
        Some(d) => pair(x.median(as_int(d, f)? as isize, keep)),
    }
}
