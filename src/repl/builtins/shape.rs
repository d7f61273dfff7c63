//! Shapes and views, indexing by tensors, and triangular masks.

use super::{Args, Builtin, method, out};
use crate::Tensor;
use crate::repl::Value;
use crate::repl::convert::{as_int, as_num, as_tensor, as_usize, check_rank};
use crate::repl::error::{R, ReplError};

pub(super) const VIEWS: &[Builtin] = &[
    method("reshape", "reshape(dims..)", resize),
    method("view", "view(dims..)", resize),
    method("expand", "expand(dims..)", resize),
    method("broadcast_to", "broadcast_to(dims..)", resize),
    method("permute", "permute(dims..)", |f, x, a| {
        a.done(f)?;
        let p: Vec<isize> = a.idims(f)?.into_iter().map(|d| d as isize).collect();
        out(x.permute(&p))
    }),
    method("transpose", "transpose(a, b)", |f, x, a| {
        a.done(f)?;
        a.arity(f, 2, 2)?;
        out(x.transpose(a.dim_at(f, 0)?, a.dim_at(f, 1)?))
    }),
    method("t", "t()", |f, x, a| {
        a.none(f)?;
        // PyTorch's `t()` is for up to 2 dims (`mT` swaps the last two of more).
        if x.rank() > 2 {
            return Err(ReplError::arg(
                f,
                format!(
                    "expects a tensor of at most 2 dims, got {} (use `mT` or transpose)",
                    x.rank()
                ),
            ));
        }
        out(x.t())
    }),
    method("narrow", "narrow(dim, start, len)", |f, x, a| {
        a.done(f)?;
        a.arity(f, 3, 3)?;
        let d = a.dim_at(f, 0)?;
        let start = position(f, &x, d, &a.pos[1])?;
        out(x.narrow(d, start, as_usize(&a.pos[2], f)?))
    }),
    method("select", "select(dim, i)", |f, x, a| {
        a.done(f)?;
        a.arity(f, 2, 2)?;
        let d = a.dim_at(f, 0)?;
        let i = position(f, &x, d, &a.pos[1])?;
        out(x.select(d, i))
    }),
    method("squeeze", "squeeze([dim])", squeeze),
    method("unsqueeze", "unsqueeze(dim)", squeeze),
    method("flatten", "flatten(start_dim=0, end_dim=-1)", flatten),
    method("contiguous", "contiguous()", |f, x, a| {
        a.none(f)?;
        out(x.contiguous())
    }),
    method("flip", "flip(dims..)", |f, x, mut a| {
        if let Some(d) = a.named("dims") {
            a.pos.push(d);
        }
        a.done(f)?;
        let dims: Vec<isize> = a.idims(f)?.into_iter().map(|d| d as isize).collect();
        out(x.flip(&dims))
    }),
];

pub(super) const INDEXING: &[Builtin] = &[
    method("masked_fill", "masked_fill(mask, value)", |f, x, a| {
        a.done(f)?;
        a.arity(f, 2, 2)?;
        let mask = as_tensor(a.pos[0].clone(), f)?;
        out(x.masked_fill(&mask, as_num(&a.pos[1], f)?))
    }),
    method("index_select", "index_select(dim, idx)", gather),
    method("gather", "gather(dim, idx)", gather),
    method("index_add", "index_add(dim, idx, src)", add_at),
    method("scatter_add", "scatter_add(dim, idx, src)", add_at),
    method("tril", "tril(diagonal=0)", triangle),
    method("triu", "triu(diagonal=0)", triangle),
];

/// `reshape` and `view` (one size may be -1, inferred), `expand` and `broadcast_to`.
fn resize(f: &'static str, x: Tensor, a: Args) -> R<Value> {
    a.done(f)?;
    let dims = a.idims(f)?;
    check_rank(f, dims.len())?;
    let bad_size = |d: i64| ReplError::arg(f, format!("bad size {d}"));
    let n_infer = dims.iter().filter(|&&d| d == -1).count();
    let dims: Vec<usize> = if n_infer == 1 && matches!(f, "reshape" | "view") {
        if let Some(&d) = dims.iter().find(|&&d| d < -1) {
            return Err(bad_size(d));
        }
        // The other sizes' product, or 0 past i64 (then nothing divides evenly).
        let known = dims
            .iter()
            .filter(|&&d| d != -1)
            .try_fold(1i64, |p, &d| p.checked_mul(d))
            .unwrap_or(0);
        if known == 0 || x.numel() as i64 % known != 0 {
            return Err(ReplError::arg(
                f,
                format!("cannot infer -1 in {dims:?} for {} elements", x.numel()),
            ));
        }
        dims.iter()
            .map(|&d| if d == -1 { x.numel() as i64 / known } else { d } as usize)
            .collect()
    } else if matches!(f, "expand" | "broadcast_to") {
        // As PyTorch: -1 keeps the size of the dim it stands over (aligned from the right);
        // a new leading dim needs a size.
        let lead = dims.len().saturating_sub(x.rank());
        dims.iter()
            .enumerate()
            .map(|(i, &d)| match d {
                -1 if i >= lead => Ok(x.dims()[i - lead]),
                d => usize::try_from(d).map_err(|_| bad_size(d)),
            })
            .collect::<R<_>>()?
    } else {
        dims.iter()
            .map(|&d| usize::try_from(d).map_err(|_| bad_size(d)))
            .collect::<R<_>>()?
    };
    out(match f {
        "reshape" => x.reshape(dims),
        "view" => x.view(dims),
        _ => x.expand(dims),
    })
}

