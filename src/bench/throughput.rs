//! The throughput workloads: a large elementwise add and copy, and square matrix products
//! (beside the `gemm` crate called directly, with `--roof`).

use super::{REPS, check, reps};
use crate::{DType, Result, Tensor};
use std::time::Instant;

/// `c = a + b` on 16 Mi elements, a fresh output each time; GB/s = 3 × 64 MiB / time.
///
/// # Examples
///
/// ```no_run
/// // 16 Mi elements per add, 7 repetitions: run it from `eddy bench`, not in a doctest.
/// let gbps = eddy::bench::add_large()?;
/// assert_eq!(gbps.len(), 7);
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn add_large() -> Result<Vec<f64>> {
    let n = 16 << 20;
    let a = Tensor::rand([n], DType::F32)?;
    let b = Tensor::rand([n], DType::F32)?;
    let mut c = a.add(&b)?;
    c.sync()?;
    reps(2, || {
        let iters = 10;
        let t = Instant::now();
        for _ in 0..iters {
            drop(c.clone());
            c = a.add(&b)?;
        }
        c.sync()?;
        Ok(3.0 * (n * 4) as f64 * iters as f64 / t.elapsed().as_secs_f64() / 1e9)
    })
}

/// `c.copy_(a)` on 16 Mi elements (the device's copy of one buffer into another); GB/s =
/// 2 × 64 MiB / time: the bandwidth `add_large`'s figure is held against on a GPU.
///
/// # Examples
///
/// ```no_run
/// // 16 Mi elements per copy, 7 repetitions: `eddy bench --device cuda --only copy_large_gbps`.
/// let gbps = eddy::bench::copy_large()?;
/// assert_eq!(gbps.len(), 7);
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn copy_large() -> Result<Vec<f64>> {
    let n = 16 << 20;
    let a = Tensor::rand([n], DType::F32)?;
    let c = Tensor::zeros([n], DType::F32)?;
    c.copy_(&a)?.sync()?;
    reps(2, || {
        let iters = 10;
        let t = Instant::now();
        for _ in 0..iters {
            c.copy_(&a)?;
        }
        c.sync()?;
        Ok(2.0 * (n * 4) as f64 * iters as f64 / t.elapsed().as_secs_f64() / 1e9)
    })
}

/// Square `a.matmul(b)`: GFLOP/s with 2n³ flop, iterations sized to about 0.25 s.
///
/// # Examples
///
/// ```no_run
/// // About 0.25 s per repetition: run it from `eddy bench`, not in a doctest.
/// let gflops = eddy::bench::matmul(256)?;
/// println!("median {:.1} GFLOP/s", eddy::bench::median(&gflops));
/// assert_eq!(gflops.len(), 7);
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn matmul(n: usize) -> Result<Vec<f64>> {
    matmul_in(n, DType::F32)
}

/// [`matmul`] in `dtype`: GFLOP/s of `n × n` products in that dtype, on the current device.
///
/// # Examples
///
/// ```no_run
/// // Seconds of work on a GPU: `eddy bench --device cuda --only matmul_4096_f16_tflops`.
/// use eddy::{DType, Device, tensor::with_device};
/// let gflops = with_device(Device::Cuda(0), || eddy::bench::matmul_in(4096, DType::F16))?;
/// assert_eq!(gflops.len(), 7);
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn matmul_in(n: usize, dtype: DType) -> Result<Vec<f64>> {
    let a = Tensor::randn([n, n], 0.0, 1.0, dtype)?;
    let b = Tensor::randn([n, n], 0.0, 1.0, dtype)?;
    a.matmul(&b)?.sync()?; // warm-up: the pool's threads and the output's memory
    let t = Instant::now();
    a.matmul(&b)?.sync()?;
    let one = t.elapsed().as_secs_f64();
    let iters = ((0.25 / one.max(1e-6)) as usize).clamp(1, 10_000);
    reps(1, || {
        let t = Instant::now();
        let mut c = None;
        for _ in 0..iters {
            c = Some(a.matmul(&b)?);
        }
        c.expect("one iteration").sync()?;
        Ok(2.0 * (n * n * n) as f64 * iters as f64 / t.elapsed().as_secs_f64() / 1e9)
    })
}

/// [`matmul`] with the `gemm` crate's roof measured side by side: each repetition of Eddy's
/// `a.matmul(b)` loop is followed by the same loop of direct `gemm::gemm` calls on plain
/// buffers, split over `threads` by gemm's own rayon parallelism, with the same iteration
/// count. Returns (Eddy's samples, gemm's samples). The ratio of one repetition to the next
/// is what the host's noise moves least.
///
/// # Examples
///
/// ```no_run
/// // Seconds of work: run it from `eddy bench --roof`, not in a doctest.
/// let (eddy, gemm) = eddy::bench::matmul_with_roof(256, 2)?;
/// assert_eq!(eddy.len(), gemm.len()); // one pair per repetition
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn matmul_with_roof(n: usize, threads: usize) -> Result<(Vec<f64>, Vec<f64>)> {
    let a = Tensor::randn([n, n], 0.0, 1.0, DType::F32)?;
    let b = Tensor::randn([n, n], 0.0, 1.0, DType::F32)?;
    let (av, bv) = (a.to_vec::<f32>()?, b.to_vec::<f32>()?);
    let mut cv = vec![0.0f32; n * n];
    let par = if threads > 1 {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    };
    let mut direct = |iters: usize| {
        for _ in 0..iters {
            // SAFETY: three row-major n × n buffers (row stride n, column stride 1), all in
            // bounds; `cv` is borrowed mutably for the call and read by nothing else.
            unsafe {
                gemm::gemm(
                    n,
                    n,
                    n,
                    cv.as_mut_ptr(),
                    1,
                    n as isize,
                    false,
                    av.as_ptr(),
                    1,
                    n as isize,
                    bv.as_ptr(),
                    1,
                    n as isize,
                    0.0f32,
                    1.0f32,
                    false,
                    false,
                    false,
                    par,
                )
            }
        }
    };
    let eddy = |iters: usize| -> Result<()> {
        let mut c = None;
        for _ in 0..iters {
            c = Some(a.matmul(&b)?);
        }
        c.expect("one iteration").sync()
    };
    eddy(1)?; // warm-up: the pool's threads and the output's memory
    direct(1); // and rayon's
    let t = Instant::now();
    eddy(1)?;
    let iters = ((0.25 / t.elapsed().as_secs_f64().max(1e-6)) as usize).clamp(1, 10_000);
    let gflops = |secs: f64| 2.0 * (n * n * n) as f64 * iters as f64 / secs / 1e9;
    let (mut es, mut gs) = (Vec::new(), Vec::new());
    for rep in 0..=REPS {
        let t = Instant::now();
        eddy(iters)?;
        let e = gflops(t.elapsed().as_secs_f64());
        let t = Instant::now();
        direct(iters);
        let g = gflops(t.elapsed().as_secs_f64());
        if rep > 0 {
            // Repetition 0 is the warm-up.
            es.push(e);
            gs.push(g);
        }
    }
    // Both computed the same product: a check that the roof measured real work.
    let ce = a.matmul(&b)?.to_vec::<f32>()?;
    let worst = ce
        .iter()
        .zip(&cv)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max);
    check(
        worst <= 1e-3 * n as f32,
        "matmul roof: gemm and Eddy disagree",
    )?;
    Ok((es, gs))
}
