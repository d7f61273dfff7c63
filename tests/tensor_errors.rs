//! Typed errors of the tensor API (failure modes F1–F4, F17, book: reliability): argument errors are returned at the
//! call with nothing enqueued and nothing allocated; asynchronous kernel errors surface at the
//! read that depends on them and poison only what depends on them; writes through views are
//! ordered against reads of the base; a 100k-long autograd chain builds, back-propagates and
//! drops in constant stack.

mod common;

use common::watchdog;
use eddy::tensor::{DType, Error, Tensor, with_engine};
use eddy::vm::Vm;
use proptest::prelude::*;

type R<T> = eddy::tensor::Result<T>;

use DType::{F16, F32, F64, I64};

/// A private synchronous engine: its counters are exact after every call.
fn private() -> Vm {
    Vm::builder().sync_mode(true).build().unwrap()
}

fn on<T>(vm: &Vm, f: impl FnOnce() -> R<T>) -> T {
    with_engine(vm, f).unwrap()
}

/// Runs `f`, which must fail, and checks that it enqueued nothing and allocated nothing on any
/// of `vms` (F1: errors at the call site, before anything is enqueued).
#[track_caller]
fn fails_at_call<T: std::fmt::Debug>(vms: &[&Vm], f: impl FnOnce() -> R<T>) -> Error {
    for vm in vms {
        vm.sync().unwrap();
    }
    let before: Vec<_> = vms
        .iter()
        .map(|vm| (vm.stats(), vm.alloc_stats()))
        .collect();
    let r = f();
    let after: Vec<_> = vms
        .iter()
        .map(|vm| (vm.stats(), vm.alloc_stats()))
        .collect();
    let e = r.expect_err("the call should fail");
    for ((s0, a0), (s1, a1)) in before.iter().zip(&after) {
        assert_eq!(
            s0.inserted, s1.inserted,
            "instructions were enqueued before `{e}`"
        );
        assert_eq!(
            s0.in_flight, s1.in_flight,
            "instructions in flight after `{e}`"
        );
        assert_eq!(
            a0.allocations, a1.allocations,
            "memory was allocated before `{e}`"
        );
        assert_eq!(a0.in_use, a1.in_use, "memory in use changed by `{e}`");
        assert_eq!(a0.system_allocations, a1.system_allocations);
    }
    e
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

// ---- F1: shape, dtype, device mismatch -----------------------------------------------------------

#[test]
fn shape_mismatch_is_returned_at_the_call() {
    let vm = private();
    let a = on(&vm, || Tensor::ones([2], F32));
    let b = on(&vm, || Tensor::ones([3], F32));
    let e = fails_at_call(&[&vm], || a.add(&b));
    assert_eq!(
        e,
        Error::ShapeMismatch {
            op: "add",
            lhs: vec![2],
            rhs: vec![3]
        }
    );
    let msg = e.to_string();
    assert!(
        msg.contains("add") && msg.contains("[2]") && msg.contains("[3]"),
        "{msg}"
    );
    assert_eq!(e.op(), Some("add"));
    // The operands are untouched and the engine still works.
    assert_eq!(f32s(&a), vec![1.0; 2]);
    assert_eq!(f32s(&a.add(&a).unwrap()), vec![2.0; 2]);

    let m = on(&vm, || Tensor::ones([2, 3], F32));
    let n = on(&vm, || Tensor::ones([4, 5], F32));
    let e = fails_at_call(&[&vm], || m.matmul(&n));
    assert_eq!(
        e,
        Error::ShapeMismatch {
            op: "matmul",
            lhs: vec![2, 3],
            rhs: vec![4, 5]
        }
    );
    assert!(e.to_string().contains("matmul"));
    // Inner dims are checked before any cast of f16 or integer operands is enqueued.
    for dt in [F16, DType::BF16, I64, DType::I32] {
        let (p, q) = on(&vm, || {
            Ok((Tensor::ones([2, 3], dt)?, Tensor::ones([2, 3], dt)?))
        });
        let e = fails_at_call(&[&vm], || p.matmul(&q));
        assert!(
            matches!(e, Error::ShapeMismatch { op: "matmul", .. }),
            "{dt}: {e}"
        );
    }
    // Batch dims that do not broadcast; a 1-D operand of the wrong length.
    let (p, q, v) = on(&vm, || {
        Ok((
            Tensor::ones([2, 2, 3], F32)?,
            Tensor::ones([3, 3, 4], F32)?,
            Tensor::ones([4], F32)?,
        ))
    });
    assert!(matches!(
        fails_at_call(&[&vm], || p.matmul(&q)),
        Error::ShapeMismatch { op: "matmul", .. }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || p.matmul(&v)),
        Error::ShapeMismatch { op: "matmul", .. }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || v.matmul(&p)),
        Error::ShapeMismatch { op: "matmul", .. }
    ));
}

