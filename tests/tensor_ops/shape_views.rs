//! Views, joins and splits against the reference (F4): chains of view ops and which results
//! share storage, `cat` and `stack`, `split`, `chunk` and `unbind`, `masked_fill`, `tril`/`triu`
//! and `flip`; in-place ops through views and on aliasing sources; views of small ranks and
//! `flatten` as PyTorch.

use crate::common::reference::{
    self, Arr, Dom, R, Step, cfg, check, derive, dim, dtype, f32s, input, numel, operand, round,
    sample, shape, steps, tensor,
};
use eddy::ops::{Elem, dispatch};
use eddy::tensor::{DType, Error, Scalar, Tensor};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use DType::{F32, F64, I64};

proptest! {
    #![proptest_config(cfg())]

    /// `cat` of 1..=3 non-contiguous parts along any dim, and `stack`.
    #[test]
    fn cat_and_stack_match_reference(
        shape in shape(1..=3), parts in prop::collection::vec((dim(), steps()), 1..=3),
        d in 0usize..4, dt in dtype(), seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let rank = shape.len();
        let d = d % rank;
        let built: Vec<(Tensor, Arr)> = parts.iter().map(|(n, st)| {
            let mut s = shape.clone();
            s[d] = *n;
            input(&s, st, dt, Dom::Any, &mut rng)
        }).collect();
        let ts: Vec<&Tensor> = built.iter().map(|p| &p.0).collect();
        let arrs: Vec<Arr> = built.iter().map(|p| p.1.clone()).collect();
        check("cat", &Tensor::cat(&ts, d as isize - rank as isize).unwrap(), &Arr::cat(&arrs, d), dt);

        let same: Vec<(Tensor, Arr)> = parts.iter().map(|(_, st)| input(&shape, st, dt, Dom::Any, &mut rng)).collect();
        let ts: Vec<&Tensor> = same.iter().map(|p| &p.0).collect();
        let sd = d % (rank + 1);
        let arrs: Vec<Arr> = same.iter().map(|p| {
            let mut s = shape.clone();
            s.insert(sd, 1);
            p.1.reshape(&s)
        }).collect();
        check("stack", &Tensor::stack(&ts, sd as isize).unwrap(), &Arr::cat(&arrs, sd), dt);
    }

    /// Chains of view ops on non-contiguous inputs: values, shapes, and which results share
    /// storage with their input.
    #[test]
    fn views_match_reference(
        shape in shape(0..=3), steps in steps(), ops in prop::collection::vec((0usize..14, any::<u64>()), 1..=4),
        dt in dtype(), seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (mut t, mut a) = input(&shape, &steps, dt, Dom::Any, &mut rng);
        for (op, p) in ops {
            let rank = a.rank();
            let pick = |k: u64, n: usize| (p >> (8 * k)) as usize % n.max(1);
            let (nt, na, shares): (Tensor, Arr, Option<bool>) = match op {
                0 => {
                    // reshape to a regrouping with the same element count
                    let n = numel(&a.shape);
                    let target: Vec<usize> = match pick(0, 4) {
                        0 => vec![n],
                        1 => a.shape.iter().rev().cloned().collect(),
                        2 => { let mut s = a.shape.clone(); s.insert(pick(1, rank + 1), 1); s }
                        _ if rank >= 2 => { let mut s = vec![a.shape[0] * a.shape[1]]; s.extend(&a.shape[2..]); s }
                        _ => vec![],
                    };
                    if numel(&target) != n {
                        assert!(matches!(t.reshape(target.clone()), Err(Error::ElementCountMismatch { .. })));
                        continue;
                    }
                    let contig = t.is_contiguous();
                    (t.reshape(target.clone()).unwrap(), a.reshape(&target), Some(contig))
                }
                1 if rank >= 1 => {
                    let (i, j) = (pick(0, rank), pick(1, rank));
                    (t.transpose(i as isize - rank as isize, j as isize).unwrap(), a.transpose(i, j), Some(true))
                }
                2 => {
                    let mut perm: Vec<usize> = (0..rank).collect();
                    for i in (1..rank).rev() { perm.swap(i, pick(i as u64, i + 1)); }
                    let ip: Vec<isize> = perm.iter().map(|&x| x as isize).collect();
                    (t.permute(&ip).unwrap(), a.permute(&perm), Some(true))
                }
                3 => {
                    if rank < 2 {
                        // A 0-d or 1-d tensor is its own transpose, as in PyTorch.
                        (t.t().unwrap(), a.clone(), Some(true))
                    } else {
                        (t.t().unwrap(), a.transpose(rank - 2, rank - 1), Some(true))
                    }
                }
                4 | 5 if rank >= 1 => {
                    let d = pick(0, rank);
                    let size = a.shape[d];
                    let start = pick(1, size + 1);
                    let len = pick(2, size - start + 1);
                    let v = if op == 4 { t.narrow(d as isize, start, len) } else { t.slice(d as isize, start..start + len) };
                    (v.unwrap(), a.narrow(d, start, len), Some(true))
                }
                6 if rank >= 1 && a.shape[pick(0, rank)] > 0 => {
                    let d = pick(0, rank);
                    let i = pick(1, a.shape[d]);
                    let mut s = a.shape.clone();
                    s.remove(d);
                    (t.select(d as isize, i).unwrap(), a.narrow(d, i, 1).reshape(&s), Some(true))
                }
                7 if rank >= 1 => {
                    let d = pick(0, rank);
                    let mut s = a.shape.clone();
                    if s[d] == 1 { s.remove(d); }
                    (t.squeeze(d as isize).unwrap(), a.reshape(&s), Some(true))
                }
                8 => {
                    let d = pick(0, rank + 1);
                    let mut s = a.shape.clone();
                    s.insert(d, 1);
                    let id = if pick(1, 2) == 0 { d as isize } else { d as isize - rank as isize - 1 };
                    (t.unsqueeze(id).unwrap(), a.reshape(&s), Some(true))
                }
                9 => {
                    // expand size-1 dims (to 0..=3) and maybe prepend one
                    let mut s: Vec<usize> = a.shape.iter().enumerate()
                        .map(|(i, &x)| if x == 1 { pick(i as u64, 4) } else { x }).collect();
                    if pick(5, 2) == 1 { s.insert(0, pick(6, 3)); }
                    let v = if pick(7, 2) == 0 { t.broadcast_to(s.clone()) } else { t.expand(s.clone()) };
                    (v.unwrap(), a.broadcast_to(&s), Some(true))
                }
                10 => {
                    let c = t.contiguous().unwrap();
                    prop_assert!(c.is_contiguous());
                    let was = t.is_contiguous();
                    (c, a.clone(), Some(was))
                }
                11 => {
                    let n = numel(&a.shape);
                    (t.flatten_all().unwrap(), a.reshape(&[n]), None)
                }
                12 => {
                    let n = numel(&a.shape);
                    if !t.is_contiguous() {
                        assert!(matches!(t.view([n]), Err(Error::InvalidArgument { op: "view", .. })));
                        continue;
                    }
                    (t.view([n]).unwrap(), a.reshape(&[n]), Some(true))
                }
                13 if rank == 2 => {
                    let rows = t.to_f64_vec().unwrap();
                    let v2 = dispatch!(dt, T => t.to_vec2::<T>().unwrap().into_iter().map(|r| r.into_iter().map(Elem::to_f64).collect::<Vec<_>>()).collect::<Vec<_>>());
                    prop_assert_eq!(v2.len(), a.shape[0]);
                    prop_assert_eq!(v2.concat(), rows);
                    continue;
                }
                _ => continue,
            };
            check(&format!("view op {op} -> {:?}", na.shape), &nt, &na, dt);
            if let Some(s) = shares {
                prop_assert_eq!(nt.shares_storage(&t), s, "view op {} storage sharing", op);
            }
            t = nt;
            a = na;
        }
    }

    /// In-place ops through views (transposed, narrowed; expanded views are refused) with
    /// broadcast sources: the base sees exactly the writes the view's elements map to.
    #[test]
    fn inplace_ops_through_views_match_reference(
        base_shape in shape(1..=3), vsteps in steps(), src in operand(), op in 0usize..10,
        dt in prop_oneof![Just(F32), Just(F64), Just(I64)], seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let base_a = Arr::new(&base_shape, (0..numel(&base_shape)).map(|_| round(dt, sample(&mut rng, Dom::Any, dt))).collect());
        let base = tensor(&base_a, dt);
        // Apply the view steps forwards, to the tensor and to a map of base positions.
        let mut v = base.clone();
        let mut ids = Arr::new(&base_shape, (0..numel(&base_shape)).map(|i| i as f64).collect());
        for st in &vsteps {
            let rank = ids.rank();
            match *st {
                Step::T(i, j) if rank >= 2 => {
                    let (i, j) = (i % rank, j % rank);
                    v = v.transpose(i as isize, j as isize).unwrap();
                    ids = ids.transpose(i, j);
                }
                Step::N(d, p, q) => {
                    let d = d % rank;
                    let size = ids.shape[d];
                    let start = p.min(size);
                    let len = (size - start).saturating_sub(q);
                    v = v.narrow(d as isize, start, len).unwrap();
                    ids = ids.narrow(d, start, len);
                }
                Step::B(mask) => {
                    let mut s: Vec<usize> = ids.shape.iter().enumerate()
                        .map(|(i, &x)| if x == 1 && mask >> i & 1 == 1 { 2 } else { x }).collect();
                    if mask & 0x80 != 0 { s.insert(0, 2); }
                    v = v.broadcast_to(s.clone()).unwrap();
                    ids = ids.broadcast_to(&s);
                }
                _ => {}
            }
        }
        let vshape = ids.shape.clone();
        let sdom = if op == 3 { Dom::NonZero } else { Dom::Any };
        let (s, sa) = input(&derive(&vshape, src.0, src.1), &src.2, dt, sdom, &mut rng);
        let sb = sa.broadcast_to(&vshape);
        // The scalar ops take the number's kind: a float one, whole or not, is refused for an
        // integer tensor (`add_scaled_`'s factor refuses only a fraction).
        let sc = [Scalar::Int(2), Scalar::Float(-0.5), Scalar::Float(3.0)][seed as usize % 3];
        let c = sc.to_f64();
        type F = Box<dyn Fn(f64, f64) -> f64>;
        let (r, f, float_only): (R<Tensor>, F, bool) = match op {
            0 => (v.add_(&s), Box::new(|d, x| d + x), false),
            1 => (v.sub_(&s), Box::new(|d, x| d - x), false),
            2 => (v.mul_(&s), Box::new(|d, x| d * x), false),
            3 => (v.div_(&s), Box::new(|d, x| d / x), true),
            4 => (v.copy_(&s), Box::new(|_, x| x), false),
            5 => (v.fill_(c), Box::new(move |_, _| c), false),
            6 => (v.zero_(), Box::new(|_, _| 0.0), false),
            7 => (v.add_scaled_(&s, c), Box::new(move |d, x| d + c * x), c.fract() != 0.0),
            8 => (v.mul_scalar_(sc), Box::new(move |d, _| d * c), sc.is_float()),
            _ => (v.add_scalar_(sc), Box::new(move |d, _| d + c), sc.is_float()),
        };
        let mut seen = std::collections::HashSet::new();
        let overlapping = ids.data.iter().any(|&i| !seen.insert(i as usize));
        let mut want = base_a.clone();
        if overlapping {
            assert!(matches!(r, Err(Error::OverlappingWrite { .. })), "write into an expanded view: {:?}", r);
        } else if ids.data.is_empty() && matches!(r, Err(Error::OverlappingWrite { .. })) {
            // An expanded view without elements: refusing it is fine too.
        } else if float_only && !dt.is_float() {
            assert!(matches!(r, Err(Error::DTypeMismatch { lhs: DType::I64, .. })), "float result into i64: {:?}", r);
        } else {
            prop_assert!(r.is_ok(), "op {}: {:?}", op, r.err());
            for (k, &i) in ids.data.iter().enumerate() {
                let i = i as usize;
                want.data[i] = round(dt, f(want.data[i], sb.data[k]));
            }
        }
        check(&format!("base after in-place op {op}"), &base, &want, dt);
        let through_view = Arr::new(&vshape, ids.data.iter().map(|&i| want.data[i as usize]).collect());
        check(&format!("view after in-place op {op}"), &v, &through_view, dt);
    }

    /// `masked_fill`, `tril`/`triu`, `flip` and `split`/`split_sizes`/`chunk`/`unbind` on
    /// random views and dtypes, against plain loops.
    #[test]
    fn masks_flips_and_splits_match_reference(
        shape in shape(0..=3), steps in steps(), dt in dtype(), pick in any::<u8>(),
        diag in -3i64..=3, size in 0usize..=3, seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (t, a) = input(&shape, &steps, dt, Dom::Grid, &mut rng);
        let rank = shape.len();

        // masked_fill with a mask over the trailing dims (it broadcasts).
        let mshape: Vec<usize> = shape[rank.min(pick as usize % 2)..].to_vec();
        let mbits: Vec<bool> = (0..numel(&mshape)).map(|_| rng.random()).collect();
        let m = Tensor::from_vec(mbits.iter().map(|&b| b as i64).collect::<Vec<_>>(), mshape.clone())
            .unwrap()
            .gt_scalar(0.0)
            .unwrap();
        let fill = -7.0;
        let want = Arr::from_fn(&shape, |ix| {
            let mi = &ix[rank - mshape.len()..];
            if mbits[reference::ravel(mi, &mshape)] { fill } else { a.data[reference::ravel(ix, &shape)] }
        });
        check("masked_fill", &t.masked_fill(&m, fill).unwrap(), &want, dt);
        let e = t.masked_fill(&t, fill);
        if dt != DType::Bool {
            prop_assert!(matches!(e, Err(Error::UnsupportedDType { op: "masked_fill", .. })), "{e:?}");
        }
        if rank >= 1 {
            let mut wide = shape.clone();
            wide[0] += 2;
            let r = t.masked_fill(&Tensor::zeros(wide.clone(), DType::Bool).unwrap(), fill);
            if shape[0] == 1 {
                // Out of place, `self` broadcasts to a larger mask, as in PyTorch.
                prop_assert_eq!(r.unwrap().dims().to_vec(), wide);
            } else {
                let e = r.unwrap_err();
                prop_assert!(matches!(e, Error::ShapeMismatch { op: "masked_fill", .. }), "{e}");
            }
        }

        // tril / triu.
        if rank >= 2 {
            for (op, lower) in [("tril", true), ("triu", false)] {
                let want = Arr::from_fn(&shape, |ix| {
                    let (i, j) = (ix[rank - 2] as i64, ix[rank - 1] as i64);
                    let keep = if lower { j - i <= diag } else { j - i >= diag };
                    if keep { a.data[reference::ravel(ix, &shape)] } else { 0.0 }
                });
                let got = if lower { t.tril(diag) } else { t.triu(diag) }.unwrap();
                check(op, &got, &want, dt);
            }
        } else {
            assert!(matches!(t.tril(diag), Err(Error::InvalidArgument { op: "tril", .. })));
            assert!(matches!(t.triu(diag), Err(Error::InvalidArgument { op: "triu", .. })));
        }

        // flip over a random set of dims (negative names too).
        let fl: Vec<usize> = (0..rank).filter(|&d| pick >> (d + 2) & 1 == 1).collect();
        let names: Vec<isize> = fl.iter().map(|&d| if pick & 1 == 1 { d as isize - rank as isize } else { d as isize }).collect();
        let want = Arr::from_fn(&shape, |ix| {
            let mut src = ix.to_vec();
            for &d in &fl {
                src[d] = shape[d] - 1 - ix[d];
            }
            a.data[reference::ravel(&src, &shape)]
        });
        let got = t.flip(&names).unwrap();
        check("flip", &got, &want, dt);
        prop_assert!(got.is_contiguous() && !got.shares_storage(&t));
        if let Some(&d) = names.first() {
            let e = t.flip(&[d, d]).unwrap_err();
            prop_assert!(matches!(e, Error::InvalidArgument { op: "flip", .. }), "{e}");
        }

        // Pieces along a dim put back together give the input.
        if rank >= 1 {
            let d = pick as usize % rank;
            let n = shape[d];
            let join = |parts: &[Tensor]| {
                let refs: Vec<&Tensor> = parts.iter().collect();
                Tensor::cat(&refs, d as isize).unwrap()
            };
            if size > 0 || n == 0 {
                let parts = t.split(size, d as isize).unwrap();
                prop_assert!(parts.iter().all(|p| p.dims()[d] <= size));
                check("split", &join(&parts), &a, dt);
            } else {
                assert!(matches!(t.split(0, d as isize), Err(Error::InvalidArgument { op: "split", .. })));
            }
            let sizes = [n / 3, n - n / 3];
            check("split_sizes", &join(&t.split_sizes(&sizes, d as isize).unwrap()), &a, dt);
            assert!(matches!(t.split_sizes(&[n + 1], d as isize), Err(Error::InvalidArgument { .. })));
            let c = t.chunk(size + 1, d as isize).unwrap();
            prop_assert!(c.len() <= size + 1);
            check("chunk", &join(&c), &a, dt);
            let u = t.unbind(d as isize).unwrap();
            prop_assert_eq!(u.len(), n);
            if n > 0 {
                let us: Vec<Tensor> = u.iter().map(|p| p.unsqueeze(d as isize).unwrap()).collect();
                check("unbind", &join(&us), &a, dt);
            }
        }
    }
}

