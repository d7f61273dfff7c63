//! Gradients of the convolutions, pooling and channel normalisations, over random geometry.

use crate::common::reference::cases;
use crate::{Dom, grad_check, rnd, seeded};
use proptest::prelude::*;

proptest! {
    #![proptest_config(cases(12))]

    /// conv2d in input, weight and bias, with stride, padding, dilation and groups.
    #[test]
    fn conv2d_grads(
        n in 1usize..=2, g in 1usize..=2, gin in 1usize..=2, gout in 1usize..=2,
        k in (1usize..=3, 1usize..=2), s in (1usize..=2, 1usize..=2), p in (0usize..=1, 0usize..=2),
        d in 1usize..=2, extra in 0usize..=2, seed in any::<u64>(),
    ) {
        let mut rng = seeded(seed);
        let (cin, cout) = (g * gin, g * gout);
        let h = (d * (k.0 - 1) + 1) + extra;
        let w = (d * (k.1 - 1) + 1) + 1;
        let x = rnd(&mut rng, &[n, cin, h, w], Dom::Any);
        let wt = rnd(&mut rng, &[cout, gin, k.0, k.1], Dom::Any);
        let b = rnd(&mut rng, &[cout], Dom::Any);
        grad_check("conv2d", &[x, wt, b], |t| t[0].conv2d(&t[1], Some(&t[2]), s, p, d, g));
    }

    /// conv_transpose2d in input, weight and bias.
    #[test]
    fn conv_transpose2d_grads(
        g in 1usize..=2, gin in 1usize..=2, gout in 1usize..=2, k in 1usize..=3,
        s in 1usize..=2, p in 0usize..=1, h in 1usize..=3, seed in any::<u64>(),
    ) {
        let mut rng = seeded(seed);
        let p = p.min(k - 1);
        // Both output dims non-empty (PyTorch refuses an empty one too).
        prop_assume!((h - 1) * s + k > 2 * p && s + k > 2 * p);
        let x = rnd(&mut rng, &[1, g * gin, h, 2], Dom::Any);
        let wt = rnd(&mut rng, &[g * gin, gout, k, k], Dom::Any);
        let b = rnd(&mut rng, &[g * gout], Dom::Any);
        grad_check("conv_transpose2d", &[x, wt, b], |t| {
            t[0].conv_transpose2d(&t[1], Some(&t[2]), s, p, s - 1, g, 1)
        });
    }

    /// max_pool2d (distinct values: no ties) and avg_pool2d under every divisor rule.
    #[test]
    fn pooling_grads(
        k in 1usize..=3, s in 1usize..=2, pad in 0usize..=1, ceil in any::<bool>(),
        include in any::<bool>(), h in 3usize..=5, seed in any::<u64>(),
    ) {
        let mut rng = seeded(seed);
        let pad = pad.min(k / 2);
        let x = rnd(&mut rng, &[2, 2, h, 4], Dom::Distinct);
        grad_check("max_pool2d", std::slice::from_ref(&x), |t| t[0].max_pool2d(k, s, pad, 1, ceil));
        grad_check("avg_pool2d", std::slice::from_ref(&x), |t| t[0].avg_pool2d(k, s, pad, ceil, include, None));
        grad_check("adaptive_avg_pool2d", std::slice::from_ref(&x), |t| t[0].adaptive_avg_pool2d((2, 3)));
    }

    /// batch_norm (training: batch statistics) and group_norm, with their affine terms.
    #[test]
    fn channel_norm_grads(n in 2usize..=3, c in 1usize..=3, hw in 1usize..=3, seed in any::<u64>()) {
        let mut rng = seeded(seed);
        let x = rnd(&mut rng, &[n, c, hw, 2], Dom::Any);
        let w = rnd(&mut rng, &[c], Dom::Unit);
        let b = rnd(&mut rng, &[c], Dom::Any);
        grad_check("batch_norm", &[x.clone(), w.clone(), b.clone()], |t| {
            t[0].batch_norm(None, None, Some(&t[1]), Some(&t[2]), true, 0.1, 1e-5)
        });
        let (rm, rv) = (rnd(&mut rng, &[c], Dom::Any), rnd(&mut rng, &[c], Dom::Pos));
        grad_check("batch_norm eval", &[x.clone(), w.clone(), b.clone(), rm, rv], |t| {
            t[0].batch_norm(Some(&t[3]), Some(&t[4]), Some(&t[1]), Some(&t[2]), false, 0.1, 1e-5)
        });
        grad_check("group_norm", &[x, w, b], |t| t[0].group_norm(c, Some(&t[1]), Some(&t[2]), 1e-5));
    }
}
