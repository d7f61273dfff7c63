//! `matmul` and `linear` against the reference: 1-D promotion, broadcast batch dims, strided
//! operands; integer products exact and wrapping (F13); `linear` and `linear_relu` bit for bit
//! equal to their parts; `linear`'s bad operands refused at the call (F1).

use crate::common::reference::{Dom, cfg, check, derive, dim, dtype, input, shape, steps};
use eddy::tensor::{DType, Error, Tensor};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use DType::{F16, F32, F64, I64};

proptest! {
    #![proptest_config(cfg())]

    /// `matmul`: 1-D promotion, batched with broadcast batch dims, non-contiguous operands
    /// (including stride-0 broadcast matrices), every dtype it takes.
    #[test]
    fn matmul_matches_reference(
        batch in shape(0..=2), da in (0usize..=2, any::<u8>()), db in (0usize..=2, any::<u8>()),
        mkn in (dim(), dim(), dim()), ones in (prop::bool::weighted(0.2), prop::bool::weighted(0.2)),
        sa in steps(), sb in steps(), dt in dtype(), seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (m, k, n) = mkn;
        let sha = if ones.0 { vec![k] } else { let mut s = derive(&batch, da.0, da.1); s.extend([m, k]); s };
        let shb = if ones.1 { vec![k] } else { let mut s = derive(&batch, db.0, db.1); s.extend([k, n]); s };
        let (ta, aa) = input(&sha, &sa, dt, Dom::Any, &mut rng);
        let (tb, ab) = input(&shb, &sb, dt, Dom::Any, &mut rng);
        let want = aa.matmul(&ab).unwrap();
        let got = ta.matmul(&tb);
        prop_assert!(got.is_ok(), "{:?} @ {:?}: {:?}", sha, shb, got.as_ref().err());
        check(&format!("matmul {sha:?} @ {shb:?}"), &got.unwrap(), &want, dt);
    }

    /// `linear` (for f32 and f64 the product and the bias in one instruction) against
    /// `x @ wᵀ + b`, for inputs of rank 1 to 3, views, a bias of `n` elements, of one, or none.
    #[test]
    fn linear_matches_reference(
        lead in shape(0..=2), kn in (dim(), dim()), sx in steps(), sw in steps(),
        bias in 0usize..3, dt in dtype(), seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (k, n) = kn;
        let mut shx = lead.clone();
        shx.push(k);
        let (tx, ax) = input(&shx, &sx, dt, Dom::Any, &mut rng);
        let (tw, aw) = input(&[n, k], &sw, dt, Dom::Any, &mut rng);
        let product = ax.matmul(&aw.transpose(0, 1)).unwrap();
        let (got, want) = match bias {
            0 => (tx.linear(&tw, None), product),
            b => {
                let shb = if b == 1 { vec![n] } else { vec![1] };
                let (tb, ab) = input(&shb, &[], dt, Dom::Any, &mut rng);
                (tx.linear(&tw, Some(&tb)), product.zip(&ab, |p, q| p + q).unwrap())
            }
        };
        let what = format!("linear {shx:?}, weight [{n}, {k}], bias kind {bias}");
        prop_assert!(got.is_ok(), "{what}: {:?}", got.as_ref().err());
        check(&what, &got.unwrap(), &want, dt);
    }
}

