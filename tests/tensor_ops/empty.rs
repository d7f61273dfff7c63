//! Zero-sized tensors (F3): views, broadcasting, reductions (the identity, or `EmptyTensor`),
//! products, `softmax`, `cat`, indexing and printing.

use crate::common::reference::{Arr, cfg, check, f32s, float_dtype, numel, shape};
use eddy::tensor::{DType, Error, Tensor};
use proptest::prelude::*;

use DType::{BF16, F16, F32, F64, I32, I64};

proptest! {
    #![proptest_config(cfg())]

    /// Zero-sized views of zero-sized tensors (narrowing a dim of a tensor that has no
    /// elements) work with every kind of kernel.
    #[test]
    fn zero_sized_views_work_everywhere(shape in shape(2..=3), d in 0usize..3, dt in float_dtype()) {
        let mut shape = shape;
        let zero = (d + 1) % shape.len();
        shape[zero] = 0;
        let d = d % shape.len();
        if d == zero || shape[d] == 0 {
            return Ok(());
        }
        let t = Tensor::zeros(shape.clone(), dt).unwrap();
        let size = shape[d];
        let v = t.narrow(d as isize, size - 1, 1).unwrap();
        let mut vs = shape.clone();
        vs[d] = 1;
        let e = Arr::new(&vs, vec![]);
        check("exp", &v.exp().unwrap(), &e, dt);
        check("add", &v.add(&v).unwrap(), &e, dt);
        check("copy", &v.contiguous().unwrap(), &e, dt);
        check("sum", &v.sum(&[0], true).unwrap(), &Arr::new(&{ let mut s = vs.clone(); s[0] = 1; s }, vec![0.0; numel(&{ let mut s = vs.clone(); s[0] = 1; s })]), dt);
        check("softmax", &v.softmax(-1).unwrap(), &e, dt);
        v.fill_(1.0).unwrap();
        v.add_(&Tensor::ones([1], dt).unwrap()).unwrap();
        check("after in place", &t, &Arr::new(&shape, vec![]), dt);
        let idx = Tensor::from_vec(Vec::<i64>::new(), [0]).unwrap();
        check("index_select", &v.index_select(d as isize, &idx).unwrap(), &Arr::new(&{ let mut s = vs.clone(); s[d] = 0; s }, vec![]), dt);
    }
}

#[test]
fn broadcasting_zero_with_one_gives_zero() {
    let a = Tensor::zeros([0], F32).unwrap();
    let b = Tensor::ones([1], F32).unwrap();
    for t in [
        a.add(&b).unwrap(),
        b.mul(&a).unwrap(),
        a.maximum(&b).unwrap(),
    ] {
        assert_eq!(t.dims(), &[0]);
        assert!(f32s(&t).is_empty());
    }
    assert_eq!(a.lt(&b).unwrap().dims(), &[0]);
    let c = Tensor::ones([3, 1], F32).unwrap();
    assert_eq!(c.add(&a).unwrap().dims(), &[3, 0]);
    assert!(matches!(
        a.add(&Tensor::ones([2], F32).unwrap()),
        Err(Error::ShapeMismatch { op: "add", .. })
    ));
    // `[1]` cannot be broadcast *to* `[0]`'s partner `[2]`, and `[0]` not to `[1]`.
    assert!(a.broadcast_to([1]).is_err());
    assert_eq!(b.broadcast_to([0]).unwrap().dims(), &[0]);
}

#[test]
fn empty_reductions_return_the_identity() {
    for dt in [F32, F64, F16, BF16] {
        let e = Tensor::zeros([0, 3], dt).unwrap();
        assert_eq!(e.sum_all().unwrap().to_scalar().unwrap(), 0.0);
        assert_eq!(e.prod(&[0, 1], false).unwrap().to_scalar().unwrap(), 1.0);
        assert_eq!(
            e.sum(&[0], false).unwrap().to_f64_vec().unwrap(),
            vec![0.0; 3]
        );
        assert_eq!(
            e.prod(&[0], true).unwrap().to_f64_vec().unwrap(),
            vec![1.0; 3]
        );
        assert!(e.mean_all().unwrap().to_scalar().unwrap().is_nan());
        assert_eq!(e.sum(&[1], false).unwrap().dims(), &[0]);
    }
    let ei = Tensor::zeros([2, 0], I32).unwrap();
    let s = ei.sum(&[1], false).unwrap();
    assert_eq!(s.dtype(), I64);
    assert_eq!(s.to_vec::<i64>().unwrap(), vec![0, 0]);
    assert_eq!(
        ei.prod(&[1], false).unwrap().to_vec::<i64>().unwrap(),
        vec![1, 1]
    );
    assert_eq!(
        Tensor::scalar(5.0f32)
            .unwrap()
            .sum(&[], false)
            .unwrap()
            .item::<f32>()
            .unwrap(),
        5.0
    );
}

