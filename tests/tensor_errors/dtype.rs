//! Dtype mismatches and bad parameters, refused at the call (F1); `f16` dropout with a scale
//! past `f16`'s range.

use crate::common::reference::{R, f32s};
use crate::{fails_at_call, on, private};
use eddy::tensor::{DType, Error, Tensor, with_engine};

use DType::{F16, F32, F64, I64};

#[test]
fn dtype_mismatch_is_returned_at_the_call() {
    let vm = private();
    let (a, b) = on(&vm, || {
        Ok((Tensor::ones([2, 2], F32)?, Tensor::ones([2, 2], F64)?))
    });
    let (e, line) = (fails_at_call(&[&vm], || a.matmul(&b)), line!());
    assert_eq!(
        e,
        Error::DTypeMismatch {
            at: eddy::tensor::Caller::UNKNOWN,
            op: "matmul",
            lhs: F32,
            rhs: F64
        }
    );
    assert_eq!(
        e.to_string(),
        format!(
            "dtype mismatch in `matmul`, lhs: f32, rhs: f64 (called at {}:{line}:49)",
            file!()
        )
    );

    // An integer tensor cannot store a float result in place.
    let (i, f) = on(&vm, || {
        Ok((
            Tensor::from_vec(vec![1i64, 2], [2])?,
            Tensor::from_vec(vec![0.5f32, 1.5], [2])?,
        ))
    });
    let e = fails_at_call(&[&vm], || i.add_(&f));
    assert_eq!(
        e,
        Error::DTypeMismatch {
            at: eddy::tensor::Caller::UNKNOWN,
            op: "add",
            lhs: I64,
            rhs: F32
        }
    );
    assert!(matches!(
        fails_at_call(&[&vm], || i.div_(&i)),
        Error::DTypeMismatch { op: "div", .. }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || i.mul_scalar_(0.5)),
        Error::DTypeMismatch { op: "mul", .. }
    ));
    assert_eq!(
        i.to_vec::<i64>().unwrap(),
        vec![1, 2],
        "the destination is untouched"
    );
    // A float destination takes an integer source.
    a.narrow(0, 0, 1).unwrap().add_(&i).unwrap();
    assert_eq!(f32s(&a), vec![2., 3., 1., 1.]);

    // `cat` promotes mixed dtypes, as PyTorch.
    let c = on(&vm, || Tensor::ones([1, 2], F64));
    assert_eq!(Tensor::cat(&[&a, &c], 0).unwrap().dtype(), F64);
    assert!(matches!(
        fails_at_call(&[&vm], || a.to_vec::<f64>()),
        Error::DTypeMismatch { op: "to_vec", .. }
    ));
    // Unsupported dtypes.
    assert!(matches!(
        fails_at_call(&[&vm], || i.mean_all()),
        Error::UnsupportedDType {
            at: _,
            op: "mean",
            dtype: I64
        }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || i.softmax(0)),
        Error::UnsupportedDType { op: "softmax", .. }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || a.index_select(0, &f)),
        Error::UnsupportedDType {
            op: "index_select",
            ..
        }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || a.gather(0, &a)),
        Error::UnsupportedDType { op: "gather", .. }
    ));
    // Log-probabilities must be floats (PyTorch has no integer `nll_loss` kernel).
    let (logp, class) = on(&vm, || {
        let t = Tensor::from_vec(vec![0i64], [1])?;
        Ok((Tensor::zeros([1, 2], I64)?, t))
    });
    assert!(matches!(
        fails_at_call(&[&vm], || logp.nll_loss(&class)),
        Error::UnsupportedDType {
            op: "nll_loss",
            dtype: I64,
            ..
        }
    ));
    // A float target is read as class probabilities, which must have the logits' shape.
    assert!(matches!(
        fails_at_call(&[&vm], || a.cross_entropy(&f)),
        Error::ShapeMismatch {
            op: "cross_entropy",
            ..
        }
    ));
    // Float ids of an embedding, even as a strided view (refused before any copy).
    let ids = on(&vm, || Tensor::ones([2, 2], F32)?.t());
    assert!(matches!(
        fails_at_call(&[&vm], || a.embedding(&ids)),
        Error::UnsupportedDType { .. }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || with_engine(&vm, || Tensor::rand([2], I64))),
        Error::UnsupportedDType { op: "rand", .. }
    ));
}

