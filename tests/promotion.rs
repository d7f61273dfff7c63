//! Automatic promotion: eager loops on an engine with the switch on run their recurring windows
//! as plans, with the values of an engine without it, bit for bit; loops that change shape or
//! branch on a value read from the device fall back and stay correct.

#[path = "common/mod.rs"]
mod common;

use common::{bits, watchdog};
use eddy::models::mlp;
use eddy::tensor::nn::Module;
use eddy::tensor::optim::{Adam, Optimizer, Sgd};
use eddy::tensor::{DType, Tensor, no_grad, with_engine};
use eddy::vm::Vm;

/// Promotion of every recurring window: these tests count plan runs, which must not depend
/// on how fast the host runs them.
fn promoting_vm() -> Vm {
    Vm::builder()
        .promotion(true)
        .promotion_measured(false)
        .build()
        .unwrap()
}

/// Inputs and class targets of a batch of `n`.
fn batch(seed: u64, n: usize) -> (Tensor, Tensor) {
    let x: Vec<f32> = (0..n * 12)
        .map(|i| ((i as u64 * 7 + seed) % 13) as f32 / 6.0 - 1.0)
        .collect();
    let y: Vec<i64> = (0..n as i64).map(|i| (i * 7 + seed as i64) % 4).collect();
    (
        Tensor::from_vec(x, [n, 12]).unwrap(),
        Tensor::from_vec(y, [n]).unwrap(),
    )
}

/// `steps` training steps of a fresh MLP on `vm` (the loss read each step, a sync point):
/// the losses and the final parameters' bits.
fn train<O: Optimizer>(
    vm: &Vm,
    steps: u64,
    n: impl Fn(u64) -> usize,
    opt: impl Fn(Vec<Tensor>) -> O,
) -> (Vec<u32>, Vec<Vec<u32>>) {
    with_engine(vm, || {
        // Parameters set by value: tests run in parallel and share the seeded generator.
        let model = mlp(&[12, 24, 4]).unwrap();
        {
            let _g = no_grad();
            for (k, p) in model.parameters().iter().enumerate() {
                let n = p.numel();
                let v = (0..n)
                    .map(|i| ((i * 31 + k * 7) % 17) as f32 / 40.0 - 0.2)
                    .collect();
                p.copy_(&Tensor::from_vec(v, p.shape().clone()).unwrap())
                    .unwrap();
            }
        }
        let mut opt = opt(model.parameters());
        let mut losses = Vec::new();
        for s in 0..steps {
            let (x, y) = batch(s % 3, n(s));
            opt.zero_grad();
            let loss = model.forward(&x).unwrap().cross_entropy(&y).unwrap();
            loss.backward().unwrap();
            opt.step().unwrap();
            losses.push(loss.item::<f32>().unwrap().to_bits());
        }
        let params = model.parameters().iter().map(bits).collect();
        (losses, params)
    })
}

#[test]
fn a_training_loop_is_promoted_and_computes_the_eager_bits() {
    watchdog(120, || {
        for adam in [false, true] {
            let plain = Vm::builder().build().unwrap();
            let auto = promoting_vm();
            let run = |vm: &Vm| {
                if adam {
                    train(vm, 12, |_| 16, |p| Adam::new(p, 0.01).unwrap())
                } else {
                    train(vm, 12, |_| 16, |p| Sgd::new(p, 0.1).unwrap())
                }
            };
            assert_eq!(run(&auto), run(&plain), "adam: {adam}");
            let s = auto.promotion_stats().unwrap();
            assert!(s.compiled >= 1 && s.plan_runs >= 5, "adam: {adam}: {s:?}");
        }
    });
}

/// With the timing verdicts on (the default), whichever way each window runs, eagerly or as
/// a plan, a long loop computes the bits of an engine without promotion.
#[test]
fn a_measured_loop_computes_the_eager_bits_whichever_way_its_windows_run() {
    watchdog(120, || {
        let plain = Vm::builder().build().unwrap();
        let auto = Vm::builder().promotion(true).build().unwrap();
        let run = |vm: &Vm| train(vm, 40, |_| 16, |p| Adam::new(p, 0.01).unwrap());
        assert_eq!(run(&auto), run(&plain));
        let s = auto.promotion_stats().unwrap();
        // The third window is held: it runs as a plan, or eagerly when its held calls alone
        // were timed slower than an eager window.
        assert!(s.plan_runs + s.backed_off >= 1 && s.windows >= 40, "{s:?}");
    });
}

