//! Sizes above the kernel pool's parallel thresholds and the streaming-store threshold,
//! against plain loops.

use eddy::tensor::{DType, Tensor};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Sizes above the parallel thresholds, so the kernel pool splits the work (matmul in column
/// bands when `n ≥ m`, row bands otherwise; elementwise, in-place, reduction and softmax loops
/// in chunks): every result against plain loops over `f64`, several times, so a chunk the
/// pool ran twice or dropped shows.
#[test]
fn parallel_kernels_match_reference() {
    fn vals(n: usize, seed: u64) -> Vec<f32> {
        let mut rng = StdRng::seed_from_u64(seed);
        (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect()
    }
    fn close(what: &str, got: &[f32], want: &[f64], tol: f64) {
        assert_eq!(got.len(), want.len(), "{what}: length");
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g as f64 - w).abs() <= tol * (1.0 + w.abs()),
                "{what}: element {i}: {g} against {w}"
            );
        }
    }
    // (m, k, n, a given transposed, b given transposed)
    for &(m, k, n, ta, tb) in &[
        (40, 100, 200, false, false), // column bands
        (300, 50, 40, false, true),   // row bands, `b` a transposed view
        (128, 70, 130, true, false),  // `a` a transposed view, bands not a multiple of 16
        (17, 300, 97, true, true),
        // Transposed operands with a column stride of 256 or 512 floats are copied row-major
        // first, or the product is computed column-major: `b` in column bands, columns not a
        // multiple of 8; `b` in row bands; `a` in row bands (its stride is `m`).
        (64, 512, 203, false, true),
        (300, 256, 45, true, true),
        (512, 60, 40, true, false),
        // `b` a transposed view and few rows: computed column-major and transposed into the
        // output, `a` copied column-major first when its rows are 256 or 512 floats apart
        // (`h @ w2.t()` of the MLP; rows not a multiple of 8; a row stride of 300).
        (128, 512, 512, false, true),
        (37, 256, 90, false, true),
        (21, 300, 130, false, true),
        // One row (a batch-1 forward): the streaming loops, in bands over the pool.
        (1, 784, 512, false, true),  // `x @ Wᵀ`, the `Linear` layout
        (1, 300, 200, false, false), // `x @ B`, `B` row-major
        (1, 37, 10, true, true),     // below the parallel threshold, tails in both dims
    ] {
        let (a, b) = (vals(m * k, 1), vals(k * n, 2));
        let ta_ = if ta {
            Tensor::from_vec(a.clone(), [k, m]).unwrap().t().unwrap()
        } else {
            Tensor::from_vec(a.clone(), [m, k]).unwrap()
        };
        let tb_ = if tb {
            Tensor::from_vec(b.clone(), [n, k]).unwrap().t().unwrap()
        } else {
            Tensor::from_vec(b.clone(), [k, n]).unwrap()
        };
        let at = |i: usize, p: usize| (if ta { a[p * m + i] } else { a[i * k + p] }) as f64;
        let bt = |p: usize, j: usize| (if tb { b[j * k + p] } else { b[p * n + j] }) as f64;
        let want: Vec<f64> = (0..m * n)
            .map(|ij| (0..k).map(|p| at(ij / n, p) * bt(p, ij % n)).sum())
            .collect();
        for _ in 0..3 {
            let got = ta_.matmul(&tb_).unwrap().to_vec::<f32>().unwrap();
            close(
                &format!("matmul {m}x{k}x{n} ta={ta} tb={tb}"),
                &got,
                &want,
                1e-4,
            );
        }
    }

    // The copied operand narrowed from a wider weight: 300 of 512 columns (rows of `b`), so
    // the copy has edges in both dims.
    let (m, k, n) = (70, 300, 61);
    let (a, w) = (vals(m * k, 5), vals(n * 512, 6));
    let ta_ = Tensor::from_vec(a.clone(), [m, k]).unwrap();
    let tw = Tensor::from_vec(w.clone(), [n, 512]).unwrap();
    let tb_ = tw.narrow(1, 0, k).unwrap().t().unwrap();
    let want: Vec<f64> = (0..m * n)
        .map(|ij| {
            let (i, j) = (ij / n, ij % n);
            (0..k)
                .map(|p| a[i * k + p] as f64 * w[j * 512 + p] as f64)
                .sum()
        })
        .collect();
    let got = ta_.matmul(&tb_).unwrap().to_vec::<f32>().unwrap();
    close(
        "matmul through a narrowed transposed weight",
        &got,
        &want,
        1e-4,
    );

    let n = 100_003; // above the elementwise threshold, not a multiple of any chunk size
    let (x, y) = (vals(n, 3), vals(n, 4));
    let tx = Tensor::from_vec(x.clone(), [n]).unwrap();
    let ty = Tensor::from_vec(y.clone(), [n]).unwrap();
    let f64s = |v: &[f32]| v.iter().map(|&v| v as f64).collect::<Vec<_>>();
    for _ in 0..3 {
        let want: Vec<f64> = x
            .iter()
            .zip(&y)
            .map(|(&a, &b)| a as f64 + b as f64)
            .collect();
        close(
            "add",
            &tx.add(&ty).unwrap().to_vec::<f32>().unwrap(),
            &want,
            1e-6,
        );
        let want: Vec<f64> = x.iter().map(|&a| a as f64 * -0.5).collect();
        close(
            "mul_scalar",
            &tx.mul_scalar(-0.5).unwrap().to_vec::<f32>().unwrap(),
            &want,
            1e-6,
        );
        let want: Vec<f64> = x.iter().map(|&a| (a as f64).max(0.0)).collect();
        close(
            "relu",
            &tx.relu().unwrap().to_vec::<f32>().unwrap(),
            &want,
            0.0,
        );
        let p = Tensor::from_vec(x.clone(), [n]).unwrap();
        p.add_scaled_(&ty, -0.25).unwrap();
        let want: Vec<f64> = x
            .iter()
            .zip(&y)
            .map(|(&a, &b)| a as f64 - 0.25 * b as f64)
            .collect();
        close("add_scaled_", &p.to_vec::<f32>().unwrap(), &want, 1e-6);
        let s = tx.sum_all().unwrap().to_vec::<f32>().unwrap();
        close("sum_all", &s, &[f64s(&x).iter().sum::<f64>()], 1e-4);
    }

    let (rows, cols) = (600, 70); // 42,000 elements: rows split across the pool
    let z = vals(rows * cols, 5);
    let tz = Tensor::from_vec(z.clone(), [rows, cols]).unwrap();
    let mut want = Vec::with_capacity(rows * cols);
    let mut sums = Vec::with_capacity(rows);
    for r in z.chunks(cols) {
        let mx = r.iter().fold(f64::MIN, |m, &v| m.max(v as f64));
        let e: Vec<f64> = r.iter().map(|&v| (v as f64 - mx).exp()).collect();
        let s: f64 = e.iter().sum();
        want.extend(e.iter().map(|v| v / s));
        sums.push(r.iter().map(|&v| v as f64).sum::<f64>());
    }
    for _ in 0..3 {
        close(
            "softmax",
            &tz.softmax(1).unwrap().to_vec::<f32>().unwrap(),
            &want,
            1e-5,
        );
        let got = tz.sum(&[1], false).unwrap().to_vec::<f32>().unwrap();
        close("row sums", &got, &sums, 1e-5);
    }
}

