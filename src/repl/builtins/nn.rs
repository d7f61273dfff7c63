//! Activations with parameters, softmax, losses, embedding and dropout, with PyTorch's
//! parameter names and defaults.

use super::{Args, Builtin, method, out};
use crate::Tensor;
use crate::repl::Value;
use crate::repl::convert::{as_bool, as_num, as_tensor};
use crate::repl::error::R;

pub(super) const ROWS: &[Builtin] = &[
    method("leaky_relu", "leaky_relu(negative_slope=0.01)", activation),
    method("elu", "elu(alpha=1)", activation),
    method("softplus", "softplus(beta=1, threshold=20)", activation),
    method("dropout", "dropout(p=0.5, training=true)", dropout),
    method("softmax", "softmax(dim=-1)", softmax),
    method("log_softmax", "log_softmax(dim=-1)", softmax),
    method("cross_entropy", "cross_entropy(target)", with_tensor),
    method("nll_loss", "nll_loss(target)", with_tensor),
    method("mse_loss", "mse_loss(target)", with_tensor),
    method("embedding", "embedding(ids)", with_tensor),
];

/// `leaky_relu`, `elu`, `softplus`: one parameter, by position or name.
fn activation(f: &'static str, x: Tensor, mut a: Args) -> R<Value> {
    let (key, default) = match f {
        "leaky_relu" => ("negative_slope", 0.01),
        "elu" => ("alpha", 1.0),
        _ => ("beta", 1.0),
    };
    let threshold = if f == "softplus" {
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
    out(match f {
        "leaky_relu" => x.leaky_relu(p),
        "elu" => x.elu(p),
        _ => x.softplus(p, threshold),
    })
}

/// PyTorch's `F.dropout(x, p=0.5, training=True)`.
fn dropout(f: &'static str, x: Tensor, mut a: Args) -> R<Value> {
    let training = a.named("training").map_or(Ok(true), |v| as_bool(&v, f))?;
    if let Some(v) = a.named("p") {
        a.pos.push(v);
    }
    a.done(f)?;
    a.arity(f, 0, 1)?;
    let p = a.pos.first().map_or(Ok(0.5), |v| as_num(v, f))?;
    out(x.dropout(p, training))
}

/// `softmax` and `log_softmax`.
fn softmax(f: &'static str, x: Tensor, mut a: Args) -> R<Value> {
    let d = a.dim_or_last(f)?;
    out(if f == "softmax" {
        x.softmax(d)
    } else {
        x.log_softmax(d)
    })
}

/// The losses and `embedding`: one tensor argument.
fn with_tensor(f: &'static str, x: Tensor, mut a: Args) -> R<Value> {
    a.done(f)?;
    a.arity(f, 1, 1)?;
    let y = as_tensor(a.pos.pop().expect("1"), f)?;
    out(match f {
        "cross_entropy" => x.cross_entropy(&y),
        "nll_loss" => x.nll_loss(&y),
        "mse_loss" => x.mse_loss(&y),
        _ => x.embedding(&y),
    })
}
