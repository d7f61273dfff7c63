//! The batch-1 MLP forward of `mlp_infer` taken apart: per-call latency percentiles of the
//! whole forward, of its two large products alone (`[1, 784] @ [784, 512]`, `[1, 512] @
//! [512, 512]`), of the three products chained, and of five small ops on 512 floats, each
//! synced. Where the forward's time goes, beside the host's own noise (see the book's
//! benchmarks chapter).
//!
//! ```text
//! cargo bench --bench infer_parts
//! ```
#[global_allocator]
static GLOBAL: eddy::Malloc = eddy::Malloc;

use eddy::models::mlp;
use eddy::tensor::nn::Module;
use eddy::{DType, Tensor, no_grad};
use std::time::Instant;

fn main() -> eddy::Result<()> {
    eddy::tensor::manual_seed(0);
    let model = mlp(&[784, 512, 512, 10])?;
    let x = Tensor::randn([1, 784], 0.0, 1.0, DType::F32)?;
    let w = Tensor::randn([512, 784], 0.0, 1.0, DType::F32)?;
    let w2 = Tensor::randn([512, 512], 0.0, 1.0, DType::F32)?;
    let w3 = Tensor::randn([10, 512], 0.0, 1.0, DType::F32)?;
    let b = Tensor::randn([512], 0.0, 1.0, DType::F32)?;
    let _g = no_grad();
    let h0 = x.matmul(&w.t()?)?;
    // 300 calls of `op`, each synced, into `v` (µs).
    let time = |v: &mut Vec<f64>, op: &dyn Fn() -> eddy::Result<Tensor>| -> eddy::Result<()> {
        for _ in 0..300 {
            let t = Instant::now();
            op()?.sync()?;
            v.push(t.elapsed().as_nanos() as f64 / 1e3);
        }
        Ok(())
    };
    let (mut f, mut g, mut g2, mut g3, mut small) = (vec![], vec![], vec![], vec![], vec![]);
    for _ in 0..20 {
        time(&mut f, &|| model.forward(&x))?;
        time(&mut g, &|| x.matmul(&w.t()?))?;
        time(&mut g2, &|| h0.matmul(&w2.t()?))?;
        time(&mut g3, &|| {
            x.matmul(&w.t()?)?.matmul(&w2.t()?)?.matmul(&w3.t()?)
        })?;
        time(&mut small, &|| h0.add(&b)?.relu()?.add(&b)?.relu()?.add(&b))?;
    }
    for (name, v) in [
        ("forward", &mut f),
        ("x@w1t", &mut g),
        ("h@w2t", &mut g2),
        ("3 prods", &mut g3),
        ("5 small", &mut small),
    ] {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let p = |q: f64| v[((v.len() - 1) as f64 * q) as usize];
        println!(
            "{name:8} p10 {:.1} p25 {:.1} p50 {:.1} p90 {:.1}",
            p(0.1),
            p(0.25),
            p(0.5),
            p(0.9)
        );
    }
    Ok(())
}
