//! Views (F4): an in-place write into an expanded view is refused, and writes through views are
//! ordered against reads of the base.

use crate::common::reference::{R, f32s};
use crate::common::watchdog;
use crate::{fails_at_call, on, private};
use eddy::tensor::{DType, Error, Tensor, with_engine};
use eddy::vm::Vm;

use DType::F32;

#[test]
fn in_place_write_into_an_expanded_view_is_refused() {
    let vm = private();
    let (x, one) = on(&vm, || {
        Ok((
            Tensor::from_vec(vec![1f32, 2., 3.], [1, 3])?,
            Tensor::ones([3], F32)?,
        ))
    });
    let e = x.broadcast_to([4, 3]).unwrap();
    type Case<'a> = (&'static str, Box<dyn Fn() -> R<Tensor> + 'a>);
    let cases: Vec<Case> = vec![
        ("add", Box::new(|| e.add_(&one))),
        ("mul", Box::new(|| e.mul_(&one))),
        ("sub", Box::new(|| e.t()?.sub_(&one.unsqueeze(1)?))),
        ("copy_", Box::new(|| e.copy_(&one))),
        ("fill_", Box::new(|| e.fill_(0.0))),
        ("fill_", Box::new(|| e.zero_())),
        ("add", Box::new(|| e.add_scalar_(1.0))),
        (
            "add",
            Box::new(|| e.narrow(0, 1, 2)?.add_scaled_(&one, 2.0)),
        ),
    ];
    for (op, f) in cases {
        let err = fails_at_call(&[&vm], f);
        assert_eq!(
            err,
            Error::OverlappingWrite {
                at: eddy::tensor::Caller::UNKNOWN,
                op
            },
            "{op}"
        );
        assert!(err.to_string().contains("overlap"));
    }
    assert_eq!(f32s(&x), vec![1., 2., 3.]);
    // A broadcast to the same shape, or of size-1 dims to size 1, is no expansion.
    x.broadcast_to([1, 3]).unwrap().add_(&one).unwrap();
    x.unsqueeze(0)
        .unwrap()
        .broadcast_to([1, 1, 3])
        .unwrap()
        .add_(&one)
        .unwrap();
    assert_eq!(f32s(&x), vec![3., 4., 5.]);
}

#[test]
fn writes_through_views_are_ordered_against_reads_of_the_base() {
    watchdog(60, || {
        let vm = Vm::builder().build().unwrap();
        with_engine(&vm, || {
            for it in 0..40 {
                let n = 64;
                let base = Tensor::arange(0.0, (n * n) as f64, 1.0, F32)
                    .unwrap()
                    .reshape([n, n])
                    .unwrap();
                let orig: Vec<f32> = (0..n * n).map(|i| i as f32).collect();
                // Reads submitted before the writes see none of them.
                let before = base.mul_scalar(1.0).unwrap();
                let before_t = base.t().unwrap().contiguous().unwrap();
                let row = base.narrow(0, it % n, 1).unwrap();
                row.mul_scalar_(-1.0).unwrap();
                let col = base.t().unwrap().narrow(0, 3, 2).unwrap(); // columns 3 and 4
                col.add_scalar_(0.5).unwrap();
                // Reads submitted after see all of them, through the base and through views.
                let after = base.mul_scalar(1.0).unwrap();
                let mut want = orig.clone();
                for j in 0..n {
                    want[(it % n) * n + j] *= -1.0;
                }
                for i in 0..n {
                    want[i * n + 3] += 0.5;
                    want[i * n + 4] += 0.5;
                }
                assert_eq!(
                    f32s(&before),
                    orig,
                    "iteration {it}: a read before the write"
                );
                let mut ot = vec![0f32; n * n];
                for i in 0..n {
                    for j in 0..n {
                        ot[j * n + i] = orig[i * n + j];
                    }
                }
                assert_eq!(f32s(&before_t), ot, "iteration {it}");
                assert_eq!(f32s(&after), want, "iteration {it}: a read after the write");
                assert_eq!(f32s(&base), want);
                assert_eq!(f32s(&row), want[(it % n) * n..(it % n + 1) * n].to_vec());
                // Overlapping views written in turn: program order decides.
                let v1 = base.narrow(0, 0, 2).unwrap();
                let v2 = base.narrow(0, 1, 2).unwrap();
                v1.fill_(1.0).unwrap();
                v2.mul_scalar_(3.0).unwrap();
                v1.add_scalar_(1.0).unwrap();
                let r = f32s(&base.narrow(0, 0, 3).unwrap().narrow(1, 0, 1).unwrap());
                assert_eq!(r, vec![2.0, 4.0, 3.0 * want[2 * n]], "iteration {it}");
            }
        });
    });
}
