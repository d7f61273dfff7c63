//! What the op suites share: the plain-loop `f64` reference (`Arr`, a row-major `Vec<f64>` plus
//! a shape), builders of inputs reached through views of a fresh base, proptest strategies over
//! shapes (zeros included), view steps and dtypes, and the checks of a tensor against the
//! reference, with a tolerance of one rounding to its dtype.

use eddy::ops::{Elem, dispatch};
use eddy::tensor::{DType, Tensor};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use rand::Rng;
use rand::rngs::StdRng;

use DType::{BF16, F16, F32, F64, I32, I64};

/// The tensor API's result.
pub type R<T> = eddy::tensor::Result<T>;

// ---- the reference --------------------------------------------------------------------------

/// A plain-loop `f64` array: a row-major `Vec<f64>` plus a shape.
#[derive(Clone, Debug, PartialEq)]
pub struct Arr {
    pub shape: Vec<usize>,
    pub data: Vec<f64>,
}

pub fn numel(s: &[usize]) -> usize {
    s.iter().product()
}

fn strides(s: &[usize]) -> Vec<usize> {
    let mut st = vec![1; s.len()];
    for i in (0..s.len().saturating_sub(1)).rev() {
        st[i] = st[i + 1] * s[i + 1];
    }
    st
}

/// The multi-index of flat position `i` (only for non-empty shapes).
pub fn unravel(mut i: usize, s: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; s.len()];
    for d in (0..s.len()).rev() {
        idx[d] = i % s[d];
        i /= s[d];
    }
    idx
}

pub fn ravel(idx: &[usize], s: &[usize]) -> usize {
    idx.iter().zip(strides(s)).map(|(a, b)| a * b).sum()
}

/// NumPy broadcasting: `None` if the shapes do not broadcast.
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    (0..n)
        .map(|i| {
            let da = if i + a.len() >= n {
                a[i + a.len() - n]
            } else {
                1
            };
            let db = if i + b.len() >= n {
                b[i + b.len() - n]
            } else {
                1
            };
            if da == db || db == 1 {
                Some(da)
            } else if da == 1 {
                Some(db)
            } else {
                None
            }
        })
        .collect()
}

