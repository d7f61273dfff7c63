//! What one small op costs, part by part: engine-only loops (a blob, an inline op call) beside
//! tensor ops on 16 floats. Best of 30 rounds of 20,000 calls each, in nanoseconds per call.
//!
//! `cargo bench --bench dispatch_parts`

#[global_allocator]
static GLOBAL: eddy::Malloc = eddy::Malloc;

use eddy::ops::FnKernel;
use eddy::tensor::{DType, Tensor};
use eddy::vm::{Blob, StreamId, Vm, instruction::OpCall};
use eddy_vm::Counted;
use std::time::Instant;

fn time(name: &str, mut f: impl FnMut()) {
    let n = 20_000;
    let mut best = f64::MAX;
    for _ in 0..30 {
        let t = Instant::now();
        for _ in 0..n {
            f();
        }
        best = best.min(t.elapsed().as_nanos() as f64 / n as f64);
    }
    println!("{name:<52} {best:>7.1} ns");
}

/// A kernel that does nothing: what remains is the engine's own cost.
fn nop() -> impl eddy::vm::instruction::Kernel {
    FnKernel::new("nop", |_: &[Counted<Blob>], _: &[Counted<Blob>]| Ok(()))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let x = Tensor::ones([16], DType::F32)?;
    let vm: Vm = x.engine().clone();
    time("vm.new_blob(64) and its release", || {
        let b = vm.new_blob(64);
        vm.release(&b).unwrap();
    });
    time("the same plus a cheap no-op op call writing it", || {
        let b = vm.new_blob(64);
        let call = OpCall::new(nop(), Default::default(), [b.clone()].into_iter().collect());
        vm.run(StreamId::CPU, call.with_cheap(true)).unwrap();
        vm.release(&b).unwrap();
    });
    let (a, c) = (vm.new_blob(64), vm.new_blob(64));
    time(
        "a cheap no-op op call: 2 blobs in, a 0-byte blob out",
        || {
            let ins = [a.clone(), c.clone()].into_iter().collect();
            let call = OpCall::new(nop(), ins, [vm.new_blob(0)].into_iter().collect());
            vm.run(StreamId::CPU, call.with_cheap(true)).unwrap();
        },
    );
    time("x.reshape([4, 4]) (a view), dropped", || {
        let _ = x.reshape([4, 4]).unwrap();
    });
    time("x.relu(), dropped", || {
        let _ = x.relu().unwrap();
    });
    time("x.add(&x), dropped", || {
        let _ = x.add(&x).unwrap();
    });
    let mut y = Tensor::zeros([16], DType::F32)?;
    time("y = y.add(&x) (dispatch_small's loop)", || {
        y = y.add(&x).unwrap();
    });
    y.sync()?;
    let x64 = Tensor::full([64], 1.0 / 64.0, DType::F32)?;
    let mut z = Tensor::ones([64], DType::F32)?;
    time("dispatch_mixed's cycle of 4 ops (divide by 4)", || {
        z = z.add(&x64).unwrap();
        z = z.mul(&x64).unwrap();
        z = z.relu().unwrap();
        z = z.sum_all().unwrap().broadcast_to([64]).unwrap();
    });
    z.sync()?;
    Ok(())
}
