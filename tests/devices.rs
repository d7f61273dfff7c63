//! Several devices on one engine: each CPU device has its own stream and allocator, ops choose
//! their kernel by their operands' device and give the same bits on every CPU device, and
//! `to_device` copies are instructions the engine orders like any other.

mod common;

use common::watchdog;
use eddy::tensor::{DType, Device, Error, Tensor, manual_seed, no_grad, with_device, with_engine};
use eddy::vm::Vm;

type R<T> = eddy::tensor::Result<T>;

fn two_devices() -> Vm {
    Vm::builder().cpu_devices(2).build().unwrap()
}

fn bits(t: &Tensor) -> Vec<u64> {
    t.to_f64_vec()
        .unwrap()
        .into_iter()
        .map(f64::to_bits)
        .collect()
}

/// The op suite: one result per op family (elementwise with broadcasting and promotion,
/// casts, reductions, scans, products, row-wise ops, sorting, indexing, views and in-place
/// writes, creation and seeded random values, and gradients), each made on the current device.
fn op_suite() -> R<Vec<(&'static str, Tensor)>> {
    let x = Tensor::arange(-3.0, 3.0, 0.25, DType::F32)?.reshape([4, 6])?;
    let w = Tensor::linspace(-1.0, 1.5, 30, DType::F32)?.reshape([5, 6])?;
    let b = Tensor::from_vec(vec![0.5f32, -0.25, 1.0, 0.0, 2.0], [5])?;
    let i = Tensor::from_vec(vec![3i64, 0, 2], [3])?;
    let h = x.to_dtype(DType::F16)?;
    let mut out = vec![
        (
            "add broadcast",
            x.add(&Tensor::from_vec(vec![1f32, 2., 3., 4., 5., 6.], [6])?)?,
        ),
        ("mul promote", x.mul(&Tensor::from_vec(vec![2i64], [1])?)?),
        ("div int", i.div(&Tensor::from_vec(vec![2i64], [])?)?),
        ("pow", x.abs()?.pow_scalar(1.5)?),
        ("exp tanh gelu", x.exp()?.tanh()?.add(&x.gelu()?)?),
        ("sigmoid log1p", x.sigmoid()?.log1p()?),
        ("erf silu", x.erf()?.mul(&x.silu()?)?),
        (
            "maximum",
            x.maximum(&x.t()?.contiguous()?.reshape([4, 6])?)?,
        ),
        ("where", x.gt_scalar(0.0)?.where_(&x, &x.mul_scalar(0.1)?)?),
        ("compare", x.le(&x.flip(&[1])?)?.to_dtype(DType::U8)?),
        ("cast f16", h.mul_scalar(3.0)?),
        ("cast i32", x.mul_scalar(4.0)?.to_dtype(DType::I32)?),
        ("clamp", x.clamp(Some(-1.0), Some(0.5))?),
        ("sum dims", x.sum(&[0], false)?),
        ("mean keepdim", x.mean(&[1], true)?),
        ("prod", x.add_scalar(3.5)?.prod(&[1], false)?),
        ("max", x.max(1, false)?),
        ("argmax", x.argmax(0, false)?),
        ("var", x.var(&[1], 1, false)?),
        ("logsumexp", x.logsumexp(&[1], false)?),
        ("norm", x.norm(2.0, &[0], false)?),
        ("cumsum", x.cumsum(1)?),
        ("matmul", x.matmul(&w.t()?)?),
        ("matmul batched", x.reshape([2, 2, 6])?.matmul(&w.t()?)?),
        ("linear", x.linear(&w, Some(&b))?),
        ("linear_relu", x.linear_relu(&w, Some(&b))?),
        ("softmax", x.softmax(1)?),
        ("log_softmax", x.log_softmax(0)?),
        ("layer_norm", x.layer_norm(1, None, None, 1e-5)?),
        (
            "cross_entropy",
            x.cross_entropy(&Tensor::from_vec(vec![1i64, 5, 0, 2], [4])?)?,
        ),
        ("sort", x.sin()?.sort(1, true)?.0),
        ("argsort", x.cos()?.argsort(1, false)?),
        ("topk", x.sin()?.topk(2, 0, true)?.0),
        ("index_select", x.index_select(0, &i)?),
        (
            "gather",
            x.gather(1, &Tensor::from_vec(vec![5i64, 0, 1, 4], [4, 1])?)?,
        ),
        ("embedding", w.embedding(&i)?),
        ("cat", Tensor::cat(&[&x, &x.neg()?], 0)?),
        ("transpose copy", x.t()?.contiguous()?),
        ("narrow", x.narrow(1, 2, 3)?.mul_scalar(2.0)?),
        ("tril", x.tril(0)?),
        ("eye", Tensor::eye(3, DType::I64)?),
        ("full", Tensor::full([2, 3], -1.5, DType::F64)?),
    ];
    // In-place writes through a view.
    let y = x.mul_scalar(1.0)?;
    y.narrow(0, 1, 2)?.add_(&b.narrow(0, 0, 1)?)?;
    y.mul_scalar_(0.5)?;
    out.push(("in place", y));
    // Seeded random values: the same seed gives the same values on every device.
    manual_seed(7);
    out.push(("rand", Tensor::rand([3, 4], DType::F32)?));
    out.push(("randn", Tensor::randn([5], 0.0, 2.0, DType::F64)?));
    // Gradients.
    let p = x.mul_scalar(1.0)?.requires_grad_(true).unwrap();
    let loss = p
        .tanh()?
        .matmul(&w.t()?)?
        .softmax(1)?
        .mul(&p.sum(&[1], true)?)?
        .sum_all()?;
    loss.backward()?;
    out.push(("grad", p.grad().expect("a gradient")));
    Ok(out)
}