/// Integer products are exact and wrap in their dtype, as `torch.mm`'s do: no rounding above
/// 2^53, no saturation at the dtype's ends. Checked against wrapping loops over a transposed,
/// batched operand large enough to take the threaded path, and at the edges.
#[test]
fn integer_matmul_is_exact_and_wraps() {
    // 2^53 + 1 is not an f64; i64::MAX + 1 wraps to i64::MIN.
    let a = Tensor::from_vec(vec![(1i64 << 53) + 1, i64::MAX, 3], [1, 3]).unwrap();
    let b = Tensor::from_vec(vec![1i64, 0, 0, 1, 0, 1], [3, 2]).unwrap();
    let c = a.matmul(&b).unwrap();
    assert_eq!(c.dtype(), I64);
    assert_eq!(
        c.to_vec::<i64>().unwrap(),
        [(1i64 << 53) + 1, i64::MAX.wrapping_add(3)]
    );
    let a = Tensor::from_vec(vec![200u8, 100, 16, 17], [2, 2]).unwrap();
    let b = Tensor::from_vec(vec![1u8, 2, 1, 3], [2, 2]).unwrap();
    assert_eq!(
        a.matmul(&b).unwrap().to_vec::<u8>().unwrap(),
        [44, 188, 33, 83] // 300, 700, 33, 83 mod 256
    );
    let a = Tensor::from_vec(vec![i32::MAX, i32::MIN], [1, 2]).unwrap();
    let b = Tensor::from_vec(vec![2i32, -1], [2, 1]).unwrap();
    assert_eq!(
        a.matmul(&b).unwrap().to_vec::<i32>().unwrap(),
        [i32::MAX
            .wrapping_mul(2)
            .wrapping_add(i32::MIN.wrapping_neg())]
    );

    // [3, 70, 90] @ [90, 80]ᵀ-view broadcast over the batch: 3 × 504,000 multiply-adds.
    let (nb, m, k, n) = (3usize, 70usize, 90usize, 80usize);
    let mut rng = StdRng::seed_from_u64(7);
    let av: Vec<i32> = (0..nb * m * k)
        .map(|_| rng.random_range(-1 << 20..1 << 20))
        .collect();
    let bv: Vec<i32> = (0..n * k).map(|_| rng.random()).collect();
    let a = Tensor::from_vec(av.clone(), [nb, m, k]).unwrap();
    let bt = Tensor::from_vec(bv.clone(), [n, k]).unwrap().t().unwrap();
    let got = a.matmul(&bt).unwrap().to_vec::<i32>().unwrap();
    let mut want = vec![0i32; nb * m * n];
    for bi in 0..nb {
        for i in 0..m {
            for j in 0..n {
                want[(bi * m + i) * n + j] = (0..k).fold(0i32, |s, p| {
                    s.wrapping_add(av[(bi * m + i) * k + p].wrapping_mul(bv[j * k + p]))
                });
            }
        }
    }
    assert_eq!(got, want);

    // An empty inner dim gives zeros; bool is not arithmetic.
    let z = Tensor::zeros([2, 0], I64)
        .unwrap()
        .matmul(&Tensor::zeros([0, 3], I64).unwrap());
    assert_eq!(z.unwrap().to_vec::<i64>().unwrap(), [0; 6]);
    let t = Tensor::ones([2, 2], DType::Bool).unwrap();
    assert!(matches!(
        t.matmul(&t),
        Err(Error::UnsupportedDType {
            at: _,
            op: "matmul",
            dtype: DType::Bool
        })
    ));
}

#[test]
fn linear_is_the_product_then_the_bias_bit_for_bit() {
    // The MLP workload's shapes (batch 1 takes the single-row kernel, batch 128 gemm with its
    // column-major output, split over the pool), a transposed input, and an empty inner dim
    // (the bias alone).
    eddy::tensor::manual_seed(3);
    for (m, k, n, transposed) in [
        (1, 784, 512, false),
        (128, 784, 512, false),
        (128, 512, 10, false),
        (37, 100, 70, true),
        (3, 0, 5, false),
    ] {
        let x = match transposed {
            false => Tensor::randn([m, k], 0.0, 1.0, F32).unwrap(),
            true => Tensor::randn([k, m], 0.0, 1.0, F32).unwrap().t().unwrap(),
        };
        let w = Tensor::randn([n, k], 0.0, 1.0, F32).unwrap();
        let b = Tensor::randn([n], 0.0, 1.0, F32).unwrap();
        let fused = x.linear(&w, Some(&b)).unwrap().to_vec::<f32>().unwrap();
        let apart = x.matmul(&w.t().unwrap()).unwrap().add(&b).unwrap();
        assert_eq!(
            fused,
            apart.to_vec::<f32>().unwrap(),
            "[{m}, {k}] @ [{n}, {k}]ᵀ"
        );
        if k == 0 {
            assert_eq!(fused, b.expand([m, n]).unwrap().to_vec::<f32>().unwrap());
        }
    }
}