#[test]
fn a_loop_whose_shapes_change_falls_back_and_stays_correct() {
    watchdog(120, || {
        // The batch grows every fourth step: each change breaks the run of matching windows.
        let n = |s: u64| 8 + 4 * (s / 4) as usize;
        let sgd = |p| Sgd::new(p, 0.1).unwrap();
        let auto = promoting_vm();
        let plain = Vm::builder().build().unwrap();
        assert_eq!(train(&auto, 16, n, sgd), train(&plain, 16, n, sgd));
        let s = auto.promotion_stats().unwrap();
        assert!(s.fallbacks >= 2, "{s:?}");
        assert!(
            s.plan_runs >= 2,
            "each shape ran as a plan once it repeated: {s:?}"
        );
    });
}

/// A loop that branches on a value it reads from the device (`.item()`): the branch changes
/// the calls, the read ends the window, and nothing is ever promoted wrongly.
#[test]
fn a_data_dependent_branch_is_never_promoted_wrongly() {
    watchdog(120, || {
        let run = |vm: &Vm| {
            with_engine(vm, || {
                let mut x = Tensor::linspace(-1.0, 1.0, 32, DType::F32).unwrap();
                let mut seen = Vec::new();
                for k in 0..40 {
                    let s = x.sum_all().unwrap().item::<f32>().unwrap();
                    // Which way depends on the value, which changes with k.
                    x = if (s + k as f32 * 0.37).sin() > 0.0 {
                        x.mul_scalar(0.9).unwrap().add_scalar(0.1).unwrap()
                    } else {
                        x.tanh().unwrap().sub_scalar(0.05).unwrap()
                    };
                    seen.push(s.to_bits());
                }
                seen.push(x.sum_all().unwrap().item::<f32>().unwrap().to_bits());
                seen
            })
        };
        let auto = promoting_vm();
        assert_eq!(run(&auto), run(&Vm::builder().build().unwrap()));
        let s = auto.promotion_stats().unwrap();
        assert!(s.windows >= 40, "{s:?}");
    });
}

/// Another thread's ops while this thread's calls are held: the held calls run first, and
/// both threads' values are right.
#[test]
fn another_threads_ops_let_the_held_calls_run_first() {
    watchdog(120, || {
        let vm = promoting_vm();
        with_engine(&vm, || {
            let w = Tensor::full([64], 0.5, DType::F32).unwrap();
            let mut x = Tensor::ones([64], DType::F32).unwrap();
            let mut expect = 1.0f32;
            for k in 0..12 {
                x = x.mul(&w).unwrap().add_scalar(1.0).unwrap();
                expect = expect * 0.5 + 1.0;
                if k % 3 == 2 {
                    // Mid-window (calls may be held): another thread computes on its own.
                    let vm2 = vm.clone();
                    std::thread::spawn(move || {
                        with_engine(&vm2, || {
                            let t = Tensor::full([8], 2.0, DType::F32).unwrap();
                            assert_eq!(
                                t.mul_scalar(3.0).unwrap().to_vec::<f32>().unwrap(),
                                [6.0; 8]
                            );
                        })
                    })
                    .join()
                    .unwrap();
                }
                let v = x.to_vec::<f32>().unwrap();
                assert!(
                    v.iter().all(|&e| e == expect),
                    "step {k}: {} vs {expect}",
                    v[0]
                );
            }
        });
    });
}

/// An elementwise chain read at each step: its promoted windows merge the chain into one
/// kernel, as a compiled graph would, and compute the eager bits; a scale that changes at
/// every step reaches the merged kernel of that step.
#[test]
fn a_promoted_chain_is_merged_and_computes_the_eager_bits() {
    watchdog(120, || {
        let run = |vm: &Vm| {
            with_engine(vm, || {
                let x = Tensor::linspace(-2.0, 2.0, 1500, DType::F32).unwrap();
                (0..10)
                    .map(|k| {
                        let y = x.mul_scalar(0.5 + k as f64 / 16.0).unwrap();
                        let y = y.exp().unwrap().add(&x).unwrap().tanh().unwrap();
                        bits(&y)
                    })
                    .collect::<Vec<_>>()
            })
        };
        let auto = promoting_vm();
        assert_eq!(run(&auto), run(&Vm::builder().build().unwrap()));
        assert!(
            auto.has_plan_pass(),
            "the tensor layer gives its engine the pass"
        );
        let s = auto.promotion_stats().unwrap();
        assert!(s.plan_runs >= 5, "{s:?}");
        assert!(s.merged >= 3, "the chain of four became one step: {s:?}");
    });
}