#[test]
fn max_over_an_empty_dim_is_an_empty_tensor_error() {
    let cases: [(&[usize], isize); 5] = [
        (&[0], 0),
        (&[0, 3], 0),
        (&[3, 0], -1),
        (&[0, 0], 1),
        (&[2, 0, 2], 1),
    ];
    for (shape, d) in cases {
        let t = Tensor::zeros(shape, F32).unwrap();
        for (name, r) in [
            ("max", t.max(d, false)),
            ("min", t.min(d, true)),
            ("argmax", t.argmax(d, false)),
            ("argmin", t.argmin(d, false)),
        ] {
            assert!(
                matches!(&r, Err(Error::EmptyTensor { at: _, op }) if *op == name),
                "{name} over dim {d} of {shape:?}: {r:?}"
            );
        }
        assert!(matches!(
            t.max_all(),
            Err(Error::EmptyTensor { at: _, op: "max" })
        ));
        assert!(matches!(
            t.min_all(),
            Err(Error::EmptyTensor { at: _, op: "min" })
        ));
    }
    // A non-empty reduced dim of a tensor with no elements is fine.
    let t = Tensor::zeros([0, 3], F32).unwrap();
    assert_eq!(t.max(1, false).unwrap().dims(), &[0]);
    assert_eq!(t.argmin(1, true).unwrap().dims(), &[0, 1]);
}

#[test]
fn zero_sized_matmul_softmax_cat_and_indexing() {
    let a = Tensor::ones([2, 0], F32).unwrap();
    let b = Tensor::ones([0, 3], F32).unwrap();
    let c = a.matmul(&b).unwrap();
    assert_eq!(c.dims(), &[2, 3]);
    assert_eq!(f32s(&c), vec![0.0; 6]);
    assert_eq!(
        b.matmul(&Tensor::ones([3, 2], F32).unwrap())
            .unwrap()
            .dims(),
        &[0, 2]
    );
    assert_eq!(
        Tensor::zeros([0], F32).unwrap().softmax(0).unwrap().dims(),
        &[0]
    );
    let x = Tensor::from_vec(vec![1f32, 2.], [1, 2]).unwrap();
    let cat = Tensor::cat(
        &[
            &Tensor::zeros([0, 2], F32).unwrap(),
            &x,
            &Tensor::zeros([0, 2], F32).unwrap(),
        ],
        0,
    )
    .unwrap();
    assert_eq!(f32s(&cat), vec![1.0, 2.0]);
    let none = Tensor::from_vec(Vec::<i64>::new(), [0]).unwrap();
    assert_eq!(x.index_select(1, &none).unwrap().dims(), &[1, 0]);
    assert!(
        Tensor::from_vec(Vec::<f32>::new(), [0, 5])
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
            .is_empty()
    );
}

/// Empty tensors print as PyTorch prints them, and without walking their other dims: `[2^62,
/// 0]` is a valid empty tensor, and printing it once tried to allocate 2^62 entries (found by
/// the `shape_program` fuzz target).
#[test]
fn display_of_empty_tensors() {
    let e = Tensor::zeros([0], DType::F32).unwrap();
    assert_eq!(e.to_string(), "tensor([], dtype=f32)");
    let e = Tensor::zeros([3, 0], DType::I64).unwrap();
    assert_eq!(e.to_string(), "tensor([], size=(3, 0), dtype=i64)");
    let huge = Tensor::zeros([1 << 62, 0], DType::F32).unwrap();
    assert_eq!(
        huge.to_string(),
        format!("tensor([], size=({}, 0), dtype=f32)", 1usize << 62)
    );
    // Summing out the empty dim leaves 2^62 zeros: too many bytes, a typed error.
    assert!(matches!(
        huge.sum(&[1], false),
        Err(Error::ShapeOverflow { .. })
    ));
}
