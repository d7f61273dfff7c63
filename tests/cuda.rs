//! CUDA devices (feature `cuda`): every op with a CUDA kernel gives the CPU's result within
//! f32 tolerance, gradients included; copies between host and device are ordered by the
//! engine from several threads; out of device memory is a typed error the engine survives; an
//! op without a CUDA kernel fails by name. Each test prints why it skips where the machine has
//! no CUDA device (a skip is not a pass).
#![cfg(feature = "cuda")]

mod common;
#[path = "cuda/dtypes.rs"]
mod dtypes;

use common::watchdog;
use eddy::tensor::{DType, Device, Error, Tensor, manual_seed, with_device, with_engine};
use eddy::vm::Vm;

type R<T> = eddy::tensor::Result<T>;

const GPU: Device = Device::Cuda(0);

/// An engine with `cuda:0`, or `None` (with the reason printed) where there is none.
fn engine(capacity: Option<usize>) -> Option<Vm> {
    match Vm::builder().cuda_devices(1).capacity(capacity).build() {
        Ok(vm) => Some(vm),
        Err(e) => {
            eprintln!("SKIPPED: no CUDA device here: {e}");
            None
        }
    }
}

fn close(name: &str, cpu: &Tensor, gpu: &Tensor) {
    assert_eq!(gpu.device(), GPU, "{name}: ran on {}", gpu.device());
    assert_eq!(
        (cpu.dims(), cpu.dtype()),
        (gpu.dims(), gpu.dtype()),
        "{name}"
    );
    // One rounding apart at most: both devices compute half precision in f32 and round once,
    // but sums and transcendental functions may differ in f32's last place.
    let tol = match cpu.dtype() {
        DType::F16 => 2.0 * 2f64.powi(-11),
        DType::BF16 => 2.0 * 2f64.powi(-8),
        _ => 2e-4,
    };
    let (a, b) = (cpu.to_f64_vec().unwrap(), gpu.to_f64_vec().unwrap());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        let ok = (x.is_nan() && y.is_nan()) || (x - y).abs() <= tol * (1.0 + x.abs());
        assert!(ok, "{name}[{i}]: cpu {x} vs cuda {y}");
    }
}

