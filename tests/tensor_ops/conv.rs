//! Convolutions and pooling against plain loops over `f64`: random geometry (kernel, stride,
//! padding, dilation, groups, ceil mode), odd sizes, and batches of zero.

use eddy::tensor::nn::{Conv2d, ConvOptions, Module};
use eddy::tensor::{DType, Tensor, no_grad};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn rand_vec(rng: &mut StdRng, n: usize) -> Vec<f64> {
    (0..n).map(|_| rng.random_range(-2.0..2.0)).collect()
}

/// Geometry of one spatial dim: input size, kernel, stride, padding, dilation.
#[derive(Clone, Copy, Debug)]
struct Dim {
    n: usize,
    k: usize,
    s: usize,
    p: usize,
    d: usize,
}

impl Dim {
    fn out(&self) -> usize {
        (self.n + 2 * self.p - self.d * (self.k - 1) - 1) / self.s + 1
    }
    /// The input index of tap `t` at output `o`, if inside.
    fn src(&self, o: usize, t: usize) -> Option<usize> {
        let at = (o * self.s + t * self.d) as isize - self.p as isize;
        (at >= 0 && (at as usize) < self.n).then_some(at as usize)
    }
}

fn dim() -> impl Strategy<Value = Dim> {
    (1usize..=4, 1usize..=3, 0usize..=2, 1usize..=2, 0usize..=6).prop_filter_map(
        "window fits",
        |(k, s, p, d, extra)| {
            let n = (d * (k - 1) + 1).saturating_sub(2 * p).max(1) + extra;
            let dm = Dim { n, k, s, p, d };
            (n + 2 * p > d * (k - 1)).then_some(dm)
        },
    )
}

#[allow(clippy::too_many_arguments)]
fn conv_ref(
    x: &[f64],
    w: &[f64],
    b: Option<&[f64]>,
    [n, cin]: [usize; 2],
    cout: usize,
    g: usize,
    h: Dim,
    wd: Dim,
) -> Vec<f64> {
    let (oh, ow) = (h.out(), wd.out());
    let (gin, gout) = (cin / g, cout / g);
    let mut out = vec![0.0; n * cout * oh * ow];
    for bn in 0..n {
        for o in 0..cout {
            let grp = o / gout;
            for y in 0..oh {
                for xo in 0..ow {
                    let mut acc = b.map_or(0.0, |b| b[o]);
                    for ci in 0..gin {
                        let c = grp * gin + ci;
                        for i in 0..h.k {
                            let Some(iy) = h.src(y, i) else { continue };
                            for j in 0..wd.k {
                                let Some(ix) = wd.src(xo, j) else { continue };
                                acc += x[((bn * cin + c) * h.n + iy) * wd.n + ix]
                                    * w[((o * gin + ci) * h.k + i) * wd.k + j];
                            }
                        }
                    }
                    out[((bn * cout + o) * oh + y) * ow + xo] = acc;
                }
            }
        }
    }
    out
}

fn close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= tol * (1.0 + b.abs()),
            "{what}: [{i}] {a} vs {b}"
        );
    }
}