#[test]
fn in_place_ops_read_their_source_before_writing_when_it_aliases() {
    // x += xᵀ: every element of the source is the old value.
    let x = Tensor::from_vec(vec![1f32, 2., 3., 4.], [2, 2]).unwrap();
    x.add_(&x.t().unwrap()).unwrap();
    assert_eq!(f32s(&x), vec![2., 5., 5., 8.]);
    // An overlapping shift (memmove semantics).
    let y = Tensor::arange(0.0, 5.0, 1.0, F32).unwrap();
    y.narrow(0, 1, 4)
        .unwrap()
        .copy_(&y.narrow(0, 0, 4).unwrap())
        .unwrap();
    assert_eq!(f32s(&y), vec![0., 0., 1., 2., 3.]);
    let z = Tensor::arange(0.0, 5.0, 1.0, F32).unwrap();
    z.narrow(0, 0, 4)
        .unwrap()
        .mul_(&z.narrow(0, 1, 4).unwrap())
        .unwrap();
    assert_eq!(f32s(&z), vec![0., 2., 6., 12., 4.]);
    // In-place ops return `self`, sharing storage.
    let r = z.mul_scalar_(2.0).unwrap();
    assert!(r.shares_storage(&z));
    assert_eq!(f32s(&r), vec![0., 4., 12., 24., 8.]);
}

