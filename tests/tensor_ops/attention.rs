//! Scaled dot-product attention against plain loops over `f64`: random batch dims (broadcast
//! between the operands), query and key counts (zero included), widths, causal or explicit
//! masks (bool with fully masked rows, float with broadcast dims), custom scales; and the
//! dtypes, dropout and refusals, and the fused form's memory (linear in the sequence).

use eddy::tensor::{AttentionOptions, DType, Tensor};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The mask's additive value at (problem, row, key).
type MaskFn = Box<dyn Fn(usize, usize, usize) -> f64>;

fn rand_vec(rng: &mut StdRng, n: usize) -> Vec<f64> {
    (0..n).map(|_| rng.random_range(-2.0..2.0)).collect()
}

/// The reference: `softmax(q kᵀ scale + mask) v` per problem, a row with no key zero.
#[allow(clippy::too_many_arguments)]
fn reference(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    mask: Option<&dyn Fn(usize, usize, usize) -> f64>,
    (batch, l, s, e, ev): (usize, usize, usize, usize, usize),
    scale: f64,
    causal: bool,
) -> Vec<f64> {
    let mut out = vec![0.0; batch * l * ev];
    for b in 0..batch {
        for i in 0..l {
            let mut sc: Vec<f64> = (0..s)
                .map(|j| {
                    let dot: f64 = (0..e)
                        .map(|c| q[(b * l + i) * e + c] * k[(b * s + j) * e + c])
                        .sum();
                    let mut x = dot * scale + mask.map_or(0.0, |m| m(b, i, j));
                    if causal && j > i {
                        x = f64::NEG_INFINITY;
                    }
                    x
                })
                .collect();
            let m = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            if m == f64::NEG_INFINITY {
                continue;
            }
            sc.iter_mut().for_each(|x| *x = (*x - m).exp());
            let z: f64 = sc.iter().sum();
            for t in 0..ev {
                out[(b * l + i) * ev + t] =
                    (0..s).map(|j| sc[j] / z * v[(b * s + j) * ev + t]).sum();
            }
        }
    }
    out
}

fn close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}: element {i}: {g} vs {w}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Any geometry, with the mask kind and the dtype drawn.
    #[test]
    fn attention_matches_loops(
        b in 0usize..=2, h in 1usize..=3, l in 0usize..=27, s in 0usize..=37,
        e in 1usize..=20, ev in 1usize..=35, mask_kind in 0usize..=3,
        f32_ in any::<bool>(), scale in prop::option::of(0.1f64..2.0), seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let causal = mask_kind == 1;
        let (q, k, v) = (
            rand_vec(&mut rng, b * h * l * e),
            rand_vec(&mut rng, b * s * e),
            rand_vec(&mut rng, b * h * s * ev),
        );
        let dt = if f32_ { DType::F32 } else { DType::F64 };
        let round = |x: Vec<f64>| -> Vec<f64> {
            if f32_ { x.iter().map(|&v| v as f32 as f64).collect() } else { x }
        };
        let (q, k, v) = (round(q), round(k), round(v));
        let tq = Tensor::from_vec(q.clone(), [b, h, l, e]).unwrap().to_dtype(dt).unwrap();
        // The keys broadcast over heads.
        let tk = Tensor::from_vec(k.clone(), [b, 1, s, e]).unwrap().to_dtype(dt).unwrap();
        let tv = Tensor::from_vec(v.clone(), [b, h, s, ev]).unwrap().to_dtype(dt).unwrap();
        // Mask kinds: none, causal, bool [l, s] (some rows fully masked), float [b, 1, l, s].
        let bools: Vec<bool> = (0..l * s).map(|i| i % 3 != 0 && rng.random_range(0..4) != 0).collect();
        let floats = round(rand_vec(&mut rng, b * l * s));
        let (tm, mf): (Option<Tensor>, Option<MaskFn>) = match mask_kind {
            2 => (
                Some(Tensor::from_vec(bools.clone(), [l, s]).unwrap()),
                Some(Box::new(move |_, i, j| if bools[i * s + j] { 0.0 } else { f64::NEG_INFINITY })),
            ),
            3 => (
                Some(Tensor::from_vec(floats.clone(), [b, 1, l, s]).unwrap().to_dtype(dt).unwrap()),
                Some(Box::new(move |bh, i, j| floats[((bh / h) * l + i) * s + j])),
            ),
            _ => (None, None),
        };
        let mut opts = AttentionOptions { is_causal: causal, scale, ..Default::default() };
        if let Some(m) = &tm {
            opts = opts.mask(m);
        }
        let got = tq.scaled_dot_product_attention(&tk, &tv, opts).unwrap();
        prop_assert_eq!(got.dims(), &[b, h, l, ev][..]);
        let got = got.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
        // The reference with the keys repeated per head.
        let kk: Vec<f64> = (0..b * h).flat_map(|bh| k[(bh / h) * s * e..][..s * e].to_vec()).collect();
        let scale = scale.unwrap_or(1.0 / (e as f64).sqrt());
        let want = reference(&q, &kk, &v, mf.as_deref(), (b * h, l, s, e, ev), scale, causal);
        close(&got, &want, if f32_ { 2e-5 } else { 1e-12 }, "attention");
    }
}

