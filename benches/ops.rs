//! Criterion benchmarks of the per-op paths (issue 3): `cargo bench --bench ops [-- FILTER]`.
//!
//! Every figure goes through the real path: the op checks its arguments, enqueues an `OpCall`
//! on the default engine, the scheduler runs the kernel, and the benchmark waits (`sync`) so the
//! time includes the work, not only the enqueue.
//!
//! | group | what |
//! |---|---|
//! | `dispatch` | a chain of adds of two 4-element tensors (enqueue, kernel, release), per op |
//! | `elementwise` | unary and binary ops over 1 Mi f32, a row-broadcast bias add, a cast |
//! | `reduce` | sum over rows and columns, softmax, argmax, of 1024×1024 f32 |
//! | `matmul` | square f32 matmul, 64 to 512, and a transposed operand |
//! | `index` | index_select and gather |
//! | `order` | sort, topk, argsort along a strided dim, and cumsum, of 1024×1024 f32 |
//! | `autograd` | forward and backward of an MLP step, batch 64 |

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use eddy::tensor::nn::Module;
use eddy::tensor::optim::Adam;
use eddy::{DType, Tensor};
use std::hint::black_box;
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: eddy::Malloc = eddy::Malloc;

const F: DType = DType::F32;

fn randn(shape: &[usize]) -> Tensor {
    Tensor::randn(shape.to_vec(), 0.0, 1.0, F).unwrap()
}

/// Times `iters` runs of `f`, each waited for.
fn timed(iters: u64, mut f: impl FnMut() -> Tensor) -> Duration {
    let t = Instant::now();
    for _ in 0..iters {
        black_box(f()).sync().unwrap();
    }
    t.elapsed()
}

fn dispatch(c: &mut Criterion) {
    let mut g = c.benchmark_group("dispatch");
    g.throughput(Throughput::Elements(1));
    let b = Tensor::ones([4], F).unwrap();
    g.bench_function("add_4_chain", |bench| {
        bench.iter_custom(|iters| {
            let mut x = Tensor::zeros([4], F).unwrap();
            x.sync().unwrap();
            let t = Instant::now();
            for _ in 0..iters {
                x = x.add(&b).unwrap();
            }
            x.sync().unwrap();
            t.elapsed()
        })
    });
    g.bench_function("add_scalar_4_then_sync", |bench| {
        let x = Tensor::zeros([4], F).unwrap();
        bench.iter_custom(|iters| timed(iters, || x.add_scalar(1.0).unwrap()))
    });
    g.finish();
}

fn elementwise(c: &mut Criterion) {
    let mut g = c.benchmark_group("elementwise");
    let n = 1 << 20;
    let (a, b) = (randn(&[n]), randn(&[n]));
    g.throughput(Throughput::Bytes((n * 4 * 3) as u64));
    g.bench_function("add_1Mi", |bench| {
        bench.iter_custom(|i| timed(i, || a.add(&b).unwrap()))
    });
    g.throughput(Throughput::Bytes((n * 4 * 2) as u64));
    g.bench_function("relu_1Mi", |bench| {
        bench.iter_custom(|i| timed(i, || a.relu().unwrap()))
    });
    g.bench_function("gelu_1Mi", |bench| {
        bench.iter_custom(|i| timed(i, || a.gelu().unwrap()))
    });
    g.bench_function("exp_1Mi", |bench| {
        bench.iter_custom(|i| timed(i, || a.exp().unwrap()))
    });
    g.bench_function("to_f16_1Mi", |bench| {
        bench.iter_custom(|i| timed(i, || a.to_dtype(DType::F16).unwrap()))
    });
    let m = randn(&[1024, 1024]);
    let bias = randn(&[1024]);
    g.throughput(Throughput::Bytes((n * 4 * 2) as u64));
    g.bench_function("bias_add_1024x1024", |bench| {
        bench.iter_custom(|i| timed(i, || m.add(&bias).unwrap()))
    });
    let mt = m.t().unwrap();
    g.bench_function("add_transposed_1024x1024", |bench| {
        bench.iter_custom(|i| timed(i, || m.add(&mt).unwrap()))
    });
    g.finish();
}

fn reduce(c: &mut Criterion) {
    let mut g = c.benchmark_group("reduce");
    let m = randn(&[1024, 1024]);
    g.throughput(Throughput::Bytes((1024 * 1024 * 4) as u64));
    g.bench_function("sum_rows_1024x1024", |b| {
        b.iter_custom(|i| timed(i, || m.sum(&[1], false).unwrap()))
    });
    g.bench_function("sum_cols_1024x1024", |b| {
        b.iter_custom(|i| timed(i, || m.sum(&[0], false).unwrap()))
    });
    g.bench_function("softmax_1024x1024", |b| {
        b.iter_custom(|i| timed(i, || m.softmax(-1).unwrap()))
    });
    g.bench_function("argmax_1024x1024", |b| {
        b.iter_custom(|i| timed(i, || m.argmax(-1, false).unwrap()))
    });
    g.finish();
}

