//! Compiled graphs run by actors: consecutive runs in flight at once give the eager values bit
//! for bit, runs that read each other's outputs and eager code that reads or writes what a
//! run touches are ordered by the engine, and an engine without a launcher stream refuses.

#[path = "common/mod.rs"]
mod common;

use common::{bits, watchdog};
use eddy::models::mlp;
use eddy::tensor::graph::Graph;
use eddy::tensor::nn::Module;
use eddy::tensor::{DType, Error, Tensor, manual_seed, no_grad, with_engine};
use eddy::vm::Vm;

fn launcher_vm() -> Vm {
    Vm::builder().lazy_launcher(true).build().unwrap()
}

#[test]
fn runs_in_flight_at_once_give_the_eager_values() {
    watchdog(120, || {
        let vm = launcher_vm();
        with_engine(&vm, || {
            manual_seed(3);
            let model = mlp(&[20, 32, 32, 5]).unwrap();
            let _g = no_grad();
            for slots in [1, 2, 3] {
                let g = Graph::new(|xs: &[Tensor]| Ok(vec![model.forward(&xs[0])?.softmax(1)?]))
                    .actors(slots, 3);
                let xs: Vec<Tensor> = (0..12)
                    .map(|k| Tensor::randn([4, 20], k as f64 * 0.1, 1.0, DType::F32).unwrap())
                    .collect();
                // Every run launched before any is read.
                let outs: Vec<Tensor> = xs.iter().map(|x| g.run(&[x]).unwrap().remove(0)).collect();
                for (x, y) in xs.iter().zip(&outs) {
                    let eager = model.forward(x).unwrap().softmax(1).unwrap();
                    assert_eq!(bits(y), bits(&eager), "{slots} slot(s)");
                }
            }
        });
    });
}

#[test]
fn a_run_that_reads_the_previous_output_waits_for_it() {
    watchdog(120, || {
        let vm = launcher_vm();
        with_engine(&vm, || {
            let w = Tensor::linspace(0.5, 1.5, 64, DType::F32).unwrap();
            let step = |x: &Tensor| -> eddy::tensor::Result<Tensor> {
                x.mul(&w)?
                    .tanh()?
                    .add_scalar(0.25)?
                    .sum(&[0], true)?
                    .add(x)?
                    .mul_scalar(0.5)
            };
            let g = Graph::new(|xs: &[Tensor]| Ok(vec![step(&xs[0])?])).actors(2, 2);
            let (mut x, mut e) = (
                Tensor::ones([64], DType::F32).unwrap(),
                Tensor::ones([64], DType::F32).unwrap(),
            );
            for _ in 0..30 {
                x = g.run(&[&x]).unwrap().remove(0);
                e = step(&e).unwrap();
            }
            assert_eq!(bits(&x), bits(&e));
        });
    });
}

#[test]
fn eager_writes_between_runs_are_ordered_against_runs_in_flight() {
    watchdog(120, || {
        let vm = launcher_vm();
        with_engine(&vm, || {
            let w = Tensor::ones([256], DType::F32).unwrap();
            let g =
                Graph::new(|xs: &[Tensor]| Ok(vec![xs[0].mul(&w)?.exp()?.sum_all()?])).actors(2, 2);
            let x = Tensor::linspace(-1.0, 1.0, 256, DType::F32).unwrap();
            let mut outs = Vec::new();
            let mut expected = Vec::new();
            for k in 0..10 {
                outs.push(g.run(&[&x]).unwrap().remove(0));
                expected.push(x.mul(&w).unwrap().exp().unwrap().sum_all().unwrap());
                // Written while the runs that read it may still be in flight.
                w.add_scalar_(0.1 * k as f64).unwrap();
            }
            for (y, e) in outs.iter().zip(&expected) {
                assert_eq!(bits(y), bits(e));
            }
        });
    });
}

