//! Gradients of scaled dot-product attention (the fused backward) in the queries, keys and
//! values, and in a float mask (the composed form), over random geometry and broadcast
//! batch dims.

use crate::common::reference::cases;
use crate::{Dom, grad_check, rnd, seeded};
use eddy::tensor::{AttentionOptions, Tensor};
use proptest::prelude::*;

proptest! {
    #![proptest_config(cases(16))]

    /// Queries, keys and values; causal or not, a bool mask with a fully masked row, a scale.
    #[test]
    fn attention_grads(
        h in 1usize..=2, l in 1usize..=6, s in 1usize..=6, e in 1usize..=9, ev in 1usize..=9,
        kind in 0usize..=2, seed in any::<u64>(),
    ) {
        let mut rng = seeded(seed);
        let q = rnd(&mut rng, &[2, h, l, e], Dom::Any);
        let k = rnd(&mut rng, &[2, 1, s, e], Dom::Any); // broadcast over heads
        let v = rnd(&mut rng, &[h, s, ev], Dom::Any); // broadcast over the batch
        let keep: Vec<bool> = (0..l * s).map(|i| i / s != 0 && (i % s) % 2 == 0).collect();
        grad_check("scaled_dot_product_attention", &[q, k, v], |t| {
            let m = Tensor::from_vec(keep.clone(), [l, s])?;
            let o = match kind {
                0 => AttentionOptions::default().scale(0.7),
                1 => AttentionOptions::causal(),
                _ => AttentionOptions::default().mask(&m),
            };
            t[0].scaled_dot_product_attention(&t[1], &t[2], o)
        });
    }

    /// A float mask that needs its gradient too.
    #[test]
    fn attention_mask_grads(l in 1usize..=4, s in 1usize..=4, seed in any::<u64>()) {
        let mut rng = seeded(seed);
        let q = rnd(&mut rng, &[2, l, 3], Dom::Any);
        let k = rnd(&mut rng, &[2, s, 3], Dom::Any);
        let v = rnd(&mut rng, &[2, s, 2], Dom::Any);
        let m = rnd(&mut rng, &[l, s], Dom::Any);
        grad_check("scaled_dot_product_attention (mask)", &[q, k, v, m], |t| {
            t[0].scaled_dot_product_attention(&t[1], &t[2], AttentionOptions::default().mask(&t[3]))
        });
    }
}
