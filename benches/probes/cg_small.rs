//! A small-op loop to count instructions with callgrind: `y = y.add(&x)` on 16 floats, `N`
//! times (add `m` to also run `y = y.relu()` each time, or `x` to run `dispatch_mixed`'s cycle on
//! 64 floats instead: add, mul, relu, and a sum broadcast back). The difference of two runs' totals
//! divided by the difference of their `N` is the cost of one op, start-up excluded:
//!
//! ```text
//! cargo bench --bench cg_small --no-run   # prints the binary: target/release/deps/cg_small-HASH
//! valgrind --tool=callgrind target/release/deps/cg_small-HASH 10000
//! valgrind --tool=callgrind target/release/deps/cg_small-HASH 20000
//! ```
//!
//! `CG_STATS=1` prints how many instructions ran at once on the submitting thread.
//!
//! The host's noise does not move these counts, which is why the book's benchmarks chapter
//! judges changes to the small-op path by them.

#[global_allocator]
static GLOBAL: eddy::Malloc = eddy::Malloc;

use eddy::tensor::{DType, Tensor};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = match std::env::args().filter(|a| a != "--bench").nth(1) {
        Some(s) => s.parse()?,
        None => 20_000,
    };
    let mode = std::env::args()
        .filter(|a| a != "--bench")
        .nth(2)
        .unwrap_or_default();
    if mode == "x" {
        let x = Tensor::full([64], 1.0 / 64.0, DType::F32)?;
        let mut y = Tensor::ones([64], DType::F32)?;
        y.sync()?;
        for _ in 0..n {
            y = y.add(&x)?;
            y = y.mul(&x)?;
            y = y.relu()?;
            y = y.sum_all()?.broadcast_to([64])?;
        }
        assert!(y.to_vec::<f32>()?.iter().all(|v| v.is_finite() && *v > 0.0));
        return Ok(());
    }
    let mixed = mode == "m";
    let x = Tensor::ones([16], DType::F32)?;
    let mut y = Tensor::zeros([16], DType::F32)?;
    y.sync()?;
    for _ in 0..n {
        y = y.add(&x)?;
        if mixed {
            y = y.relu()?;
        }
    }
    // 0 + 1 + 1 + … stays positive, so relu keeps it: n either way.
    assert_eq!(y.to_vec::<f32>()?[0], n as f32, "every op ran once");
    if std::env::var_os("CG_STATS").is_some() {
        // How many ops ran at once on this thread, and how many went through the queue.
        let s = y.engine().stats();
        eprintln!("inserted {} inlined {}", s.inserted, s.inlined);
    }
    Ok(())
}