/// The ops that have CUDA kernels, each made on the current device from the same inputs.
fn suite() -> R<Vec<(&'static str, Tensor)>> {
    let x = Tensor::arange(-3.0, 3.0, 0.125, DType::F32)?.reshape([6, 8])?;
    let w = Tensor::linspace(-1.0, 1.5, 40, DType::F32)?.reshape([5, 8])?;
    let b = Tensor::from_vec(vec![0.5f32, -0.25, 1.0, 0.0, 2.0], [5])?;
    let i = Tensor::from_vec(vec![3i64, 0, 2, 4], [4])?;
    let t = Tensor::from_vec(vec![1i64, 4, 0, 2, 3, 1], [6])?;
    let mut out = vec![
        (
            "add broadcast",
            x.add(&Tensor::arange(0.0, 8.0, 1.0, DType::F32)?)?,
        ),
        (
            "sub mul div",
            x.sub_scalar(0.5)?
                .mul(&x)?
                .div(&x.abs()?.add_scalar(1.0)?)?,
        ),
        (
            "pow maximum",
            x.abs()?
                .pow(&x.t()?.contiguous()?.reshape([6, 8])?.abs()?)?
                .maximum(&x)?,
        ),
        ("exp log sqrt", x.exp()?.add_scalar(1.0)?.log()?.sqrt()?),
        ("tanh sigmoid", x.tanh()?.add(&x.sigmoid()?)?),
        (
            "relu gelu silu",
            x.relu()?.add(&x.gelu()?)?.add(&x.silu()?)?,
        ),
        ("erf log1p", x.erf()?.add(&x.abs()?.log1p()?)?),
        (
            "clamp leaky elu",
            x.clamp(Some(-1.0), Some(2.0))?
                .add(&x.leaky_relu(0.1)?)?
                .add(&x.elu(1.0)?)?,
        ),
        (
            "floor round",
            x.mul_scalar(1.7)?
                .floor()?
                .add(&x.mul_scalar(2.0)?.round()?)?,
        ),
        (
            "scalar ops",
            x.add_scalar(1.0)?
                .mul_scalar(3.0)?
                .rsub_scalar(2.0)?
                .div_scalar(4.0)?,
        ),
        ("where", x.gt_scalar(0.0)?.where_(&x, &x.mul_scalar(0.1)?)?),
        ("compare", x.le(&x.flip(&[1])?)?.to_dtype(DType::F32)?),
        ("transpose copy", x.t()?.contiguous()?),
        ("narrow", x.narrow(1, 2, 3)?.mul_scalar(2.0)?),
        ("sum", x.sum(&[0], false)?),
        ("sum all", x.sum_all()?),
        ("mean keepdim", x.mean(&[1], true)?),
        ("max", x.max(1, false)?),
        ("min", x.min(0, false)?),
        ("argmax", x.sin()?.argmax(1, false)?.to_dtype(DType::F32)?),
        ("matmul", x.matmul(&w.t()?)?),
        ("matmul batched", x.reshape([2, 3, 8])?.matmul(&w.t()?)?),
        ("matmul transposed lhs", x.t()?.matmul(&x)?),
        ("linear", x.linear(&w, Some(&b))?),
        ("linear_relu", x.linear_relu(&w, Some(&b))?),
        ("softmax", x.softmax(1)?),
        ("log_softmax", x.log_softmax(0)?),
        ("cross_entropy", x.linear(&w, None)?.cross_entropy(&t)?),
        ("index_select", x.index_select(0, &i)?),
        ("embedding", w.embedding(&i)?),
        (
            "gather",
            x.gather(1, &Tensor::from_vec(vec![5i64, 0, 1, 4, 7, 2], [6, 1])?)?,
        ),
        ("eye", Tensor::eye(4, DType::F32)?),
        ("full", Tensor::full([2, 3], -1.5, DType::F32)?),
        (
            "int unary",
            t.mul_scalar(3)?
                .neg()?
                .clamp(Some(-10), Some(-2))?
                .abs()?
                .to_dtype(DType::F32)?,
        ),
        (
            "casts",
            x.mul_scalar(2.5)?
                .to_dtype(DType::I64)?
                .to_dtype(DType::F32)?
                .add(&x.gt_scalar(0.5)?.to_dtype(DType::F32)?)?,
        ),
    ];
    // Dense operands of a length that is not a multiple of 4, from an offset: the vector
    // kernel's tail and its alignment check.
    let r = Tensor::arange(0.0, 37.0, 1.0, DType::F32)?;
    let s = Tensor::linspace(-2.0, 2.0, 38, DType::F32)?.narrow(0, 1, 37)?;
    out.push((
        "dense tail",
        r.mul(&r)?
            .sub(&r.add_scalar(0.5)?)?
            .div(&r.add_scalar(1.0)?)?,
    ));
    out.push(("dense offset", r.add(&s)?.maximum(&s.mul(&r)?)?));
    let xd = x.to_dtype(DType::F64)?;
    out.push((
        "f64 elementwise",
        xd.exp()?
            .add(&xd.mul_scalar(0.5)?)?
            .div(&xd.abs()?.add_scalar(1.0)?.sqrt()?)?
            .abs()?
            .pow(&xd.abs()?.rsub_scalar(4.0)?)?,
    ));
    out.push((
        "f64 where compare cast",
        xd.gt_scalar(0.0)?
            .where_(&xd, &xd.neg()?)?
            .add(
                &xd.lt(&xd.t()?.contiguous()?.reshape([6, 8])?)?
                    .to_dtype(DType::F64)?,
            )?
            .to_dtype(DType::F32)?,
    ));
    let yd = xd.mul_scalar(1.0)?;
    yd.add_(&xd.narrow(0, 0, 1)?)?;
    out.push(("f64 in place", yd));
    out.push((
        "i64 where",
        t.gt_scalar(1)?
            .where_(&t, &t.zeros_like()?)?
            .to_dtype(DType::F32)?,
    ));
    out.push((
        "cross_entropy computed targets",
        x.linear(&w, None)?.cross_entropy(&t.mul_scalar(1)?)?,
    ));
    {
        use eddy::tensor::optim::{Adam, Optimizer};
        let q = w.mul_scalar(1.0)?.requires_grad_(true).unwrap();
        let mut opt = Adam::new(vec![q.clone()], 0.1)?;
        for _ in 0..3 {
            opt.zero_grad();
            q.square()?.sum_all()?.backward()?;
            opt.step()?;
        }
        out.push(("adam", q.detach()));
    }
    let y = x.mul_scalar(1.0)?;
    y.narrow(0, 1, 2)?.add_(&x.narrow(0, 0, 1)?)?;
    y.mul_scalar_(0.5)?;
    out.push(("in place", y));
    manual_seed(11);
    out.push(("rand", Tensor::rand([3, 4], DType::F32)?));
    out.push(("randn", Tensor::randn([7], 0.0, 2.0, DType::F32)?));
    out.extend(ordered()?);
    out.extend(halves()?);
    out.extend(dtypes::cases()?);
    let p = x.mul_scalar(1.0)?.requires_grad_(true).unwrap();
    let wp = w.mul_scalar(1.0)?.requires_grad_(true).unwrap();
    let loss = p.tanh()?.linear(&wp, Some(&b))?.relu()?.cross_entropy(&t)?;
    loss.backward()?;
    out.push(("loss", loss));
    out.push(("grad x", p.grad().expect("a gradient")));
    out.push(("grad w", wp.grad().expect("a gradient")));
    Ok(out)
}

