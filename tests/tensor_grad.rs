//! Gradients of every differentiable op, checked against central finite differences in `f64`.
//!
//! For an op `f` with inputs `x₁…xₙ` the check draws a random weight `w` of `f`'s output shape,
//! runs `f(x).backward_with(w)` (so each leaf's gradient is the vector-Jacobian product
//! `wᵀ ∂f/∂xᵢ`), and compares every element with `(L(x + εeⱼ) − L(x − εeⱼ)) / 2ε` where
//! `L = Σ w·f(x)` is evaluated with fresh tensors under `no_grad`. Inputs keep away from the
//! points where an op is not differentiable (kinks of relu/abs/clamp, ties of max/min).

use eddy::tensor::{DType, Error, Tensor, no_grad};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type R<T> = eddy::tensor::Result<T>;

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
        .map(|i| leaf(i).requires_grad_(true))
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

type UnaryT = fn(&Tensor) -> R<Tensor>;

fn unary_table() -> Vec<(&'static str, Dom, UnaryT)> {
    vec![
        ("neg", Dom::Any, Tensor::neg),
        ("abs", Dom::NonZero, Tensor::abs),
        ("exp", Dom::Any, Tensor::exp),
        ("log", Dom::Pos, Tensor::log),
        ("sqrt", Dom::Pos, Tensor::sqrt),
        ("rsqrt", Dom::Pos, Tensor::rsqrt),
        ("sin", Dom::Any, Tensor::sin),
        ("cos", Dom::Any, Tensor::cos),
        ("tanh", Dom::Any, Tensor::tanh),
        ("sigmoid", Dom::Any, Tensor::sigmoid),
        ("relu", Dom::NonZero, Tensor::relu),
        ("gelu", Dom::Any, Tensor::gelu),
        ("silu", Dom::Any, Tensor::silu),
        ("recip", Dom::NonZero, Tensor::recip),
        ("square", Dom::Any, Tensor::square),
        ("sign", Dom::NonZero, Tensor::sign),
        ("floor", Dom::Quant, Tensor::floor),
        ("ceil", Dom::Quant, Tensor::ceil),
        ("round", Dom::Quant, Tensor::round),
        ("trunc", Dom::Quant, Tensor::trunc),
        ("log1p", Dom::Pos, Tensor::log1p),
        ("expm1", Dom::Any, Tensor::expm1),
        ("log2", Dom::Pos, Tensor::log2),
        ("log10", Dom::Pos, Tensor::log10),
        ("tan", Dom::Unit, Tensor::tan),
        ("atan", Dom::Any, Tensor::atan),
        ("erf", Dom::Any, Tensor::erf),
        ("leaky_relu", Dom::NonZero, |x| x.leaky_relu(0.1)),
        ("elu", Dom::NonZero, |x| x.elu(1.5)),
        ("softplus", Dom::Any, |x| x.softplus(2.0, 20.0)),
        ("softplus_linear", Dom::Pos, |x| x.softplus(3.0, 1.0)),
        ("add_scalar", Dom::Any, |x| x.add_scalar(1.5)),
        ("sub_scalar", Dom::Any, |x| x.sub_scalar(0.5)),
        ("rsub_scalar", Dom::Any, |x| x.rsub_scalar(2.0)),
        ("mul_scalar", Dom::Any, |x| x.mul_scalar(-3.0)),
        ("div_scalar", Dom::Any, |x| x.div_scalar(0.7)),
        ("pow_scalar", Dom::Pos, |x| x.pow_scalar(2.5)),
        ("pow_scalar_neg", Dom::Pos, |x| x.pow_scalar(-1.5)),
        ("clamp", Dom::Quant, |x| {
            x.clamp(Some(-1.234567), Some(1.234567))
        }),
        ("clamp_min", Dom::Quant, |x| x.clamp(Some(0.1234567), None)),
        ("clamp_max", Dom::Quant, |x| x.clamp(None, Some(-0.1234567))),
        ("to_dtype_f64", Dom::Any, |x| {
            x.mul_scalar(2.0)?.to_dtype(DType::F64)
        }),
    ]
}

type BinaryT = fn(&Tensor, &Tensor) -> R<Tensor>;

fn binary_table() -> Vec<(&'static str, Dom, Dom, BinaryT)> {
    vec![
        ("add", Dom::Any, Dom::Any, Tensor::add),
        ("sub", Dom::Any, Dom::Any, Tensor::sub),
        ("mul", Dom::Any, Dom::Any, Tensor::mul),
        ("div", Dom::Any, Dom::NonZero, Tensor::div),
        ("pow", Dom::Pos, Dom::Any, Tensor::pow),
        ("maximum", Dom::Grid, Dom::OffGrid, Tensor::maximum),
        ("minimum", Dom::OffGrid, Dom::Grid, Tensor::minimum),
    ]
}

