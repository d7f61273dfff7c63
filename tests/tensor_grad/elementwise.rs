//! Gradients of the elementwise ops: every unary and scalar op through a view of the leaf,
//! binary ops between operands that broadcast, and `where_`.

use crate::common::reference::{R, cases, derive};
use crate::{Dom, View, arb_view, grad_check, leaf, rnd, seeded, shape, view};
use eddy::tensor::{DType, Tensor};
use proptest::prelude::*;

type UnaryT = fn(&Tensor) -> R<Tensor>;

fn unary_table() -> Vec<(&'static str, Dom, UnaryT)> {
    vec![
        ("neg", Dom::Any, Tensor::neg),
        ("abs", Dom::NonZero, Tensor::abs),
        ("exp", Dom::Any, Tensor::exp),
        ("log", Dom::Pos, Tensor::log),
        ("sqrt", Dom::Pos, Tensor::sqrt),
        ("rsqrt", Dom::Pos, Tensor::rsqrt),
        ("sin", Dom::Any, Tensor::sin),
        ("cos", Dom::Any, Tensor::cos),
        ("tanh", Dom::Any, Tensor::tanh),
        ("sigmoid", Dom::Any, Tensor::sigmoid),
        ("relu", Dom::NonZero, Tensor::relu),
        ("gelu", Dom::Any, Tensor::gelu),
        ("silu", Dom::Any, Tensor::silu),
        ("recip", Dom::NonZero, Tensor::recip),
        ("square", Dom::Any, Tensor::square),
        ("sign", Dom::NonZero, Tensor::sign),
        ("floor", Dom::Quant, Tensor::floor),
        ("ceil", Dom::Quant, Tensor::ceil),
        ("round", Dom::Quant, Tensor::round),
        ("trunc", Dom::Quant, Tensor::trunc),
        ("log1p", Dom::Pos, Tensor::log1p),
        ("expm1", Dom::Any, Tensor::expm1),
        ("log2", Dom::Pos, Tensor::log2),
        ("log10", Dom::Pos, Tensor::log10),
        ("tan", Dom::Unit, Tensor::tan),
        ("atan", Dom::Any, Tensor::atan),
        ("erf", Dom::Any, Tensor::erf),
        ("leaky_relu", Dom::NonZero, |x| x.leaky_relu(0.1)),
        ("elu", Dom::NonZero, |x| x.elu(1.5)),
        ("softplus", Dom::Any, |x| x.softplus(2.0, 20.0)),
        // Linear above x = 0.75 / 3, below `Dom::Pos`: no draw lands at the switch, where
        // a finite difference would straddle the jump.
        ("softplus_linear", Dom::Pos, |x| x.softplus(3.0, 0.75)),
        ("add_scalar", Dom::Any, |x| x.add_scalar(1.5)),
        ("sub_scalar", Dom::Any, |x| x.sub_scalar(0.5)),
        ("rsub_scalar", Dom::Any, |x| x.rsub_scalar(2.0)),
        ("mul_scalar", Dom::Any, |x| x.mul_scalar(-3.0)),
        ("div_scalar", Dom::Any, |x| x.div_scalar(0.7)),
        ("pow_scalar", Dom::Pos, |x| x.pow_scalar(2.5)),
        ("pow_scalar_neg", Dom::Pos, |x| x.pow_scalar(-1.5)),
        ("clamp", Dom::Quant, |x| {
            x.clamp(Some(-1.234567), Some(1.234567))
        }),
        ("clamp_min", Dom::Quant, |x| x.clamp_min(0.1234567)),
        ("clamp_max", Dom::Quant, |x| x.clamp_max(-0.1234567)),
        ("to_dtype_f64", Dom::Any, |x| {
            x.mul_scalar(2.0)?.to_dtype(DType::F64)
        }),
    ]
}

type BinaryT = fn(&Tensor, &Tensor) -> R<Tensor>;

fn binary_table() -> Vec<(&'static str, Dom, Dom, BinaryT)> {
    vec![
        ("add", Dom::Any, Dom::Any, Tensor::add),
        ("sub", Dom::Any, Dom::Any, Tensor::sub),
        ("mul", Dom::Any, Dom::Any, Tensor::mul),
        ("div", Dom::Any, Dom::NonZero, Tensor::div),
        ("pow", Dom::Pos, Dom::Any, Tensor::pow),
        ("maximum", Dom::Grid, Dom::OffGrid, Tensor::maximum),
        ("minimum", Dom::OffGrid, Dom::Grid, Tensor::minimum),
    ]
}

proptest! {
    #![proptest_config(cases(16))]

    /// Every unary and scalar op, fed through a view of the leaf.
    #[test]
    fn unary_grads(shape in shape(0..=3), v in arb_view(), seed in any::<u64>()) {
        let mut rng = seeded(seed);
        for (name, dom, op) in unary_table() {
            let x = rnd(&mut rng, &shape, dom);
            grad_check(&format!("{name} {shape:?} {v:?}"), &[x], |xs| op(&view(&xs[0], v)?));
        }
    }

    /// Binary ops between operands that broadcast (the gradient of a broadcast operand sums).
    #[test]
    fn binary_grads(
        out in shape(0..=3), a in (0usize..=3, any::<u8>()), b in (0usize..=3, any::<u8>()),
        v in arb_view(), seed in any::<u64>(),
    ) {
        let mut rng = seeded(seed);
        let (sa, sb) = (derive(&out, a.0, a.1), derive(&out, b.0, b.1));
        // The lhs leaf is stored transposed (and viewed back), or expanded to the output shape.
        let mut stored = sa.clone();
        if matches!(v, View::Transpose) && sa.len() >= 2 {
            let r = sa.len();
            stored.swap(0, r - 1);
        }
        let lhs = |t: &Tensor| match v {
            View::Broadcast => t.broadcast_to(out.clone()),
            View::Transpose if t.rank() >= 2 => t.transpose(0, -1),
            _ => Ok(t.clone()),
        };
        for (name, da, db, op) in binary_table() {
            let x = rnd(&mut rng, &stored, da);
            let y = rnd(&mut rng, &sb, db);
            grad_check(&format!("{name} {sa:?} {sb:?} {v:?}"), &[x, y], |xs| op(&lhs(&xs[0])?, &xs[1]));
        }
    }

    /// `where_` with a fixed condition; both branches broadcast.
    #[test]
    fn where_grads(out in shape(0..=3), c in (0usize..=3, any::<u8>()), a in (0usize..=3, any::<u8>()), b in (0usize..=3, any::<u8>()), seed in any::<u64>()) {
        let mut rng = seeded(seed);
        let sc = derive(&out, c.0, c.1);
        let cond = rnd(&mut rng, &sc, Dom::Any);
        let x = rnd(&mut rng, &derive(&out, a.0, a.1), Dom::Any);
        let y = rnd(&mut rng, &derive(&out, b.0, b.1), Dom::Any);
        grad_check("where", &[x, y], |xs| leaf(&cond).gt_scalar(0.0)?.where_(&xs[0], &xs[1]));
    }
}
