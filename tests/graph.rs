//! Compiled graphs: a forward pass and a training step traced once and replayed as one
//! instruction give the values of eager execution bit for bit; parameters stay ordinary
//! tensors; signatures, host reads, kernel errors and state made inside the closure are
//! handled as documented.

#[path = "common/mod.rs"]
mod common;

use common::{bits, watchdog};
use eddy::models::mlp;
use eddy::tensor::graph::Graph;
use eddy::tensor::nn::Module;
use eddy::tensor::optim::{Adam, Optimizer, Sgd};
use eddy::tensor::{DType, Error, Tensor, manual_seed, with_engine};
use eddy::vm::Vm;
use std::cell::RefCell;

use DType::F32;

/// `b`'s parameters set to `a`'s (tests run in parallel, and share the seeded generator).
fn same_params(a: &dyn Module, b: &dyn Module) {
    let _g = eddy::tensor::no_grad();
    for (p, q) in a.parameters().iter().zip(b.parameters()) {
        q.copy_(p).unwrap();
    }
}

/// A training step of `model` with `opt`, as a graph's closure: inputs and class targets in,
/// the loss out.
fn training_step<'a, O: Optimizer>(
    model: &'a dyn Module,
    opt: &'a RefCell<O>,
) -> impl Fn(&[Tensor]) -> eddy::tensor::Result<Vec<Tensor>> + 'a {
    move |xs: &[Tensor]| {
        let mut opt = opt.borrow_mut();
        opt.zero_grad();
        let loss = model.forward(&xs[0])?.cross_entropy(&xs[1])?;
        loss.backward()?;
        opt.step()?;
        Ok(vec![loss])
    }
}

/// Inputs and class targets of a small batch.
fn batch(seed: u64, n: usize) -> (Tensor, Tensor) {
    manual_seed(seed);
    let x = Tensor::randn([n, 12], 0.0, 1.0, F32).unwrap();
    let y: Vec<i64> = (0..n as i64).map(|i| (i * 7 + seed as i64) % 4).collect();
    (x, Tensor::from_vec(y, [n]).unwrap())
}

#[test]
fn a_compiled_forward_gives_the_eager_values_bit_for_bit() {
    manual_seed(3);
    let model = mlp(&[12, 32, 16, 4]).unwrap();
    let g = Graph::new(|xs: &[Tensor]| Ok(vec![model.forward(&xs[0])?.log_softmax(1)?]));
    for seed in 0..4 {
        let (x, _) = batch(seed, 8);
        let eager = model.forward(&x).unwrap().log_softmax(1).unwrap();
        let compiled = g.run(&[&x]).unwrap();
        assert_eq!(bits(&compiled[0]), bits(&eager), "seed {seed}");
        assert_eq!(compiled[0].dims(), &[8, 4]);
        assert!(!compiled[0].requires_grad());
    }
    assert_eq!(g.compiled_signatures(), 1);
    // Another batch size compiles once more, and is right too.
    let (x, _) = batch(9, 3);
    let eager = model.forward(&x).unwrap().log_softmax(1).unwrap();
    assert_eq!(bits(&g.run(&[&x]).unwrap()[0]), bits(&eager));
    assert_eq!(g.compiled_signatures(), 2);
}

/// One model trained eagerly and a copy trained by a compiled step: the same losses and the
/// same parameters, bit for bit, after every step.
#[test]
fn a_compiled_training_step_matches_eager_training() {
    let eager_model = mlp(&[12, 24, 4]).unwrap();
    let model = mlp(&[12, 24, 4]).unwrap();
    same_params(&eager_model, &model);
    let mut eager_opt = Sgd::new(eager_model.parameters(), 0.1).unwrap();
    let opt = RefCell::new(Sgd::new(model.parameters(), 0.1).unwrap());
    let step = Graph::new(training_step(&model, &opt));
    for seed in 0..5 {
        let (x, y) = batch(seed, 16);
        eager_opt.zero_grad();
        let eager_loss = eager_model.forward(&x).unwrap().cross_entropy(&y).unwrap();
        eager_loss.backward().unwrap();
        eager_opt.step().unwrap();
        let loss = step.run(&[&x, &y]).unwrap();
        assert_eq!(bits(&loss[0]), bits(&eager_loss), "loss at step {seed}");
        for (p, q) in model.parameters().iter().zip(eager_model.parameters()) {
            assert_eq!(bits(p), bits(&q), "parameters after step {seed}");
        }
    }
    // The `grad`s the closure made hold the last run's values, as after an eager step; eager
    // code may drop them (`zero_grad`) between runs.
    for (p, q) in model.parameters().iter().zip(eager_model.parameters()) {
        assert_eq!(bits(&p.grad().unwrap()), bits(&q.grad().unwrap()));
    }
    opt.borrow_mut().zero_grad();
    eager_opt.zero_grad();
    let (x, y) = batch(7, 16);
    let loss = step.run(&[&x, &y]).unwrap();
    let eager_loss = eager_model.forward(&x).unwrap().cross_entropy(&y).unwrap();
    assert_eq!(bits(&loss[0]), bits(&eager_loss));
}