proptest! {
    #![proptest_config(crate::common::reference::cases(48))]

    /// conv2d over random geometry and groups, with and without bias, f64 and f32.
    #[test]
    fn conv2d_matches_loops(
        n in 0usize..=2, g in 1usize..=2, gin in 1usize..=3, gout in 1usize..=3,
        h in dim(), wd in dim(), bias in any::<bool>(), f32_ in any::<bool>(), seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (cin, cout) = (g * gin, g * gout);
        let xv = rand_vec(&mut rng, n * cin * h.n * wd.n);
        let wv = rand_vec(&mut rng, cout * gin * h.k * wd.k);
        let bv = rand_vec(&mut rng, cout);
        let want = conv_ref(&xv, &wv, bias.then_some(&bv[..]), [n, cin], cout, g, h, wd);
        let dt = if f32_ { DType::F32 } else { DType::F64 };
        let x = Tensor::from_vec(xv, [n, cin, h.n, wd.n]).unwrap().to_dtype(dt).unwrap();
        let w = Tensor::from_vec(wv, [cout, gin, h.k, wd.k]).unwrap().to_dtype(dt).unwrap();
        let b = Tensor::from_vec(bv, [cout]).unwrap().to_dtype(dt).unwrap();
        let y = x.conv2d(&w, bias.then_some(&b), (h.s, wd.s), (h.p, wd.p), (h.d, wd.d), g).unwrap();
        prop_assert_eq!(y.dims(), &[n, cout, h.out(), wd.out()]);
        let tol = if f32_ { 1e-5 } else { 1e-12 };
        close(&y.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap(), &want, tol, "conv2d");
    }

    /// conv2d of integers (i64, i32, u8) is exact: the loops' sums of small integers.
    #[test]
    fn integer_conv2d_is_exact(
        n in 1usize..=2, g in 1usize..=2, gin in 1usize..=2, gout in 1usize..=2,
        h in dim(), wd in dim(), bias in any::<bool>(), dt in 0usize..3, seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (cin, cout) = (g * gin, g * gout);
        // u8 takes values from 0 (its sums stay small enough not to wrap).
        let lo = if dt == 2 { 0 } else { -3 };
        let mut ints = |len: usize| -> Vec<f64> {
            (0..len).map(|_| rng.random_range(lo..=3) as f64).collect()
        };
        let (xv, wv, bv) = (ints(n * cin * h.n * wd.n), ints(cout * gin * h.k * wd.k), ints(cout));
        let want = conv_ref(&xv, &wv, bias.then_some(&bv[..]), [n, cin], cout, g, h, wd);
        let dt = [DType::I64, DType::I32, DType::U8][dt];
        let t = |v: Vec<f64>, dims: &[usize]| Tensor::from_vec(v, dims).unwrap().to_dtype(dt).unwrap();
        let (x, w, b) = (t(xv, &[n, cin, h.n, wd.n]), t(wv, &[cout, gin, h.k, wd.k]), t(bv, &[cout]));
        let y = x.conv2d(&w, bias.then_some(&b), (h.s, wd.s), (h.p, wd.p), (h.d, wd.d), g).unwrap();
        prop_assert_eq!(y.dtype(), dt);
        prop_assert_eq!(y.dims(), &[n, cout, h.out(), wd.out()]);
        let got = y.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
        let want: Vec<f64> = if dt == DType::U8 {
            want.iter().map(|v| v.rem_euclid(256.0)).collect()
        } else {
            want
        };
        prop_assert_eq!(got, want);
    }

    /// max_pool2d of integers gives the float path's maxima and positions (ties, common
    /// among small integers, go to the first tap, padding never chosen).
    #[test]
    fn integer_max_pool2d_matches_the_float_path(
        k in 1usize..=3, s in 1usize..=3, pad in 0usize..=1, dil in 1usize..=2, extra in 0usize..=5,
        ceil in any::<bool>(), dt in 0usize..3, seed in any::<u64>(),
    ) {
        let pad = pad.min(k / 2);
        let n = (dil * (k - 1) + 1).saturating_sub(2 * pad).max(1) + extra;
        let mut rng = StdRng::seed_from_u64(seed);
        let lo = if dt == 2 { 0 } else { -2 };
        let xv: Vec<f64> = (0..2 * n * n).map(|_| rng.random_range(lo..=2) as f64).collect();
        let dt = [DType::I64, DType::I32, DType::U8][dt];
        let xf = Tensor::from_vec(xv, [1, 2, n, n]).unwrap();
        let xi = xf.to_dtype(dt).unwrap();
        let (mf, af) = xf.max_pool2d_with_indices(k, s, pad, dil, ceil).unwrap();
        let (mi, ai) = xi.max_pool2d_with_indices(k, s, pad, dil, ceil).unwrap();
        prop_assert_eq!(mi.dtype(), dt);
        prop_assert_eq!(mi.dims(), mf.dims());
        // A window that a dilation steps over the whole input holds the dtype's lowest value
        // (PyTorch's), where a float one holds -inf.
        let lowest = [i64::MIN as f64, i32::MIN as f64, 0.0][[DType::I64, DType::I32, DType::U8].iter().position(|&d| d == dt).unwrap()];
        let want: Vec<f64> = (mf.to_vec::<f64>().unwrap().into_iter())
            .map(|v| if v == f64::NEG_INFINITY { lowest } else { v })
            .collect();
        prop_assert_eq!(mi.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap(), want);
        prop_assert_eq!(ai.to_vec::<i64>().unwrap(), af.to_vec::<i64>().unwrap());
    }

    /// conv_transpose2d is the adjoint of conv2d: <conv(x), y> = <x, conv_transpose(y)>.
    #[test]
    fn conv_transpose2d_is_the_adjoint(
        n in 1usize..=2, g in 1usize..=2, gin in 1usize..=2, gout in 1usize..=3,
        h in dim(), wd in dim(), seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (cin, cout) = (g * gin, g * gout);
        let xv = rand_vec(&mut rng, n * cin * h.n * wd.n);
        let wv = rand_vec(&mut rng, cout * gin * h.k * wd.k);
        let yv = rand_vec(&mut rng, n * cout * h.out() * wd.out());
        let conv = conv_ref(&xv, &wv, None, [n, cin], cout, g, h, wd);
        let lhs: f64 = conv.iter().zip(&yv).map(|(a, b)| a * b).sum();
        // conv2d's weight [cout, gin, ..] is conv_transpose2d's [in = cout, out / groups = gin, ..].
        let w = Tensor::from_vec(wv, [cout, gin, h.k, wd.k]).unwrap();
        let y = Tensor::from_vec(yv, [n, cout, h.out(), wd.out()]).unwrap();
        // The output padding restores the input size lost to the stride's rounding.
        let op = |d: Dim| (d.n + 2 * d.p - d.d * (d.k - 1) - 1) % d.s;
        let t = y.conv_transpose2d(&w, None, (h.s, wd.s), (h.p, wd.p), (op(h), op(wd)), g, (h.d, wd.d));
        let t = t.unwrap();
        prop_assert_eq!(t.dims(), &[n, cin, h.n, wd.n]);
        let rhs: f64 = t.to_vec::<f64>().unwrap().iter().zip(&xv).map(|(a, b)| a * b).sum();
        prop_assert!((lhs - rhs).abs() <= 1e-9 * (1.0 + lhs.abs()), "{lhs} vs {rhs}");
    }

    /// unfold then fold multiplies each element by the number of windows covering it.
    #[test]
    fn fold_of_unfold_counts_windows(h in dim(), wd in dim(), c in 1usize..=3, seed in any::<u64>()) {
        let mut rng = StdRng::seed_from_u64(seed);
        let xv = rand_vec(&mut rng, c * h.n * wd.n);
        let x = Tensor::from_vec(xv.clone(), [1, c, h.n, wd.n]).unwrap();
        let (k, d, p, s) = ((h.k, wd.k), (h.d, wd.d), (h.p, wd.p), (h.s, wd.s));
        let cols = x.unfold2d(k, d, p, s).unwrap();
        prop_assert_eq!(cols.dims(), &[1, c * h.k * wd.k, h.out() * wd.out()]);
        let back = cols.fold2d((h.n, wd.n), k, d, p, s).unwrap().to_vec::<f64>().unwrap();
        let ones = Tensor::ones([1, c, h.n, wd.n], DType::F64).unwrap();
        let counts = ones.unfold2d(k, d, p, s).unwrap().fold2d((h.n, wd.n), k, d, p, s).unwrap();
        let counts = counts.to_vec::<f64>().unwrap();
        for i in 0..xv.len() {
            prop_assert!((back[i] - xv[i] * counts[i]).abs() < 1e-12);
        }
    }

    /// max_pool2d and avg_pool2d (every divisor rule, ceil mode) against loops.
    #[test]
    fn pooling_matches_loops(
        k in 1usize..=3, s in 1usize..=3, pad in 0usize..=1, dil in 1usize..=2, extra in 0usize..=5,
        ceil in any::<bool>(), include in any::<bool>(), c in 1usize..=2, seed in any::<u64>(),
    ) {
        let pad = pad.min(k / 2);
        let n = (dil * (k - 1) + 1).saturating_sub(2 * pad).max(1) + extra;
        let mut rng = StdRng::seed_from_u64(seed);
        let xv = rand_vec(&mut rng, c * n * n);
        let x = Tensor::from_vec(xv.clone(), [c, n, n]).unwrap();
        let out_of = |span: usize| {
            let room = n + 2 * pad - span;
            let mut o = if ceil { room.div_ceil(s) + 1 } else { room / s + 1 };
            if ceil && (o - 1) * s >= n + pad { o -= 1; }
            o
        };
        // max
        let o = out_of(dil * (k - 1) + 1);
        let (m, at) = x.max_pool2d_with_indices(k, s, pad, dil, ceil).unwrap();
        prop_assert_eq!(m.dims(), &[c, o, o]);
        let (m, at) = (m.to_vec::<f64>().unwrap(), at.to_vec::<i64>().unwrap());
        for ch in 0..c {
            for y in 0..o {
                for xo in 0..o {
                    let mut best = (f64::NEG_INFINITY, usize::MAX);
                    for i in 0..k {
                        let iy = (y * s + i * dil) as isize - pad as isize;
                        if iy < 0 || iy as usize >= n { continue; }
                        for j in 0..k {
                            let ix = (xo * s + j * dil) as isize - pad as isize;
                            if ix < 0 || ix as usize >= n { continue; }
                            let at = iy as usize * n + ix as usize;
                            let v = xv[ch * n * n + at];
                            if best.1 == usize::MAX || v > best.0 { best = (v, at); }
                        }
                    }
                    if best.1 == usize::MAX {
                        // No tap inside (dilation): -inf at PyTorch's position, the first
                        // tap past the padding.
                        let first = |o: usize| {
                            let mut st = (o * s) as isize - pad as isize;
                            while st < 0 { st += dil as isize; }
                            st as usize
                        };
                        best = (f64::NEG_INFINITY, first(y) * n + first(xo));
                    }
                    let q = (ch * o + y) * o + xo;
                    prop_assert_eq!((m[q], at[q] as usize), best);
                }
            }
        }
        // avg (no dilation)
        let o = out_of(k);
        let a = x.avg_pool2d(k, s, pad, ceil, include, None).unwrap();
        prop_assert_eq!(a.dims(), &[c, o, o]);
        let a = a.to_vec::<f64>().unwrap();
        for ch in 0..c {
            for y in 0..o {
                for xo in 0..o {
                    let (y0, x0) = ((y * s) as isize - pad as isize, (xo * s) as isize - pad as isize);
                    let lim = (n + pad) as isize;
                    let (y1, x1) = ((y0 + k as isize).min(lim), (x0 + k as isize).min(lim));
                    let mut sum = 0.0;
                    let mut inside = 0;
                    for iy in y0.max(0)..y1.min(n as isize) {
                        for ix in x0.max(0)..x1.min(n as isize) {
                            sum += xv[ch * n * n + iy as usize * n + ix as usize];
                            inside += 1;
                        }
                    }
                    let div = if include { (y1 - y0) * (x1 - x0) } else { inside };
                    let q = (ch * o + y) * o + xo;
                    prop_assert!((a[q] - sum / div as f64).abs() < 1e-12, "avg at {q}: {} vs {}", a[q], sum / div as f64);
                }
            }
        }
    }

    /// adaptive_avg_pool2d against PyTorch's window rule.
    #[test]
    fn adaptive_avg_pool2d_matches_loops(h in 1usize..=7, w in 1usize..=7, oh in 1usize..=4, ow in 1usize..=4, seed in any::<u64>()) {
        let mut rng = StdRng::seed_from_u64(seed);
        let xv = rand_vec(&mut rng, 2 * h * w);
        let x = Tensor::from_vec(xv.clone(), [1, 2, h, w]).unwrap();
        let y = x.adaptive_avg_pool2d((oh, ow)).unwrap();
        prop_assert_eq!(y.dims(), &[1, 2, oh, ow]);
        let y = y.to_vec::<f64>().unwrap();
        for c in 0..2 {
            for i in 0..oh {
                for j in 0..ow {
                    let (r0, r1) = (i * h / oh, ((i + 1) * h).div_ceil(oh));
                    let (c0, c1) = (j * w / ow, ((j + 1) * w).div_ceil(ow));
                    let mut s = 0.0;
                    for r in r0..r1 { for q in c0..c1 { s += xv[c * h * w + r * w + q]; } }
                    let want = s / ((r1 - r0) * (c1 - c0)) as f64;
                    let got = y[(c * oh + i) * ow + j];
                    prop_assert!((got - want).abs() < 1e-12, "{got} vs {want}");
                }
            }
        }
    }
}

