//! Activations with parameters, softmax, losses, embedding, dropout, convolution and
//! pooling, with PyTorch's parameter names and defaults.

use super::{Args, Builtin, method, out};
use crate::Tensor;
use crate::repl::Value;
use crate::repl::convert::{as_bool, as_num, as_tensor, as_usize};
use crate::repl::error::{R, ReplError};
use crate::tensor::Pair;

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
    method(
        "conv2d",
        "conv2d(weight, bias, stride=1, padding=0, dilation=1, groups=1)",
        conv2d,
    ),
    method(
        "max_pool2d",
        "max_pool2d(kernel_size, stride, padding=0, dilation=1, ceil_mode=false)",
        pool2d,
    ),
    method(
        "avg_pool2d",
        "avg_pool2d(kernel_size, stride, padding=0, ceil_mode=false, count_include_pad=true)",
        pool2d,
    ),
    method(
        "scaled_dot_product_attention",
        "scaled_dot_product_attention(key, value, attn_mask, dropout_p, is_causal, scale)",
        attention,
    ),
    method(
        "adaptive_avg_pool2d",
        "adaptive_avg_pool2d(output_size)",
        adaptive_pool2d,
    ),
];

/// A size per spatial dim, as PyTorch's `int or (int, int)`: a number or a list of two.
fn as_pair(v: &Value, f: &'static str) -> R<Pair> {
    match v {
        Value::List(l) if l.len() == 2 => Ok(Pair([as_usize(&l[0], f)?, as_usize(&l[1], f)?])),
        Value::List(l) => Err(ReplError::arg(
            f,
            format!(
                "expected a size or a list of two, got a list of {}",
                l.len()
            ),
        )),
        v => Ok(as_usize(v, f)?.into()),
    }
}

/// Argument `at` (or `key=`) as a [`Pair`], `default` when absent.
fn pair(a: &mut Args, f: &'static str, at: usize, key: &str, default: Pair) -> R<Pair> {
    a.param(f, at, key)?.map_or(Ok(default), |v| as_pair(&v, f))
}

/// Argument `at` (or `key=`) as a flag, `default` when absent.
fn flag(a: &mut Args, f: &'static str, at: usize, key: &str, default: bool) -> R<bool> {
    a.param(f, at, key)?.map_or(Ok(default), |v| as_bool(&v, f))
}

/// PyTorch's `F.conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1)`.
fn conv2d(f: &'static str, x: Tensor, mut a: Args) -> R<Value> {
    let w = a.param(f, 0, "weight")?;
    let b = a.param(f, 1, "bias")?;
    let stride = pair(&mut a, f, 2, "stride", Pair([1, 1]))?;
    let padding = pair(&mut a, f, 3, "padding", Pair([0, 0]))?;
    let dilation = pair(&mut a, f, 4, "dilation", Pair([1, 1]))?;
    let groups = a.param(f, 5, "groups")?;
    a.done(f)?;
    a.arity(f, 0, 6)?;
    let Some(w) = w else {
        return Err(ReplError::arg(f, "missing the weight"));
    };
    let w = as_tensor(w, f)?;
    let b = b.map(|b| as_tensor(b, f)).transpose()?;
    let groups = groups.map_or(Ok(1), |g| as_usize(&g, f))?;
    out(x.conv2d(&w, b.as_ref(), stride, padding, dilation, groups))
}

/// PyTorch's `F.scaled_dot_product_attention(query, key, value, attn_mask=None,
/// dropout_p=0.0, is_causal=False, scale=None)`.
fn attention(f: &'static str, q: Tensor, mut a: Args) -> R<Value> {
    let (Some(k), Some(v)) = (a.param(f, 0, "key")?, a.param(f, 1, "value")?) else {
        return Err(ReplError::arg(f, "missing the key or the value"));
    };
    let mask = a.param(f, 2, "attn_mask")?;
    let p = a
        .param(f, 3, "dropout_p")?
        .map_or(Ok(0.0), |v| as_num(&v, f))?;
    let causal = flag(&mut a, f, 4, "is_causal", false)?;
    let scale = a.param(f, 5, "scale")?.map(|v| as_num(&v, f)).transpose()?;
    a.done(f)?;
    a.arity(f, 0, 6)?;
    let (k, v) = (as_tensor(k, f)?, as_tensor(v, f)?);
    let mask = mask.map(|m| as_tensor(m, f)).transpose()?;
    let opts = crate::tensor::AttentionOptions {
        mask: mask.as_ref(),
        dropout_p: p,
        is_causal: causal,
        scale,
    };
    out(q.scaled_dot_product_attention(&k, &v, opts))
}

/// `max_pool2d` and `avg_pool2d`, with PyTorch's parameters and defaults (the stride is the
/// kernel size unless given).
fn pool2d(f: &'static str, x: Tensor, mut a: Args) -> R<Value> {
    let Some(kernel) = a.param(f, 0, "kernel_size")? else {
        return Err(ReplError::arg(f, "missing the kernel size"));
    };
    let kernel = as_pair(&kernel, f)?;
    let stride = pair(&mut a, f, 1, "stride", kernel)?;
    let padding = pair(&mut a, f, 2, "padding", Pair([0, 0]))?;
    if f == "max_pool2d" {
        let dilation = pair(&mut a, f, 3, "dilation", Pair([1, 1]))?;
        let ceil = flag(&mut a, f, 4, "ceil_mode", false)?;
        a.done(f)?;
        a.arity(f, 1, 5)?;
        return out(x.max_pool2d(kernel, stride, padding, dilation, ceil));
    }
    let ceil = flag(&mut a, f, 3, "ceil_mode", false)?;
    let include = flag(&mut a, f, 4, "count_include_pad", true)?;
    a.done(f)?;
    a.arity(f, 1, 5)?;
    out(x.avg_pool2d(kernel, stride, padding, ceil, include, None))
}

/// PyTorch's `F.adaptive_avg_pool2d(x, output_size)`.
fn adaptive_pool2d(f: &'static str, x: Tensor, mut a: Args) -> R<Value> {
    let Some(size) = a.param(f, 0, "output_size")? else {
        return Err(ReplError::arg(f, "missing the output size"));
    };
    let size = as_pair(&size, f)?;
    a.done(f)?;
    a.arity(f, 0, 1)?;
    out(x.adaptive_avg_pool2d(size))
}

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