#[test]
fn parameters_written_by_eager_code_are_read_by_the_next_run() {
    let w = Tensor::from_vec(vec![1f32, 2., 3.], [3]).unwrap();
    let g = Graph::new(|xs: &[Tensor]| Ok(vec![xs[0].mul(&w)?]));
    let x = Tensor::ones([3], F32).unwrap();
    let first = g.run(&[&x]).unwrap();
    w.mul_scalar_(10.0).unwrap(); // in place, between two runs
    let second = g.run(&[&x]).unwrap();
    assert_eq!(first[0].to_vec::<f32>().unwrap(), [1., 2., 3.]);
    assert_eq!(second[0].to_vec::<f32>().unwrap(), [10., 20., 30.]);
    // An output that is an input's view or a parameter comes back as one.
    let g = Graph::new(|xs: &[Tensor]| Ok(vec![xs[0].t()?, w.clone(), xs[0].exp()?]));
    let m = Tensor::from_vec(vec![0f32, 1., 2., 3.], [2, 2]).unwrap();
    let out = g.run(&[&m]).unwrap();
    assert!(out[0].shares_storage(&m) && out[1].shares_storage(&w));
    assert_eq!(out[0].to_vec::<f32>().unwrap(), [0., 2., 1., 3.]);
    assert_eq!(out[1].to_vec::<f32>().unwrap(), [10., 20., 30.]);
}

#[test]
fn signatures_recompile_or_are_refused() {
    let g = Graph::new(|xs: &[Tensor]| Ok(vec![xs[0].sum_all()?])).fixed_signature();
    let a = Tensor::ones([2, 3], F32).unwrap();
    assert_eq!(g.run(&[&a]).unwrap()[0].item::<f32>().unwrap(), 6.0);
    let e = g.run(&[&Tensor::ones([3, 2], F32).unwrap()]).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { op: "graph", .. }), "{e}");
    let e = g
        .run(&[&Tensor::ones([2, 3], DType::F64).unwrap()])
        .unwrap_err();
    assert!(matches!(e, Error::DTypeMismatch { op: "graph", .. }), "{e}");
    // A view input is copied to the layout the plan was built for.
    let t = Tensor::arange(0.0, 6.0, 1.0, F32)
        .unwrap()
        .reshape([3, 2])
        .unwrap()
        .t()
        .unwrap();
    assert_eq!(g.run(&[&t]).unwrap()[0].item::<f32>().unwrap(), 15.0);
    // The same tensor twice is two inputs.
    let h = Graph::new(|xs: &[Tensor]| Ok(vec![xs[0].add(&xs[1])?]));
    assert_eq!(
        h.run(&[&a, &a]).unwrap()[0]
            .sum_all()
            .unwrap()
            .item::<f32>()
            .unwrap(),
        12.0
    );
}

#[test]
fn a_host_read_inside_the_closure_is_refused_and_nothing_is_left_behind() {
    let vm = Vm::builder().build().unwrap();
    with_engine(&vm, || {
        let g = Graph::new(|xs: &[Tensor]| {
            let s = xs[0].sum_all()?;
            if s.item::<f32>()? > 0.0 {
                Ok(vec![s])
            } else {
                Ok(vec![s.neg()?])
            }
        });
        let e = g.run(&[&Tensor::ones([2], F32).unwrap()]).unwrap_err();
        assert!(e.to_string().contains("inside a capture"), "{e}");
        assert_eq!(g.compiled_signatures(), 0);
        // The engine runs eager work as before, and a new capture may start.
        let x = Tensor::ones([2], F32).unwrap().add_scalar(1.0).unwrap();
        assert_eq!(x.to_vec::<f32>().unwrap(), [2., 2.]);
        let ok = Graph::new(|xs: &[Tensor]| Ok(vec![xs[0].neg()?]));
        assert_eq!(
            ok.run(&[&x]).unwrap()[0].to_vec::<f32>().unwrap(),
            [-2., -2.]
        );
        vm.sync().unwrap();
    });
}