#[test]
fn conv1d_is_conv2d_of_height_one() {
    let mut rng = StdRng::seed_from_u64(5);
    let x = Tensor::from_vec(rand_vec(&mut rng, 2 * 4 * 9), [2, 4, 9]).unwrap();
    let w = Tensor::from_vec(rand_vec(&mut rng, 6 * 2 * 3), [6, 2, 3]).unwrap();
    let b = Tensor::from_vec(rand_vec(&mut rng, 6), [6]).unwrap();
    let y = x.conv1d(&w, Some(&b), 2, 1, 2, 2).unwrap();
    let y2 = (x.unsqueeze(2).unwrap())
        .conv2d(
            &w.unsqueeze(2).unwrap(),
            Some(&b),
            (1, 2),
            (0, 1),
            (1, 2),
            2,
        )
        .unwrap()
        .squeeze(2)
        .unwrap();
    assert_eq!(y.dims(), &[2, 6, 4]);
    assert_eq!(y.to_vec::<f64>().unwrap(), y2.to_vec::<f64>().unwrap());
    // Unbatched input keeps its rank.
    let one = x.narrow(0, 0, 1).unwrap().squeeze(0).unwrap();
    assert_eq!(one.conv1d(&w, None, 1, 0, 1, 2).unwrap().dims(), &[6, 7]);
}

