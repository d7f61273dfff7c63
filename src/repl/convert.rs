//! Values to what ops take: tensors, numbers, dims, dtypes; and the rank limit.

use super::error::{R, ReplError};
use super::{MAX_RANK, Value};
use crate::{DType, Scalar, Tensor};

/// The kind of `v`, for messages: "a tensor", "a number", …
pub(super) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Tensor(_) => "a tensor",
        Value::Num(..) | Value::Int(_) => "a number",
        Value::Bool(_) => "a boolean",
        Value::List(_) => "a list",
        Value::DType(_) => "a dtype",
        Value::Str(_) => "a string",
        Value::Unit => "nothing",
    }
}

/// Whether `v` is an `i64` value (so `v as i64` neither saturates nor is NaN's 0).
pub(super) fn fits_i64(v: f64) -> bool {
    (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&v)
}

/// Whether `v` is a number (`Num` or `Int`).
pub(super) fn is_number(v: &Value) -> bool {
    matches!(v, Value::Num(..) | Value::Int(_))
}

/// The dtype named `n`, by Eddy's or PyTorch's name.
pub(super) fn parse_dtype(n: &str) -> Option<DType> {
    Some(match n {
        "f32" | "float32" | "float" => DType::F32,
        "f64" | "float64" | "double" => DType::F64,
        "f16" | "float16" | "half" => DType::F16,
        "bf16" | "bfloat16" => DType::BF16,
        "i64" | "int64" | "long" => DType::I64,
        "i32" | "int32" | "int" => DType::I32,
        "u8" | "uint8" => DType::U8,
        "bool" => DType::Bool,
        _ => return None,
    })
}

/// Refuses `rank` dims for `f` past [`MAX_RANK`].
pub(super) fn check_rank(f: &'static str, rank: usize) -> R<()> {
    if rank > MAX_RANK {
        return Err(ReplError::TooManyDims { name: f, rank });
    }
    Ok(())
}

/// `v`, unless it is a tensor of more than [`MAX_RANK`] dims (`unsqueeze` or `stack` again and
/// again).
pub(super) fn within_rank(f: &'static str, v: Value) -> R<Value> {
    if let Value::Tensor(t) = &v {
        check_rank(f, t.rank())?;
    }
    Ok(v)
}

/// A number as the 0-d tensor that meets the tensor `other`, converted once from its `f64`
/// value: of `other`'s dtype (so `0.1` meets an `f64` tensor as f64's 0.1, not as f32's
/// widened), except that a fraction meeting an integer or bool tensor is `f32` and an integer
/// meeting a bool tensor is `i64`, as PyTorch promotes.
fn num_like(c: f64, int: bool, other: &Tensor) -> R<Tensor> {
    let d = other.dtype();
    let dt = if d.is_float() {
        d
    } else if !int || c.fract() != 0.0 {
        DType::F32
    } else if d == DType::Bool {
        DType::I64
    } else {
        d
    };
    // An operand, not a fill value: as PyTorch's scalar operands, an integer past the dtype
    // wraps (`u8 + 300` adds 44) and a float past a float dtype's range becomes infinite in
    // it, rather than being refused as `full` refuses it.
    Ok(match dt {
        DType::U8 => Tensor::full((), c.rem_euclid(256.0), dt),
        DType::I32 => {
            let w = c.rem_euclid(4_294_967_296.0);
            Tensor::full(
                (),
                if w >= 2_147_483_648.0 {
                    w - 4_294_967_296.0
                } else {
                    w
                },
                dt,
            )
        }
        DType::F32 | DType::F16 | DType::BF16 => {
            Tensor::full((), c, DType::F64).and_then(|t| t.to_dtype(dt))
        }
        _ => Tensor::full((), c, dt),
    }?)
}

/// The number `v` as the 0-d tensor that meets the tensor `other`, as [`num_like`]; an
/// `Int` exactly where `other` has an integer dtype (wrapping past it), `i64` beside a bool
/// tensor.
pub(super) fn number_like(v: &Value, other: &Tensor) -> R<Tensor> {
    Ok(match (v, other.dtype()) {
        (&Value::Int(i), DType::I64 | DType::Bool) => Tensor::scalar(i)?,
        (&Value::Int(i), DType::I32) => Tensor::scalar(i as i32)?, // wraps
        (&Value::Int(i), DType::U8) => Tensor::scalar(i as u8)?,   // wraps
        (&Value::Int(i), _) => num_like(i as f64, true, other)?,
        (&Value::Num(c, int), _) => num_like(c, int, other)?,
        _ => {
            return Err(ReplError::type_(format!(
                "expected a number, got {}",
                kind(v)
            )));
        }
    })
}

