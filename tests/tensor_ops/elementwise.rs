//! Elementwise ops against the reference: unary ops, scalar ops and `clamp`, binary ops with
//! broadcasting and dtype promotion, comparisons and logical ops, `where_`; `add` accepts exactly
//! the shapes a broadcast oracle accepts (F1); splat operands take the flat path.

use crate::common::reference::{
    self, Arr, Dom, R, broadcast_shape, build, cfg, check, derive, dtype, f32s, input, numel,
    operand, result_type, shape, steps, to_float,
};
use eddy::tensor::{DType, Error, Scalar, Tensor};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use DType::F32;

type UnaryT = fn(&Tensor) -> R<Tensor>;

type UnaryF = fn(f64) -> f64;

/// (name, input domain, whether integer inputs stay integer, op, reference)
fn unary_table() -> Vec<(&'static str, Dom, bool, UnaryT, UnaryF)> {
    vec![
        ("neg", Dom::Any, true, Tensor::neg, |x| -x),
        ("abs", Dom::Any, true, Tensor::abs, f64::abs),
        ("exp", Dom::Any, false, Tensor::exp, f64::exp),
        ("log", Dom::Pos, false, Tensor::log, f64::ln),
        ("sqrt", Dom::Pos, false, Tensor::sqrt, f64::sqrt),
        ("rsqrt", Dom::Pos, false, Tensor::rsqrt, |x| 1.0 / x.sqrt()),
        ("sin", Dom::Any, false, Tensor::sin, f64::sin),
        ("cos", Dom::Any, false, Tensor::cos, f64::cos),
        ("tanh", Dom::Any, false, Tensor::tanh, f64::tanh),
        ("sigmoid", Dom::Any, false, Tensor::sigmoid, |x| {
            1.0 / (1.0 + (-x).exp())
        }),
        ("relu", Dom::Any, true, Tensor::relu, |x| x.max(0.0)),
        ("gelu", Dom::Any, false, Tensor::gelu, |x| {
            0.5 * x * (1.0 + reference::erf(x / std::f64::consts::SQRT_2))
        }),
        ("silu", Dom::Any, false, Tensor::silu, |x| {
            x / (1.0 + (-x).exp())
        }),
        ("recip", Dom::NonZero, false, Tensor::recip, |x| 1.0 / x),
        ("square", Dom::Any, true, Tensor::square, |x| x * x),
        ("sign", Dom::Any, true, Tensor::sign, |x| {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                0.0
            }
        }),
        ("floor", Dom::Any, true, Tensor::floor, f64::floor),
        ("ceil", Dom::Any, true, Tensor::ceil, f64::ceil),
        ("round", Dom::Any, true, Tensor::round, f64::round_ties_even),
        (
            "round_halves",
            Dom::Halves,
            true,
            Tensor::round,
            f64::round_ties_even,
        ),
        ("trunc", Dom::Any, true, Tensor::trunc, f64::trunc),
        ("log1p", Dom::Pos, false, Tensor::log1p, f64::ln_1p),
        ("expm1", Dom::Any, false, Tensor::expm1, f64::exp_m1),
        ("log2", Dom::Pos, false, Tensor::log2, f64::log2),
        ("log10", Dom::Pos, false, Tensor::log10, f64::log10),
        ("tan", Dom::Unit, false, Tensor::tan, f64::tan),
        ("atan", Dom::Any, false, Tensor::atan, f64::atan),
        ("erf", Dom::Any, false, Tensor::erf, reference::erf),
        (
            "leaky_relu",
            Dom::Any,
            false,
            |x| x.leaky_relu(0.01),
            |x| {
                if x > 0.0 { x } else { 0.01 * x }
            },
        ),
        (
            "elu",
            Dom::Any,
            false,
            |x| x.elu(0.5),
            |x| {
                if x > 0.0 { x } else { 0.5 * x.exp_m1() }
            },
        ),
        (
            "softplus",
            Dom::Any,
            false,
            |x| x.softplus(1.5, 2.0),
            |x| {
                if 1.5 * x > 2.0 {
                    x
                } else {
                    (1.5 * x).exp().ln_1p() / 1.5
                }
            },
        ),
    ]
}

