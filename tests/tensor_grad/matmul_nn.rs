//! Gradients of `matmul` (batched, broadcast, 1-D and strided operands), `linear` and
//! `linear_relu`, `softmax`, the losses, `layer_norm`, and composite graphs.

use crate::common::reference::{cases, derive};
use crate::{Dom, View, arb_view, grad_check, leaf, rnd, seeded, shape, view};
use eddy::tensor::{DType, Tensor};
use proptest::prelude::*;

proptest! {
    #![proptest_config(cases(16))]

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
                let [x, w, b] = [&x, &w, &b]
                    .map(|t| leaf(t).to_dtype(dt).unwrap().requires_grad_(true).unwrap());
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
    // Left-out rows, and targets the host does not know (computed, so checked on the stream).
    let ignored = Tensor::from_vec(vec![1i64, -100, 0, -100], [4]).unwrap();
    let computed = ignored.add(&ignored.zeros_like().unwrap()).unwrap();
    for (name, t) in [("ignored", ignored), ("computed", computed)] {
        grad_check(
            &format!("cross_entropy, {name} targets"),
            std::slice::from_ref(&logits),
            |xs| xs[0].cross_entropy(&t),
        );
    }
    let bytes = Tensor::from_vec(vec![1u8, 4, 0, 4], [4]).unwrap();
    grad_check(
        "nll_loss, u8 targets",
        std::slice::from_ref(&logits),
        |xs| xs[0].log_softmax(1)?.nll_loss(&bytes),
    );
    let target = rnd(&mut rng, &[4, 5], Dom::Any);
    grad_check("mse_loss", &[logits.clone(), target], |xs| {
        xs[0].mse_loss(&xs[1])
    });
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
    let b2 = rnd(&mut rng, &[4], Dom::Any);
    grad_check("layer_norm, bias only", &[x.clone(), b2], |xs| {
        xs[0].layer_norm(1, None, Some(&xs[1]), 1e-5)
    });
    grad_check(
        "layer_norm of a transposed view",
        std::slice::from_ref(&x),
        |xs| xs[0].transpose(0, 2)?.layer_norm(2, None, None, 1e-5),
    );
}

/// The fused kernels over many rows (several blocks of the backward's column sums, split over
/// threads, with partial blocks and partial vectors) against the composed ops in `f64`.
#[test]
fn layer_norm_over_many_rows_matches_the_composed_form() -> eddy::Result<()> {
    let (rows, cols) = (1003, 45);
    let x = Tensor::randn([rows, cols], 0.5, 2.0, DType::F32)?;
    let w = Tensor::randn([cols], 1.0, 0.5, DType::F32)?;
    let b = Tensor::randn([cols], 0.0, 1.0, DType::F32)?;
    let dy = Tensor::randn([rows, cols], 0.0, 1.0, DType::F32)?;
    let leaves = |dt| -> eddy::Result<Vec<Tensor>> {
        [&x, &w, &b]
            .iter()
            .map(|t| t.to_dtype(dt)?.requires_grad_(true))
            .collect()
    };
    let f = leaves(DType::F32)?;
    let y = f[0].layer_norm(1, Some(&f[1]), Some(&f[2]), 1e-5)?;
    y.mul(&dy)?.sum_all()?.backward()?;
    let d = leaves(DType::F64)?;
    let mean = d[0].mean(&[1], true)?;
    let xc = d[0].sub(&mean)?;
    let var = xc.square()?.mean(&[1], true)?;
    let yd = xc
        .mul(&var.add_scalar(1e-5)?.rsqrt()?)?
        .mul(&d[1])?
        .add(&d[2])?;
    yd.mul(&dy.to_dtype(DType::F64)?)?.sum_all()?.backward()?;
    let close = |what: &str, got: &Tensor, want: &Tensor| -> eddy::Result<()> {
        let (g, w) = (
            got.to_dtype(DType::F64)?.to_vec::<f64>()?,
            want.to_vec::<f64>()?,
        );
        let scale = w.iter().fold(1.0f64, |m, v| m.max(v.abs()));
        let worst = g
            .iter()
            .zip(&w)
            .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
        assert!(
            worst <= 2e-5 * scale,
            "{what}: off by {worst} (scale {scale})"
        );
        Ok(())
    };
    close("y", &y, &yd)?;
    for (i, what) in ["dx", "dw", "db"].iter().enumerate() {
        close(
            what,
            &f[i].grad().expect("grad"),
            &d[i].grad().expect("grad"),
        )?;
    }
    Ok(())
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