/// `v` as a tensor: a number or boolean as a 0-d one, a list as [`list_tensor`] builds it.
pub(super) fn as_tensor(v: Value, what: &'static str) -> R<Tensor> {
    Ok(match v {
        Value::Tensor(t) => t,
        Value::Num(x, true) => Tensor::scalar(x as i64)?,
        Value::Num(x, false) => Tensor::scalar(x as f32)?,
        Value::Int(i) => Tensor::scalar(i)?,
        Value::Bool(b) => Tensor::scalar(b)?,
        Value::List(_) => list_tensor(&v, None)?,
        v => {
            return Err(ReplError::arg(
                what,
                format!("expected a tensor, got {}", kind(&v)),
            ));
        }
    })
}

/// `v` as a number: a boolean is 0 or 1, a one-element tensor its value.
pub(super) fn as_num(v: &Value, what: &'static str) -> R<f64> {
    match v {
        Value::Num(x, _) => Ok(*x),
        Value::Int(i) => Ok(*i as f64),
        Value::Bool(b) => Ok(f64::from(u8::from(*b))),
        Value::Tensor(t) if t.numel() == 1 => Ok(t.to_scalar()?),
        v => Err(ReplError::arg(
            what,
            format!("expected a number, got {}", kind(v)),
        )),
    }
}

/// `v` as a number of its kind, as Python's `int`, `float` and `bool` (a one-element tensor as
/// its dtype's kind).
pub(super) fn as_scalar(v: &Value, what: &'static str) -> R<Scalar> {
    Ok(match v {
        Value::Num(x, true) => Scalar::Int(*x as i64),
        Value::Num(x, false) => Scalar::Float(*x),
        Value::Int(i) => Scalar::Int(*i),
        Value::Bool(b) => Scalar::Bool(*b),
        Value::Tensor(t) if t.dtype().is_float() => Scalar::Float(as_num(v, what)?),
        Value::Tensor(t) if t.dtype() == DType::Bool => Scalar::Bool(as_num(v, what)? != 0.0),
        _ => Scalar::Int(as_num(v, what)? as i64),
    })
}

/// `v` as an integer; a fraction is an error.
pub(super) fn as_int(v: &Value, what: &'static str) -> R<i64> {
    if let Value::Int(i) = v {
        return Ok(*i);
    }
    let x = as_num(v, what)?;
    if x.fract() != 0.0 {
        return Err(ReplError::arg(
            what,
            format!("expected an integer, got {x}"),
        ));
    }
    Ok(x as i64)
}

/// `v` as a size or count.
pub(super) fn as_usize(v: &Value, what: &'static str) -> R<usize> {
    let x = as_int(v, what)?;
    usize::try_from(x)
        .map_err(|_| ReplError::arg(what, format!("expected a non-negative integer, got {x}")))
}

/// `v` as a flag: a number is true unless 0.
pub(super) fn as_bool(v: &Value, what: &'static str) -> R<bool> {
    match v {
        Value::Bool(b) => Ok(*b),
        Value::Num(x, _) => Ok(*x != 0.0),
        Value::Int(_) => Ok(true), // never 0
        v => Err(ReplError::arg(
            what,
            format!("expected true or false, got {}", kind(v)),
        )),
    }
}