#[test]
fn bad_activation_parameters_and_bool_operands_fail_at_the_call() {
    let vm = private();
    let (x, m) = on(&vm, || {
        Ok((
            Tensor::ones([3], F32)?,
            Tensor::from_vec(vec![true, false, true], [3])?,
        ))
    });
    for beta in [0.0, f64::NAN, f64::INFINITY] {
        let e = fails_at_call(&[&vm], || x.softplus(beta, 20.0));
        assert!(
            matches!(e, Error::InvalidArgument { at: _, op: "softplus", ref message } if message.contains("beta")),
            "{e}"
        );
    }
    for (op, r) in [
        (
            "floor",
            Box::new(|| m.floor()) as Box<dyn Fn() -> R<Tensor>>,
        ),
        ("leaky_relu", Box::new(|| m.leaky_relu(0.1))),
    ] {
        let e = fails_at_call(&[&vm], r);
        assert_eq!(
            e,
            Error::UnsupportedDType {
                at: eddy::tensor::Caller::UNKNOWN,
                op,
                dtype: DType::Bool
            }
        );
    }
    // As PyTorch, a transcendental op takes a bool tensor and computes in f32.
    assert_eq!(m.erf().unwrap().dtype(), F32);
    let e = fails_at_call(&[&vm], || {
        Tensor::custom_map::<bool, _>("copy_bools", &[&m], [3], |i, o| {
            o.copy_from_slice(i[0]);
            Ok(())
        })
    });
    assert!(
        matches!(e, Error::InvalidArgument { at: _, op: "copy_bools", ref message } if message.contains("Bool8"))
    );
}

#[test]
fn bad_dropout_probabilities_and_integer_operands_fail_at_the_call() {
    let vm = private();
    let (x, i) = on(&vm, || {
        Ok((
            Tensor::ones([8], F32)?,
            Tensor::from_vec(vec![1i64, 2, 3], [3])?,
        ))
    });
    for p in [-0.1, 1.5, f64::NAN, f64::INFINITY] {
        for train in [true, false] {
            let e = fails_at_call(&[&vm], || x.dropout(p, train));
            assert!(
                matches!(e, Error::InvalidArgument { at: _, op: "dropout", ref message } if message.contains("probability")),
                "{e}"
            );
        }
        let e = eddy::tensor::nn::Dropout::new(p).expect_err("a bad probability");
        assert!(
            matches!(e, Error::InvalidArgument { op: "Dropout", .. }),
            "{e}"
        );
    }
    for train in [true, false] {
        let e = fails_at_call(&[&vm], || i.dropout(0.5, train));
        assert_eq!(
            e,
            Error::UnsupportedDType {
                at: eddy::tensor::Caller::UNKNOWN,
                op: "dropout",
                dtype: I64
            }
        );
    }
    // Evaluation mode and p = 0 enqueue nothing either: the result is the input.
    for (p, train) in [(0.5, false), (0.0, true)] {
        let s0 = vm.stats().inserted;
        let y = on(&vm, || x.dropout(p, train));
        assert!(y.shares_storage(&x));
        assert_eq!(vm.stats().inserted, s0);
    }
}

/// Random creation checks its parameters.
#[test]
fn random_parameters_are_checked() {
    for r in [
        Tensor::uniform([3], 1.0, 0.0, F32),
        Tensor::uniform([3], f64::NEG_INFINITY, 0.0, F32),
        Tensor::uniform([3], 0.0, f64::NAN, F32),
        Tensor::randn([3], 0.0, -1.0, F32),
        Tensor::randn([3], 0.0, f64::NAN, F32),
        Tensor::randn([3], f64::INFINITY, 1.0, F64),
    ] {
        assert!(matches!(r, Err(Error::InvalidArgument { .. })), "{r:?}");
    }
    let c = Tensor::uniform([3], 2.0, 2.0, F32)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(c, [2.0; 3]);
    let z = Tensor::randn([3], 1.0, 0.0, F32)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(z, [1.0; 3]);
}

/// f16 dropout with a scale past f16's range: a kept zero stays zero (not `0 × inf`), a kept
/// one overflows to infinity as the product does in PyTorch.
#[test]
fn f16_dropout_with_a_huge_scale() {
    let p = 0.99999;
    let z = Tensor::zeros([20_000], F16)
        .unwrap()
        .dropout(p, true)
        .unwrap();
    let z = z.to_dtype(F32).unwrap().to_vec::<f32>().unwrap();
    assert!(
        z.iter().all(|&v| v == 0.0),
        "a NaN or nonzero in {:?}",
        &z[..8]
    );
    let o = Tensor::ones([200_000], F16)
        .unwrap()
        .dropout(p, true)
        .unwrap();
    let o = o.to_dtype(F32).unwrap().to_vec::<f32>().unwrap();
    assert!(o.iter().all(|&v| v == 0.0 || v == f32::INFINITY));
    assert!(
        o.contains(&f32::INFINITY),
        "200,000 draws at 1e-5 kept none"
    );
}