/// `index_add` and `scatter_add` (out of place).
fn add_at(f: &'static str, x: Tensor, mut a: Args) -> R<Value> {
    a.done(f)?;
    a.arity(f, 3, 3)?;
    let d = a.dim_at(f, 0)?;
    let src = as_tensor(a.pos.pop().expect("3"), f)?;
    let idx = as_tensor(a.pos.pop().expect("3"), f)?;
    out(if f == "index_add" {
        x.index_add(d, &idx, &src)
    } else {
        x.scatter_add(d, &idx, &src)
    })
}

/// `squeeze` and `unsqueeze`.
fn squeeze(f: &'static str, x: Tensor, a: Args) -> R<Value> {
    a.done(f)?;
    if let (true, [Value::List(dims)]) = (f == "squeeze", a.pos.as_slice()) {
        // PyTorch's `squeeze([dims])`: each listed dim of size 1, the highest first so the
        // others keep their positions; the others stay.
        let mut ds: Vec<usize> = dims
            .iter()
            .map(|v| {
                let d = as_int(v, f)? as isize;
                Ok(crate::ops::norm_dim(f, d, x.rank().max(1))?)
            })
            .collect::<R<_>>()?;
        ds.sort_unstable();
        ds.dedup();
        let mut y = x.clone();
        for &d in ds
            .iter()
            .rev()
            .filter(|&&d| x.rank() > 0 && x.dims()[d] == 1)
        {
            y = y.squeeze(d as isize)?;
        }
        return out(Ok(y));
    }
    if f == "squeeze" && a.pos.is_empty() {
        // As PyTorch: every dim of size 1, last first so the others keep their positions.
        let mut y = x.clone();
        for d in (0..x.rank()).rev().filter(|&d| x.dims()[d] == 1) {
            y = y.squeeze(d as isize)?;
        }
        return out(Ok(y));
    }
    a.arity(f, 1, 1)?;
    let d = a.dim_at(f, 0)?;
    out(if f == "squeeze" {
        x.squeeze(d)
    } else {
        x.unsqueeze(d)
    })
}

fn flatten(f: &'static str, x: Tensor, mut a: Args) -> R<Value> {
    // PyTorch's flatten(start_dim=0, end_dim=-1).
    let start = a.param(f, 0, "start_dim")?;
    let end = a.param(f, 1, "end_dim")?;
    a.done(f)?;
    a.arity(f, 0, 2)?;
    let start = start.map_or(Ok(0), |v| as_int(&v, f))?;
    let end = end.map_or(Ok(-1), |v| as_int(&v, f))?;
    out(x.flatten(start as isize, end as isize))
}

/// `index_select` and `gather`.
fn gather(f: &'static str, x: Tensor, mut a: Args) -> R<Value> {
    a.done(f)?;
    a.arity(f, 2, 2)?;
    let d = a.dim_at(f, 0)?;
    let idx = as_tensor(a.pos.pop().expect("2"), f)?;
    out(if f == "gather" {
        x.gather(d, &idx)
    } else {
        x.index_select(d, &idx)
    })
}

/// `tril` and `triu`.
fn triangle(f: &'static str, x: Tensor, mut a: Args) -> R<Value> {
    if let Some(d) = a.named("diagonal") {
        a.pos.push(d);
    }
    a.done(f)?;
    a.arity(f, 0, 1)?;
    let k = a.pos.first().map_or(Ok(0), |v| as_int(v, f))?;
    out(if f == "tril" { x.tril(k) } else { x.triu(k) })
}

/// A position along dim `d` of `x`, counted from the end when negative (as PyTorch's `select`
/// and `narrow`): `-1` is the last. Out of range, the error names the position as typed.
fn position(f: &'static str, x: &Tensor, d: isize, v: &Value) -> R<usize> {
    let typed = as_int(v, f)?;
    let size = x.dim(d)? as i64;
    let at = if typed < 0 { typed + size } else { typed };
    if at < 0 || at > size || (f == "select" && at == size) {
        return Err(ReplError::IndexOutOfRange {
            index: typed,
            dim: usize::try_from(if d < 0 { d + x.rank() as isize } else { d }).ok(),
            size,
        });
    }
    Ok(at as usize)
}
