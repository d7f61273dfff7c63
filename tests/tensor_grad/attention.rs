//! Gradients of scaled dot-product attention (the fused backward) in the queries, keys and
//! values, and in a float mask (the composed form), over random geometry and broadcast
//! batch dims.

use crate::common::reference::cases;
use crate::{Dom, grad_check, leaf, rnd, seeded};
use eddy::tensor::{AttentionOptions, DType, Tensor};
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

    /// The `f32` gradients (a kernel of their own, with 16-lane registers where the CPU has
    /// AVX-512) against the `f64` ones checked above, over sizes that take several blocks of
    /// query rows, tiles of keys and tiles of widths, with each kind of mask.
    #[test]
    fn f32_attention_grads_match_f64(
        l in 1usize..=27, s in 1usize..=37, e in 1usize..=20, ev in 1usize..=35,
        kind in 0usize..=3, seed in any::<u64>(),
    ) {
        let mut rng = seeded(seed);
        let ins = [
            rnd(&mut rng, &[2, l, e], Dom::Any),
            rnd(&mut rng, &[2, s, e], Dom::Any),
            rnd(&mut rng, &[2, s, ev], Dom::Any),
            rnd(&mut rng, &[2, l, ev], Dom::Any),
            rnd(&mut rng, &[l, s], Dom::Any),
        ];
        let keep: Vec<bool> = (0..l * s).map(|i| i / s != 0 && (i % s) % 3 != 1).collect();
        let grads = |dt: DType| -> Vec<Vec<f64>> {
            let t: Vec<Tensor> = ins.iter().map(|i| leaf(i).to_dtype(dt).unwrap()).collect();
            let qkv: Vec<Tensor> =
                t[..3].iter().map(|x| x.clone().requires_grad_(true).unwrap()).collect();
            let bools = Tensor::from_vec(keep.clone(), [l, s]).unwrap();
            let o = match kind {
                0 => AttentionOptions::default().scale(0.7),
                1 => AttentionOptions::causal(),
                2 => AttentionOptions::default().mask(&bools),
                _ => AttentionOptions::default().mask(&t[4]),
            };
            let y = qkv[0].scaled_dot_product_attention(&qkv[1], &qkv[2], o).unwrap();
            y.backward_with(&t[3]).unwrap();
            let f64s = |x: Tensor| x.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
            let mut out = vec![f64s(y.detach())];
            out.extend(qkv.iter().map(|x| f64s(x.grad().unwrap())));
            out
        };
        let (got, want) = (grads(DType::F32), grads(DType::F64));
        for (what, (g, w)) in ["out", "dq", "dk", "dv"].iter().zip(got.iter().zip(&want)) {
            let scale = w.iter().fold(1.0f64, |m, x| m.max(x.abs()));
            for (i, (a, b)) in g.iter().zip(w).enumerate() {
                prop_assert!((a - b).abs() <= 1e-4 * scale, "{}[{}]: {} vs {}", what, i, a, b);
            }
        }
    }
}