/// A window's merged steps are made once and reused by the later windows of its kind, whose
/// kernels describe themselves alike; where a window reads its chain's input at another
/// offset (the same blob and sizes, so the same notes), its kernels describe themselves
/// otherwise, the pass runs again, and every value is the eager one.
#[test]
fn merged_steps_are_reused_only_by_windows_that_describe_themselves_alike() {
    watchdog(120, || {
        // `shift(k)`: where window `k` reads its 8 elements in the 16 of `x`.
        let run = |vm: &Vm, shift: fn(usize) -> usize| {
            with_engine(vm, || {
                let x = Tensor::linspace(-2.0, 2.0, 16, DType::F32).unwrap();
                (0..12)
                    .map(|k| {
                        let v = x.narrow(0, shift(k), 8).unwrap();
                        let y = v.exp().unwrap().add(&v).unwrap().tanh().unwrap();
                        bits(&y)
                    })
                    .collect::<Vec<_>>()
            })
        };
        let eager = Vm::builder().build().unwrap();
        // The same offset in every window: one pass, at the compile; the rest reuse it.
        let same = promoting_vm();
        assert_eq!(run(&same, |_| 0), run(&eager, |_| 0));
        let s = same.promotion_stats().unwrap();
        assert!(s.plan_runs >= 5 && s.merged >= 2, "{s:?}");
        assert_eq!(s.passes, 1, "later windows reuse the merged steps: {s:?}");
        // Offsets that alternate: each window's merged kernel reads where that window does.
        let alternating = promoting_vm();
        let shift = |k: usize| 8 * (k % 2);
        assert_eq!(run(&alternating, shift), run(&eager, shift));
        let s = alternating.promotion_stats().unwrap();
        assert!(s.plan_runs >= 5, "{s:?}");
        assert_eq!(s.passes, s.plan_runs, "no window reuses another's: {s:?}");
    });
}

/// Windows whose calls match (same kernels, same sizes) but whose merging differs (`f32`
/// values merge, `f16` ones do not): each shape gets its own plan, and every value is the
/// eager one.
#[test]
fn windows_that_merge_differently_get_plans_of_their_own() {
    use eddy::tensor::f16;
    watchdog(120, || {
        let run = |vm: &Vm| {
            with_engine(vm, || {
                // 64 bytes each: 16 f32 values or 32 f16 ones.
                let a = Tensor::linspace(-1.0, 1.0, 16, DType::F32).unwrap();
                let b = Tensor::linspace(-1.0, 1.0, 32, DType::F16).unwrap();
                let mut out = Vec::new();
                for k in 0..12 {
                    if k % 4 < 3 {
                        out.push(bits(&a.exp().unwrap().add(&a).unwrap()));
                    } else {
                        let y = b.exp().unwrap().add(&b).unwrap();
                        let v = y.to_vec::<f16>().unwrap();
                        out.push(v.iter().map(|h| u32::from(h.to_bits())).collect());
                    }
                }
                out
            })
        };
        let auto = promoting_vm();
        assert_eq!(run(&auto), run(&Vm::builder().build().unwrap()));
        let s = auto.promotion_stats().unwrap();
        assert!(s.plan_runs >= 3, "{s:?}");
        assert!(
            s.compiled >= 2,
            "the f16 windows needed a plan of their own: {s:?}"
        );
    });
}

/// A window that writes in place, first thing, a tensor from before it and then drops it:
/// the tensor's values are read by the in-place op, so its blob comes from before the
/// window (a plan input that the run writes), not a temporary of the plan's.
#[test]
fn an_in_place_write_to_a_tensor_from_before_the_window_reads_its_values() {
    watchdog(120, || {
        let run = |vm: &Vm| {
            with_engine(vm, || {
                let x = Tensor::linspace(-1.0, 1.0, 16, DType::F32).unwrap();
                let mut h = Tensor::ones([16], DType::F32).unwrap();
                h.sync().unwrap();
                (0..10)
                    .map(|_| {
                        h.mul_scalar_(0.5).unwrap();
                        h = h.add(&x).unwrap();
                        bits(&h)
                    })
                    .collect::<Vec<_>>()
            })
        };
        let auto = promoting_vm();
        assert_eq!(run(&auto), run(&Vm::builder().build().unwrap()));
        let s = auto.promotion_stats().unwrap();
        assert!(s.plan_runs >= 5, "{s:?}");
    });
}

