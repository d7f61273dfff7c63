//! The operators (`+`, `-`, `*`, `/` and unary `-`) on tensors, borrowed tensors, results and
//! scalars, against the named methods; their errors; gradients through them.

use crate::common::reference::R;
use eddy::tensor::{DType, Error, Tensor};

/// The values and dtype of `t`, as `f64`s (bit-exact for every dtype these tests use).
fn exact(t: &Tensor) -> (DType, Vec<f64>) {
    (t.dtype(), t.to_f64_vec().unwrap())
}

#[test]
fn operators_compute_what_the_named_methods_do() -> R<()> {
    let a = Tensor::from_vec(vec![1.5f32, -2.0, 0.25, 3.0, -0.5, 8.0], [2, 3]).unwrap();
    let b = Tensor::from_vec(vec![0.5f32, 4.0, -3.0], [3]).unwrap(); // broadcasts over rows
    let (ta, tb) = (|| a.clone(), || b.clone());
    let named: [(&str, R<Tensor>); 4] = [
        ("add", a.add(&b)),
        ("sub", a.sub(&b)),
        ("mul", a.mul(&b)),
        ("div", a.div(&b)),
    ];
    // Every operand form on each side: tensor, borrowed tensor, op result.
    let forms: [(&str, [R<Tensor>; 4]); 7] = [
        ("&a op &b", [&a + &b, &a - &b, &a * &b, &a / &b]),
        (
            "a op b",
            [ta() + tb(), ta() - tb(), ta() * tb(), ta() / tb()],
        ),
        ("a op &b", [ta() + &b, ta() - &b, ta() * &b, ta() / &b]),
        ("&a op b", [&a + tb(), &a - tb(), &a * tb(), &a / tb()]),
        (
            "&a op Ok(b)",
            [&a + Ok(tb()), &a - Ok(tb()), &a * Ok(tb()), &a / Ok(tb())],
        ),
        (
            "Ok(a) op &b",
            [Ok(ta()) + &b, Ok(ta()) - &b, Ok(ta()) * &b, Ok(ta()) / &b],
        ),
        (
            "Ok(a) op b",
            [
                Ok(ta()) + tb(),
                Ok(ta()) - tb(),
                Ok(ta()) * tb(),
                Ok(ta()) / tb(),
            ],
        ),
    ];
    for (form, got) in forms {
        for ((op, want), got) in named.iter().zip(got) {
            let want = exact(want.as_ref().unwrap());
            assert_eq!(exact(&got.unwrap()), want, "{form} ({op})");
        }
    }
    assert_eq!(exact(&(-&a).unwrap()), exact(&a.neg().unwrap()));
    assert_eq!(exact(&(-ta()).unwrap()), exact(&a.neg().unwrap()));
    // An expression chains through results: a * b + a - b / a.
    let chained = ((&a * &b + &a)? - (&b / &a)?)?;
    let stepwise = a.mul(&b)?.add(&a)?.sub(&b.div(&a)?)?;
    assert_eq!(exact(&chained), exact(&stepwise));
    Ok(())
}

#[test]
fn operators_with_scalars_match_the_scalar_methods() {
    let f = Tensor::from_vec(vec![1.5f32, -2.0, 0.25, 3.0], [4]).unwrap();
    let d = Tensor::from_vec(vec![1.5f64, -2.0, 0.1, 3.0], [4]).unwrap();
    let i = Tensor::from_vec(vec![7i64, -3, 0, 12], [4]).unwrap();
    for t in [&f, &d, &i] {
        let pairs: [(R<Tensor>, R<Tensor>); 12] = [
            (t + 2.0, t.add_scalar(2.0)),
            (t - 2.5, t.sub_scalar(2.5)),
            (t * 3, t.mul_scalar(3)),
            (t / 4, t.div_scalar(4)),
            (2.0 + t, t.add_scalar(2.0)),
            (2.5 - t, t.rsub_scalar(2.5)),
            (3 * t, t.mul_scalar(3)),
            (t.clone() + 1, t.add_scalar(1)),
            (t.clone() - 0.5, t.sub_scalar(0.5)),
            (t.clone() * -2, t.mul_scalar(-2)),
            (5 - t.clone(), t.rsub_scalar(5)),
            (t.clone() / 0.5, t.div_scalar(0.5)),
        ];
        for (k, (got, want)) in pairs.into_iter().enumerate() {
            assert_eq!(
                exact(&got.unwrap()),
                exact(&want.unwrap()),
                "{:?} pair {k}",
                t.dtype()
            );
        }
    }
    // A scalar's Rust type is its kind: integer tensors stay integer beside an integer, and
    // compute in f32 beside a float, whole or not (PyTorch's `i + 2` and `i + 2.0`).
    assert_eq!((&i + 2).unwrap().dtype(), DType::I64);
    assert_eq!((&i * 0.5).unwrap().dtype(), DType::F32);
    assert_eq!((&i + 2.0).unwrap().dtype(), DType::F32);
    assert_eq!((2.0 * &i).unwrap().dtype(), DType::F32);
}

