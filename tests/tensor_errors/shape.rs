//! Shape and dim errors, returned at the call before anything is enqueued (F1).

use crate::common::reference::{R, f32s};
use crate::{fails_at_call, on, private};
use eddy::tensor::{DType, Error, Tensor, with_engine};

use DType::{F16, F32, I64};

#[test]
fn shape_mismatch_is_returned_at_the_call() {
    let vm = private();
    let a = on(&vm, || Tensor::ones([2], F32));
    let b = on(&vm, || Tensor::ones([3], F32));
    let e = fails_at_call(&[&vm], || a.add(&b));
    assert_eq!(
        e,
        Error::ShapeMismatch {
            at: eddy::tensor::Caller::UNKNOWN,
            op: "add",
            lhs: vec![2],
            rhs: vec![3]
        }
    );
    let msg = e.to_string();
    assert!(
        msg.contains("add") && msg.contains("[2]") && msg.contains("[3]"),
        "{msg}"
    );
    assert_eq!(e.op(), Some("add"));
    // The operands are untouched and the engine still works.
    assert_eq!(f32s(&a), vec![1.0; 2]);
    assert_eq!(f32s(&a.add(&a).unwrap()), vec![2.0; 2]);

    let m = on(&vm, || Tensor::ones([2, 3], F32));
    let n = on(&vm, || Tensor::ones([4, 5], F32));
    let e = fails_at_call(&[&vm], || m.matmul(&n));
    assert_eq!(
        e,
        Error::ShapeMismatch {
            at: eddy::tensor::Caller::UNKNOWN,
            op: "matmul",
            lhs: vec![2, 3],
            rhs: vec![4, 5]
        }
    );
    assert!(e.to_string().contains("matmul"));
    // Inner dims are checked before any cast of f16 or integer operands is enqueued.
    for dt in [F16, DType::BF16, I64, DType::I32] {
        let (p, q) = on(&vm, || {
            Ok((Tensor::ones([2, 3], dt)?, Tensor::ones([2, 3], dt)?))
        });
        let e = fails_at_call(&[&vm], || p.matmul(&q));
        assert!(
            matches!(e, Error::ShapeMismatch { op: "matmul", .. }),
            "{dt}: {e}"
        );
    }
    // Batch dims that do not broadcast; a 1-D operand of the wrong length.
    let (p, q, v) = on(&vm, || {
        Ok((
            Tensor::ones([2, 2, 3], F32)?,
            Tensor::ones([3, 3, 4], F32)?,
            Tensor::ones([4], F32)?,
        ))
    });
    assert!(matches!(
        fails_at_call(&[&vm], || p.matmul(&q)),
        Error::ShapeMismatch { op: "matmul", .. }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || p.matmul(&v)),
        Error::ShapeMismatch { op: "matmul", .. }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || v.matmul(&p)),
        Error::ShapeMismatch { op: "matmul", .. }
    ));
}

