//! The processes of a job as one world: each adds its own tensor into every other's.
//!
//! ```text
//! cargo build --release --features mpi --example processes
//! mpirun -np 2 target/release/examples/processes
//! ```
//!
//! Started alone it is a world of one.

use eddy::tensor::global::{ReduceKind, world};
use eddy::{Result, Tensor};

fn main() -> Result<()> {
    let w = world()?;
    let mine = Tensor::from_vec(vec![w.rank as f32 + 1.0; 4], [4])?;
    let sum = w.all_reduce(&mine, ReduceKind::Sum)?;
    println!(
        "process {} of {}: {:?}",
        w.rank,
        w.size,
        sum.to_vec::<f32>()?
    );
    Ok(())
}
