//! Reductions against the reference: sums, means, variances, products, extrema and their
//! positions over random dim sets; `logsumexp`, norms, `any` and `all`; PyTorch's edges (NaN
//! medians, half norms, repeated dims) and long `f32` sums.

use crate::common::reference::{
    self, Arr, Dom, R, cfg, check, check_amp, dtype, input, numel, shape, steps, to_float, tol,
};
use eddy::tensor::{DType, Error, Tensor};
use proptest::prelude::*;
use rand::SeedableRng;
use rand::rngs::StdRng;

use DType::{BF16, F16, F32, F64, I64};

proptest! {
    #![proptest_config(cfg())]

    /// Reductions over random dim sets (negative dims too), with and without `keepdim`: empty
    /// reductions give the identity; `max`/`min`/`argmax`/`argmin` over an empty dim are
    /// `EmptyTensor`.
    #[test]
    fn reductions_match_reference(
        shape in shape(0..=3), steps in steps(), dt in dtype(), mask in any::<u8>(),
        keepdim in any::<bool>(), grid in any::<bool>(), seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let rank = shape.len();
        let dims: Vec<usize> = (0..rank).filter(|d| mask >> d & 1 == 1).collect();
        let neg = mask & 0x80 != 0;
        let idims: Vec<isize> = dims.iter().map(|&d| if neg { d as isize - rank as isize } else { d as isize }).collect();
        let dom = if grid { Dom::Grid } else { Dom::Any };
        let (t, a) = input(&shape, &steps, dt, dom, &mut rng);
        let sum_dt = if dt.is_float() { dt } else { I64 };
        let sum = |g: &[f64]| g.iter().sum::<f64>();
        let mean = |g: &[f64]| g.iter().sum::<f64>() / g.len() as f64;
        check("sum", &t.sum(&idims, keepdim).unwrap(), &a.reduce(&dims, keepdim, sum), sum_dt);
        check("sum_all", &t.sum_all().unwrap(), &a.reduce(&(0..rank).collect::<Vec<_>>(), false, sum), sum_dt);
        if dt.is_float() {
            check("mean", &t.mean(&idims, keepdim).unwrap(), &a.reduce(&dims, keepdim, mean), dt);
            check("mean_all", &t.mean_all().unwrap(), &a.reduce(&(0..rank).collect::<Vec<_>>(), false, mean), dt);
            // Bessel's correction 0, 1 or 2; at N <= correction the divisor is 0 (inf, or NaN
            // for a zero sum), as in PyTorch.
            let corr = (mask as usize >> 5 & 3) % 3;
            let var = |g: &[f64]| {
                let m = g.iter().sum::<f64>() / g.len() as f64;
                g.iter().map(|v| (v - m).powi(2)).sum::<f64>() / g.len().saturating_sub(corr) as f64
            };
            check("var", &t.var(&idims, corr, keepdim).unwrap(), &a.reduce(&dims, keepdim, var), dt);
            check("std", &t.std(&idims, corr, keepdim).unwrap(), &a.reduce(&dims, keepdim, |g| var(g).sqrt()), dt);
        } else {
            let r = t.mean(&idims, keepdim);
            assert!(matches!(r, Err(Error::UnsupportedDType { op: "mean", .. })), "{:?}", r);
            let r = t.std(&idims, 1, keepdim);
            assert!(matches!(r, Err(Error::UnsupportedDType { op: "std", .. })), "{:?}", r);
        }
        let (tp, ap) = input(&shape, &steps, dt, Dom::Unit, &mut rng);
        check("prod", &tp.prod(&idims, keepdim).unwrap(), &ap.reduce(&dims, keepdim, |g| g.iter().product()), sum_dt);

        let all: Vec<usize> = (0..rank).collect();
        let fmax = |g: &[f64]| g.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let fmin = |g: &[f64]| g.iter().cloned().fold(f64::INFINITY, f64::min);
        for (name, got, f) in [
            ("max_all", t.max_all(), &fmax as &dyn Fn(&[f64]) -> f64),
            ("min_all", t.min_all(), &fmin),
        ] {
            if a.data.is_empty() {
                assert!(matches!(got, Err(Error::EmptyTensor { .. })), "{}: {:?}", name, got);
            } else {
                check(name, &got.unwrap(), &a.reduce(&all, false, f), dt);
            }
        }
        if rank == 0 {
            return Ok(());
        }
        let d = (mask as usize >> 3) % rank;
        let id = if neg { d as isize - rank as isize } else { d as isize };
        let argmax = |g: &[f64]| (0..g.len()).fold(0, |b, k| if g[k] > g[b] { k } else { b }) as f64;
        let argmin = |g: &[f64]| (0..g.len()).fold(0, |b, k| if g[k] < g[b] { k } else { b }) as f64;
        type Red = (&'static str, R<Tensor>, Box<dyn Fn(&[f64]) -> f64>, DType);
        let cases: Vec<Red> = vec![
            ("max", t.max(id, keepdim), Box::new(fmax), dt),
            ("min", t.min(id, keepdim), Box::new(fmin), dt),
            ("argmax", t.argmax(id, keepdim), Box::new(argmax), I64),
            ("argmin", t.argmin(id, keepdim), Box::new(argmin), I64),
        ];
        for (name, got, f, odt) in cases {
            if shape[d] == 0 {
                prop_assert!(
                    matches!(&got, Err(Error::EmptyTensor { at: _, op }) if *op == name),
                    "{} over the empty dim {} of {:?}: {:?}", name, d, shape, got
                );
            } else {
                check(name, &got.unwrap(), &a.reduce(&[d], keepdim, f), odt);
            }
        }
    }
}

/// Reduces `a` over the dims marked in `red` with `f` applied to each group's values (in
/// row-major order); the result keeps the reduced dims as size 1.
fn reduce_ref(a: &Arr, red: &[bool], f: impl Fn(&[f64]) -> f64) -> Arr {
    let kshape: Vec<usize> = a
        .shape
        .iter()
        .zip(red)
        .map(|(&s, &r)| if r { 1 } else { s })
        .collect();
    let mut groups = vec![Vec::new(); numel(&kshape)];
    for (i, &v) in a.data.iter().enumerate() {
        let mut ix = reference::unravel(i, &a.shape);
        for (x, &r) in ix.iter_mut().zip(red) {
            if r {
                *x = 0;
            }
        }
        groups[reference::ravel(&ix, &kshape)].push(v);
    }
    Arr::new(&kshape, groups.iter().map(|g| f(g)).collect())
}

proptest! {
    #![proptest_config(cfg())]

    /// `logsumexp`, `norm` for several `p`, `any`/`all` over random dim sets of random views and
    /// dtypes, against plain loops; with `keepdim` either way.
    #[test]
    fn composed_reductions_match_reference(
        shape in shape(0..=3), steps in steps(), dt in dtype(), mask in any::<u8>(),
        keepdim in any::<bool>(), big in any::<bool>(), seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (t, a) = input(&shape, &steps, dt, Dom::Grid, &mut rng);
        let rank = shape.len();
        let red: Vec<bool> = (0..rank).map(|d| mask >> d & 1 == 1).collect();
        let dims: Vec<isize> = (0..rank).filter(|&d| red[d]).map(|d| d as isize).collect();
        let out_shape = |k: &Arr| -> Arr {
            if keepdim {
                k.clone()
            } else {
                let s: Vec<usize> = (0..rank).filter(|&d| !red[d]).map(|d| shape[d]).collect();
                Arr::new(&s, k.data.clone())
            }
        };
        let fdt = to_float(dt);

        // logsumexp, shifted by a large constant in half the cases (it must not overflow).
        let shift = if big && dt.is_float() && dt != F16 && dt != BF16 { 500.0 } else { 0.0 };
        let ts = if shift != 0.0 { t.add_scalar(shift).unwrap() } else { t.clone() };
        let want = reduce_ref(&a, &red, |g| {
            if g.is_empty() { return f64::NEG_INFINITY; }
            let m = g.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v + shift));
            m + g.iter().map(|&v| (v + shift - m).exp()).sum::<f64>().ln()
        });
        let got = ts.logsumexp(&dims, keepdim).unwrap();
        let amp = vec![1.0 + shift.abs(); numel(&want.shape)];
        check_amp("logsumexp", &got, &out_shape(&want), fdt, tol(fdt) * 4.0, &amp);

        // any / all.
        let any = reduce_ref(&a, &red, |g| g.iter().any(|&v| v != 0.0) as u8 as f64);
        let all = reduce_ref(&a, &red, |g| g.iter().all(|&v| v != 0.0) as u8 as f64);
        check("any", &t.any(&dims, keepdim).unwrap(), &out_shape(&any), DType::Bool);
        check("all", &t.all(&dims, keepdim).unwrap(), &out_shape(&all), DType::Bool);
        check("any_all", &t.any_all().unwrap(), &Arr::new(&[], vec![a.data.iter().any(|&v| v != 0.0) as u8 as f64]), DType::Bool);
        check("all_all", &t.all_all().unwrap(), &Arr::new(&[], vec![a.data.iter().all(|&v| v != 0.0) as u8 as f64]), DType::Bool);

        // Norms.
        if !dt.is_float() {
            let e = t.norm(2.0, &dims, keepdim).unwrap_err();
            prop_assert!(matches!(e, Error::UnsupportedDType { op: "norm", .. }), "{e}");
        } else {
            let empty = (0..rank).any(|d| red[d] && shape[d] == 0);
            for p in [2.0, 1.0, 3.0, 0.5, 0.0, f64::INFINITY, f64::NEG_INFINITY] {
                let got = t.norm(p, &dims, keepdim);
                if p.is_infinite() && empty {
                    prop_assert!(matches!(got, Err(Error::EmptyTensor { .. })), "{got:?}");
                    continue;
                }
                let want = reduce_ref(&a, &red, |g| {
                    let abs = g.iter().map(|v| v.abs());
                    if p == f64::INFINITY {
                        abs.fold(0.0, f64::max)
                    } else if p == f64::NEG_INFINITY {
                        abs.fold(f64::INFINITY, f64::min)
                    } else if p == 0.0 {
                        abs.filter(|&v| v != 0.0).count() as f64
                    } else {
                        abs.map(|v| v.powf(p)).sum::<f64>().powf(1.0 / p)
                    }
                });
                check_amp(&format!("norm p={p}"), &got.unwrap(), &out_shape(&want), dt, tol(dt) * 4.0, &[]);
            }
            let e = t.norm(f64::NAN, &dims, keepdim).unwrap_err();
            prop_assert!(matches!(e, Error::InvalidArgument { op: "norm", .. }), "{e}");
        }
        let bad = [rank as isize];
        for (op, e) in [
            ("logsumexp", t.logsumexp(&bad, keepdim).unwrap_err()),
            ("norm", t.norm(2.0, &bad, keepdim).unwrap_err()),
            ("any", t.any(&bad, keepdim).unwrap_err()),
            ("all", t.all(&bad, keepdim).unwrap_err()),
        ] {
            prop_assert!(matches!(e, Error::InvalidDim { op: o, .. } if o == op), "{e}");
        }
    }
}