#[test]
fn half_precision_attention_is_close_to_f32() {
    let mut rng = StdRng::seed_from_u64(5);
    let t = |rng: &mut StdRng, dims: [usize; 3]| {
        Tensor::from_vec(rand_vec(rng, dims.iter().product()), dims).unwrap()
    };
    let (q, k, v) = (
        t(&mut rng, [2, 7, 8]),
        t(&mut rng, [2, 5, 8]),
        t(&mut rng, [2, 5, 3]),
    );
    let full = q
        .scaled_dot_product_attention(&k, &v, AttentionOptions::causal())
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    for dt in [DType::F16, DType::BF16] {
        let [qh, kh, vh] = [&q, &k, &v].map(|x| x.to_dtype(dt).unwrap());
        let y = qh
            .scaled_dot_product_attention(&kh, &vh, AttentionOptions::causal())
            .unwrap();
        assert_eq!(y.dtype(), dt);
        let y = y.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
        close(&y, &full, 0.05, "half");
    }
}

#[test]
fn dropout_keeps_the_expected_value_and_zero_dropout_is_exact() {
    let q = Tensor::zeros([1, 64, 4], DType::F64).unwrap(); // uniform weights
    let v = Tensor::ones([1, 64, 2], DType::F64).unwrap();
    eddy::tensor::manual_seed(1);
    let y = q
        .scaled_dot_product_attention(&q, &v, AttentionOptions::default().dropout(0.5))
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    // Each output is (kept count) · 2 / 64: an average of 1 over the 128 outputs.
    let mean = y.iter().sum::<f64>() / y.len() as f64;
    assert!((mean - 1.0).abs() < 0.1, "mean {mean}");
    assert!(y.iter().any(|&x| x != 1.0));
    let exact = q
        .scaled_dot_product_attention(&q, &v, AttentionOptions::default().dropout(0.0))
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    assert!(exact.iter().all(|&x| (x - 1.0).abs() < 1e-12));
}

#[test]
fn attention_refuses_what_pytorch_refuses() {
    let f = |dims: &[usize]| Tensor::zeros(dims.to_vec(), DType::F32).unwrap();
    let (q, k, v) = (f(&[2, 3, 4]), f(&[2, 5, 4]), f(&[2, 5, 6]));
    let go = |q: &Tensor, k: &Tensor, v: &Tensor, o: AttentionOptions| {
        q.scaled_dot_product_attention(k, v, o)
            .unwrap_err()
            .to_string()
    };
    let d = AttentionOptions::default();
    let e = go(&f(&[3]), &f(&[3]), &f(&[3]), d);
    assert!(e.contains("at least 2 dims"), "{e}");
    let e = go(&q, &f(&[2, 5, 3]), &v, d);
    assert!(e.contains("[2, 3, 4]") && e.contains("[2, 5, 3]"), "{e}");
    let e = go(&q, &k, &f(&[2, 4, 6]), d);
    assert!(e.contains("[2, 4, 6]"), "{e}");
    let e = go(&q, &f(&[3, 5, 4]), &f(&[3, 5, 6]), d);
    assert!(e.contains("scaled_dot_product_attention"), "{e}");
    let e = go(&q, &k, &v.to_dtype(DType::F64).unwrap(), d);
    assert!(e.contains("f64"), "{e}");
    let m = Tensor::ones([3, 5], DType::Bool).unwrap();
    let e = go(&q, &k, &v, AttentionOptions::causal().mask(&m));
    assert!(e.contains("is_causal"), "{e}");
    let m64 = Tensor::zeros([3, 5], DType::F64).unwrap();
    let e = go(&q, &k, &v, d.mask(&m64));
    assert!(e.contains("f64"), "{e}");
    let e = go(&q, &k, &v, d.mask(&f(&[4, 5])));
    assert!(e.contains("[4, 5]"), "{e}");
    let e = go(&q, &k, &v, d.dropout(1.5));
    assert!(e.contains("1.5"), "{e}");
    let i = Tensor::zeros([2, 3, 4], DType::I32).unwrap();
    let e = go(&i, &i, &i, d);
    assert!(e.contains("i32"), "{e}");
}

#[test]
fn attention_memory_stays_linear_in_the_sequence() {
    // 1,024 queries against 1,024 keys: the scores alone would be 4 MiB in f32; the operands,
    // the output and the saved log-sum-exp take 0.1 MiB. The engine's peak says which.
    let vm = eddy::Vm::builder().build().unwrap();
    eddy::tensor::with_engine(&vm, || {
        let t = || Tensor::randn([1, 1024, 8], 0.0, 1.0, DType::F32).unwrap();
        let (q, k, v) = (t(), t(), t());
        let before = vm.alloc_stats();
        for opts in [AttentionOptions::default(), AttentionOptions::causal()] {
            let y = q.scaled_dot_product_attention(&k, &v, opts).unwrap();
            assert!(y.to_vec::<f32>().unwrap().iter().all(|x| x.is_finite()));
        }
        let peak = vm.alloc_stats().peak_in_use - before.in_use;
        assert!(peak < 1 << 20, "peak {peak} bytes beyond the operands");
    });
}