#[test]
fn strided_and_offset_inputs_read_their_own_elements() {
    // A transposed, narrowed view goes through the same kernels as its contiguous copy.
    let mut rng = StdRng::seed_from_u64(9);
    let big = Tensor::from_vec(rand_vec(&mut rng, 3 * 2 * 7 * 6), [3, 2, 7, 6]).unwrap();
    let x = big.narrow(0, 1, 2).unwrap().transpose(2, 3).unwrap();
    let xc = x.contiguous().unwrap();
    let w = Tensor::from_vec(rand_vec(&mut rng, 4 * 2 * 9), [4, 2, 3, 3]).unwrap();
    let run = |t: &Tensor| {
        let c = t
            .conv2d(&w, None, 2, 1, 1, 1)
            .unwrap()
            .to_vec::<f64>()
            .unwrap();
        let m = t
            .max_pool2d(2, 1, 0, 1, false)
            .unwrap()
            .to_vec::<f64>()
            .unwrap();
        let a = t
            .avg_pool2d(3, 2, 1, true, false, None)
            .unwrap()
            .to_vec::<f64>()
            .unwrap();
        (c, m, a)
    };
    assert_eq!(run(&x), run(&xc));
}

#[test]
fn max_pool_propagates_nan_and_never_picks_padding() {
    let x = Tensor::from_vec(vec![-5f32, f32::NAN, -7., -1.], [1, 1, 2, 2]).unwrap();
    let (m, at) = x.max_pool2d_with_indices(2, 2, 0, 1, false).unwrap();
    assert!(m.to_vec::<f32>().unwrap()[0].is_nan());
    assert_eq!(at.to_vec::<i64>().unwrap(), [1]);
    // All negative with padding 1: the padding (conceptually -inf) is never the maximum.
    let y = Tensor::full([1, 1, 2, 2], -3.0, DType::F32).unwrap();
    let m = y
        .max_pool2d(3, 1, 1, 1, false)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(m, [-3.0; 4]);
}

