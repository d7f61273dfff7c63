//! The compiled-graph workloads: the eager workloads' programs run as graphs
//! ([`crate::tensor::graph::Graph`]), compiled before the clock starts.

use super::{check, mlp_setup, reps};
use crate::models::mlp;
use crate::tensor::graph::Graph;
use crate::tensor::manual_seed as manual_seed_all;
use crate::tensor::nn::Module;
use crate::tensor::optim::Optimizer;
use crate::{DType, Result, Tensor, no_grad};
use std::cell::RefCell;
use std::time::Instant;

/// [`dispatch_small`](super::dispatch_small)'s chain of 10,000 adds on 16 elements as one
/// compiled graph: ns per op, including the run's launch and one sync.
///
/// # Examples
///
/// ```no_run
/// // Seconds of work: run it from `eddy bench`, not in a doctest.
/// let ns_per_op = eddy::bench::chain_graph()?;
/// assert_eq!(ns_per_op.len(), 7);
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn chain_graph() -> Result<Vec<f64>> {
    let x = Tensor::ones([16], DType::F32)?;
    let y0 = Tensor::zeros([16], DType::F32)?;
    let g = Graph::new(|xs: &[Tensor]| {
        let mut y = xs[0].clone();
        for _ in 0..10_000 {
            y = y.add(&xs[1])?;
        }
        Ok(vec![y])
    });
    g.compile(&[&y0, &x])?;
    reps(1, || {
        y0.sync()?;
        let t = Instant::now();
        let y = g.run(&[&y0, &x])?.remove(0);
        y.sync()?;
        let ns = t.elapsed().as_nanos() as f64 / 10_000.0;
        check(y.to_vec::<f32>()?[0] == 10_000.0, "chain_graph: wrong sum")?;
        Ok(ns)
    })
}

/// [`mlp_train`](super::mlp_train)'s step (forward, cross-entropy, backward, SGD update) as
/// one compiled graph, synced on the loss: ms per step over 50 steps.
///
/// # Examples
///
/// ```no_run
/// // Seconds of training: run it from `eddy bench`, not in a doctest.
/// let ms_per_step = eddy::bench::mlp_train_graph()?;
/// assert_eq!(ms_per_step.len(), 50);
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn mlp_train_graph() -> Result<Vec<f64>> {
    let (model, opt, x, y) = mlp_setup()?;
    let opt = RefCell::new(opt);
    let g = Graph::new(|xs: &[Tensor]| {
        let mut opt = opt.borrow_mut();
        opt.zero_grad();
        let loss = model.forward(&xs[0])?.cross_entropy(&xs[1])?;
        loss.backward()?;
        opt.step()?;
        Ok(vec![loss])
    });
    let first = g.run(&[&x, &y])?.remove(0).item::<f32>()?;
    for _ in 0..4 {
        g.run(&[&x, &y])?.remove(0).item::<f32>()?;
    }
    let mut times = Vec::with_capacity(50);
    let mut last = first;
    for _ in 0..50 {
        let t = Instant::now();
        last = g.run(&[&x, &y])?.remove(0).item::<f32>()?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    check(last < first, "mlp_train_graph: the loss did not fall")?;
    Ok(times)
}

/// [`mlp_infer`](super::mlp_infer)'s batch-1 forward as one compiled graph, synced every
/// time: µs per forward (300 per repetition).
///
/// # Examples
///
/// ```no_run
/// // 300 forwards per repetition: run it from `eddy bench`, not in a doctest.
/// let us_per_forward = eddy::bench::mlp_infer_graph()?;
/// assert_eq!(us_per_forward.len(), 7);
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn mlp_infer_graph() -> Result<Vec<f64>> {
    manual_seed_all(0);
    let model = mlp(&[784, 512, 512, 10])?;
    let x = Tensor::randn([1, 784], 0.0, 1.0, DType::F32)?;
    let g = Graph::new(|xs: &[Tensor]| {
        let _g = no_grad();
        Ok(vec![model.forward(&xs[0])?])
    });
    let eager = {
        let _g = no_grad();
        model.forward(&x)?.to_vec::<f32>()?
    };
    check(
        g.run(&[&x])?[0].to_vec::<f32>()? == eager,
        "mlp_infer_graph: not the eager values",
    )?;
    reps(1, || {
        let t = Instant::now();
        for _ in 0..300 {
            g.run(&[&x])?[0].sync()?;
        }
        Ok(t.elapsed().as_secs_f64() * 1e6 / 300.0)
    })
}

/// [`mlp_train`](super::mlp_train) (each step synced on its loss) on an engine with automatic
/// promotion on, promoting every recurring window whatever the clock says
/// (`VmBuilder::promotion_measured(false)`): the eager code unchanged, its recurring steps run
/// as plans. ms per step over
/// 50 steps, after the same 5 warm-up steps (during which the engine sees the step repeat and
/// compiles it).
///
/// # Examples
///
/// ```no_run
/// // Seconds of training: run it from `eddy bench`, not in a doctest.
/// let ms_per_step = eddy::bench::mlp_train_promoted()?;
/// assert_eq!(ms_per_step.len(), 50);
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn mlp_train_promoted() -> Result<Vec<f64>> {
    // Every step promoted, the timing verdicts aside: this measures the promoted step.
    let vm = (crate::vm::Vm::builder().promotion(true))
        .promotion_measured(false)
        .build()?;
    let (times, first, last) = crate::tensor::with_engine(&vm, super::mlp_train)?;
    check(last < first, "mlp_train_promoted: the loss did not fall")?;
    let promoted = vm.promotion_stats().map_or(0, |s| s.plan_runs);
    check(
        promoted >= 45,
        "mlp_train_promoted: the steps were not promoted",
    )?;
    Ok(times)
}