/// An index out of range inside a plan: the run's outputs fail at their read with the op and
/// the closure's line; other tensors, the engine and the graph go on.
#[test]
fn a_kernel_error_inside_a_plan_poisons_only_that_run() {
    watchdog(60, || {
        let vm = Vm::builder().build().unwrap();
        with_engine(&vm, || {
            let table = Tensor::arange(0.0, 8.0, 1.0, F32)
                .unwrap()
                .reshape([4, 2])
                .unwrap();
            let line = line!() + 1;
            let g = Graph::new(|xs: &[Tensor]| Ok(vec![table.index_select(0, &xs[0])?.sum_all()?]));
            // Computed, so only the kernel sees the values.
            let idx = |v: Vec<i64>| {
                let t = Tensor::from_vec(v, [2]).unwrap();
                t.add(&t.zeros_like().unwrap()).unwrap()
            };
            let good = g.run(&[&idx(vec![0, 3])]).unwrap();
            let bad = g.run(&[&idx(vec![1, 9])]).unwrap();
            let after = g.run(&[&idx(vec![2, 2])]).unwrap();
            let e = bad[0].to_vec::<f32>().unwrap_err();
            assert_eq!(e.op(), Some("index_select"), "{e}");
            assert!(e.to_string().contains("index 9"), "{e}");
            let at = e.caller().unwrap();
            assert_eq!((at.file(), at.line()), (file!(), line), "{e}");
            assert_eq!(good[0].item::<f32>().unwrap(), 0. + 1. + 6. + 7.);
            assert_eq!(after[0].item::<f32>().unwrap(), 2. * (4. + 5.));
            assert_eq!(table.sum_all().unwrap().item::<f32>().unwrap(), 28.0);
            vm.clear_errors();
            vm.sync().unwrap();
        });
    });
}

/// An optimizer whose state its first step makes (`make` builds one over the parameters): a
/// graph that would make it is refused with `InvalidArgument` naming `op`; after one eager
/// step, compiled steps match eager steps of a twin bit for bit, parameters included.
fn state_is_refused_then_compiled_steps_match<O: Optimizer>(
    op: &str,
    make: impl Fn(Vec<Tensor>) -> O,
) {
    let model = mlp(&[12, 4]).unwrap();
    let twin = mlp(&[12, 4]).unwrap();
    same_params(&model, &twin);
    let opt = RefCell::new(make(model.parameters()));
    let mut twin_opt = make(twin.parameters());
    let (x, y) = batch(4, 5);
    let e = Graph::new(training_step(&model, &opt))
        .run(&[&x, &y])
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument { op: o, .. } if *o == op),
        "{e}"
    );
    assert!(e.to_string().contains("one eager step"), "{e}");
    let eager = |m: &dyn Module, o: &mut dyn Optimizer| {
        o.zero_grad();
        let l = m.forward(&x).unwrap().cross_entropy(&y).unwrap();
        l.backward().unwrap();
        o.step().unwrap();
        l
    };
    eager(&model, &mut *opt.borrow_mut());
    eager(&twin, &mut twin_opt);
    let g = Graph::new(training_step(&model, &opt));
    for k in 0..4 {
        let l = g.run(&[&x, &y]).unwrap();
        let t = eager(&twin, &mut twin_opt);
        assert_eq!(bits(&l[0]), bits(&t), "{op} step {k}");
    }
    for (p, q) in model.parameters().iter().zip(twin.parameters()) {
        assert_eq!(bits(p), bits(&q), "{op}");
    }
}