/// Sorting, selection, running sums and reductions in more dtypes, with ties and NaN (whose
/// places are the same on every device: the order is total), and rows past what one block sorts
/// in shared memory.
fn ordered() -> R<Vec<(&'static str, Tensor)>> {
    let mut vals: Vec<f32> = (0..48).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
    vals[5] = f32::NAN;
    vals[30] = -0.0;
    let v = Tensor::from_vec(vals.clone(), [6, 8])?;
    vals[5] = 0.5;
    let c = Tensor::from_vec(vals, [6, 8])?;
    let cd = c.to_dtype(DType::F64)?;
    let long = Tensor::from_vec(
        (0..10_000)
            .map(|i| ((i * 7919) % 1000) as f32)
            .collect::<Vec<_>>(),
        [2, 5000],
    )?;
    let ints = Tensor::from_vec(
        (0..24).map(|i| (i * 5) % 7 - 3).collect::<Vec<i64>>(),
        [4, 6],
    )?;
    let vd = v.to_dtype(DType::F64)?;
    let (sv, si) = v.sort(1, false)?;
    let (dv, di) = v.sort(0, true)?;
    let (tv, ti) = v.topk(3, 1, true)?;
    let (bv, bi) = v.topk(2, 0, false)?;
    let (mv, mi) = c.median(1, false)?;
    let (lv, li) = long.sort(1, true)?;
    let (iv, ii) = ints.sort(1, false)?;
    Ok(vec![
        ("sort values", sv),
        ("sort positions", si),
        ("sort descending dim 0 values", dv),
        ("sort descending dim 0 positions", di),
        ("argsort f64", vd.argsort(1, true)?),
        ("topk values", tv),
        ("topk positions", ti),
        ("topk smallest values", bv),
        ("topk smallest positions", bi),
        ("median values", mv),
        ("median positions", mi),
        ("sort long rows values", lv),
        ("sort long rows positions", li),
        ("sort i64 values", iv),
        ("sort i64 positions", ii),
        ("argsort bool", v.gt_scalar(0.0)?.argsort(1, false)?),
        ("cumsum", c.cumsum(1)?),
        ("cumsum dim 0 f64", vd.cumsum(0)?),
        ("cumsum i64", ints.cumsum(1)?),
        ("cumsum bool", ints.gt_scalar(0.0)?.cumsum(0)?),
        ("sum f64", cd.sum(&[1], false)?),
        ("mean f64", cd.mean(&[0], true)?),
        ("max min f64", vd.max(1, false)?.add(&vd.min(1, false)?)?),
        ("argmax f64", vd.argmax(0, false)?),
        ("sum_all f64", cd.sum_all()?),
        ("sum leading f64", cd.sum(&[0], false)?),
        ("sum i64", ints.sum(&[1], false)?),
        (
            "prod max min i64",
            ints.prod(&[0], false)?
                .add(&ints.max(1, false)?.sum_all()?)?
                .add(&ints.min(0, false)?)?,
        ),
        ("argmin i64", ints.argmin(1, false)?),
        ("sum bool", ints.gt_scalar(0.0)?.sum(&[0], false)?),
        (
            "any all",
            ints.any(&[1], false)?
                .to_dtype(DType::I64)?
                .add(&ints.all(&[1], false)?.to_dtype(DType::I64)?)?,
        ),
        (
            "u8 argmax max",
            ints.gt_scalar(0.0)?
                .to_dtype(DType::U8)?
                .argmax(1, false)?
                .add(&Tensor::full([4], 7.0, DType::U8)?.to_dtype(DType::I64)?)?,
        ),
        (
            "sum over an empty dim",
            Tensor::zeros([3, 0], DType::F32)?.sum(&[1], false)?,
        ),
    ])
}

