//! `softmax`, the losses and `layer_norm` against the reference; `nn` modules and initialisers,
//! and the optimizers against hand-written reference updates.

use crate::common::reference::{
    Arr, Dom, cfg, check, check_amp, dim, float_dtype, input, shape, steps, tensor, tol,
};
use eddy::tensor::{DType, Error, Tensor};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use DType::{F32, F64};

proptest! {
    #![proptest_config(cfg())]

    /// `softmax` and `log_softmax` over any dim.
    #[test]
    fn softmax_matches_reference(shape in shape(0..=3), steps in steps(), dt in float_dtype(), d in 0usize..4, neg in any::<bool>(), seed in any::<u64>()) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (t, a) = input(&shape, &steps, dt, Dom::Any, &mut rng);
        let rank = shape.len();
        let (d, id) = if rank == 0 { (0, 0) } else { let d = d % rank; (d, if neg { d as isize - rank as isize } else { d as isize }) };
        let (ws, wl) = if rank == 0 {
            (a.map(|_| 1.0), a.map(|_| 0.0))
        } else {
            (a.softmax(d, false), a.softmax(d, true))
        };
        check("softmax", &t.softmax(id).unwrap(), &ws, dt);
        check("log_softmax", &t.log_softmax(id).unwrap(), &wl, dt);
    }

    /// `cross_entropy`, `nll_loss` and `mse_loss` (the mean over an empty batch is NaN).
    #[test]
    fn losses_match_reference(
        nc in (dim(), 1usize..=4), steps in steps(), dt in float_dtype(), i32_idx in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (n, c) = nc;
        let (x, ax) = input(&[n, c], &steps, dt, Dom::Any, &mut rng);
        let tg: Vec<usize> = (0..n).map(|_| rng.random_range(0..c)).collect();
        let tt = if i32_idx {
            Tensor::from_vec(tg.iter().map(|&v| v as i32).collect::<Vec<_>>(), [n]).unwrap()
        } else {
            Tensor::from_vec(tg.iter().map(|&v| v as i64).collect::<Vec<_>>(), [n]).unwrap()
        };
        let ls = if n == 0 { ax.clone() } else { ax.softmax(1, true) };
        let ce = -(0..n).map(|i| ls.at(&[i, tg[i]])).sum::<f64>() / n as f64;
        let nll = -(0..n).map(|i| ax.at(&[i, tg[i]])).sum::<f64>() / n as f64;
        if i32_idx {
            // PyTorch's cross_entropy and nll_loss take i64 (or u8) class indices only.
            let refused = matches!(x.cross_entropy(&tt), Err(Error::UnsupportedDType { .. }));
            prop_assert!(refused, "i32 targets");
            let refused = matches!(x.nll_loss(&tt), Err(Error::UnsupportedDType { .. }));
            prop_assert!(refused, "i32 targets");
        } else {
            check("cross_entropy", &x.cross_entropy(&tt).unwrap(), &Arr::new(&[], vec![ce]), dt);
            check("nll_loss", &x.nll_loss(&tt).unwrap(), &Arr::new(&[], vec![nll]), dt);
        }
        let (y, ay) = input(&[n, c], &[], dt, Dom::Any, &mut rng);
        let mse = ax.data.iter().zip(&ay.data).map(|(a, b)| (a - b).powi(2)).sum::<f64>() / (n * c) as f64;
        check("mse_loss", &x.mse_loss(&y).unwrap(), &Arr::new(&[], vec![mse]), dt);
    }

    /// `layer_norm` over the last 1..=rank dims, with and without the affine terms.
    #[test]
    fn layer_norm_matches_reference(
        shape in shape(1..=3), steps in steps(), k in 1usize..=3, wb in (any::<bool>(), any::<bool>()),
        dt in prop_oneof![Just(F32), Just(F64)], seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let k = 1 + (k - 1) % shape.len();
        let (x, ax) = input(&shape, &steps, dt, Dom::Any, &mut rng);
        let tail = shape[shape.len() - k..].to_vec();
        let w = wb.0.then(|| input(&tail, &[], dt, Dom::Any, &mut rng));
        let b = wb.1.then(|| input(&tail, &[], dt, Dom::Any, &mut rng));
        let (want, amp) = ax.layer_norm(k, w.as_ref().map(|p| &p.1), b.as_ref().map(|p| &p.1), 1e-5);
        let got = x.layer_norm(k, w.as_ref().map(|p| &p.0), b.as_ref().map(|p| &p.0), 1e-5).unwrap();
        // Rounding of the centred input is amplified by 1/σ; scale the tolerance by it.
        let amp: Vec<f64> = amp.iter().map(|a| 1.0 + 3.0 * a).collect();
        check_amp("layer_norm", &got, &want, dt, tol(dt), &amp);
    }
}