/// `out` with leading dims dropped and masked dims set to 1.
fn derive(out: &[usize], drop: usize, mask: u8) -> Vec<usize> {
    let drop = drop.min(out.len());
    (drop..out.len())
        .map(|d| if mask >> d & 1 == 1 { 1 } else { out[d] })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// Every unary and scalar op, fed through a view of the leaf.
    #[test]
    fn unary_grads(shape in shape(0..=3), v in arb_view(), seed in any::<u64>()) {
        let mut rng = seeded(seed);
        for (name, dom, op) in unary_table() {
            let x = rnd(&mut rng, &shape, dom);
            grad_check(&format!("{name} {shape:?} {v:?}"), &[x], |xs| op(&view(&xs[0], v)?));
        }
    }

    /// Binary ops between operands that broadcast (the gradient of a broadcast operand sums).
    #[test]
    fn binary_grads(
        out in shape(0..=3), a in (0usize..=3, any::<u8>()), b in (0usize..=3, any::<u8>()),
        v in arb_view(), seed in any::<u64>(),
    ) {
        let mut rng = seeded(seed);
        let (sa, sb) = (derive(&out, a.0, a.1), derive(&out, b.0, b.1));
        // The lhs leaf is stored transposed (and viewed back), or expanded to the output shape.
        let mut stored = sa.clone();
        if matches!(v, View::Transpose) && sa.len() >= 2 {
            let r = sa.len();
            stored.swap(0, r - 1);
        }
        let lhs = |t: &Tensor| match v {
            View::Broadcast => t.broadcast_to(out.clone()),
            View::Transpose if t.rank() >= 2 => t.transpose(0, -1),
            _ => Ok(t.clone()),
        };
        for (name, da, db, op) in binary_table() {
            let x = rnd(&mut rng, &stored, da);
            let y = rnd(&mut rng, &sb, db);
            grad_check(&format!("{name} {sa:?} {sb:?} {v:?}"), &[x, y], |xs| op(&lhs(&xs[0])?, &xs[1]));
        }
    }

    /// `where_` with a fixed condition; both branches broadcast.
    #[test]
    fn where_grads(out in shape(0..=3), c in (0usize..=3, any::<u8>()), a in (0usize..=3, any::<u8>()), b in (0usize..=3, any::<u8>()), seed in any::<u64>()) {
        let mut rng = seeded(seed);
        let sc = derive(&out, c.0, c.1);
        let cond = rnd(&mut rng, &sc, Dom::Any);
        let x = rnd(&mut rng, &derive(&out, a.0, a.1), Dom::Any);
        let y = rnd(&mut rng, &derive(&out, b.0, b.1), Dom::Any);
        grad_check("where", &[x, y], |xs| leaf(&cond).gt_scalar(0.0)?.where_(&xs[0], &xs[1]));
    }

    /// Reductions over random dim sets, with and without keepdim.
    #[test]
    fn reduction_grads(shape in shape(0..=3), mask in any::<u8>(), keepdim in any::<bool>(), v in arb_view(), seed in any::<u64>()) {
        let mut rng = seeded(seed);
        let rank = shape.len() + usize::from(matches!(v, View::Broadcast));
        let dims: Vec<isize> = (0..rank as isize).filter(|d| mask >> d & 1 == 1).collect();
        let x = rnd(&mut rng, &shape, Dom::Any);
        grad_check("sum", std::slice::from_ref(&x), |xs| view(&xs[0], v)?.sum(&dims, keepdim));
        grad_check("mean", std::slice::from_ref(&x), |xs| view(&xs[0], v)?.mean(&dims, keepdim));
        grad_check("sum_all", std::slice::from_ref(&x), |xs| view(&xs[0], v)?.sum_all());
        let xp = rnd(&mut rng, &shape, Dom::Unit);
        grad_check("prod", &[xp], |xs| view(&xs[0], v)?.prod(&dims, keepdim));
        if x.1.is_empty() {
            return Ok(());
        }
        grad_check("mean_all", std::slice::from_ref(&x), |xs| view(&xs[0], v)?.mean_all());
        // max/min: distinct values, so no ties (a broadcast view would make ties, so not it).
        let xd = rnd(&mut rng, &shape, Dom::Distinct);
        grad_check("max_all", std::slice::from_ref(&xd), |xs| xs[0].max_all());
        grad_check("min_all", std::slice::from_ref(&xd), |xs| xs[0].min_all());
        if let Some(d) = (0..shape.len()).find(|&d| mask >> (d + 3) & 1 == 1 && shape[d] > 0) {
            grad_check("max", std::slice::from_ref(&xd), |xs| xs[0].max(d as isize, keepdim));
            grad_check("min", std::slice::from_ref(&xd), |xs| xs[0].min(d as isize - shape.len() as isize, keepdim));
        }
    }

    /// softmax and log_softmax over every dim.
    #[test]
    fn softmax_grads(shape in shape(1..=3), v in arb_view(), seed in any::<u64>()) {
        let mut rng = seeded(seed);
        let x = rnd(&mut rng, &shape, Dom::Any);
        let rank = shape.len() + usize::from(matches!(v, View::Broadcast));
        for d in 0..rank as isize {
            grad_check("softmax", std::slice::from_ref(&x), |xs| view(&xs[0], v)?.softmax(d));
            grad_check("log_softmax", std::slice::from_ref(&x), |xs| view(&xs[0], v)?.log_softmax(d - rank as isize));
        }
    }

    /// Batched matmul with broadcast batch dims and 1-D operands, on transposed views.
    #[test]
    fn matmul_grads(
        batch in shape(0..=2), a in (0usize..=2, any::<u8>()), b in (0usize..=2, any::<u8>()),
        m in 1usize..=3, k in 0usize..=3, n in 1usize..=3, ones in (prop::bool::weighted(0.2), prop::bool::weighted(0.2)),
        ta in any::<bool>(), seed in any::<u64>(),
    ) {
        let mut rng = seeded(seed);
        let sa = if ones.0 { vec![k] } else { let mut s = derive(&batch, a.0, a.1); s.extend([m, k]); s };
        let sb = if ones.1 { vec![k] } else { let mut s = derive(&batch, b.0, b.1); s.extend([k, n]); s };
        // The lhs leaf is stored transposed when `ta`, so matmul sees a strided operand.
        let ra = sa.len();
        let stored = if ta && ra >= 2 { let mut s = sa.clone(); s.swap(ra - 2, ra - 1); s } else { sa.clone() };
        let x = rnd(&mut rng, &stored, Dom::Any);
        let y = rnd(&mut rng, &sb, Dom::Any);
        grad_check(&format!("matmul {sa:?} @ {sb:?}"), &[x, y], |xs| {
            let l = if ta && ra >= 2 { xs[0].transpose(-2, -1)? } else { xs[0].clone() };
            l.matmul(&xs[1])
        });
    }
}