/// Views of 0-d and 1-d tensors and of empty dims, as PyTorch: `t` returns a 0-d or 1-d tensor
/// as it is; `squeeze` and `transpose` take dim 0 or -1 of a 0-d tensor; `chunk` of an empty
/// dim gives `chunks` empty pieces.
#[test]
fn views_of_small_ranks_and_empty_dims_match_pytorch() {
    let v = Tensor::from_vec(vec![1f32, 2., 3.], [3]).unwrap();
    let vt = v.t().unwrap();
    assert_eq!(vt.dims(), &[3]);
    assert!(vt.shares_storage(&v));
    let s = Tensor::scalar(5f32).unwrap();
    assert_eq!(s.t().unwrap().item::<f32>().unwrap(), 5.0);
    for d in [0, -1] {
        assert_eq!(s.squeeze(d).unwrap().dims(), &[] as &[usize]);
        assert_eq!(s.transpose(d, 0).unwrap().item::<f32>().unwrap(), 5.0);
    }
    assert!(matches!(s.squeeze(1), Err(Error::InvalidDim { .. })));
    assert!(matches!(s.transpose(0, 1), Err(Error::InvalidDim { .. })));
    // The gradient flows through a 0-d transpose.
    let x = Tensor::scalar(3f32).unwrap().requires_grad_(true).unwrap();
    x.transpose(0, 0)
        .unwrap()
        .mul_scalar(2.0)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(x.grad().unwrap().item::<f32>().unwrap(), 2.0);
    let e = Tensor::zeros([0, 2], F32).unwrap();
    let parts = e.chunk(3, 0).unwrap();
    assert_eq!(parts.len(), 3);
    assert!(parts.iter().all(|p| p.dims() == [0, 2]));
    assert_eq!(e.chunk(3, 1).unwrap().len(), 2); // a non-empty dim: as before
    let huge = e.chunk(usize::MAX, 0).unwrap_err();
    assert!(huge.to_string().contains("chunk"), "{huge}");
}