#[test]
fn an_engine_without_a_launcher_refuses_actors() {
    watchdog(60, || {
        let vm = Vm::builder().build().unwrap();
        with_engine(&vm, || {
            let g = Graph::new(|xs: &[Tensor]| Ok(vec![xs[0].exp()?])).actors(2, 2);
            let e = g
                .run(&[&Tensor::zeros([3], DType::F32).unwrap()])
                .unwrap_err();
            assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
            assert!(e.to_string().contains("lazy_launcher"), "{e}");
        });
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

/// `ops` on the inputs `xs` and the weight `w` (`[3, 3]`): every value made, in order.
fn random_forward(
    ops: &[RandomOp],
    xs: &[Tensor],
    w: &Tensor,
) -> eddy::tensor::Result<Vec<Tensor>> {
    let mut vals: Vec<Tensor> = xs.to_vec();
    for op in ops {
        let (a, b) = (&vals[op.a % vals.len()], &vals[op.b % vals.len()]);
        let v = match op.kind % 10 {
            0 => a.add(b)?,
            1 => a.mul(b)?,
            2 => a.sub(b)?.relu()?,
            3 => a.tanh()?,
            4 => a.matmul(w)?,
            5 => a.softmax(1)?,
            6 => a.add(&b.sum(&[1], true)?)?,
            7 => a.mul_scalar(0.5)?.exp()?,
            8 => a.t()?.contiguous()?.t()?.mul(b)?,
            _ => a.maximum(b)?,
        };
        vals.push(v);
    }
    Ok(vals.split_off(xs.len()))
}

use proptest::prelude::*;

/// Runs `g` on every batch (all launched before any is read) and compares with eager.
fn check<F: Fn(&[Tensor]) -> eddy::tensor::Result<Vec<Tensor>>>(
    g: &Graph<F>,
    batches: &[[Tensor; 2]],
    ops: &[RandomOp],
    w: &Tensor,
) -> Result<(), TestCaseError> {
    let outs: Vec<Vec<Tensor>> = batches
        .iter()
        .map(|[x, y]| g.run(&[x, y]).unwrap())
        .collect();
    for ([x, y], out) in batches.iter().zip(&outs) {
        let eager = random_forward(ops, &[x.clone(), y.clone()], w).unwrap();
        prop_assert_eq!(out.len(), eager.len());
        for (o, e) in out.iter().zip(&eager) {
            prop_assert_eq!(bits(o), bits(e));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Random forward programs of 1 to 12 ops, several runs in flight at once: run in order and
    /// run by actors (one and two slots), they give eager execution's values bit for bit.
    #[test]
    fn random_programs_run_by_actors_give_the_eager_values(
        ops in proptest::collection::vec(
            (0u8..10, 0usize..16, 0usize..16).prop_map(|(kind, a, b)| RandomOp { kind, a, b }),
            1..12,
        ),
        seed in 0u64..1000,
    ) {
        let vm = launcher_vm();
        let ok: Result<(), TestCaseError> = with_engine(&vm, || {
            let w = Tensor::from_vec((0..9).map(|i| i as f32 / 8.0 - 0.5).collect(), [3, 3]).unwrap();
            let input = |k: u64, m: u64| {
                let v = (0..12).map(|i| ((i as u64 * m + seed + k) % 11) as f32 / 4.0 - 1.0).collect();
                Tensor::from_vec(v, [4, 3]).unwrap()
            };
            let batches: Vec<[Tensor; 2]> = (0..4).map(|k| [input(k, 7), input(k, 5)]).collect();
            let in_order = Graph::new(|xs: &[Tensor]| random_forward(&ops, xs, &w));
            let g1 = Graph::new(|xs: &[Tensor]| random_forward(&ops, xs, &w)).actors(1, 2);
            let g2 = Graph::new(|xs: &[Tensor]| random_forward(&ops, xs, &w)).actors(2, 3);
            check(&in_order, &batches, &ops, &w)?;
            check(&g1, &batches, &ops, &w)?;
            check(&g2, &batches, &ops, &w)?;
            Ok(())
        });
        ok?;
    }
}
