//! Autograd mechanics: accumulation over two backward calls, `detach` and `no_grad`, bad seeds,
//! in-place writes to leaves and to saved tensors, custom backwards, separate leaf gradients.

use crate::f64s;
use eddy::tensor::{DType, Error, Tensor, no_grad};

#[test]
fn gradients_accumulate_over_two_backward_calls() {
    let xv = vec![0.5, -1.0, 2.0];
    let x = Tensor::from_vec(xv.clone(), [3])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    x.mul(&x).unwrap().sum_all().unwrap().backward().unwrap();
    assert_eq!(
        f64s(&x.grad().unwrap()),
        xv.iter().map(|v| 2.0 * v).collect::<Vec<_>>()
    );
    x.mul_scalar(3.0)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(
        f64s(&x.grad().unwrap()),
        xv.iter().map(|v| 2.0 * v + 3.0).collect::<Vec<_>>()
    );
    // The same graph, backward twice (the first retaining it): the gradient doubles.
    x.set_grad(None);
    let y = x.exp().unwrap().sum_all().unwrap();
    y.backward_retaining_graph(None).unwrap();
    y.backward().unwrap();
    let g = f64s(&x.grad().unwrap());
    for (g, v) in g.iter().zip(&xv) {
        assert!(
            (g - 2.0 * v.exp()).abs() < 1e-12,
            "{g} vs {}",
            2.0 * v.exp()
        );
    }
    // Two leaves, one backward through a shared subgraph each time.
    let w = Tensor::from_vec(vec![1.0, 2.0, 3.0], [3])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    let h = x.mul(&w).unwrap();
    h.sum_all().unwrap().backward_retaining_graph(None).unwrap();
    h.mean_all().unwrap().backward().unwrap();
    assert_eq!(
        f64s(&w.grad().unwrap()),
        xv.iter().map(|v| v + v / 3.0).collect::<Vec<_>>()
    );
}

#[test]
fn detach_and_no_grad_cut_the_graph() {
    let xv = vec![1.5, -2.0];
    let x = Tensor::from_vec(xv.clone(), [2])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    // Only the attached path contributes: d/dx (stop(x) · x) = x.
    x.detach()
        .mul(&x)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(f64s(&x.grad().unwrap()), xv);
    assert!(!x.detach().requires_grad());
    let y = {
        let _g = no_grad();
        x.exp().unwrap()
    };
    assert!(!y.requires_grad() && y.is_leaf());
    assert!(matches!(
        y.sum_all().unwrap().backward(),
        Err(Error::Autograd { .. })
    ));
    // Casting to f32 and back keeps the gradient path (rounded to f32).
    x.set_grad(None);
    x.to_dtype(DType::F32)
        .unwrap()
        .mul_scalar(2.0)
        .unwrap()
        .to_dtype(DType::F64)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(f64s(&x.grad().unwrap()), vec![2.0, 2.0]);
    // Integer results are cut from the graph.
    assert!(!x.argmax(0, false).unwrap().requires_grad());
    assert!(!x.gt_scalar(0.0).unwrap().requires_grad());
}

#[test]
fn backward_rejects_bad_seeds_and_in_place_on_leaves() {
    let x = Tensor::from_vec(vec![1.0, 2.0], [2])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    let y = x.mul_scalar(2.0).unwrap();
    assert!(matches!(
        y.backward(),
        Err(Error::Autograd { op: "backward", .. })
    ));
    assert!(matches!(
        y.backward_with(&Tensor::ones([3], DType::F64).unwrap()),
        Err(Error::ShapeMismatch { op: "backward", .. })
    ));
    assert!(matches!(x.add_scalar_(1.0), Err(Error::Autograd { .. })));
    {
        let _g = no_grad();
        x.add_scalar_(1.0).unwrap();
    }
    assert_eq!(f64s(&x), vec![2.0, 3.0]);
    assert!(x.grad().is_none());
}

