//! Indexing against the reference: `index_select`, `gather`, `embedding`, `scatter_add` and
//! `index_add` with their bad inputs; an index known only on the engine fails at sync.

use crate::common::reference::{
    self, Arr, Dom, cfg, check, dim, dtype, input, numel, round, shape, steps,
};
use eddy::tensor::{DType, Error, Tensor};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use DType::{F32, F64, I64};

proptest! {
    #![proptest_config(cfg())]

    /// `index_select`, `embedding` and `gather` (negative indices are refused elsewhere).
    #[test]
    fn indexing_matches_reference(
        shape in shape(1..=3), steps in steps(), dt in dtype(), d in 0usize..3,
        i32_idx in any::<bool>(), seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let rank = shape.len();
        let d = d % rank;
        let (t, a) = input(&shape, &steps, dt, Dom::Any, &mut rng);
        let size = shape[d];
        let nidx = if size == 0 { 0 } else { rng.random_range(0..=4) };
        let raw: Vec<i64> = (0..nidx).map(|_| rng.random_range(0..size as i64)).collect();
        let pos: Vec<usize> = raw.iter().map(|&i| i as usize).collect();
        let idx_t = |v: &[i64], s: Vec<usize>| if i32_idx {
            Tensor::from_vec(v.iter().map(|&x| x as i32).collect::<Vec<_>>(), s).unwrap()
        } else {
            Tensor::from_vec(v.to_vec(), s).unwrap()
        };
        let id = if rng.random() { d as isize } else { d as isize - rank as isize };
        check("index_select", &t.index_select(id, &idx_t(&raw, vec![nidx])).unwrap(), &a.index_select(d, &pos), dt);

        // gather: the index may be smaller than the source in every dim but `d`.
        let ishape: Vec<usize> = (0..rank).map(|i| if i == d {
            if size == 0 { 0 } else { rng.random_range(0..=4) }
        } else {
            rng.random_range(0..=shape[i])
        }).collect();
        let gi: Vec<i64> = (0..numel(&ishape)).map(|_| rng.random_range(0..size.max(1) as i64)).collect();
        let gidx = Arr::new(&ishape, gi.iter().map(|&v| v as f64).collect());
        check("gather", &t.gather(id, &idx_t(&gi, ishape.clone())).unwrap(), &a.gather(d, &gidx), dt);

        // embedding: rows of a 2-D weight for ids of any shape.
        if rank == 2 && shape[0] > 0 {
            let ids_shape: Vec<usize> = (0..rng.random_range(0..=2)).map(|_| rng.random_range(0..=3)).collect();
            let ids: Vec<i64> = (0..numel(&ids_shape)).map(|_| rng.random_range(0..shape[0] as i64)).collect();
            let rows = a.index_select(0, &ids.iter().map(|&i| i as usize).collect::<Vec<_>>());
            let mut out_shape = ids_shape.clone();
            out_shape.push(shape[1]);
            check("embedding", &t.embedding(&idx_t(&ids, ids_shape)).unwrap(), &rows.reshape(&out_shape), dt);
        }
    }

    /// Out-of-place `scatter_add` and `index_add` on random shapes, views and dtypes (integers
    /// exact), with repeated indices, an index smaller than `src`, and an empty index; against
    /// a plain-loop reference. Bad shapes, dtypes and indices (past the end or negative) are
    /// typed errors.
    #[test]
    fn scatter_add_and_index_add_match_reference(
        shape in prop::collection::vec(dim(), 1..=3), steps in steps(), dt in dtype(),
        pick in any::<u8>(), extra in prop::collection::vec(0usize..=2, 3), seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (t, a) = input(&shape, &steps, dt, Dom::Grid, &mut rng);
        let rank = shape.len();
        let d = pick as usize % rank;
        let dim = if pick & 0x80 != 0 { d as isize - rank as isize } else { d as isize };
        let size = shape[d];
        let index_of = |rng: &mut StdRng, n: usize| -> Vec<i64> {
            (0..n).map(|_| rng.random_range(0..size as i64)).collect()
        };
        let norm = |i: i64| i as usize;

        // scatter_add: the index may be shorter than `self` off `dim`, any length at `dim`
        // (nothing when `dim` is empty), and `src` may be larger than the index.
        let mut ishape: Vec<usize> = shape.iter().map(|&s| s.saturating_sub(pick as usize >> 6 & 1)).collect();
        ishape[d] = if size == 0 { 0 } else { 1 + extra[0] + extra[1] };
        let sshape: Vec<usize> = ishape.iter().zip(&extra).map(|(&s, &e)| s + e % 2).collect();
        let ivals = index_of(&mut rng, numel(&ishape));
        let index = Tensor::from_vec(ivals.clone(), ishape.clone()).unwrap();
        let (src, sa) = input(&sshape, &[], dt, Dom::Grid, &mut rng);
        let mut want = a.clone();
        for (i, &v) in ivals.iter().enumerate() {
            let ix = reference::unravel(i, &ishape);
            let mut to = ix.clone();
            to[d] = norm(v);
            want.data[reference::ravel(&to, &shape)] += sa.data[reference::ravel(&ix, &sshape)];
        }
        let want = Arr::new(&shape, want.data.iter().map(|&v| round(dt, v)).collect());
        check("scatter_add", &t.scatter_add(dim, &index, &src).unwrap(), &want, dt);

        // index_add: a 1-D index of any length.
        let m = if size == 0 { 0 } else { extra[2] * 2 };
        let ivals = index_of(&mut rng, m);
        let index = Tensor::from_vec(ivals.clone(), [m]).unwrap();
        let mut sshape = shape.clone();
        sshape[d] = m;
        let (src, sa) = input(&sshape, &steps, dt, Dom::Grid, &mut rng);
        let mut want = a.clone();
        for i in 0..numel(&sshape) {
            let ix = reference::unravel(i, &sshape);
            let mut to = ix.clone();
            to[d] = norm(ivals[ix[d]]);
            want.data[reference::ravel(&to, &shape)] += sa.data[i];
        }
        let want = Arr::new(&shape, want.data.iter().map(|&v| round(dt, v)).collect());
        check("index_add", &t.index_add(dim, &index, &src).unwrap(), &want, dt);

        // Bad input.
        let other = if dt == F64 { F32 } else { F64 };
        let e = t.index_add(dim, &index, &src.to_dtype(other).unwrap()).unwrap_err();
        prop_assert!(matches!(e, Error::DTypeMismatch { op: "index_add", .. }), "{e}");
        let mut wrong = sshape.clone();
        wrong[d] += 1;
        let e = t.index_add(dim, &index, &Tensor::zeros(wrong, dt).unwrap()).unwrap_err();
        prop_assert!(matches!(e, Error::ShapeMismatch { op: "index_add", .. }), "{e}");
        let far = Tensor::from_vec(vec![size as i64], [1]).unwrap();
        let mut one = shape.clone();
        one[d] = 1;
        if (0..rank).all(|j| j == d || shape[j] > 0) {
            let e = t.scatter_add(dim, &far.reshape(vec![1; rank]).unwrap(), &Tensor::zeros(vec![1; rank], dt).unwrap()).unwrap_err();
            prop_assert!(matches!(e, Error::IndexOutOfRange { op: "scatter_add", index, .. } if index == size as i64), "{e}");
        }
        let e = t.index_add(dim, &far, &Tensor::zeros(one.clone(), dt).unwrap()).unwrap_err();
        prop_assert!(matches!(e, Error::IndexOutOfRange { op: "index_add", .. }), "{e}");
        // A negative index is out of range too, as in PyTorch.
        let neg = Tensor::from_vec(vec![-1i64], [1]).unwrap();
        let e = t.index_add(dim, &neg, &Tensor::zeros(one, dt).unwrap()).unwrap_err();
        prop_assert!(matches!(e, Error::IndexOutOfRange { op: "index_add", index: -1, .. }), "{e}");
        if (0..rank).all(|j| j == d || shape[j] > 0) {
            let e = t.scatter_add(dim, &neg.reshape(vec![1; rank]).unwrap(), &Tensor::zeros(vec![1; rank], dt).unwrap()).unwrap_err();
            prop_assert!(matches!(e, Error::IndexOutOfRange { op: "scatter_add", index: -1, .. }), "{e}");
        }
        let e = t.scatter_add(dim, &Tensor::zeros(vec![1; rank + 1], I64).unwrap(), &t).unwrap_err();
        prop_assert!(matches!(e, Error::ShapeMismatch { op: "scatter_add", .. }), "{e}");
        let e = t.scatter_add(dim, &Tensor::zeros(vec![1; rank], F32).unwrap(), &t).unwrap_err();
        prop_assert!(matches!(e, Error::UnsupportedDType { op: "scatter_add", .. }), "{e}");
    }
}

/// An index computed on the engine (its values unknown at the call) that points past the dim
/// fails the kernel; the error names the op and surfaces at the sync of the result only.
#[test]
fn an_out_of_range_scatter_index_fails_at_sync() {
    let x = Tensor::zeros([3], F32).unwrap();
    let idx = Tensor::from_vec(vec![0i64, 1], [2])
        .unwrap()
        .add_scalar(2)
        .unwrap();
    let src = Tensor::ones([2], F32).unwrap();
    let y = x.scatter_add(0, &idx, &src).unwrap();
    let e = y.to_vec::<f32>().unwrap_err().to_string();
    assert!(e.contains("scatter_add") && e.contains("index 3"), "{e}");
    let z = x.index_add(0, &idx, &src).unwrap();
    let e = z.to_vec::<f32>().unwrap_err().to_string();
    assert!(e.contains("index_add") && e.contains("index 3"), "{e}");
    assert_eq!(
        x.add_scalar(1.0).unwrap().to_vec::<f32>().unwrap(),
        [1.0; 3]
    );
}
