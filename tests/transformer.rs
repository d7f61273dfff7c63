//! Attention modules: `MultiheadAttention` against its definition written out with matmul and
//! softmax, its fused and weight-returning paths against each other, masks, layouts, the
//! transformer layers' parameter names, and a small character model that learns.

use eddy::models::{CharTransformer, TransformerConfig, train_step};
use eddy::tensor::nn::{
    MhaOptions, Module, MultiheadAttention, TransformerDecoderLayer, TransformerEncoderLayer,
    TransformerOptions,
};
use eddy::tensor::optim::Adam;
use eddy::tensor::{DType, Tensor};

type R = Result<(), eddy::Error>;

fn close(a: &Tensor, b: &Tensor, tol: f64) {
    assert_eq!(a.dims(), b.dims());
    let (a, b) = (a.to_vec::<f64>().unwrap(), b.to_vec::<f64>().unwrap());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!((x - y).abs() <= tol, "element {i}: {x} vs {y}");
    }
}

/// `MultiheadAttention` of batch-first `q`, `kv` written out: projections, per-head softmax of
/// the scaled scores plus `mask`, concatenated heads, output projection.
fn by_definition(m: &MultiheadAttention, q: &Tensor, kv: &Tensor, mask: Option<&Tensor>) -> Tensor {
    let e = m.embed_dim;
    let (h, d) = (m.num_heads, e / m.num_heads);
    let b = m.in_proj_bias.as_ref().unwrap();
    let proj = |x: &Tensor, i: usize| {
        let w = m.in_proj_weight.narrow(0, i * e, e).unwrap();
        x.matmul(&w.t().unwrap())
            .unwrap()
            .add(&b.narrow(0, i * e, e).unwrap())
            .unwrap()
    };
    let (pq, pk, pv) = (proj(q, 0), proj(kv, 1), proj(kv, 2));
    let mut heads = vec![];
    for i in 0..h {
        let part = |t: &Tensor| t.narrow(2, i * d, d).unwrap();
        let mut s = part(&pq)
            .matmul(&part(&pk).transpose(1, 2).unwrap())
            .unwrap()
            .mul_scalar(1.0 / (d as f64).sqrt())
            .unwrap();
        if let Some(m) = mask {
            s = s.add(m).unwrap();
        }
        heads.push(s.softmax(-1).unwrap().matmul(&part(&pv)).unwrap());
    }
    let refs: Vec<&Tensor> = heads.iter().collect();
    m.out_proj.forward(&Tensor::cat(&refs, 2).unwrap()).unwrap()
}

#[test]
fn multihead_attention_is_its_definition_on_both_paths() -> R {
    eddy::tensor::manual_seed(3);
    let m = MultiheadAttention::new(8, 2, 0.0, true, true, DType::F64)?;
    let q = Tensor::randn([2, 5, 8], 0.0, 1.0, DType::F64)?;
    let kv = Tensor::randn([2, 7, 8], 0.0, 1.0, DType::F64)?;
    let want = by_definition(&m, &q, &kv, None);
    let (fused, none) = m.attend(&q, &kv, &kv, MhaOptions::default())?;
    assert!(none.is_none());
    close(&fused, &want, 1e-12);
    let opts = MhaOptions {
        need_weights: true,
        average_attn_weights: true,
        ..Default::default()
    };
    let (y, w) = m.attend(&q, &kv, &kv, opts)?;
    close(&y, &want, 1e-12);
    let w = w.unwrap();
    assert_eq!(w.dims(), &[2, 5, 7]);
    close(
        &w.sum(&[-1], false)?,
        &Tensor::ones([2, 5], DType::F64)?,
        1e-12,
    );
    // Self-attention takes the one-product path.
    close(&m.forward(&q)?, &by_definition(&m, &q, &q, None), 1e-12);
    Ok(())
}