type BinaryT = fn(&Tensor, &Tensor) -> R<Tensor>;

type BinaryF = fn(f64, f64) -> f64;

/// (name, lhs domain, rhs domain, op, reference)
fn binary_table() -> Vec<(&'static str, Dom, Dom, BinaryT, BinaryF)> {
    vec![
        ("add", Dom::Any, Dom::Any, Tensor::add, |x, y| x + y),
        ("sub", Dom::Any, Dom::Any, Tensor::sub, |x, y| x - y),
        ("mul", Dom::Any, Dom::Any, Tensor::mul, |x, y| x * y),
        ("div", Dom::Any, Dom::NonZero, Tensor::div, |x, y| x / y),
        ("pow", Dom::Pos, Dom::Pos, Tensor::pow, f64::powf),
        ("maximum", Dom::Grid, Dom::Any, Tensor::maximum, f64::max),
        ("minimum", Dom::Grid, Dom::Any, Tensor::minimum, f64::min),
    ]
}

type CmpF = fn(f64, f64) -> bool;

fn cmp_table() -> Vec<(&'static str, BinaryT, CmpF)> {
    vec![
        ("eq", Tensor::eq, |x, y| x == y),
        ("ne", Tensor::ne, |x, y| x != y),
        ("lt", Tensor::lt, |x, y| x < y),
        ("le", Tensor::le, |x, y| x <= y),
        ("gt", Tensor::gt, |x, y| x > y),
        ("ge", Tensor::ge, |x, y| x >= y),
        ("logical_and", Tensor::logical_and, |x, y| {
            x != 0.0 && y != 0.0
        }),
        ("logical_or", Tensor::logical_or, |x, y| {
            x != 0.0 || y != 0.0
        }),
        ("logical_xor", Tensor::logical_xor, |x, y| {
            (x != 0.0) != (y != 0.0)
        }),
    ]
}

