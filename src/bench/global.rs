//! The global-tensor workloads: a global op's dispatch, boxing small and large, and the MLP
//! trained data-parallel and tensor-parallel over `cpu:0` and `cpu:1`; under `mpirun`, over
//! one rank in each process, and MPI's own all-reduce beside them.

use super::{check, mlp_setup, reps};
use crate::tensor::global::{DeviceKind, Placement, Sbp};
use crate::tensor::nn::{Linear, Module, Sequential};
use crate::tensor::optim::Sgd;
use crate::{DType, Device, Result, Tensor, Vm};
use std::time::Instant;

/// An engine with `cpu:0` and `cpu:1`, and their placement; under `mpirun`, an engine with
/// `cpu:0` and a placement of one rank in each process. One engine for every global workload
/// of the run, living until the process ends as the default engine of the local workloads
/// does ([`Vm::leak`]), so that a global op and a local one pay the same per tensor.
fn two() -> Result<(&'static Vm, Placement)> {
    static ENGINE: std::sync::OnceLock<&'static Vm> = std::sync::OnceLock::new();
    let processes = crate::tensor::global::world()?.size;
    let vm = match ENGINE.get() {
        Some(vm) => vm,
        None => {
            let devices = if processes > 1 { 1 } else { 2 };
            let vm = Vm::builder().cpu_devices(devices).build()?;
            ENGINE.get_or_init(|| vm.leak())
        }
    };
    if processes > 1 {
        let ranks: Vec<u32> = (0..processes as u32).collect();
        return Ok((vm, Placement::new(DeviceKind::Cpu, ranks)?));
    }
    Ok((vm, Placement::new(DeviceKind::Cpu, [0, 1])?))
}

/// `y = y + x` chained 10,000 times on 32 f32 split `S(0)` over two CPU devices; ns per op
/// including one sync.
///
/// # Examples
///
/// ```no_run
/// // Seconds of work: run it from `eddy bench`, not in a doctest.
/// assert_eq!(eddy::bench::global_add()?.len(), 7);
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn global_add() -> Result<Vec<f64>> {
    let (vm, p) = two()?;
    crate::tensor::with_engine(vm, || {
        let s0 = [Sbp::Split(0)];
        let x = Tensor::ones([32], DType::F32)?.to_global(&p, &s0)?;
        reps(1, || {
            let mut y = Tensor::zeros([32], DType::F32)?.to_global(&p, &s0)?;
            y.sync()?;
            let t = Instant::now();
            for _ in 0..10_000 {
                y = y.add(&x)?;
            }
            y.sync()?;
            let ns = t.elapsed().as_nanos() as f64 / 10_000.0;
            check(y.to_vec::<f32>()?[31] == 10_000.0, "global_add: wrong sum")?;
            Ok(ns)
        })
    })
}

/// A tensor of `dims` f32 as partial sums over `p`: `k + 1` at the `k`-th rank (ones on the
/// first, twos on the second); with the sum of those.
fn partial(p: &Placement, dims: &[usize]) -> Result<(Tensor, f32)> {
    let sum = (1..=p.len()).sum::<usize>() as f32;
    let w = crate::tensor::global::world()?;
    if w.size > 1 {
        let mine = Tensor::full(dims, (w.rank + 1) as f64, DType::F32)?;
        return Ok((
            Tensor::from_components(p, &[Sbp::PARTIAL_SUM], vec![mine])?,
            sum,
        ));
    }
    let a = Tensor::ones(dims, DType::F32)?;
    let b = Tensor::full(dims, 2.0, DType::F32)?.to_device(Device::Cpu(1))?;
    Ok((
        Tensor::from_components(p, &[Sbp::PARTIAL_SUM], vec![a, b])?,
        sum,
    ))
}

/// MPI's own all-reduce, called directly in the same run (under `mpirun`): µs per all-reduce
/// of 16 f32 (500 in a row), and bus GB/s of one of 64 MiB (`2 (p−1)/p` of the bytes).
pub(super) fn raw_allreduce() -> Result<(Vec<f64>, Vec<f64>)> {
    use crate::tensor::global::raw_all_reduce_seconds;
    let p = crate::tensor::global::world()?.size as f64;
    let small = reps(1, || Ok(raw_all_reduce_seconds(16, 500)? * 1e6 / 500.0))?;
    let bytes = (16usize << 20) as f64 * 4.0;
    let large = reps(1, || {
        Ok(2.0 * (p - 1.0) / p * bytes / raw_all_reduce_seconds(16 << 20, 1)? / 1e9)
    })?;
    Ok((small, large))
}