/// Half precision (computed in f32 on both devices) and f64 products.
fn halves() -> R<Vec<(&'static str, Tensor)>> {
    let x = Tensor::arange(-3.0, 3.0, 0.125, DType::F32)?.reshape([6, 8])?;
    let w = Tensor::linspace(-1.0, 1.5, 40, DType::F32)?.reshape([5, 8])?;
    let mut out = vec![(
        "matmul f64",
        x.to_dtype(DType::F64)?
            .matmul(&w.to_dtype(DType::F64)?.t()?)?,
    )];
    // Index ops in other dtypes: copies of any dtype, additions of f64.
    let (xd, rows) = (
        x.to_dtype(DType::F64)?,
        Tensor::from_vec(vec![3i64, 0, 2, 4], [4])?,
    );
    let cols = Tensor::from_vec(vec![5i64, 0, 1, 4, 7, 2], [6, 1])?;
    let k = Tensor::arange(0.0, 48.0, 1.0, DType::F32)?
        .to_dtype(DType::I64)?
        .reshape([6, 8])?;
    out.extend([
        ("index_select f64", xd.index_select(0, &rows)?),
        ("gather i64", k.gather(1, &cols)?),
        ("embedding bf16", w.to_dtype(DType::BF16)?.embedding(&rows)?),
        (
            "index_add f64",
            xd.index_add(0, &rows, &xd.narrow(0, 0, 4)?)?,
        ),
        (
            "scatter_add f64",
            xd.scatter_add(1, &cols, &xd.narrow(1, 0, 1)?)?,
        ),
        ("masked_fill i64", k.masked_fill(&k.gt_scalar(20.0)?, -1.0)?),
    ]);
    for (name, dt) in [("f16", DType::F16), ("bf16", DType::BF16)] {
        let (h, hw) = (x.to_dtype(dt)?, w.to_dtype(dt)?);
        let cases = [
            (
                "elementwise",
                h.exp()?
                    .add(&h.mul_scalar(0.5)?)?
                    .tanh()?
                    .sub(&h.abs()?.sqrt()?)?,
            ),
            ("compare where", h.gt_scalar(0.25)?.where_(&h, &h.neg()?)?),
            (
                "casts",
                h.to_dtype(DType::F32)?
                    .mul_scalar(1.5)?
                    .to_dtype(dt)?
                    .add(&h.gt_scalar(0.0)?.to_dtype(dt)?)?,
            ),
            ("to i64", h.mul_scalar(2.0)?.to_dtype(DType::I64)?),
            ("sum", h.sum(&[1], false)?),
            ("sum leading", h.sum(&[0], false)?),
            ("max", h.max(0, false)?),
            ("argmin", h.argmin(1, false)?),
            ("full", Tensor::full([3], 0.1, dt)?),
            ("matmul", h.matmul(&hw.t()?)?),
            ("matmul batched", h.reshape([2, 3, 8])?.matmul(&hw.t()?)?),
        ];
        for (what, t) in cases {
            // Leaked names: a handful, once per process.
            out.push((
                Box::leak(format!("{name} {what}").into_boxed_str()) as &str,
                t,
            ));
        }
        let y = h.mul_scalar(1.0)?;
        y.add_(&h.narrow(0, 0, 1)?)?;
        out.push((
            if dt == DType::F16 {
                "f16 in place"
            } else {
                "bf16 in place"
            },
            y,
        ));
    }
    Ok(out)
}

