//! Integer edge cases (F13): comparisons with out-of-range scalars, out-of-range `clamp`
//! bounds, `pow`, fill values past the dtype, and printing of large integers.

use crate::{fails_at_call, on, private};
use eddy::tensor::{DType, Error, Tensor};

use DType::{F16, F32, F64, I64};

/// An integral scalar outside an integer (or bool) dtype's range is compared as it is, not
/// clamped into the range first.
#[test]
fn integer_comparisons_with_out_of_range_scalars() {
    let u = Tensor::from_vec(vec![255u8, 0], [2]).unwrap();
    assert_eq!(
        u.eq_scalar(256).unwrap().to_vec::<bool>().unwrap(),
        [false, false]
    );
    assert_eq!(
        u.eq_scalar(-1).unwrap().to_vec::<bool>().unwrap(),
        [false, false]
    );
    assert_eq!(
        u.lt_scalar(256).unwrap().to_vec::<bool>().unwrap(),
        [true, true]
    );
    assert_eq!(
        u.gt_scalar(-1).unwrap().to_vec::<bool>().unwrap(),
        [true, true]
    );
    assert_eq!(
        u.eq_scalar(255).unwrap().to_vec::<bool>().unwrap(),
        [true, false]
    );
    let i = Tensor::from_vec(vec![i32::MAX, i32::MIN], [2]).unwrap();
    assert_eq!(
        i.lt_scalar(3_000_000_000i64)
            .unwrap()
            .to_vec::<bool>()
            .unwrap(),
        [true, true]
    );
    assert_eq!(
        i.ge_scalar(-3_000_000_000i64)
            .unwrap()
            .to_vec::<bool>()
            .unwrap(),
        [true, true]
    );
    let l = Tensor::from_vec(vec![i64::MAX, i64::MIN], [2]).unwrap();
    assert_eq!(
        l.lt_scalar(1e19).unwrap().to_vec::<bool>().unwrap(),
        [true, true]
    );
    assert_eq!(
        l.ne_scalar(-1e19).unwrap().to_vec::<bool>().unwrap(),
        [true, true]
    );
    let b = Tensor::from_vec(vec![true, false], [2]).unwrap();
    assert_eq!(
        b.eq_scalar(2).unwrap().to_vec::<bool>().unwrap(),
        [false, false]
    );
    assert_eq!(
        b.eq_scalar(1).unwrap().to_vec::<bool>().unwrap(),
        [true, false]
    );
}

/// Integer `clamp` saturates bounds outside the dtype's range instead of wrapping them.
#[test]
fn integer_clamp_with_out_of_range_bounds() {
    let u = Tensor::from_vec(vec![5u8, 200], [2]).unwrap();
    assert_eq!(u.clamp_max(-1).unwrap().to_vec::<u8>().unwrap(), [0, 0]);
    assert_eq!(
        u.clamp_min(300).unwrap().to_vec::<u8>().unwrap(),
        [255, 255]
    );
    assert_eq!(
        u.clamp(Some(10), Some(100))
            .unwrap()
            .to_vec::<u8>()
            .unwrap(),
        [10, 100]
    );
    let i = Tensor::from_vec(vec![0i32, -7], [2]).unwrap();
    assert_eq!(
        i.clamp_min(3_000_000_000i64)
            .unwrap()
            .to_vec::<i32>()
            .unwrap(),
        [i32::MAX, i32::MAX]
    );
    assert_eq!(
        i.clamp_max(-3_000_000_000i64)
            .unwrap()
            .to_vec::<i32>()
            .unwrap(),
        [i32::MIN, i32::MIN]
    );
}