/// Outputs of at least `STREAM_MIN_BYTES` are written with streaming stores from a stack
/// buffer: binary (`dense2`) and unary (`dense1`) kernels, a scalar operand, a widening cast, an
/// input view whose offset is not a multiple of the buffer, and the copy and fill kernels, all
/// against plain loops.
#[test]
fn outputs_above_the_streaming_threshold_match_plain_loops() {
    use eddy::ops::cpu::stream_store::STREAM_MIN_BYTES;
    let n = STREAM_MIN_BYTES / 4 + 37; // f32 elements: over the threshold, ragged tail
    let x: Vec<f32> = (0..n + 3)
        .map(|i| (i % 1009) as f32 * 0.25 - 100.0)
        .collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 997) as f32 * 0.5).collect();
    let tx = Tensor::from_vec(x.clone(), [n + 3])
        .unwrap()
        .narrow(0, 3, n) // offset 3: the input is not aligned like the output
        .unwrap();
    let ty = Tensor::from_vec(y.clone(), [n]).unwrap();
    let xs = &x[3..];
    let sum = tx.add(&ty).unwrap().to_vec::<f32>().unwrap();
    assert!(sum.iter().zip(xs).zip(&y).all(|((&s, &a), &b)| s == a + b));
    let relu = tx.relu().unwrap().to_vec::<f32>().unwrap();
    assert!(relu.iter().zip(xs).all(|(&r, &a)| r == a.max(0.0)));
    let scaled = tx.mul_scalar(3.0).unwrap().to_vec::<f32>().unwrap();
    assert!(scaled.iter().zip(xs).all(|(&s, &a)| s == a * 3.0));
    let wide = ty
        .narrow(0, 0, STREAM_MIN_BYTES / 8 + 5)
        .unwrap()
        .to_dtype(DType::F64)
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    assert!(wide.iter().zip(&y).all(|(&w, &b)| w == b as f64));

    // The copy and fill kernels: a fill, a cast, a strided source made contiguous, a `cat`
    // (each half above the threshold on its own) and a `copy_` into a view.
    let full = Tensor::full([n], 1.5, DType::F32).unwrap();
    assert!(full.to_vec::<f32>().unwrap().iter().all(|&v| v == 1.5));
    let ints = tx.to_dtype(DType::I32).unwrap().to_vec::<i32>().unwrap();
    assert!(ints.iter().zip(xs).all(|(&i, &a)| i == a as i32));
    let rows = n / 1000;
    let grid = ty
        .narrow(0, 0, rows * 1000)
        .unwrap()
        .reshape([rows, 1000])
        .unwrap();
    let cols = grid.narrow(1, 3, 997).unwrap().contiguous().unwrap();
    let got = cols.to_vec::<f32>().unwrap();
    assert_eq!(got.len(), rows * 997);
    assert!(
        got.iter()
            .enumerate()
            .all(|(i, &v)| v == y[(i / 997) * 1000 + 3 + i % 997])
    );
    let both = Tensor::cat(&[&tx, &ty], 0)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert!(both[..n] == *xs && both[n..] == *y);
    let dst = Tensor::zeros([n + 5], DType::F32).unwrap();
    dst.narrow(0, 5, n).unwrap().copy_(&tx).unwrap();
    let got = dst.to_vec::<f32>().unwrap();
    assert!(got[..5].iter().all(|&v| v == 0.0) && got[5..] == *xs);
}
