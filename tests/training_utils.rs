//! Gradient clipping (`nn::clip_grad_norm`, `nn::clip_grad_value`), learning-rate schedules
//! (`optim::lr_scheduler`) and the optimizers' hyperparameter checks, against references
//! written out here in plain f64.

use eddy::tensor::nn::{self, Init, Linear, Module};
use eddy::tensor::optim::lr_scheduler::{Schedule, Scheduler};
use eddy::tensor::optim::{Adam, Optimizer, Sgd};
use eddy::tensor::{DType, Error, Tensor};

fn leaf(v: Vec<f32>, dims: &[usize]) -> Tensor {
    Tensor::from_vec(v, dims.to_vec())
        .unwrap()
        .requires_grad_(true)
        .unwrap()
}

fn grad_of(p: &Tensor) -> Vec<f64> {
    p.grad().expect("a gradient").to_f64_vec().unwrap()
}

/// The joint p-norm of `grads`, in f64.
fn ref_norm(grads: &[Vec<f64>], p: f64) -> f64 {
    let all = grads.iter().flatten();
    if p.is_infinite() {
        all.fold(0.0, |m, g| m.max(g.abs()))
    } else {
        all.map(|g| g.abs().powf(p)).sum::<f64>().powf(1.0 / p)
    }
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * (1.0 + b.abs())
}

#[test]
fn clip_grad_norm_scales_every_gradient_by_the_joint_norm() {
    let ga = vec![3.0f32, -4.0, 1.5, 0.25, -2.0, 7.0];
    let gb = vec![-1.0f32, 0.5, 12.0];
    for p in [2.0, 1.0, 3.0, f64::INFINITY] {
        for max_norm in [0.5, 5.0, 1e3] {
            let a = leaf(vec![0.0; 6], &[2, 3]);
            let b = leaf(vec![0.0; 3], &[3]);
            a.set_grad(Some(Tensor::from_vec(ga.clone(), [2, 3]).unwrap()));
            b.set_grad(Some(Tensor::from_vec(gb.clone(), [3]).unwrap()));
            let before: Vec<Vec<f64>> = vec![grad_of(&a), grad_of(&b)];
            let want = ref_norm(&before, p);
            let total = nn::clip_grad_norm(&[a.clone(), b.clone()], max_norm, p).unwrap();
            assert_eq!(total.dtype(), DType::F32);
            assert!(total.dims().is_empty());
            let got = total.item::<f32>().unwrap() as f64;
            assert!(close(got, want, 1e-5), "p={p}: norm {got} vs {want}");
            let factor = (max_norm / (want + 1e-6)).min(1.0);
            for (p_, g0) in [&a, &b].into_iter().zip(&before) {
                assert_eq!(p_.grad().unwrap().dims(), p_.dims());
                for (g, g0) in grad_of(p_).iter().zip(g0) {
                    assert!(
                        close(*g, g0 * factor, 1e-5),
                        "p={p} max={max_norm}: {g} vs {}",
                        g0 * factor
                    );
                }
            }
            if factor < 1.0 {
                let after = ref_norm(&[grad_of(&a), grad_of(&b)], p);
                assert!(close(after, max_norm, 1e-4), "clipped norm {after}");
            }
        }
    }
}

#[test]
fn clip_grad_norm_scales_a_gradient_shared_by_two_parameters_once_for_each() {
    // d(a + b)/da and d(a + b)/db are the same upstream gradient: if the engine hands both
    // leaves one tensor, an in-place scale would hit it twice.
    let a = leaf(vec![1.0, 2.0], &[2]);
    let b = leaf(vec![3.0, 4.0], &[2]);
    let w = Tensor::from_vec(vec![3f32, 4.0], [2]).unwrap();
    a.add(&b)
        .unwrap()
        .mul(&w)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(grad_of(&a), [3.0, 4.0]);
    assert_eq!(grad_of(&b), [3.0, 4.0]);
    let total = nn::clip_grad_norm(&[a.clone(), b.clone()], 1.0, 2.0).unwrap();
    let want = 50f64.sqrt();
    assert!(close(total.item::<f32>().unwrap() as f64, want, 1e-6));
    for p in [&a, &b] {
        let g = grad_of(p);
        assert!(
            close(g[0], 3.0 / want, 1e-5) && close(g[1], 4.0 / want, 1e-5),
            "{g:?}"
        );
    }
}