#[test]
fn a_dilated_window_over_no_element_is_minus_infinity_where_pytorch_puts_it() {
    // PyTorch 2.15: max_pool2d(x, 2, 1, 1, 2, return_indices=True) of one element.
    let x = Tensor::from_vec(vec![5f32], [1, 1, 1, 1])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    let (m, at) = x.max_pool2d_with_indices(2, 1, 1, 2, false).unwrap();
    assert_eq!(m.to_vec::<f32>().unwrap(), [f32::NEG_INFINITY]);
    assert_eq!(at.to_vec::<i64>().unwrap(), [2]);
    m.sum_all().unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), [0.0]); // the gradient goes nowhere
    // And of a 2×2 plane: every window holds exactly one element.
    let x = Tensor::arange(0.0, 4.0, 1.0, DType::F32)
        .unwrap()
        .reshape([1, 1, 2, 2])
        .unwrap();
    let (m, at) = x.max_pool2d_with_indices(2, 1, 1, 2, false).unwrap();
    assert_eq!(m.to_vec::<f32>().unwrap(), [3., 2., 1., 0.]);
    assert_eq!(at.to_vec::<i64>().unwrap(), [3, 2, 1, 0]);
}

/// A window that a dilation steps over the whole input: PyTorch 2.15 gives the dtype's lowest
/// value at its first tap past the padding (`F.max_pool2d(tensor([[[[5]]]]), 2, 1, 1, 2,
/// return_indices=True)`: `-9223372036854775808` at 2).
#[test]
fn integer_max_pool_of_a_window_over_no_input_is_the_lowest_value() {
    let x = Tensor::from_vec(vec![5i64], [1, 1, 1, 1]).unwrap();
    let (m, at) = x.max_pool2d_with_indices(2, 1, 1, 2, false).unwrap();
    assert_eq!(m.to_vec::<i64>().unwrap(), [i64::MIN]);
    assert_eq!(at.to_vec::<i64>().unwrap(), [2]);
}

