//! Arguments a hostile caller passes: shapes with a zero dim among huge ones (accepted in any
//! order: the tensor has no elements), and optimizer hyper-parameters PyTorch refuses
//! (refused at construction, before any parameter changes).

use eddy::tensor::optim::{Adam, Optimizer, Sgd};
use eddy::tensor::{DType, Error, Tensor};

#[test]
fn a_zero_dim_anywhere_makes_an_empty_tensor() {
    let big = 1usize << 62;
    for dims in [[big, 4, 0], [0, big, 4], [4, 0, big]] {
        let t = Tensor::zeros(dims, DType::F32).unwrap_or_else(|e| panic!("{dims:?}: {e}"));
        assert_eq!(t.numel(), 0, "{dims:?}");
        assert_eq!(t.dims(), dims);
        assert!(t.to_vec::<f32>().unwrap().is_empty());
        let p = t.permute(&[2, 0, 1]).unwrap();
        assert_eq!(p.exp().unwrap().numel(), 0, "{dims:?}");
    }
    // Without a zero, the same dims overflow.
    assert!(matches!(
        Tensor::zeros([big, 4, 2], DType::F32),
        Err(Error::ShapeOverflow { .. })
    ));
}

fn param() -> Tensor {
    Tensor::from_vec(vec![1f32, 2.0], [2])
        .unwrap()
        .requires_grad_(true)
        .unwrap()
}

fn refused<T>(r: eddy::tensor::Result<T>, what: &str) {
    match r {
        Err(Error::InvalidArgument { message, .. }) => {
            assert!(message.contains("invalid"), "{what}: {message}")
        }
        Err(e) => panic!("{what}: expected InvalidArgument, got {e}"),
        Ok(_) => panic!("{what}: accepted"),
    }
}

#[test]
fn optimizers_refuse_the_learning_rates_pytorch_refuses() {
    for lr in [-1e-3, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        refused(Sgd::new(vec![param()], lr), &format!("Sgd lr {lr}"));
        refused(Adam::new(vec![param()], lr), &format!("Adam lr {lr}"));
        refused(
            Adam::adamw(vec![param()], lr, 0.01),
            &format!("AdamW lr {lr}"),
        );
    }
    // Zero is a valid rate, as in PyTorch.
    assert!(Sgd::new(vec![param()], 0.0).is_ok());
    assert!(Adam::new(vec![param()], 0.0).is_ok());
}

#[test]
fn optimizers_refuse_bad_hyper_parameters() {
    let sgd = || Sgd::new(vec![param()], 0.1).unwrap();
    let adam = || Adam::new(vec![param()], 0.1).unwrap();
    for bad in [-0.5, f64::NAN, f64::INFINITY] {
        refused(sgd().momentum(bad), &format!("momentum {bad}"));
        refused(sgd().weight_decay(bad), &format!("Sgd weight_decay {bad}"));
        refused(adam().eps(bad), &format!("eps {bad}"));
        refused(
            adam().weight_decay(bad),
            &format!("Adam weight_decay {bad}"),
        );
        refused(
            Adam::adamw(vec![param()], 0.1, bad),
            &format!("AdamW wd {bad}"),
        );
    }
    for (b1, b2) in [(1.0, 0.999), (0.9, 1.0), (-0.1, 0.999), (0.9, f64::NAN)] {
        refused(adam().betas(b1, b2), &format!("betas ({b1}, {b2})"));
    }
    assert!(sgd().momentum(0.9).unwrap().weight_decay(1e-4).is_ok());
    assert!(adam().betas(0.0, 0.5).unwrap().eps(0.0).is_ok());
}

/// Values set on the public fields after construction are still checked by `step`, before any
/// parameter changes.
#[test]
fn a_bad_rate_set_later_fails_the_step_and_changes_nothing() {
    let w = param();
    let mut opt = Sgd::new(vec![w.clone()], 0.1).unwrap();
    w.square().unwrap().sum_all().unwrap().backward().unwrap();
    opt.set_lr(f64::NAN);
    refused(opt.step(), "step with a NaN rate");
    assert_eq!(w.to_vec::<f32>().unwrap(), [1.0, 2.0]);
    let mut adam = Adam::new(vec![w.clone()], 0.1).unwrap();
    adam.betas = (1.5, 0.9);
    refused(adam.step(), "step with beta 1.5");
    assert_eq!(w.to_vec::<f32>().unwrap(), [1.0, 2.0]);
}