proptest! {
    #![proptest_config(cfg())]

    /// Every unary op, any rank and layout; integer inputs stay integer for the ops that keep
    /// them and compute in `f32` otherwise, except the activations PyTorch defines on floats
    /// only, which refuse them.
    #[test]
    fn unary_ops_match_reference(shape in shape(0..=3), steps in steps(), dt in dtype(), seed in any::<u64>()) {
        let mut rng = StdRng::seed_from_u64(seed);
        for (name, dom, keeps_int, op, f) in unary_table() {
            let (t, a) = input(&shape, &steps, dt, dom, &mut rng);
            if !dt.is_float() && matches!(name, "gelu" | "silu" | "leaky_relu" | "elu" | "softplus") {
                let e = op(&t).unwrap_err();
                prop_assert!(matches!(e, Error::UnsupportedDType { .. }), "{name}: {e}");
                continue;
            }
            let out_dt = if dt.is_float() || keeps_int { dt } else { F32 };
            check(name, &op(&t).unwrap(), &a.map(f), out_dt);
        }
    }

    /// `x ⊕ c` for the scalar ops and `clamp`; integer tensors stay integer beside an integer
    /// `c`, and compute in `f32` beside a float one, whole (`3.0`) or not.
    #[test]
    fn scalar_ops_match_reference(shape in shape(0..=3), steps in steps(), dt in dtype(), ci in 0usize..7, seed in any::<u64>()) {
        let sc: Scalar = [Scalar::Int(2), Scalar::Int(-1), Scalar::Float(0.5), Scalar::Float(-1.5), Scalar::Float(3.0), Scalar::Int(0), Scalar::Float(2.0)][ci];
        let c = sc.to_f64();
        let mut rng = StdRng::seed_from_u64(seed);
        let int_c = !sc.is_float();
        // `c + k` of `c`'s kind.
        let plus = move |k: i64| match sc {
            Scalar::Float(x) => Scalar::Float(x + k as f64),
            _ => Scalar::Int(c as i64 + k),
        };
        type S = (&'static str, Dom, bool, Box<dyn Fn(&Tensor) -> R<Tensor>>, Box<dyn Fn(f64) -> f64>);
        let table: Vec<S> = vec![
            ("add_scalar", Dom::Any, int_c, Box::new(move |t| t.add_scalar(sc)), Box::new(move |x| x + c)),
            ("sub_scalar", Dom::Any, int_c, Box::new(move |t| t.sub_scalar(sc)), Box::new(move |x| x - c)),
            ("rsub_scalar", Dom::Any, int_c, Box::new(move |t| t.rsub_scalar(sc)), Box::new(move |x| c - x)),
            ("mul_scalar", Dom::Any, int_c, Box::new(move |t| t.mul_scalar(sc)), Box::new(move |x| x * c)),
            ("div_scalar", Dom::Any, false, Box::new(move |t| t.div_scalar(plus(4))), Box::new(move |x| x / (c + 4.0))),
            ("pow_scalar", Dom::Pos, int_c, Box::new(move |t| t.pow_scalar(sc)), Box::new(move |x| x.powf(c))),
            ("clamp_min", Dom::Any, int_c, Box::new(move |t| t.clamp_min(sc)), Box::new(move |x| x.max(c))),
            ("clamp_max", Dom::Any, int_c, Box::new(move |t| t.clamp_max(sc)), Box::new(move |x| x.min(c))),
            ("clamp", Dom::Any, int_c, Box::new(move |t| t.clamp(Some(plus(-1)), Some(plus(1)))), Box::new(move |x| x.max(c - 1.0).min(c + 1.0))),
        ];
        for (name, dom, keeps_int, op, f) in table {
            let (t, a) = input(&shape, &steps, dt, dom, &mut rng);
            if name == "pow_scalar" && !dt.is_float() && int_c && c < 0.0 {
                // Integers to a negative whole power are refused, as in PyTorch.
                let e = op(&t).unwrap_err();
                prop_assert!(matches!(e, Error::InvalidArgument { op: "pow_scalar", .. }), "{e}");
                continue;
            }
            let out_dt = if dt.is_float() || keeps_int { dt } else { F32 };
            check(name, &op(&t).unwrap(), &a.map(f), out_dt);
        }
    }

    /// Binary ops with broadcasting between non-contiguous operands, with dtype promotion.
    #[test]
    fn binary_ops_match_reference(
        out in shape(0..=3), sa in operand(), sb in operand(),
        dta in dtype(), dtb in prop::option::weighted(0.3, dtype()), seed in any::<u64>(),
    ) {
        let dtb = dtb.unwrap_or(dta);
        let mut rng = StdRng::seed_from_u64(seed);
        let (sha, shb) = (derive(&out, sa.0, sa.1), derive(&out, sb.0, sb.1));
        for (name, da, db, op, f) in binary_table() {
            let (ta, aa) = input(&sha, &sa.2, dta, da, &mut rng);
            let (tb, ab) = input(&shb, &sb.2, dtb, db, &mut rng);
            let mut odt = result_type(dta, sha.is_empty(), dtb, shb.is_empty());
            if name == "div" {
                odt = to_float(odt);
            }
            let want = aa.zip(&ab, f).unwrap();
            check(&format!("{name} {sha:?} {dta} {shb:?} {dtb}"), &op(&ta, &tb).unwrap(), &want, odt);
        }
    }

    /// Shape errors: `add` accepts exactly the pairs a plain broadcast oracle accepts, with its
    /// output shape, and names both operands otherwise (F1, F3: `[0]` with `[1]` gives `[0]`).
    #[test]
    fn broadcasting_accepts_iff_the_oracle_does(
        a in prop::collection::vec(prop_oneof![Just(0usize), Just(1), 2usize..=3], 0..=3),
        b in prop::collection::vec(prop_oneof![Just(0usize), Just(1), 2usize..=3], 0..=3),
    ) {
        let ta = Tensor::zeros(a.clone(), F32).unwrap();
        let tb = Tensor::ones(b.clone(), F32).unwrap();
        match (broadcast_shape(&a, &b), ta.add(&tb)) {
            (Some(s), Ok(t)) => {
                prop_assert_eq!(t.dims(), &s[..]);
                prop_assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0; numel(&s)]);
            }
            (None, Err(Error::ShapeMismatch { at: _, op, lhs, rhs })) => {
                prop_assert_eq!(op, "add");
                prop_assert_eq!((lhs, rhs), (a.clone(), b.clone()));
            }
            (want, got) => prop_assert!(false, "{a:?} + {b:?}: oracle {want:?}, engine {got:?}"),
        }
        // The in-place form accepts only a source that broadcasts to the destination itself.
        let r = ta.add_(&tb);
        let ok = broadcast_shape(&a, &b).is_some_and(|s| s == a);
        prop_assert_eq!(r.is_ok(), ok, "{:?}.add_({:?}): {:?}", a, b, r.err());
    }

    /// Comparisons (tensor and scalar forms) and logical ops give `Bool`, with ties and zeros
    /// from small integer values.
    #[test]
    fn comparisons_match_reference(
        out in shape(0..=3), sa in operand(), sb in operand(),
        dta in dtype(), dtb in prop::option::weighted(0.3, dtype()), seed in any::<u64>(),
    ) {
        let dtb = dtb.unwrap_or(dta);
        let mut rng = StdRng::seed_from_u64(seed);
        let (sha, shb) = (derive(&out, sa.0, sa.1), derive(&out, sb.0, sb.1));
        let (ta, aa) = input(&sha, &sa.2, dta, Dom::Grid, &mut rng);
        let (tb, ab) = input(&shb, &sb.2, dtb, Dom::Grid, &mut rng);
        for (name, op, f) in cmp_table() {
            let want = aa.zip(&ab, |x, y| f(x, y) as u8 as f64).unwrap();
            check(name, &op(&ta, &tb).unwrap(), &want, DType::Bool);
        }
        check("logical_not", &ta.logical_not().unwrap(), &aa.map(|x| (x == 0.0) as u8 as f64), DType::Bool);
        for c in [0.0, 1.0, -0.5] {
            let s = |f: fn(f64, f64) -> bool| aa.map(move |x| f(x, c) as u8 as f64);
            check("eq_scalar", &ta.eq_scalar(c).unwrap(), &s(|x, y| x == y), DType::Bool);
            check("ne_scalar", &ta.ne_scalar(c).unwrap(), &s(|x, y| x != y), DType::Bool);
            check("lt_scalar", &ta.lt_scalar(c).unwrap(), &s(|x, y| x < y), DType::Bool);
            check("le_scalar", &ta.le_scalar(c).unwrap(), &s(|x, y| x <= y), DType::Bool);
            check("gt_scalar", &ta.gt_scalar(c).unwrap(), &s(|x, y| x > y), DType::Bool);
            check("ge_scalar", &ta.ge_scalar(c).unwrap(), &s(|x, y| x >= y), DType::Bool);
        }
    }

    /// `where_` with three operands broadcasting to one shape.
    #[test]
    fn where_matches_reference(
        out in shape(0..=3), sc in operand(), sa in operand(), sb in operand(),
        dta in dtype(), dtb in prop::option::weighted(0.3, dtype()), seed in any::<u64>(),
    ) {
        let dtb = dtb.unwrap_or(dta);
        let mut rng = StdRng::seed_from_u64(seed);
        let shc = derive(&out, sc.0, sc.1);
        let (tc, ac) = build(&shc, &sc.2, DType::Bool, &mut || rng.random_bool(0.5) as u8 as f64);
        let (ta, aa) = input(&derive(&out, sa.0, sa.1), &sa.2, dta, Dom::Any, &mut rng);
        let (tb, ab) = input(&derive(&out, sb.0, sb.1), &sb.2, dtb, Dom::Any, &mut rng);
        let s = broadcast_shape(&broadcast_shape(&ac.shape, &aa.shape).unwrap(), &ab.shape).unwrap();
        let (c, x, y) = (ac.broadcast_to(&s), aa.broadcast_to(&s), ab.broadcast_to(&s));
        let want = Arr::new(&s, (0..numel(&s)).map(|i| if c.data[i] != 0.0 { x.data[i] } else { y.data[i] }).collect());
        let odt = result_type(dta, ta.dims().is_empty(), dtb, tb.dims().is_empty());
        check("where", &tc.where_(&ta, &tb).unwrap(), &want, odt);
        // A condition that is not Bool is refused.
        assert!(matches!(ta.where_(&ta, &tb), Err(Error::UnsupportedDType { op: "where", .. })));
    }
}

