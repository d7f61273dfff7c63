//! Functions: creation, joining, `where`, `matmul`, `manual_seed`.

use super::{Args, Builtin, function, out};
use crate::repl::Value;
use crate::repl::convert::{
    as_int, as_num, as_tensor, as_usize, check_rank, is_number, kind, list_tensor, number_like,
};
use crate::repl::error::{R, ReplError};
use crate::{DType, Tensor};

pub(super) const ROWS: &[Builtin] = &[
    function("randn", "randn(dims..)", filled),
    function("rand", "rand(dims..)", filled),
    function("zeros", "zeros(dims..)", filled),
    function("ones", "ones(dims..)", filled),
    function("full", "full([dims], value)", full),
    function("eye", "eye(n)", eye),
    function("arange", "arange([start,] end[, step])", arange),
    function("linspace", "linspace(start, end, steps)", linspace),
    function("tensor", "tensor([[..]])", tensor),
    function("cat", "cat([a, b], dim=0)", join),
    function("stack", "stack([a, b], dim=0)", join),
    function("where", "where(cond, a, b)", where_),
    function("matmul", "matmul(a, b)", matmul),
    function("manual_seed", "manual_seed(n)", manual_seed),
];

/// `randn`, `rand`, `zeros`, `ones` of the sizes given.
fn filled(f: &'static str, mut a: Args) -> R<Value> {
    let dt = a.dtype(f, DType::F32)?;
    a.done(f)?;
    let dims = a.dims(f)?;
    check_rank(f, dims.len())?;
    out(match f {
        "randn" => Tensor::randn(dims, 0.0, 1.0, dt),
        "rand" => Tensor::rand(dims, dt),
        "zeros" => Tensor::zeros(dims, dt),
        _ => Tensor::ones(dims, dt),
    })
}

fn full(f: &'static str, mut a: Args) -> R<Value> {
    // PyTorch infers the dtype from the fill value: an integer gives i64, a bool bool.
    let dt = match a.pos.get(1) {
        Some(Value::Num(_, true) | Value::Int(_)) => DType::I64,
        Some(Value::Bool(_)) => DType::Bool,
        _ => DType::F32,
    };
    let dt = a.dtype(f, dt)?;
    a.done(f)?;
    a.arity(f, 2, 2)?;
    let dims = Args {
        pos: vec![a.pos[0].clone()],
        ..Args::default()
    }
    .dims(f)?;
    check_rank(f, dims.len())?;
    if let (&Value::Int(i), DType::I64) = (&a.pos[1], dt) {
        // Exactly: `Tensor::full` takes an `f64`.
        let one = Tensor::scalar(i)?;
        return out(one.broadcast_to(dims).and_then(|o| o.contiguous()));
    }
    out(Tensor::full(dims, as_num(&a.pos[1], f)?, dt))
}

fn eye(f: &'static str, mut a: Args) -> R<Value> {
    let dt = a.dtype(f, DType::F32)?;
    a.done(f)?;
    a.arity(f, 1, 1)?;
    out(Tensor::eye(as_usize(&a.pos[0], f)?, dt))
}

fn arange(f: &'static str, mut a: Args) -> R<Value> {
    let all_int = a
        .pos
        .iter()
        .all(|v| matches!(v, Value::Num(_, true) | Value::Int(_)));
    let dt = a.dtype(f, if all_int { DType::I64 } else { DType::F32 })?;
    a.done(f)?;
    a.arity(f, 1, 3)?;
    let n: Vec<f64> = a.pos.iter().map(|v| as_num(v, f)).collect::<R<_>>()?;
    let (s, e, st) = match n.as_slice() {
        [e] => (0.0, *e, 1.0),
        [s, e] => (*s, *e, 1.0),
        [s, e, st] => (*s, *e, *st),
        _ => unreachable!("arity checked"),
    };
    out(Tensor::arange(s, e, st, dt))
}

fn linspace(f: &'static str, mut a: Args) -> R<Value> {
    let dt = a.dtype(f, DType::F32)?;
    a.done(f)?;
    a.arity(f, 3, 3)?;
    out(Tensor::linspace(
        as_num(&a.pos[0], f)?,
        as_num(&a.pos[1], f)?,
        as_usize(&a.pos[2], f)?,
        dt,
    ))
}

fn tensor(f: &'static str, mut a: Args) -> R<Value> {
    let dt = match a.named("dtype") {
        None => None,
        Some(Value::DType(d)) => Some(d),
        Some(v) => {
            return Err(ReplError::arg(
                f,
                format!("dtype= expects a dtype, got {}", kind(&v)),
            ));
        }
    };
    a.done(f)?;
    a.arity(f, 1, 1)?;
    // A number is a 0-d tensor, built as a list is: from its f64 value, converted once.
    Ok(Value::Tensor(list_tensor(&a.pos[0], dt)?))
}

/// `cat` and `stack` of a list of tensors.
fn join(f: &'static str, mut a: Args) -> R<Value> {
    let dim = a.named("dim").map(|v| as_int(&v, f)).transpose()?;
    a.done(f)?;
    a.arity(f, 1, 2)?;
    let dim = match (dim, a.pos.get(1)) {
        (Some(d), None) => d,
        (None, Some(v)) => as_int(v, f)?,
        (None, None) => 0,
        (Some(_), Some(_)) => return Err(ReplError::arg(f, "dim given twice")),
    } as isize;
    let Value::List(items) = a.pos[0].clone() else {
        return Err(ReplError::arg(f, "expected a list of tensors"));
    };
    let ts: Vec<Tensor> = items
        .into_iter()
        .map(|v| as_tensor(v, f))
        .collect::<R<_>>()?;
    let refs: Vec<&Tensor> = ts.iter().collect();
    out(if f == "cat" {
        Tensor::cat(&refs, dim)
    } else {
        Tensor::stack(&refs, dim)
    })
}

fn where_(f: &'static str, a: Args) -> R<Value> {
    a.done(f)?;
    a.arity(f, 3, 3)?;
    let mut it = a.pos.into_iter();
    let c = as_tensor(it.next().expect("3"), f)?;
    let (x, y) = (it.next().expect("3"), it.next().expect("3"));
    // A number beside a tensor takes the tensor's dtype, as PyTorch's scalar operands
    // (`where(c, 0.1, x)` of an f64 `x` is f64's 0.1, not f32's).
    let (x, y) = match (x, y) {
        (x, Value::Tensor(y)) if is_number(&x) => (number_like(&x, &y)?, y),
        (Value::Tensor(x), y) if is_number(&y) => {
            let y = number_like(&y, &x)?;
            (x, y)
        }
        (x, y) => (as_tensor(x, f)?, as_tensor(y, f)?),
    };
    out(c.where_(&x, &y))
}

fn matmul(f: &'static str, a: Args) -> R<Value> {
    a.done(f)?;
    a.arity(f, 2, 2)?;
    let mut it = a.pos.into_iter();
    let x = as_tensor(it.next().expect("2"), f)?;
    let y = as_tensor(it.next().expect("2"), f)?;
    out(x.matmul(&y))
}

fn manual_seed(f: &'static str, a: Args) -> R<Value> {
    a.done(f)?;
    a.arity(f, 1, 1)?;
    eddy_tensor::manual_seed(as_int(&a.pos[0], f)? as u64);
    Ok(Value::Unit)
}