#[test]
fn every_op_checks_its_shapes_before_enqueueing() {
    let vm = private();
    let (x, y, w, t3, tf) = on(&vm, || {
        Ok((
            Tensor::ones([2, 3], F32)?,
            Tensor::ones([3, 2], F32)?,
            Tensor::ones([4], F32)?,
            Tensor::from_vec(vec![0i64, 1, 2], [3])?,
            Tensor::from_vec(vec![0f32, 1.0], [2])?,
        ))
    });
    type Case<'a> = (&'static str, Box<dyn Fn() -> R<Tensor> + 'a>);
    let cases: Vec<Case> = vec![
        ("sub", Box::new(|| x.sub(&y))),
        ("maximum", Box::new(|| x.maximum(&y))),
        ("eq", Box::new(|| x.eq(&y))),
        ("where", Box::new(|| x.gt_scalar(0.0)?.where_(&x, &y))),
        ("cat", Box::new(|| Tensor::cat(&[&x, &y], 0))),
        ("stack", Box::new(|| Tensor::stack(&[&x, &y], 0))),
        ("mse_loss", Box::new(|| x.mse_loss(&y))),
        ("nll_loss", Box::new(|| x.nll_loss(&t3))),
        ("cross_entropy", Box::new(|| x.cross_entropy(&t3))),
        (
            "layer_norm",
            Box::new(|| x.layer_norm(1, Some(&w), None, 1e-5)),
        ),
        (
            "layer_norm",
            Box::new(|| x.layer_norm(1, None, Some(&w), 1e-5)),
        ),
        (
            "index_select",
            Box::new(|| x.index_select(0, &t3.reshape([1, 3])?)),
        ),
        (
            "gather",
            Box::new(|| x.gather(1, &Tensor::zeros([3, 1], I64)?)),
        ),
        ("add", Box::new(|| w.add_(&x))),
        ("copy_", Box::new(|| w.copy_(&x))),
        ("broadcast_to", Box::new(|| x.broadcast_to([3, 3]))),
        (
            "backward",
            Box::new(|| {
                let p = tf.clone().requires_grad_(true);
                p.mul_scalar(2.0)?.backward_with(&w).map(|_| p)
            }),
        ),
    ];
    for (op, f) in cases {
        // Building the operands (the `where` condition, the gather index) may enqueue; only
        // the failing call itself is measured, so build them outside where the op allows.
        let e = match op {
            "where" => {
                let c = x.gt_scalar(0.0).unwrap();
                fails_at_call(&[&vm], || c.where_(&x, &y))
            }
            "gather" => {
                let i = on(&vm, || Tensor::zeros([3, 1], I64));
                fails_at_call(&[&vm], || x.gather(1, &i))
            }
            "backward" => {
                let p = tf.clone().requires_grad_(true);
                let q = p.mul_scalar(2.0).unwrap();
                fails_at_call(&[&vm], || q.backward_with(&w))
            }
            _ => fails_at_call(&[&vm], f),
        };
        // `stack` is `cat` of unsqueezed views, and reports the `cat`.
        let want = if op == "stack" { "cat" } else { op };
        assert!(
            matches!(&e, Error::ShapeMismatch { op: o, .. } if *o == want),
            "{op}: {e:?}"
        );
        assert!(e.to_string().contains(want), "{op}: {e}");
    }
    assert!(matches!(
        fails_at_call(&[&vm], || x.reshape([4])),
        Error::ElementCountMismatch { op: "reshape", .. }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || with_engine(&vm, || Tensor::from_vec(
            vec![1f32; 5],
            [2, 3]
        ))),
        Error::ElementCountMismatch { op: "from_vec", .. }
    ));
}