#[test]
fn every_op_with_a_cuda_kernel_matches_the_cpu() {
    let Some(vm) = engine(None) else { return };
    watchdog(300, move || {
        let cpu = with_engine(&vm, || with_device(Device::CPU, suite)).unwrap();
        let gpu = with_engine(&vm, || with_device(GPU, suite)).unwrap();
        assert_eq!(cpu.len(), gpu.len());
        for ((name, c), (_, g)) in cpu.iter().zip(&gpu) {
            close(name, c, g);
        }
        println!("{} ops matched on {GPU}", cpu.len());
    });
}

/// The suite itself runs on any machine: where there is no device, the CPU half of the
/// comparison above still runs, so a mistake in the suite shows before a GPU is at hand.
#[test]
fn the_suite_runs_on_the_cpu() {
    let vm = Vm::builder().build().unwrap();
    let cpu = with_engine(&vm, || with_device(Device::CPU, suite)).unwrap();
    let names: std::collections::HashSet<_> = cpu.iter().map(|(n, _)| *n).collect();
    assert_eq!(names.len(), cpu.len(), "each case has a name of its own");
    let (sv, si) = (
        &cpu[names_at(&cpu, "sort values")].1,
        &cpu[names_at(&cpu, "sort positions")].1,
    );
    // The first row of `ordered`'s `v`: NaN sorts last, ties keep their order.
    let row: Vec<f32> = sv.narrow(0, 0, 1).unwrap().to_vec().unwrap();
    assert!(row[7].is_nan(), "{row:?}");
    assert!(row[..7].windows(2).all(|p| p[0] <= p[1]), "{row:?}");
    let pos: Vec<i64> = si.narrow(0, 0, 1).unwrap().to_vec().unwrap();
    assert_eq!(pos[7], 5, "{pos:?}");
}

fn names_at(cases: &[(&str, Tensor)], name: &str) -> usize {
    cases.iter().position(|(n, _)| *n == name).expect(name)
}

/// A compiled graph on the device runs its elementwise chain as merged kernels (NVRTC-compiled,
/// at most 32 ops each, one launch each), with the CPU's values.
#[test]
fn a_compiled_chain_runs_as_merged_device_kernels() {
    use eddy::tensor::graph::Graph;
    let Some(vm) = engine(None) else { return };
    let run = |device: Device| -> R<(usize, Tensor)> {
        with_device(device, || {
            let x = Tensor::linspace(-2.0, 2.0, 1000, DType::F32)?;
            let g = Graph::new(|xs: &[Tensor]| {
                let mut y = xs[0].clone();
                for _ in 0..40 {
                    y = y.mul_scalar(0.9)?.add(&xs[0])?.tanh()?;
                }
                Ok(vec![y.exp()?])
            });
            let steps = g.compile(&[&x])?.len();
            let out = g.run(&[&x])?.remove(0);
            Ok((steps, out))
        })
    };
    with_engine(&vm, || -> R<()> {
        let (on_cpu, cpu) = run(Device::CPU)?;
        let (on_gpu, gpu) = run(GPU)?;
        assert_eq!(on_cpu, 1, "the CPU merges the 121 ops into one step");
        assert_eq!(on_gpu, 121usize.div_ceil(32), "kernels of at most 32 ops");
        close("merged chain", &cpu, &gpu);
        Ok(())
    })
    .unwrap();
}

/// With the timeline on, each kernel launched on the device is also on the device's lane,
/// timed by events on the device, no earlier than its launch; memory statistics add up the
/// device's allocators.
#[test]
fn the_trace_has_a_device_lane_and_memory_is_counted_per_device() {
    let Some(vm) = engine(None) else { return };
    vm.set_trace(true);
    with_engine(&vm, || -> R<()> {
        let x = with_device(GPU, || Tensor::ones([1 << 20], DType::F32))?;
        let y = x.exp()?.add(&x)?;
        y.sync()?;
        let s = vm.memory_stats(GPU);
        assert!(s.in_use >= 8 << 20, "x and y: {s:?}");
        assert!(s.reserved >= s.in_use && s.allocations >= 2, "{s:?}");
        assert_eq!(vm.memory_stats(Device::Cpu(7)).reserved, 0);
        Ok(())
    })
    .unwrap();
    let events = vm.trace_events();
    let lane: Vec<_> = events
        .iter()
        .filter(|e| e.thread.ends_with(" device"))
        .collect();
    assert!(
        lane.iter().any(|e| e.name == "exp") && lane.iter().any(|e| e.name == "add"),
        "{lane:?}"
    );
    for d in &lane {
        assert!(d.dur_us > 0.0, "{d:?}");
        if let Some(h) = events.iter().find(|e| e.id == d.id && e.thread != d.thread) {
            // The anchor is taken within microseconds of the device's clock.
            assert!(
                d.start_us + 100.0 >= h.start_us,
                "device {d:?} before host {h:?}"
            );
        }
    }
    #[cfg(feature = "cli")]
    {
        let svg = eddy::plot::timeline_svg(&events, &[]);
        assert!(svg.contains(" device"), "the picture draws the device lane");
    }
}

