//! The workloads of the first models users write: a small CNN's training step, a 3×3
//! convolution's throughput and causal attention's forward.

use super::reps;
use crate::tensor::nn::{Module, Sequential};
use crate::tensor::optim::Sgd;
use crate::{DType, Result, Tensor};
use std::time::Instant;

/// The CNN training workload's model and data: batch 64 of 1×28×28 (fixed random values and
/// labels) through [`crate::models::cnn`] of 28×28 images (conv(1→16, 3×3, padding 1),
/// ReLU, 2×2 max pool, conv(16→32, 3×3, padding 1), ReLU, 2×2 max pool, flatten,
/// Linear(1568→10)); SGD with lr 0.01.
///
/// # Errors
///
/// Engine errors.
///
/// # Examples
///
/// ```
/// use eddy::tensor::nn::Module;
/// let (model, _opt, x, y) = eddy::bench::cnn_setup()?;
/// assert_eq!((x.dims(), y.dims()), (&[64, 1, 28, 28][..], &[64][..]));
/// assert_eq!(model.parameters().len(), 6);
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn cnn_setup() -> Result<(Sequential, Sgd, Tensor, Tensor)> {
    crate::tensor::manual_seed(0);
    let model = crate::models::cnn(28, 10)?;
    let opt = Sgd::new(model.parameters(), 0.01)?;
    let x = Tensor::randn([64, 1, 28, 28], 0.0, 1.0, DType::F32)?;
    let y = Tensor::uniform([64], 0.0, 10.0, DType::F32)?
        .to_dtype(DType::I64)?
        .clamp(Some(0), Some(9))?;
    Ok((model, opt, x, y))
}

/// `cnn_train_ms_per_step`: the [`cnn_setup`] model's training steps (forward,
/// cross-entropy, backward, SGD), each synced on the loss; ms per step, 50 steps after 5
/// warm-up. Returns (step times, first loss, last loss).
///
/// # Examples
///
/// ```no_run
/// // Half a second of training: run it from `eddy bench`, not in a doctest.
/// let (ms, first, last) = eddy::bench::cnn_train()?;
/// assert_eq!(ms.len(), 50);
/// assert!(last < first);
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn cnn_train() -> Result<(Vec<f64>, f64, f64)> {
    let (model, mut opt, x, y) = cnn_setup()?;
    timed_steps(&model, &mut opt, &x, &y, 50)
}

/// 5 warm-up training steps, then `steps` timed ones, each synced on the loss: (ms per step,
/// first loss, last loss).
fn timed_steps(
    model: &dyn Module,
    opt: &mut dyn crate::tensor::optim::Optimizer,
    x: &Tensor,
    y: &Tensor,
    steps: usize,
) -> Result<(Vec<f64>, f64, f64)> {
    for _ in 0..5 {
        crate::models::train_step(model, opt, x, y)?.item::<f32>()?;
    }
    let mut times = Vec::with_capacity(steps);
    let (mut first, mut last) = (f64::NAN, f64::NAN);
    for i in 0..steps {
        let t = Instant::now();
        let l = crate::models::train_step(model, opt, x, y)?.item::<f32>()? as f64;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        if i == 0 {
            first = l;
        }
        last = l;
    }
    Ok((times, first, last))
}

/// `conv2d_3x3_gflops`: conv2d 64→64, 3×3, padding 1, of `[8, 64, 56, 56]` input, forward;
/// GFLOP/s with `2·N·H·W·Cout·Cin·9` flop per call.
///
/// # Examples
///
/// ```no_run
/// // Seconds of work: run it from `eddy bench`, not in a doctest.
/// let gflops = eddy::bench::conv2d_3x3()?;
/// assert_eq!(gflops.len(), 7);
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn conv2d_3x3() -> Result<Vec<f64>> {
    let (n, c, hw) = (8, 64, 56);
    let x = Tensor::randn([n, c, hw, hw], 0.0, 1.0, DType::F32)?;
    let w = Tensor::randn([c, c, 3, 3], 0.0, 0.1, DType::F32)?;
    let flop = 2.0 * (n * hw * hw * c * c * 9) as f64;
    x.conv2d(&w, None, 1, 1, 1, 1)?.sync()?;
    reps(1, || {
        let iters = 4;
        let t = Instant::now();
        for _ in 0..iters {
            x.conv2d(&w, None, 1, 1, 1, 1)?.sync()?;
        }
        Ok(flop * iters as f64 / t.elapsed().as_secs_f64() / 1e9)
    })
}