fn matmul(c: &mut Criterion) {
    let mut g = c.benchmark_group("matmul");
    for n in [64usize, 128, 256, 512] {
        let (a, b) = (randn(&[n, n]), randn(&[n, n]));
        g.throughput(Throughput::Elements((2 * n * n * n) as u64)); // flops
        g.bench_with_input(BenchmarkId::new("square", n), &n, |bench, _| {
            bench.iter_custom(|i| timed(i, || a.matmul(&b).unwrap()))
        });
    }
    let (a, b) = (randn(&[256, 256]), randn(&[256, 256]));
    let bt = b.t().unwrap();
    g.throughput(Throughput::Elements(2 * 256 * 256 * 256));
    g.bench_function("transposed_rhs/256", |bench| {
        bench.iter_custom(|i| timed(i, || a.matmul(&bt).unwrap()))
    });
    let (x, w) = (randn(&[1, 784]), randn(&[784, 512]));
    g.throughput(Throughput::Elements(2 * 784 * 512));
    g.bench_function("gemv_1x784x512", |bench| {
        bench.iter_custom(|i| timed(i, || x.matmul(&w).unwrap()))
    });
    // `Linear`'s layout: `x @ Wᵀ` with `W` of `[out, in]`, so the columns are contiguous.
    let wt = randn(&[512, 784]).t().unwrap();
    g.bench_function("gemv_1x784x512_transposed", |bench| {
        bench.iter_custom(|i| timed(i, || x.matmul(&wt).unwrap()))
    });
    g.finish();
}

fn index(c: &mut Criterion) {
    let mut g = c.benchmark_group("index");
    let table = randn(&[10_000, 64]);
    let ids: Vec<i64> = (0..4096).map(|i| (i * 7919) % 10_000).collect();
    let ids = Tensor::from_vec(ids, [4096]).unwrap();
    g.throughput(Throughput::Bytes(4096 * 64 * 4));
    g.bench_function("index_select_4096_rows_of_64", |b| {
        b.iter_custom(|i| timed(i, || table.index_select(0, &ids).unwrap()))
    });
    let logits = randn(&[4096, 10]);
    let y: Vec<i64> = (0..4096).map(|i| i % 10).collect();
    let y = Tensor::from_vec(y, [4096, 1]).unwrap();
    g.bench_function("gather_4096x10", |b| {
        b.iter_custom(|i| timed(i, || logits.gather(1, &y).unwrap()))
    });
    g.finish();
}

fn autograd(c: &mut Criterion) {
    let mut g = c.benchmark_group("autograd");
    eddy::tensor::manual_seed(0);
    let model = eddy::models::mlp(&[784, 512, 512, 10]).unwrap();
    let mut opt = Adam::new(model.parameters(), 1e-3).unwrap();
    let x = randn(&[64, 784]);
    let y = Tensor::from_vec((0..64).map(|i| i % 10).collect::<Vec<i64>>(), [64]).unwrap();
    g.bench_function("mlp_784_512_512_10_train_step_b64", |b| {
        b.iter_custom(|i| {
            timed(i, || {
                eddy::models::train_step(&model, &mut opt, &x, &y).unwrap()
            })
        })
    });
    g.bench_function("mlp_forward_b64_no_grad", |b| {
        let _g = eddy::no_grad();
        b.iter_custom(|i| timed(i, || model.forward(&x).unwrap()))
    });
    g.finish();
}

fn order(c: &mut Criterion) {
    let mut g = c.benchmark_group("order");
    let m = randn(&[1024, 1024]);
    g.throughput(Throughput::Bytes((1024 * 1024 * 4) as u64));
    g.bench_function("sort_rows_1024x1024", |b| {
        b.iter_custom(|i| timed(i, || m.sort(-1, false).unwrap().0))
    });
    g.bench_function("topk_10_rows_1024x1024", |b| {
        b.iter_custom(|i| timed(i, || m.topk(10, -1, true).unwrap().0))
    });
    g.bench_function("argsort_cols_1024x1024", |b| {
        b.iter_custom(|i| timed(i, || m.argsort(0, false).unwrap()))
    });
    g.bench_function("cumsum_rows_1024x1024", |b| {
        b.iter_custom(|i| timed(i, || m.cumsum(-1).unwrap()))
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
        // The HTML report's plots need a system font; the figures are in the terminal output
        // and in target/criterion/*/new/estimates.json.
        .without_plots()
}

criterion_group! {
    name = benches;
    config = config();
    targets = dispatch, elementwise, reduce, matmul, index, order, autograd
}
criterion_main!(benches);