#[test]
fn clip_grad_norm_skips_parameters_without_gradients_and_handles_none() {
    let a = leaf(vec![0.0; 2], &[2]);
    let b = leaf(vec![0.0; 2], &[2]);
    b.set_grad(Some(Tensor::from_vec(vec![6f32, 8.0], [2]).unwrap()));
    let total = nn::clip_grad_norm(&[a.clone(), b.clone()], 5.0, 2.0).unwrap();
    assert!(close(total.item::<f32>().unwrap() as f64, 10.0, 1e-6));
    assert!(a.grad().is_none());
    let g = grad_of(&b);
    assert!(close(g[0], 3.0, 1e-5) && close(g[1], 4.0, 1e-5), "{g:?}");

    a.set_grad(None);
    b.set_grad(None);
    let none = nn::clip_grad_norm(&[a, b], 1.0, 2.0).unwrap();
    assert_eq!(none.item::<f32>().unwrap(), 0.0);
    assert_eq!(
        nn::clip_grad_norm(&[], 1.0, 2.0)
            .unwrap()
            .item::<f32>()
            .unwrap(),
        0.0
    );
}

#[test]
fn clip_grad_norm_works_in_f64_when_a_gradient_is_f64_and_keeps_each_dtype() {
    let a = Tensor::zeros([2], DType::F64)
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    let b = Tensor::zeros([1], DType::F16)
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    a.set_grad(Some(Tensor::from_vec(vec![1e-3f64, 2e-3], [2]).unwrap()));
    b.set_grad(Some(Tensor::full([1], 2.0, DType::F16).unwrap()));
    let total = nn::clip_grad_norm(&[a.clone(), b.clone()], 1.0, 2.0).unwrap();
    assert_eq!(total.dtype(), DType::F64);
    let want = (1e-6f64 + 4e-6 + 4.0).sqrt();
    assert!(close(total.item::<f64>().unwrap(), want, 1e-12));
    assert_eq!(a.grad().unwrap().dtype(), DType::F64);
    assert_eq!(b.grad().unwrap().dtype(), DType::F16);
    assert!(close(grad_of(&a)[1], 2e-3 / (want + 1e-6), 1e-9));
    assert!(close(grad_of(&b)[0], 2.0 / (want + 1e-6), 1e-3));
}

#[test]
fn a_non_finite_gradient_makes_every_clipped_gradient_nan_as_in_pytorch() {
    let a = leaf(vec![0.0; 2], &[2]);
    let b = leaf(vec![0.0; 1], &[1]);
    a.set_grad(Some(
        Tensor::from_vec(vec![f32::INFINITY, 1.0], [2]).unwrap(),
    ));
    b.set_grad(Some(Tensor::from_vec(vec![1f32], [1]).unwrap()));
    let total = nn::clip_grad_norm(&[a.clone(), b.clone()], 1.0, 2.0).unwrap();
    assert_eq!(total.item::<f32>().unwrap(), f32::INFINITY);
    // factor = 1 / inf = 0: inf · 0 is NaN, the finite ones become 0.
    assert!(grad_of(&a)[0].is_nan());
    assert_eq!(grad_of(&b), [0.0]);
}