/// Reductions at PyTorch's edges: the median of a row with NaN is NaN at its first NaN; a
/// half norm is computed in f32; a dim named twice is refused; a 0-dim tensor takes dim 0.
#[test]
fn reduction_edges_match_pytorch() {
    let x = Tensor::from_vec(
        vec![1f32, f32::NAN, 2.0, f32::NAN, 3.0, 4.0, 0.0, 5.0],
        [2, 4],
    )
    .unwrap();
    let (v, i) = x.median(1, false).unwrap();
    let v = v.to_vec::<f32>().unwrap();
    assert!(v[0].is_nan() && v[1] == 3.0, "{v:?}");
    assert_eq!(i.to_vec::<i64>().unwrap(), [1, 0]);
    // The gradient goes to the position the median came from.
    let w = x.to_dtype(F64).unwrap().requires_grad_(true).unwrap();
    w.median(1, true)
        .unwrap()
        .0
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(
        w.grad().unwrap().to_vec::<f64>().unwrap(),
        [0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    );

    let h = Tensor::from_vec(
        vec![
            eddy::tensor::f16::from_f32(300.0),
            eddy::tensor::f16::from_f32(400.0),
        ],
        [2],
    )
    .unwrap();
    for (p, want) in [
        (2.0, 500.0f32),
        (3.0, (300f32.powi(3) + 400f32.powi(3)).cbrt()),
    ] {
        let n = h.norm(p, &[0], false).unwrap();
        assert_eq!(n.dtype(), F16);
        let got = n.to_dtype(F32).unwrap().item::<f32>().unwrap();
        assert!((got - want).abs() / want < 1e-3, "p = {p}: {got} vs {want}");
    }

    let t = Tensor::ones([2, 3], F32).unwrap();
    for dims in [&[0, 0][..], &[1, -1]] {
        let r = t.sum(dims, false);
        assert!(
            matches!(&r, Err(Error::InvalidArgument { op: "sum", .. })),
            "{dims:?}: {r:?}"
        );
    }
    assert!(t.max(1, false).is_ok());
    let s = Tensor::from_vec(vec![3f32], []).unwrap();
    assert_eq!(s.argmax(0, false).unwrap().item::<i64>().unwrap(), 0);
    assert_eq!(s.sum(&[-1], false).unwrap().item::<f32>().unwrap(), 3.0);
    assert!(s.sum(&[1], false).is_err());
}

/// Long f32 sums are cascaded, as PyTorch's: a million `0.1f32` add up to 100000 within a few
/// units (a running f32 sum drifts by about 1 %), over the leading dim, the last dim, and all.
#[test]
fn long_f32_sums_keep_their_accuracy() {
    let n = 1_000_000usize;
    let want = n as f64 * 0.1f32 as f64;
    let close = |got: f32| (got as f64 - want).abs() < 10.0;
    let cols = Tensor::full([n, 2], 0.1, F32).unwrap();
    for s in cols.sum(&[0], false).unwrap().to_vec::<f32>().unwrap() {
        assert!(close(s), "column sum {s}");
    }
    let rows = Tensor::full([2, n], 0.1, F32).unwrap();
    for s in rows.sum(&[1], false).unwrap().to_vec::<f32>().unwrap() {
        assert!(close(s), "row sum {s}");
    }
    let all = Tensor::full([n], 0.1, F32).unwrap().sum_all().unwrap();
    assert!(close(all.item::<f32>().unwrap()), "{all}");
    let mean = cols.mean(&[0], false).unwrap().to_vec::<f32>().unwrap();
    assert!((mean[0] - 0.1).abs() < 1e-6, "{mean:?}");
    // No columns: the cascade has nothing to split.
    let none = Tensor::zeros([n, 0], F32)
        .unwrap()
        .sum(&[0], false)
        .unwrap();
    assert!(none.to_vec::<f32>().unwrap().is_empty());
}

/// Column sums of a long, wide input (split into bands of columns over the kernel threads) are
/// bit for bit those of the same columns summed alone, and within f32 rounding of f64 sums.
#[test]
fn wide_column_sums_do_not_depend_on_the_split() {
    let (rows, cols) = (1003usize, 300usize); // above the banding threshold (4 · 2^15)
    let t = Tensor::randn([rows, cols], 0.0, 1.0, F32).unwrap();
    let all = t.sum(&[0], false).unwrap().to_vec::<f32>().unwrap();
    let x = t.to_vec::<f32>().unwrap();
    for (j, s) in all.iter().enumerate() {
        let want: f64 = (0..rows).map(|i| x[i * cols + j] as f64).sum();
        assert!(
            (*s as f64 - want).abs() < 1e-4 * (1.0 + want.abs()),
            "column {j}: {s} vs {want}"
        );
    }
    // Narrow slices, some across the end of a band (of 160 columns on two threads), summed on
    // their own: a column's sum does not depend on its neighbours.
    for start in [0, 60, 120, 150, 156, 250, 292] {
        let part = t.narrow(1, start, 8).unwrap().contiguous().unwrap();
        let got = part.sum(&[0], false).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(got, all[start..start + 8], "columns {start}..{}", start + 8);
    }
}
