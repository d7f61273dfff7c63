//! Index errors: at the call where the values are known on the host, else at the read that
//! depends on them, poisoning only what depends on them (F8).

use crate::common::reference::{R, f32s};
use crate::common::watchdog;
use eddy::tensor::{DType, Error, Tensor, with_engine};
use eddy::vm::Vm;

use DType::F32;

/// An index tensor computed by an op, so its values are known only on the engine.
fn unknown(v: Vec<i64>) -> Tensor {
    let n = v.len();
    let t = Tensor::from_vec(v, [n]).unwrap();
    t.add(&t.zeros_like().unwrap()).unwrap()
}

#[test]
fn host_known_indices_out_of_range_fail_at_the_call() {
    let vm = Vm::builder().build().unwrap();
    with_engine(&vm, || {
        let src = Tensor::arange(0.0, 6.0, 1.0, F32)
            .unwrap()
            .reshape([3, 2])
            .unwrap();
        let idx = |v: Vec<i64>| Tensor::from_vec(v.clone(), [v.len()]).unwrap();
        // The scheduler thread publishes its counters after each pass: without this sync,
        // `src`'s instruction could be counted only after `before` is read (a loaded machine).
        vm.sync().unwrap();
        let before = vm.stats().inserted;
        let cases: Vec<(&str, i64, usize, R<Tensor>)> = vec![
            ("index_select", 7, 3, src.index_select(0, &idx(vec![0, 7]))),
            (
                "index_select",
                -4,
                3,
                src.index_select(0, &idx(vec![-4, 1])),
            ),
            ("index_select", 2, 2, src.index_select(1, &idx(vec![2]))),
            (
                "embedding",
                3,
                3,
                src.embedding(&Tensor::from_vec(vec![0i64, 1, 2, 3], [2, 2]).unwrap()),
            ),
            (
                "gather",
                5,
                2,
                src.gather(1, &Tensor::from_vec(vec![0i64, 5, 1], [3, 1]).unwrap()),
            ),
            (
                "cross_entropy",
                2,
                2,
                src.cross_entropy(&idx(vec![0, 1, 2])),
            ),
            ("nll_loss", -9, 2, src.nll_loss(&idx(vec![-9, 1, 0]))),
        ];
        for (op, index, size, r) in cases {
            let e = r.unwrap_err();
            assert!(
                matches!(e, Error::IndexOutOfRange { at: _, op: o, index: i, size: s } if o == op && i == index && s == size),
                "{op}: {e:?}"
            );
        }
        // Only the index tensors themselves were made (and, being temporaries, released): no
        // op of a failed call.
        vm.sync().unwrap();
        let made = vm.stats().inserted - before;
        assert!(
            made <= 2 * 7 + 1,
            "{made} instructions (7 made, 7 released, 1 sync)"
        );

        // Views that read every element keep the check; a view that skips the bad element,
        // or an index tensor written since it was made, does not fail: the kernel checks it.
        let bad = idx(vec![2, 9]);
        assert!(
            src.index_select(0, &bad.unsqueeze(0).unwrap().squeeze(0).unwrap())
                .is_err()
        );
        assert!(
            src.index_select(0, &bad.expand([2, 2]).unwrap().flatten_all().unwrap())
                .is_err()
        );
        let first = bad.narrow(0, 0, 1).unwrap();
        assert_eq!(f32s(&src.index_select(0, &first).unwrap()), vec![4., 5.]);
        bad.copy_(&idx(vec![1, 0])).unwrap();
        assert_eq!(
            f32s(&src.index_select(0, &bad).unwrap()),
            vec![2., 3., 0., 1.]
        );
        // A negative index is out of range, as in PyTorch: it does not count from the end.
        assert!(matches!(
            src.index_select(0, &idx(vec![-1, 0])),
            Err(Error::IndexOutOfRange {
                at: _,
                op: "index_select",
                index: -1,
                size: 3
            })
        ));
        assert_eq!(
            f32s(&src.index_select(0, &idx(vec![2, 0])).unwrap()),
            vec![4., 5., 0., 1.]
        );
        vm.sync().unwrap();
    });
}