#[test]
fn bad_clipping_arguments_fail_at_the_call_and_leave_the_gradients_alone() {
    let a = leaf(vec![0.0; 2], &[2]);
    a.set_grad(Some(Tensor::from_vec(vec![30f32, 40.0], [2]).unwrap()));
    let ps = [a.clone()];
    for (max_norm, p) in [
        (-1.0, 2.0),
        (f64::NAN, 2.0),
        (f64::INFINITY, 2.0),
        (1.0, 0.0),
        (1.0, -2.0),
        (1.0, f64::NAN),
        (1.0, f64::NEG_INFINITY),
    ] {
        match nn::clip_grad_norm(&ps, max_norm, p) {
            Err(Error::InvalidArgument { at: _, op, message }) => {
                assert_eq!(op, "clip_grad_norm");
                assert!(!message.is_empty());
            }
            other => panic!("max_norm {max_norm}, p {p}: {:?}", other.map(|_| ())),
        }
    }
    for c in [-0.5, f64::NAN, f64::INFINITY] {
        assert!(matches!(
            nn::clip_grad_value(&ps, c),
            Err(Error::InvalidArgument {
                op: "clip_grad_value",
                ..
            })
        ));
    }
    assert_eq!(grad_of(&a), [30.0, 40.0]);

    // An integer gradient (set by hand) cannot be clipped; the float one beside it is untouched.
    let i = Tensor::from_vec(vec![1f32], [1])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    i.set_grad(Some(Tensor::from_vec(vec![5i64], [1]).unwrap()));
    let both = [a.clone(), i];
    assert!(matches!(
        nn::clip_grad_norm(&both, 1.0, 2.0),
        Err(Error::UnsupportedDType {
            at: _,
            op: "clip_grad_norm",
            dtype: DType::I64
        })
    ));
    assert!(matches!(
        nn::clip_grad_value(&both, 1.0),
        Err(Error::UnsupportedDType {
            at: _,
            op: "clip_grad_value",
            dtype: DType::I64
        })
    ));
    assert_eq!(grad_of(&a), [30.0, 40.0]);
}

#[test]
fn clip_grad_value_clamps_each_element() {
    let a = leaf(vec![0.0; 4], &[2, 2]);
    a.set_grad(Some(
        Tensor::from_vec(vec![-3f32, 0.25, 2.0, -0.5], [2, 2]).unwrap(),
    ));
    let b = leaf(vec![0.0], &[1]);
    nn::clip_grad_value(&[a.clone(), b.clone()], 0.5).unwrap();
    assert_eq!(grad_of(&a), [-0.5, 0.25, 0.5, -0.5]);
    assert!(b.grad().is_none());
}

/// The rates an optimizer sees over `epochs` scheduler steps (epoch 0 first).
fn rates(lr: f64, schedule: Schedule, epochs: usize) -> Vec<f64> {
    let w = leaf(vec![0.0], &[1]);
    let mut opt = Sgd::new(vec![w], lr).unwrap();
    let mut s = Scheduler::new(&mut opt, schedule).unwrap();
    let mut out = vec![opt.lr()];
    for e in 1..=epochs {
        let r = s.step(&mut opt);
        assert_eq!(r, opt.lr());
        assert_eq!(r, s.lr_at(e));
        assert_eq!(s.epoch(), e);
        out.push(r);
    }
    out
}

fn assert_rates(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len());
    for (e, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(close(*g, *w, 1e-12), "epoch {e}: {g} vs {w} ({got:?})");
    }
}

