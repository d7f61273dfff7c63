//! The global generator's streams: consecutive random tensors never share a counter (a normal
//! draw takes two per element), and uniform draws stay below their upper bound in every float
//! dtype. One test in its own binary, since it pins the generator's counter and other tests
//! would draw from it concurrently.

use eddy::ops::random::{Distribution, random_value, uniform01_digits};
use eddy::tensor::{DType, Error, Tensor, manual_seed};
use eddy::tensor::{bf16, f16};

#[test]
fn random_tensors_take_disjoint_counters_and_stay_below_their_bound() {
    // Pinned layout: randn([3]) takes counters 0..6, rand([3]) 6..9, randn([2]) 9..13.
    manual_seed(7);
    let x = Tensor::randn([3], 0.0, 1.0, DType::F64).unwrap();
    let u = Tensor::rand([3], DType::F64).unwrap();
    let y = Tensor::randn([2], 0.0, 1.0, DType::F64).unwrap();
    let normal = Distribution::Normal {
        mean: 0.0,
        std: 1.0,
    };
    let want_x: Vec<f64> = (0..3).map(|i| random_value(normal, 7, 0, i, 53)).collect();
    let want_u: Vec<f64> = (0..3).map(|i| uniform01_digits(7, 6 + i, 53)).collect();
    let want_y: Vec<f64> = (0..2).map(|i| random_value(normal, 7, 9, i, 53)).collect();
    assert_eq!(x.to_vec::<f64>().unwrap(), want_x);
    assert_eq!(u.to_vec::<f64>().unwrap(), want_u);
    assert_eq!(y.to_vec::<f64>().unwrap(), want_y);
    // So the uniform draw is not a function of the normal one's counters: before, `u[0]` was
    // the `1 - u1` of `x[1]`'s Box–Muller pair.
    let u1_of_x1 = 1.0 - uniform01_digits(7, 2, 53);
    assert_ne!(u.to_vec::<f64>().unwrap()[0], 1.0 - u1_of_x1);

    // `rand` never returns 1.0, even where the dtype has few digits (rounding an f64 draw
    // to f16 used to give 1.0 once in about 4,096 values).
    let n = 200_000;
    let h = Tensor::rand([n], DType::F16)
        .unwrap()
        .to_vec::<f16>()
        .unwrap();
    assert!(h.iter().all(|v| (0.0..1.0).contains(&v.to_f64())));
    assert!(h.iter().all(|v| (v.to_f64() * 2048.0).fract() == 0.0));
    let b = Tensor::rand([n], DType::BF16).unwrap();
    let b = b.to_vec::<bf16>().unwrap();
    assert!(b.iter().all(|v| (0.0..1.0).contains(&v.to_f64())));
    // Every value a draw of 8 digits can give shows up: the draw is not coarser than that.
    let mut seen = [false; 256];
    for v in &b {
        seen[(v.to_f64() * 256.0) as usize] = true;
    }
    assert!(
        seen.iter().all(|&s| s),
        "bf16 rand misses some of its 256 values"
    );
    let f = Tensor::uniform([n], -1.0, 1.0, DType::F32).unwrap();
    assert!(
        f.to_vec::<f32>()
            .unwrap()
            .iter()
            .all(|v| (-1.0..1.0).contains(v))
    );
    // A range where the dtype's rounding reaches `hi`: [2047, 2048), where f16's spacing is 1.
    // Every draw rounds to 2047 or 2048, and 2048 is replaced by `lo`.
    let tight = Tensor::uniform([1000], 2047.0, 2048.0, DType::F16).unwrap();
    let tight = tight.to_vec::<f16>().unwrap();
    assert!(tight.iter().all(|v| v.to_f64() < 2048.0), "{tight:?}");

    // Bounds the dtype cannot hold, or a range too wide for f64, are refused at the call.
    for (lo, hi, dt) in [
        (-1e308, 1e308, DType::F64),
        (-1e39, 1e39, DType::F32),
        (0.0, 1e5, DType::F16),
    ] {
        let e = Tensor::uniform([2], lo, hi, dt).unwrap_err();
        assert!(
            matches!(e, Error::InvalidArgument { op: "uniform", .. }),
            "[{lo}, {hi}) {dt}: {e}"
        );
    }
    let e = Tensor::randn([2], 0.0, 1.0, DType::I64).unwrap_err();
    assert!(
        matches!(e, Error::UnsupportedDType { op: "randn", .. }),
        "{e}"
    );
}