/// Builds a tensor from a number or a (nested) list, as `torch.tensor`: every number at one
/// depth and the lists at each depth of one length. Without `dtype`, booleans alone give
/// `bool`, integers (with or without booleans) `i64`, and a fraction or no number at all
/// (`tensor([])`) `f32`. An `i64` tensor takes its integers exactly; otherwise the values
/// are converted once, from their `f64`, to the dtype. An integer dtype refuses a value
/// outside `i64`'s range instead of saturating.
pub(super) fn list_tensor(v: &Value, dtype: Option<DType>) -> R<Tensor> {
    /// What the walk has gathered.
    #[derive(Default)]
    struct Walk {
        shape: Vec<usize>,
        vals: Vec<f64>,
        /// The same values as `i64`s: exact for integers, fractions truncated toward zero as
        /// `to_dtype` truncates them (used for an `i64` result).
        ints: Vec<i64>,
        /// Whether a number was seen: the shape is complete then, and a list one level deeper
        /// than every list before it (`[1, [2]]`) is ragged.
        leaf: bool,
        /// Whether an integer, a fraction was seen.
        int: bool,
        float: bool,
        /// The first number outside `i64`'s range.
        huge: Option<Value>,
    }
    impl Walk {
        fn walk(&mut self, v: &Value, depth: usize) -> R<()> {
            match v {
                Value::List(items) => {
                    if self.shape.len() == depth {
                        if self.leaf {
                            return Err(ragged());
                        }
                        check_rank("tensor", depth + 1)?;
                        self.shape.push(items.len());
                    } else if self.shape[depth] != items.len() {
                        return Err(ReplError::arg(
                            "tensor",
                            format!(
                                "ragged list (length {} where {} was expected)",
                                items.len(),
                                self.shape[depth]
                            ),
                        ));
                    }
                    items.iter().try_for_each(|i| self.walk(i, depth + 1))
                }
                &Value::Num(x, int) if self.shape.len() == depth => {
                    self.leaf = true;
                    if int {
                        self.int = true;
                    } else {
                        self.float = true;
                    }
                    if !fits_i64(x) && self.huge.is_none() {
                        self.huge = Some(Value::Num(x, int));
                    }
                    self.vals.push(x);
                    self.ints.push(x as i64);
                    Ok(())
                }
                &Value::Int(i) if self.shape.len() == depth => {
                    self.leaf = true;
                    self.int = true;
                    self.vals.push(i as f64);
                    self.ints.push(i);
                    Ok(())
                }
                &Value::Bool(b) if self.shape.len() == depth => {
                    self.leaf = true;
                    self.vals.push(f64::from(u8::from(b)));
                    self.ints.push(i64::from(b));
                    Ok(())
                }
                _ => Err(ragged()),
            }
        }
    }
    fn ragged() -> ReplError {
        ReplError::arg("tensor", "expected a nested list of numbers of one depth")
    }
    let mut w = Walk::default();
    w.walk(v, 0)?;
    let dtype = dtype.unwrap_or(match (w.leaf, w.float, w.int) {
        (true, false, true) => DType::I64,
        (true, false, false) => DType::Bool,
        _ => DType::F32,
    });
    // PyTorch's "Overflow when unpacking long": `tensor(2 ** 63)` is not `i64::MAX`.
    if let Some(h) = w.huge.filter(|_| !dtype.is_float() && dtype != DType::Bool) {
        return Err(ReplError::arg(
            "tensor",
            format!("{h} is outside the range of i64 (overflow)"),
        ));
    }
    if let Some(&v) = w.vals.iter().find(|&&v| !fits_dtype(v, dtype)) {
        return Err(ReplError::arg(
            "tensor",
            format!("value {v} cannot be converted to {dtype} without overflow"),
        ));
    }
    if dtype == DType::I64 {
        return Ok(Tensor::from_vec(w.ints, w.shape)?);
    }
    Ok(Tensor::from_vec(w.vals, w.shape).and_then(|t| t.to_dtype(dtype))?)
}

/// Whether a literal `v` converts to an integer `dtype` as PyTorch's `tensor` lets it: a whole
/// value within the dtype's range (a whole negative down to -255 wraps into `u8`), a fraction
/// strictly within one past each end (it truncates toward zero), never NaN. Float dtypes and
/// `bool` take every value (past a float's range is infinite, as PyTorch's).
fn fits_dtype(v: f64, dtype: DType) -> bool {
    let (lo, hi) = match dtype {
        DType::U8 => (0.0, 255.0),
        DType::I32 => (i32::MIN as f64, i32::MAX as f64),
        // The `i64` range is checked on the walk (`huge`).
        _ => return true,
    };
    if v.fract() == 0.0 {
        (lo..=hi).contains(&v) || (dtype == DType::U8 && (-255.0..0.0).contains(&v))
    } else {
        v > lo - 1.0 && v < hi + 1.0 // false for NaN
    }
}