#[test]
fn schedules_follow_pytorchs_recursive_forms() {
    // PyTorch's recursive (chainable) updates, stepped here one epoch at a time: the
    // scheduler computes closed forms, so the two must agree.
    let (lr, n) = (0.5, 25);
    let mut step = vec![lr];
    let mut exp = vec![lr];
    let mut multi = vec![lr];
    let mut cos = vec![lr];
    let mut lin = vec![lr * 0.25];
    let (t_max, eta_min) = (7usize, 0.01);
    for e in 1..=n {
        let last = |v: &Vec<f64>| *v.last().unwrap();
        step.push(if e % 3 == 0 {
            last(&step) * 0.5
        } else {
            last(&step)
        });
        exp.push(last(&exp) * 0.9);
        let hits = [4usize, 9, 9].iter().filter(|&&m| m == e).count();
        multi.push(last(&multi) * 0.1f64.powi(hits as i32));
        // The closed form of CosineAnnealingLR, written from PyTorch's docs.
        let pi = std::f64::consts::PI;
        cos.push(eta_min + (lr - eta_min) * (1.0 + (pi * e as f64 / t_max as f64).cos()) / 2.0);
        // LinearLR's recursive form: lr · (1 + (end − start) / (total · start + (e − 1)(end − start))).
        let (s0, s1, total) = (0.25, 1.0, 8usize);
        lin.push(if e > total {
            last(&lin)
        } else {
            last(&lin) * (1.0 + (s1 - s0) / (total as f64 * s0 + (e - 1) as f64 * (s1 - s0)))
        });
    }
    assert_rates(
        &rates(
            lr,
            Schedule::Step {
                step_size: 3,
                gamma: 0.5,
            },
            n,
        ),
        &step,
    );
    assert_rates(&rates(lr, Schedule::Exponential { gamma: 0.9 }, n), &exp);
    assert_rates(
        &rates(
            lr,
            Schedule::MultiStep {
                milestones: vec![9, 4, 9],
                gamma: 0.1,
            },
            n,
        ),
        &multi,
    );
    assert_rates(
        &rates(lr, Schedule::CosineAnnealing { t_max, eta_min }, n),
        &cos,
    );
    assert_rates(
        &rates(
            lr,
            Schedule::Linear {
                start_factor: 0.25,
                end_factor: 1.0,
                total_iters: 8,
            },
            n,
        ),
        &lin,
    );
    // Spot values a reader can check by hand.
    let c = rates(
        1.0,
        Schedule::CosineAnnealing {
            t_max: 4,
            eta_min: 0.0,
        },
        8,
    );
    assert_rates(
        &c,
        &[
            1.0,
            0.8535533905932737,
            0.5,
            0.14644660940672627,
            0.0,
            0.14644660940672627,
            0.5,
            0.8535533905932737,
            1.0,
        ],
    );
}

#[test]
fn bad_schedules_are_refused_with_pytorchs_names_and_leave_the_optimizer_alone() {
    let w = leaf(vec![0.0], &[1]);
    let mut opt = Sgd::new(vec![w], 0.1).unwrap();
    let cases = [
        (
            Schedule::Step {
                step_size: 0,
                gamma: 0.5,
            },
            "StepLR",
        ),
        (
            Schedule::Step {
                step_size: 1,
                gamma: 0.0,
            },
            "StepLR",
        ),
        (Schedule::Exponential { gamma: f64::NAN }, "ExponentialLR"),
        (
            Schedule::MultiStep {
                milestones: vec![1],
                gamma: -1.0,
            },
            "MultiStepLR",
        ),
        (
            Schedule::CosineAnnealing {
                t_max: 0,
                eta_min: 0.0,
            },
            "CosineAnnealingLR",
        ),
        (
            Schedule::CosineAnnealing {
                t_max: 5,
                eta_min: -1e-3,
            },
            "CosineAnnealingLR",
        ),
        (
            Schedule::Linear {
                start_factor: 0.0,
                end_factor: 1.0,
                total_iters: 5,
            },
            "LinearLR",
        ),
        (
            Schedule::Linear {
                start_factor: 0.5,
                end_factor: 1.5,
                total_iters: 5,
            },
            "LinearLR",
        ),
        (
            Schedule::Linear {
                start_factor: 0.5,
                end_factor: 1.0,
                total_iters: 0,
            },
            "LinearLR",
        ),
    ];
    for (s, name) in cases {
        match Scheduler::new(&mut opt, s.clone()) {
            Err(Error::InvalidArgument { op, .. }) => assert_eq!(op, name, "{s:?}"),
            other => panic!("{s:?}: {other:?}"),
        }
        assert_eq!(opt.lr(), 0.1);
    }
    opt.set_lr(f64::NAN);
    assert!(matches!(
        Scheduler::new(&mut opt, Schedule::Exponential { gamma: 0.5 }),
        Err(Error::InvalidArgument {
            op: "ExponentialLR",
            ..
        })
    ));
}

