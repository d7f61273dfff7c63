//! `cumsum`, `sort`, `argsort`, `topk` and `median` against a stable reference sort, with ties
//! and NaNs (F12), and inputs large enough to split rows across cores.

use crate::common::reference::{
    self, Arr, Dom, build, cfg, check, dtype, input, sample, shape, steps,
};
use eddy::tensor::{DType, Error, Tensor};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use DType::{F32, I64};

proptest! {
    #![proptest_config(cfg())]

    /// `cumsum` along every dim (negative ones too) of random shapes, views and dtypes:
    /// floats keep their dtype, integers sum to `i64`; a dim out of range is `InvalidDim`.
    #[test]
    fn cumsum_matches_reference(
        shape in shape(0..=3), steps in steps(), dt in dtype(), pick in any::<u8>(),
        seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (t, a) = input(&shape, &steps, dt, Dom::Any, &mut rng);
        let rank = shape.len();
        let out_dt = if dt.is_float() { dt } else { I64 };
        let span = rank.max(1);
        let d = pick as usize % span;
        let dim = if pick & 0x80 != 0 { d as isize - span as isize } else { d as isize };
        let got = t.cumsum(dim).unwrap();
        // The reference: a running sum that restarts at index 0 of `d`.
        let stride: usize = shape.iter().skip(d + 1).product();
        let size = shape.get(d).copied().unwrap_or(1);
        let mut want = a.data.clone();
        for i in 0..want.len() {
            if !(i / stride).is_multiple_of(size) {
                want[i] += want[i - stride];
            }
        }
        check("cumsum", &got, &Arr { shape: shape.clone(), data: want }, out_dt);
        assert!(got.is_contiguous());
        let bad = span as isize + (pick % 3) as isize;
        let e = t.cumsum(bad).unwrap_err();
        assert!(matches!(e, Error::InvalidDim { op: "cumsum", dim, .. } if dim == bad), "{e}");
    }
}

/// Each row of `a` along `d`, stably ordered with NaN largest: `(values, positions)`, the first
/// `k` of each row, in the layout of `a` with `d` resized to `k`.
fn sorted_reference(a: &Arr, d: usize, k: usize, descending: bool) -> (Arr, Arr) {
    let n = a.shape[d];
    let inner: usize = a.shape[d + 1..].iter().product();
    let outer: usize = a.shape[..d].iter().product();
    let mut out_shape = a.shape.clone();
    out_shape[d] = k;
    let (mut vals, mut pos) = (vec![0.0; outer * k * inner], vec![0.0; outer * k * inner]);
    for o in 0..outer {
        for q in 0..inner {
            let mut row: Vec<(f64, usize)> = (0..n)
                .map(|j| (a.data[(o * n + j) * inner + q], j))
                .collect();
            // (is NaN, value): NaN above every number; `sort_by` is stable.
            row.sort_by(|x, y| {
                let c =
                    x.0.is_nan()
                        .cmp(&y.0.is_nan())
                        .then_with(|| x.0.partial_cmp(&y.0).unwrap_or(std::cmp::Ordering::Equal));
                if descending { c.reverse() } else { c }
            });
            for (j, &(v, p)) in row.iter().take(k).enumerate() {
                vals[(o * k + j) * inner + q] = v;
                pos[(o * k + j) * inner + q] = p as f64;
            }
        }
    }
    (Arr::new(&out_shape, vals), Arr::new(&out_shape, pos))
}