/// An in-place write to a tensor a backward reads (an input, a captured index, the output),
/// between the forward and the backward, makes the backward fail rather than use the new
/// values (PyTorch's saved-tensor version check); a write to a tensor no backward reads does
/// not.
#[test]
fn in_place_writes_to_saved_tensors_fail_the_backward() {
    let x = Tensor::from_vec(vec![1.0, 2.0], [2])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    // mul reads its other operand.
    let c = Tensor::from_vec(vec![3.0, 4.0], [2]).unwrap();
    let y = x.mul(&c).unwrap().sum_all().unwrap();
    assert_eq!(c.version(), 0);
    c.mul_scalar_(10.0).unwrap();
    assert_eq!(c.version(), 1);
    let r = y.backward();
    assert!(
        matches!(&r, Err(Error::Autograd { at: _, op: "mul", message }) if message.contains("version 1")),
        "{r:?}"
    );
    assert!(x.grad().is_none(), "nothing was accumulated");
    // sin reads its input, through a detached handle sharing its storage.
    let y = x.sin().unwrap().sum_all().unwrap();
    {
        let _g = no_grad();
        x.narrow(0, 0, 1).unwrap().mul_scalar_(2.0).unwrap();
    }
    assert!(matches!(
        y.backward(),
        Err(Error::Autograd { op: "sin", .. })
    ));
    // exp reads its output.
    let e = x.exp().unwrap();
    let y = e.sum_all().unwrap();
    e.detach().zero_().unwrap();
    assert!(matches!(
        y.backward(),
        Err(Error::Autograd { op: "exp", .. })
    ));
    // index_select reads its index.
    let idx = Tensor::from_vec(vec![1i64, 1], [2]).unwrap();
    let y = x.index_select(0, &idx).unwrap().sum_all().unwrap();
    idx.fill_(0.0).unwrap();
    assert!(matches!(
        y.backward(),
        Err(Error::Autograd {
            op: "index_select",
            ..
        })
    ));
    // add reads neither operand: writing one afterwards is fine, as in PyTorch.
    let y = x.add(&c).unwrap().sum_all().unwrap();
    c.zero_().unwrap();
    y.backward().unwrap();
    assert_eq!(f64s(&x.grad().unwrap()), [1.0, 1.0]);
    // A failed in-place call does not count as a write.
    let d = Tensor::from_vec(vec![1.0, 1.0], [2]).unwrap();
    let y = x.mul(&d).unwrap().sum_all().unwrap();
    assert!(d.add_(&Tensor::ones([3], DType::F64).unwrap()).is_err());
    assert_eq!(d.version(), 0);
    y.backward().unwrap();
}

/// A custom backward that returns a gradient of the wrong shape, or the wrong number of
/// gradients, is an `Autograd` error naming the op (not a panic, not a stored bad gradient).
#[test]
fn custom_backward_results_are_checked() {
    let x = Tensor::from_vec(vec![1f32, 2., 3.], [3])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    let id = || {
        Tensor::custom_map::<f32, _>("id", &[&x], [3], |i, o| {
            o.copy_from_slice(i[0]);
            Ok(())
        })
        .unwrap()
    };
    let y = id().with_backward("id", &[&x], |g, _, _| Ok(vec![Some(g.sum_all()?)]));
    let r = y.sum_all().unwrap().backward();
    assert!(
        matches!(&r, Err(Error::Autograd { at: _, op: "id", message }) if message.contains("[3]")),
        "{r:?}"
    );
    let y = id().with_backward("id", &[&x], |g, _, _| Ok(vec![Some(g.clone()), None]));
    let r = y.sum_all().unwrap().backward();
    assert!(
        matches!(&r, Err(Error::Autograd { at: _, op: "id", message }) if message.contains("2 gradients")),
        "{r:?}"
    );
    assert!(x.grad().is_none());
}

/// Two leaves never share one gradient tensor, nor a leaf the caller's seed: writing one
/// `.grad` in place changes nothing else.
#[test]
fn leaf_gradients_do_not_share_storage() {
    let a = Tensor::from_vec(vec![1f32], [1])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    let b = Tensor::from_vec(vec![1f32], [1])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    a.add(&b).unwrap().sum_all().unwrap().backward().unwrap();
    let (ga, gb) = (a.grad().unwrap(), b.grad().unwrap());
    assert!(!ga.shares_storage(&gb));
    ga.zero_().unwrap();
    assert_eq!(gb.to_vec::<f32>().unwrap(), [1.0]);
    let s = Tensor::from_vec(vec![2f32, 3.], [2]).unwrap();
    let x = Tensor::from_vec(vec![0f32, 0.], [2])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    x.add_scalar(1.0).unwrap().backward_with(&s).unwrap();
    assert!(!x.grad().unwrap().shares_storage(&s));
    assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), [2.0, 3.0]);
}

/// As PyTorch's `backward()`: it frees the graph it goes through, so a second backward through
/// the same ops is an `Autograd` error naming the op; `backward_retaining_graph` keeps the
/// graph for one more (the gradients add up), and a graph that shares ops with a freed one
/// cannot go back through them either.
#[test]
fn backward_frees_the_graph_unless_retained() {
    let x = Tensor::from_vec(vec![1.0f64, -2.0, 3.0], [3])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    let y = x.mul(&x).unwrap().sum_all().unwrap();
    y.backward().unwrap();
    match y.backward() {
        Err(Error::Autograd { op, message, .. }) => {
            assert_eq!(op, "sum");
            assert!(message.contains("freed"), "{message}");
        }
        other => panic!("a second backward: {other:?}"),
    }
    assert_eq!(
        f64s(&x.grad().unwrap()),
        [2.0, -4.0, 6.0],
        "one backward's worth"
    );

    x.set_grad(None);
    let y = x.mul(&x).unwrap().sum_all().unwrap();
    y.backward_retaining_graph(None).unwrap();
    y.backward_retaining_graph(Some(&Tensor::from_vec(vec![0.5f64], []).unwrap()))
        .unwrap();
    y.backward().unwrap();
    assert_eq!(
        f64s(&x.grad().unwrap()),
        [5.0, -10.0, 15.0],
        "1 + 0.5 + 1 times 2x"
    );
    assert!(y.backward().is_err(), "the last one freed it");

    // Two losses over one product: the first backward frees the product's record too.
    let h = x.mul_scalar(2.0).unwrap();
    let (a, b) = (h.sum_all().unwrap(), h.exp().unwrap().sum_all().unwrap());
    a.backward().unwrap();
    match b.backward() {
        Err(Error::Autograd { op, .. }) => assert_eq!(op, "mul_scalar"),
        other => panic!("through a freed op: {other:?}"),
    }
}