/// An eager chain of small elementwise ops on the device runs in fused units, each one launch
/// of the unit kernel (`eddy_ops::cuda::unit_merge`), with the CPU's values. The ops are
/// queued while the engine's scheduler waits in a barrier, so that they reach it together
/// and fuse. (The engine's settings are set here, not read from the environment: a low
/// high-water mark would block the submitting thread while the scheduler waits.)
#[test]
fn eager_units_of_elementwise_ops_run_as_one_launch_each() {
    use eddy::vm::VmBuilder;
    use eddy::vm::testing::Gate;
    let vm = match VmBuilder::new()
        .cuda_devices(1)
        .fusion(true)
        .window(64)
        .promotion(false)
        .trace(true)
        .build()
    {
        Ok(vm) => vm,
        Err(e) => {
            eprintln!("SKIPPED: no CUDA device here: {e}");
            return;
        }
    };
    let chain = |device: Device| -> R<Tensor> {
        with_device(device, || {
            let x = Tensor::linspace(-1.0, 1.0, 16, DType::F32)?;
            let mut y = x.clone();
            for _ in 0..100 {
                y = y.add(&x)?.mul_scalar(0.5)?.tanh()?;
            }
            Ok(y)
        })
    };
    /// Opens the gate when dropped, also on a panic: the engine's drop waits for the barrier.
    struct Opens(std::sync::Arc<Gate>);
    impl Drop for Opens {
        fn drop(&mut self) {
            self.0.open();
        }
    }
    watchdog(300, move || {
        with_engine(&vm, || -> R<()> {
            let cpu = chain(Device::CPU)?;
            let x = with_device(GPU, || Tensor::zeros([1], DType::F32))?;
            x.sync()?;
            let gate = Gate::new();
            let g = gate.clone();
            let mut b = vm.instructions();
            b.barrier(move || g.wait());
            b.submit()?;
            let gpu = {
                let _opens = Opens(gate);
                chain(GPU)
            };
            close("eager chain", &cpu, &gpu?);
            Ok(())
        })
        .unwrap();
        let events = vm.trace_events();
        let host = || events.iter().filter(|e| !e.thread.ends_with(" device"));
        let units = host().filter(|e| e.name.starts_with("unit[")).count();
        let single = host().filter(|e| e.name == "tanh").count();
        println!("{units} units, {single} tanh launched alone");
        assert!(units > 0 && single < 100, "{units} units, {single} alone");
    });
}