/// Self-attention without weights reads the heads of the packed projection in place and
/// writes the projection's gradient whole; the weight-returning path composes matmuls and a
/// softmax. Both give the same values and gradients, causal or not, for widths and lengths
/// that fill no register block exactly, batch first or not, in both float widths.
#[test]
fn packed_self_attention_equals_the_composed_path_with_gradients() -> R {
    for (dt, tol) in [(DType::F64, 1e-10), (DType::F32, 2e-4)] {
        for (causal, batch_first, (n, l)) in [(true, true, (2, 37)), (false, false, (3, 9))] {
            eddy::tensor::manual_seed(11);
            let m = MultiheadAttention::new(60, 3, 0.0, true, batch_first, dt)?;
            let bias = m.in_proj_bias.as_ref().unwrap();
            {
                let _g = eddy::tensor::no_grad();
                bias.copy_(&Tensor::uniform([180], -0.5, 0.5, dt)?)?;
            }
            let dims = if batch_first { [n, l, 60] } else { [l, n, 60] };
            let x = Tensor::randn(dims, 0.0, 1.0, dt)?.requires_grad_(true)?;
            let dy = Tensor::randn(dims, 0.0, 1.0, dt)?;
            let run = |need_weights: bool| -> Result<Vec<Tensor>, eddy::Error> {
                let opts = MhaOptions {
                    need_weights,
                    is_causal: causal,
                    ..Default::default()
                };
                let (y, _) = m.attend(&x, &x, &x, opts)?;
                y.mul(&dy)?.sum_all()?.backward()?;
                let bias = m.in_proj_bias.as_ref().unwrap();
                let grads = [&x, &m.in_proj_weight, bias].map(|t| {
                    let g = t.grad().expect("a gradient");
                    t.set_grad(None);
                    g
                });
                Ok([vec![y.detach()], grads.to_vec()].concat())
            };
            let (packed, composed) = (run(false)?, run(true)?);
            for (a, b) in packed.iter().zip(&composed) {
                close(&a.to_dtype(DType::F64)?, &b.to_dtype(DType::F64)?, tol);
            }
        }
    }
    Ok(())
}

#[test]
fn masks_follow_pytorchs_conventions() -> R {
    eddy::tensor::manual_seed(4);
    let m = MultiheadAttention::new(4, 2, 0.0, true, true, DType::F64)?;
    let x = Tensor::randn([2, 4, 4], 0.0, 1.0, DType::F64)?;
    // Causal: the additive upper triangle of -inf.
    let above = Tensor::full([4, 4], f64::NEG_INFINITY, DType::F64)?.triu(1)?;
    let want = by_definition(&m, &x, &x, Some(&above));
    let causal = MhaOptions {
        is_causal: true,
        ..Default::default()
    };
    close(&m.attend(&x, &x, &x, causal)?.0, &want, 1e-12);
    // A bool attn_mask is true where attention is not allowed.
    let blocked = Tensor::ones([4, 4], DType::Bool)?.triu(1)?;
    let opts = MhaOptions {
        attn_mask: Some(&blocked),
        ..Default::default()
    };
    close(&m.attend(&x, &x, &x, opts)?.0, &want, 1e-12);
    let weights = MhaOptions {
        need_weights: true,
        ..opts
    };
    close(&m.attend(&x, &x, &x, weights)?.0, &want, 1e-12);
    // key_padding_mask [n, s]: true keys are ignored, per batch element.
    let pad = Tensor::from_vec(
        vec![false, false, false, true, false, true, true, true],
        [2, 4],
    )?;
    let add = Tensor::zeros([2, 1, 4], DType::F64)?
        .masked_fill(&pad.reshape([2, 1, 4])?, f64::NEG_INFINITY)?;
    let opts = MhaOptions {
        key_padding_mask: Some(&pad),
        ..Default::default()
    };
    close(
        &m.attend(&x, &x, &x, opts)?.0,
        &by_definition(&m, &x, &x, Some(&add)),
        1e-12,
    );
    // Wrong shapes are refused with the shapes named.
    let bad = Tensor::zeros([3, 4], DType::Bool)?;
    let opts = MhaOptions {
        key_padding_mask: Some(&bad),
        ..Default::default()
    };
    let e = m.attend(&x, &x, &x, opts).unwrap_err().to_string();
    assert!(e.contains("[3, 4]") && e.contains("[2, 4]"), "{e}");
    let e = m
        .forward(&Tensor::zeros([2, 4, 5], DType::F64)?)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("MultiheadAttention") && e.contains("[2, 4, 5]"),
        "{e}"
    );
    Ok(())
}