/// Integer `pow`: negative exponents truncate toward zero, the parity of an exponent beyond
/// `u32` is kept, and `0` to a negative power is an error at the next sync.
#[test]
fn integer_pow_edges() {
    let x = Tensor::from_vec(vec![1i64, -1, -1, 2, -3, -1, -1], [7]).unwrap();
    let y = Tensor::from_vec(vec![-1i64, -1, -2, -1, -5, 1 << 32, (1 << 32) + 1], [7]).unwrap();
    assert_eq!(
        x.pow(&y).unwrap().to_vec::<i64>().unwrap(),
        [1, -1, 1, 0, 0, 1, -1]
    );
    // Wrapping, as the other integer ops: 3^41 mod 2^64, and the same in i32.
    let big = 3i64.wrapping_pow(41);
    let p = Tensor::from_vec(vec![3i64], [1])
        .unwrap()
        .pow(&Tensor::from_vec(vec![41i64], [1]).unwrap())
        .unwrap();
    assert_eq!(p.to_vec::<i64>().unwrap(), [big]);
    let p32 = Tensor::from_vec(vec![3i32], [1])
        .unwrap()
        .pow(&Tensor::from_vec(vec![41i32], [1]).unwrap())
        .unwrap();
    assert_eq!(p32.to_vec::<i32>().unwrap(), [3i32.wrapping_pow(41)]);
    let z = Tensor::from_vec(vec![0i64, 2], [2])
        .unwrap()
        .pow(&Tensor::from_vec(vec![-1i64, 1], [2]).unwrap())
        .unwrap();
    let e = z.to_vec::<i64>().unwrap_err();
    assert!(e.to_string().contains("negative"), "{e}");

    // `pow_scalar` with a whole exponent stays integer and wraps the same way, also for an
    // exponent past the dtype's range (as `x ** c` in PyTorch, whose exponent is a Python int).
    fn wrapping_pow(b: i128, e: u64, bits: u32) -> i128 {
        let m = 1i128 << bits;
        let (mut acc, mut b, mut e) = (1i128, b.rem_euclid(m), e);
        while e > 0 {
            if e & 1 == 1 {
                acc = acc * b % m;
            }
            b = b * b % m;
            e >>= 1;
        }
        acc
    }
    let i = Tensor::from_vec(vec![3i64, -2, 0, 7], [4]).unwrap();
    let want: Vec<i64> = [3i64, -2, 0, 7]
        .iter()
        .map(|&b| b.wrapping_pow(41))
        .collect();
    assert_eq!(i.pow_scalar(41).unwrap().to_vec::<i64>().unwrap(), want);
    assert_eq!(
        i.pow_scalar(0).unwrap().to_vec::<i64>().unwrap(),
        [1, 1, 1, 1]
    );
    let u = Tensor::from_vec(vec![3u8, 2, 255, 0, 1], [5]).unwrap();
    for e in [5u64, 255, 256, 300, 1 << 40] {
        let want: Vec<u8> = [3u8, 2, 255, 0, 1]
            .iter()
            .map(|&b| wrapping_pow(b as i128, e, 8) as u8)
            .collect();
        let got = u.pow_scalar(e as i64).unwrap();
        assert_eq!(got.to_vec::<u8>().unwrap(), want, "u8 ^ {e}");
    }
    let w = Tensor::from_vec(vec![3i32, -3, 2, -1, 5], [5]).unwrap();
    for e in [31u64, 1 << 31, (1 << 40) + 1, (1 << 53) - 1] {
        let want: Vec<i32> = [3i32, -3, 2, -1, 5]
            .iter()
            .map(|&b| wrapping_pow(b as i128, e, 32) as u32 as i32)
            .collect();
        let got = w.pow_scalar(e as i64).unwrap();
        assert_eq!(got.to_vec::<i32>().unwrap(), want, "i32 ^ {e}");
    }
    // A float exponent (whole or not) computes in f32; a negative integer one is refused at
    // the call.
    let f = i.pow_scalar(0.5).unwrap();
    assert_eq!(f.dtype(), F32);
    assert_eq!(i.pow_scalar(2.0).unwrap().dtype(), F32);
    assert!(
        matches!(
            i.pow_scalar(-1),
            Err(Error::InvalidArgument {
                op: "pow_scalar",
                ..
            })
        ),
        "integers to a negative power"
    );
}