proptest! {
    #![proptest_config(cfg())]

    /// `sort`, `argsort`, `topk` and `median` along every dim of random shapes, views and
    /// dtypes, with many ties (small integers) and NaNs in float inputs: values and positions
    /// against a stable reference sort; `k` past the dim and bad dims are typed errors.
    #[test]
    fn sort_and_topk_match_reference(
        shape in shape(0..=3), steps in steps(), dt in dtype(), pick in any::<u8>(),
        kpick in any::<u8>(), descending in any::<bool>(), seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let nan_rate = if dt.is_float() { 0.15 } else { 0.0 };
        let (t, a) = build(&shape, &steps, dt, &mut || {
            if rng.random_bool(nan_rate) { f64::NAN } else { sample(&mut rng, Dom::Grid, dt) }
        });
        let rank = shape.len();
        let span = rank.max(1);
        let d = pick as usize % span;
        let dim = if pick & 0x80 != 0 { d as isize - span as isize } else { d as isize };
        // The reference works on a rank-1 view of a 0-dim input.
        let a1 = if rank == 0 { Arr::new(&[1], a.data.clone()) } else { a.clone() };
        let n = a1.shape[d];
        let unshape = |r: Arr| if rank == 0 { Arr::new(&[], r.data) } else { r };

        let (v, i) = t.sort(dim, descending).unwrap();
        let (wv, wi) = sorted_reference(&a1, d, n, descending);
        let (wv, wi) = (unshape(wv), unshape(wi));
        check("sort values", &v, &wv, dt);
        check("sort positions", &i, &wi, I64);
        prop_assert!(v.is_contiguous() && i.is_contiguous());
        check("argsort", &t.argsort(dim, descending).unwrap(), &wi, I64);

        let k = kpick as usize % (n + 1);
        let (v, i) = t.topk(k, dim, descending).unwrap();
        let (wv, wi) = sorted_reference(&a1, d, k, descending);
        if rank == 0 && k == 1 {
            check("topk values", &v, &unshape(wv), dt);
            check("topk positions", &i, &unshape(wi), I64);
        } else {
            check("topk values", &v, &wv, dt);
            check("topk positions", &i, &wi, I64);
        }
        let e = t.topk(n + 1 + k, dim, descending).unwrap_err();
        prop_assert!(matches!(e, Error::InvalidArgument { op: "topk", .. }), "{e}");

        if n == 0 {
            let e = t.median(dim, false).unwrap_err();
            prop_assert!(matches!(e, Error::EmptyTensor { at: _, op: "median" }), "{e}");
        } else if rank > 0 {
            let (m, mi) = t.median(dim, true).unwrap();
            let (wv, wi) = sorted_reference(&a1, d, n, false);
            // A row with NaN has the median NaN, at its first NaN (PyTorch's `median`).
            let first_nan = |ix: &[usize]| {
                (0..n).find(|&j| {
                    let mut ix = ix.to_vec();
                    ix[d] = j;
                    a1.data[reference::ravel(&ix, &a1.shape)].is_nan()
                })
            };
            let at = |r: &Arr, nan: fn(usize) -> f64| {
                let mut s = r.shape.clone();
                s[d] = 1;
                Arr::from_fn(&s, |ix| {
                    if let Some(j) = first_nan(ix) {
                        return nan(j);
                    }
                    let mut ix = ix.to_vec();
                    ix[d] = (n - 1) / 2;
                    r.data[reference::ravel(&ix, &r.shape)]
                })
            };
            check("median", &m, &at(&wv, |_| f64::NAN), dt);
            check("median positions", &mi, &at(&wi, |j| j as f64), I64);
            prop_assert_eq!(t.median(dim, false).unwrap().0.rank(), rank - 1);
        }

        let bad = span as isize + (pick % 3) as isize;
        let e = t.sort(bad, descending).unwrap_err();
        prop_assert!(matches!(e, Error::InvalidDim { op: "sort", dim, .. } if dim == bad), "{e}");
    }
}

/// A sort long enough to run on both cores gives the same order as the reference, with
/// the ties of a coarse value grid in their original order.
#[test]
fn a_large_cumsum_splits_rows_across_cores_along_either_dim() {
    // Small integers in f32: every running sum is exact, so any misplaced row shows.
    let (rows, cols) = (300usize, 257usize);
    let data: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 7919) % 13) as f32 - 6.0)
        .collect();
    let t = Tensor::from_vec(data.clone(), [rows, cols]).unwrap();
    for (dim, through) in [(1isize, false), (0, false), (0, true)] {
        let x = if through { t.t().unwrap() } else { t.clone() };
        let (r, c) = (x.dims()[0], x.dims()[1]);
        let at = |i: usize, j: usize| {
            if through {
                data[j * cols + i]
            } else {
                data[i * cols + j]
            }
        };
        let mut want = vec![0f32; r * c];
        for i in 0..r {
            for j in 0..c {
                let prev = match dim {
                    1 if j > 0 => want[i * c + j - 1],
                    0 if i > 0 => want[(i - 1) * c + j],
                    _ => 0.0,
                };
                want[i * c + j] = prev + at(i, j);
            }
        }
        assert_eq!(
            x.cumsum(dim).unwrap().to_vec::<f32>().unwrap(),
            want,
            "dim {dim}, transposed {through}"
        );
    }
    let ints =
        Tensor::from_vec((0..rows * cols).map(|i| i as i64).collect(), [rows * cols]).unwrap();
    let last = ints.cumsum(0).unwrap().to_vec::<i64>().unwrap()[rows * cols - 1];
    assert_eq!(last, (rows * cols * (rows * cols - 1) / 2) as i64);
}

#[test]
fn a_large_sort_splits_rows_across_cores_and_stays_stable() {
    let (rows, n) = (64, 1500);
    let data: Vec<f32> = (0..rows * n).map(|i| ((i * 7919) % 101) as f32).collect();
    let t = Tensor::from_vec(data.clone(), [rows, n]).unwrap();
    let a = Arr::new(&[rows, n], data.iter().map(|&v| v as f64).collect());
    for descending in [false, true] {
        let (v, i) = t.sort(1, descending).unwrap();
        let (wv, wi) = sorted_reference(&a, 1, n, descending);
        check("sort values", &v, &wv, F32);
        check("sort positions", &i, &wi, I64);
        let (v, i) = t.t().unwrap().topk(5, 0, !descending).unwrap();
        let at = Arr::new(
            &[n, rows],
            (0..n * rows)
                .map(|x| a.data[(x % rows) * n + x / rows])
                .collect(),
        );
        let (wv, wi) = sorted_reference(&at, 0, 5, !descending);
        check("topk values", &v, &wv, F32);
        check("topk positions", &i, &wi, I64);
    }
}