/// The gradients of `softmax` and `log_softmax` over the last dim (one kernel) are bit for bit
/// their formulas composed of elementwise ops and a row sum, in every float dtype.
#[test]
fn softmax_gradients_are_the_composed_ones_bit_for_bit() {
    let mut rng = StdRng::seed_from_u64(11);
    let (r, c) = (7, 33);
    let v: Vec<f64> = (0..r * c).map(|_| rng.random_range(-3.0..3.0)).collect();
    let w: Vec<f64> = (0..r * c).map(|_| rng.random_range(-1.0..1.0)).collect();
    let bits = |t: &Tensor| {
        let v = t.to_dtype(F64).unwrap().to_vec::<f64>().unwrap();
        v.iter().map(|g| g.to_bits()).collect::<Vec<_>>()
    };
    for dt in [F32, F64, DType::BF16, DType::F16] {
        let w = Tensor::from_vec(w.clone(), [r, c])
            .unwrap()
            .to_dtype(dt)
            .unwrap();
        for log in [false, true] {
            let x = Tensor::from_vec(v.clone(), [r, c])
                .unwrap()
                .to_dtype(dt)
                .unwrap();
            let x = x.requires_grad_(true).unwrap();
            let y = if log { x.log_softmax(1) } else { x.softmax(1) }.unwrap();
            y.backward_with(&w).unwrap();
            let want = if log {
                w.sub(&y.exp().unwrap().mul(&w.sum(&[1], true).unwrap()).unwrap())
            } else {
                y.mul(&w.sub(&w.mul(&y).unwrap().sum(&[1], true).unwrap()).unwrap())
            };
            assert!(
                bits(&x.grad().unwrap()) == bits(&want.unwrap()),
                "{dt} log {log}"
            );
        }
    }
}

/// `cross_entropy` with class targets is bit for bit `log_softmax`, the gathered values'
/// mean and its negation, in value and gradient, whether the host knows the targets or not;
/// targets of -100 are left out of the sum and the count.
#[test]
fn class_target_losses_are_the_negated_mean_of_the_picked_log_probabilities() {
    let mut rng = StdRng::seed_from_u64(7);
    let (n, c) = (128, 10);
    let v: Vec<f32> = (0..n * c).map(|_| rng.random_range(-4.0..4.0)).collect();
    let tg: Vec<i64> = (0..n).map(|_| rng.random_range(0..c as i64)).collect();
    let run = |loss: &dyn Fn(&Tensor) -> Tensor| {
        let x = Tensor::from_vec(v.clone(), [n, c]).unwrap();
        let x = x.requires_grad_(true).unwrap();
        let l = loss(&x);
        l.backward().unwrap();
        let g = x.grad().unwrap().to_vec::<f32>().unwrap();
        let bits: Vec<u32> = g.iter().map(|g| g.to_bits()).collect();
        (l.item::<f32>().unwrap().to_bits(), bits)
    };
    let known = Tensor::from_vec(tg.clone(), [n]).unwrap();
    let composed = run(&|x| {
        let picked = x
            .log_softmax(1)
            .unwrap()
            .gather(1, &known.unsqueeze(1).unwrap());
        picked.unwrap().mean_all().unwrap().neg().unwrap()
    });
    let computed = known.add(&known.zeros_like().unwrap()).unwrap();
    for t in [&known, &computed] {
        assert!(run(&|x| x.cross_entropy(t).unwrap()) == composed);
    }
    let mut some = tg.clone();
    some[3] = -100;
    some[77] = -100;
    let x = Tensor::from_vec(v.clone(), [n, c]).unwrap();
    let got = (x.cross_entropy(&Tensor::from_vec(some.clone(), [n]).unwrap()))
        .and_then(|l| l.item::<f32>())
        .unwrap();
    let row = |i: usize| {
        let r = &v[i * c..i * c + c];
        let m = r.iter().fold(f64::MIN, |m, &a| m.max(a as f64));
        let lse = m + r.iter().map(|&a| (a as f64 - m).exp()).sum::<f64>().ln();
        r[some[i] as usize] as f64 - lse
    };
    let kept: Vec<usize> = (0..n).filter(|&i| some[i] >= 0).collect();
    let want = -kept.iter().map(|&i| row(i)).sum::<f64>() / kept.len() as f64;
    assert!((got as f64 - want).abs() < 1e-5, "{got} vs {want}");
}