/// Every op of the suite gives bit-identical results on two CPU devices, and runs on the
/// device it was asked for.
#[test]
fn the_op_suite_gives_the_same_bits_on_two_cpu_devices() {
    watchdog(120, || {
        let vm = two_devices();
        let run = |d: Device| with_engine(&vm, || with_device(d, op_suite)).unwrap();
        let (a, b) = (run(Device::Cpu(0)), run(Device::Cpu(1)));
        assert_eq!(a.len(), b.len());
        for ((name, x), (_, y)) in a.iter().zip(&b) {
            assert_eq!(x.device(), Device::Cpu(0), "{name}");
            assert_eq!(y.device(), Device::Cpu(1), "{name}");
            assert_eq!((x.dims(), x.dtype()), (y.dims(), y.dtype()), "{name}");
            assert_eq!(bits(x), bits(y), "{name}: the devices disagree");
            assert!(x.numel() > 0, "{name}: an empty result proves nothing");
        }
        // Each device's memory comes from its own allocator.
        vm.sync().unwrap();
        let in_use = |d| vm.allocator(d).unwrap().stats().in_use;
        let before = (in_use(Device::Cpu(0)), in_use(Device::Cpu(1)));
        let big = with_engine(&vm, || {
            with_device(Device::Cpu(1), || Tensor::ones([4096], DType::F32))
        })
        .unwrap();
        big.sync().unwrap();
        assert!(in_use(Device::Cpu(1)) >= before.1 + 4096 * 4);
        assert_eq!(in_use(Device::Cpu(0)), before.0);
        assert!(!std::sync::Arc::ptr_eq(
            &vm.allocator(Device::Cpu(0)).unwrap(),
            &vm.allocator(Device::Cpu(1)).unwrap()
        ));
    });
}