#[test]
fn dtype_mismatch_is_returned_at_the_call() {
    let vm = private();
    let (a, b) = on(&vm, || {
        Ok((Tensor::ones([2, 2], F32)?, Tensor::ones([2, 2], F64)?))
    });
    let e = fails_at_call(&[&vm], || a.matmul(&b));
    assert_eq!(
        e,
        Error::DTypeMismatch {
            op: "matmul",
            lhs: F32,
            rhs: F64
        }
    );
    assert_eq!(
        e.to_string(),
        "dtype mismatch in `matmul`, lhs: f32, rhs: f64"
    );

    // An integer tensor cannot store a float result in place.
    let (i, f) = on(&vm, || {
        Ok((
            Tensor::from_vec(vec![1i64, 2], [2])?,
            Tensor::from_vec(vec![0.5f32, 1.5], [2])?,
        ))
    });
    let e = fails_at_call(&[&vm], || i.add_(&f));
    assert_eq!(
        e,
        Error::DTypeMismatch {
            op: "add",
            lhs: I64,
            rhs: F32
        }
    );
    assert!(matches!(
        fails_at_call(&[&vm], || i.div_(&i)),
        Error::DTypeMismatch { op: "div", .. }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || i.mul_scalar_(0.5)),
        Error::DTypeMismatch { op: "mul", .. }
    ));
    assert_eq!(
        i.to_vec::<i64>().unwrap(),
        vec![1, 2],
        "the destination is untouched"
    );
    // A float destination takes an integer source.
    a.narrow(0, 0, 1).unwrap().add_(&i).unwrap();
    assert_eq!(f32s(&a), vec![2., 3., 1., 1.]);

    let c = on(&vm, || Tensor::ones([1, 2], F64));
    assert!(matches!(
        fails_at_call(&[&vm], || Tensor::cat(&[&a, &c], 0)),
        Error::DTypeMismatch { op: "cat", .. }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || a.to_vec::<f64>()),
        Error::DTypeMismatch { op: "to_vec", .. }
    ));
    // Unsupported dtypes.
    assert!(matches!(
        fails_at_call(&[&vm], || i.mean_all()),
        Error::UnsupportedDType {
            op: "mean",
            dtype: I64
        }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || i.softmax(0)),
        Error::UnsupportedDType { op: "softmax", .. }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || a.index_select(0, &f)),
        Error::UnsupportedDType {
            op: "index_select",
            ..
        }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || a.gather(0, &a)),
        Error::UnsupportedDType { op: "gather", .. }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || a.cross_entropy(&f)),
        Error::UnsupportedDType { .. }
    ));
    // Float ids of an embedding, even as a strided view (refused before any copy).
    let ids = on(&vm, || Tensor::ones([2, 2], F32)?.t());
    assert!(matches!(
        fails_at_call(&[&vm], || a.embedding(&ids)),
        Error::UnsupportedDType { .. }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || with_engine(&vm, || Tensor::rand([2], I64))),
        Error::UnsupportedDType { op: "rand", .. }
    ));
}

#[test]
fn bad_activation_parameters_and_bool_operands_fail_at_the_call() {
    let vm = private();
    let (x, m) = on(&vm, || {
        Ok((
            Tensor::ones([3], F32)?,
            Tensor::from_vec(vec![true, false, true], [3])?,
        ))
    });
    for beta in [0.0, f64::NAN, f64::INFINITY] {
        let e = fails_at_call(&[&vm], || x.softplus(beta, 20.0));
        assert!(
            matches!(e, Error::InvalidArgument { op: "softplus", ref message } if message.contains("beta")),
            "{e}"
        );
    }
    for (op, r) in [
        (
            "floor",
            Box::new(|| m.floor()) as Box<dyn Fn() -> R<Tensor>>,
        ),
        ("leaky_relu", Box::new(|| m.leaky_relu(0.1))),
        ("erf", Box::new(|| m.erf())),
    ] {
        let e = fails_at_call(&[&vm], r);
        assert_eq!(
            e,
            Error::UnsupportedDType {
                op,
                dtype: DType::Bool
            }
        );
    }
    let e = fails_at_call(&[&vm], || {
        Tensor::custom_map::<bool, _>("copy_bools", &[&m], [3], |i, o| {
            o.copy_from_slice(i[0]);
            Ok(())
        })
    });
    assert!(
        matches!(e, Error::InvalidArgument { op: "copy_bools", ref message } if message.contains("Bool8"))
    );
}

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