/// The gradient of `nll_loss` over many classes (written by both cores): `-1 / kept` at each
/// kept row's target, zero everywhere else, left-out rows included.
#[test]
fn nll_loss_gradient_over_a_large_vocabulary() {
    let (n, c) = (300, 1000);
    let tg: Vec<i64> = (0..n as i64)
        .map(|i| {
            if i % 7 == 3 {
                -100
            } else {
                (i * 37) % c as i64
            }
        })
        .collect();
    let kept = tg.iter().filter(|&&t| t >= 0).count();
    let x = Tensor::zeros([n, c], F32)
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    let t = Tensor::from_vec(tg.clone(), [n]).unwrap();
    x.nll_loss(&t).unwrap().backward().unwrap();
    let g = x.grad().unwrap().to_vec::<f32>().unwrap();
    let at = -1.0 / kept as f32;
    for (i, row) in g.chunks(c).enumerate() {
        for (j, &v) in row.iter().enumerate() {
            let want = if tg[i] == j as i64 { at } else { 0.0 };
            assert_eq!(v, want, "row {i}, class {j}");
        }
    }
}

#[test]
fn linear_and_sequential_forward() {
    use eddy::tensor::nn::{Func, Init, Linear, Module, Sequential};
    let w = Arr::new(&[3, 2], vec![0.5, -1.0, 2.0, 0.25, -0.75, 1.5]);
    let b = Arr::new(&[3], vec![0.1, -0.2, 0.3]);
    let x = Arr::new(&[4, 2], vec![1.0, 2.0, -1.0, 0.5, 0.0, 3.0, 2.5, -2.0]);
    let lin = Linear {
        weight: tensor(&w, F64).requires_grad_(true).unwrap(),
        bias: Some(tensor(&b, F64).requires_grad_(true).unwrap()),
    };
    let want = x
        .matmul(&w.transpose(0, 1))
        .unwrap()
        .zip(&b, |p, q| p + q)
        .unwrap();
    check(
        "linear",
        &lin.forward(&tensor(&x, F64)).unwrap(),
        &want,
        F64,
    );
    assert_eq!(lin.parameters().len(), 2);
    let w2 = Arr::new(&[1, 3], vec![1.0, -2.0, 0.5]);
    let mlp = Sequential::new()
        .add(lin)
        .add(Func::new(Tensor::relu))
        .add(Linear {
            weight: tensor(&w2, F64).requires_grad_(true).unwrap(),
            bias: None,
        });
    assert_eq!((mlp.len(), mlp.parameters().len()), (3, 3));
    let want2 = want
        .map(|v| v.max(0.0))
        .matmul(&w2.transpose(0, 1))
        .unwrap();
    check(
        "sequential",
        &mlp.forward(&tensor(&x, F64)).unwrap(),
        &want2,
        F64,
    );
    // Initialisers: shapes, bounds and spread.
    let (fi, fo) = (50usize, 30usize);
    let ku = Init::KaimingUniform
        .tensor(&[fo, fi], fi, fo, F64)
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    let b = 1.0 / (fi as f64).sqrt();
    assert!(ku.iter().all(|v| v.abs() <= b) && ku.iter().any(|v| v.abs() > b / 2.0));
    let xu = Init::XavierUniform
        .tensor(&[fo, fi], fi, fo, F64)
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    let b = (6.0 / (fi + fo) as f64).sqrt();
    assert!(xu.iter().all(|v| v.abs() <= b) && xu.iter().any(|v| v.abs() > b / 2.0));
    let kn = Init::KaimingNormal
        .tensor(&[fo, fi], fi, fo, F64)
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    let sd = (kn.iter().map(|v| v * v).sum::<f64>() / kn.len() as f64).sqrt();
    assert!(
        (sd - (2.0 / fi as f64).sqrt()).abs() < 0.03,
        "kaiming normal std {sd}"
    );
    assert!(
        Init::Zeros
            .tensor(&[3], 1, 3, F32)
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .all(|&v| v == 0.0)
    );
    let l = Linear::new(5, 7, false, F32).unwrap();
    assert_eq!((l.weight.dims(), l.bias.is_none()), (&[7, 5][..], true));
}

