//! Tensors of two engines (F1), and how long engines, storages and autograd graphs live: a
//! tensor keeps its explicit engine alive, the last view releases the storage (F5, F16), and a
//! 100k-long autograd chain back-propagates and drops in a small stack (F17).

use crate::common::reference::{R, f32s};
use crate::{fails_at_call, on, private};
use eddy::tensor::{DType, Error, Tensor, with_engine};
use eddy::vm::Vm;

use DType::{F32, I64};

#[test]
fn device_mismatch_between_two_engines() {
    let (vm1, vm2) = (private(), private());
    let a = on(&vm1, || Tensor::ones([2, 2], F32));
    let b = on(&vm2, || Tensor::ones([2, 2], F32));
    let idx = on(&vm2, || Tensor::from_vec(vec![0i64, 1], [2]));
    let gidx = on(&vm2, || Tensor::zeros([2, 2], I64));
    let cond = on(&vm2, || Tensor::ones([2, 2], F32)?.gt_scalar(0.0));
    assert!(a.engine().same_engine(&vm1) && b.engine().same_engine(&vm2));
    type Case<'a> = (&'static str, Box<dyn Fn() -> R<Tensor> + 'a>);
    let cases: Vec<Case> = vec![
        ("add", Box::new(|| a.add(&b))),
        ("maximum", Box::new(|| b.maximum(&a))),
        ("lt", Box::new(|| a.lt(&b))),
        ("matmul", Box::new(|| a.matmul(&b))),
        ("cat", Box::new(|| Tensor::cat(&[&a, &b], 0))),
        ("where", Box::new(|| cond.where_(&a, &a))),
        ("where", Box::new(|| cond.where_(&b, &a))),
        ("index_select", Box::new(|| a.index_select(0, &idx))),
        ("gather", Box::new(|| a.gather(0, &gidx))),
        ("scatter_add", Box::new(|| a.scatter_add(0, &gidx, &a))),
        ("scatter_add", Box::new(|| b.scatter_add(0, &gidx, &a))),
        ("index_add", Box::new(|| a.index_add(0, &idx, &a))),
        ("add", Box::new(|| a.add_(&b))),
        ("copy_", Box::new(|| a.copy_(&b))),
    ];
    for (op, f) in cases {
        let e = fails_at_call(&[&vm1, &vm2], f);
        assert!(
            matches!(&e, Error::DeviceMismatch { op: o, .. } if *o == op),
            "{op}: {e:?}"
        );
        let msg = e.to_string();
        assert!(msg.contains(op) && msg.contains("same device"), "{msg}");
    }
    assert_eq!(f32s(&a), vec![1.0; 4]);
    assert_eq!(f32s(&b), vec![1.0; 4]);
}

/// A tensor holds its engine: an explicit engine whose caller dropped its last handle still runs
/// the ops of its tensors and their views. Tensors of the default engine (a static, which they
/// reference without a count) and their views stay on it.
#[test]
fn tensors_keep_their_explicit_engine_alive() {
    let vm = Vm::builder().build().unwrap();
    let (x, v) = on(&vm, || {
        let x = Tensor::arange(0.0, 6.0, 1.0, DType::F32)?.reshape([2, 3])?;
        let v = x.t()?;
        Ok((x, v))
    });
    drop(vm);
    let y = x.add(&v.t().unwrap()).unwrap().mul_scalar(0.5).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![0., 1., 2., 3., 4., 5.]);
    assert!(y.engine().same_engine(x.engine()) && v.engine().same_engine(x.engine()));

    let d = eddy::tensor::default_engine().unwrap();
    let a = Tensor::ones([4], DType::F32).unwrap();
    let b = a.narrow(0, 1, 2).unwrap().add_scalar(1.0).unwrap();
    for t in [&a, &b] {
        assert!(t.engine().same_engine(&d) && !t.engine().same_engine(x.engine()));
    }
    drop(a);
    assert_eq!(b.to_vec::<f32>().unwrap(), vec![2., 2.]);
}

/// A storage lives as long as any view of it: dropping the base keeps the memory and the values
/// for the views; the last view to drop releases it, and only then (1 KiB, from the allocator).
#[test]
fn the_last_view_releases_the_storage() {
    let vm = private();
    let in_use = || vm.alloc_stats().in_use;
    let idle = in_use();
    let (row, col) = on(&vm, || {
        let base = Tensor::arange(0.0, 256.0, 1.0, DType::F32)?.reshape([16, 16])?;
        base.sync()?;
        let row = base.narrow(0, 3, 1)?;
        let col = base.t()?.narrow(0, 5, 1)?;
        drop(base);
        Ok((row, col))
    });
    vm.sync().unwrap();
    assert!(in_use() >= idle + 1024, "the views keep the storage");
    assert_eq!(
        row.to_vec::<f32>().unwrap(),
        (48..64).map(|v| v as f32).collect::<Vec<_>>()
    );
    drop(row);
    vm.sync().unwrap();
    assert!(in_use() >= idle + 1024, "one view is left");
    assert_eq!(
        col.to_vec::<f32>().unwrap(),
        (0..16).map(|r| (r * 16 + 5) as f32).collect::<Vec<_>>()
    );
    drop(col);
    vm.sync().unwrap();
    assert_eq!(in_use(), idle, "the last view released the storage");
}

#[test]
fn a_100k_long_autograd_chain_backwards_and_drops_in_a_small_stack() {
    let h = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(|| {
            let vm = Vm::builder().build().unwrap();
            with_engine(&vm, || {
                let x = Tensor::from_vec(vec![0.25f64, -1.0], [2])
                    .unwrap()
                    .requires_grad_(true)
                    .unwrap();
                let mut y = x.clone();
                for _ in 0..100_000 {
                    y = y.add_scalar(1.0).unwrap();
                }
                assert_eq!(y.to_vec::<f64>().unwrap(), vec![100_000.25, 99_999.0]);
                y.sum_all().unwrap().backward().unwrap();
                assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), vec![1.0, 1.0]);
                drop(y);
                // A chain dropped without being read or back-propagated.
                let mut z = x.mul_scalar(2.0).unwrap();
                for _ in 0..100_000 {
                    z = z.add_scalar(-1.0).unwrap();
                }
                drop(z);
                assert_eq!(x.to_vec::<f64>().unwrap(), vec![0.25, -1.0]);
            });
            vm.sync().unwrap();
        })
        .unwrap();
    h.join().expect("the chain overflowed the stack or failed");
}