/// `flatten(start, end)` merges dims `start..=end` as PyTorch: negative dims count from the end,
/// a 0-d tensor becomes 1-d, a contiguous tensor gives a view, and the gradient flows back in
/// the input's shape.
#[test]
fn flatten_merges_a_range_of_dims_as_pytorch() {
    let t = Tensor::arange(0.0, 24.0, 1.0, F32)
        .unwrap()
        .reshape([2, 3, 4])
        .unwrap();
    let cases: [(isize, isize, &[usize]); 5] = [
        (0, -1, &[24]),
        (1, 2, &[2, 12]),
        (0, 1, &[6, 4]),
        (-1, -1, &[2, 3, 4]),
        (1, 1, &[2, 3, 4]),
    ];
    for (s, e, want) in cases {
        let f = t.flatten(s, e).unwrap();
        assert_eq!(f.dims(), want, "flatten({s}, {e})");
        assert!(f.shares_storage(&t));
        assert_eq!(
            f.flatten_all().unwrap().to_vec::<f32>().unwrap(),
            t.to_vec::<f32>().unwrap()
        );
    }
    // A transposed input is copied in its logical order.
    let tt = t.transpose(0, 2).unwrap().flatten(0, 1).unwrap();
    assert_eq!(tt.dims(), &[12, 2]);
    assert_eq!(tt.to_vec2::<f32>().unwrap()[1], [4.0, 16.0]);
    let s = Tensor::scalar(7f32).unwrap();
    for (a, b) in [(0, 0), (0, -1), (-1, -1)] {
        assert_eq!(s.flatten(a, b).unwrap().to_vec::<f32>().unwrap(), [7.0]);
    }
    assert!(matches!(
        s.flatten(0, 1),
        Err(Error::InvalidDim { op: "flatten", .. })
    ));
    assert!(matches!(
        t.flatten(0, 3),
        Err(Error::InvalidDim {
            at: _,
            op: "flatten",
            dim: 3,
            rank: 3
        })
    ));
    assert!(matches!(
        t.flatten(-4, 0),
        Err(Error::InvalidDim {
            op: "flatten",
            dim: -4,
            ..
        })
    ));
    let after = t.flatten(2, 1).unwrap_err();
    assert!(
        matches!(after, Error::InvalidArgument { op: "flatten", .. }),
        "{after}"
    );
    assert!(
        after
            .to_string()
            .contains("start_dim 2 comes after end_dim 1"),
        "{after}"
    );
    // Beside a dim of size 0 the merged size can overflow; it is refused, not wrapped.
    let big = 1usize << 40;
    let e = Tensor::zeros([0, 1], F32)
        .unwrap()
        .expand([0, big])
        .unwrap();
    let e = e.unsqueeze(2).unwrap().expand([0, big, big]).unwrap();
    let over = e.flatten(1, 2).unwrap_err();
    assert!(
        matches!(over, Error::InvalidArgument { op: "flatten", .. }),
        "{over}"
    );
    // The gradient comes back in the input's shape.
    let x = Tensor::ones([2, 3, 4], F32)
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    x.flatten(1, 2)
        .unwrap()
        .mul_scalar(3.0)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    let g = x.grad().unwrap();
    assert_eq!(g.dims(), &[2, 3, 4]);
    assert!(g.to_vec::<f32>().unwrap().iter().all(|&v| v == 3.0));
}