#[test]
fn an_out_of_range_index_fails_at_the_read_and_poisons_only_its_dependents() {
    watchdog(30, || {
        let vm = Vm::builder().build().unwrap();
        with_engine(&vm, || {
            let src = Tensor::arange(0.0, 6.0, 1.0, F32)
                .unwrap()
                .reshape([3, 2])
                .unwrap();
            let unrelated_before = src.mul_scalar(2.0).unwrap();
            // Computed on the engine, so its values are not known on the host.
            let idx = unknown(vec![0i64, 7]);
            // The call itself succeeds: the index is only read on the stream.
            let out = src.index_select(0, &idx).unwrap();
            let dependent = out.add_scalar(1.0).unwrap().sum_all().unwrap();
            let unrelated_after = src.add_scalar(1.0).unwrap();
            for (what, t) in [("the result", &out), ("a dependent", &dependent)] {
                let e = t.to_vec::<f32>().unwrap_err();
                let Error::Vm(eddy::vm::Error::KernelFailed { op, message, .. }) = &e else {
                    panic!("{what}: expected a kernel failure, got {e:?}");
                };
                assert_eq!(op, "index_select", "{what}");
                assert!(
                    message.contains("index 7") && message.contains("size 3"),
                    "{what}: {message}"
                );
                assert!(e.to_string().contains("index 7"), "{e}");
                assert_eq!(e.op(), Some("index_select"));
            }
            // Only what depends on it is poisoned.
            assert_eq!(f32s(&src), vec![0., 1., 2., 3., 4., 5.]);
            assert_eq!(f32s(&unrelated_before), vec![0., 2., 4., 6., 8., 10.]);
            assert_eq!(f32s(&unrelated_after), vec![1., 2., 3., 4., 5., 6.]);
            assert_eq!(
                f32s(
                    &src.index_select(0, &Tensor::from_vec(vec![2i64, 0], [2]).unwrap())
                        .unwrap()
                ),
                vec![4., 5., 0., 1.]
            );
            // The engine reports the root error until cleared; then it is clean.
            assert!(matches!(
                vm.sync(),
                Err(eddy::vm::Error::KernelFailed { .. })
            ));
            vm.clear_errors();
            vm.sync().unwrap();
            // A negative index names it too, whether or not it is within `-size..`.
            for i in [-4i64, -1] {
                let neg = src.index_select(0, &unknown(vec![i])).unwrap();
                let e = neg.to_vec::<f32>().unwrap_err();
                assert!(e.to_string().contains(&format!("index {i} ")), "{e}");
                vm.clear_errors();
            }
        });
    });
}

#[test]
fn an_out_of_range_class_in_cross_entropy_fails_at_the_read() {
    watchdog(30, || {
        let vm = Vm::builder().build().unwrap();
        with_engine(&vm, || {
            let logits = Tensor::from_vec(vec![0.1f32, 0.2, 0.3, 0.4, 0.5, 0.6], [2, 3])
                .unwrap()
                .requires_grad_(true)
                .unwrap();
            let target = unknown(vec![0i64, 5]);
            let loss = logits.cross_entropy(&target).unwrap();
            let e = loss.item::<f32>().unwrap_err();
            assert!(
                matches!(&e, Error::Vm(eddy::vm::Error::KernelFailed { op, .. }) if op == "cross_entropy"),
                "{e:?}"
            );
            assert!(e.to_string().contains("index 5"), "{e}");
            // The logits are fine, and so is a loss with valid targets.
            assert_eq!(f32s(&logits).len(), 6);
            let ok = logits
                .cross_entropy(&Tensor::from_vec(vec![0i64, 2], [2]).unwrap())
                .unwrap();
            assert!(ok.item::<f32>().unwrap().is_finite());
            ok.backward().unwrap();
            assert_eq!(logits.grad().unwrap().dims(), &[2, 3]);
            vm.clear_errors();
        });
    });
}

/// A negative class target is out of range for `nll_loss` and `cross_entropy`, as a negative
/// `gather` index is: at the call when the target's values are known on the host, else at the
/// next sync, naming the op.
#[test]
fn negative_class_targets_fail() {
    let logits = Tensor::from_vec(vec![0f32, 1., 2.], [1, 3]).unwrap();
    let known = Tensor::from_vec(vec![-1i64], [1]).unwrap();
    for (op, e) in [
        ("nll_loss", logits.nll_loss(&known).unwrap_err()),
        ("cross_entropy", logits.cross_entropy(&known).unwrap_err()),
    ] {
        assert!(
            matches!(e, Error::IndexOutOfRange { at: _, op: o, index: -1, size: 3 } if o == op),
            "{e}"
        );
    }
    // Computed on the engine: only the kernel sees the value.
    let computed = Tensor::from_vec(vec![1i64], [1])
        .unwrap()
        .sub_scalar(2)
        .unwrap();
    let e = logits
        .cross_entropy(&computed)
        .unwrap()
        .item::<f32>()
        .unwrap_err();
    assert!(
        e.to_string().contains("cross_entropy") && e.to_string().contains("-1"),
        "{e}"
    );
    // `gather` itself refuses a negative index the same way, as PyTorch does.
    let g = logits.gather(1, &Tensor::from_vec(vec![-1i64], [1, 1]).unwrap());
    assert!(
        matches!(
            g,
            Err(Error::IndexOutOfRange {
                at: _,
                op: "gather",
                index: -1,
                size: 3
            })
        ),
        "{g:?}"
    );
}