/// Three optimizer steps on `L = Σ (w − t)²` (so `∂L/∂w = 2(w − t)`), against `update`,
/// which maps (weights, gradients, step) to the new weights.
fn optimizer_matches(
    name: &str,
    make: impl Fn(Vec<Tensor>) -> Box<dyn eddy::tensor::optim::Optimizer>,
    mut update: impl FnMut(&mut [f64], &[f64], i32),
) {
    let w0 = vec![0.5, -1.5, 2.0, 0.0];
    let t = vec![1.0, 1.0, -1.0, 0.5];
    let w = Tensor::from_vec(w0.clone(), [4])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    let target = Tensor::from_vec(t.clone(), [4]).unwrap();
    let mut opt = make(vec![w.clone()]);
    let mut rw = w0;
    for step in 1..=3 {
        opt.zero_grad();
        w.sub(&target)
            .unwrap()
            .square()
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        opt.step().unwrap();
        let g: Vec<f64> = rw.iter().zip(&t).map(|(a, b)| 2.0 * (a - b)).collect();
        update(&mut rw, &g, step);
        let got = w.to_vec::<f64>().unwrap();
        for (a, b) in got.iter().zip(&rw) {
            assert!(
                (a - b).abs() < 1e-12,
                "{name} step {step}: got {got:?}, want {rw:?}"
            );
        }
    }
    assert!(
        w.is_leaf() && w.requires_grad(),
        "{name}: the parameter stays a leaf"
    );
}

#[test]
fn optimizers_match_their_update_rules() {
    use eddy::tensor::optim::{Adam, Sgd};
    optimizer_matches(
        "sgd",
        |p| Box::new(Sgd::new(p, 0.1).unwrap()),
        |w, g, _| {
            for (w, g) in w.iter_mut().zip(g) {
                *w -= 0.1 * g;
            }
        },
    );
    let mut buf = [0.0; 4];
    optimizer_matches(
        "sgd momentum + weight decay",
        |p| {
            Box::new(
                Sgd::new(p, 0.05)
                    .unwrap()
                    .momentum(0.9)
                    .unwrap()
                    .weight_decay(0.1)
                    .unwrap(),
            )
        },
        |w, g, step| {
            for i in 0..4 {
                let gi = g[i] + 0.1 * w[i];
                buf[i] = if step == 1 { gi } else { 0.9 * buf[i] + gi };
                w[i] -= 0.05 * buf[i];
            }
        },
    );
    for (decoupled, wd) in [(false, 0.0), (false, 0.2), (true, 0.2)] {
        let (mut m, mut v) = ([0.0; 4], [0.0; 4]);
        optimizer_matches(
            &format!("adam decoupled={decoupled} wd={wd}"),
            |p| {
                let mut a = if decoupled {
                    Adam::adamw(p, 0.01, wd).unwrap()
                } else {
                    Adam::new(p, 0.01).unwrap()
                };
                a.weight_decay = wd;
                Box::new(a)
            },
            |w, g, step| {
                let (b1, b2, lr, eps) = (0.9f64, 0.999f64, 0.01, 1e-8);
                for i in 0..4 {
                    let mut gi = g[i];
                    if decoupled {
                        w[i] *= 1.0 - lr * wd;
                    } else {
                        gi += wd * w[i];
                    }
                    m[i] = b1 * m[i] + (1.0 - b1) * gi;
                    v[i] = b2 * v[i] + (1.0 - b2) * gi * gi;
                    let mh = m[i] / (1.0 - b1.powi(step));
                    let vh = v[i] / (1.0 - b2.powi(step));
                    w[i] -= lr * mh / (vh.sqrt() + eps);
                }
            },
        );
    }
    // Optimizers take only leaves that require grad.
    let x = Tensor::ones([2], F32).unwrap();
    assert!(matches!(
        Sgd::new(vec![x.clone()], 0.1),
        Err(Error::InvalidArgument { .. })
    ));
    let y = x.requires_grad_(true).unwrap().mul_scalar(2.0).unwrap();
    assert!(matches!(
        Adam::new(vec![y], 0.1),
        Err(Error::InvalidArgument { .. })
    ));
}

