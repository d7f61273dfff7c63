//! Expressions whose answers differed from PyTorch's, each with the value PyTorch 2.15 gives
//! for it (`torch.tensor(...)` typed into Python): casts, type promotion with 0-d operands,
//! and the precision of `log_softmax` and `cross_entropy`.

use eddy::tensor::{DType, Tensor};

use DType::{BF16, Bool, F16, F32, F64, I32, I64, U8};

fn t<T: eddy::ops::Elem>(v: Vec<T>) -> Tensor {
    let n = v.len();
    Tensor::from_vec(v, [n]).unwrap()
}

fn ints(x: &Tensor) -> Vec<i64> {
    x.to_dtype(I64).unwrap().to_vec::<i64>().unwrap()
}

#[test]
fn integer_casts_wrap_modulo_their_width() {
    let x = t(vec![300i64, -1, (1 << 40) + 7, -(1 << 40) - 1]);
    assert_eq!(ints(&x.to_dtype(U8).unwrap()), [44, 255, 7, 255]);
    assert_eq!(ints(&x.to_dtype(I32).unwrap()), [300, -1, 7, -1]);
    let big = t(vec![3_000_000_000i64]);
    assert_eq!(ints(&big.to_dtype(I32).unwrap()), [-1_294_967_296]);
    assert_eq!(ints(&t(vec![true, false]).to_dtype(I32).unwrap()), [1, 0]);
}

#[test]
fn float_casts_truncate_and_give_the_smallest_value_out_of_range() {
    let x = t(vec![300.7f32, -1.5, f32::NAN, 3e9, -3e9, 1e20, 255.9, -0.9]);
    assert_eq!(
        ints(&x.to_dtype(U8).unwrap()),
        [44, 255, 0, 0, 0, 0, 255, 0]
    );
    let m32 = i64::from(i32::MIN);
    assert_eq!(
        ints(&x.to_dtype(I32).unwrap()),
        [300, -1, m32, m32, m32, m32, 255, 0]
    );
    assert_eq!(
        x.to_dtype(I64).unwrap().to_vec::<i64>().unwrap(),
        [
            300,
            -1,
            i64::MIN,
            3_000_000_000,
            -3_000_000_000,
            i64::MIN,
            255,
            0
        ]
    );
    let b = t(vec![0.0f32, -0.0, f32::NAN, 0.1]).to_dtype(Bool).unwrap();
    assert_eq!(b.to_vec::<bool>().unwrap(), [false, false, true, true]);
}

#[test]
fn integer_to_float_casts_round_once() {
    let x = t(vec![(1i64 << 53) + 1]);
    assert_eq!(
        x.to_dtype(F32).unwrap().to_vec::<f32>().unwrap(),
        [9_007_199_254_740_992.0]
    );
    let h = t(vec![70_000i64]).to_dtype(F16).unwrap();
    assert!(h.to_dtype(F32).unwrap().to_vec::<f32>().unwrap()[0].is_infinite());
}

#[test]
fn a_0d_operand_raises_the_dtype_only_to_a_higher_category() {
    let s = |v: f64, dt: DType| Tensor::full([], v, dt).unwrap();
    let i32s = Tensor::from_vec(vec![1i32, 2], [2]).unwrap();
    let cases = [
        (i32s.add(&s(5.0, I64)).unwrap(), I32),
        (s(5.0, I64).add(&i32s).unwrap(), I32),
        (
            t(vec![1.0f32])
                .to_dtype(F16)
                .unwrap()
                .add(&s(2.0, F32))
                .unwrap(),
            F16,
        ),
        (
            t(vec![1.0f32])
                .to_dtype(BF16)
                .unwrap()
                .mul(&s(2.0, F64))
                .unwrap(),
            BF16,
        ),
        (i32s.add(&s(2.5, F64)).unwrap(), F64),
        (t(vec![true]).add(&s(3.0, I64)).unwrap(), I64),
        (s(3.0, I64).add(&s(2.5, F64)).unwrap(), F64),
        (t(vec![1u8]).add(&s(-1.0, I64)).unwrap(), U8),
    ];
    for (k, (got, want)) in cases.iter().enumerate() {
        assert_eq!(got.dtype(), *want, "case {k}");
    }
    assert_eq!(
        i32s.add(&s(5.0, I64)).unwrap().to_vec::<i32>().unwrap(),
        [6, 7]
    );
    // PyTorch: tensor([1], dtype=uint8) + tensor(-1) is tensor([0], dtype=uint8).
    assert_eq!(ints(&cases[7].0), [0]);
}

#[test]
fn log_softmax_and_cross_entropy_keep_their_precision_at_large_logits() {
    let logits = Tensor::from_vec(vec![10_000f32, 10_000.0], [1, 2]).unwrap();
    let target = Tensor::from_vec(vec![0i64], [1]).unwrap();
    let ce = logits
        .cross_entropy(&target)
        .unwrap()
        .item::<f32>()
        .unwrap();
    assert_eq!(ce, std::f32::consts::LN_2, "PyTorch: 0.6931471824645996");
    let x = Tensor::from_vec(vec![1000f32, 1000.0, 0.0], [1, 3]).unwrap();
    let ls = x.log_softmax(1).unwrap();
    assert_eq!(
        ls.to_vec::<f32>().unwrap(),
        [
            -std::f32::consts::LN_2,
            -std::f32::consts::LN_2,
            -1_000.693_2
        ]
    );
    assert_eq!(
        ls.exp().unwrap().sum_all().unwrap().item::<f32>().unwrap(),
        1.0
    );
}