/// `erf` by its Taylor series (exact to ~1e-14 for |x| <= 3).
pub fn erf(x: f64) -> f64 {
    if x.abs() > 5.5 {
        return x.signum();
    }
    let (x2, mut term, mut sum) = (x * x, x, x);
    for n in 1..400 {
        term *= -x2 / n as f64;
        let t = term / (2 * n + 1) as f64;
        sum += t;
        if t.abs() < 1e-18 * sum.abs().max(1e-300) {
            break;
        }
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

impl Arr {
    pub fn new(shape: &[usize], data: Vec<f64>) -> Arr {
        assert_eq!(numel(shape), data.len(), "reference: bad element count");
        Arr {
            shape: shape.to_vec(),
            data,
        }
    }
    pub fn from_fn(shape: &[usize], mut f: impl FnMut(&[usize]) -> f64) -> Arr {
        let n = numel(shape);
        Arr::new(shape, (0..n).map(|i| f(&unravel(i, shape))).collect())
    }
    pub fn rank(&self) -> usize {
        self.shape.len()
    }
    pub fn at(&self, idx: &[usize]) -> f64 {
        self.data[ravel(idx, &self.shape)]
    }
    pub fn map(&self, f: impl Fn(f64) -> f64) -> Arr {
        Arr::new(&self.shape, self.data.iter().map(|&x| f(x)).collect())
    }
    pub fn broadcast_to(&self, shape: &[usize]) -> Arr {
        let (n, k) = (shape.len(), self.rank());
        assert!(k <= n);
        Arr::from_fn(shape, |idx| {
            let src: Vec<usize> = (0..k)
                .map(|j| {
                    if self.shape[j] == 1 {
                        0
                    } else {
                        idx[j + n - k]
                    }
                })
                .collect();
            self.at(&src)
        })
    }
    pub fn zip(&self, o: &Arr, f: impl Fn(f64, f64) -> f64) -> Option<Arr> {
        let s = broadcast_shape(&self.shape, &o.shape)?;
        let (a, b) = (self.broadcast_to(&s), o.broadcast_to(&s));
        Some(Arr::new(
            &s,
            a.data.iter().zip(&b.data).map(|(&x, &y)| f(x, y)).collect(),
        ))
    }
    pub fn permute(&self, p: &[usize]) -> Arr {
        let shape: Vec<usize> = p.iter().map(|&d| self.shape[d]).collect();
        Arr::from_fn(&shape, |idx| {
            let mut src = vec![0; p.len()];
            for (i, &d) in p.iter().enumerate() {
                src[d] = idx[i];
            }
            self.at(&src)
        })
    }
    pub fn transpose(&self, a: usize, b: usize) -> Arr {
        let mut p: Vec<usize> = (0..self.rank()).collect();
        p.swap(a, b);
        self.permute(&p)
    }
    pub fn narrow(&self, d: usize, start: usize, len: usize) -> Arr {
        let mut shape = self.shape.clone();
        shape[d] = len;
        Arr::from_fn(&shape, |idx| {
            let mut s = idx.to_vec();
            s[d] += start;
            self.at(&s)
        })
    }
    pub fn reshape(&self, shape: &[usize]) -> Arr {
        Arr::new(shape, self.data.clone())
    }
    /// Reduces `dims`, calling `f` on each group's elements in row-major order.
    pub fn reduce(&self, dims: &[usize], keepdim: bool, f: impl Fn(&[f64]) -> f64) -> Arr {
        let r = self.rank();
        let red = |d: usize| dims.contains(&d);
        let keep: Vec<usize> = (0..r)
            .map(|d| if red(d) { 1 } else { self.shape[d] })
            .collect();
        let mut groups = vec![Vec::new(); numel(&keep)];
        for (i, &v) in self.data.iter().enumerate() {
            let mut idx = unravel(i, &self.shape);
            for &d in dims {
                idx[d] = 0;
            }
            groups[ravel(&idx, &keep)].push(v);
        }
        let out: Vec<usize> = if keepdim {
            keep
        } else {
            (0..r).filter(|&d| !red(d)).map(|d| self.shape[d]).collect()
        };
        Arr::new(&out, groups.iter().map(|g| f(g)).collect())
    }
    /// PyTorch's `matmul` (1-D promotion, broadcast batch dims); `None` on a shape error.
    pub fn matmul(&self, o: &Arr) -> Option<Arr> {
        if self.rank() == 0 || o.rank() == 0 {
            return None;
        }
        let a = if self.rank() == 1 {
            self.reshape(&[1, self.shape[0]])
        } else {
            self.clone()
        };
        let b = if o.rank() == 1 {
            o.reshape(&[o.shape[0], 1])
        } else {
            o.clone()
        };
        let (ra, rb) = (a.rank(), b.rank());
        let (m, k) = (a.shape[ra - 2], a.shape[ra - 1]);
        let (k2, n) = (b.shape[rb - 2], b.shape[rb - 1]);
        if k != k2 {
            return None;
        }
        let batch = broadcast_shape(&a.shape[..ra - 2], &b.shape[..rb - 2])?;
        let with = |x: usize, y: usize| {
            let mut s = batch.clone();
            s.extend([x, y]);
            s
        };
        let (a, b) = (a.broadcast_to(&with(m, k)), b.broadcast_to(&with(k, n)));
        let nb = batch.len();
        let out = Arr::from_fn(&with(m, n), |idx| {
            (0..k)
                .map(|p| {
                    let mut ia = idx[..nb].to_vec();
                    ia.extend([idx[nb], p]);
                    let mut ib = idx[..nb].to_vec();
                    ib.extend([p, idx[nb + 1]]);
                    a.at(&ia) * b.at(&ib)
                })
                .sum()
        });
        let mut shape = out.shape.clone();
        if o.rank() == 1 {
            shape.pop();
        }
        if self.rank() == 1 {
            shape.remove(shape.len() - 1 - usize::from(o.rank() != 1));
        }
        Some(out.reshape(&shape))
    }
    /// The values along dim `d` through position `idx`.
    fn row(&self, d: usize, idx: &[usize]) -> Vec<f64> {
        let mut s = idx.to_vec();
        (0..self.shape[d])
            .map(|q| {
                s[d] = q;
                self.at(&s)
            })
            .collect()
    }
    pub fn softmax(&self, d: usize, log: bool) -> Arr {
        Arr::from_fn(&self.shape, |idx| {
            let row = self.row(d, idx);
            let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let s: f64 = row.iter().map(|v| (v - m).exp()).sum();
            let x = self.at(idx);
            if log {
                x - m - s.ln()
            } else {
                (x - m).exp() / s
            }
        })
    }
    pub fn index_select(&self, d: usize, index: &[usize]) -> Arr {
        let mut shape = self.shape.clone();
        shape[d] = index.len();
        Arr::from_fn(&shape, |idx| {
            let mut s = idx.to_vec();
            s[d] = index[idx[d]];
            self.at(&s)
        })
    }
    pub fn gather(&self, d: usize, index: &Arr) -> Arr {
        Arr::from_fn(&index.shape, |idx| {
            let mut s = idx.to_vec();
            s[d] = index.at(idx) as usize;
            self.at(&s)
        })
    }
    pub fn cat(parts: &[Arr], d: usize) -> Arr {
        let mut shape = parts[0].shape.clone();
        shape[d] = parts.iter().map(|p| p.shape[d]).sum();
        Arr::from_fn(&shape, |idx| {
            let mut s = idx.to_vec();
            for p in parts {
                if s[d] < p.shape[d] {
                    return p.at(&s);
                }
                s[d] -= p.shape[d];
            }
            unreachable!()
        })
    }
    /// Layer norm over the last `k` dims; also returns, per element, `1/σ` of its row
    /// (how much the normalisation amplifies rounding of the input).
    pub fn layer_norm(
        &self,
        k: usize,
        w: Option<&Arr>,
        b: Option<&Arr>,
        eps: f64,
    ) -> (Arr, Vec<f64>) {
        let inner = numel(&self.shape[self.rank() - k..]);
        let mut out = vec![0.0; self.data.len()];
        let mut amp = vec![0.0; self.data.len()];
        for (r, row) in self.data.chunks(inner.max(1)).enumerate() {
            let mean = row.iter().sum::<f64>() / inner as f64;
            let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / inner as f64;
            let inv = 1.0 / (var + eps).sqrt();
            for (j, &v) in row.iter().enumerate() {
                let mut y = (v - mean) * inv;
                if let Some(w) = w {
                    y *= w.data[j];
                }
                if let Some(b) = b {
                    y += b.data[j];
                }
                out[r * inner + j] = y;
                amp[r * inner + j] = inv;
            }
        }
        (Arr::new(&self.shape, out), amp)
    }
}

// ---- building inputs --------------------------------------------------------------------------

/// One way to reach the target layout from a larger or smaller base (read backwards from the
/// target shape): a transpose of dims `(i, j)`, a narrow of dim `d` with `pre`/`post` elements
/// cut off, or a broadcast from a shape with the masked dims set to 1 (and maybe leading dims
/// dropped).
#[derive(Clone, Debug)]
pub enum Step {
    T(usize, usize),
    N(usize, usize, usize),
    B(u8),
}

/// The dtype's rounding, as the kernels do it (`Elem::from_f64`).
pub fn round(dt: DType, v: f64) -> f64 {
    dispatch!(dt, T => T::from_f64(v).to_f64())
}

/// A contiguous tensor of `dt` holding `a`'s values.
pub fn tensor(a: &Arr, dt: DType) -> Tensor {
    dispatch!(dt, T => Tensor::from_vec(a.data.iter().map(|&v| T::from_f64(v)).collect::<Vec<T>>(), a.shape.clone()).unwrap())
}

/// A tensor of logical shape `shape` reached from a fresh base through `steps` (so usually a
/// non-contiguous view), and the reference values it holds.
pub fn build(
    shape: &[usize],
    steps: &[Step],
    dt: DType,
    draw: &mut dyn FnMut() -> f64,
) -> (Tensor, Arr) {
    let rank = shape.len();
    match steps.split_first() {
        Some((&Step::T(i, j), rest)) if rank >= 2 => {
            let (i, j) = (i % rank, j % rank);
            let mut s = shape.to_vec();
            s.swap(i, j);
            let (t, a) = build(&s, rest, dt, draw);
            (
                t.transpose(i as isize, j as isize).unwrap(),
                a.transpose(i, j),
            )
        }
        Some((&Step::N(d, pre, post), rest)) if rank >= 1 => {
            let d = d % rank;
            let mut s = shape.to_vec();
            s[d] += pre + post;
            let (t, a) = build(&s, rest, dt, draw);
            (
                t.narrow(d as isize, pre, shape[d]).unwrap(),
                a.narrow(d, pre, shape[d]),
            )
        }
        Some((&Step::B(mask), rest)) => {
            let drop = if mask & 0x80 != 0 {
                ((mask as usize >> 5) & 3).min(rank)
            } else {
                0
            };
            let s: Vec<usize> = (drop..rank)
                .map(|d| if mask >> d & 1 == 1 { 1 } else { shape[d] })
                .collect();
            let (t, a) = build(&s, rest, dt, draw);
            (t.broadcast_to(shape).unwrap(), a.broadcast_to(shape))
        }
        Some((_, rest)) => build(shape, rest, dt, draw),
        None => {
            let a = Arr::new(
                shape,
                (0..numel(shape)).map(|_| round(dt, draw())).collect(),
            );
            (tensor(&a, dt), a)
        }
    }
}

/// Value domains.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Dom {
    /// [-3, 3)
    Any,
    /// [0.25, 3)
    Pos,
    /// ±[0.25, 3)
    NonZero,
    /// Small integers (ties and exact comparisons).
    Grid,
    /// ±[0.5, 1.5) (products stay in range).
    Unit,
    /// Integers and halves in [-4, 4] (rounding's ties).
    Halves,
}

pub fn sample(rng: &mut StdRng, dom: Dom, dt: DType) -> f64 {
    if !dt.is_float() {
        return match dom {
            Dom::Pos | Dom::NonZero => rng.random_range(1..=4) as f64,
            Dom::Unit => [-1.0, 1.0, 2.0][rng.random_range(0..3)],
            Dom::Halves => rng.random_range(-4..=4) as f64,
            _ => rng.random_range(-4..=4) as f64,
        };
    }
    match dom {
        Dom::Any => rng.random_range(-3.0..3.0),
        Dom::Pos => rng.random_range(0.25..3.0),
        Dom::NonZero => {
            let v = rng.random_range(0.25..3.0);
            if rng.random() { v } else { -v }
        }
        Dom::Grid => rng.random_range(-2..=2) as f64,
        Dom::Halves => rng.random_range(-8..=8) as f64 / 2.0,
        Dom::Unit => {
            let v = rng.random_range(0.5..1.5);
            if rng.random() { v } else { -v }
        }
    }
}

/// Builds an input of `shape` through `steps` with values from `dom`.
pub fn input(
    shape: &[usize],
    steps: &[Step],
    dt: DType,
    dom: Dom,
    rng: &mut StdRng,
) -> (Tensor, Arr) {
    build(shape, steps, dt, &mut || sample(rng, dom, dt))
}

/// `out` with the leading `drop` dims removed and the masked dims set to 1 (a shape that
/// broadcasts to `out`).
pub fn derive(out: &[usize], drop: usize, mask: u8) -> Vec<usize> {
    let drop = drop.min(out.len());
    (drop..out.len())
        .map(|d| if mask >> d & 1 == 1 { 1 } else { out[d] })
        .collect()
}

/// The relative tolerance of one rounding to `dt` plus a few of its compute type's.
pub fn tol(dt: DType) -> f64 {
    match dt {
        F64 => 1e-10,
        F32 => 3e-5,
        F16 => 4e-3,
        BF16 => 3e-2,
        _ => 0.0,
    }
}

/// PyTorch's promotion (the oracle for `DType::promote`).
pub fn promote(a: DType, b: DType) -> DType {
    let order = [DType::Bool, DType::U8, I32, I64, F16, F32, F64];
    let pos = |d: DType| {
        if d == BF16 {
            4
        } else {
            order.iter().position(|&x| x == d).unwrap()
        }
    };
    if a == b {
        a
    } else if matches!((a, b), (F16, BF16) | (BF16, F16)) {
        F32
    } else if pos(a) >= pos(b) {
        a
    } else {
        b
    }
}

/// PyTorch's `result_type` of two tensors: a 0-d operand (`a0`, `b0`) beside a dimensioned one
/// raises the result only to a higher category (bool < integer < float).
pub fn result_type(a: DType, a0: bool, b: DType, b0: bool) -> DType {
    if a0 == b0 {
        return promote(a, b);
    }
    let (dim, zero) = if a0 { (b, a) } else { (a, b) };
    let float = |d: DType| matches!(d, F16 | BF16 | F32 | F64);
    if float(dim) {
        dim
    } else if dim == DType::Bool || float(zero) {
        promote(dim, zero)
    } else {
        dim
    }
}

pub fn to_float(d: DType) -> DType {
    if d.is_float() { d } else { F32 }
}

#[track_caller]
pub fn check_amp(what: &str, got: &Tensor, want: &Arr, dt: DType, tol: f64, amp: &[f64]) {
    assert_eq!(got.dims(), &want.shape[..], "{what}: shape");
    assert_eq!(got.dtype(), dt, "{what}: dtype");
    let g = got.to_f64_vec().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(g.len(), want.data.len(), "{what}: element count");
    for (i, (&x, &y)) in g.iter().zip(&want.data).enumerate() {
        let t = tol * (1.0 + y.abs()) * amp.get(i).copied().unwrap_or(1.0);
        let ok = (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= t;
        assert!(
            ok,
            "{what} ({dt}): element {i}: got {x}, want {y} (tol {t})\n got {g:?}\nwant {:?}",
            want.data
        );
    }
}

#[track_caller]
pub fn check(what: &str, got: &Tensor, want: &Arr, dt: DType) {
    check_amp(what, got, want, dt, tol(dt), &[]);
}

// ---- strategies -----------------------------------------------------------------------------

/// A dim: 0 with weight 1 in 4.
pub fn dim() -> impl Strategy<Value = usize> {
    prop_oneof![1 => Just(0usize), 3 => 1usize..=4]
}

pub fn shape(ranks: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(dim(), ranks)
}

pub fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0usize..4, 0usize..4).prop_map(|(a, b)| Step::T(a, b)),
        (0usize..4, 0usize..3, 0usize..3).prop_map(|(d, p, q)| Step::N(d, p, q)),
        any::<u8>().prop_map(Step::B),
    ]
}