/// Adam's step runs as one instruction for a dense parameter, and as its composed ops for a
/// strided one (a transposed view made a leaf). Both forms round every op alike, so the two
/// parameters stay equal bit for bit over several steps: Adam, its L2 decay and AdamW, in
/// `f32` and `f64`.
#[test]
fn adam_in_one_instruction_is_the_composed_ops_bit_for_bit() {
    use eddy::tensor::optim::{Adam, Optimizer};
    let mut rng = StdRng::seed_from_u64(11);
    for dt in [F32, F64] {
        for (decoupled, wd) in [(false, 0.0), (false, 0.05), (true, 0.05)] {
            let vals: Vec<f64> = (0..6 * 40).map(|_| rng.random_range(-1.0..1.0)).collect();
            let base = Tensor::from_vec(vals.clone(), [40, 6])
                .unwrap()
                .to_dtype(dt)
                .unwrap();
            let dense = base
                .t()
                .unwrap()
                .contiguous()
                .unwrap()
                .requires_grad_(true)
                .unwrap();
            let strided = base.t().unwrap().requires_grad_(true).unwrap();
            assert!(dense.is_contiguous() && !strided.is_contiguous());
            let make = |p: Tensor| {
                let a = if decoupled {
                    Adam::adamw(vec![p], 0.01, wd).unwrap()
                } else {
                    Adam::new(vec![p], 0.01).unwrap().weight_decay(wd).unwrap()
                };
                a.betas(0.8, 0.99).unwrap()
            };
            let (mut a, mut b) = (make(dense.clone()), make(strided.clone()));
            let x0 = dense.to_dtype(F64).unwrap().to_vec::<f64>().unwrap();
            for step in 0..4 {
                let c: Vec<f64> = (0..6 * 40).map(|_| rng.random_range(-2.0..2.0)).collect();
                let c = Tensor::from_vec(c, [6, 40]).unwrap().to_dtype(dt).unwrap();
                for (p, o) in [(&dense, &mut a), (&strided, &mut b)] {
                    o.zero_grad();
                    p.mul(&c)
                        .unwrap()
                        .square()
                        .unwrap()
                        .sum_all()
                        .unwrap()
                        .backward()
                        .unwrap();
                    o.step().unwrap();
                }
                let (x, y) = (
                    dense.to_dtype(F64).unwrap().to_vec::<f64>().unwrap(),
                    strided.to_dtype(F64).unwrap().to_vec::<f64>().unwrap(),
                );
                let what = format!("{dt} decoupled={decoupled} wd={wd} step {step}");
                assert!(
                    x.iter().zip(&y).all(|(p, q)| p.to_bits() == q.to_bits()),
                    "{what}"
                );
                assert!(
                    x.iter().zip(&x0).all(|(p, v)| p != v),
                    "{what}: not every element moved"
                );
            }
        }
    }
}
