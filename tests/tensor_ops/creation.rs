//! Creation ops: `arange`, `linspace` (as PyTorch's CPU kernel), `eye`, `full`, `zeros_like`
//! and `ones_like`, random tensors, and tensors from host data.

use crate::common::reference::round;
use eddy::tensor::{DType, Error, Tensor};

use DType::{BF16, F16, F32, F64, I32, I64};

#[test]
fn creation_ops() {
    assert_eq!(
        Tensor::arange(0.0, 5.0, 2.0, I64)
            .unwrap()
            .to_vec::<i64>()
            .unwrap(),
        vec![0, 2, 4]
    );
    assert_eq!(
        Tensor::arange(3.0, 0.0, -1.0, F32)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        vec![3., 2., 1.]
    );
    assert_eq!(Tensor::arange(1.0, 1.0, 1.0, F32).unwrap().dims(), &[0]);
    assert!(matches!(
        Tensor::arange(0.0, 1.0, 0.0, F32),
        Err(Error::InvalidArgument { op: "arange", .. })
    ));
    assert!(matches!(
        Tensor::arange(0.0, 1.0, -1.0, F32),
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(
        Tensor::linspace(0.0, 1.0, 5, F64)
            .unwrap()
            .to_vec::<f64>()
            .unwrap(),
        vec![0., 0.25, 0.5, 0.75, 1.]
    );
    assert_eq!(
        Tensor::linspace(2.0, 3.0, 1, F32)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        vec![2.0]
    );
    assert_eq!(Tensor::linspace(2.0, 3.0, 0, F32).unwrap().dims(), &[0]);
    assert_eq!(
        Tensor::eye(3, I32).unwrap().to_vec::<i32>().unwrap(),
        vec![1, 0, 0, 0, 1, 0, 0, 0, 1]
    );
    assert_eq!(Tensor::eye(0, F32).unwrap().dims(), &[0, 0]);
    for dt in [F32, F64, F16, BF16, I64, I32, DType::U8, DType::Bool] {
        let t = Tensor::full([2, 0, 3], 1.0, dt).unwrap();
        assert_eq!((t.dims(), t.dtype()), (&[2, 0, 3][..], dt));
        assert_eq!(
            Tensor::full([2], 3.0, dt).unwrap().to_f64_vec().unwrap(),
            vec![round(dt, 3.0); 2]
        );
        assert_eq!(
            Tensor::zeros([], dt).unwrap().to_f64_vec().unwrap(),
            vec![0.0]
        );
        assert_eq!(
            Tensor::ones([3], dt)
                .unwrap()
                .ones_like()
                .unwrap()
                .to_f64_vec()
                .unwrap(),
            vec![1.0; 3]
        );
        assert_eq!(
            Tensor::ones([3], dt)
                .unwrap()
                .zeros_like()
                .unwrap()
                .to_f64_vec()
                .unwrap(),
            vec![0.0; 3]
        );
    }
    eddy::tensor::manual_seed(11);
    let r = Tensor::rand([1000], F64).unwrap().to_vec::<f64>().unwrap();
    assert!(r.iter().all(|v| (0.0..1.0).contains(v)));
    let mean = r.iter().sum::<f64>() / 1000.0;
    assert!((mean - 0.5).abs() < 0.05, "uniform mean {mean}");
    let u = Tensor::uniform([500], -2.0, -1.0, F32)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert!(u.iter().all(|v| (-2.0..-1.0).contains(v)));
    let n = Tensor::randn([2000], 3.0, 2.0, F64)
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    let m = n.iter().sum::<f64>() / 2000.0;
    let sd = (n.iter().map(|x| (x - m).powi(2)).sum::<f64>() / 2000.0).sqrt();
    assert!(
        (m - 3.0).abs() < 0.2 && (sd - 2.0).abs() < 0.2,
        "normal mean {m} std {sd}"
    );
    assert!(matches!(
        Tensor::rand([2], I64),
        Err(Error::UnsupportedDType { op: "rand", .. })
    ));
    assert_eq!(Tensor::scalar(7i64).unwrap().item::<i64>().unwrap(), 7);
    assert_eq!(
        Tensor::from_slice(&[1.5f64, 2.5], [2, 1])
            .unwrap()
            .to_vec2::<f64>()
            .unwrap(),
        vec![vec![1.5], vec![2.5]]
    );
}

/// `linspace` as PyTorch's CPU kernel: the first half counts up from `start`, the second down
/// from `end` (so both ends are exact and the sequence is symmetric), in `f32` arithmetic for
/// `f32`; integer dtypes truncate the bounds, then each value; bounds the dtype cannot hold
/// are refused.
#[test]
fn linspace_follows_pytorchs_kernel() {
    // PyTorch's formula, written out on its own (the first half up, the second down).
    fn reference(s: f32, e: f32, n: usize) -> Vec<f32> {
        let step = (e - s) / (n - 1) as f32;
        (0..n)
            .map(|i| {
                if i < n / 2 {
                    s + step * i as f32
                } else {
                    e - step * (n - 1 - i) as f32
                }
            })
            .collect()
    }
    for (s, e, n) in [
        (0.0, 1.0, 7),
        (-3.3, 9.1, 11),
        (1e-3, 7.0, 100),
        (5.0, -5.0, 6),
    ] {
        let t = Tensor::linspace(s, e, n, F32)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(
            t,
            reference(s as f32, e as f32, n),
            "linspace({s}, {e}, {n})"
        );
        assert_eq!((t[0], t[n - 1]), (s as f32, e as f32));
    }
    // Symmetric about the middle when the bounds are: x[i] == -x[n-1-i].
    let t = Tensor::linspace(-1.0, 1.0, 9, F32)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert!((0..9).all(|i| t[i] == -t[8 - i]), "{t:?}");
    let one = Tensor::linspace(2.0, 3.0, 1, F32)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(one, [2.0], "one step is start");
    let i = Tensor::linspace(0.0, 10.0, 4, I64)
        .unwrap()
        .to_vec::<i64>()
        .unwrap();
    assert_eq!(i, [0, 3, 6, 10]);
    let i = Tensor::linspace(0.9, 10.7, 3, I32)
        .unwrap()
        .to_vec::<i32>()
        .unwrap();
    assert_eq!(i, [0, 5, 10]);
    let e = Tensor::linspace(0.0, 300.0, 3, DType::U8).unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument { op: "linspace", .. }),
        "{e}"
    );
}
