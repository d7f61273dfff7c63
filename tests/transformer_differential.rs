//! The character transformer of `eddy::models::CharTransformer` against PyTorch from the same
//! initial state: PyTorch's initial weights (a safetensors file written by
//! `compare/torch_transformer_fixture.py`, with the `state_dict` names of PyTorch's
//! `nn.TransformerEncoderLayer`) load into Eddy's model, both train with AdamW on the same
//! batch, and every step's loss agrees within 1e-4.

use eddy::Tensor;
use eddy::models::{CharTransformer, TransformerConfig, train_step};
use eddy::tensor::nn::{self, Module};
use eddy::tensor::optim::Adam;
use std::path::Path;

#[test]
fn the_transformer_trains_as_pytorch_does_from_pytorchs_initial_state() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/parity/transformer");
    let fixture: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("losses.json")).unwrap()).unwrap();
    let want: Vec<f64> = (fixture["losses"].as_array().unwrap().iter())
        .map(|v| v.as_f64().unwrap())
        .collect();
    let num = |k: &str| fixture[k].as_f64().unwrap();
    let (batch, seq) = (num("batch") as usize, num("seq") as usize);
    let model = CharTransformer::new(TransformerConfig::default()).unwrap();
    assert_eq!(model.config.seq, seq);
    nn::load(&model, dir.join("init.safetensors")).unwrap();
    // The batch both sides compute: ids[b][t] = (7b + 13t + t² mod 5) mod 256.
    let id = |b: usize, t: usize| ((7 * b + 13 * t + (t * t) % 5) % 256) as i64;
    let x: Vec<i64> = (0..batch)
        .flat_map(|b| (0..seq).map(move |t| id(b, t)))
        .collect();
    let y: Vec<i64> = (0..batch)
        .flat_map(|b| (1..=seq).map(move |t| id(b, t)))
        .collect();
    let x = Tensor::from_vec(x, [batch, seq]).unwrap();
    let y = Tensor::from_vec(y, [batch * seq]).unwrap();
    let mut opt = Adam::adamw(model.parameters(), num("lr"), num("weight_decay")).unwrap();
    for (step, want) in want.iter().enumerate() {
        let got = train_step(&model, &mut opt, &x, &y)
            .unwrap()
            .item::<f32>()
            .unwrap() as f64;
        assert!(
            (got - want).abs() <= 1e-4,
            "step {step}: Eddy's loss {got}, PyTorch's {want}"
        );
    }
}
