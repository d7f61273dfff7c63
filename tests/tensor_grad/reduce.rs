//! Gradients of the reductions over random dim sets, `var` and `std`, `cumsum`, `sort`, `topk`
//! and `median`, `logsumexp`, norms, masks and flips.

use crate::common::reference::cases;
use crate::{Dom, View, arb_view, grad_check, rnd, seeded, shape, view};
use eddy::tensor::Tensor;
use proptest::prelude::*;

proptest! {
    #![proptest_config(cases(16))]

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