#[test]
fn state_made_inside_the_closure_is_refused_until_it_exists() {
    // Momentum buffers.
    state_is_refused_then_compiled_steps_match("Sgd", |ps| {
        Sgd::new(ps, 0.1).unwrap().momentum(0.9).unwrap()
    });
    // Adam's moments; its step counts live on the device, so each run counts its own step
    // and the bias corrections follow eager training's.
    state_is_refused_then_compiled_steps_match("Adam", |ps| Adam::new(ps, 0.01).unwrap());
}

/// The plan's intermediates share one arena laid out by lifetime: checked, and no larger
/// than what the same step holds at its peak when it runs eagerly.
#[test]
fn the_memory_plan_is_sound_and_no_larger_than_the_eager_peak() {
    let vm = Vm::builder().sync_mode(true).build().unwrap();
    with_engine(&vm, || {
        manual_seed(2);
        let model = mlp(&[64, 128, 128, 10]).unwrap();
        let mut opt = Sgd::new(model.parameters(), 0.05).unwrap();
        let (x, y) = {
            manual_seed(8);
            let x = Tensor::randn([32, 64], 0.0, 1.0, F32).unwrap();
            (
                x,
                Tensor::from_vec((0..32).map(|i| i % 10).collect::<Vec<i64>>(), [32]).unwrap(),
            )
        };
        let eager_step = |opt: &mut Sgd| {
            opt.zero_grad();
            let l = model.forward(&x).unwrap().cross_entropy(&y).unwrap();
            l.backward().unwrap();
            opt.step().unwrap();
            l.item::<f32>().unwrap()
        };
        eager_step(&mut opt); // the grads exist, as at every later step
        opt.zero_grad();
        let before = vm.alloc_stats();
        eager_step(&mut opt);
        let peak = vm.alloc_stats().peak_in_use - before.in_use;
        let opt = RefCell::new(opt);
        let g = Graph::new(training_step(&model, &opt));
        let c = g.compile(&[&x, &y]).unwrap();
        c.memory().check().unwrap();
        assert!(c.memory().sizes.len() > 10, "{c}");
        assert!(
            c.arena_bytes() <= peak,
            "arena {} > eager peak {peak}\n{c}",
            c.arena_bytes()
        );
        assert!(
            g.run(&[&x, &y]).unwrap()[0]
                .item::<f32>()
                .unwrap()
                .is_finite()
        );
    });
}

#[test]
fn dropping_a_graph_with_runs_in_flight_neither_hangs_nor_loses_them() {
    watchdog(60, || {
        let w = Tensor::full([64], 0.5, F32).unwrap();
        let g = Graph::new(|xs: &[Tensor]| Ok(vec![xs[0].mul(&w)?.add_scalar(1.0)?]));
        let mut x = Tensor::ones([64], F32).unwrap();
        for _ in 0..50 {
            x = g.run(&[&x]).unwrap().remove(0);
        }
        drop(g);
        // x_{k+1} = x_k / 2 + 1 converges to 2 from 1.
        let v = x.to_vec::<f32>().unwrap();
        assert!(v.iter().all(|&e| (e - 2.0).abs() < 1e-6), "{:?}", &v[..4]);
    });
}

/// One op of a random program: `kind` picks the op, `a` and `b` its operands among the values
/// made so far (each `[4, 3]`).
#[derive(Clone, Debug)]
struct RandomOp {
    kind: u8,
    a: usize,
    b: usize,
}

/// Runs `ops` on the inputs `xs` and the parameter `w` (`[3, 3]`), then back-propagates the
/// sum of the last value where it depends on `w`: returns the last value and the loss.
fn random_program(
    ops: &[RandomOp],
    xs: &[Tensor],
    w: &Tensor,
) -> eddy::tensor::Result<Vec<Tensor>> {
    let mut vals: Vec<Tensor> = xs.to_vec();
    for op in ops {
        let (a, b) = (&vals[op.a % vals.len()], &vals[op.b % vals.len()]);
        let v = match op.kind % 12 {
            0 => a.add(b)?,
            1 => a.mul(b)?,
            2 => a.sub(b)?,
            3 => a.relu()?,
            4 => a.tanh()?,
            5 => a.matmul(w)?,
            6 => a.softmax(1)?,
            7 => a.add(&b.sum(&[1], true)?)?,
            8 => a.mul_scalar(0.5)?.exp()?,
            9 => a.t()?.contiguous()?.t()?.mul(b)?,
            10 => a.maximum(b)?,
            _ => a.log_softmax(1)?.add(b)?,
        };
        vals.push(v);
    }
    let last = vals.last().expect("the inputs").clone();
    let loss = last.sum_all()?;
    if loss.requires_grad() {
        loss.backward()?;
    }
    Ok(vec![last, loss])
}

