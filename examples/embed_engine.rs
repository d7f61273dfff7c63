//! Embeds Eddy's engine with explicit settings instead of the process-wide default: a bounded
//! memory pool, back-pressure water marks, tracing on. Tensors created inside `with_engine` live
//! on it; its statistics and timeline are read at the end.
//! `cargo run --release --example embed_engine`.

use eddy::tensor::with_engine;
use eddy::{DType, Tensor, Vm};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let vm = Vm::builder()
        .capacity(Some(64 << 20)) // at most 64 MiB of tensor memory on this engine
        .water_marks(4096, 1024) // submitters wait above 4,096 instructions in flight
        .fusion(true)
        .trace(true)
        .build()?;

    let total = with_engine(&vm, || -> eddy::Result<f32> {
        let a = Tensor::randn([256, 256], 0.0, 1.0, DType::F32)?;
        let mut acc = Tensor::zeros([256, 256], DType::F32)?;
        for _ in 0..20 {
            // Each call returns at once; the engine orders the reads and writes of `acc`.
            acc.add_(&a.matmul(&a)?.tanh()?)?;
        }
        acc = acc.div_scalar(20.0)?;
        acc.abs()?.mean_all()?.item::<f32>() // the one sync point
    })?;
    println!("mean |tanh(a·a)| = {total:.4}");

    // A request beyond the capacity fails with a typed error at the call's sync point, and the
    // engine goes on working.
    let huge = with_engine(&vm, || {
        Tensor::zeros([128 << 20], DType::F32)?
            .sum_all()?
            .item::<f32>()
    });
    println!("a 512 MiB tensor on a 64 MiB engine: {}", huge.unwrap_err());

    let s = vm.stats();
    println!(
        "instructions: {} inserted, {} fused; peak memory {:.1} MiB; OOMs {}",
        s.inserted,
        s.fused,
        s.alloc.peak_in_use as f64 / (1 << 20) as f64,
        s.ooms
    );
    let path = std::env::temp_dir().join("eddy-embed-trace.json");
    vm.write_chrome_trace(std::fs::File::create(&path)?)?;
    println!(
        "{} instructions traced to {}",
        vm.trace_events().len(),
        path.display()
    );
    Ok(())
}