#[test]
fn linear_relu_is_linear_then_relu_bit_for_bit() {
    // The single-row kernel, gemm split over the pool, a transposed input, an empty inner dim,
    // a broadcast one-element bias, 3-D input, and the unfused paths (no bias, `f16`); with a
    // NaN in the input's first row (of several), which must stay NaN through the ReLU, as the
    // `relu` kernel keeps it.
    let bits = |t: &Tensor| -> Vec<u64> {
        let v = t.to_dtype(F64).unwrap().to_vec::<f64>().unwrap();
        v.into_iter().map(f64::to_bits).collect()
    };
    let mut rng = StdRng::seed_from_u64(41);
    let mut host = |n: usize, nan: bool| -> Vec<f64> {
        let mut v: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
        if nan && n > 0 {
            v[0] = f64::NAN;
        }
        v
    };
    for dt in [F32, F64, F16] {
        for (m, k, n, transposed, one_bias, rank3) in [
            (1, 784, 512, false, false, false),
            (128, 300, 70, false, false, false),
            (37, 100, 70, true, false, false),
            (3, 0, 5, false, false, false),
            (4, 9, 6, false, true, false),
            (6, 9, 6, false, false, true),
        ] {
            let x = Tensor::from_vec(host(m * k, m > 1), [m, k]).unwrap();
            let x = match (transposed, rank3) {
                (true, _) => x.t().unwrap().contiguous().unwrap().t().unwrap(),
                (_, true) => x.reshape([2, m / 2, k]).unwrap(),
                _ => x,
            };
            let x = x.to_dtype(dt).unwrap();
            let w = Tensor::from_vec(host(n * k, false), [n, k]).unwrap();
            let b = Tensor::from_vec(
                host(if one_bias { 1 } else { n }, false),
                [if one_bias { 1 } else { n }],
            )
            .unwrap();
            let (w, b) = (w.to_dtype(dt).unwrap(), b.to_dtype(dt).unwrap());
            let what = format!("{dt:?} [{m}, {k}] @ [{n}, {k}]ᵀ");
            let fused = x.linear_relu(&w, Some(&b)).unwrap();
            let apart = x.linear(&w, Some(&b)).unwrap().relu().unwrap();
            assert_eq!(fused.dims(), apart.dims(), "{what}");
            let (f, a) = (bits(&fused), bits(&apart));
            assert_eq!(f, a, "{what}");
            // Both signs occur and the NaN row is NaN: the ReLU did something to compare.
            let v = fused.to_dtype(F64).unwrap().to_vec::<f64>().unwrap();
            if k > 0 {
                let rest = &v[if m > 1 { n } else { 0 }..];
                assert!(
                    m == 1 || v[..n].iter().all(|v| v.is_nan()),
                    "{what}: the NaN row"
                );
                assert!(rest.contains(&0.0), "{what}: no clipped output");
                assert!(rest.iter().any(|&v| v > 0.0), "{what}: no positive output");
            }
            let unbiased = x.linear_relu(&w, None).unwrap();
            let want = x.linear(&w, None).unwrap().relu().unwrap();
            assert_eq!(bits(&unbiased), bits(&want), "{what}, no bias");
        }
    }
    // Its errors name it.
    let x = Tensor::ones([2, 3], F32).unwrap();
    let w = Tensor::ones([4, 3], F32).unwrap();
    assert!(matches!(
        x.linear_relu(&w.t().unwrap(), None),
        Err(Error::ShapeMismatch {
            op: "linear_relu",
            ..
        })
    ));
    assert!(matches!(
        x.linear_relu(&w, Some(&Tensor::ones([3], F32).unwrap())),
        Err(Error::ShapeMismatch {
            op: "linear_relu",
            ..
        })
    ));
}

#[test]
fn linear_refuses_bad_operands_at_the_call() {
    let x = Tensor::ones([2, 3], F32).unwrap();
    let w = Tensor::ones([4, 3], F32).unwrap();
    let b = Tensor::ones([4], F32).unwrap();
    let shape = |r: eddy::tensor::Result<Tensor>| match r {
        Err(Error::ShapeMismatch {
            at: _,
            op: "linear",
            lhs,
            rhs,
        }) => (lhs, rhs),
        other => panic!("want a linear ShapeMismatch, got {other:?}"),
    };
    assert_eq!(
        shape(x.linear(&w.t().unwrap(), None)),
        (vec![2, 3], vec![3, 4])
    );
    let bad_bias = Tensor::ones([3], F32).unwrap();
    assert_eq!(shape(x.linear(&w, Some(&bad_bias))), (vec![4], vec![3]));
    let b2 = Tensor::ones([1, 4], F32).unwrap();
    assert_eq!(shape(x.linear(&w, Some(&b2))), (vec![4], vec![1, 4]));
    let invalid = |r: eddy::tensor::Result<Tensor>| {
        assert!(
            matches!(r, Err(Error::InvalidArgument { op: "linear", .. })),
            "{r:?}"
        )
    };
    invalid(Tensor::scalar(1f32).unwrap().linear(&w, None));
    invalid(x.linear(&Tensor::ones([3], F32).unwrap(), None));
    let wd = Tensor::ones([4, 3], F64).unwrap();
    assert!(matches!(
        x.linear(&wd, Some(&b)),
        Err(Error::DTypeMismatch {
            at: _,
            op: "linear",
            lhs: F32,
            rhs: F64
        })
    ));
    assert!(matches!(
        x.linear(&w, Some(&b.to_dtype(F64).unwrap())),
        Err(Error::DTypeMismatch { op: "linear", .. })
    ));
    let xb = Tensor::ones([2, 3], DType::Bool).unwrap();
    let wb = Tensor::ones([4, 3], DType::Bool).unwrap();
    assert!(matches!(
        xb.linear(&wb, None),
        Err(Error::UnsupportedDType {
            at: _,
            op: "linear",
            dtype: DType::Bool
        })
    ));
    // One element broadcasts; rows of zero and ones work.
    let one = Tensor::full([1], 0.5, F32).unwrap();
    assert_eq!(
        x.linear(&w, Some(&one)).unwrap().to_vec::<f32>().unwrap(),
        [3.5; 8]
    );
    let empty = Tensor::ones([0, 3], F32)
        .unwrap()
        .linear(&w, Some(&b))
        .unwrap();
    assert_eq!(empty.dims(), &[0, 4]);
}