#[test]
fn sequence_first_and_unbatched_inputs_are_the_batch_first_result_moved() -> R {
    eddy::tensor::manual_seed(5);
    let first = MultiheadAttention::new(6, 3, 0.0, true, false, DType::F64)?;
    let x = Tensor::randn([2, 5, 6], 0.0, 1.0, DType::F64)?; // [n, l, e]
    let want = by_definition(&first, &x, &x, None);
    let y = first.forward(&x.transpose(0, 1)?.contiguous()?)?; // [l, n, e]
    close(&y.transpose(0, 1)?.contiguous()?, &want, 1e-12);
    let one = first.forward(&x.narrow(0, 1, 1)?.squeeze(0)?)?; // [l, e]
    close(&one, &want.narrow(0, 1, 1)?.squeeze(0)?, 1e-12);
    Ok(())
}

#[test]
fn transformer_layers_have_pytorchs_names_and_every_parameter_learns() -> R {
    let o = TransformerOptions {
        dim_feedforward: 16,
        batch_first: true,
        dropout: 0.0,
        ..Default::default()
    };
    let names = |m: &dyn Module| -> Vec<String> {
        m.named_parameters().into_iter().map(|(n, _)| n).collect()
    };
    let enc = TransformerEncoderLayer::new(8, 2, o)?;
    assert_eq!(
        names(&enc),
        [
            "self_attn.in_proj_weight",
            "self_attn.in_proj_bias",
            "self_attn.out_proj.weight",
            "self_attn.out_proj.bias",
            "linear1.weight",
            "linear1.bias",
            "linear2.weight",
            "linear2.bias",
            "norm1.weight",
            "norm1.bias",
            "norm2.weight",
            "norm2.bias",
        ]
    );
    let dec = TransformerDecoderLayer::new(
        8,
        2,
        TransformerOptions {
            norm_first: true,
            ..o
        },
    )?;
    let dn = names(&dec);
    assert!(
        dn.contains(&"multihead_attn.in_proj_weight".to_string())
            && dn.contains(&"norm3.bias".to_string())
    );
    let x = Tensor::randn([2, 5, 8], 0.0, 1.0, DType::F32)?;
    let mem = Tensor::randn([2, 3, 8], 0.0, 1.0, DType::F32)?;
    let loss = enc
        .forward_with(&x, None, None, true)?
        .square()?
        .sum_all()?
        .add(&dec.forward_with(&x, &mem, true)?.square()?.sum_all()?)?;
    loss.backward()?;
    for (n, p) in enc
        .named_parameters()
        .into_iter()
        .chain(dec.named_parameters())
    {
        let g = p.grad().unwrap_or_else(|| panic!("{n} has no gradient"));
        let g = g.abs()?.sum_all()?.item::<f32>()?;
        assert!(g > 0.0 && g.is_finite(), "{n}: |grad| = {g}");
    }
    Ok(())
}

#[test]
fn a_small_character_transformer_learns_a_repeating_text() -> R {
    eddy::tensor::manual_seed(0);
    let cfg = TransformerConfig {
        vocab: 16,
        d_model: 16,
        heads: 2,
        layers: 1,
        ffn: 32,
        seq: 12,
    };
    let model = CharTransformer::new(cfg)?;
    let mut opt = Adam::adamw(model.parameters(), 1e-2, 0.0)?;
    // "abcabc…": each next token follows from the one before.
    let text: Vec<i64> = (0..4 * 13).map(|i| (i % 3) as i64 + 1).collect();
    let rows = |off: usize| -> Vec<i64> {
        (0..4)
            .flat_map(|b| text[b * 13 + off..][..12].to_vec())
            .collect()
    };
    let x = Tensor::from_vec(rows(0), [4, 12])?;
    let y = Tensor::from_vec(rows(1), [48])?;
    let first = train_step(&model, &mut opt, &x, &y)?.item::<f32>()?;
    let mut last = first;
    for _ in 0..60 {
        last = train_step(&model, &mut opt, &x, &y)?.item::<f32>()?;
    }
    assert!(first > 2.0 && last < 0.1, "loss {first} -> {last}");
    Ok(())
}