/// Host → device → compute → host chains from four threads, queued without waiting, with the
/// host source overwritten right after each copy: every result is the one its copy saw.
#[test]
fn copies_and_compute_are_ordered_across_streams_from_four_threads() {
    let Some(vm) = engine(None) else { return };
    watchdog(300, move || {
        let hs: Vec<_> = (0..4u32)
            .map(|th| {
                let vm = vm.clone();
                std::thread::spawn(move || {
                    with_engine(&vm, || -> R<()> {
                        let n = 256 * 1024;
                        let x = Tensor::zeros([n], DType::F32)?;
                        let mut pending = Vec::new();
                        for step in 0..30u32 {
                            let v = (th * 100 + step) as f32;
                            x.fill_(v as f64)?; // host write
                            let g = x.to_device(GPU)?; // H2D on the device stream
                            x.add_scalar_(0.5)?; // WAR: must not reach the copy
                            let z = g.mul_scalar(2.0)?.add_scalar(1.0)?; // device compute
                            g.mul_scalar_(0.0)?; // WAW on the device after the read above
                            pending.push((v, z.to_device(Device::CPU)?)); // D2H
                        }
                        for (v, z) in pending {
                            let got = z.to_vec::<f32>()?;
                            assert!(
                                got.iter().all(|&g| g == v * 2.0 + 1.0),
                                "thread {th}: {} for {v}",
                                got[0]
                            );
                        }
                        Ok(())
                    })
                    .unwrap()
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    });
}

/// Out of device memory: the engine retries after freeing its cache, and a request no retry
/// can meet is a typed `OutOfMemory` for that op; the device keeps working.
#[test]
fn device_memory_runs_out_with_a_typed_error_and_the_engine_goes_on() {
    let cap = 256 << 20;
    let Some(vm) = engine(Some(cap)) else { return };
    watchdog(300, move || {
        with_engine(&vm, || -> R<()> {
            // Fill to within a margin, drop, fill again with larger pieces: the cache holds the
            // old blocks, so each new round needs the out-of-memory path to free them and
            // retry, which the user never sees.
            for (count, mib) in [(4usize, 32usize), (3, 60), (2, 100)] {
                let elems = (mib << 20) / 4;
                let held = (0..count)
                    .map(|_| with_device(GPU, || Tensor::ones([elems], DType::F32)))
                    .collect::<R<Vec<_>>>()?;
                for t in &held {
                    let s = t.sum_all()?.to_device(Device::CPU)?.item::<f32>()?;
                    assert_eq!(s, elems as f32);
                }
            }
            let stats = vm.allocator(GPU).expect("cuda:0 has an allocator").stats();
            assert!(stats.oom_retries > 0, "no retry happened: {stats:?}");
            // Larger than the whole device budget.
            let big = with_device(GPU, || Tensor::ones([128 << 20], DType::F32))?; // 512 MiB
            let e = big
                .sum_all()
                .and_then(|s| s.to_device(Device::CPU)?.item::<f32>())
                .unwrap_err();
            assert!(
                e.to_string().contains("out of memory")
                    || matches!(e, Error::Vm(ref v) if v.is_oom()),
                "{e}"
            );
            // The engine and the device go on.
            let ok = with_device(GPU, || Tensor::ones([1024], DType::F32))?.sum_all()?;
            assert_eq!(ok.to_device(Device::CPU)?.item::<f32>()?, 1024.0);
            Ok(())
        })
        .unwrap();
    });
}

/// An op the device has no kernel for (here, a sort or a running sum over a tensor of more
/// than the 8 dims a device layout holds) fails at the call, naming the op and the device;
/// nothing is copied to the host behind the caller's back.
#[test]
fn an_op_without_a_cuda_kernel_is_unsupported_by_name() {
    let Some(vm) = engine(None) else { return };
    with_engine(&vm, || -> R<()> {
        let g = with_device(GPU, || Tensor::arange(0.0, 6.0, 1.0, DType::F32))?;
        let nine = g.reshape([1, 1, 1, 1, 1, 1, 1, 2, 3])?;
        for (what, r) in [
            ("sort", nine.sort(-1, false).map(|_| ())),
            ("cumsum", nine.cumsum(-1).map(|_| ())),
        ] {
            match r {
                Err(Error::Unsupported { at: _, op, device }) => {
                    assert_eq!((op, device), (what, GPU))
                }
                other => panic!("{what}: {other:?}"),
            }
        }
        // Casts the device once lacked now run there.
        assert_eq!(
            g.to_dtype(DType::I32)?.to_f64_vec()?,
            [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        );
        Ok(())
    })
    .unwrap();
}

/// An index the device computed (so the host cannot check it) that is out of range reads NaN
/// in every float dtype, each in its own format (f16 and bf16 are copied as bits), and 0 in
/// the integer ones; the indices in range read their values.
#[test]
fn an_index_computed_on_the_device_out_of_range_reads_nan_in_float_dtypes() {
    let Some(vm) = engine(None) else { return };
    with_engine(&vm, || -> R<()> {
        with_device(GPU, || -> R<()> {
            let x = Tensor::arange(1.0, 5.0, 1.0, DType::F32)?;
            // [2, 7, 0]: 7 is out of range for 4 values, and written by a device op.
            let i = Tensor::from_vec(vec![-1i64, 4, -3], [3])?.add_scalar(3)?;
            for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64] {
                let v = x.to_dtype(dtype)?;
                for (how, got) in [
                    ("index_select", v.index_select(0, &i)?),
                    ("gather", v.gather(0, &i)?),
                ] {
                    let got = got.to_f64_vec()?;
                    let want_bad = if dtype == DType::I64 { 0.0 } else { f64::NAN };
                    assert_eq!((got[0], got[2]), (3.0, 1.0), "{how} {dtype:?}: {got:?}");
                    assert!(
                        got[1].to_bits() == want_bad.to_bits()
                            || (got[1].is_nan() && want_bad.is_nan()),
                        "{how} {dtype:?}: {got:?}"
                    );
                }
            }
            Ok(())
        })
    })
    .unwrap();
}

/// A few steps of an MLP trained on the device lower its loss, as on the CPU.
#[test]
fn an_mlp_trains_on_the_device() {
    use eddy::tensor::nn::{Linear, Module};
    use eddy::tensor::optim::{Adam, Optimizer};
    let Some(vm) = engine(None) else { return };
    watchdog(300, move || {
        let run = |d: Device| {
            with_engine(&vm, || {
                with_device(d, || -> R<(f32, f32)> {
                    manual_seed(5);
                    let l1 = Linear::new(16, 32, true, DType::F32)?;
                    let l2 = Linear::new(32, 4, true, DType::F32)?;
                    let mut ps = l1.parameters();
                    ps.extend(l2.parameters());
                    let mut opt = Adam::new(ps, 0.01)?;
                    let x = Tensor::randn([64, 16], 0.0, 1.0, DType::F32)?;
                    let y = x.narrow(1, 0, 4)?.argmax(1, false)?;
                    let mut first = 0.0;
                    let mut last = 0.0;
                    for step in 0..50 {
                        opt.zero_grad();
                        let loss = l2.forward(&l1.forward(&x)?.relu()?)?.cross_entropy(&y)?;
                        loss.backward()?;
                        opt.step()?;
                        let v = loss.to_device(Device::CPU)?.item::<f32>()?;
                        if step == 0 {
                            first = v;
                        }
                        last = v;
                    }
                    Ok((first, last))
                })
            })
            .unwrap()
        };
        let (c0, c1) = run(Device::CPU);
        let (g0, g1) = run(GPU);
        println!("loss cpu {c0} -> {c1}, cuda {g0} -> {g1}");
        assert!(
            g1 < g0 * 0.5,
            "the loss fell too little on the device: {g0} -> {g1}"
        );
        assert!(
            (g0 - c0).abs() < 1e-3 && (g1 - c1).abs() < 2e-2,
            "cpu {c0}->{c1}, cuda {g0}->{g1}"
        );
    });
}

/// Copies between the host and the device run on the device's copy streams, not its compute
/// stream, and `empty_cache` gives cached device memory back.
#[test]
fn copies_run_on_the_copy_streams_and_empty_cache_returns_memory() {
    let vm = match Vm::builder().cuda_devices(1).trace(true).build() {
        Ok(vm) => vm,
        Err(e) => {
            eprintln!("SKIPPED: no CUDA device here: {e}");
            return;
        }
    };
    watchdog(120, move || {
        with_engine(&vm, || -> R<()> {
            let n = 1 << 20; // 4 MiB: staged through pinned memory
            let h = Tensor::arange(0.0, n as f64, 1.0, DType::F32)?;
            let g = h.to_device(GPU)?.mul_scalar(2.0)?;
            let back = g.to_device(Device::CPU)?.to_vec::<f32>()?;
            assert!(back.iter().enumerate().all(|(i, &v)| v == 2.0 * i as f32));
            drop(g);
            vm.sync()?;
            Ok(())
        })
        .unwrap();
        let names: Vec<String> = vm
            .trace_events()
            .iter()
            .filter(|e| e.name == "to_device")
            .map(|e| {
                vm.stream_policy(eddy::vm::StreamId(e.stream))
                    .unwrap()
                    .name()
                    .to_string()
            })
            .collect();
        assert_eq!(names, vec!["cuda:0:h2d", "cuda:0:d2h"], "{names:?}");
        let cached = vm.allocator(GPU).unwrap().stats().reserved;
        assert!(cached >= 4 << 20, "the product's block is cached: {cached}");
        assert!(vm.empty_cache(GPU) >= 4 << 20);
        assert_eq!(vm.allocator(GPU).unwrap().stats().reserved, 0);
    });
}
