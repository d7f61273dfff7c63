//! Element-count and byte-size overflow (F2): a typed error at the call, never a request to
//! the allocator; empty tensors beside huge dims (F3).

use crate::common::reference::{R, cases};
use crate::common::watchdog;
use crate::{fails_at_call, on, private};
use eddy::tensor::{DType, Error, Tensor, with_engine};
use proptest::prelude::*;

use DType::{F32, F64};

#[test]
fn shape_overflow_never_reaches_the_allocator() {
    let vm = private();
    let e = fails_at_call(&[&vm], || {
        with_engine(&vm, || Tensor::zeros([usize::MAX, 2], F32))
    });
    assert_eq!(
        e,
        Error::ShapeOverflow {
            at: eddy::tensor::Caller::UNKNOWN,
            shape: vec![usize::MAX, 2],
            dtype: F32
        }
    );
    assert!(e.to_string().contains("overflows"), "{e}");
    type Case = Box<dyn Fn() -> R<Tensor>>;
    let cases: Vec<Case> = vec![
        Box::new(|| Tensor::zeros([1 << 32, 1 << 32], F32)),
        Box::new(|| Tensor::ones([1 << 31, 1 << 31], F32)), // numel fits, bytes do not
        Box::new(|| Tensor::full([1 << 61], 1.0, F32)),     // bytes above isize::MAX
        Box::new(|| Tensor::zeros([usize::MAX, 2, 1], F64)), // a 0 dim would make it empty
        Box::new(|| Tensor::eye(1 << 32, F32)),
        Box::new(|| Tensor::zeros([1 << 62, 4], F32)),
        Box::new(|| Tensor::linspace(0.0, 1.0, usize::MAX, F64)),
        Box::new(|| Tensor::rand([usize::MAX / 4, 4], F32)),
        Box::new(|| Tensor::ones([2], F32)?.broadcast_to([usize::MAX, 2])),
        Box::new(|| Tensor::ones([1, 1], F32)?.expand([1 << 40, 1 << 40])),
    ];
    for (i, f) in cases.into_iter().enumerate() {
        // The inputs of the view cases are built first, so measure only the failing call.
        let e = if i >= 8 {
            let src = on(&vm, || Tensor::ones([1, 2], F32));
            let s = if i == 8 {
                vec![usize::MAX, 2]
            } else {
                vec![1 << 40, 1 << 40]
            };
            let src = if i == 8 {
                src
            } else {
                src.narrow(1, 0, 1).unwrap()
            };
            fails_at_call(&[&vm], || src.broadcast_to(s.clone()))
        } else {
            fails_at_call(&[&vm], || with_engine(&vm, &f))
        };
        assert!(matches!(e, Error::ShapeOverflow { .. }), "case {i}: {e:?}");
    }
    // A range with 2^63 elements or more is refused by `arange` itself, naming it.
    let e = fails_at_call(&[&vm], || {
        with_engine(&vm, || Tensor::arange(0.0, 1e300, 1.0, F32))
    });
    assert!(
        matches!(e, Error::InvalidArgument { op: "arange", .. }),
        "{e:?}"
    );
    // A reshape to an overflowing shape is an element-count error.
    let x = on(&vm, || Tensor::ones([4], F32));
    assert!(matches!(
        fails_at_call(&[&vm], || x.reshape([usize::MAX, 2])),
        Error::ElementCountMismatch { op: "reshape", .. }
    ));
}

/// Dims drawn from {0, 1, small, 2³¹, 2³², 2⁶³, usize::MAX}: creation fails with
/// `ShapeOverflow` exactly when the checked byte size overflows (or exceeds `isize::MAX`),
/// and never panics or asks the allocator.
fn huge_dim() -> impl Strategy<Value = usize> {
    prop_oneof![
        Just(0usize),
        Just(1),
        Just(3),
        Just(1 << 31),
        Just(1 << 32),
        Just(1 << 63),
        Just(usize::MAX)
    ]
}