/// Backward lets go of what the graph saved, though the caller keeps the loss: the memory of
/// an activation whose only other handle is gone comes back at backward, not when the loss is
/// dropped.
#[test]
fn backward_lets_go_of_the_saved_activations() {
    let vm = eddy::vm::Vm::builder().build().unwrap();
    eddy::tensor::with_engine(&vm, || {
        let in_use = || {
            vm.sync().unwrap();
            vm.memory_stats(eddy::vm::Device::CPU).in_use
        };
        let n = 1 << 18; // 1 MiB of f32
        let x = Tensor::ones([n], DType::F32)
            .unwrap()
            .requires_grad_(true)
            .unwrap();
        let loss = x.exp().unwrap().sum_all().unwrap(); // exp's backward reads its output
        let before = in_use();
        loss.backward().unwrap();
        drop(x.grad());
        x.set_grad(None);
        let after = in_use();
        assert!(
            after + (4 << 20) / 4 <= before,
            "exp's output (1 MiB) is freed at backward: {before} → {after} bytes in use"
        );
        assert!(loss.item::<f32>().unwrap() > 0.0, "the loss itself stays");
    });
}

/// Backwards on two threads through a shared, retained graph each go through every op: a
/// node one thread is in is waited for, not taken for freed. The gradients add up exactly.
#[test]
fn concurrent_backwards_through_a_retained_graph_all_count() {
    let x = Tensor::from_vec(vec![1.0f64, 2.0, 3.0], [3])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    let h = x.mul(&x).unwrap().exp().unwrap().log().unwrap(); // x², through three records
    let (a, b) = (
        h.sum_all().unwrap(),
        h.mul_scalar(2.0).unwrap().sum_all().unwrap(),
    );
    const N: usize = 400;
    let start = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        for loss in [&a, &b] {
            let start = &start;
            s.spawn(move || {
                start.wait();
                for _ in 0..N {
                    loss.backward_retaining_graph(None).unwrap();
                }
            });
        }
    });
    // d/dx of (1 + 2) · x², N times each.
    let want: Vec<f64> = [1.0, 2.0, 3.0]
        .iter()
        .map(|v| (3 * N) as f64 * 2.0 * v)
        .collect();
    let got = f64s(&x.grad().unwrap());
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-9 * w.abs(), "{got:?} vs {want:?}");
    }
}

/// A custom backward that starts a backward through its own op gets an `Autograd` error
/// naming the op instead of waiting for itself; a backward through another graph inside a
/// closure (as checkpointing does) works.
#[test]
fn a_backward_inside_a_backward_through_the_same_op_fails_instead_of_hanging() {
    let square = |x: &Tensor| {
        Tensor::custom_map::<f64, _>("square", &[x], [1], |i, o| {
            o[0] = i[0][0] * i[0][0];
            Ok(())
        })
    };
    let x = Tensor::from_vec(vec![3.0f64], [1])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    let looping = square(&x)
        .unwrap()
        .with_backward("square", &[&x], |g, _, out| {
            out.backward_retaining_graph(Some(g))?;
            Ok(vec![None])
        });
    match looping.sum_all().unwrap().backward() {
        Err(Error::Autograd { op, message, .. }) => {
            assert_eq!(op, "square");
            assert!(message.contains("again"), "{message}");
        }
        other => panic!("a backward through its own op: {other:?}"),
    }
    // A backward of another graph inside the closure.
    let w = Tensor::from_vec(vec![2.0f64], [1])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    let other = w.mul(&w).unwrap().sum_all().unwrap(); // recorded here: closures run under no_grad
    let nested = square(&x)
        .unwrap()
        .with_backward("square", &[&x], move |g, ins, _| {
            other.backward()?;
            Ok(vec![Some(g.mul(&ins[0].mul_scalar(2.0)?)?)])
        });
    x.set_grad(None);
    nested.sum_all().unwrap().backward().unwrap();
    assert_eq!(f64s(&x.grad().unwrap()), [6.0]);
    assert_eq!(f64s(&w.grad().unwrap()), [4.0]);
}
