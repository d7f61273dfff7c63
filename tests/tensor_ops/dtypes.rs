//! Dtypes: casts between every pair, `bool` tensors and host data, integer arithmetic that
//! wraps (F13), and printing of values with their dtype.

use crate::common::reference::{build, cfg, check, dtype, round, shape, steps};
use eddy::tensor::{DType, Error, Tensor};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use DType::F32;

proptest! {
    #![proptest_config(cfg())]

    /// Casts between every pair of dtypes follow `as` (floats truncate toward zero and
    /// saturate into integers; anything non-zero is `true`).
    #[test]
    fn casts_match_reference(shape in shape(0..=3), steps in steps(), from in dtype(), to in dtype(), to_bool in any::<bool>(), seed in any::<u64>()) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (t, a) = build(&shape, &steps, from, &mut || rng.random_range(-300.0..300.0));
        let to = if to_bool { DType::Bool } else { to };
        check(&format!("{from} -> {to}"), &t.to_dtype(to).unwrap(), &a.map(|v| round(to, v)), to);
        // And back from bool.
        let b = t.ne_scalar(0.0).unwrap().to_dtype(from).unwrap();
        check("bool ->", &b, &a.map(|v| (v != 0.0) as u8 as f64), from);
    }

    /// `bool` host data round-trips through views (`from_vec` in, `to_vec::<bool>` out), and a
    /// bool tensor from host data behaves as one made by a comparison.
    #[test]
    fn bool_host_data_round_trips_through_views(shape in shape(0..=3), steps in steps(), seed in any::<u64>()) {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut draws = Vec::new();
        let (t, a) = build(&shape, &steps, DType::Bool, &mut || {
            let v = rng.random_range(0..3) as f64; // 0 false; 1 and 2 (stored as 1) true
            draws.push(v);
            v
        });
        let want: Vec<bool> = a.data.iter().map(|&v| v != 0.0).collect();
        prop_assert_eq!(&t.to_vec::<bool>().unwrap(), &want);
        // The same values entered as `bool`s, compared with the ones entered as `Bool8`.
        let base: Vec<bool> = draws.iter().map(|&v| v != 0.0).collect();
        let n = base.len();
        let u = Tensor::from_vec(base, [n]).unwrap();
        let eight = Tensor::from_vec(draws.iter().map(|&v| eddy::ops::Bool8(v as u8)).collect::<Vec<_>>(), [n]).unwrap();
        prop_assert!(u.eq(&eight).unwrap().all_all().unwrap().item::<bool>().unwrap());
        prop_assert_eq!(
            t.logical_not().unwrap().to_vec::<bool>().unwrap(),
            want.iter().map(|b| !b).collect::<Vec<_>>()
        );
    }
}

#[test]
fn bool_tensors_do_only_pytorchs_arithmetic() {
    let b = Tensor::ones([2], F32).unwrap().gt_scalar(0.0).unwrap();
    assert_eq!(b.dtype(), DType::Bool);
    assert!(matches!(
        b.neg(),
        Err(Error::UnsupportedDType {
            at: _,
            op: "neg",
            dtype: DType::Bool
        })
    ));
    assert!(matches!(
        b.sub(&b),
        Err(Error::UnsupportedDType { op: "sub", .. })
    ));
    // `+` of two bool tensors is `or`, as in PyTorch.
    assert_eq!(b.add(&b).unwrap().to_vec::<bool>().unwrap(), [true, true]);
    // Bool sums count the true elements.
    assert_eq!(b.sum_all().unwrap().to_vec::<i64>().unwrap(), vec![2]);
}

