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

/// A leaf of `v` (f64, shaped `dims`) that requires grad.
fn leaf(v: Vec<f64>, dims: &[usize]) -> Tensor {
    Tensor::from_vec(v, dims)
        .unwrap()
        .requires_grad_(true)
        .unwrap()
}

/// `max(dim)`/`min(dim)` send the gradient to the index `argmax`/`argmin` picks (the first of
/// ties), as PyTorch's `max(dim)`; `amax` splits it among the ties, as PyTorch's `amax`.
/// (PyTorch 2.15's values.)
#[test]
fn max_over_a_dim_sends_the_gradient_to_its_index_at_ties() {
    let v = vec![1.0, 3.0, 3.0, 2.0, 2.0, 1.0];
    let x = leaf(v.clone(), &[2, 3]);
    x.max(1, false)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(f64s(&x.grad().unwrap()), [0., 1., 0., 1., 0., 0.]);
    let x = leaf(v.clone(), &[2, 3]);
    x.min(1, true)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(f64s(&x.grad().unwrap()), [1., 0., 0., 0., 0., 1.]);
    let x = leaf(v.clone(), &[2, 3]);
    x.amax(&[1], false)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(f64s(&x.grad().unwrap()), [0., 0.5, 0.5, 0.5, 0.5, 0.]);
    let x = leaf(vec![1.0, 3.0, 3.0], &[1, 3]);
    x.max_all().unwrap().backward().unwrap();
    assert_eq!(f64s(&x.grad().unwrap()), [0., 0.5, 0.5]);
    // An upstream gradient other than ones goes to the picked index, scaled.
    let x = leaf(v, &[2, 3]);
    let w = Tensor::from_vec(vec![2.0, -1.0], [2]).unwrap();
    x.max(1, false)
        .unwrap()
        .mul(&w)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(f64s(&x.grad().unwrap()), [0., 2., 0., -1., 0., 0.]);
}

/// `clamp` with number bounds: 1 strictly inside, 0 at the bounds and beyond (PyTorch 2.15).
#[test]
fn clamp_passes_no_gradient_at_its_bounds() {
    let v = vec![-1.0, 0.0, 0.5, 1.0, 2.0];
    type Op<'a> = &'a dyn Fn(&Tensor) -> R<Tensor>;
    let cases: [(Op, [f64; 5]); 3] = [
        (&|x| x.clamp_min(0.0), [0., 0., 1., 1., 1.]),
        (&|x| x.clamp_max(1.0), [1., 1., 1., 0., 0.]),
        (&|x| x.clamp(Some(0.0), Some(1.0)), [0., 0., 1., 0., 0.]),
    ];
    for (f, want) in cases {
        let x = leaf(v.clone(), &[5]);
        f(&x).unwrap().sum_all().unwrap().backward().unwrap();
        assert_eq!(f64s(&x.grad().unwrap()), want);
    }
}

/// `cumprod`'s gradient is exact where elements are 0 (PyTorch's values), and matches the
/// products divided by the element elsewhere.
#[test]
fn cumprod_gradients_through_zeros() {
    let x = leaf(vec![2.0, 0.0, 3.0, 0.0, 5.0], &[5]);
    let g = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0], [5]).unwrap();
    x.cumprod(0)
        .unwrap()
        .mul(&g)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(f64s(&x.grad().unwrap()), [1., 22., 0., 0., 0.]);
    // Along dim 0 of a matrix, without zeros: Σ_{i ≥ k} y_i / x_k.
    let v = vec![2.0, -1.0, 0.5, 3.0, 4.0, -2.0];
    let x = leaf(v.clone(), &[3, 2]);
    x.cumprod(0).unwrap().sum_all().unwrap().backward().unwrap();
    let col = |c: usize| [v[c], v[2 + c], v[4 + c]];
    let mut want = vec![0.0; 6];
    for c in 0..2 {
        let xs = col(c);
        let ys = [xs[0], xs[0] * xs[1], xs[0] * xs[1] * xs[2]];
        for k in 0..3 {
            want[2 * k + c] = (k..3).map(|i| ys[i]).sum::<f64>() / xs[k];
        }
    }
    let got = f64s(&x.grad().unwrap());
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() < 1e-12, "{got:?} vs {want:?}");
    }
}

/// The K-dimensional cross-entropy (`[N, C, d1]` against `[N, d1]`) is the loss of the
/// positions as rows, ignored targets left out; its gradient is PyTorch 2.15's.
#[test]
fn cross_entropy_over_k_dims() {
    let x = leaf(vec![1.0, 2.0, 0.5, -1.0, 0.0, 1.0, 2.0, 3.0], &[2, 2, 2]);
    let t = Tensor::from_vec(vec![0i64, 1, 1, -100], [2, 2]).unwrap();
    x.cross_entropy(&t).unwrap().backward().unwrap();
    let want = [
        -0.12584688959938178,
        0.3175247089408111,
        0.12584688959938178,
        -0.31752470894081103,
        0.03973430734070584,
        0.0,
        -0.03973430734070589,
        0.0,
    ];
    let got = f64s(&x.grad().unwrap());
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-12, "{got:?}");
    }
    // A target that does not fit the positions is refused at the call.
    let bad = Tensor::from_vec(vec![0i64, 1], [2]).unwrap();
    let e = x.cross_entropy(&bad).unwrap_err();
    assert!(
        matches!(
            e,
            eddy::Error::ShapeMismatch {
                op: "cross_entropy",
                ..
            }
        ),
        "{e}"
    );
}