// ---- views, joins and indexing ------------------------------------------------------------------

#[test]
fn view_grads() {
    let mut rng = seeded(1);
    let x = rnd(&mut rng, &[2, 3, 4], Dom::Any);
    let nl = |t: &Tensor| t.sin(); // a non-linearity after the view, so position errors show
    type V = (&'static str, Box<dyn Fn(&Tensor) -> R<Tensor>>);
    let cases: Vec<V> = vec![
        ("transpose", Box::new(|t| t.transpose(0, 2))),
        ("t", Box::new(|t| t.t())),
        ("permute", Box::new(|t| t.permute(&[2, 0, 1]))),
        ("narrow", Box::new(|t| t.narrow(2, 1, 2))),
        ("narrow_empty", Box::new(|t| t.narrow(1, 3, 0))),
        ("slice", Box::new(|t| t.slice(-1, 0..3)?.slice(0, 1..2))),
        ("select", Box::new(|t| t.select(1, 2))),
        (
            "broadcast_to",
            Box::new(|t| t.narrow(1, 0, 1)?.broadcast_to([3, 2, 5, 4])),
        ),
        ("expand", Box::new(|t| t.unsqueeze(1)?.expand([2, 3, 3, 4]))),
        ("reshape", Box::new(|t| t.reshape([6, 4]))),
        (
            "reshape_strided",
            Box::new(|t| t.transpose(0, 1)?.reshape([4, 6])),
        ),
        ("view", Box::new(|t| t.view([4, 3, 2]))),
        (
            "squeeze",
            Box::new(|t| t.narrow(0, 1, 1)?.squeeze(0)?.squeeze(1)),
        ),
        ("unsqueeze", Box::new(|t| t.unsqueeze(-1)?.unsqueeze(0))),
        (
            "flatten_all",
            Box::new(|t| t.transpose(1, 2)?.flatten_all()),
        ),
        (
            "contiguous",
            Box::new(|t| t.permute(&[1, 2, 0])?.contiguous()),
        ),
        (
            "chain",
            Box::new(|t| {
                t.transpose(0, 1)?
                    .narrow(0, 1, 2)?
                    .unsqueeze(1)?
                    .expand([2, 3, 2, 4])?
                    .reshape([12, 4])?
                    .t()
            }),
        ),
    ];
    for (name, f) in cases {
        grad_check(name, std::slice::from_ref(&x), |xs| nl(&f(&xs[0])?));
    }
}

#[test]
fn cat_and_stack_grads() {
    let mut rng = seeded(2);
    let a = rnd(&mut rng, &[2, 3], Dom::Any);
    let b = rnd(&mut rng, &[1, 3], Dom::Any);
    let c = rnd(&mut rng, &[0, 3], Dom::Any);
    grad_check("cat0", &[a.clone(), b.clone(), c.clone()], |xs| {
        Tensor::cat(&[&xs[0], &xs[2], &xs[1]], 0)?.sin()
    });
    let d = rnd(&mut rng, &[2, 2], Dom::Any);
    grad_check(
        "cat1 (a leaf twice, transposed)",
        &[a.clone(), d.clone()],
        |xs| Tensor::cat(&[&xs[0], &xs[1], &xs[1].t()?], -1)?.square(),
    );
    let e = rnd(&mut rng, &[2, 3], Dom::Any);
    for dim in [0, 1, 2, -1] {
        grad_check("stack", &[a.clone(), e.clone()], |xs| {
            Tensor::stack(&[&xs[0], &xs[1], &xs[0]], dim)?.cos()
        });
    }
}

#[test]
fn index_grads() {
    let mut rng = seeded(3);
    let x = rnd(&mut rng, &[4, 3], Dom::Any);
    // Repeated indices accumulate.
    let idx = Tensor::from_vec(vec![2i64, 0, 2, 3, 2], [5]).unwrap();
    grad_check("index_select0", std::slice::from_ref(&x), |xs| {
        xs[0].index_select(0, &idx)?.sin()
    });
    let idx32 = Tensor::from_vec(vec![1i32, 1, 0], [3]).unwrap();
    grad_check(
        "index_select1 (i32, of a transposed view)",
        std::slice::from_ref(&x),
        |xs| xs[0].t()?.index_select(1, &idx32)?.square(),
    );
    let ids = Tensor::from_vec(vec![3i64, 0, 3, 1, 1, 1], [2, 3]).unwrap();
    grad_check("embedding", std::slice::from_ref(&x), |xs| {
        xs[0].embedding(&ids)?.tanh()
    });
    let gi = Tensor::from_vec(vec![0i64, 2, 2, 1, 1, 1, 0, 0], [4, 2]).unwrap();
    grad_check("gather1", std::slice::from_ref(&x), |xs| {
        xs[0].gather(1, &gi)?.exp()
    });
    let gi0 = Tensor::from_vec(vec![3i64, 3, 0, 1, 0, 2], [2, 3]).unwrap();
    grad_check("gather0", std::slice::from_ref(&x), |xs| {
        xs[0].gather(0, &gi0)?.sin()
    });
    let y = rnd(&mut rng, &[2, 3, 4], Dom::Any);
    let g3 = Tensor::from_vec(
        (0..12).map(|i| (i * 7 % 3) as i64).collect::<Vec<_>>(),
        [2, 2, 3],
    )
    .unwrap();
    grad_check("gather of a permuted view", &[y], |xs| {
        xs[0]
            .permute(&[0, 2, 1])?
            .narrow(1, 1, 2)?
            .gather(2, &g3)?
            .square()
    });
}

#[test]
fn linear_grads() {
    // The fused product-and-bias instruction (f64 takes it), for inputs of rank 1 to 3, a
    // bias of `out` elements or one broadcast element, and no bias.
    let mut rng = seeded(12);
    let w = rnd(&mut rng, &[3, 4], Dom::Any);
    for x_shape in [&[4][..], &[5, 4], &[2, 3, 4]] {
        let x = rnd(&mut rng, x_shape, Dom::Any);
        for b_shape in [&[3][..], &[1]] {
            let b = rnd(&mut rng, b_shape, Dom::Any);
            grad_check(
                &format!("linear {x_shape:?}, bias {b_shape:?}"),
                &[x.clone(), w.clone(), b],
                |xs| xs[0].linear(&xs[1], Some(&xs[2])),
            );
        }
        grad_check(
            &format!("linear {x_shape:?}, no bias"),
            &[x.clone(), w.clone()],
            |xs| xs[0].linear(&xs[1], None),
        );
    }
    // A transposed (column-major) input.
    grad_check(
        "linear of a transposed input",
        &[
            rnd(&mut rng, &[4, 5], Dom::Any),
            w.clone(),
            rnd(&mut rng, &[3], Dom::Any),
        ],
        |xs| xs[0].t()?.linear(&xs[1], Some(&xs[2])),
    );
}

#[test]
fn linear_relu_grads() {
    // The fused product, bias and ReLU (`f64` takes it) and the unfused path without a bias,
    // for inputs of rank 1 to 3.
    let mut rng = seeded(13);
    let w = rnd(&mut rng, &[3, 4], Dom::Any);
    for x_shape in [&[4][..], &[5, 4], &[2, 3, 4]] {
        let x = rnd(&mut rng, x_shape, Dom::Any);
        let b = rnd(&mut rng, &[3], Dom::Any);
        grad_check(
            &format!("linear_relu {x_shape:?}"),
            &[x.clone(), w.clone(), b],
            |xs| xs[0].linear_relu(&xs[1], Some(&xs[2])),
        );
        grad_check(
            &format!("linear_relu {x_shape:?}, no bias"),
            &[x, w.clone()],
            |xs| xs[0].linear_relu(&xs[1], None),
        );
    }
}

#[test]
fn linear_relu_grads_are_those_of_linear_then_relu_bit_for_bit() {
    // One row (the single-row kernel) and 64 rows (gemm split over the pool), in both dtypes
    // the fused instruction takes: the output and every gradient must match the two ops'.
    let mut rng = seeded(14);
    for dt in [DType::F32, DType::F64] {
        for (m, k, n) in [(1, 50, 30), (64, 100, 70)] {
            let (x, w, b) = (
                rnd(&mut rng, &[m, k], Dom::Any),
                rnd(&mut rng, &[n, k], Dom::Any),
                rnd(&mut rng, &[n], Dom::Any),
            );
            let g = leaf(&rnd(&mut rng, &[m, n], Dom::Any))
                .to_dtype(dt)
                .unwrap();
            let run = |fused: bool| -> Vec<Vec<u64>> {
                let [x, w, b] =
                    [&x, &w, &b].map(|t| leaf(t).to_dtype(dt).unwrap().requires_grad_(true));
                let y = match fused {
                    true => x.linear_relu(&w, Some(&b)).unwrap(),
                    false => x.linear(&w, Some(&b)).unwrap().relu().unwrap(),
                };
                y.mul(&g).unwrap().sum_all().unwrap().backward().unwrap();
                let grads = [&x, &w, &b].map(|t| t.grad().expect("a gradient"));
                std::iter::once(y.detach())
                    .chain(grads)
                    .map(|t| {
                        let v = t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
                        v.into_iter().map(f64::to_bits).collect()
                    })
                    .collect()
            };
            assert_eq!(run(true), run(false), "{dt:?} [{m}, {k}] @ [{n}, {k}]ᵀ");
        }
    }
}

#[test]
fn loss_grads() {
    let mut rng = seeded(4);
    let logits = rnd(&mut rng, &[4, 5], Dom::Any);
    let t = Tensor::from_vec(vec![1i64, 4, 0, 4], [4]).unwrap();
    grad_check("cross_entropy", std::slice::from_ref(&logits), |xs| {
        xs[0].cross_entropy(&t)
    });
    grad_check(
        "cross_entropy of a transposed view",
        &[rnd(&mut rng, &[5, 4], Dom::Any)],
        |xs| xs[0].t()?.cross_entropy(&t),
    );
    grad_check("nll_loss", std::slice::from_ref(&logits), |xs| {
        xs[0].log_softmax(1)?.nll_loss(&t)
    });
    let target = rnd(&mut rng, &[4, 5], Dom::Any);
    grad_check("mse_loss", &[logits.clone(), target], |xs| {
        xs[0].mse_loss(&xs[1])
    });
}

#[test]
fn var_and_std_grads() {
    let mut rng = seeded(11);
    let x = rnd(&mut rng, &[3, 4], Dom::Any);
    grad_check("var over dim 1", std::slice::from_ref(&x), |xs| {
        xs[0].var(&[1], 1, false)
    });
    grad_check("var over all, keepdim", std::slice::from_ref(&x), |xs| {
        xs[0].var(&[0, 1], 0, true)
    });
    grad_check("std over dim 0", std::slice::from_ref(&x), |xs| {
        xs[0].std(&[0], 1, false)
    });
    grad_check("std of a transposed view", std::slice::from_ref(&x), |xs| {
        xs[0].t()?.std(&[-1], 0, true)
    });
}

#[test]
fn cumsum_grads() {
    let mut rng = seeded(12);
    let x = rnd(&mut rng, &[3, 4], Dom::Any);
    grad_check("cumsum over dim 1", std::slice::from_ref(&x), |xs| {
        xs[0].cumsum(1)
    });
    grad_check("cumsum over dim -2", std::slice::from_ref(&x), |xs| {
        xs[0].cumsum(-2)
    });
    grad_check(
        "cumsum of a transposed view",
        std::slice::from_ref(&x),
        |xs| xs[0].t()?.cumsum(1),
    );
    let s = rnd(&mut rng, &[], Dom::Any);
    grad_check("cumsum of a 0-dim tensor", &[s], |xs| xs[0].cumsum(0));
}

#[test]
fn sort_topk_and_median_grads() {
    // Distinct random values, so each ordering is locally fixed and finite differences apply.
    let mut rng = seeded(13);
    let x = rnd(&mut rng, &[3, 5], Dom::Any);
    grad_check("sort over dim 1", std::slice::from_ref(&x), |xs| {
        Ok(xs[0].sort(1, false)?.0)
    });
    grad_check(
        "sort descending over dim 0",
        std::slice::from_ref(&x),
        |xs| Ok(xs[0].sort(0, true)?.0),
    );
    grad_check(
        "topk of a transposed view",
        std::slice::from_ref(&x),
        |xs| Ok(xs[0].t()?.topk(2, 0, true)?.0),
    );
    grad_check("median over dim 1", std::slice::from_ref(&x), |xs| {
        Ok(xs[0].median(1, false)?.0)
    });
}

#[test]
fn scatter_add_and_index_add_grads() {
    let mut rng = seeded(14);
    let x = rnd(&mut rng, &[3, 4], Dom::Any);
    // `src` larger than the index: only the covered part gets a gradient.
    let src = rnd(&mut rng, &[3, 5], Dom::Any);
    let idx = Tensor::from_vec(vec![0i64, 2, 2, 1, 2, 0], [2, 3]).unwrap();
    grad_check("scatter_add along dim 0", &[x.clone(), src.clone()], |xs| {
        xs[0].scatter_add(0, &idx, &xs[1])
    });
    grad_check("scatter_add along dim 1", &[x.clone(), src], |xs| {
        xs[0].scatter_add(1, &idx, &xs[1])
    });
    let rows = rnd(&mut rng, &[5, 4], Dom::Any);
    let ridx = Tensor::from_vec(vec![2i64, 0, 2, 2, 1], [5]).unwrap();
    grad_check("index_add along dim 0", &[x, rows], |xs| {
        xs[0].index_add(0, &ridx, &xs[1])
    });
}

#[test]
fn composed_reduction_and_mask_grads() {
    let mut rng = seeded(15);
    let x = rnd(&mut rng, &[3, 4], Dom::Any);
    grad_check("logsumexp over dim 1", std::slice::from_ref(&x), |xs| {
        xs[0].logsumexp(&[1], false)
    });
    grad_check(
        "logsumexp over both dims, keepdim",
        std::slice::from_ref(&x),
        |xs| xs[0].logsumexp(&[0, 1], true),
    );
    for p in [2.0, 1.0, 3.0, f64::INFINITY] {
        grad_check(&format!("norm p={p}"), std::slice::from_ref(&x), |xs| {
            xs[0].norm(p, &[1], false)
        });
    }
    let mask = Tensor::from_vec(vec![1i64, 0, 0, 1], [4])
        .unwrap()
        .gt_scalar(0.0)
        .unwrap();
    grad_check("masked_fill", std::slice::from_ref(&x), |xs| {
        xs[0].masked_fill(&mask, 5.0)
    });
    grad_check("tril", std::slice::from_ref(&x), |xs| xs[0].tril(-1));
    grad_check(
        "triu of a transposed view",
        std::slice::from_ref(&x),
        |xs| xs[0].t()?.triu(0),
    );
    grad_check("flip", std::slice::from_ref(&x), |xs| xs[0].flip(&[0, 1]));
    grad_check("chunk and cat", std::slice::from_ref(&x), |xs| {
        let c = xs[0].chunk(3, 1)?;
        Tensor::cat(&[&c[1], &c[0]], 1)
    });
}

/// The 2-norm's gradient at a zero vector is 0 (PyTorch's choice), not NaN; `logsumexp` of
/// rows holding infinities is exact (no ∞ − ∞).
#[test]
fn norm_and_logsumexp_at_special_points() {
    let x = Tensor::from_vec(vec![0f64, 0.0, 3.0, 4.0], [2, 2])
        .unwrap()
        .requires_grad_(true);
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

#[test]
fn layer_norm_grads() {
    let mut rng = seeded(5);
    let x = rnd(&mut rng, &[3, 2, 4], Dom::Any);
    let w1 = rnd(&mut rng, &[4], Dom::Any);
    let b1 = rnd(&mut rng, &[4], Dom::Any);
    grad_check("layer_norm 1 dim", &[x.clone(), w1, b1], |xs| {
        xs[0].layer_norm(1, Some(&xs[1]), Some(&xs[2]), 1e-5)
    });
    let w2 = rnd(&mut rng, &[2, 4], Dom::Any);
    grad_check("layer_norm 2 dims, weight only", &[x.clone(), w2], |xs| {
        xs[0].layer_norm(2, Some(&xs[1]), None, 1e-5)
    });
    grad_check(
        "layer_norm of a transposed view",
        std::slice::from_ref(&x),
        |xs| xs[0].transpose(0, 2)?.layer_norm(2, None, None, 1e-5),
    );
}

#[test]
fn composite_graphs() {
    let mut rng = seeded(6);
    let x = rnd(&mut rng, &[3, 3], Dom::Any);
    let y = rnd(&mut rng, &[3], Dom::Any);
    // A leaf used on several paths (diamond), a two-layer MLP, a leaf both in place of lhs and rhs.
    grad_check("diamond", std::slice::from_ref(&x), |xs| {
        xs[0].mul(&xs[0])?.add(&xs[0].sin()?)?.mul(&xs[0].t()?)
    });
    grad_check("mlp", &[x.clone(), y.clone()], |xs| {
        xs[0]
            .matmul(&xs[1])?
            .tanh()?
            .unsqueeze(0)?
            .matmul(&xs[0])?
            .relu()?
            .sum_all()
    });
    grad_check("x @ x", std::slice::from_ref(&x), |xs| {
        xs[0].matmul(&xs[0])?.log_softmax(-1)
    });
}

// ---- autograd mechanics ------------------------------------------------------------------------

fn f64s(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().unwrap()
}

#[test]
fn gradients_accumulate_over_two_backward_calls() {
    let xv = vec![0.5, -1.0, 2.0];
    let x = Tensor::from_vec(xv.clone(), [3])
        .unwrap()
        .requires_grad_(true);
    x.mul(&x).unwrap().sum_all().unwrap().backward().unwrap();
    assert_eq!(
        f64s(&x.grad().unwrap()),
        xv.iter().map(|v| 2.0 * v).collect::<Vec<_>>()
    );
    x.mul_scalar(3.0)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(
        f64s(&x.grad().unwrap()),
        xv.iter().map(|v| 2.0 * v + 3.0).collect::<Vec<_>>()
    );
    // The same graph, backward twice: the gradient doubles.
    x.set_grad(None);
    let y = x.exp().unwrap().sum_all().unwrap();
    y.backward().unwrap();
    y.backward().unwrap();
    let g = f64s(&x.grad().unwrap());
    for (g, v) in g.iter().zip(&xv) {
        assert!(
            (g - 2.0 * v.exp()).abs() < 1e-12,
            "{g} vs {}",
            2.0 * v.exp()
        );
    }
    // Two leaves, one backward through a shared subgraph each time.
    let w = Tensor::from_vec(vec![1.0, 2.0, 3.0], [3])
        .unwrap()
        .requires_grad_(true);
    let h = x.mul(&w).unwrap();
    h.sum_all().unwrap().backward().unwrap();
    h.mean_all().unwrap().backward().unwrap();
    assert_eq!(
        f64s(&w.grad().unwrap()),
        xv.iter().map(|v| v + v / 3.0).collect::<Vec<_>>()
    );
}

#[test]
fn detach_and_no_grad_cut_the_graph() {
    let xv = vec![1.5, -2.0];
    let x = Tensor::from_vec(xv.clone(), [2])
        .unwrap()
        .requires_grad_(true);
    // Only the attached path contributes: d/dx (stop(x) · x) = x.
    x.detach()
        .mul(&x)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(f64s(&x.grad().unwrap()), xv);
    assert!(!x.detach().requires_grad());
    let y = {
        let _g = no_grad();
        x.exp().unwrap()
    };
    assert!(!y.requires_grad() && y.is_leaf());
    assert!(matches!(
        y.sum_all().unwrap().backward(),
        Err(Error::Autograd { .. })
    ));
    // Casting to f32 and back keeps the gradient path (rounded to f32).
    x.set_grad(None);
    x.to_dtype(DType::F32)
        .unwrap()
        .mul_scalar(2.0)
        .unwrap()
        .to_dtype(DType::F64)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(f64s(&x.grad().unwrap()), vec![2.0, 2.0]);
    // Integer results are cut from the graph.
    assert!(!x.argmax(0, false).unwrap().requires_grad());
    assert!(!x.gt_scalar(0.0).unwrap().requires_grad());
}

#[test]
fn backward_rejects_bad_seeds_and_in_place_on_leaves() {
    let x = Tensor::from_vec(vec![1.0, 2.0], [2])
        .unwrap()
        .requires_grad_(true);
    let y = x.mul_scalar(2.0).unwrap();
    assert!(matches!(
        y.backward(),
        Err(Error::Autograd { op: "backward", .. })
    ));
    assert!(matches!(
        y.backward_with(&Tensor::ones([3], DType::F64).unwrap()),
        Err(Error::ShapeMismatch { op: "backward", .. })
    ));
    assert!(matches!(x.add_scalar_(1.0), Err(Error::Autograd { .. })));
    {
        let _g = no_grad();
        x.add_scalar_(1.0).unwrap();
    }
    assert_eq!(f64s(&x), vec![2.0, 3.0]);
    assert!(x.grad().is_none());
}

/// An in-place write to a tensor a backward reads (an input, a captured index, the output),
/// between the forward and the backward, makes the backward fail rather than use the new
/// values (PyTorch's saved-tensor version check); a write to a tensor no backward reads does
/// not.
#[test]
fn in_place_writes_to_saved_tensors_fail_the_backward() {
    let x = Tensor::from_vec(vec![1.0, 2.0], [2])
        .unwrap()
        .requires_grad_(true);
    // mul reads its other operand.
    let c = Tensor::from_vec(vec![3.0, 4.0], [2]).unwrap();
    let y = x.mul(&c).unwrap().sum_all().unwrap();
    assert_eq!(c.version(), 0);
    c.mul_scalar_(10.0).unwrap();
    assert_eq!(c.version(), 1);
    let r = y.backward();
    assert!(
        matches!(&r, Err(Error::Autograd { op: "mul", message }) if message.contains("version 1")),
        "{r:?}"
    );
    assert!(x.grad().is_none(), "nothing was accumulated");
    // sin reads its input, through a detached handle sharing its storage.
    let y = x.sin().unwrap().sum_all().unwrap();
    {
        let _g = no_grad();
        x.narrow(0, 0, 1).unwrap().mul_scalar_(2.0).unwrap();
    }
    assert!(matches!(
        y.backward(),
        Err(Error::Autograd { op: "sin", .. })
    ));
    // exp reads its output.
    let e = x.exp().unwrap();
    let y = e.sum_all().unwrap();
    e.detach().zero_().unwrap();
    assert!(matches!(
        y.backward(),
        Err(Error::Autograd { op: "exp", .. })
    ));
    // index_select reads its index.
    let idx = Tensor::from_vec(vec![1i64, 1], [2]).unwrap();
    let y = x.index_select(0, &idx).unwrap().sum_all().unwrap();
    idx.fill_(0.0).unwrap();
    assert!(matches!(
        y.backward(),
        Err(Error::Autograd {
            op: "index_select",
            ..
        })
    ));
    // add reads neither operand: writing one afterwards is fine, as in PyTorch.
    let y = x.add(&c).unwrap().sum_all().unwrap();
    c.zero_().unwrap();
    y.backward().unwrap();
    assert_eq!(f64s(&x.grad().unwrap()), [1.0, 1.0]);
    // A failed in-place call does not count as a write.
    let d = Tensor::from_vec(vec![1.0, 1.0], [2]).unwrap();
    let y = x.mul(&d).unwrap().sum_all().unwrap();
    assert!(d.add_(&Tensor::ones([3], DType::F64).unwrap()).is_err());
    assert_eq!(d.version(), 0);
    y.backward().unwrap();
}

/// Gradients at the points where the composed formulas give `0 · inf`: PyTorch's values.
#[test]
fn gradients_at_zero_match_pytorch() {
    let grad_of = |v: Vec<f64>, f: &dyn Fn(&Tensor) -> R<Tensor>| -> Vec<f64> {
        let x = Tensor::from_vec(v.clone(), [v.len()])
            .unwrap()
            .requires_grad_(true);
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
            .requires_grad_(true);
        let b = Tensor::from_vec(vec![1.0, 5.0, 0.0], [3])
            .unwrap()
            .requires_grad_(true);
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

/// A custom backward that returns a gradient of the wrong shape, or the wrong number of
/// gradients, is an `Autograd` error naming the op (not a panic, not a stored bad gradient).
#[test]
fn custom_backward_results_are_checked() {
    let x = Tensor::from_vec(vec![1f32, 2., 3.], [3])
        .unwrap()
        .requires_grad_(true);
    let id = || {
        Tensor::custom_map::<f32, _>("id", &[&x], [3], |i, o| {
            o.copy_from_slice(i[0]);
            Ok(())
        })
        .unwrap()
    };
    let y = id().with_backward("id", &[&x], |g, _, _| Ok(vec![Some(g.sum_all()?)]));
    let r = y.sum_all().unwrap().backward();
    assert!(
        matches!(&r, Err(Error::Autograd { op: "id", message }) if message.contains("[3]")),
        "{r:?}"
    );
    let y = id().with_backward("id", &[&x], |g, _, _| Ok(vec![Some(g.clone()), None]));
    let r = y.sum_all().unwrap().backward();
    assert!(
        matches!(&r, Err(Error::Autograd { op: "id", message }) if message.contains("2 gradients")),
        "{r:?}"
    );
    assert!(x.grad().is_none());
}

/// Two leaves never share one gradient tensor, nor a leaf the caller's seed: writing one
/// `.grad` in place changes nothing else.
#[test]
fn leaf_gradients_do_not_share_storage() {
    let a = Tensor::from_vec(vec![1f32], [1])
        .unwrap()
        .requires_grad_(true);
    let b = Tensor::from_vec(vec![1f32], [1])
        .unwrap()
        .requires_grad_(true);
    a.add(&b).unwrap().sum_all().unwrap().backward().unwrap();
    let (ga, gb) = (a.grad().unwrap(), b.grad().unwrap());
    assert!(!ga.shares_storage(&gb));
    ga.zero_().unwrap();
    assert_eq!(gb.to_vec::<f32>().unwrap(), [1.0]);
    let s = Tensor::from_vec(vec![2f32, 3.], [2]).unwrap();
    let x = Tensor::from_vec(vec![0f32, 0.], [2])
        .unwrap()
        .requires_grad_(true);
    x.add_scalar(1.0).unwrap().backward_with(&s).unwrap();
    assert!(!x.grad().unwrap().shares_storage(&s));
    assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), [2.0, 3.0]);
}