#[test]
fn softmax_of_a_row_with_inf_is_nan_throughout() {
    for row in [vec![1.0f32, f32::INFINITY, 2.0], vec![f32::NEG_INFINITY; 2]] {
        let n = row.len();
        let x = Tensor::from_vec(row, [n]).unwrap();
        for y in [x.softmax(0).unwrap(), x.log_softmax(0).unwrap()] {
            assert!(y.to_vec::<f32>().unwrap().iter().all(|v| v.is_nan()));
        }
    }
}

#[test]
fn bool_tensors_do_arithmetic_as_pytorch() {
    let b = t(vec![true, false]);
    let both = t(vec![true, true]);
    assert_eq!(b.add_scalar(1).unwrap().dtype(), I64);
    assert_eq!(ints(&b.add_scalar(1).unwrap()), [2, 1]);
    assert_eq!(b.add_scalar(1.0).unwrap().dtype(), F32);
    assert_eq!(
        ints(&b.add_scalar(true).unwrap().to_dtype(I64).unwrap()),
        [1, 1]
    );
    assert_eq!(
        b.mul_scalar(2.5).unwrap().to_vec::<f32>().unwrap(),
        [2.5, 0.0]
    );
    assert_eq!(
        b.mul(&both).unwrap().to_vec::<bool>().unwrap(),
        [true, false]
    );
    assert_eq!(
        b.add(&both).unwrap().to_vec::<bool>().unwrap(),
        [true, true]
    );
    assert_eq!(b.div(&both).unwrap().to_vec::<f32>().unwrap(), [1.0, 0.0]);
    let e = b.exp().unwrap();
    assert_eq!((e.dtype(), e.to_vec::<f32>().unwrap()[1]), (F32, 1.0));
    // PyTorch refuses these too.
    assert!(b.sub(&both).is_err());
    assert!(b.neg().is_err());
}

#[test]
fn cat_and_stack_promote_mixed_dtypes() {
    let c = Tensor::cat(&[&t(vec![1i64, 2]), &t(vec![1.5f32])], 0).unwrap();
    assert_eq!(c.dtype(), F32);
    assert_eq!(c.to_vec::<f32>().unwrap(), [1.0, 2.0, 1.5]);
    let s = Tensor::stack(&[&t(vec![1i64]), &t(vec![true])], 0).unwrap();
    assert_eq!((s.dtype(), ints(&s)), (I64, vec![1, 1]));
    // The gradient of a promoted input comes back in its own dtype.
    let h = t(vec![1.0f32, 2.0])
        .to_dtype(F16)
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    let f = t(vec![3.0f32]).requires_grad_(true).unwrap();
    let y = Tensor::cat(&[&h, &f], 0).unwrap();
    assert_eq!(y.dtype(), F32);
    y.sum_all().unwrap().backward().unwrap();
    assert_eq!(h.grad().unwrap().dtype(), F16);
}

#[test]
fn cross_entropy_takes_pytorchs_defaults_and_target_kinds() {
    let row = Tensor::from_vec(vec![1.0f32, 2.0], [1, 2]).unwrap();
    let two = Tensor::from_vec(vec![1.0f32, 2.0, 0.5, 0.1], [2, 2]).unwrap();
    let idx = |v: Vec<i64>| t(v);
    let ce = |x: &Tensor, y: &Tensor| x.cross_entropy(y).unwrap().item::<f32>().unwrap();
    // ignore_index = -100
    assert!(ce(&row, &idx(vec![-100])).is_nan());
    assert!((ce(&two, &idx(vec![-100, 1])) - 0.913_015_3).abs() < 1e-6);
    // class probabilities
    let p = Tensor::from_vec(vec![0.3f32, 0.7], [1, 2]).unwrap();
    assert!((ce(&row, &p) - 0.613_261_5).abs() < 1e-6);
    // unbatched
    let x = t(vec![1.0f32, 2.0]);
    let loss = x
        .cross_entropy(&Tensor::full([], 1.0, I64).unwrap())
        .unwrap();
    assert_eq!(loss.rank(), 0);
    assert!((loss.item::<f32>().unwrap() - 0.313_261_7).abs() < 1e-6);
    // u8 targets are taken, i32 refused (PyTorch: "expected target dtype to be Long or Byte")
    assert!((ce(&row, &t(vec![1u8])) - 0.313_261_7).abs() < 1e-6);
    assert!(row.cross_entropy(&t(vec![1i32])).is_err());
    // the gradient skips ignored rows
    let w = two.clone().requires_grad_(true).unwrap();
    w.cross_entropy(&idx(vec![-100, 1]))
        .unwrap()
        .backward()
        .unwrap();
    let g = w.grad().unwrap().to_vec::<f32>().unwrap();
    assert_eq!(&g[..2], [0.0, 0.0]);
    assert!(
        (g[2] - 0.598_687_6).abs() < 1e-6 && (g[3] + 0.598_687_6).abs() < 1e-6,
        "{g:?}"
    );
}

#[test]
fn float_only_activations_refuse_integers() {
    let i = t(vec![1i64, 2]);
    for r in [i.gelu(), i.silu()] {
        assert!(r.is_err());
    }
    assert_eq!(i.relu().unwrap().dtype(), I64);
    assert_eq!(i.sigmoid().unwrap().dtype(), F32);
}