#[test]
fn invalid_dims_and_indices() {
    let vm = private();
    let (x, v, idx) = on(&vm, || {
        Ok((
            Tensor::ones([4, 3], F32)?,
            Tensor::ones([4], F32)?,
            Tensor::from_vec(vec![0i64], [1])?,
        ))
    });
    type Case<'a> = (&'static str, isize, Box<dyn Fn() -> R<Tensor> + 'a>);
    let cases: Vec<Case> = vec![
        ("sum", 2, Box::new(|| x.sum(&[0, 2], false))),
        ("sum", -3, Box::new(|| x.sum(&[-3], true))),
        ("max", 5, Box::new(|| x.max(5, false))),
        ("argmin", -3, Box::new(|| x.argmin(-3, false))),
        ("transpose", -3, Box::new(|| x.transpose(0, -3))),
        ("permute", 2, Box::new(|| x.permute(&[0, 2]))),
        ("softmax", 2, Box::new(|| x.softmax(2))),
        ("log_softmax", -3, Box::new(|| x.log_softmax(-3))),
        ("narrow", 2, Box::new(|| x.narrow(2, 0, 1))),
        ("select", -3, Box::new(|| x.select(-3, 0))),
        ("squeeze", 2, Box::new(|| x.squeeze(2))),
        ("unsqueeze", 3, Box::new(|| x.unsqueeze(3))),
        ("unsqueeze", -4, Box::new(|| x.unsqueeze(-4))),
        ("cat", 2, Box::new(|| Tensor::cat(&[&x, &x], 2))),
        ("stack", 2, Box::new(|| Tensor::stack(&[&v, &v], 2))),
        ("index_select", 2, Box::new(|| x.index_select(2, &idx))),
        (
            "gather",
            -3,
            Box::new(|| x.gather(-3, &idx.reshape([1, 1])?)),
        ),
    ];
    for (op, dim, f) in cases {
        let e = if op == "gather" {
            let i = idx.reshape([1, 1]).unwrap();
            fails_at_call(&[&vm], || x.gather(-3, &i))
        } else {
            fails_at_call(&[&vm], f)
        };
        assert!(
            matches!(&e, Error::InvalidDim { op: o, dim: d, .. } if *o == op && *d == dim),
            "{op}({dim}): {e:?}"
        );
        assert!(e.to_string().contains(&dim.to_string()), "{e}");
    }
    assert!(matches!(x.dim(2), Err(Error::InvalidDim { op: "dim", .. })));
    assert_eq!(x.dim(-1).unwrap(), 3);

    // Ranges past the end of a dim.
    let e = fails_at_call(&[&vm], || v.narrow(0, 2, 3));
    assert_eq!(
        e,
        Error::IndexOutOfRange {
            op: "narrow",
            index: 5,
            size: 4
        }
    );
    assert!(e.to_string().contains("index 5") && e.to_string().contains("size 4"));
    assert!(matches!(
        fails_at_call(&[&vm], || v.narrow(0, usize::MAX, 2)),
        Error::IndexOutOfRange { op: "narrow", .. }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || v.narrow(0, 5, 0)),
        Error::IndexOutOfRange { op: "narrow", .. }
    ));
    assert_eq!(
        fails_at_call(&[&vm], || x.select(0, 4)),
        Error::IndexOutOfRange {
            op: "select",
            index: 4,
            size: 4
        }
    );
    assert!(matches!(
        fails_at_call(&[&vm], || x.slice(1, 2..4)),
        Error::IndexOutOfRange { .. }
    ));
    assert_eq!(
        v.narrow(0, 4, 0).unwrap().dims(),
        &[0],
        "an empty range at the end is fine"
    );

    // Other bad arguments.
    // `t` of a 1-d tensor is the tensor itself, as in PyTorch.
    assert_eq!(v.t().unwrap().dims(), v.dims());
    assert!(matches!(
        fails_at_call(&[&vm], || x.permute(&[0, 0])),
        Error::InvalidArgument { op: "permute", .. }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || x.t()?.view([12])),
        Error::InvalidArgument { op: "view", .. }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || x.clamp(None, None)),
        Error::InvalidArgument { op: "clamp", .. }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || x.layer_norm(3, None, None, 1e-5)),
        Error::InvalidArgument {
            op: "layer_norm",
            ..
        }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || Tensor::cat(&[], 0)),
        Error::InvalidArgument { op: "cat", .. }
    ));
    assert!(matches!(
        fails_at_call(&[&vm], || x.item::<f32>()),
        Error::InvalidArgument { op: "item", .. }
    ));
    let s = on(&vm, || Tensor::scalar(1f32));
    assert!(matches!(
        fails_at_call(&[&vm], || s.matmul(&v)),
        Error::InvalidArgument { op: "matmul", .. }
    ));
}

// ---- F2: element-count and byte-size overflow ---------------------------------------------------