#[test]
fn pooling_and_convolution_refuse_bad_arguments() {
    let x = Tensor::ones([1, 2, 5, 5], DType::F32).unwrap();
    let w = Tensor::ones([4, 2, 3, 3], DType::F32).unwrap();
    let msg = |r: eddy::tensor::Result<Tensor>| r.unwrap_err().to_string();
    assert!(msg(x.conv2d(&w, None, 0, 0, 1, 1)).contains("conv2d"));
    assert!(msg(x.conv2d(&w, None, 1, 0, 1, 3)).contains("conv2d"));
    assert!(msg(x.conv2d(&w.to_dtype(DType::F64).unwrap(), None, 1, 0, 1, 1)).contains("conv2d"));
    let b = Tensor::ones([3], DType::F32).unwrap();
    assert!(msg(x.conv2d(&w, Some(&b), 1, 0, 1, 1)).contains("[3]"));
    assert!(msg(x.reshape([2, 25]).unwrap().conv2d(&w, None, 1, 0, 1, 1)).contains("[2, 25]"));
    assert!(msg(x.conv2d(&w, None, 1, 0, 3, 1)).contains("no output position"));
    let xb = Tensor::ones([1, 2, 5, 5], DType::Bool).unwrap();
    assert!(msg(xb.max_pool2d(2, 2, 0, 1, false)).contains("max_pool2d"));
    let wb = Tensor::ones([4, 2, 3, 3], DType::Bool).unwrap();
    assert!(msg(xb.conv2d(&wb, None, 1, 0, 1, 1)).contains("conv2d"));
    let xi = Tensor::ones([1, 2, 5, 5], DType::I64).unwrap();
    assert!(msg(xi.avg_pool2d(2, 2, 0, false, true, None)).contains("avg_pool2d"));
    assert!(msg(x.max_pool2d(2, 2, 2, 1, false)).contains("half the kernel"));
    assert!(msg(x.avg_pool2d(2, 2, 0, false, true, Some(0))).contains("divisor_override"));
    assert_eq!(x.adaptive_avg_pool2d(0).unwrap().dims(), &[1, 2, 0, 0]);
    assert!(msg(x.unfold2d(2, 1, 0, 1).unwrap().fold2d(6, 2, 1, 0, 1)).contains("fold"));
    assert!(
        msg(x.conv_transpose2d(&w.transpose(0, 1).unwrap(), None, 1, 0, 1, 1, 1))
            .contains("output padding")
    );
}