#[test]
fn every_op_checks_its_shapes_before_enqueueing() {
    let vm = private();
    let (x, y, w, t3, tf) = on(&vm, || {
        Ok((
            Tensor::ones([2, 3], F32)?,
            Tensor::ones([3, 2], F32)?,
            Tensor::ones([4], F32)?,
            Tensor::from_vec(vec![0i64, 1, 2], [3])?,
            Tensor::from_vec(vec![0f32, 1.0], [2])?,
        ))
    });
    type Case<'a> = (&'static str, Box<dyn Fn() -> R<Tensor> + 'a>);
    let cases: Vec<Case> = vec![
        ("sub", Box::new(|| x.sub(&y))),
        ("maximum", Box::new(|| x.maximum(&y))),
        ("eq", Box::new(|| x.eq(&y))),
        ("where", Box::new(|| x.gt_scalar(0.0)?.where_(&x, &y))),
        ("cat", Box::new(|| Tensor::cat(&[&x, &y], 0))),
        ("stack", Box::new(|| Tensor::stack(&[&x, &y], 0))),
        ("mse_loss", Box::new(|| x.mse_loss(&y))),
        ("nll_loss", Box::new(|| x.nll_loss(&t3))),
        ("cross_entropy", Box::new(|| x.cross_entropy(&t3))),
        (
            "layer_norm",
            Box::new(|| x.layer_norm(1, Some(&w), None, 1e-5)),
        ),
        (
            "layer_norm",
            Box::new(|| x.layer_norm(1, None, Some(&w), 1e-5)),
        ),
        (
            "index_select",
            Box::new(|| x.index_select(0, &t3.reshape([1, 3])?)),
        ),
        (
            "gather",
            Box::new(|| x.gather(1, &Tensor::zeros([3, 1], I64)?)),
        ),
        ("add", Box::new(|| w.add_(&x))),
        ("copy_", Box::new(|| w.copy_(&x))),
        ("broadcast_to", Box::new(|| x.broadcast_to([3, 3]))),
        (
            "backward",
            Box::new(|| {
                let p = tf.clone().requires_grad_(true).unwrap();
                p.mul_scalar(2.0)?.backward_with(&w).map(|_| p)
            }),
        ),
    ];
    for (op, f) in cases {
        // Building the operands (the `where` condition, the gather index) may enqueue; only
        // the failing call itself is measured, so build them outside where the op allows.
        let e = match op {
            "where" => {
                let c = x.gt_scalar(0.0).unwrap();
                fails_at_call(&[&vm], || c.where_(&x, &y))
            }
            "gather" => {
                let i = on(&vm, || Tensor::zeros([3, 1], I64));
                fails_at_call(&[&vm], || x.gather(1, &i))
            }
            "backward" => {
                let p = tf.clone().requires_grad_(true).unwrap();
                let q = p.mul_scalar(2.0).unwrap();
                fails_at_call(&[&vm], || q.backward_with(&w))
            }
            _ => fails_at_call(&[&vm], f),
        };
        // `stack` is `cat` of unsqueezed views, and reports the `cat`.
        let want = if op == "stack" { "cat" } else { op };
        assert!(
            matches!(&e, Error::ShapeMismatch { op: o, .. } if *o == want),
            "{op}: {e:?}"
        );
        assert!(e.to_string().contains(want), "{op}: {e}");
    }
    assert!(matches!(
        fails_at_call(&[&vm], || x.reshape([4])),
        Error::ElementCountMismatch { op: "reshape", .. }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || with_engine(&vm, || Tensor::from_vec(
            vec![1f32; 5],
            [2, 3]
        ))),
        Error::ElementCountMismatch { op: "from_vec", .. }
    ));
}

