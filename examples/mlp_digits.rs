//! Trains a two-layer MLP on the bundled handwritten digits with the public API only:
//! `cargo run --release --example mlp_digits`.

use eddy::data::{Dataset, default_path};
use eddy::tensor::nn::{Linear, Module, Relu, Sequential};
use eddy::tensor::optim::{Adam, Optimizer};
use eddy::{DType, Tensor, no_grad};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let data = Dataset::load(&default_path())?; // 1,797 images of 8×8 pixels, labels 0..10
    let (train, test) = data.split(0.2, 42); // hold out 20 %, seeded
    eddy::tensor::manual_seed(42);

    let model = Sequential::new()
        .add(Linear::new(64, 128, true, DType::F32)?)
        .add(Relu)
        .add(Linear::new(128, 10, true, DType::F32)?);
    let mut opt = Adam::new(model.parameters(), 1e-2)?;

    let batch = 64;
    for epoch in 1..=10 {
        let mut losses = Vec::new();
        for start in (0..train.len()).step_by(batch) {
            let (x, y) = train.batch(start..(start + batch).min(train.len()))?;
            opt.zero_grad();
            let loss = model.forward(&x)?.cross_entropy(&y)?; // returns at once
            loss.backward()?; // backward ops are engine instructions too
            opt.step()?;
            losses.push(loss); // not read yet: the engine runs ahead
        }
        // One sync per epoch: stack the losses and read their mean.
        let refs: Vec<&Tensor> = losses.iter().collect();
        let mean = Tensor::stack(&refs, 0)?.mean_all()?.item::<f32>()?;
        println!(
            "epoch {epoch:2}  loss {mean:.4}  test accuracy {:.2} %",
            accuracy(&model, &test)? * 100.0
        );
    }
    let acc = accuracy(&model, &test)?;
    assert!(acc > 0.9, "the MLP should learn the digits");
    Ok(())
}

/// The fraction of `set` that `model` classifies correctly.
fn accuracy(model: &Sequential, set: &Dataset) -> eddy::Result<f64> {
    let _guard = no_grad(); // no autograd graph for evaluation
    let (x, y) = set.batch(0..set.len())?;
    let hits = model.forward(&x)?.argmax(-1, false)?.eq(&y)?;
    let n = hits.to_dtype(DType::F32)?.sum_all()?.item::<f32>()?;
    Ok(n as f64 / set.len() as f64)
}