/// `P(sum) → B` of 16 f32 over two CPU devices, 500 in a row, timed until the last result
/// is synced: µs per boxing.
///
/// # Examples
///
/// ```no_run
/// assert_eq!(eddy::bench::boxing_p_to_b_small()?.len(), 7);
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn boxing_p_to_b_small() -> Result<Vec<f64>> {
    let (vm, p) = two()?;
    crate::tensor::with_engine(vm, || {
        let (x, sum) = partial(&p, &[16])?;
        x.sync()?;
        reps(1, || {
            let t = Instant::now();
            let mut last = None;
            for _ in 0..500 {
                last = Some(x.to_global(&p, &[Sbp::Broadcast])?);
            }
            // The last result's sync: on a transport stream the engine's own sync returns
            // once the collectives are launched; they finish in order.
            let b = last.expect("500 boxings");
            b.sync()?;
            vm.sync()?;
            let us = t.elapsed().as_secs_f64() * 1e6 / 500.0;
            check(
                b.to_vec::<f32>()? == [sum; 16],
                "boxing_p_to_b_small: wrong sum",
            )?;
            Ok(us)
        })
    })
}

/// Bus GB/s of a boxing of 64 MiB of f32 over two CPU devices (`P(sum) → B`,
/// `S(0) → B`, `S(0) → S(1)`), the bytes each moves by the usual formula: `2 (p−1)/p` of
/// the tensor for an all-reduce, `(p−1)/p` for the others; and the reference they are held
/// to, `memcpy` of the same 64 MiB between two buffers of the process, in the same run.
///
/// # Examples
///
/// ```no_run
/// let [p_to_b, s_to_b, s0_to_s1, memcpy] = eddy::bench::boxing_large()?;
/// assert_eq!(p_to_b.len(), 7);
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn boxing_large() -> Result<[Vec<f64>; 4]> {
    let (vm, p) = two()?;
    crate::tensor::with_engine(vm, || {
        let bytes = (16usize << 20) as f64 * 4.0;
        let gbps = |factor: f64, secs: f64| factor * bytes / secs / 1e9;
        let time = |x: &Tensor, to: Sbp| -> Result<f64> {
            x.sync()?;
            let t = Instant::now();
            let y = x.to_global(&p, &[to])?;
            y.sync()?;
            Ok(t.elapsed().as_secs_f64())
        };
        // The bus bytes of `p` ranks: `2 (p−1)/p` of the tensor for an all-reduce, `(p−1)/p`
        // for the others.
        let n = p.len() as f64;
        let (x, _) = partial(&p, &[16 << 20])?;
        let p_to_b = reps(1, || {
            Ok(gbps(2.0 * (n - 1.0) / n, time(&x, Sbp::Broadcast)?))
        })?;
        drop(x);
        let s = Tensor::ones([4096, 4096], DType::F32)?.to_global(&p, &[Sbp::Split(0)])?;
        let f = (n - 1.0) / n;
        let s_to_b = reps(1, || Ok(gbps(f, time(&s, Sbp::Broadcast)?)))?;
        let s0_to_s1 = reps(1, || Ok(gbps(f, time(&s, Sbp::Split(1))?)))?;
        // The reference: the same bytes copied by `memcpy` between two buffers of this
        // process, written once before (no first-touch faults).
        let (src, mut dst) = (vec![1f32; 16 << 20], vec![0f32; 16 << 20]);
        let memcpy = reps(1, || {
            let t = Instant::now();
            dst.copy_from_slice(std::hint::black_box(&src));
            std::hint::black_box(&dst);
            Ok(gbps(1.0, t.elapsed().as_secs_f64()))
        })?;
        Ok([p_to_b, s_to_b, s0_to_s1, memcpy])
    })
}

/// The benchmark MLP laid out over two CPU devices: data parallel (parameters `B`, the batch
/// `S(0)`) or tensor parallel (the first Linear split by outputs, the second by inputs, the
/// last `B`; the batch `B`). 50 steps each synced on the loss: ms per step.
///
/// # Examples
///
/// ```no_run
/// assert_eq!(eddy::bench::parallel_train(true)?.len(), 50);
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn parallel_train(data: bool) -> Result<Vec<f64>> {
    use Sbp::{Broadcast as B, Split as S};
    let (vm, p) = two()?;
    crate::tensor::with_engine(vm, || {
        let (model, _, x, y) = mlp_setup()?;
        let layouts: [(Sbp, Sbp); 3] = if data {
            [(B, B), (B, B), (B, B)]
        } else {
            [(S(0), S(0)), (S(1), B), (B, B)]
        };
        let mut s = Sequential::new();
        let linears: Vec<Linear> = (model.parameters().chunks(2))
            .map(|w| Linear {
                weight: w[0].clone(),
                bias: Some(w[1].clone()),
            })
            .collect();
        for (i, (l, (w, b))) in linears.iter().zip(layouts).enumerate() {
            s = s.add(l.to_global(&p, &[w], &[b])?);
            if i < 2 {
                s = s.add(crate::tensor::nn::Relu);
            }
        }
        let batch = if data { S(0) } else { B };
        let (x, y) = (x.to_global(&p, &[batch])?, y.to_global(&p, &[batch])?);
        let mut opt = Sgd::new(s.parameters(), 0.01)?;
        for _ in 0..5 {
            crate::models::train_step(&s, &mut opt, &x, &y)?.item::<f32>()?;
        }
        (0..50)
            .map(|_| {
                let t = Instant::now();
                crate::models::train_step(&s, &mut opt, &x, &y)?.item::<f32>()?;
                Ok(t.elapsed().as_secs_f64() * 1e3)
            })
            .collect()
    })
}