/// A large permuted view made contiguous (and cast on the way), the rows of the source read as
/// slices: every element lands where index arithmetic puts it, with the work split over the
/// kernel threads at starts inside rows.
#[test]
fn permuted_rows_copy_to_their_places() {
    let dims = [3usize, 50, 7, 41];
    let n: usize = dims.iter().product();
    let vals: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let x = Tensor::from_vec(vals.clone(), dims).unwrap();
    for dt in [F64, F32] {
        let x = x.to_dtype(dt).unwrap();
        // [3, 7, 50, 41]: the heads of a batch of rows; its last dim stays contiguous.
        let y = x.transpose(1, 2).unwrap().contiguous().unwrap();
        let z = x.transpose(1, 2).unwrap().to_dtype(F64).unwrap();
        let want: Vec<f64> = (0..n)
            .map(|i| {
                let (d, r) = (i % 41, i / 41);
                let (b, r) = (r % 50, r / 50);
                let (c, a) = (r % 7, r / 7);
                vals[((a * 50 + b) * 7 + c) * 41 + d]
            })
            .collect();
        assert_eq!(
            y.to_dtype(F64).unwrap().to_vec::<f64>().unwrap(),
            want,
            "{dt}"
        );
        assert_eq!(z.to_vec::<f64>().unwrap(), want, "{dt} cast");
    }
}
