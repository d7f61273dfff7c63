//! Gradients where the formulas meet `0 · inf`, infinities or ties: PyTorch's values.

use crate::common::reference::R;
use crate::f64s;
use eddy::tensor::{DType, Tensor};

/// The 2-norm's gradient at a zero vector is 0 (PyTorch's choice), not NaN; `logsumexp` of
/// rows holding infinities is exact (no ∞ − ∞).
#[test]
fn norm_and_logsumexp_at_special_points() {
    let x = Tensor::from_vec(vec![0f64, 0.0, 3.0, 4.0], [2, 2])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    x.norm(2.0, &[1], false)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(
        x.grad().unwrap().to_vec::<f64>().unwrap(),
        [0.0, 0.0, 0.6, 0.8]
    );
    let inf = f64::INFINITY;
    let y = Tensor::from_vec(vec![-inf, -inf, inf, 1.0, 0.0, 0.0], [3, 2]).unwrap();
    let l = y.logsumexp(&[1], false).unwrap().to_vec::<f64>().unwrap();
    assert_eq!(l[..2], [-inf, inf]);
    assert!((l[2] - 2f64.ln()).abs() < 1e-15);
}

/// Gradients at the points where the composed formulas give `0 · inf`: PyTorch's values.
#[test]
fn gradients_at_zero_match_pytorch() {
    let grad_of = |v: Vec<f64>, f: &dyn Fn(&Tensor) -> R<Tensor>| -> Vec<f64> {
        let x = Tensor::from_vec(v.clone(), [v.len()])
            .unwrap()
            .requires_grad_(true)
            .unwrap();
        f(&x).unwrap().sum_all().unwrap().backward().unwrap();
        f64s(&x.grad().unwrap())
    };
    // prod: the product of the others; 0 everywhere with two zeros.
    assert_eq!(
        grad_of(vec![0.0, 2.0, 3.0], &|x| x.prod(&[0], false)),
        [6.0, 0.0, 0.0]
    );
    assert_eq!(
        grad_of(vec![0.0, 2.0, 0.0], &|x| x.prod(&[0], false)),
        [0.0, 0.0, 0.0]
    );
    assert_eq!(
        grad_of(vec![4.0, 2.0, 3.0], &|x| x.prod(&[0], false)),
        [6.0, 12.0, 8.0]
    );
    // std and the p-norms of a constant or zero vector.
    assert_eq!(
        grad_of(vec![1.0, 1.0, 1.0], &|x| x.std(&[0], 1, false)),
        [0.0; 3]
    );
    assert_eq!(
        grad_of(vec![0.0; 3], &|x| x.norm(3.0, &[0], false)),
        [0.0; 3]
    );
    assert_eq!(
        grad_of(vec![0.0; 3], &|x| x.norm(0.5, &[0], false)),
        [0.0; 3]
    );
    // ‖(0, 3, -4)‖₃: x·|x| / ‖x‖², 0 at the zero.
    let n3 = (27.0f64 + 64.0).powf(1.0 / 3.0);
    let g = grad_of(vec![0.0, 3.0, -4.0], &|x| x.norm(3.0, &[0], false));
    for (g, w) in g.iter().zip([0.0, 9.0 / (n3 * n3), -16.0 / (n3 * n3)]) {
        assert!((g - w).abs() < 1e-12, "{g} vs {w}");
    }
    // x^0, and 0^b for the exponent b.
    assert_eq!(grad_of(vec![0.0, 2.0], &|x| x.pow_scalar(0.0)), [0.0, 0.0]);
    let zero = Tensor::from_vec(vec![0.0, 2.0], [2]).unwrap();
    assert_eq!(
        grad_of(vec![2.0, 2.0], &|b| zero.pow(b)),
        [0.0, 4.0 * 2f64.ln()]
    );
    assert_eq!(
        grad_of(vec![0.0, 2.0], &|a| a.pow(&Tensor::zeros([2], DType::F64)?)),
        [0.0, 0.0]
    );
}

/// maximum and minimum split the gradient in halves on ties, as PyTorch's do.
#[test]
fn maximum_and_minimum_share_ties() {
    for max in [true, false] {
        let a = Tensor::from_vec(vec![1.0, 2.0, 3.0], [3])
            .unwrap()
            .requires_grad_(true)
            .unwrap();
        let b = Tensor::from_vec(vec![1.0, 5.0, 0.0], [3])
            .unwrap()
            .requires_grad_(true)
            .unwrap();
        let y = if max { a.maximum(&b) } else { a.minimum(&b) }.unwrap();
        y.sum_all().unwrap().backward().unwrap();
        let (ga, gb) = (f64s(&a.grad().unwrap()), f64s(&b.grad().unwrap()));
        if max {
            assert_eq!((ga, gb), (vec![0.5, 0.0, 1.0], vec![0.5, 1.0, 0.0]));
        } else {
            assert_eq!((ga, gb), (vec![0.5, 1.0, 0.0], vec![0.5, 0.0, 1.0]));
        }
    }
}