/// A write on one device, a copy, a read on the other, all queued without waiting, from four
/// threads at once: every read sees the value written just before its copy, never a later
/// one (the copy reads before the source is overwritten) nor an earlier one.
#[test]
fn to_device_is_ordered_by_the_engine_under_four_threads() {
    watchdog(120, || {
        let vm = two_devices();
        let handles: Vec<_> = (0..4u32)
            .map(|th| {
                let vm = vm.clone();
                std::thread::spawn(move || {
                    with_engine(&vm, || -> R<()> {
                        // Big enough that the copy and the ops take real time.
                        let n = 64 * 1024;
                        let x = Tensor::zeros([n], DType::F32)?;
                        let mut copies = Vec::new();
                        for step in 0..40u32 {
                            let v = (th * 1000 + step) as f32;
                            x.fill_(v as f64)?; // write on cpu:0
                            let y = x.to_device(Device::Cpu(1))?; // copy to cpu:1
                            x.add_scalar_(0.5)?; // overwrite the source at once (WAR)
                            let z = y.mul_scalar(2.0)?.add_scalar(1.0)?; // read on cpu:1
                            assert_eq!(z.device(), Device::Cpu(1));
                            copies.push((v, z));
                        }
                        for (v, z) in copies {
                            let want = v * 2.0 + 1.0;
                            let got = z.to_vec::<f32>()?;
                            assert!(
                                got.iter().all(|&g| g == want),
                                "thread {th}: {} != {want}",
                                got[0]
                            );
                        }
                        // And back: the source has all 40 writes and their increments.
                        let last = (th * 1000 + 39) as f32 + 0.5;
                        let back = x.to_device(Device::Cpu(1))?.to_device(Device::Cpu(0))?;
                        assert_eq!(back.device(), Device::Cpu(0));
                        assert!(back.to_vec::<f32>()?.iter().all(|&g| g == last));
                        Ok(())
                    })
                    .unwrap()
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        vm.sync().unwrap();
        assert_eq!(vm.stats().in_flight, 0);
    });
}

/// Gradients flow back across a copy to the source's device.
#[test]
fn gradients_cross_devices() {
    let vm = two_devices();
    with_engine(&vm, || -> R<()> {
        let x = Tensor::from_vec(vec![1f32, -2., 3.], [3])?
            .requires_grad_(true)
            .unwrap();
        let y = x
            .to_device(Device::Cpu(1))?
            .mul_scalar(3.0)?
            .square()?
            .sum_all()?;
        assert_eq!(y.device(), Device::Cpu(1));
        y.backward()?;
        let g = x.grad().expect("a gradient");
        assert_eq!(g.device(), Device::Cpu(0));
        assert_eq!(g.to_vec::<f32>()?, [18., -36., 54.]); // d/dx (3x)^2 = 18x
        Ok(())
    })
    .unwrap();
}

/// Bad device requests fail at the call with typed errors naming the op and the devices.
#[test]
fn device_errors_are_typed_and_name_the_op() {
    let vm = two_devices();
    with_engine(&vm, || -> R<()> {
        let a = Tensor::ones([2], DType::F32)?;
        let b = a.to_device(Device::Cpu(1))?;
        for (op, r) in [
            ("add", a.add(&b)),
            ("matmul", a.reshape([1, 2])?.matmul(&b.reshape([2, 1])?)),
            ("where", a.gt_scalar(0.0)?.where_(&a, &b)),
            ("cat", Tensor::cat(&[&a, &b], 0)),
            ("index_select", a.index_select(0, &Tensor::from_vec(vec![0i64], [1])?.to_device(Device::Cpu(1))?)),
        ] {
            match r {
                Err(Error::DeviceMismatch { at: _, op: o, lhs, rhs }) => {
                    assert_eq!(o, op);
                    assert!(lhs.contains("cpu:") && rhs.contains("cpu:"), "{lhs} / {rhs}");
                    assert_ne!(lhs, rhs);
                }
                other => panic!("{op}: {other:?}"),
            }
        }
        // In place, across devices.
        assert!(matches!(a.add_(&b), Err(Error::DeviceMismatch { op: "add", .. })));
        // A device the engine lacks, to move to or to create on.
        let e = a.to_device(Device::Cpu(2)).unwrap_err();
        assert!(matches!(&e, Error::DeviceUnavailable { op: "to_device", device, .. } if device == "cpu:2"), "{e}");
        let e = with_device(Device::Cpu(5), || Tensor::zeros([1], DType::F32)).unwrap_err();
        assert!(matches!(&e, Error::DeviceUnavailable { op: "full", .. }), "{e}");
        let e = with_device(Device::Cuda(0), || Tensor::from_vec(vec![1f32], [1])).unwrap_err();
        assert!(e.to_string().contains("cuda:0"), "{e}");
        // Nothing was lost: both devices still work.
        assert_eq!(b.add(&b)?.to_vec::<f32>()?, [2., 2.]);
        Ok(())
    })
    .unwrap();
}

/// The op layer has no kernel for a device without one (the tensor layer then fails the call
/// with `Unsupported`, naming the op and the device), instead of copying behind the caller's
/// back; every CPU device has every kernel.
#[test]
fn an_op_without_a_kernel_for_the_device_is_unsupported() {
    use eddy::ops::{DType as D, Lay, Layout, device, elementwise, sort};
    // A device with no kernels at all, and an op CUDA has no kernel for (with or without the
    // `cuda` feature).
    let k = elementwise::binary(
        Device::Test(0),
        elementwise::BinaryOp::Mul,
        D::F32,
        Lay::Dense(0),
        Lay::Dense(0),
    );
    assert!(k.is_none());
    // The fused negative log-likelihood: CUDA composes the loss from gather and reductions.
    let d = eddy::ops::nn::ClassDims {
        dtype: D::F32,
        idx_dtype: D::I64,
        offset: 0,
        idx_offset: 0,
        rows: 4,
        cols: 10,
    };
    assert!(eddy::ops::nn::nll_loss(Device::Cuda(0), "nll_loss", d).is_none());
    // Without the feature, nothing has a CUDA kernel.
    let l = Layout::contiguous([2, 3]);
    let sorts = sort::sort(Device::Cuda(0), D::F32, l.clone(), l, false).is_some();
    assert_eq!(sorts, cfg!(feature = "cuda"));
    let e = device::unsupported("mul", Device::Cuda(0));
    assert_eq!(
        e,
        Error::Unsupported {
            at: eddy::tensor::Caller::UNKNOWN,
            op: "mul",
            device: Device::Cuda(0)
        }
    );
    assert_eq!(
        e.without_caller().to_string(),
        "`mul` has no kernel for device cuda:0"
    );
    let k = elementwise::unary(
        Device::Cpu(9),
        elementwise::UnaryOp::Exp,
        D::F32,
        Lay::Dense(0),
    );
    assert!(k.is_some());
}

/// Views, clones and no-grad results stay on their device; an engine with one CPU device
/// names the switch that adds more.
#[test]
fn results_stay_on_their_device() {
    let vm = two_devices();
    with_engine(&vm, || -> R<()> {
        let t = with_device(Device::Cpu(1), || {
            Tensor::arange(0.0, 12.0, 1.0, DType::F32)?.reshape([3, 4])
        })?;
        let _g = no_grad();
        for (name, u) in [
            ("t", t.t()?),
            ("reshape", t.reshape([12])?),
            ("narrow", t.narrow(0, 1, 1)?),
            ("contiguous", t.t()?.contiguous()?),
            ("to_dtype", t.to_dtype(DType::F64)?),
            ("zeros_like", t.zeros_like()?),
            ("sum", t.sum_all()?),
        ] {
            assert_eq!(u.device(), Device::Cpu(1), "{name}");
        }
        Ok(())
    })
    .unwrap();
    let one = Vm::builder().cpu_devices(1).build().unwrap();
    let e = with_engine(&one, || {
        Tensor::ones([1], DType::F32)?.to_device(Device::Cpu(1))
    })
    .unwrap_err();
    assert!(e.to_string().contains("cpu_devices"), "{e}");
}