#[test]
fn a_scalar_over_a_tensor_is_rounded_once() {
    let xs = [3.0f32, -7.0, 0.1, 1e-3, 0.0, 6.0];
    let x = Tensor::from_slice(&xs, [2, 3]).unwrap();
    let got = (1.0 / &x).unwrap();
    assert_eq!(got.dtype(), DType::F32);
    assert_eq!(got.dims(), &[2, 3]);
    let want: Vec<f32> = xs.iter().map(|v| 1.0 / v).collect();
    assert_eq!(got.to_vec::<f32>().unwrap(), want);
    let got = (0.1 / x.clone()).unwrap().to_vec::<f32>().unwrap();
    let want: Vec<f32> = xs.iter().map(|v| 0.1f32 / v).collect();
    assert_eq!(got, want);
    let d = Tensor::from_slice(&[3.0f64, 0.7], [2]).unwrap();
    assert_eq!(
        (2 / &d).unwrap().to_vec::<f64>().unwrap(),
        [2.0 / 3.0, 2.0 / 0.7]
    );
    // Integer division is true division, in f32 (as `div`).
    let i = Tensor::from_slice(&[4i32, -8, 3], [3]).unwrap();
    let q = (6 / &i).unwrap();
    assert_eq!(q.dtype(), DType::F32);
    assert_eq!(q.to_vec::<f32>().unwrap(), [1.5, -0.75, 2.0]);
}

#[test]
fn operator_errors_are_the_ops_errors_left_first() {
    let a = Tensor::zeros([2, 3], DType::F32).unwrap();
    let b = Tensor::zeros([4], DType::F32).unwrap();
    let e = (&a + &b).unwrap_err();
    assert!(
        matches!(&e, Error::ShapeMismatch { at: _, op, lhs, rhs } if *op == "add" && lhs == &[2, 3] && rhs == &[4]),
        "{e}"
    );
    assert!(matches!(
        (&a / &b).unwrap_err(),
        Error::ShapeMismatch { op: "div", .. }
    ));
    // An operand that is already an error is returned as it is, the left one first.
    let left = (&a + &b) * &a;
    assert!(matches!(
        left.unwrap_err(),
        Error::ShapeMismatch { op: "add", .. }
    ));
    let right = &a * (&a - &b);
    assert!(matches!(
        right.unwrap_err(),
        Error::ShapeMismatch { op: "sub", .. }
    ));
}

#[test]
fn gradients_flow_through_operators() -> R<()> {
    let x = Tensor::from_vec(vec![0.5f64, -1.5, 2.0], [3])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    // y = sum(x*x + 3x - 1/x + 2) ; dy/dx = 2x + 3 + 1/x^2
    let y = ((&x * &x + (&x * 3.0)?)? - (1.0 / &x)?)?;
    let y = (y + 2.0)?.sum_all()?;
    y.backward()?;
    let g = x.grad().unwrap().to_vec::<f64>().unwrap();
    for (g, x) in g.iter().zip([0.5f64, -1.5, 2.0]) {
        let want = 2.0 * x + 3.0 + 1.0 / (x * x);
        assert!((g - want).abs() < 1e-12, "{g} vs {want}");
    }
    Ok(())
}