#[test]
fn invalid_dims_and_indices() {
    let vm = private();
    let (x, v, idx) = on(&vm, || {
        Ok((
            Tensor::ones([4, 3], F32)?,
            Tensor::ones([4], F32)?,
            Tensor::from_vec(vec![0i64], [1])?,
        ))
    });
    type Case<'a> = (&'static str, isize, Box<dyn Fn() -> R<Tensor> + 'a>);
    let cases: Vec<Case> = vec![
        ("sum", 2, Box::new(|| x.sum(&[0, 2], false))),
        ("sum", -3, Box::new(|| x.sum(&[-3], true))),
        ("max", 5, Box::new(|| x.max(5, false))),
        ("argmin", -3, Box::new(|| x.argmin(-3, false))),
        ("transpose", -3, Box::new(|| x.transpose(0, -3))),
        ("permute", 2, Box::new(|| x.permute(&[0, 2]))),
        ("softmax", 2, Box::new(|| x.softmax(2))),
        ("log_softmax", -3, Box::new(|| x.log_softmax(-3))),
        ("narrow", 2, Box::new(|| x.narrow(2, 0, 1))),
        ("select", -3, Box::new(|| x.select(-3, 0))),
        ("squeeze", 2, Box::new(|| x.squeeze(2))),
        ("unsqueeze", 3, Box::new(|| x.unsqueeze(3))),
        ("unsqueeze", -4, Box::new(|| x.unsqueeze(-4))),
        ("cat", 2, Box::new(|| Tensor::cat(&[&x, &x], 2))),
        ("stack", 2, Box::new(|| Tensor::stack(&[&v, &v], 2))),
        ("index_select", 2, Box::new(|| x.index_select(2, &idx))),
        (
            "gather",
            -3,
            Box::new(|| x.gather(-3, &idx.reshape([1, 1])?)),
        ),
    ];
    for (op, dim, f) in cases {
        let e = if op == "gather" {
            let i = idx.reshape([1, 1]).unwrap();
            fails_at_call(&[&vm], || x.gather(-3, &i))
        } else {
            fails_at_call(&[&vm], f)
        };
        assert!(
            matches!(&e, Error::InvalidDim { op: o, dim: d, .. } if *o == op && *d == dim),
            "{op}({dim}): {e:?}"
        );
        assert!(e.to_string().contains(&dim.to_string()), "{e}");
    }
    assert!(matches!(x.dim(2), Err(Error::InvalidDim { op: "dim", .. })));
    assert_eq!(x.dim(-1).unwrap(), 3);

    // Ranges past the end of a dim.
    let e = fails_at_call(&[&vm], || v.narrow(0, 2, 3));
    assert_eq!(
        e,
        Error::IndexOutOfRange {
            at: eddy::tensor::Caller::UNKNOWN,
            op: "narrow",
            index: 5,
            size: 4
        }
    );
    assert!(e.to_string().contains("index 5") && e.to_string().contains("size 4"));
    assert!(matches!(
        fails_at_call(&[&vm], || v.narrow(0, usize::MAX, 2)),
        Error::IndexOutOfRange { op: "narrow", .. }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || v.narrow(0, 5, 0)),
        Error::IndexOutOfRange { op: "narrow", .. }
    ));
    assert_eq!(
        fails_at_call(&[&vm], || x.select(0, 4)),
        Error::IndexOutOfRange {
            at: eddy::tensor::Caller::UNKNOWN,
            op: "select",
            index: 4,
            size: 4
        }
    );
    assert!(matches!(
        fails_at_call(&[&vm], || x.slice(1, 2..4)),
        Error::IndexOutOfRange { .. }
    ));
    assert_eq!(
        v.narrow(0, 4, 0).unwrap().dims(),
        &[0],
        "an empty range at the end is fine"
    );

    // Other bad arguments.
    // `t` of a 1-d tensor is the tensor itself, as in PyTorch.
    assert_eq!(v.t().unwrap().dims(), v.dims());
    assert!(matches!(
        fails_at_call(&[&vm], || x.permute(&[0, 0])),
        Error::InvalidArgument { op: "permute", .. }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || x.t()?.view([12])),
        Error::InvalidArgument { op: "view", .. }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || x.clamp(None::<f64>, None::<f64>)),
        Error::InvalidArgument { op: "clamp", .. }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || x.layer_norm(3, None, None, 1e-5)),
        Error::InvalidArgument {
            op: "layer_norm",
            ..
        }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || Tensor::cat(&[], 0)),
        Error::InvalidArgument { op: "cat", .. }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || x.item::<f32>()),
        Error::InvalidArgument { op: "item", .. }
    ));
    let s = on(&vm, || Tensor::scalar(1f32));
    assert!(matches!(
        fails_at_call(&[&vm], || s.matmul(&v)),
        Error::InvalidArgument { op: "matmul", .. }
    ));
}

/// A 0-d tensor's softmax checks its dim like every other 0-d op (0 and -1 only).
#[test]
fn softmax_of_a_scalar_checks_the_dim() {
    let s = Tensor::from_vec(vec![1f32], []).unwrap();
    for log in [false, true] {
        let r = if log { s.log_softmax(7) } else { s.softmax(7) };
        assert!(matches!(r, Err(Error::InvalidDim { .. })), "{r:?}");
        for d in [0, -1] {
            let r = if log { s.log_softmax(d) } else { s.softmax(d) };
            assert_eq!(
                r.unwrap().item::<f32>().unwrap(),
                if log { 0.0 } else { 1.0 }
            );
        }
    }
}