/// Fill values as PyTorch converts them: a value the dtype cannot hold is an error at the call
/// (nothing enqueued or allocated, nothing written), not saturated; infinities and NaN fill
/// float dtypes; integer dtypes truncate toward zero; whole negatives down to -255 wrap into
/// `u8`; bool takes anything.
#[test]
fn fill_values_past_the_dtype_are_refused_as_pytorch() {
    use DType::{BF16, Bool, I32, U8};
    let vm = private();
    let refused: [(f64, DType); 14] = [
        (256.0, U8),
        (255.5, U8),
        (-0.5, U8),
        (-256.0, U8),
        (-0.5 - 255.0, U8),
        (f64::NAN, U8),
        (2_147_483_648.0, I32),
        (-2_147_483_649.0, I32),
        (f64::INFINITY, I32),
        (9_223_372_036_854_775_808.0, I64),
        (f64::NAN, I64),
        (65_520.0, F16),
        (1e39, F32),
        (-1e39, BF16),
    ];
    for (v, dt) in refused {
        let e = fails_at_call(&[&vm], || on(&vm, || Ok(Tensor::full([2], v, dt))));
        assert!(
            matches!(&e, Error::InvalidArgument { at: _, op: "full", message } if message.contains("without overflow")),
            "full({v}, {dt}): {e}"
        );
    }
    let kept: [(f64, DType, f64); 11] = [
        (255.0, U8, 255.0),
        (-1.0, U8, 255.0),
        (-255.0, U8, 1.0),
        (2.7, I32, 2.0),
        (-2.7, I32, -2.0),
        (-2_147_483_648.0, I32, -2_147_483_648.0),
        (
            -9_223_372_036_854_775_808.0,
            I64,
            -9_223_372_036_854_775_808.0,
        ),
        (65_504.0, F16, 65_504.0),
        (f64::NEG_INFINITY, F16, f64::NEG_INFINITY),
        (1e300, F64, 1e300),
        (-7.0, Bool, 1.0),
    ];
    for (v, dt, want) in kept {
        let t = on(&vm, || Tensor::full([2], v, dt));
        let got = on(&vm, || t.to_dtype(F64)?.to_vec::<f64>());
        assert_eq!(got, [want, want], "full({v}, {dt})");
    }
    let nan = on(&vm, || {
        Tensor::full([1], f64::NAN, BF16)?
            .to_dtype(F64)?
            .item::<f64>()
    });
    assert!(nan.is_nan());
    // fill_, full_like and masked_fill check the same way; a refused fill_ writes nothing.
    let t = on(&vm, || Tensor::full([2], 7.0, U8));
    let e = fails_at_call(&[&vm], || t.fill_(300.0));
    assert!(
        matches!(e, Error::InvalidArgument { op: "fill_", .. }),
        "{e}"
    );
    assert_eq!(on(&vm, || t.to_vec::<u8>()), [7, 7]);
    let e = fails_at_call(&[&vm], || t.full_like(1e3));
    assert!(
        matches!(
            e,
            Error::InvalidArgument {
                op: "full_like",
                ..
            }
        ),
        "{e}"
    );
    let mask = on(&vm, || Tensor::from_vec(vec![true, false], [2]));
    let e = fails_at_call(&[&vm], || t.masked_fill(&mask, -300.0));
    assert!(
        matches!(
            e,
            Error::InvalidArgument {
                op: "masked_fill",
                ..
            }
        ),
        "{e}"
    );
    let m = on(&vm, || t.masked_fill(&mask, -1.0)?.to_vec::<u8>());
    assert_eq!(m, [255, 7]);
}

/// `Display` prints integers from their own values, not through `f64`.
#[test]
fn display_prints_large_integers_exactly() {
    let t = Tensor::from_vec(vec![i64::MAX, i64::MIN + 1], [2]).unwrap();
    assert_eq!(
        format!("{t}"),
        "tensor([ 9223372036854775807, -9223372036854775807], dtype=i64)"
    );
}