pub fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(step(), 0..=3)
}

/// A derived operand: leading dims dropped, masked dims set to 1, and the view steps.
pub fn operand() -> impl Strategy<Value = (usize, u8, Vec<Step>)> {
    (0usize..=3, any::<u8>(), steps())
}

pub fn dtype() -> impl Strategy<Value = DType> {
    prop_oneof![3 => Just(F32), 3 => Just(F64), 1 => Just(F16), 1 => Just(BF16), 1 => Just(I64), 1 => Just(I32)]
}

pub fn float_dtype() -> impl Strategy<Value = DType> {
    prop_oneof![3 => Just(F32), 3 => Just(F64), 1 => Just(F16), 1 => Just(BF16)]
}

/// 64 cases a property (see [`cases`]).
pub fn cfg() -> ProptestConfig {
    cases(64)
}

/// `n` cases a property, with the seeds of past failures kept beside the property's source file:
/// `tests/tensor_ops/reduce.rs` keeps them in `tests/tensor_ops/reduce.proptest-regressions`.
/// Proptest's default would put them in `tests/proptest-regressions/reduce.txt`, since the
/// folder of each suite holds a `main.rs`: one file for the modules of that name in every suite.
pub fn cases(n: u32) -> ProptestConfig {
    ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..ProptestConfig::with_cases(n)
    }
}

// ---- reading results ------------------------------------------------------------------------

/// The values of an `f32` tensor.
pub fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}