#[test]
fn bool_tensors_from_and_to_host_vectors() {
    let m = Tensor::from_vec(vec![true, false, false, true], [2, 2]).unwrap();
    assert_eq!(m.dtype(), DType::Bool);
    assert_eq!(
        m.t().unwrap().to_vec2::<bool>().unwrap(),
        vec![vec![true, false], vec![false, true]]
    );
    assert!(Tensor::scalar(true).unwrap().item::<bool>().unwrap());
    assert_eq!(m.sum_all().unwrap().item::<i64>().unwrap(), 2);
    // A host mask drives masked_fill as a computed one does.
    let x = Tensor::arange(0.0, 4.0, 1.0, F32)
        .unwrap()
        .reshape([2, 2])
        .unwrap();
    let filled = x.masked_fill(&m, -1.0).unwrap();
    assert_eq!(filled.to_vec::<f32>().unwrap(), vec![-1.0, 1.0, 2.0, -1.0]);
    // The storage type reads back the same values, as 0 and 1 even when given other bytes.
    let eight = Tensor::from_vec(vec![eddy::ops::Bool8(0), eddy::ops::Bool8(7)], [2]).unwrap();
    assert_eq!(eight.to_vec::<bool>().unwrap(), vec![false, true]);
    assert_eq!(
        eight.to_vec::<eddy::ops::Bool8>().unwrap(),
        vec![eddy::ops::Bool8(0), eddy::ops::Bool8(1)]
    );
    assert!(
        eight
            .eq(&Tensor::from_vec(vec![false, true], [2]).unwrap())
            .unwrap()
            .all_all()
            .unwrap()
            .item::<bool>()
            .unwrap()
    );
    // Typed errors: the wrong dtype either way, and a custom kernel over `bool`.
    assert!(matches!(
        x.to_vec::<bool>(),
        Err(Error::DTypeMismatch {
            at: _,
            op: "to_vec",
            lhs: F32,
            rhs: DType::Bool
        })
    ));
    assert!(matches!(
        m.to_vec::<u8>(),
        Err(Error::DTypeMismatch { op: "to_vec", .. })
    ));
    let custom = Tensor::custom_map::<bool, _>("flip_bits", &[&m], [2, 2], |i, o| {
        o.copy_from_slice(i[0]);
        Ok(())
    });
    assert!(matches!(
        custom,
        Err(Error::InvalidArgument {
            op: "flip_bits",
            ..
        })
    ));
    // Empty bool tensors.
    let e = Tensor::from_vec(Vec::<bool>::new(), [0, 3]).unwrap();
    assert_eq!(e.to_vec::<bool>().unwrap(), Vec::<bool>::new());
}

#[test]
fn integer_arithmetic_wraps_as_documented() {
    let t = Tensor::from_vec(vec![i32::MAX, i32::MIN], [2]).unwrap();
    assert_eq!(
        t.add_scalar(1).unwrap().to_vec::<i32>().unwrap(),
        vec![i32::MIN, i32::MIN + 1]
    );
    assert_eq!(
        t.neg().unwrap().to_vec::<i32>().unwrap(),
        vec![-i32::MAX, i32::MIN]
    );
    let u = Tensor::from_vec(vec![i64::MAX], [1]).unwrap();
    assert_eq!(u.mul(&u).unwrap().to_vec::<i64>().unwrap(), vec![1]);
    // Integer division is true division.
    let a = Tensor::from_vec(vec![7i64, -7], [2]).unwrap();
    let q = a
        .div(&Tensor::from_vec(vec![2i64, 2], [2]).unwrap())
        .unwrap();
    assert_eq!(
        (q.dtype(), q.to_vec::<f32>().unwrap()),
        (F32, vec![3.5, -3.5])
    );
}

#[test]
fn display_prints_values_and_dtype() {
    let t = Tensor::from_vec(vec![1f32, 2.5], [2]).unwrap();
    let s = t.to_string();
    assert!(
        s.contains("1.0000") && s.contains("2.5000") && s.contains("f32"),
        "{s}"
    );
    let b = Tensor::from_vec(vec![1i64, 0], [1, 2])
        .unwrap()
        .ne_scalar(0.0)
        .unwrap();
    let s = b.to_string();
    assert!(s.contains("True") && s.contains("False"), "{s}");
}
