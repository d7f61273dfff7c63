//! The CNN of `eddy::models::cnn` against PyTorch from the same initial state: PyTorch's
//! initial weights (a safetensors file written by `compare/torch_cnn_fixture.py`, with
//! PyTorch's `state_dict` names) load into Eddy's model, both train with SGD on the same
//! batch, and every step's loss agrees within 1e-4.

use eddy::tensor::nn::{self, Module};
use eddy::tensor::optim::Sgd;
use eddy::{DType, Tensor};
use std::path::Path;

#[test]
fn the_cnn_trains_as_pytorch_does_from_pytorchs_initial_state() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/parity/cnn");
    let fixture: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("losses.json")).unwrap()).unwrap();
    let want: Vec<f64> = fixture["losses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let (batch, lr) = (
        fixture["batch"].as_u64().unwrap() as usize,
        fixture["lr"].as_f64().unwrap(),
    );
    let model = eddy::models::cnn(28, 10).unwrap();
    nn::load(&model, dir.join("init.safetensors")).unwrap();
    // The batch both sides compute: x[i] = sin(0.1 i) (in f64, stored f32), y[n] = 7n mod 10.
    let x: Vec<f32> = (0..batch * 28 * 28)
        .map(|i| (0.1 * i as f64).sin() as f32)
        .collect();
    let x = Tensor::from_vec(x, [batch, 28 * 28]).unwrap();
    let y: Vec<i64> = (0..batch as i64).map(|n| (7 * n) % 10).collect();
    let y = Tensor::from_vec(y, [batch]).unwrap();
    let mut opt = Sgd::new(model.parameters(), lr).unwrap();
    for (step, want) in want.iter().enumerate() {
        let got = eddy::models::train_step(&model, &mut opt, &x, &y)
            .unwrap()
            .item::<f32>()
            .unwrap() as f64;
        assert!(
            (got - want).abs() <= 1e-4,
            "step {step}: Eddy's loss {got}, PyTorch's {want}"
        );
    }
    assert_eq!(model.parameters()[0].dtype(), DType::F32);
}