#[test]
fn shape_overflow_never_reaches_the_allocator() {
    let vm = private();
    let e = fails_at_call(&[&vm], || {
        with_engine(&vm, || Tensor::zeros([usize::MAX, 2], F32))
    });
    assert_eq!(
        e,
        Error::ShapeOverflow {
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
    #![proptest_config(ProptestConfig::with_cases(64))]
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
                prop_assert_eq!(e, Error::ShapeOverflow { shape: shape.clone(), dtype: dt });
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

// ---- F4: in-place writes into expanded views; writes through views vs reads of the base --------

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
        assert_eq!(err, Error::OverlappingWrite { op }, "{op}");
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

// ---- index errors: at the call where the values are known, else at sync ------------------------

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
                matches!(e, Error::IndexOutOfRange { op: o, index: i, size: s } if o == op && i == index && s == size),
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

// ---- asynchronous kernel errors ---------------------------------------------------------------

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
                .requires_grad_(true);
            let target = unknown(vec![0i64, 5]);
            let loss = logits.cross_entropy(&target).unwrap();
            let e = loss.item::<f32>().unwrap_err();
            assert!(
                matches!(&e, Error::Vm(eddy::vm::Error::KernelFailed { op, .. }) if op == "nll_loss"),
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

// ---- F17: a 100k-long autograd chain -------------------------------------------------------------

#[test]
fn a_100k_long_autograd_chain_backwards_and_drops_in_a_small_stack() {
    let h = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(|| {
            let vm = Vm::builder().build().unwrap();
            with_engine(&vm, || {
                let x = Tensor::from_vec(vec![0.25f64, -1.0], [2])
                    .unwrap()
                    .requires_grad_(true);
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

#[test]
fn bad_dropout_probabilities_and_integer_operands_fail_at_the_call() {
    let vm = private();
    let (x, i) = on(&vm, || {
        Ok((
            Tensor::ones([8], F32)?,
            Tensor::from_vec(vec![1i64, 2, 3], [3])?,
        ))
    });
    for p in [-0.1, 1.5, f64::NAN, f64::INFINITY] {
        for train in [true, false] {
            let e = fails_at_call(&[&vm], || x.dropout(p, train));
            assert!(
                matches!(e, Error::InvalidArgument { op: "dropout", ref message } if message.contains("probability")),
                "{e}"
            );
        }
        let e = eddy::tensor::nn::Dropout::new(p).expect_err("a bad probability");
        assert!(
            matches!(e, Error::InvalidArgument { op: "Dropout", .. }),
            "{e}"
        );
    }
    for train in [true, false] {
        let e = fails_at_call(&[&vm], || i.dropout(0.5, train));
        assert_eq!(
            e,
            Error::UnsupportedDType {
                op: "dropout",
                dtype: I64
            }
        );
    }
    // Evaluation mode and p = 0 enqueue nothing either: the result is the input.
    for (p, train) in [(0.5, false), (0.0, true)] {
        let s0 = vm.stats().inserted;
        let y = on(&vm, || x.dropout(p, train));
        assert!(y.shares_storage(&x));
        assert_eq!(vm.stats().inserted, s0);
    }
}

// ---- edge inputs found by a review of the less-travelled ops -----------------------------

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
            matches!(e, Error::IndexOutOfRange { op: o, index: -1, size: 3 } if o == op),
            "{e}"
        );
    }
    // Computed on the engine: only the kernel sees the value.
    let computed = Tensor::from_vec(vec![1i64], [1])
        .unwrap()
        .sub_scalar(2.0)
        .unwrap();
    let e = logits
        .cross_entropy(&computed)
        .unwrap()
        .item::<f32>()
        .unwrap_err();
    assert!(
        e.to_string().contains("nll_loss") && e.to_string().contains("-1"),
        "{e}"
    );
    // `gather` itself refuses a negative index the same way, as PyTorch does.
    let g = logits.gather(1, &Tensor::from_vec(vec![-1i64], [1, 1]).unwrap());
    assert!(
        matches!(
            g,
            Err(Error::IndexOutOfRange {
                op: "gather",
                index: -1,
                size: 3
            })
        ),
        "{g:?}"
    );
}

/// An integral scalar outside an integer (or bool) dtype's range is compared as it is, not
/// clamped into the range first.
#[test]
fn integer_comparisons_with_out_of_range_scalars() {
    let u = Tensor::from_vec(vec![255u8, 0], [2]).unwrap();
    assert_eq!(
        u.eq_scalar(256.0).unwrap().to_vec::<bool>().unwrap(),
        [false, false]
    );
    assert_eq!(
        u.eq_scalar(-1.0).unwrap().to_vec::<bool>().unwrap(),
        [false, false]
    );
    assert_eq!(
        u.lt_scalar(256.0).unwrap().to_vec::<bool>().unwrap(),
        [true, true]
    );
    assert_eq!(
        u.gt_scalar(-1.0).unwrap().to_vec::<bool>().unwrap(),
        [true, true]
    );
    assert_eq!(
        u.eq_scalar(255.0).unwrap().to_vec::<bool>().unwrap(),
        [true, false]
    );
    let i = Tensor::from_vec(vec![i32::MAX, i32::MIN], [2]).unwrap();
    assert_eq!(
        i.lt_scalar(3e9).unwrap().to_vec::<bool>().unwrap(),
        [true, true]
    );
    assert_eq!(
        i.ge_scalar(-3e9).unwrap().to_vec::<bool>().unwrap(),
        [true, true]
    );
    let l = Tensor::from_vec(vec![i64::MAX, i64::MIN], [2]).unwrap();
    assert_eq!(
        l.lt_scalar(1e19).unwrap().to_vec::<bool>().unwrap(),
        [true, true]
    );
    assert_eq!(
        l.ne_scalar(-1e19).unwrap().to_vec::<bool>().unwrap(),
        [true, true]
    );
    let b = Tensor::from_vec(vec![true, false], [2]).unwrap();
    assert_eq!(
        b.eq_scalar(2.0).unwrap().to_vec::<bool>().unwrap(),
        [false, false]
    );
    assert_eq!(
        b.eq_scalar(1.0).unwrap().to_vec::<bool>().unwrap(),
        [true, false]
    );
}

/// Integer `clamp` saturates bounds outside the dtype's range instead of wrapping them.
#[test]
fn integer_clamp_with_out_of_range_bounds() {
    let u = Tensor::from_vec(vec![5u8, 200], [2]).unwrap();
    assert_eq!(
        u.clamp(None, Some(-1.0)).unwrap().to_vec::<u8>().unwrap(),
        [0, 0]
    );
    assert_eq!(
        u.clamp(Some(300.0), None).unwrap().to_vec::<u8>().unwrap(),
        [255, 255]
    );
    assert_eq!(
        u.clamp(Some(10.0), Some(100.0))
            .unwrap()
            .to_vec::<u8>()
            .unwrap(),
        [10, 100]
    );
    let i = Tensor::from_vec(vec![0i32, -7], [2]).unwrap();
    assert_eq!(
        i.clamp(Some(3e9), None).unwrap().to_vec::<i32>().unwrap(),
        [i32::MAX, i32::MAX]
    );
    assert_eq!(
        i.clamp(None, Some(-3e9)).unwrap().to_vec::<i32>().unwrap(),
        [i32::MIN, i32::MIN]
    );
}

/// Integer `pow`: negative exponents truncate toward zero, the parity of an exponent beyond
/// `u32` is kept, and `0` to a negative power is an error at the next sync.
#[test]
fn integer_pow_edges() {
    let x = Tensor::from_vec(vec![1i64, -1, -1, 2, -3, -1, -1], [7]).unwrap();
    let y = Tensor::from_vec(vec![-1i64, -1, -2, -1, -5, 1 << 32, (1 << 32) + 1], [7]).unwrap();
    assert_eq!(
        x.pow(&y).unwrap().to_vec::<i64>().unwrap(),
        [1, -1, 1, 0, 0, 1, -1]
    );
    // Wrapping, as the other integer ops: 3^41 mod 2^64, and the same in i32.
    let big = 3i64.wrapping_pow(41);
    let p = Tensor::from_vec(vec![3i64], [1])
        .unwrap()
        .pow(&Tensor::from_vec(vec![41i64], [1]).unwrap())
        .unwrap();
    assert_eq!(p.to_vec::<i64>().unwrap(), [big]);
    let p32 = Tensor::from_vec(vec![3i32], [1])
        .unwrap()
        .pow(&Tensor::from_vec(vec![41i32], [1]).unwrap())
        .unwrap();
    assert_eq!(p32.to_vec::<i32>().unwrap(), [3i32.wrapping_pow(41)]);
    let z = Tensor::from_vec(vec![0i64, 2], [2])
        .unwrap()
        .pow(&Tensor::from_vec(vec![-1i64, 1], [2]).unwrap())
        .unwrap();
    let e = z.to_vec::<i64>().unwrap_err();
    assert!(e.to_string().contains("negative"), "{e}");

    // `pow_scalar` with a whole exponent stays integer and wraps the same way, also for an
    // exponent past the dtype's range (as `x ** c` in PyTorch, whose exponent is a Python int).
    fn wrapping_pow(b: i128, e: u64, bits: u32) -> i128 {
        let m = 1i128 << bits;
        let (mut acc, mut b, mut e) = (1i128, b.rem_euclid(m), e);
        while e > 0 {
            if e & 1 == 1 {
                acc = acc * b % m;
            }
            b = b * b % m;
            e >>= 1;
        }
        acc
    }
    let i = Tensor::from_vec(vec![3i64, -2, 0, 7], [4]).unwrap();
    let want: Vec<i64> = [3i64, -2, 0, 7]
        .iter()
        .map(|&b| b.wrapping_pow(41))
        .collect();
    assert_eq!(i.pow_scalar(41.0).unwrap().to_vec::<i64>().unwrap(), want);
    assert_eq!(
        i.pow_scalar(0.0).unwrap().to_vec::<i64>().unwrap(),
        [1, 1, 1, 1]
    );
    let u = Tensor::from_vec(vec![3u8, 2, 255, 0, 1], [5]).unwrap();
    for e in [5u64, 255, 256, 300, 1 << 40] {
        let want: Vec<u8> = [3u8, 2, 255, 0, 1]
            .iter()
            .map(|&b| wrapping_pow(b as i128, e, 8) as u8)
            .collect();
        let got = u.pow_scalar(e as f64).unwrap();
        assert_eq!(got.to_vec::<u8>().unwrap(), want, "u8 ^ {e}");
    }
    let w = Tensor::from_vec(vec![3i32, -3, 2, -1, 5], [5]).unwrap();
    for e in [31u64, 1 << 31, (1 << 40) + 1, (1 << 53) - 1] {
        let want: Vec<i32> = [3i32, -3, 2, -1, 5]
            .iter()
            .map(|&b| wrapping_pow(b as i128, e, 32) as u32 as i32)
            .collect();
        let got = w.pow_scalar(e as f64).unwrap();
        assert_eq!(got.to_vec::<i32>().unwrap(), want, "i32 ^ {e}");
    }
    // A fractional exponent computes in f32; a negative whole one is refused at the call.
    let f = i.pow_scalar(0.5).unwrap();
    assert_eq!(f.dtype(), F32);
    assert!(
        matches!(
            i.pow_scalar(-1.0),
            Err(Error::InvalidArgument {
                op: "pow_scalar",
                ..
            })
        ),
        "integers to a negative power"
    );
}

/// A 0-d tensor's softmax checks its dim like every other 0-d op (0 and -1 only).
#[test]
fn softmax_of_a_scalar_checks_the_dim() {
    let s = Tensor::from_vec(vec![1f32], []).unwrap();
    for log in [false, true] {
        let r = if log { s.log_softmax(7) } else { s.softmax(7) };
        assert!(matches!(r, Err(Error::InvalidDim { .. })), "{r:?}");
        for d in [0, -1] {
            let r = if log { s.log_softmax(d) } else { s.softmax(d) };
            assert_eq!(
                r.unwrap().item::<f32>().unwrap(),
                if log { 0.0 } else { 1.0 }
            );
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

/// `Display` prints integers from their own values, not through `f64`.
#[test]
fn display_prints_large_integers_exactly() {
    let t = Tensor::from_vec(vec![i64::MAX, i64::MIN + 1], [2]).unwrap();
    assert_eq!(
        format!("{t}"),
        "tensor([ 9223372036854775807, -9223372036854775807], dtype=i64)"
    );
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

/// Random creation checks its parameters.
#[test]
fn random_parameters_are_checked() {
    for r in [
        Tensor::uniform([3], 1.0, 0.0, F32),
        Tensor::uniform([3], f64::NEG_INFINITY, 0.0, F32),
        Tensor::uniform([3], 0.0, f64::NAN, F32),
        Tensor::randn([3], 0.0, -1.0, F32),
        Tensor::randn([3], 0.0, f64::NAN, F32),
        Tensor::randn([3], f64::INFINITY, 1.0, F64),
    ] {
        assert!(matches!(r, Err(Error::InvalidArgument { .. })), "{r:?}");
    }
    let c = Tensor::uniform([3], 2.0, 2.0, F32)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(c, [2.0; 3]);
    let z = Tensor::randn([3], 1.0, 0.0, F32)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(z, [1.0; 3]);
}

/// f16 dropout with a scale past f16's range: a kept zero stays zero (not `0 × inf`), a kept
/// one overflows to infinity as the product does in PyTorch.
#[test]
fn f16_dropout_with_a_huge_scale() {
    let p = 0.99999;
    let z = Tensor::zeros([20_000], F16)
        .unwrap()
        .dropout(p, true)
        .unwrap();
    let z = z.to_dtype(F32).unwrap().to_vec::<f32>().unwrap();
    assert!(
        z.iter().all(|&v| v == 0.0),
        "a NaN or nonzero in {:?}",
        &z[..8]
    );
    let o = Tensor::ones([200_000], F16)
        .unwrap()
        .dropout(p, true)
        .unwrap();
    let o = o.to_dtype(F32).unwrap().to_vec::<f32>().unwrap();
    assert!(o.iter().all(|&v| v == 0.0 || v == f32::INFINITY));
    assert!(
        o.contains(&f32::INFINITY),
        "200,000 draws at 1e-5 kept none"
    );
}

/// Fill values as PyTorch converts them: a value the dtype cannot hold is an error at the call
/// (nothing enqueued or allocated, nothing written), not saturated; infinities and NaN fill
/// float dtypes; integer dtypes truncate toward zero; whole negatives down to -255 wrap into
/// `u8`; bool takes anything.
#[test]
fn fill_values_past_the_dtype_are_refused_as_pytorch() {
    use DType::{BF16, Bool, I32, U8};
    let vm = private();
    let refused: [(f64, DType); 14] = [
        (256.0, U8),
        (255.5, U8),
        (-0.5, U8),
        (-256.0, U8),
        (-0.5 - 255.0, U8),
        (f64::NAN, U8),
        (2_147_483_648.0, I32),
        (-2_147_483_649.0, I32),
        (f64::INFINITY, I32),
        (9_223_372_036_854_775_808.0, I64),
        (f64::NAN, I64),
        (65_520.0, F16),
        (1e39, F32),
        (-1e39, BF16),
    ];
    for (v, dt) in refused {
        let e = fails_at_call(&[&vm], || on(&vm, || Ok(Tensor::full([2], v, dt))));
        assert!(
            matches!(&e, Error::InvalidArgument { op: "full", message } if message.contains("without overflow")),
            "full({v}, {dt}): {e}"
        );
    }
    let kept: [(f64, DType, f64); 11] = [
        (255.0, U8, 255.0),
        (-1.0, U8, 255.0),
        (-255.0, U8, 1.0),
        (2.7, I32, 2.0),
        (-2.7, I32, -2.0),
        (-2_147_483_648.0, I32, -2_147_483_648.0),
        (
            -9_223_372_036_854_775_808.0,
            I64,
            -9_223_372_036_854_775_808.0,
        ),
        (65_504.0, F16, 65_504.0),
        (f64::NEG_INFINITY, F16, f64::NEG_INFINITY),
        (1e300, F64, 1e300),
        (-7.0, Bool, 1.0),
    ];
    for (v, dt, want) in kept {
        let t = on(&vm, || Tensor::full([2], v, dt));
        let got = on(&vm, || t.to_dtype(F64)?.to_vec::<f64>());
        assert_eq!(got, [want, want], "full({v}, {dt})");
    }
    let nan = on(&vm, || {
        Tensor::full([1], f64::NAN, BF16)?
            .to_dtype(F64)?
            .item::<f64>()
    });
    assert!(nan.is_nan());
    // fill_, full_like and masked_fill check the same way; a refused fill_ writes nothing.
    let t = on(&vm, || Tensor::full([2], 7.0, U8));
    let e = fails_at_call(&[&vm], || t.fill_(300.0));
    assert!(
        matches!(e, Error::InvalidArgument { op: "fill_", .. }),
        "{e}"
    );
    assert_eq!(on(&vm, || t.to_vec::<u8>()), [7, 7]);
    let e = fails_at_call(&[&vm], || t.full_like(1e3));
    assert!(
        matches!(
            e,
            Error::InvalidArgument {
                op: "full_like",
                ..
            }
        ),
        "{e}"
    );
    let mask = on(&vm, || Tensor::from_vec(vec![true, false], [2]));
    let e = fails_at_call(&[&vm], || t.masked_fill(&mask, -300.0));
    assert!(
        matches!(
            e,
            Error::InvalidArgument {
                op: "masked_fill",
                ..
            }
        ),
        "{e}"
    );
    let m = on(&vm, || t.masked_fill(&mask, -1.0)?.to_vec::<u8>());
    assert_eq!(m, [255, 7]);
}
