//! GFLOP/s of the training step's products in the current and in a transposed weight layout:
//! each product synced, seven alternated rounds, the median and range per product.
//!
//! `cargo bench --bench mm_shapes`
#[global_allocator]
static GLOBAL: eddy::Malloc = eddy::Malloc;

use eddy::tensor::{DType, Tensor};
use std::time::Instant;

fn gf(
    name: &str,
    a: &Tensor,
    b: &Tensor,
    rounds: usize,
    out: &mut Vec<(String, Vec<f64>)>,
) -> Result<(), Box<dyn std::error::Error>> {
    let (m, k) = (a.shape().dims()[0], a.shape().dims()[1]);
    let n = b.shape().dims()[1];
    let flop = 2.0 * (m * n * k) as f64;
    a.matmul(b)?.sync()?;
    let t = Instant::now();
    for _ in 0..rounds {
        a.matmul(b)?.sync()?;
    }
    let g = flop * rounds as f64 / t.elapsed().as_secs_f64() / 1e9;
    match out.iter_mut().find(|(n, _)| n == name) {
        Some((_, v)) => v.push(g),
        None => out.push((name.to_string(), vec![g])),
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let r = |s: &[usize]| Tensor::randn(s.to_vec(), 0.0, 1.0, DType::F32);
    let x = r(&[128, 784])?;
    let w1 = r(&[512, 784])?; // [out, in]
    let w1s = r(&[784, 512])?; // [in, out]
    let h = r(&[128, 512])?;
    let w2 = r(&[512, 512])?;
    let g = r(&[128, 512])?;
    let mut out = vec![];
    for _ in 0..7 {
        gf("fwd1 x@w1.t", &x, &w1.t()?, 60, &mut out)?;
        gf("fwd1 x@w1s", &x, &w1s, 60, &mut out)?;
        gf("dW1 g.t@x", &g.t()?, &x, 60, &mut out)?;
        gf("dW1s x.t@g", &x.t()?, &g, 60, &mut out)?;
        gf("fwd2 h@w2.t", &h, &w2.t()?, 80, &mut out)?;
        gf("fwd2 h@w2", &h, &w2, 80, &mut out)?;
        gf("dh g@w2", &g, &w2, 80, &mut out)?;
        gf("dh g@w2.t", &g, &w2.t()?, 80, &mut out)?;
        gf("dW2 g.t@h", &g.t()?, &h, 80, &mut out)?;
        gf("dW2s h.t@g", &h.t()?, &g, 80, &mut out)?;
    }
    for (n, mut v) in out {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!(
            "{n:14} median {:6.1}  [{:6.1} .. {:6.1}]",
            v[v.len() / 2],
            v[0],
            v[v.len() - 1]
        );
    }
    Ok(())
}