/// `attention_fwd_us`: causal scaled-dot-product attention forward over q, k, v of `[16, 4,
/// 64, 32]` (f32), synced on the output; µs per call, the median of runs of 20 calls.
///
/// # Examples
///
/// ```no_run
/// // Tens of milliseconds of work: run it from `eddy bench`, not in a doctest.
/// let us = eddy::bench::attention_fwd()?;
/// assert_eq!(us.len(), 7);
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn attention_fwd() -> Result<Vec<f64>> {
    let t = || Tensor::randn([16, 4, 64, 32], 0.0, 1.0, DType::F32);
    let (q, k, v) = (t()?, t()?, t()?);
    let causal = crate::tensor::AttentionOptions::causal();
    q.scaled_dot_product_attention(&k, &v, causal)?.sync()?;
    reps(1, || {
        let iters = 20;
        let t = Instant::now();
        for _ in 0..iters {
            q.scaled_dot_product_attention(&k, &v, causal)?.sync()?;
        }
        Ok(t.elapsed().as_secs_f64() * 1e6 / iters as f64)
    })
}

/// The transformer training workload's model and data: [`crate::models::CharTransformer`] of
/// the default [`crate::models::TransformerConfig`] (2 pre-norm causal blocks of width 128, 4
/// heads, feed-forward 512 with GELU, sequence 64, 256 tokens), batch 16 of fixed random ids
/// and next-token targets; AdamW with lr 1e-3.
///
/// # Errors
///
/// Engine errors.
///
/// # Examples
///
/// ```
/// use eddy::tensor::nn::Module;
/// let (model, _opt, x, y) = eddy::bench::transformer_setup()?;
/// assert_eq!((x.dims(), y.dims()), (&[16, 64][..], &[1024][..]));
/// assert_eq!(model.parameters().len(), 30);
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn transformer_setup() -> Result<(
    crate::models::CharTransformer,
    crate::tensor::optim::Adam,
    Tensor,
    Tensor,
)> {
    crate::tensor::manual_seed(0);
    let cfg = crate::models::TransformerConfig::default();
    let model = crate::models::CharTransformer::new(cfg)?;
    let opt = crate::tensor::optim::Adam::adamw(model.parameters(), 1e-3, 0.01)?;
    let ids = Tensor::uniform([16, cfg.seq + 1], 0.0, cfg.vocab as f64, DType::F32)?
        .to_dtype(DType::I64)?
        .clamp(Some(0), Some(cfg.vocab as i64 - 1))?;
    let x = ids.narrow(1, 0, cfg.seq)?.contiguous()?;
    let y = ids
        .narrow(1, 1, cfg.seq)?
        .contiguous()?
        .reshape([16 * cfg.seq])?;
    Ok((model, opt, x, y))
}

/// `transformer_train_ms_per_step`: the [`transformer_setup`] model's training steps
/// (forward, cross-entropy, backward, AdamW), each synced on the loss; ms per step, 30 steps
/// after 5 warm-up. Returns (step times, first loss, last loss).
///
/// # Examples
///
/// ```no_run
/// // A second of training: run it from `eddy bench`, not in a doctest.
/// let (ms, first, last) = eddy::bench::transformer_train()?;
/// assert_eq!(ms.len(), 30);
/// assert!(last < first);
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn transformer_train() -> Result<(Vec<f64>, f64, f64)> {
    let (model, mut opt, x, y) = transformer_setup()?;
    timed_steps(&model, &mut opt, &x, &y, 30)
}