#[test]
fn optimizers_refuse_bad_hyperparameters_before_changing_anything() {
    let run = |opt: &mut dyn Optimizer, w: &Tensor| {
        w.set_grad(Some(Tensor::from_vec(vec![1f32, -2.0], [2]).unwrap()));
        opt.step()
    };
    let w = leaf(vec![1.0, 1.0], &[2]);
    let mut sgd = Sgd::new(vec![w.clone()], 0.1)
        .unwrap()
        .momentum(0.9)
        .unwrap();
    for (lr, m, wd) in [
        (-0.1, 0.9, 0.0),
        (f64::NAN, 0.9, 0.0),
        (0.1, -0.5, 0.0),
        (0.1, 0.9, f64::INFINITY),
    ] {
        sgd.lr = lr;
        sgd.momentum = m;
        sgd.weight_decay = wd;
        assert!(
            matches!(
                run(&mut sgd, &w),
                Err(Error::InvalidArgument { op: "Sgd", .. })
            ),
            "lr {lr} momentum {m} wd {wd}"
        );
        assert_eq!(w.to_vec::<f32>().unwrap(), [1.0, 1.0]);
    }

    let v = leaf(vec![1.0, 1.0], &[2]);
    let mut adam = Adam::new(vec![v.clone()], 0.1).unwrap();
    for betas in [(1.0, 0.999), (0.9, -0.1), (f64::NAN, 0.999)] {
        adam.betas = betas;
        assert!(matches!(
            run(&mut adam, &v),
            Err(Error::InvalidArgument { op: "Adam", .. })
        ));
    }
    adam.betas = (0.9, 0.999);
    adam.eps = -1.0;
    assert!(matches!(
        run(&mut adam, &v),
        Err(Error::InvalidArgument { op: "Adam", .. })
    ));
    adam.eps = 1e-8;
    assert_eq!(v.to_vec::<f32>().unwrap(), [1.0, 1.0]);
    // The refused steps did not count: this is Adam's first step, which moves each weight
    // by lr against the sign of its gradient.
    run(&mut adam, &v).unwrap();
    let got = v.to_vec::<f32>().unwrap();
    assert!(
        (got[0] - 0.9).abs() < 1e-5 && (got[1] - 1.1).abs() < 1e-5,
        "{got:?}"
    );
}

#[test]
fn clipping_and_a_warm_up_schedule_train_a_regression() {
    // y = 2x₀ − 3x₁ + 1, learned by a Linear layer with Adam, a warm-up and clipping.
    let xs: Vec<f32> = (0..64)
        .flat_map(|i| [(i % 8) as f32 / 4.0 - 1.0, (i / 8) as f32 / 4.0 - 1.0])
        .collect();
    let ys: Vec<f32> = xs
        .chunks(2)
        .map(|x| 2.0 * x[0] - 3.0 * x[1] + 1.0)
        .collect();
    let x = Tensor::from_vec(xs, [64, 2]).unwrap();
    let y = Tensor::from_vec(ys, [64, 1]).unwrap();
    let lin = Linear::with_init(2, 1, true, Init::Zeros, DType::F32).unwrap();
    let mut opt = Adam::new(lin.parameters(), 0.1).unwrap();
    let warm = Schedule::Linear {
        start_factor: 0.1,
        end_factor: 1.0,
        total_iters: 20,
    };
    let mut sched = Scheduler::new(&mut opt, warm).unwrap();
    let mut first = None;
    let mut last = 0.0;
    for _ in 0..300 {
        opt.zero_grad();
        let loss = lin.forward(&x).unwrap().mse_loss(&y).unwrap();
        loss.backward().unwrap();
        let norm = nn::clip_grad_norm(&lin.parameters(), 1.0, 2.0).unwrap();
        assert!(norm.item::<f32>().unwrap().is_finite());
        opt.step().unwrap();
        sched.step(&mut opt);
        last = loss.item::<f32>().unwrap();
        first.get_or_insert(last);
    }
    assert!(
        last < 1e-3 * first.unwrap(),
        "loss {} -> {last}",
        first.unwrap()
    );
}