proptest! {
    #![proptest_config(cases(64))]

    #[test]
    fn huge_shapes_overflow_exactly_when_their_size_does(
        shape in prop::collection::vec(huge_dim(), 1..=3),
        dt in prop_oneof![Just(F32), Just(F64), Just(DType::U8)],
    ) {
        // A 0 anywhere makes the tensor empty, whatever the other dims multiply to.
        let numel = if shape.contains(&0) {
            Some(0)
        } else {
            shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))
        };
        let bytes = numel
            .and_then(|n| n.checked_mul(dt.size_in_bytes()))
            .filter(|&b| b <= isize::MAX as usize);
        // Representable but huge sizes would really allocate: only the small ones are created.
        if bytes.is_some_and(|b| b > 1 << 20) {
            return Ok(());
        }
        let vm = private();
        match bytes {
            None => {
                let e = fails_at_call(&[&vm], || with_engine(&vm, || Tensor::zeros(shape.clone(), dt)));
                prop_assert_eq!(e, Error::ShapeOverflow { at: eddy::tensor::Caller::UNKNOWN, shape: shape.clone(), dtype: dt });
            }
            Some(b) => {
                let t = on(&vm, || Tensor::full(shape.clone(), 1.0, dt));
                prop_assert_eq!(t.dims(), &shape[..]);
                prop_assert_eq!(t.numel() * dt.size_in_bytes(), b);
                prop_assert_eq!(t.to_f64_vec().unwrap(), vec![1.0; t.numel()]);
            }
        }
    }
}

/// Empty tensors whose other dims are huge: views and masks return at once, host reads of
/// more than the host can hold fail with `OutOfMemory`, and nothing aborts or hangs.
#[test]
fn empty_tensors_with_huge_dims_and_huge_broadcasts() {
    // A mask or index over the huge dim would hang or abort: the watchdog turns a hang into
    // a failure.
    watchdog(60, || {
        let e = Tensor::zeros([1usize << 62, 0], F32).unwrap();
        assert_eq!(e.flip(&[0]).unwrap().dims(), &[1 << 62, 0]);
        assert_eq!(e.tril(0).unwrap().dims(), &[1 << 62, 0]);
        assert_eq!(e.triu(1).unwrap().dims(), &[1 << 62, 0]);
        let r = e.to_vec2::<f32>();
        assert!(matches!(r, Err(Error::Vm(ref v)) if v.is_oom()), "{r:?}");
        assert!(e.to_vec::<f32>().unwrap().is_empty());
        // 2^62 (or 2^61) row views would take more memory than any host has.
        for r in [e.unbind(0), e.split(1, 0), e.chunk(1 << 61, 0)] {
            assert!(
                matches!(r, Err(Error::Vm(ref v)) if v.is_oom()),
                "{:?}",
                r.map(|v| v.len())
            );
        }
        // A split into few pieces, or along the empty dim, is fine.
        assert_eq!(e.chunk(3, 0).unwrap().len(), 3);
        assert_eq!(e.split(1 << 61, 0).unwrap()[1].dims(), &[1 << 61, 0]);
        assert!(e.unbind(1).unwrap().is_empty());
        // 2^62 one-byte elements from a one-element storage: a valid view, not a valid host copy.
        let b = Tensor::from_vec(vec![7u8], [1])
            .unwrap()
            .expand([1usize << 62])
            .unwrap();
        let r = b.to_vec::<u8>();
        assert!(matches!(r, Err(Error::Vm(ref v)) if v.is_oom()), "{r:?}");
        // Display reads only what it shows.
        let s = format!("{b}");
        assert_eq!(s, "tensor([7, 7, 7, ..., 7, 7, 7], dtype=u8)");
    });
}

/// `safetensors::save` refuses an empty tensor whose dims overflow when multiplied (the
/// format multiplies them in order) instead of panicking.
#[test]
fn safetensors_save_refuses_overflowing_dims() {
    let t = Tensor::zeros([0, 1usize << 62, 8], F32)
        .unwrap()
        .permute(&[1, 2, 0])
        .unwrap();
    let path = std::env::temp_dir().join(format!("eddy-overflow-{}.st", std::process::id()));
    let r = eddy::tensor::safetensors::save([("t", &t)], &path);
    assert!(
        matches!(
            r,
            Err(Error::InvalidArgument {
                op: "safetensors::save",
                ..
            })
        ),
        "{r:?}"
    );
    assert!(!path.exists());
}