/// A random program's inputs from `seed`: two `[4, 3]` values and the parameter `w`.
fn program_inputs(seed: u64) -> (Tensor, Tensor, Tensor) {
    let x = (0..12).map(|i| ((i as u64 * 7 + seed) % 11) as f32 / 4.0 - 1.0);
    let y = (0..12).map(|i| ((i as u64 * 5 + seed) % 13) as f32 / 6.0 - 1.0);
    let w = Tensor::from_vec((0..9).map(|i| i as f32 / 8.0 - 0.5).collect(), [3, 3])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    (
        Tensor::from_vec(x.collect(), [4, 3]).unwrap(),
        Tensor::from_vec(y.collect(), [4, 3]).unwrap(),
        w,
    )
}

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random programs of 1 to 12 ops with a backward: compiled, they give eager execution's
    /// values and gradient bit for bit.
    #[test]
    fn random_programs_compile_to_the_eager_values_and_gradients(
        ops in proptest::collection::vec(
            (0u8..12, 0usize..16, 0usize..16).prop_map(|(kind, a, b)| RandomOp { kind, a, b }),
            1..12,
        ),
        seed in 0u64..1000,
    ) {
        let (x, y, w_eager) = program_inputs(seed);
        let w = w_eager.detach().requires_grad_(true).unwrap();
        let eager = random_program(&ops, &[x.clone(), y.clone()], &w_eager).unwrap();
        let g = Graph::new(|xs: &[Tensor]| {
            w.set_grad(None);
            random_program(&ops, xs, &w)
        });
        for _ in 0..2 {
            let out = g.run(&[&x, &y]).unwrap();
            prop_assert_eq!(bits(&out[0]), bits(&eager[0]));
            prop_assert_eq!(bits(&out[1]), bits(&eager[1]));
            let (gw, ge) = (w.grad(), w_eager.grad());
            prop_assert_eq!(gw.is_some(), ge.is_some());
            if let (Some(gw), Some(ge)) = (gw, ge) {
                prop_assert_eq!(bits(&gw), bits(&ge));
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// The same random programs in an eager loop on an engine with automatic promotion, each
    /// pass read back (a sync point): the passes run as plans once they repeat, and give eager
    /// execution's values and gradient bit for bit.
    #[test]
    fn random_programs_promoted_automatically_give_the_eager_values_and_gradients(
        ops in proptest::collection::vec(
            (0u8..12, 0usize..16, 0usize..16).prop_map(|(kind, a, b)| RandomOp { kind, a, b }),
            1..12,
        ),
        seed in 0u64..1000,
    ) {
        let pass = |x: &Tensor, y: &Tensor, w: &Tensor| {
            w.set_grad(None);
            let out = random_program(&ops, &[x.clone(), y.clone()], w).unwrap();
            let grad = w.grad().map(|g| bits(&g));
            (bits(&out[0]), bits(&out[1]), grad)
        };
        let plain = Vm::builder().build().unwrap();
        let expect = with_engine(&plain, || {
            let (x, y, w) = program_inputs(seed);
            pass(&x, &y, &w)
        });
        let auto = (Vm::builder().promotion(true))
            .promotion_measured(false)
            .build()
            .unwrap();
        let got: Vec<_> = with_engine(&auto, || {
            let (x, y, w) = program_inputs(seed);
            (0..5).map(|_| pass(&x, &y, &w)).collect()
        });
        for g in got {
            prop_assert_eq!(&g, &expect);
        }
        let s = auto.promotion_stats().unwrap();
        prop_assert!(s.plan_runs >= 1, "{:?}", s);
    }
}

/// With a lazy-job launcher, plan runs go to that stream (its own worker thread), ordered
/// against eager ops on the compute stream by what they read and write.
#[test]
fn plan_runs_go_to_the_launcher_stream_where_there_is_one() {
    watchdog(60, || {
        let vm = Vm::builder().lazy_launcher(true).build().unwrap();
        let launcher = vm.launcher_stream(eddy::Device::CPU).unwrap();
        with_engine(&vm, || {
            vm.set_trace(true);
            let w = Tensor::full([256], 2.0, F32).unwrap();
            let g = Graph::new(|xs: &[Tensor]| Ok(vec![xs[0].mul(&w)?.add_scalar(1.0)?]));
            let mut x = Tensor::ones([256], F32).unwrap();
            for _ in 0..20 {
                x = g.run(&[&x]).unwrap().remove(0);
                x = x.sub_scalar(1.0).unwrap(); // eager, on the compute stream, in between
            }
            // x_{k+1} = 2 x_k: 2^20.
            assert!(x.to_vec::<f32>().unwrap().iter().all(|&v| v == 1_048_576.0));
            let plans: Vec<_> = vm
                .trace_events()
                .into_iter()
                .filter(|e| e.name == "plan")
                .collect();
            assert_eq!(plans.len(), 20);
            assert!(plans.iter().all(|e| e.stream == launcher.0), "{plans:?}");
        });
    });
}

/// A failed step marks only what depends on it, as eager ops would: the run's other outputs
/// are written, and a later run fed the failed output passes the error on without a new one.
#[test]
fn a_failed_step_poisons_only_the_outputs_that_depend_on_it() {
    watchdog(60, || {
        let vm = Vm::builder().build().unwrap();
        with_engine(&vm, || {
            let table = Tensor::arange(0.0, 8.0, 1.0, F32)
                .unwrap()
                .reshape([4, 2])
                .unwrap();
            let g = Graph::new(|xs: &[Tensor]| {
                let picked = table.index_select(0, &xs[0])?.sum_all()?;
                let other = xs[1].mul_scalar(3.0)?;
                Ok(vec![picked, other])
            });
            let idx = {
                let t = Tensor::from_vec(vec![1i64, 9], [2]).unwrap();
                t.add(&t.zeros_like().unwrap()).unwrap()
            };
            let x = Tensor::from_vec(vec![1f32, 2.], [2]).unwrap();
            let out = g.run(&[&idx, &x]).unwrap();
            assert_eq!(
                out[1].to_vec::<f32>().unwrap(),
                [3., 6.],
                "independent of the failure"
            );
            let e = out[0].to_vec::<f32>().unwrap_err();
            assert!(e.to_string().contains("index 9"), "{e}");
            // The failed output fed to a second graph: its dependent carries the same error,
            // its other output is fine, and the engine reports one error.
            let h = Graph::new(|xs: &[Tensor]| Ok(vec![xs[0].neg()?, xs[1].neg()?]));
            let out2 = h.run(&[&out[0], &out[1]]).unwrap();
            assert_eq!(out2[1].to_vec::<f32>().unwrap(), [-3., -6.]);
            let e2 = out2[0].to_vec::<f32>().unwrap_err();
            assert_eq!(e2, e, "the root error, passed on");
            assert_eq!(vm.errors().len(), 1, "{:?}", vm.errors());
            vm.clear_errors();
            vm.sync().unwrap();
        });
    });
}

/// A run whose output does not fit fails at its read with `OutOfMemory`, nothing runs on
/// memory it does not have, and the engine and the graph go on.
#[test]
fn a_run_whose_output_does_not_fit_fails_at_the_read() {
    watchdog(60, || {
        let vm = Vm::builder().capacity(Some(1 << 20)).build().unwrap();
        with_engine(&vm, || {
            let g = Graph::new(|xs: &[Tensor]| Ok(vec![xs[0].mul_scalar(2.0)?]));
            let small = Tensor::ones([4], F32).unwrap();
            assert_eq!(
                g.run(&[&small]).unwrap()[0].to_vec::<f32>().unwrap(),
                [2.; 4]
            );
            let big = Tensor::ones([1], F32).unwrap().expand([200_000]).unwrap();
            let out = g.run(&[&big]); // its dense copy fits; the output beside it does not
            let e = match out {
                Ok(out) => out[0].to_vec::<f32>().unwrap_err(),
                Err(e) => e,
            };
            assert!(
                matches!(e, Error::Vm(eddy::vm::Error::OutOfMemory { .. })),
                "{e}"
            );
            vm.clear_errors();
            assert_eq!(
                g.run(&[&small]).unwrap()[0].to_vec::<f32>().unwrap(),
                [2.; 4]
            );
        });
    });
}