/// A splat operand of the other's shape (`sum(y).broadcast_to(..)`, or one element of a
/// narrowed base stretched over every dim) takes the binary ops' flat path; each operand order
/// of the non-commutative ops, against the values worked out here.
#[test]
fn splat_operands_of_the_same_shape() {
    let base = Tensor::from_vec(vec![9f32, 2.0, 7.0], [3]).unwrap();
    // The element at offset 1, stretched to [2, 3]: every element reads 2.0.
    let splat = base.narrow(0, 1, 1).unwrap().reshape([1, 1]).unwrap();
    let splat = splat.broadcast_to([2, 3]).unwrap();
    assert!(!splat.is_contiguous());
    let x = Tensor::from_vec(vec![1f32, 2.0, 4.0, 8.0, 0.5, -3.0], [2, 3]).unwrap();
    let xs = f32s(&x);
    type Op = fn(&Tensor, &Tensor) -> Tensor;
    type Want = fn(f32, f32) -> f32;
    let ops: [(&str, Op, Want); 4] = [
        ("sub", |a, b| a.sub(b).unwrap(), |a, b| a - b),
        ("div", |a, b| a.div(b).unwrap(), |a, b| a / b),
        ("pow", |a, b| a.pow(b).unwrap(), f32::powf),
        ("maximum", |a, b| a.maximum(b).unwrap(), f32::max),
    ];
    let close = |got: Vec<f32>, want: Vec<f32>, what: String| {
        assert_eq!(got.len(), want.len(), "{what}");
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g - w).abs() <= 1e-6 * w.abs().max(1.0),
                "{what}: {got:?} against {want:?}"
            );
        }
    };
    for (name, op, f) in ops {
        let want = xs.iter().map(|&v| f(v, 2.0)).collect();
        close(f32s(&op(&x, &splat)), want, format!("{name}(x, splat)"));
        let want = xs.iter().map(|&v| f(2.0, v)).collect();
        close(f32s(&op(&splat, &x)), want, format!("{name}(splat, x)"));
        let want = vec![f(2.0, 2.0); 6];
        close(
            f32s(&op(&splat, &splat)),
            want,
            format!("{name}(splat, splat)"),
        );
    }
    // An integer splat from a reduction, as `dispatch_mixed` builds it.
    let y = Tensor::from_vec(vec![1i64, 2, 3, 4], [4]).unwrap();
    let s = y.sum_all().unwrap().broadcast_to([4]).unwrap();
    assert_eq!(
        s.sub(&y).unwrap().to_vec::<i64>().unwrap(),
        vec![9, 8, 7, 6]
    );
    assert_eq!(
        y.sub(&s).unwrap().to_vec::<i64>().unwrap(),
        vec![-9, -8, -7, -6]
    );
}