/// A promoted window whose calls come from one of two call sites of the same kernel (chosen
/// by a branch) names, for a kernel error, the site that made the failing call, as the
/// engine without promotion does, whichever site's window the plan was compiled from: a bad
/// index at each site in turn.
#[test]
fn a_kernel_error_in_a_promoted_window_names_its_own_call_site() {
    watchdog(120, || {
        let vm = promoting_vm();
        with_engine(&vm, || {
            let table = Tensor::arange(0.0, 8.0, 1.0, DType::F32)
                .unwrap()
                .reshape([4, 2])
                .unwrap();
            let good = Tensor::from_vec(vec![0i64, 3], [2]).unwrap();
            let bad = Tensor::from_vec(vec![1i64, 9], [2]).unwrap();
            let zero = Tensor::zeros([2], DType::I64).unwrap();
            let (line_even, line_odd) = (line!() + 9, line!() + 11);
            let failing = [8, 9];
            for i in 0..12 {
                // Computed, so only the kernel sees the values.
                let idx = if failing.contains(&i) { &bad } else { &good };
                let idx = idx.add(&zero).unwrap();
                // Two call sites of one kernel, alike but for their lines: the point.
                #[allow(clippy::if_same_then_else)]
                let picked = if i % 2 == 0 {
                    table.index_select(0, &idx).unwrap()
                } else {
                    table.index_select(0, &idx).unwrap()
                };
                let r = picked.sum_all().unwrap().to_vec::<f32>();
                if !failing.contains(&i) {
                    assert_eq!(r.unwrap(), [0. + 1. + 6. + 7.]);
                    continue;
                }
                let e = r.unwrap_err();
                assert_eq!(e.op(), Some("index_select"), "{e}");
                let at = e.caller().unwrap();
                let line = if i % 2 == 0 { line_even } else { line_odd };
                assert_eq!((at.file(), at.line()), (file!(), line), "window {i}: {e}");
                vm.clear_errors();
            }
            let s = vm.promotion_stats().unwrap();
            assert!(s.plan_runs >= 7, "the failing windows ran as plans: {s:?}");
        });
    });
}

/// A promoted plan's arena is a cache of the engine's: the out-of-memory path gives it back
/// like the allocator's cached memory, so an allocation that fits once every tensor is gone
/// succeeds with promotion as without it; the plan is compiled again when its window comes
/// back.
#[test]
fn the_out_of_memory_path_gives_back_promoted_plans_arenas() {
    watchdog(120, || {
        let run = |auto: bool| {
            let vm = Vm::builder()
                .promotion(auto)
                .promotion_measured(false)
                .capacity(Some(6 << 20))
                .build()
                .unwrap();
            let r = with_engine(&vm, || {
                let x = Tensor::ones([512, 512], DType::F32).unwrap();
                for _ in 0..8 {
                    // Two [512, 512] intermediates, live at once: a 2 MiB arena.
                    let y = x.matmul(&x).unwrap().matmul(&x).unwrap().sum_all().unwrap();
                    y.to_vec::<f32>().unwrap();
                }
                drop(x);
                let big = Tensor::zeros([7 << 17], DType::F32).unwrap(); // 3.5 MiB
                big.sum_all().unwrap().to_vec::<f32>()
            });
            (r, vm)
        };
        let (eager, _) = run(false);
        assert_eq!(eager.unwrap(), [0.0]);
        let (promoted, vm) = run(true);
        assert_eq!(promoted.unwrap(), [0.0]);
        let s = vm.promotion_stats().unwrap();
        assert!(s.plan_runs >= 4 && s.shed >= 1, "{s:?}");
        // The window comes back: compiled again, and run as a plan.
        with_engine(&vm, || {
            let x = Tensor::ones([512, 512], DType::F32).unwrap();
            for _ in 0..4 {
                let y = x.matmul(&x).unwrap().matmul(&x).unwrap().sum_all().unwrap();
                assert_eq!(y.to_vec::<f32>().unwrap(), [2f32.powi(36)]);
            }
        });
        let after = vm.promotion_stats().unwrap();
        assert!(
            after.compiled > s.compiled && after.plan_runs > s.plan_runs,
            "{after:?}"
        );
    });
}

/// A plan whose arena cannot be allocated counts as an out-of-memory in the engine's and the
/// allocator's statistics, as an eager op's would.
#[test]
fn an_arena_that_cannot_be_allocated_is_counted() {
    watchdog(120, || {
        let vm = Vm::builder().capacity(Some(2 << 20)).build().unwrap();
        with_engine(&vm, || {
            // Two [512, 512] intermediates, live at once: a 2 MiB arena, where 1 MiB is left.
            let g = eddy::tensor::graph::Graph::new(|xs: &[Tensor]| {
                Ok(vec![xs[0].matmul(&xs[0])?.matmul(&xs[0])?.sum_all()?])
            });
            let x = Tensor::ones([512, 512], DType::F32).unwrap();
            x.sync().unwrap();
            let e = g.run(&[&x]).unwrap_err();
            assert!(e.to_string().contains("out of memory"), "{e}");
            assert_eq!(vm.stats().ooms, 1);
            assert_eq!(vm.alloc_stats().ooms, 1);
        });
    });
}
