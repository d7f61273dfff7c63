//! Gradients of every differentiable op, checked against central finite differences in `f64`.
//!
//! For an op `f` with inputs `x₁…xₙ` the check draws a random weight `w` of `f`'s output shape,
//! runs `f(x).backward_with(w)` (so each leaf's gradient is the vector-Jacobian product
//! `wᵀ ∂f/∂xᵢ`), and compares every element with `(L(x + εeⱼ) − L(x − εeⱼ)) / 2ε` where
//! `L = Σ w·f(x)` is evaluated with fresh tensors under `no_grad`. Inputs keep away from the
//! points where an op is not differentiable (kinks of relu/abs/clamp, ties of max/min).
//!
//! Each module covers one family of ops; the check and the input domains are below.

#[path = "../common/mod.rs"]
mod common;

mod attention;
mod conv;
mod elementwise;
mod matmul_nn;
mod mechanics;
mod reduce;
mod special_points;
mod views_index;

use common::reference::R;
use eddy::tensor::{DType, Tensor, no_grad};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const EPS: f64 = 1e-6;
const TOL: f64 = 1e-5;

/// An input: shape and values.
type In = (Vec<usize>, Vec<f64>);

fn leaf((s, d): &In) -> Tensor {
    Tensor::from_vec(d.clone(), s.clone()).unwrap()
}

/// Checks the gradient of every input of `f` against central differences.
#[track_caller]
fn grad_check(name: &str, inputs: &[In], f: impl Fn(&[Tensor]) -> R<Tensor>) {
    let leaves: Vec<Tensor> = inputs
        .iter()
        .map(|i| leaf(i).requires_grad_(true).unwrap())
        .collect();
    let y = f(&leaves).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(
        y.requires_grad(),
        "{name}: the output does not require grad"
    );
    assert!(!y.is_leaf(), "{name}: the output has no grad_fn");
    let mut rng = StdRng::seed_from_u64(y.numel() as u64 * 7919 + 1);
    let w: Vec<f64> = (0..y.numel())
        .map(|_| rng.random_range(-1.0..1.0))
        .collect();
    y.backward_with(&Tensor::from_vec(w.clone(), y.dims().to_vec()).unwrap())
        .unwrap_or_else(|e| panic!("{name}: backward: {e}"));
    let loss = |xs: &[Tensor]| -> f64 {
        let _g = no_grad();
        let y = f(xs).unwrap();
        y.to_vec::<f64>()
            .unwrap()
            .iter()
            .zip(&w)
            .map(|(a, b)| a * b)
            .sum()
    };
    for (i, (shape, data)) in inputs.iter().enumerate() {
        let g = match leaves[i].grad() {
            Some(g) => {
                assert_eq!(g.dims(), &shape[..], "{name}: shape of grad {i}");
                assert_eq!(g.dtype(), DType::F64, "{name}: dtype of grad {i}");
                g.to_vec::<f64>().unwrap()
            }
            None => vec![0.0; data.len()],
        };
        for j in 0..data.len() {
            let at = |delta: f64| {
                let xs: Vec<Tensor> = inputs
                    .iter()
                    .enumerate()
                    .map(|(k, inp)| {
                        if k == i {
                            let mut d = inp.1.clone();
                            d[j] += delta;
                            leaf(&(inp.0.clone(), d))
                        } else {
                            leaf(inp)
                        }
                    })
                    .collect();
                loss(&xs)
            };
            let fd = (at(EPS) - at(-EPS)) / (2.0 * EPS);
            assert!(
                (g[j] - fd).abs() <= TOL * (1.0 + fd.abs()),
                "{name}: d/d input {i} [{j}]: backward {} vs finite difference {fd}\n  grad {g:?}\n  input {data:?}",
                g[j]
            );
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Dom {
    Any,
    Pos,
    /// Away from 0 (the kinks of relu, abs, sign).
    NonZero,
    /// ±[0.5, 1.5): products stay moderate.
    Unit,
    /// Away from 0, quantised to 0.01 + 0.003 (so clamp bounds like ±1.234567 are ≥ 4e-4 away).
    Quant,
    /// 0.25 + 0.5k, and 0.5k + [0, 0.2]: the two never come within 0.05 (max/min ties).
    Grid,
    OffGrid,
    /// Distinct values at least 0.08 apart (no ties inside a max/min reduction).
    Distinct,
}

fn values(rng: &mut StdRng, n: usize, dom: Dom) -> Vec<f64> {
    if dom == Dom::Distinct {
        let mut perm: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            perm.swap(i, rng.random_range(0..=i));
        }
        return perm
            .into_iter()
            .map(|k| (k as f64 - n as f64 / 2.0) * 0.1 + rng.random_range(0.0..0.02))
            .collect();
    }
    (0..n)
        .map(|_| match dom {
            Dom::Quant => {
                let v = values(rng, 1, Dom::NonZero)[0];
                (v * 100.0).round() / 100.0 + 0.003
            }
            Dom::Grid => 0.25 + 0.5 * rng.random_range(-4..4) as f64,
            Dom::OffGrid => 0.5 * rng.random_range(-4..4) as f64 + rng.random_range(0.0..0.2),
            Dom::Distinct => unreachable!(),
            Dom::Any => rng.random_range(-2.0..2.0),
            Dom::Pos => rng.random_range(0.3..2.5),
            Dom::NonZero | Dom::Unit => {
                let v = if dom == Dom::Unit {
                    rng.random_range(0.5..1.5)
                } else {
                    rng.random_range(0.2..2.0)
                };
                if rng.random() { v } else { -v }
            }
        })
        .collect()
}

fn rnd(rng: &mut StdRng, shape: &[usize], dom: Dom) -> In {
    (shape.to_vec(), values(rng, shape.iter().product(), dom))
}

fn seeded(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// A view of the leaf to feed the op: the leaf itself, a transpose, a broadcast (whose
/// gradient sums), or a narrow of a larger leaf.
#[derive(Clone, Copy, Debug)]
enum View {
    Id,
    Transpose,
    Broadcast,
}

fn view(x: &Tensor, v: View) -> R<Tensor> {
    match v {
        View::Id => Ok(x.clone()),
        View::Transpose if x.rank() >= 2 => x.transpose(0, -1),
        View::Transpose => Ok(x.clone()),
        View::Broadcast => {
            let mut s = vec![2];
            s.extend(x.dims());
            x.broadcast_to(s)
        }
    }
}

fn arb_view() -> impl Strategy<Value = View> {
    prop_oneof![Just(View::Id), Just(View::Transpose), Just(View::Broadcast)]
}

fn dim() -> impl Strategy<Value = usize> {
    prop_oneof![1 => Just(0usize), 6 => 1usize..=3]
}

fn shape(r: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(dim(), r)
}

fn f64s(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().unwrap()
}
