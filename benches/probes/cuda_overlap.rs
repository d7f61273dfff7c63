//! Whether a host-to-device copy overlaps the device's kernels on `cuda:0`: times a run of
//! matrix products alone, a large upload alone, and both queued together (products first),
//! each ending in a sync, and prints the three medians and the share of the shorter one
//! hidden by the overlap (0: none, 1: all of it).
//!
//! `cargo bench --features cuda --bench cuda_overlap` (on a machine with a CUDA device).

use eddy::tensor::{DType, Device, Tensor, with_device, with_engine};
use std::time::Instant;

fn main() -> eddy::Result<()> {
    let vm = match eddy::vm::Vm::builder().cuda_devices(1).build() {
        Ok(vm) => vm,
        Err(e) => {
            println!("SKIPPED: no CUDA device here: {e}");
            return Ok(());
        }
    };
    with_engine(&vm, || {
        let gpu = Device::Cuda(0);
        let a = with_device(gpu, || Tensor::randn([4096, 4096], 0.0, 1.0, DType::F32))?;
        let host = Tensor::randn([64 << 20], 0.0, 1.0, DType::F32)?; // 256 MiB
        host.sync()?;
        let products = || -> eddy::Result<Tensor> {
            let mut y = a.clone();
            for _ in 0..12 {
                y = a.matmul(&y)?.mul_scalar(1e-2)?;
            }
            Ok(y)
        };
        let time = |f: &dyn Fn() -> eddy::Result<()>| -> eddy::Result<f64> {
            f()?; // warm
            let mut v = Vec::new();
            for _ in 0..5 {
                let t = Instant::now();
                f()?;
                v.push(t.elapsed().as_secs_f64() * 1e3);
            }
            v.sort_by(f64::total_cmp);
            Ok(v[2])
        };
        let compute = time(&|| products()?.sync())?;
        let upload = time(&|| host.to_device(gpu)?.sync())?;
        let both = time(&|| {
            let y = products()?;
            let u = host.to_device(gpu)?;
            y.sync()?;
            u.sync()
        })?;
        let hidden = (compute + upload - both) / compute.min(upload);
        println!(
            "{{\"products_ms\": {compute:.2}, \"upload_256mib_ms\": {upload:.2}, \"both_ms\": {both:.2}, \"hidden_share\": {hidden:.2}}}"
        );
        Ok(())
    })
}
