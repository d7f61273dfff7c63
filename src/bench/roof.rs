//! Roofs that bound a workload from below: its unavoidable kernels alone.

use crate::{DType, Result, Tensor, no_grad};
use std::time::Instant;

/// [`mlp_train`](super::mlp_train)'s eight matrix products per step, the least any
/// implementation of that step computes, and nothing else: ms per step over 50 steps, each
/// synced once on its results. Forward `x·W1ᵀ`, `a1·W2ᵀ`, `a2·W3ᵀ`; backward the three
/// weight gradients `dYᵀ·X` and the two input gradients `dY·W` the step needs (not the
/// batch's own). They run through Eddy's matmul on the same shapes and views as the step's
/// (its kernels are faster on these shapes than the `gemm` crate called directly), without
/// autograd, bias, ReLU, loss or update; the engine's cost of eight ops is about a
/// thousandth of the time. The step itself can only be slower, so where this roof is above
/// a target, the target is out of reach on the machine.
///
/// # Errors
///
/// Engine errors.
///
/// # Examples
///
/// ```no_run
/// // Seconds of products: run it from `eddy bench --roof`, not in a doctest.
/// let ms = eddy::bench::mlp_train_roof()?;
/// assert_eq!(ms.len(), 50);
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn mlp_train_roof() -> Result<Vec<f64>> {
    const B: usize = 128;
    let dims = [784usize, 512, 512, 10];
    let _g = no_grad();
    let x = Tensor::randn([B, dims[0]], 0.0, 1.0, DType::F32)?;
    let ws = (0..3)
        .map(|l| Tensor::randn([dims[l + 1], dims[l]], 0.0, 0.05, DType::F32))
        .collect::<Result<Vec<_>>>()?;
    let step = || -> Result<Vec<Tensor>> {
        // Forward: each layer's input times its weight, transposed.
        let mut acts = vec![x.clone()];
        for w in &ws {
            let a = acts.last().expect("the input").matmul(&w.t()?)?;
            acts.push(a);
        }
        // Backward, from the last layer, with each output standing in for its gradient (the
        // same shape): the weight's gradient, then the input's where a layer is below.
        let mut dy = acts[3].clone();
        let mut grads = Vec::new();
        for l in (0..3).rev() {
            grads.push(dy.t()?.matmul(&acts[l])?);
            if l > 0 {
                dy = dy.matmul(&ws[l])?;
            }
        }
        Ok(grads)
    };
    let run = || -> Result<()> { step()?.iter().try_for_each(Tensor::sync) };
    for _ in 0..5 {
        run()?; // warm-up: the pool's threads, scratch and the caches
    }
    (0..50)
        .map(|_| {
            let t = Instant::now();
            run()?;
            Ok(t.elapsed().as_secs_f64() * 1e3)
        })
        .collect()
}
