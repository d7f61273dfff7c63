//! Roofs that bound a workload from below: its unavoidable kernels alone, on plain buffers.

use super::REPS;
use std::time::Instant;

/// One product `c[m × n] = a[m × k] · b[k × n]` called straight on the `gemm` crate, with
/// each operand given by its row and column strides (a transposed weight is a stride swap,
/// as Eddy's views read it).
struct Product {
    m: usize,
    k: usize,
    n: usize,
    /// Which buffer `a` and `b` come from, and their (row, column) strides.
    a: (usize, isize, isize),
    b: (usize, isize, isize),
}

/// [`mlp_train`](super::mlp_train)'s eight matrix products per step, the least any
/// implementation of that step computes, called straight on the `gemm` crate over `threads`
/// threads: ms per step over 50 steps. Forward: `x·W1ᵀ`, `a1·W2ᵀ`, `a2·W3ᵀ`; backward: the
/// three weight gradients `dYᵀ·X` and the two input gradients `dY·W` the step needs (the
/// batch's own gradient is not). The bias, ReLU, loss and SGD update are left out, so the
/// step itself can only be slower; where this roof is above a target, the target is out of
/// reach on this machine.
///
/// # Examples
///
/// ```no_run
/// // Seconds of products: run it from `eddy bench --roof`, not in a doctest.
/// let ms = eddy::bench::mlp_train_roof(2);
/// assert_eq!(ms.len(), 50);
/// ```
pub fn mlp_train_roof(threads: usize) -> Vec<f64> {
    const B: usize = 128;
    let dims = [784usize, 512, 512, 10];
    // Buffers: 0 x, 1–3 the weights [out, in], 4–6 the layers' outputs (and their gradients,
    // which have the same shapes), 7–9 the weight gradients.
    let mut bufs: Vec<Vec<f32>> = vec![vec![0.5; B * dims[0]]];
    for l in 0..3 {
        bufs.push(vec![0.01; dims[l + 1] * dims[l]]);
    }
    for l in 0..3 {
        bufs.push(vec![0.0; B * dims[l + 1]]);
    }
    for l in 0..3 {
        bufs.push(vec![0.0; dims[l + 1] * dims[l]]);
    }
    let row = |cols: usize| (cols as isize, 1isize);
    let col = |cols: usize| (1isize, cols as isize); // the transpose of a row-major buffer
    let mut products = Vec::new();
    // Forward: layer l's output [B, out] = input [B, in] · W[out, in]ᵀ.
    for l in 0..3 {
        let input = if l == 0 { 0 } else { 3 + l };
        let (ar, ac) = row(dims[l]);
        let (br, bc) = col(dims[l]);
        let out = 4 + l;
        products.push((
            Product {
                m: B,
                k: dims[l],
                n: dims[l + 1],
                a: (input, ar, ac),
                b: (1 + l, br, bc),
            },
            out,
        ));
    }
    // Backward, from the last layer: dW[out, in] = dYᵀ · input, then dX = dY · W (not for x).
    for l in (0..3).rev() {
        let (dy, input) = (4 + l, if l == 0 { 0 } else { 3 + l });
        let (ar, ac) = col(dims[l + 1]);
        let (br, bc) = row(dims[l]);
        products.push((
            Product {
                m: dims[l + 1],
                k: B,
                n: dims[l],
                a: (dy, ar, ac),
                b: (input, br, bc),
            },
            7 + l,
        ));
        if l > 0 {
            let (ar, ac) = row(dims[l + 1]);
            let (br, bc) = row(dims[l]);
            products.push((
                Product {
                    m: B,
                    k: dims[l + 1],
                    n: dims[l],
                    a: (dy, ar, ac),
                    b: (1 + l, br, bc),
                },
                3 + l,
            ));
        }
    }
    let par = if threads > 1 {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    };
    let mut step = |bufs: &mut [Vec<f32>]| {
        for (p, c) in &products {
            let mut out = std::mem::take(&mut bufs[*c]);
            let (a, b) = (&bufs[p.a.0], &bufs[p.b.0]);
            assert!(out.len() >= p.m * p.n, "the output holds m × n");
            // SAFETY: every operand is a live buffer of at least the elements its strides
            // reach (checked above for the output; the inputs are sized by construction as
            // [m, k] and [k, n] in the layout their strides give), and the output is taken
            // out of `bufs`, so it aliases neither input.
            unsafe {
                gemm::gemm(
                    p.m,
                    p.n,
                    p.k,
                    out.as_mut_ptr(),
                    1,
                    p.n as isize,
                    false,
                    a.as_ptr(),
                    p.a.2,
                    p.a.1,
                    b.as_ptr(),
                    p.b.2,
                    p.b.1,
                    0.0f32,
                    1.0f32,
                    false,
                    false,
                    false,
                    par,
                )
            }
            bufs[*c] = out;
        }
    };
    for _ in 0..REPS {
        step(&mut bufs); // warm-up: rayon's threads and the caches
    }
    (0..50)
        .map(|_| {
            let t = Instant::now();
            step(&mut bufs);
            std::hint::black_box(&bufs);
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect()
}
