//! The binary operators on REPL values: numbers as Python computes them, tensors and lists
//! (as tensors) as PyTorch does.

use super::Value;
use super::convert::{as_scalar, as_tensor, is_number, number_like};
use super::error::{R, ReplError};
use super::parser::Op;
use crate::Tensor;

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
        (Value::Tensor(x), Value::Num(c, int))
            if !matches!(op, Matmul | Max | Min | FloorDiv | Rem) =>
        {
            // The number's kind, as Python's: `t * 2` keeps an integer `t`'s dtype, `t * 2.0`
            // is a float.
            let c = as_scalar(&Value::Num(c, int), "operator")?;
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
        (Value::Num(c, int), Value::Tensor(y)) if matches!(op, Add | Sub | Mul) => {
            let c = as_scalar(&Value::Num(c, int), "operator")?;
            t(match op {
                Add => y.add_scalar(c),
                Sub => y.rsub_scalar(c),
                _ => y.mul_scalar(c),
            })
        }
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
                && y.rank() > 0
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