/// Without a gradient to record, a convolution runs as one blocked instruction: blocks of
/// window positions unfolded and multiplied in cache. With 456 channels of 3 × 3 taps a block
/// is 64 positions, so the 13-wide rows below start and end mid-block; each case also equals
/// the training path (the same call with the input requiring a gradient), bias and ReLU
/// included.
#[test]
fn a_convolution_without_gradient_spans_blocks_that_start_mid_row() {
    let (cin, cout) = (456, 5);
    let mut rng = StdRng::seed_from_u64(7);
    for (h, wd) in [
        (
            Dim {
                n: 12,
                k: 3,
                s: 1,
                p: 1,
                d: 1,
            },
            Dim {
                n: 13,
                k: 3,
                s: 1,
                p: 1,
                d: 1,
            },
        ),
        (
            Dim {
                n: 17,
                k: 3,
                s: 2,
                p: 2,
                d: 2,
            },
            Dim {
                n: 29,
                k: 3,
                s: 1,
                p: 0,
                d: 2,
            },
        ),
    ] {
        let (xv, wv, bv) = (
            rand_vec(&mut rng, 2 * cin * h.n * wd.n),
            rand_vec(&mut rng, cout * cin * 9),
            rand_vec(&mut rng, cout),
        );
        let want = conv_ref(&xv, &wv, Some(&bv), [2, cin], cout, 1, h, wd);
        let x = Tensor::from_vec(xv, [2, cin, h.n, wd.n]).unwrap();
        let w = Tensor::from_vec(wv, [cout, cin, 3, 3]).unwrap();
        let b = Tensor::from_vec(bv, [cout]).unwrap();
        let (s, p, d) = ((h.s, wd.s), (h.p, wd.p), (h.d, wd.d));
        let y = x.conv2d(&w, Some(&b), s, p, d, 1).unwrap();
        assert_eq!(y.dims(), &[2, cout, h.out(), wd.out()]);
        close(&y.to_vec::<f64>().unwrap(), &want, 1e-12, "blocked conv2d");
        let xg = x
            .to_dtype(DType::F32)
            .unwrap()
            .requires_grad_(true)
            .unwrap();
        let (w32, b32) = (
            w.to_dtype(DType::F32).unwrap(),
            b.to_dtype(DType::F32).unwrap(),
        );
        let trained = xg
            .conv2d(&w32, Some(&b32), s, p, d, 1)
            .unwrap()
            .relu()
            .unwrap();
        // `Conv2d` then `Relu` run as one instruction (`forward_relu`), blocked without a
        // gradient to record.
        let layer = Conv2d {
            weight: w32.clone(),
            bias: Some(b32.clone()),
            options: ConvOptions::default().stride(s).padding(p).dilation(d),
        };
        let blocked = {
            let _g = no_grad();
            layer
                .forward_relu(&x.to_dtype(DType::F32).unwrap())
                .unwrap()
                .unwrap()
        };
        let (t, bl) = (
            trained.to_vec::<f32>().unwrap(),
            blocked.to_vec::<f32>().unwrap(),
        );
        let relu: Vec<f64> = want.iter().map(|v| v.max(0.0)).collect();
        close(
            &bl.iter().map(|&v| v as f64).collect::<Vec<_>>(),
            &relu,
            1e-4,
            "blocked f32",
        );
        close(
            &t.iter().map(|&v| v as f64).collect::<Vec<_>>(),
            &relu,
            1e-4,
            "training f32",
        );
    }
}
