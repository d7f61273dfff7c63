//! Every tensor op against a naive reference written with plain loops over `f64`
//! (failure modes F1, F3, F4, F13, book: reliability).
//!
//! Inputs come from proptest: ranks 0..=3, dims 0..=4 with 0 drawn often in every position,
//! non-contiguous views (transposed, narrowed and broadcast views of larger tensors), operands
//! that broadcast against each other, and dtypes (`f32`, `f64`, and `f16`/`bf16`/`i64`/`i32`
//! where the op takes them). Input values are rounded to the tensor's dtype before the reference
//! sees them, so the comparison tolerance only covers the op's own rounding.

use eddy::ops::{Elem, dispatch};
use eddy::tensor::{DType, Error, Tensor};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reference::{Arr, broadcast_shape, numel};

type R<T> = eddy::tensor::Result<T>;

use DType::{BF16, F16, F32, F64, I32, I64};

// ---- the reference --------------------------------------------------------------------------

/// Plain-loop `f64` arrays: a row-major `Vec<f64>` plus a shape.
mod reference {
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
}

// ---- building inputs --------------------------------------------------------------------------

/// One way to reach the target layout from a larger or smaller base (read backwards from the
/// target shape): a transpose of dims `(i, j)`, a narrow of dim `d` with `pre`/`post` elements
/// cut off, or a broadcast from a shape with the masked dims set to 1 (and maybe leading dims
/// dropped).
#[derive(Clone, Debug)]
enum Step {
    T(usize, usize),
    N(usize, usize, usize),
    B(u8),
}

/// The dtype's rounding, as the kernels do it (`Elem::from_f64`).
fn round(dt: DType, v: f64) -> f64 {
    dispatch!(dt, T => T::from_f64(v).to_f64())
}

/// A contiguous tensor of `dt` holding `a`'s values.
fn tensor(a: &Arr, dt: DType) -> Tensor {
    dispatch!(dt, T => Tensor::from_vec(a.data.iter().map(|&v| T::from_f64(v)).collect::<Vec<T>>(), a.shape.clone()).unwrap())
}

/// A tensor of logical shape `shape` reached from a fresh base through `steps` (so usually a
/// non-contiguous view), and the reference values it holds.
fn build(
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
enum Dom {
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

fn sample(rng: &mut StdRng, dom: Dom, dt: DType) -> f64 {
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
fn input(shape: &[usize], steps: &[Step], dt: DType, dom: Dom, rng: &mut StdRng) -> (Tensor, Arr) {
    build(shape, steps, dt, &mut || sample(rng, dom, dt))
}

/// `out` with the leading `drop` dims removed and the masked dims set to 1 (a shape that
/// broadcasts to `out`).
fn derive(out: &[usize], drop: usize, mask: u8) -> Vec<usize> {
    let drop = drop.min(out.len());
    (drop..out.len())
        .map(|d| if mask >> d & 1 == 1 { 1 } else { out[d] })
        .collect()
}

/// The relative tolerance of one rounding to `dt` plus a few of its compute type's.
fn tol(dt: DType) -> f64 {
    match dt {
        F64 => 1e-10,
        F32 => 3e-5,
        F16 => 4e-3,
        BF16 => 3e-2,
        _ => 0.0,
    }
}

/// PyTorch's promotion (the oracle for `DType::promote`).
fn promote(a: DType, b: DType) -> DType {
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

fn to_float(d: DType) -> DType {
    if d.is_float() { d } else { F32 }
}

#[track_caller]
fn check_amp(what: &str, got: &Tensor, want: &Arr, dt: DType, tol: f64, amp: &[f64]) {
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
fn check(what: &str, got: &Tensor, want: &Arr, dt: DType) {
    check_amp(what, got, want, dt, tol(dt), &[]);
}

// ---- strategies -----------------------------------------------------------------------------

/// A dim: 0 with weight 1 in 4.
fn dim() -> impl Strategy<Value = usize> {
    prop_oneof![1 => Just(0usize), 3 => 1usize..=4]
}

fn shape(ranks: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(dim(), ranks)
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0usize..4, 0usize..4).prop_map(|(a, b)| Step::T(a, b)),
        (0usize..4, 0usize..3, 0usize..3).prop_map(|(d, p, q)| Step::N(d, p, q)),
        any::<u8>().prop_map(Step::B),
    ]
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(step(), 0..=3)
}

/// A derived operand: leading dims dropped, masked dims set to 1, and the view steps.
fn operand() -> impl Strategy<Value = (usize, u8, Vec<Step>)> {
    (0usize..=3, any::<u8>(), steps())
}

fn dtype() -> impl Strategy<Value = DType> {
    prop_oneof![3 => Just(F32), 3 => Just(F64), 1 => Just(F16), 1 => Just(BF16), 1 => Just(I64), 1 => Just(I32)]
}

fn float_dtype() -> impl Strategy<Value = DType> {
    prop_oneof![3 => Just(F32), 3 => Just(F64), 1 => Just(F16), 1 => Just(BF16)]
}

fn cfg() -> ProptestConfig {
    ProptestConfig::with_cases(64)
}

// ---- op tables --------------------------------------------------------------------------------

type UnaryT = fn(&Tensor) -> R<Tensor>;
type UnaryF = fn(f64) -> f64;

/// (name, input domain, whether integer inputs stay integer, op, reference)
fn unary_table() -> Vec<(&'static str, Dom, bool, UnaryT, UnaryF)> {
    vec![
        ("neg", Dom::Any, true, Tensor::neg, |x| -x),
        ("abs", Dom::Any, true, Tensor::abs, f64::abs),
        ("exp", Dom::Any, false, Tensor::exp, f64::exp),
        ("log", Dom::Pos, false, Tensor::log, f64::ln),
        ("sqrt", Dom::Pos, false, Tensor::sqrt, f64::sqrt),
        ("rsqrt", Dom::Pos, false, Tensor::rsqrt, |x| 1.0 / x.sqrt()),
        ("sin", Dom::Any, false, Tensor::sin, f64::sin),
        ("cos", Dom::Any, false, Tensor::cos, f64::cos),
        ("tanh", Dom::Any, false, Tensor::tanh, f64::tanh),
        ("sigmoid", Dom::Any, false, Tensor::sigmoid, |x| {
            1.0 / (1.0 + (-x).exp())
        }),
        ("relu", Dom::Any, true, Tensor::relu, |x| x.max(0.0)),
        ("gelu", Dom::Any, false, Tensor::gelu, |x| {
            0.5 * x * (1.0 + reference::erf(x / std::f64::consts::SQRT_2))
        }),
        ("silu", Dom::Any, false, Tensor::silu, |x| {
            x / (1.0 + (-x).exp())
        }),
        ("recip", Dom::NonZero, false, Tensor::recip, |x| 1.0 / x),
        ("square", Dom::Any, true, Tensor::square, |x| x * x),
        ("sign", Dom::Any, true, Tensor::sign, |x| {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                0.0
            }
        }),
        ("floor", Dom::Any, true, Tensor::floor, f64::floor),
        ("ceil", Dom::Any, true, Tensor::ceil, f64::ceil),
        ("round", Dom::Any, true, Tensor::round, f64::round_ties_even),
        (
            "round_halves",
            Dom::Halves,
            true,
            Tensor::round,
            f64::round_ties_even,
        ),
        ("trunc", Dom::Any, true, Tensor::trunc, f64::trunc),
        ("log1p", Dom::Pos, false, Tensor::log1p, f64::ln_1p),
        ("expm1", Dom::Any, false, Tensor::expm1, f64::exp_m1),
        ("log2", Dom::Pos, false, Tensor::log2, f64::log2),
        ("log10", Dom::Pos, false, Tensor::log10, f64::log10),
        ("tan", Dom::Unit, false, Tensor::tan, f64::tan),
        ("atan", Dom::Any, false, Tensor::atan, f64::atan),
        ("erf", Dom::Any, false, Tensor::erf, reference::erf),
        (
            "leaky_relu",
            Dom::Any,
            false,
            |x| x.leaky_relu(0.01),
            |x| {
                if x > 0.0 { x } else { 0.01 * x }
            },
        ),
        (
            "elu",
            Dom::Any,
            false,
            |x| x.elu(0.5),
            |x| {
                if x > 0.0 { x } else { 0.5 * x.exp_m1() }
            },
        ),
        (
            "softplus",
            Dom::Any,
            false,
            |x| x.softplus(1.5, 2.0),
            |x| {
                if 1.5 * x > 2.0 {
                    x
                } else {
                    (1.5 * x).exp().ln_1p() / 1.5
                }
            },
        ),
    ]
}

type BinaryT = fn(&Tensor, &Tensor) -> R<Tensor>;
type BinaryF = fn(f64, f64) -> f64;

/// (name, lhs domain, rhs domain, op, reference)
fn binary_table() -> Vec<(&'static str, Dom, Dom, BinaryT, BinaryF)> {
    vec![
        ("add", Dom::Any, Dom::Any, Tensor::add, |x, y| x + y),
        ("sub", Dom::Any, Dom::Any, Tensor::sub, |x, y| x - y),
        ("mul", Dom::Any, Dom::Any, Tensor::mul, |x, y| x * y),
        ("div", Dom::Any, Dom::NonZero, Tensor::div, |x, y| x / y),
        ("pow", Dom::Pos, Dom::Pos, Tensor::pow, f64::powf),
        ("maximum", Dom::Grid, Dom::Any, Tensor::maximum, f64::max),
        ("minimum", Dom::Grid, Dom::Any, Tensor::minimum, f64::min),
    ]
}

type CmpF = fn(f64, f64) -> bool;

fn cmp_table() -> Vec<(&'static str, BinaryT, CmpF)> {
    vec![
        ("eq", Tensor::eq, |x, y| x == y),
        ("ne", Tensor::ne, |x, y| x != y),
        ("lt", Tensor::lt, |x, y| x < y),
        ("le", Tensor::le, |x, y| x <= y),
        ("gt", Tensor::gt, |x, y| x > y),
        ("ge", Tensor::ge, |x, y| x >= y),
        ("logical_and", Tensor::logical_and, |x, y| {
            x != 0.0 && y != 0.0
        }),
        ("logical_or", Tensor::logical_or, |x, y| {
            x != 0.0 || y != 0.0
        }),
        ("logical_xor", Tensor::logical_xor, |x, y| {
            (x != 0.0) != (y != 0.0)
        }),
    ]
}

// ---- properties -------------------------------------------------------------------------------

proptest! {
    #![proptest_config(cfg())]

    /// Every unary op, any rank and layout; integer inputs stay integer for the ops that keep
    /// them and compute in `f32` otherwise.
    #[test]
    fn unary_ops_match_reference(shape in shape(0..=3), steps in steps(), dt in dtype(), seed in any::<u64>()) {
        let mut rng = StdRng::seed_from_u64(seed);
        for (name, dom, keeps_int, op, f) in unary_table() {
            let (t, a) = input(&shape, &steps, dt, dom, &mut rng);
            let out_dt = if dt.is_float() || keeps_int { dt } else { F32 };
            check(name, &op(&t).unwrap(), &a.map(f), out_dt);
        }
    }

    /// `x ⊕ c` for the scalar ops and `clamp`; integer tensors stay integer for integral `c`.
    #[test]
    fn scalar_ops_match_reference(shape in shape(0..=3), steps in steps(), dt in dtype(), ci in 0usize..6, seed in any::<u64>()) {
        let c: f64 = [2.0, -1.0, 0.5, -1.5, 3.0, 0.0][ci];
        let mut rng = StdRng::seed_from_u64(seed);
        let int_c = c.fract() == 0.0;
        type S = (&'static str, Dom, bool, Box<dyn Fn(&Tensor) -> R<Tensor>>, Box<dyn Fn(f64) -> f64>);
        let table: Vec<S> = vec![
            ("add_scalar", Dom::Any, int_c, Box::new(move |t| t.add_scalar(c)), Box::new(move |x| x + c)),
            ("sub_scalar", Dom::Any, int_c, Box::new(move |t| t.sub_scalar(c)), Box::new(move |x| x - c)),
            ("rsub_scalar", Dom::Any, int_c, Box::new(move |t| t.rsub_scalar(c)), Box::new(move |x| c - x)),
            ("mul_scalar", Dom::Any, int_c, Box::new(move |t| t.mul_scalar(c)), Box::new(move |x| x * c)),
            ("div_scalar", Dom::Any, false, Box::new(move |t| t.div_scalar(c + 4.0)), Box::new(move |x| x / (c + 4.0))),
            ("pow_scalar", Dom::Pos, int_c, Box::new(move |t| t.pow_scalar(c)), Box::new(move |x| x.powf(c))),
            ("clamp_min", Dom::Any, int_c, Box::new(move |t| t.clamp(Some(c), None)), Box::new(move |x| x.max(c))),
            ("clamp_max", Dom::Any, int_c, Box::new(move |t| t.clamp(None, Some(c))), Box::new(move |x| x.min(c))),
            ("clamp", Dom::Any, int_c, Box::new(move |t| t.clamp(Some(c - 1.0), Some(c + 1.0))), Box::new(move |x| x.max(c - 1.0).min(c + 1.0))),
        ];
        for (name, dom, keeps_int, op, f) in table {
            let (t, a) = input(&shape, &steps, dt, dom, &mut rng);
            if name == "pow_scalar" && !dt.is_float() && int_c && c < 0.0 {
                // Integers to a negative whole power are refused, as in PyTorch.
                let e = op(&t).unwrap_err();
                prop_assert!(matches!(e, Error::InvalidArgument { op: "pow_scalar", .. }), "{e}");
                continue;
            }
            let out_dt = if dt.is_float() || keeps_int { dt } else { F32 };
            check(name, &op(&t).unwrap(), &a.map(f), out_dt);
        }
    }

    /// Binary ops with broadcasting between non-contiguous operands, with dtype promotion.
    #[test]
    fn binary_ops_match_reference(
        out in shape(0..=3), sa in operand(), sb in operand(),
        dta in dtype(), dtb in prop::option::weighted(0.3, dtype()), seed in any::<u64>(),
    ) {
        let dtb = dtb.unwrap_or(dta);
        let mut rng = StdRng::seed_from_u64(seed);
        let (sha, shb) = (derive(&out, sa.0, sa.1), derive(&out, sb.0, sb.1));
        for (name, da, db, op, f) in binary_table() {
            let (ta, aa) = input(&sha, &sa.2, dta, da, &mut rng);
            let (tb, ab) = input(&shb, &sb.2, dtb, db, &mut rng);
            let mut odt = promote(dta, dtb);
            if name == "div" {
                odt = to_float(odt);
            }
            let want = aa.zip(&ab, f).unwrap();
            check(&format!("{name} {sha:?} {dta} {shb:?} {dtb}"), &op(&ta, &tb).unwrap(), &want, odt);
        }
    }

    /// Shape errors: `add` accepts exactly the pairs a plain broadcast oracle accepts, with its
    /// output shape, and names both operands otherwise (F1, F3: `[0]` with `[1]` gives `[0]`).
    #[test]
    fn broadcasting_accepts_iff_the_oracle_does(
        a in prop::collection::vec(prop_oneof![Just(0usize), Just(1), 2usize..=3], 0..=3),
        b in prop::collection::vec(prop_oneof![Just(0usize), Just(1), 2usize..=3], 0..=3),
    ) {
        let ta = Tensor::zeros(a.clone(), F32).unwrap();
        let tb = Tensor::ones(b.clone(), F32).unwrap();
        match (broadcast_shape(&a, &b), ta.add(&tb)) {
            (Some(s), Ok(t)) => {
                prop_assert_eq!(t.dims(), &s[..]);
                prop_assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0; numel(&s)]);
            }
            (None, Err(Error::ShapeMismatch { op, lhs, rhs })) => {
                prop_assert_eq!(op, "add");
                prop_assert_eq!((lhs, rhs), (a.clone(), b.clone()));
            }
            (want, got) => prop_assert!(false, "{a:?} + {b:?}: oracle {want:?}, engine {got:?}"),
        }
        // The in-place form accepts only a source that broadcasts to the destination itself.
        let r = ta.add_(&tb);
        let ok = broadcast_shape(&a, &b).is_some_and(|s| s == a);
        prop_assert_eq!(r.is_ok(), ok, "{:?}.add_({:?}): {:?}", a, b, r.err());
    }

    /// Comparisons (tensor and scalar forms) and logical ops give `Bool`, with ties and zeros
    /// from small integer values.
    #[test]
    fn comparisons_match_reference(
        out in shape(0..=3), sa in operand(), sb in operand(),
        dta in dtype(), dtb in prop::option::weighted(0.3, dtype()), seed in any::<u64>(),
    ) {
        let dtb = dtb.unwrap_or(dta);
        let mut rng = StdRng::seed_from_u64(seed);
        let (sha, shb) = (derive(&out, sa.0, sa.1), derive(&out, sb.0, sb.1));
        let (ta, aa) = input(&sha, &sa.2, dta, Dom::Grid, &mut rng);
        let (tb, ab) = input(&shb, &sb.2, dtb, Dom::Grid, &mut rng);
        for (name, op, f) in cmp_table() {
            let want = aa.zip(&ab, |x, y| f(x, y) as u8 as f64).unwrap();
            check(name, &op(&ta, &tb).unwrap(), &want, DType::Bool);
        }
        check("logical_not", &ta.logical_not().unwrap(), &aa.map(|x| (x == 0.0) as u8 as f64), DType::Bool);
        for c in [0.0, 1.0, -0.5] {
            let s = |f: fn(f64, f64) -> bool| aa.map(move |x| f(x, c) as u8 as f64);
            check("eq_scalar", &ta.eq_scalar(c).unwrap(), &s(|x, y| x == y), DType::Bool);
            check("ne_scalar", &ta.ne_scalar(c).unwrap(), &s(|x, y| x != y), DType::Bool);
            check("lt_scalar", &ta.lt_scalar(c).unwrap(), &s(|x, y| x < y), DType::Bool);
            check("le_scalar", &ta.le_scalar(c).unwrap(), &s(|x, y| x <= y), DType::Bool);
            check("gt_scalar", &ta.gt_scalar(c).unwrap(), &s(|x, y| x > y), DType::Bool);
            check("ge_scalar", &ta.ge_scalar(c).unwrap(), &s(|x, y| x >= y), DType::Bool);
        }
    }

    /// `where_` with three operands broadcasting to one shape.
    #[test]
    fn where_matches_reference(
        out in shape(0..=3), sc in operand(), sa in operand(), sb in operand(),
        dta in dtype(), dtb in prop::option::weighted(0.3, dtype()), seed in any::<u64>(),
    ) {
        let dtb = dtb.unwrap_or(dta);
        let mut rng = StdRng::seed_from_u64(seed);
        let shc = derive(&out, sc.0, sc.1);
        let (tc, ac) = build(&shc, &sc.2, DType::Bool, &mut || rng.random_bool(0.5) as u8 as f64);
        let (ta, aa) = input(&derive(&out, sa.0, sa.1), &sa.2, dta, Dom::Any, &mut rng);
        let (tb, ab) = input(&derive(&out, sb.0, sb.1), &sb.2, dtb, Dom::Any, &mut rng);
        let s = broadcast_shape(&broadcast_shape(&ac.shape, &aa.shape).unwrap(), &ab.shape).unwrap();
        let (c, x, y) = (ac.broadcast_to(&s), aa.broadcast_to(&s), ab.broadcast_to(&s));
        let want = Arr::new(&s, (0..numel(&s)).map(|i| if c.data[i] != 0.0 { x.data[i] } else { y.data[i] }).collect());
        check("where", &tc.where_(&ta, &tb).unwrap(), &want, promote(dta, dtb));
        // A condition that is not Bool is refused.
        assert!(matches!(ta.where_(&ta, &tb), Err(Error::UnsupportedDType { op: "where", .. })));
    }

    /// Reductions over random dim sets (negative dims too), with and without `keepdim`: empty
    /// reductions give the identity; `max`/`min`/`argmax`/`argmin` over an empty dim are
    /// `EmptyTensor`.
    #[test]
    fn reductions_match_reference(
        shape in shape(0..=3), steps in steps(), dt in dtype(), mask in any::<u8>(),
        keepdim in any::<bool>(), grid in any::<bool>(), seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let rank = shape.len();
        let dims: Vec<usize> = (0..rank).filter(|d| mask >> d & 1 == 1).collect();
        let neg = mask & 0x80 != 0;
        let idims: Vec<isize> = dims.iter().map(|&d| if neg { d as isize - rank as isize } else { d as isize }).collect();
        let dom = if grid { Dom::Grid } else { Dom::Any };
        let (t, a) = input(&shape, &steps, dt, dom, &mut rng);
        let sum_dt = if dt.is_float() { dt } else { I64 };
        let sum = |g: &[f64]| g.iter().sum::<f64>();
        let mean = |g: &[f64]| g.iter().sum::<f64>() / g.len() as f64;
        check("sum", &t.sum(&idims, keepdim).unwrap(), &a.reduce(&dims, keepdim, sum), sum_dt);
        check("sum_all", &t.sum_all().unwrap(), &a.reduce(&(0..rank).collect::<Vec<_>>(), false, sum), sum_dt);
        if dt.is_float() {
            check("mean", &t.mean(&idims, keepdim).unwrap(), &a.reduce(&dims, keepdim, mean), dt);
            check("mean_all", &t.mean_all().unwrap(), &a.reduce(&(0..rank).collect::<Vec<_>>(), false, mean), dt);
            // Bessel's correction 0, 1 or 2; at N <= correction the divisor is 0 (inf, or NaN
            // for a zero sum), as in PyTorch.
            let corr = (mask as usize >> 5 & 3) % 3;
            let var = |g: &[f64]| {
                let m = g.iter().sum::<f64>() / g.len() as f64;
                g.iter().map(|v| (v - m).powi(2)).sum::<f64>() / g.len().saturating_sub(corr) as f64
            };
            check("var", &t.var(&idims, corr, keepdim).unwrap(), &a.reduce(&dims, keepdim, var), dt);
            check("std", &t.std(&idims, corr, keepdim).unwrap(), &a.reduce(&dims, keepdim, |g| var(g).sqrt()), dt);
        } else {
            let r = t.mean(&idims, keepdim);
            assert!(matches!(r, Err(Error::UnsupportedDType { op: "mean", .. })), "{:?}", r);
            let r = t.std(&idims, 1, keepdim);
            assert!(matches!(r, Err(Error::UnsupportedDType { op: "std", .. })), "{:?}", r);
        }
        let (tp, ap) = input(&shape, &steps, dt, Dom::Unit, &mut rng);
        check("prod", &tp.prod(&idims, keepdim).unwrap(), &ap.reduce(&dims, keepdim, |g| g.iter().product()), sum_dt);

        let all: Vec<usize> = (0..rank).collect();
        let fmax = |g: &[f64]| g.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let fmin = |g: &[f64]| g.iter().cloned().fold(f64::INFINITY, f64::min);
        for (name, got, f) in [
            ("max_all", t.max_all(), &fmax as &dyn Fn(&[f64]) -> f64),
            ("min_all", t.min_all(), &fmin),
        ] {
            if a.data.is_empty() {
                assert!(matches!(got, Err(Error::EmptyTensor { .. })), "{}: {:?}", name, got);
            } else {
                check(name, &got.unwrap(), &a.reduce(&all, false, f), dt);
            }
        }
        if rank == 0 {
            return Ok(());
        }
        let d = (mask as usize >> 3) % rank;
        let id = if neg { d as isize - rank as isize } else { d as isize };
        let argmax = |g: &[f64]| (0..g.len()).fold(0, |b, k| if g[k] > g[b] { k } else { b }) as f64;
        let argmin = |g: &[f64]| (0..g.len()).fold(0, |b, k| if g[k] < g[b] { k } else { b }) as f64;
        type Red = (&'static str, R<Tensor>, Box<dyn Fn(&[f64]) -> f64>, DType);
        let cases: Vec<Red> = vec![
            ("max", t.max(id, keepdim), Box::new(fmax), dt),
            ("min", t.min(id, keepdim), Box::new(fmin), dt),
            ("argmax", t.argmax(id, keepdim), Box::new(argmax), I64),
            ("argmin", t.argmin(id, keepdim), Box::new(argmin), I64),
        ];
        for (name, got, f, odt) in cases {
            if shape[d] == 0 {
                prop_assert!(
                    matches!(&got, Err(Error::EmptyTensor { op }) if *op == name),
                    "{} over the empty dim {} of {:?}: {:?}", name, d, shape, got
                );
            } else {
                check(name, &got.unwrap(), &a.reduce(&[d], keepdim, f), odt);
            }
        }
    }

    /// `matmul`: 1-D promotion, batched with broadcast batch dims, non-contiguous operands
    /// (including stride-0 broadcast matrices), every dtype it takes.
    #[test]
    fn matmul_matches_reference(
        batch in shape(0..=2), da in (0usize..=2, any::<u8>()), db in (0usize..=2, any::<u8>()),
        mkn in (dim(), dim(), dim()), ones in (prop::bool::weighted(0.2), prop::bool::weighted(0.2)),
        sa in steps(), sb in steps(), dt in dtype(), seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (m, k, n) = mkn;
        let sha = if ones.0 { vec![k] } else { let mut s = derive(&batch, da.0, da.1); s.extend([m, k]); s };
        let shb = if ones.1 { vec![k] } else { let mut s = derive(&batch, db.0, db.1); s.extend([k, n]); s };
        let (ta, aa) = input(&sha, &sa, dt, Dom::Any, &mut rng);
        let (tb, ab) = input(&shb, &sb, dt, Dom::Any, &mut rng);
        let want = aa.matmul(&ab).unwrap();
        let got = ta.matmul(&tb);
        prop_assert!(got.is_ok(), "{:?} @ {:?}: {:?}", sha, shb, got.as_ref().err());
        check(&format!("matmul {sha:?} @ {shb:?}"), &got.unwrap(), &want, dt);
    }

    /// `linear` (for f32 and f64 the product and the bias in one instruction) against
    /// `x @ wᵀ + b`, for inputs of rank 1 to 3, views, a bias of `n` elements, of one, or none.
    #[test]
    fn linear_matches_reference(
        lead in shape(0..=2), kn in (dim(), dim()), sx in steps(), sw in steps(),
        bias in 0usize..3, dt in dtype(), seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (k, n) = kn;
        let mut shx = lead.clone();
        shx.push(k);
        let (tx, ax) = input(&shx, &sx, dt, Dom::Any, &mut rng);
        let (tw, aw) = input(&[n, k], &sw, dt, Dom::Any, &mut rng);
        let product = ax.matmul(&aw.transpose(0, 1)).unwrap();
        let (got, want) = match bias {
            0 => (tx.linear(&tw, None), product),
            b => {
                let shb = if b == 1 { vec![n] } else { vec![1] };
                let (tb, ab) = input(&shb, &[], dt, Dom::Any, &mut rng);
                (tx.linear(&tw, Some(&tb)), product.zip(&ab, |p, q| p + q).unwrap())
            }
        };
        let what = format!("linear {shx:?}, weight [{n}, {k}], bias kind {bias}");
        prop_assert!(got.is_ok(), "{what}: {:?}", got.as_ref().err());
        check(&what, &got.unwrap(), &want, dt);
    }

    /// `softmax` and `log_softmax` over any dim.
    #[test]
    fn softmax_matches_reference(shape in shape(0..=3), steps in steps(), dt in float_dtype(), d in 0usize..4, neg in any::<bool>(), seed in any::<u64>()) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (t, a) = input(&shape, &steps, dt, Dom::Any, &mut rng);
        let rank = shape.len();
        let (d, id) = if rank == 0 { (0, 0) } else { let d = d % rank; (d, if neg { d as isize - rank as isize } else { d as isize }) };
        let (ws, wl) = if rank == 0 {
            (a.map(|_| 1.0), a.map(|_| 0.0))
        } else {
            (a.softmax(d, false), a.softmax(d, true))
        };
        check("softmax", &t.softmax(id).unwrap(), &ws, dt);
        check("log_softmax", &t.log_softmax(id).unwrap(), &wl, dt);
    }

    /// `cross_entropy`, `nll_loss` and `mse_loss` (the mean over an empty batch is NaN).
    #[test]
    fn losses_match_reference(
        nc in (dim(), 1usize..=4), steps in steps(), dt in float_dtype(), i32_idx in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (n, c) = nc;
        let (x, ax) = input(&[n, c], &steps, dt, Dom::Any, &mut rng);
        let tg: Vec<usize> = (0..n).map(|_| rng.random_range(0..c)).collect();
        let tt = if i32_idx {
            Tensor::from_vec(tg.iter().map(|&v| v as i32).collect::<Vec<_>>(), [n]).unwrap()
        } else {
            Tensor::from_vec(tg.iter().map(|&v| v as i64).collect::<Vec<_>>(), [n]).unwrap()
        };
        let ls = if n == 0 { ax.clone() } else { ax.softmax(1, true) };
        let ce = -(0..n).map(|i| ls.at(&[i, tg[i]])).sum::<f64>() / n as f64;
        let nll = -(0..n).map(|i| ax.at(&[i, tg[i]])).sum::<f64>() / n as f64;
        check("cross_entropy", &x.cross_entropy(&tt).unwrap(), &Arr::new(&[], vec![ce]), dt);
        check("nll_loss", &x.nll_loss(&tt).unwrap(), &Arr::new(&[], vec![nll]), dt);
        let (y, ay) = input(&[n, c], &[], dt, Dom::Any, &mut rng);
        let mse = ax.data.iter().zip(&ay.data).map(|(a, b)| (a - b).powi(2)).sum::<f64>() / (n * c) as f64;
        check("mse_loss", &x.mse_loss(&y).unwrap(), &Arr::new(&[], vec![mse]), dt);
    }

    /// `layer_norm` over the last 1..=rank dims, with and without the affine terms.
    #[test]
    fn layer_norm_matches_reference(
        shape in shape(1..=3), steps in steps(), k in 1usize..=3, wb in (any::<bool>(), any::<bool>()),
        dt in prop_oneof![Just(F32), Just(F64)], seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let k = 1 + (k - 1) % shape.len();
        let (x, ax) = input(&shape, &steps, dt, Dom::Any, &mut rng);
        let tail = shape[shape.len() - k..].to_vec();
        let w = wb.0.then(|| input(&tail, &[], dt, Dom::Any, &mut rng));
        let b = wb.1.then(|| input(&tail, &[], dt, Dom::Any, &mut rng));
        let (want, amp) = ax.layer_norm(k, w.as_ref().map(|p| &p.1), b.as_ref().map(|p| &p.1), 1e-5);
        let got = x.layer_norm(k, w.as_ref().map(|p| &p.0), b.as_ref().map(|p| &p.0), 1e-5).unwrap();
        // Rounding of the centred input is amplified by 1/σ; scale the tolerance by it.
        let amp: Vec<f64> = amp.iter().map(|a| 1.0 + 3.0 * a).collect();
        check_amp("layer_norm", &got, &want, dt, tol(dt), &amp);
    }

    /// `index_select`, `embedding` and `gather` (negative indices are refused elsewhere).
    #[test]
    fn indexing_matches_reference(
        shape in shape(1..=3), steps in steps(), dt in dtype(), d in 0usize..3,
        i32_idx in any::<bool>(), seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let rank = shape.len();
        let d = d % rank;
        let (t, a) = input(&shape, &steps, dt, Dom::Any, &mut rng);
        let size = shape[d];
        let nidx = if size == 0 { 0 } else { rng.random_range(0..=4) };
        let raw: Vec<i64> = (0..nidx).map(|_| rng.random_range(0..size as i64)).collect();
        let pos: Vec<usize> = raw.iter().map(|&i| i as usize).collect();
        let idx_t = |v: &[i64], s: Vec<usize>| if i32_idx {
            Tensor::from_vec(v.iter().map(|&x| x as i32).collect::<Vec<_>>(), s).unwrap()
        } else {
            Tensor::from_vec(v.to_vec(), s).unwrap()
        };
        let id = if rng.random() { d as isize } else { d as isize - rank as isize };
        check("index_select", &t.index_select(id, &idx_t(&raw, vec![nidx])).unwrap(), &a.index_select(d, &pos), dt);

        // gather: the index may be smaller than the source in every dim but `d`.
        let ishape: Vec<usize> = (0..rank).map(|i| if i == d {
            if size == 0 { 0 } else { rng.random_range(0..=4) }
        } else {
            rng.random_range(0..=shape[i])
        }).collect();
        let gi: Vec<i64> = (0..numel(&ishape)).map(|_| rng.random_range(0..size.max(1) as i64)).collect();
        let gidx = Arr::new(&ishape, gi.iter().map(|&v| v as f64).collect());
        check("gather", &t.gather(id, &idx_t(&gi, ishape.clone())).unwrap(), &a.gather(d, &gidx), dt);

        // embedding: rows of a 2-D weight for ids of any shape.
        if rank == 2 && shape[0] > 0 {
            let ids_shape: Vec<usize> = (0..rng.random_range(0..=2)).map(|_| rng.random_range(0..=3)).collect();
            let ids: Vec<i64> = (0..numel(&ids_shape)).map(|_| rng.random_range(0..shape[0] as i64)).collect();
            let rows = a.index_select(0, &ids.iter().map(|&i| i as usize).collect::<Vec<_>>());
            let mut out_shape = ids_shape.clone();
            out_shape.push(shape[1]);
            check("embedding", &t.embedding(&idx_t(&ids, ids_shape)).unwrap(), &rows.reshape(&out_shape), dt);
        }
    }

    /// `cat` of 1..=3 non-contiguous parts along any dim, and `stack`.
    #[test]
    fn cat_and_stack_match_reference(
        shape in shape(1..=3), parts in prop::collection::vec((dim(), steps()), 1..=3),
        d in 0usize..4, dt in dtype(), seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let rank = shape.len();
        let d = d % rank;
        let built: Vec<(Tensor, Arr)> = parts.iter().map(|(n, st)| {
            let mut s = shape.clone();
            s[d] = *n;
            input(&s, st, dt, Dom::Any, &mut rng)
        }).collect();
        let ts: Vec<&Tensor> = built.iter().map(|p| &p.0).collect();
        let arrs: Vec<Arr> = built.iter().map(|p| p.1.clone()).collect();
        check("cat", &Tensor::cat(&ts, d as isize - rank as isize).unwrap(), &Arr::cat(&arrs, d), dt);

        let same: Vec<(Tensor, Arr)> = parts.iter().map(|(_, st)| input(&shape, st, dt, Dom::Any, &mut rng)).collect();
        let ts: Vec<&Tensor> = same.iter().map(|p| &p.0).collect();
        let sd = d % (rank + 1);
        let arrs: Vec<Arr> = same.iter().map(|p| {
            let mut s = shape.clone();
            s.insert(sd, 1);
            p.1.reshape(&s)
        }).collect();
        check("stack", &Tensor::stack(&ts, sd as isize).unwrap(), &Arr::cat(&arrs, sd), dt);
    }

    /// Chains of view ops on non-contiguous inputs: values, shapes, and which results share
    /// storage with their input.
    #[test]
    fn views_match_reference(
        shape in shape(0..=3), steps in steps(), ops in prop::collection::vec((0usize..14, any::<u64>()), 1..=4),
        dt in dtype(), seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (mut t, mut a) = input(&shape, &steps, dt, Dom::Any, &mut rng);
        for (op, p) in ops {
            let rank = a.rank();
            let pick = |k: u64, n: usize| (p >> (8 * k)) as usize % n.max(1);
            let (nt, na, shares): (Tensor, Arr, Option<bool>) = match op {
                0 => {
                    // reshape to a regrouping with the same element count
                    let n = numel(&a.shape);
                    let target: Vec<usize> = match pick(0, 4) {
                        0 => vec![n],
                        1 => a.shape.iter().rev().cloned().collect(),
                        2 => { let mut s = a.shape.clone(); s.insert(pick(1, rank + 1), 1); s }
                        _ if rank >= 2 => { let mut s = vec![a.shape[0] * a.shape[1]]; s.extend(&a.shape[2..]); s }
                        _ => vec![],
                    };
                    if numel(&target) != n {
                        assert!(matches!(t.reshape(target.clone()), Err(Error::ElementCountMismatch { .. })));
                        continue;
                    }
                    let contig = t.is_contiguous();
                    (t.reshape(target.clone()).unwrap(), a.reshape(&target), Some(contig))
                }
                1 if rank >= 1 => {
                    let (i, j) = (pick(0, rank), pick(1, rank));
                    (t.transpose(i as isize - rank as isize, j as isize).unwrap(), a.transpose(i, j), Some(true))
                }
                2 => {
                    let mut perm: Vec<usize> = (0..rank).collect();
                    for i in (1..rank).rev() { perm.swap(i, pick(i as u64, i + 1)); }
                    let ip: Vec<isize> = perm.iter().map(|&x| x as isize).collect();
                    (t.permute(&ip).unwrap(), a.permute(&perm), Some(true))
                }
                3 => {
                    if rank < 2 {
                        // A 0-d or 1-d tensor is its own transpose, as in PyTorch.
                        (t.t().unwrap(), a.clone(), Some(true))
                    } else {
                        (t.t().unwrap(), a.transpose(rank - 2, rank - 1), Some(true))
                    }
                }
                4 | 5 if rank >= 1 => {
                    let d = pick(0, rank);
                    let size = a.shape[d];
                    let start = pick(1, size + 1);
                    let len = pick(2, size - start + 1);
                    let v = if op == 4 { t.narrow(d as isize, start, len) } else { t.slice(d as isize, start..start + len) };
                    (v.unwrap(), a.narrow(d, start, len), Some(true))
                }
                6 if rank >= 1 && a.shape[pick(0, rank)] > 0 => {
                    let d = pick(0, rank);
                    let i = pick(1, a.shape[d]);
                    let mut s = a.shape.clone();
                    s.remove(d);
                    (t.select(d as isize, i).unwrap(), a.narrow(d, i, 1).reshape(&s), Some(true))
                }
                7 if rank >= 1 => {
                    let d = pick(0, rank);
                    let mut s = a.shape.clone();
                    if s[d] == 1 { s.remove(d); }
                    (t.squeeze(d as isize).unwrap(), a.reshape(&s), Some(true))
                }
                8 => {
                    let d = pick(0, rank + 1);
                    let mut s = a.shape.clone();
                    s.insert(d, 1);
                    let id = if pick(1, 2) == 0 { d as isize } else { d as isize - rank as isize - 1 };
                    (t.unsqueeze(id).unwrap(), a.reshape(&s), Some(true))
                }
                9 => {
                    // expand size-1 dims (to 0..=3) and maybe prepend one
                    let mut s: Vec<usize> = a.shape.iter().enumerate()
                        .map(|(i, &x)| if x == 1 { pick(i as u64, 4) } else { x }).collect();
                    if pick(5, 2) == 1 { s.insert(0, pick(6, 3)); }
                    let v = if pick(7, 2) == 0 { t.broadcast_to(s.clone()) } else { t.expand(s.clone()) };
                    (v.unwrap(), a.broadcast_to(&s), Some(true))
                }
                10 => {
                    let c = t.contiguous().unwrap();
                    prop_assert!(c.is_contiguous());
                    let was = t.is_contiguous();
                    (c, a.clone(), Some(was))
                }
                11 => {
                    let n = numel(&a.shape);
                    (t.flatten_all().unwrap(), a.reshape(&[n]), None)
                }
                12 => {
                    let n = numel(&a.shape);
                    if !t.is_contiguous() {
                        assert!(matches!(t.view([n]), Err(Error::InvalidArgument { op: "view", .. })));
                        continue;
                    }
                    (t.view([n]).unwrap(), a.reshape(&[n]), Some(true))
                }
                13 if rank == 2 => {
                    let rows = t.to_f64_vec().unwrap();
                    let v2 = dispatch!(dt, T => t.to_vec2::<T>().unwrap().into_iter().map(|r| r.into_iter().map(Elem::to_f64).collect::<Vec<_>>()).collect::<Vec<_>>());
                    prop_assert_eq!(v2.len(), a.shape[0]);
                    prop_assert_eq!(v2.concat(), rows);
                    continue;
                }
                _ => continue,
            };
            check(&format!("view op {op} -> {:?}", na.shape), &nt, &na, dt);
            if let Some(s) = shares {
                prop_assert_eq!(nt.shares_storage(&t), s, "view op {} storage sharing", op);
            }
            t = nt;
            a = na;
        }
    }

    /// In-place ops through views (transposed, narrowed; expanded views are refused) with
    /// broadcast sources: the base sees exactly the writes the view's elements map to.
    #[test]
    fn inplace_ops_through_views_match_reference(
        base_shape in shape(1..=3), vsteps in steps(), src in operand(), op in 0usize..10,
        dt in prop_oneof![Just(F32), Just(F64), Just(I64)], seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let base_a = Arr::new(&base_shape, (0..numel(&base_shape)).map(|_| round(dt, sample(&mut rng, Dom::Any, dt))).collect());
        let base = tensor(&base_a, dt);
        // Apply the view steps forwards, to the tensor and to a map of base positions.
        let mut v = base.clone();
        let mut ids = Arr::new(&base_shape, (0..numel(&base_shape)).map(|i| i as f64).collect());
        for st in &vsteps {
            let rank = ids.rank();
            match *st {
                Step::T(i, j) if rank >= 2 => {
                    let (i, j) = (i % rank, j % rank);
                    v = v.transpose(i as isize, j as isize).unwrap();
                    ids = ids.transpose(i, j);
                }
                Step::N(d, p, q) => {
                    let d = d % rank;
                    let size = ids.shape[d];
                    let start = p.min(size);
                    let len = (size - start).saturating_sub(q);
                    v = v.narrow(d as isize, start, len).unwrap();
                    ids = ids.narrow(d, start, len);
                }
                Step::B(mask) => {
                    let mut s: Vec<usize> = ids.shape.iter().enumerate()
                        .map(|(i, &x)| if x == 1 && mask >> i & 1 == 1 { 2 } else { x }).collect();
                    if mask & 0x80 != 0 { s.insert(0, 2); }
                    v = v.broadcast_to(s.clone()).unwrap();
                    ids = ids.broadcast_to(&s);
                }
                _ => {}
            }
        }
        let vshape = ids.shape.clone();
        let sdom = if op == 3 { Dom::NonZero } else { Dom::Any };
        let (s, sa) = input(&derive(&vshape, src.0, src.1), &src.2, dt, sdom, &mut rng);
        let sb = sa.broadcast_to(&vshape);
        let c = [2.0, -0.5, 3.0][seed as usize % 3];
        type F = Box<dyn Fn(f64, f64) -> f64>;
        let (r, f, float_only): (R<Tensor>, F, bool) = match op {
            0 => (v.add_(&s), Box::new(|d, x| d + x), false),
            1 => (v.sub_(&s), Box::new(|d, x| d - x), false),
            2 => (v.mul_(&s), Box::new(|d, x| d * x), false),
            3 => (v.div_(&s), Box::new(|d, x| d / x), true),
            4 => (v.copy_(&s), Box::new(|_, x| x), false),
            5 => (v.fill_(c), Box::new(move |_, _| c), false),
            6 => (v.zero_(), Box::new(|_, _| 0.0), false),
            7 => (v.add_scaled_(&s, c), Box::new(move |d, x| d + c * x), c.fract() != 0.0),
            8 => (v.mul_scalar_(c), Box::new(move |d, _| d * c), c.fract() != 0.0),
            _ => (v.add_scalar_(c), Box::new(move |d, _| d + c), c.fract() != 0.0),
        };
        let mut seen = std::collections::HashSet::new();
        let overlapping = ids.data.iter().any(|&i| !seen.insert(i as usize));
        let mut want = base_a.clone();
        if overlapping {
            assert!(matches!(r, Err(Error::OverlappingWrite { .. })), "write into an expanded view: {:?}", r);
        } else if ids.data.is_empty() && matches!(r, Err(Error::OverlappingWrite { .. })) {
            // An expanded view without elements: refusing it is fine too.
        } else if float_only && !dt.is_float() {
            assert!(matches!(r, Err(Error::DTypeMismatch { lhs: DType::I64, .. })), "float result into i64: {:?}", r);
        } else {
            prop_assert!(r.is_ok(), "op {}: {:?}", op, r.err());
            for (k, &i) in ids.data.iter().enumerate() {
                let i = i as usize;
                want.data[i] = round(dt, f(want.data[i], sb.data[k]));
            }
        }
        check(&format!("base after in-place op {op}"), &base, &want, dt);
        let through_view = Arr::new(&vshape, ids.data.iter().map(|&i| want.data[i as usize]).collect());
        check(&format!("view after in-place op {op}"), &v, &through_view, dt);
    }

    /// Casts between every pair of dtypes follow `as` (floats truncate toward zero and
    /// saturate into integers; anything non-zero is `true`).
    #[test]
    fn casts_match_reference(shape in shape(0..=3), steps in steps(), from in dtype(), to in dtype(), to_bool in any::<bool>(), seed in any::<u64>()) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (t, a) = build(&shape, &steps, from, &mut || rng.random_range(-300.0..300.0));
        let to = if to_bool { DType::Bool } else { to };
        check(&format!("{from} -> {to}"), &t.to_dtype(to).unwrap(), &a.map(|v| round(to, v)), to);
        // And back from bool.
        let b = t.ne_scalar(0.0).unwrap().to_dtype(from).unwrap();
        check("bool ->", &b, &a.map(|v| (v != 0.0) as u8 as f64), from);
    }

    /// `bool` host data round-trips through views (`from_vec` in, `to_vec::<bool>` out), and a
    /// bool tensor from host data behaves as one made by a comparison.
    #[test]
    fn bool_host_data_round_trips_through_views(shape in shape(0..=3), steps in steps(), seed in any::<u64>()) {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut draws = Vec::new();
        let (t, a) = build(&shape, &steps, DType::Bool, &mut || {
            let v = rng.random_range(0..3) as f64; // 0 false; 1 and 2 (stored as 1) true
            draws.push(v);
            v
        });
        let want: Vec<bool> = a.data.iter().map(|&v| v != 0.0).collect();
        prop_assert_eq!(&t.to_vec::<bool>().unwrap(), &want);
        // The same values entered as `bool`s, compared with the ones entered as `Bool8`.
        let base: Vec<bool> = draws.iter().map(|&v| v != 0.0).collect();
        let n = base.len();
        let u = Tensor::from_vec(base, [n]).unwrap();
        let eight = Tensor::from_vec(draws.iter().map(|&v| eddy::ops::Bool8(v as u8)).collect::<Vec<_>>(), [n]).unwrap();
        prop_assert!(u.eq(&eight).unwrap().all_all().unwrap().item::<bool>().unwrap());
        prop_assert_eq!(
            t.logical_not().unwrap().to_vec::<bool>().unwrap(),
            want.iter().map(|b| !b).collect::<Vec<_>>()
        );
    }

    /// Zero-sized views of zero-sized tensors (narrowing a dim of a tensor that has no
    /// elements) work with every kind of kernel.
    #[test]
    fn zero_sized_views_work_everywhere(shape in shape(2..=3), d in 0usize..3, dt in float_dtype()) {
        let mut shape = shape;
        let zero = (d + 1) % shape.len();
        shape[zero] = 0;
        let d = d % shape.len();
        if d == zero || shape[d] == 0 {
            return Ok(());
        }
        let t = Tensor::zeros(shape.clone(), dt).unwrap();
        let size = shape[d];
        let v = t.narrow(d as isize, size - 1, 1).unwrap();
        let mut vs = shape.clone();
        vs[d] = 1;
        let e = Arr::new(&vs, vec![]);
        check("exp", &v.exp().unwrap(), &e, dt);
        check("add", &v.add(&v).unwrap(), &e, dt);
        check("copy", &v.contiguous().unwrap(), &e, dt);
        check("sum", &v.sum(&[0], true).unwrap(), &Arr::new(&{ let mut s = vs.clone(); s[0] = 1; s }, vec![0.0; numel(&{ let mut s = vs.clone(); s[0] = 1; s })]), dt);
        check("softmax", &v.softmax(-1).unwrap(), &e, dt);
        v.fill_(1.0).unwrap();
        v.add_(&Tensor::ones([1], dt).unwrap()).unwrap();
        check("after in place", &t, &Arr::new(&shape, vec![]), dt);
        let idx = Tensor::from_vec(Vec::<i64>::new(), [0]).unwrap();
        check("index_select", &v.index_select(d as isize, &idx).unwrap(), &Arr::new(&{ let mut s = vs.clone(); s[d] = 0; s }, vec![]), dt);
    }
}

// ---- zero-sized tensors and other fixed cases (F3) ---------------------------------------------

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

/// A splat operand of the other's shape (`sum(y).broadcast_to(..)`, or one element of a
/// narrowed base stretched over every dim) takes the binary ops' flat path; each operand order
/// of the non-commutative ops, against the values worked out here.
#[test]
fn splat_operands_of_the_same_shape() {
    let base = Tensor::from_vec(vec![9f32, 2.0, 7.0], [3]).unwrap();
    // The element at offset 1, stretched to [2, 3]: every element reads 2.0.
    let splat = base.narrow(0, 1, 1).unwrap().reshape([1, 1]).unwrap();
    let splat = splat.broadcast_to([2, 3]).unwrap();
    assert!(!splat.is_contiguous());
    let x = Tensor::from_vec(vec![1f32, 2.0, 4.0, 8.0, 0.5, -3.0], [2, 3]).unwrap();
    let xs = f32s(&x);
    type Op = fn(&Tensor, &Tensor) -> Tensor;
    type Want = fn(f32, f32) -> f32;
    let ops: [(&str, Op, Want); 4] = [
        ("sub", |a, b| a.sub(b).unwrap(), |a, b| a - b),
        ("div", |a, b| a.div(b).unwrap(), |a, b| a / b),
        ("pow", |a, b| a.pow(b).unwrap(), f32::powf),
        ("maximum", |a, b| a.maximum(b).unwrap(), f32::max),
    ];
    let close = |got: Vec<f32>, want: Vec<f32>, what: String| {
        assert_eq!(got.len(), want.len(), "{what}");
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g - w).abs() <= 1e-6 * w.abs().max(1.0),
                "{what}: {got:?} against {want:?}"
            );
        }
    };
    for (name, op, f) in ops {
        let want = xs.iter().map(|&v| f(v, 2.0)).collect();
        close(f32s(&op(&x, &splat)), want, format!("{name}(x, splat)"));
        let want = xs.iter().map(|&v| f(2.0, v)).collect();
        close(f32s(&op(&splat, &x)), want, format!("{name}(splat, x)"));
        let want = vec![f(2.0, 2.0); 6];
        close(
            f32s(&op(&splat, &splat)),
            want,
            format!("{name}(splat, splat)"),
        );
    }
    // An integer splat from a reduction, as `dispatch_mixed` builds it.
    let y = Tensor::from_vec(vec![1i64, 2, 3, 4], [4]).unwrap();
    let s = y.sum_all().unwrap().broadcast_to([4]).unwrap();
    assert_eq!(
        s.sub(&y).unwrap().to_vec::<i64>().unwrap(),
        vec![9, 8, 7, 6]
    );
    assert_eq!(
        y.sub(&s).unwrap().to_vec::<i64>().unwrap(),
        vec![-9, -8, -7, -6]
    );
}

#[test]
fn broadcasting_zero_with_one_gives_zero() {
    let a = Tensor::zeros([0], F32).unwrap();
    let b = Tensor::ones([1], F32).unwrap();
    for t in [
        a.add(&b).unwrap(),
        b.mul(&a).unwrap(),
        a.maximum(&b).unwrap(),
    ] {
        assert_eq!(t.dims(), &[0]);
        assert!(f32s(&t).is_empty());
    }
    assert_eq!(a.lt(&b).unwrap().dims(), &[0]);
    let c = Tensor::ones([3, 1], F32).unwrap();
    assert_eq!(c.add(&a).unwrap().dims(), &[3, 0]);
    assert!(matches!(
        a.add(&Tensor::ones([2], F32).unwrap()),
        Err(Error::ShapeMismatch { op: "add", .. })
    ));
    // `[1]` cannot be broadcast *to* `[0]`'s partner `[2]`, and `[0]` not to `[1]`.
    assert!(a.broadcast_to([1]).is_err());
    assert_eq!(b.broadcast_to([0]).unwrap().dims(), &[0]);
}

#[test]
fn empty_reductions_return_the_identity() {
    for dt in [F32, F64, F16, BF16] {
        let e = Tensor::zeros([0, 3], dt).unwrap();
        assert_eq!(e.sum_all().unwrap().to_scalar().unwrap(), 0.0);
        assert_eq!(e.prod(&[0, 1], false).unwrap().to_scalar().unwrap(), 1.0);
        assert_eq!(
            e.sum(&[0], false).unwrap().to_f64_vec().unwrap(),
            vec![0.0; 3]
        );
        assert_eq!(
            e.prod(&[0], true).unwrap().to_f64_vec().unwrap(),
            vec![1.0; 3]
        );
        assert!(e.mean_all().unwrap().to_scalar().unwrap().is_nan());
        assert_eq!(e.sum(&[1], false).unwrap().dims(), &[0]);
    }
    let ei = Tensor::zeros([2, 0], I32).unwrap();
    let s = ei.sum(&[1], false).unwrap();
    assert_eq!(s.dtype(), I64);
    assert_eq!(s.to_vec::<i64>().unwrap(), vec![0, 0]);
    assert_eq!(
        ei.prod(&[1], false).unwrap().to_vec::<i64>().unwrap(),
        vec![1, 1]
    );
    assert_eq!(
        Tensor::scalar(5.0f32)
            .unwrap()
            .sum(&[], false)
            .unwrap()
            .item::<f32>()
            .unwrap(),
        5.0
    );
}

#[test]
fn max_over_an_empty_dim_is_an_empty_tensor_error() {
    let cases: [(&[usize], isize); 5] = [
        (&[0], 0),
        (&[0, 3], 0),
        (&[3, 0], -1),
        (&[0, 0], 1),
        (&[2, 0, 2], 1),
    ];
    for (shape, d) in cases {
        let t = Tensor::zeros(shape, F32).unwrap();
        for (name, r) in [
            ("max", t.max(d, false)),
            ("min", t.min(d, true)),
            ("argmax", t.argmax(d, false)),
            ("argmin", t.argmin(d, false)),
        ] {
            assert!(
                matches!(&r, Err(Error::EmptyTensor { op }) if *op == name),
                "{name} over dim {d} of {shape:?}: {r:?}"
            );
        }
        assert!(matches!(t.max_all(), Err(Error::EmptyTensor { op: "max" })));
        assert!(matches!(t.min_all(), Err(Error::EmptyTensor { op: "min" })));
    }
    // A non-empty reduced dim of a tensor with no elements is fine.
    let t = Tensor::zeros([0, 3], F32).unwrap();
    assert_eq!(t.max(1, false).unwrap().dims(), &[0]);
    assert_eq!(t.argmin(1, true).unwrap().dims(), &[0, 1]);
}

/// Reductions at PyTorch's edges: the median of a row with NaN is NaN at its first NaN; a
/// half norm is computed in f32; a dim named twice is refused; a 0-dim tensor takes dim 0.
#[test]
fn reduction_edges_match_pytorch() {
    let x = Tensor::from_vec(
        vec![1f32, f32::NAN, 2.0, f32::NAN, 3.0, 4.0, 0.0, 5.0],
        [2, 4],
    )
    .unwrap();
    let (v, i) = x.median(1, false).unwrap();
    let v = v.to_vec::<f32>().unwrap();
    assert!(v[0].is_nan() && v[1] == 3.0, "{v:?}");
    assert_eq!(i.to_vec::<i64>().unwrap(), [1, 0]);
    // The gradient goes to the position the median came from.
    let w = x.to_dtype(F64).unwrap().requires_grad_(true);
    w.median(1, true)
        .unwrap()
        .0
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(
        w.grad().unwrap().to_vec::<f64>().unwrap(),
        [0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    );

    let h = Tensor::from_vec(
        vec![
            eddy::tensor::f16::from_f32(300.0),
            eddy::tensor::f16::from_f32(400.0),
        ],
        [2],
    )
    .unwrap();
    for (p, want) in [
        (2.0, 500.0f32),
        (3.0, (300f32.powi(3) + 400f32.powi(3)).cbrt()),
    ] {
        let n = h.norm(p, &[0], false).unwrap();
        assert_eq!(n.dtype(), F16);
        let got = n.to_dtype(F32).unwrap().item::<f32>().unwrap();
        assert!((got - want).abs() / want < 1e-3, "p = {p}: {got} vs {want}");
    }

    let t = Tensor::ones([2, 3], F32).unwrap();
    for dims in [&[0, 0][..], &[1, -1]] {
        let r = t.sum(dims, false);
        assert!(
            matches!(&r, Err(Error::InvalidArgument { op: "sum", .. })),
            "{dims:?}: {r:?}"
        );
    }
    assert!(t.max(1, false).is_ok());
    let s = Tensor::from_vec(vec![3f32], []).unwrap();
    assert_eq!(s.argmax(0, false).unwrap().item::<i64>().unwrap(), 0);
    assert_eq!(s.sum(&[-1], false).unwrap().item::<f32>().unwrap(), 3.0);
    assert!(s.sum(&[1], false).is_err());
}

/// Long f32 sums are cascaded, as PyTorch's: a million `0.1f32` add up to 100000 within a few
/// units (a running f32 sum drifts by about 1 %), over the leading dim, the last dim, and all.
#[test]
fn long_f32_sums_keep_their_accuracy() {
    let n = 1_000_000usize;
    let want = n as f64 * 0.1f32 as f64;
    let close = |got: f32| (got as f64 - want).abs() < 10.0;
    let cols = Tensor::full([n, 2], 0.1, F32).unwrap();
    for s in cols.sum(&[0], false).unwrap().to_vec::<f32>().unwrap() {
        assert!(close(s), "column sum {s}");
    }
    let rows = Tensor::full([2, n], 0.1, F32).unwrap();
    for s in rows.sum(&[1], false).unwrap().to_vec::<f32>().unwrap() {
        assert!(close(s), "row sum {s}");
    }
    let all = Tensor::full([n], 0.1, F32).unwrap().sum_all().unwrap();
    assert!(close(all.item::<f32>().unwrap()), "{all}");
    let mean = cols.mean(&[0], false).unwrap().to_vec::<f32>().unwrap();
    assert!((mean[0] - 0.1).abs() < 1e-6, "{mean:?}");
    // No columns: the cascade has nothing to split.
    let none = Tensor::zeros([n, 0], F32)
        .unwrap()
        .sum(&[0], false)
        .unwrap();
    assert!(none.to_vec::<f32>().unwrap().is_empty());
}

/// Integer products are exact and wrap in their dtype, as `torch.mm`'s do: no rounding above
/// 2^53, no saturation at the dtype's ends. Checked against wrapping loops over a transposed,
/// batched operand large enough to take the threaded path, and at the edges.
#[test]
fn integer_matmul_is_exact_and_wraps() {
    // 2^53 + 1 is not an f64; i64::MAX + 1 wraps to i64::MIN.
    let a = Tensor::from_vec(vec![(1i64 << 53) + 1, i64::MAX, 3], [1, 3]).unwrap();
    let b = Tensor::from_vec(vec![1i64, 0, 0, 1, 0, 1], [3, 2]).unwrap();
    let c = a.matmul(&b).unwrap();
    assert_eq!(c.dtype(), I64);
    assert_eq!(
        c.to_vec::<i64>().unwrap(),
        [(1i64 << 53) + 1, i64::MAX.wrapping_add(3)]
    );
    let a = Tensor::from_vec(vec![200u8, 100, 16, 17], [2, 2]).unwrap();
    let b = Tensor::from_vec(vec![1u8, 2, 1, 3], [2, 2]).unwrap();
    assert_eq!(
        a.matmul(&b).unwrap().to_vec::<u8>().unwrap(),
        [44, 188, 33, 83] // 300, 700, 33, 83 mod 256
    );
    let a = Tensor::from_vec(vec![i32::MAX, i32::MIN], [1, 2]).unwrap();
    let b = Tensor::from_vec(vec![2i32, -1], [2, 1]).unwrap();
    assert_eq!(
        a.matmul(&b).unwrap().to_vec::<i32>().unwrap(),
        [i32::MAX
            .wrapping_mul(2)
            .wrapping_add(i32::MIN.wrapping_neg())]
    );

    // [3, 70, 90] @ [90, 80]ᵀ-view broadcast over the batch: 3 × 504,000 multiply-adds.
    let (nb, m, k, n) = (3usize, 70usize, 90usize, 80usize);
    let mut rng = StdRng::seed_from_u64(7);
    let av: Vec<i32> = (0..nb * m * k)
        .map(|_| rng.random_range(-1 << 20..1 << 20))
        .collect();
    let bv: Vec<i32> = (0..n * k).map(|_| rng.random()).collect();
    let a = Tensor::from_vec(av.clone(), [nb, m, k]).unwrap();
    let bt = Tensor::from_vec(bv.clone(), [n, k]).unwrap().t().unwrap();
    let got = a.matmul(&bt).unwrap().to_vec::<i32>().unwrap();
    let mut want = vec![0i32; nb * m * n];
    for bi in 0..nb {
        for i in 0..m {
            for j in 0..n {
                want[(bi * m + i) * n + j] = (0..k).fold(0i32, |s, p| {
                    s.wrapping_add(av[(bi * m + i) * k + p].wrapping_mul(bv[j * k + p]))
                });
            }
        }
    }
    assert_eq!(got, want);

    // An empty inner dim gives zeros; bool is not arithmetic.
    let z = Tensor::zeros([2, 0], I64)
        .unwrap()
        .matmul(&Tensor::zeros([0, 3], I64).unwrap());
    assert_eq!(z.unwrap().to_vec::<i64>().unwrap(), [0; 6]);
    let t = Tensor::ones([2, 2], DType::Bool).unwrap();
    assert!(matches!(
        t.matmul(&t),
        Err(Error::UnsupportedDType {
            op: "matmul",
            dtype: DType::Bool
        })
    ));
}

#[test]
fn zero_sized_matmul_softmax_cat_and_indexing() {
    let a = Tensor::ones([2, 0], F32).unwrap();
    let b = Tensor::ones([0, 3], F32).unwrap();
    let c = a.matmul(&b).unwrap();
    assert_eq!(c.dims(), &[2, 3]);
    assert_eq!(f32s(&c), vec![0.0; 6]);
    assert_eq!(
        b.matmul(&Tensor::ones([3, 2], F32).unwrap())
            .unwrap()
            .dims(),
        &[0, 2]
    );
    assert_eq!(
        Tensor::zeros([0], F32).unwrap().softmax(0).unwrap().dims(),
        &[0]
    );
    let x = Tensor::from_vec(vec![1f32, 2.], [1, 2]).unwrap();
    let cat = Tensor::cat(
        &[
            &Tensor::zeros([0, 2], F32).unwrap(),
            &x,
            &Tensor::zeros([0, 2], F32).unwrap(),
        ],
        0,
    )
    .unwrap();
    assert_eq!(f32s(&cat), vec![1.0, 2.0]);
    let none = Tensor::from_vec(Vec::<i64>::new(), [0]).unwrap();
    assert_eq!(x.index_select(1, &none).unwrap().dims(), &[1, 0]);
    assert!(
        Tensor::from_vec(Vec::<f32>::new(), [0, 5])
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn creation_ops() {
    assert_eq!(
        Tensor::arange(0.0, 5.0, 2.0, I64)
            .unwrap()
            .to_vec::<i64>()
            .unwrap(),
        vec![0, 2, 4]
    );
    assert_eq!(
        Tensor::arange(3.0, 0.0, -1.0, F32)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        vec![3., 2., 1.]
    );
    assert_eq!(Tensor::arange(1.0, 1.0, 1.0, F32).unwrap().dims(), &[0]);
    assert!(matches!(
        Tensor::arange(0.0, 1.0, 0.0, F32),
        Err(Error::InvalidArgument { op: "arange", .. })
    ));
    assert!(matches!(
        Tensor::arange(0.0, 1.0, -1.0, F32),
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(
        Tensor::linspace(0.0, 1.0, 5, F64)
            .unwrap()
            .to_vec::<f64>()
            .unwrap(),
        vec![0., 0.25, 0.5, 0.75, 1.]
    );
    assert_eq!(
        Tensor::linspace(2.0, 3.0, 1, F32)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        vec![2.0]
    );
    assert_eq!(Tensor::linspace(2.0, 3.0, 0, F32).unwrap().dims(), &[0]);
    assert_eq!(
        Tensor::eye(3, I32).unwrap().to_vec::<i32>().unwrap(),
        vec![1, 0, 0, 0, 1, 0, 0, 0, 1]
    );
    assert_eq!(Tensor::eye(0, F32).unwrap().dims(), &[0, 0]);
    for dt in [F32, F64, F16, BF16, I64, I32, DType::U8, DType::Bool] {
        let t = Tensor::full([2, 0, 3], 1.0, dt).unwrap();
        assert_eq!((t.dims(), t.dtype()), (&[2, 0, 3][..], dt));
        assert_eq!(
            Tensor::full([2], 3.0, dt).unwrap().to_f64_vec().unwrap(),
            vec![round(dt, 3.0); 2]
        );
        assert_eq!(
            Tensor::zeros([], dt).unwrap().to_f64_vec().unwrap(),
            vec![0.0]
        );
        assert_eq!(
            Tensor::ones([3], dt)
                .unwrap()
                .ones_like()
                .unwrap()
                .to_f64_vec()
                .unwrap(),
            vec![1.0; 3]
        );
        assert_eq!(
            Tensor::ones([3], dt)
                .unwrap()
                .zeros_like()
                .unwrap()
                .to_f64_vec()
                .unwrap(),
            vec![0.0; 3]
        );
    }
    eddy::tensor::manual_seed(11);
    let r = Tensor::rand([1000], F64).unwrap().to_vec::<f64>().unwrap();
    assert!(r.iter().all(|v| (0.0..1.0).contains(v)));
    let mean = r.iter().sum::<f64>() / 1000.0;
    assert!((mean - 0.5).abs() < 0.05, "uniform mean {mean}");
    let u = Tensor::uniform([500], -2.0, -1.0, F32)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert!(u.iter().all(|v| (-2.0..-1.0).contains(v)));
    let n = Tensor::randn([2000], 3.0, 2.0, F64)
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    let m = n.iter().sum::<f64>() / 2000.0;
    let sd = (n.iter().map(|x| (x - m).powi(2)).sum::<f64>() / 2000.0).sqrt();
    assert!(
        (m - 3.0).abs() < 0.2 && (sd - 2.0).abs() < 0.2,
        "normal mean {m} std {sd}"
    );
    assert!(matches!(
        Tensor::rand([2], I64),
        Err(Error::UnsupportedDType { op: "rand", .. })
    ));
    assert_eq!(Tensor::scalar(7i64).unwrap().item::<i64>().unwrap(), 7);
    assert_eq!(
        Tensor::from_slice(&[1.5f64, 2.5], [2, 1])
            .unwrap()
            .to_vec2::<f64>()
            .unwrap(),
        vec![vec![1.5], vec![2.5]]
    );
}

#[test]
fn bool_tensors_refuse_arithmetic() {
    let b = Tensor::ones([2], F32).unwrap().gt_scalar(0.0).unwrap();
    assert_eq!(b.dtype(), DType::Bool);
    assert!(matches!(
        b.neg(),
        Err(Error::UnsupportedDType {
            op: "neg",
            dtype: DType::Bool
        })
    ));
    assert!(matches!(
        b.add(&b),
        Err(Error::UnsupportedDType { op: "add", .. })
    ));
    // Bool sums count the true elements.
    assert_eq!(b.sum_all().unwrap().to_vec::<i64>().unwrap(), vec![2]);
}

#[test]
fn bool_tensors_from_and_to_host_vectors() {
    let m = Tensor::from_vec(vec![true, false, false, true], [2, 2]).unwrap();
    assert_eq!(m.dtype(), DType::Bool);
    assert_eq!(
        m.t().unwrap().to_vec2::<bool>().unwrap(),
        vec![vec![true, false], vec![false, true]]
    );
    assert!(Tensor::scalar(true).unwrap().item::<bool>().unwrap());
    assert_eq!(m.sum_all().unwrap().item::<i64>().unwrap(), 2);
    // A host mask drives masked_fill as a computed one does.
    let x = Tensor::arange(0.0, 4.0, 1.0, F32)
        .unwrap()
        .reshape([2, 2])
        .unwrap();
    let filled = x.masked_fill(&m, -1.0).unwrap();
    assert_eq!(filled.to_vec::<f32>().unwrap(), vec![-1.0, 1.0, 2.0, -1.0]);
    // The storage type reads back the same values, as 0 and 1 even when given other bytes.
    let eight = Tensor::from_vec(vec![eddy::ops::Bool8(0), eddy::ops::Bool8(7)], [2]).unwrap();
    assert_eq!(eight.to_vec::<bool>().unwrap(), vec![false, true]);
    assert_eq!(
        eight.to_vec::<eddy::ops::Bool8>().unwrap(),
        vec![eddy::ops::Bool8(0), eddy::ops::Bool8(1)]
    );
    assert!(
        eight
            .eq(&Tensor::from_vec(vec![false, true], [2]).unwrap())
            .unwrap()
            .all_all()
            .unwrap()
            .item::<bool>()
            .unwrap()
    );
    // Typed errors: the wrong dtype either way, and a custom kernel over `bool`.
    assert!(matches!(
        x.to_vec::<bool>(),
        Err(Error::DTypeMismatch {
            op: "to_vec",
            lhs: F32,
            rhs: DType::Bool
        })
    ));
    assert!(matches!(
        m.to_vec::<u8>(),
        Err(Error::DTypeMismatch { op: "to_vec", .. })
    ));
    let custom = Tensor::custom_map::<bool, _>("flip_bits", &[&m], [2, 2], |i, o| {
        o.copy_from_slice(i[0]);
        Ok(())
    });
    assert!(matches!(
        custom,
        Err(Error::InvalidArgument {
            op: "flip_bits",
            ..
        })
    ));
    // Empty bool tensors.
    let e = Tensor::from_vec(Vec::<bool>::new(), [0, 3]).unwrap();
    assert_eq!(e.to_vec::<bool>().unwrap(), Vec::<bool>::new());
}

#[test]
fn integer_arithmetic_wraps_as_documented() {
    let t = Tensor::from_vec(vec![i32::MAX, i32::MIN], [2]).unwrap();
    assert_eq!(
        t.add_scalar(1.0).unwrap().to_vec::<i32>().unwrap(),
        vec![i32::MIN, i32::MIN + 1]
    );
    assert_eq!(
        t.neg().unwrap().to_vec::<i32>().unwrap(),
        vec![-i32::MAX, i32::MIN]
    );
    let u = Tensor::from_vec(vec![i64::MAX], [1]).unwrap();
    assert_eq!(u.mul(&u).unwrap().to_vec::<i64>().unwrap(), vec![1]);
    // Integer division is true division.
    let a = Tensor::from_vec(vec![7i64, -7], [2]).unwrap();
    let q = a
        .div(&Tensor::from_vec(vec![2i64, 2], [2]).unwrap())
        .unwrap();
    assert_eq!(
        (q.dtype(), q.to_vec::<f32>().unwrap()),
        (F32, vec![3.5, -3.5])
    );
}

#[test]
fn in_place_ops_read_their_source_before_writing_when_it_aliases() {
    // x += xᵀ: every element of the source is the old value.
    let x = Tensor::from_vec(vec![1f32, 2., 3., 4.], [2, 2]).unwrap();
    x.add_(&x.t().unwrap()).unwrap();
    assert_eq!(f32s(&x), vec![2., 5., 5., 8.]);
    // An overlapping shift (memmove semantics).
    let y = Tensor::arange(0.0, 5.0, 1.0, F32).unwrap();
    y.narrow(0, 1, 4)
        .unwrap()
        .copy_(&y.narrow(0, 0, 4).unwrap())
        .unwrap();
    assert_eq!(f32s(&y), vec![0., 0., 1., 2., 3.]);
    let z = Tensor::arange(0.0, 5.0, 1.0, F32).unwrap();
    z.narrow(0, 0, 4)
        .unwrap()
        .mul_(&z.narrow(0, 1, 4).unwrap())
        .unwrap();
    assert_eq!(f32s(&z), vec![0., 2., 6., 12., 4.]);
    // In-place ops return `self`, sharing storage.
    let r = z.mul_scalar_(2.0).unwrap();
    assert!(r.shares_storage(&z));
    assert_eq!(f32s(&r), vec![0., 4., 12., 24., 8.]);
}

#[test]
fn display_prints_values_and_dtype() {
    let t = Tensor::from_vec(vec![1f32, 2.5], [2]).unwrap();
    let s = t.to_string();
    assert!(
        s.contains("1.0000") && s.contains("2.5000") && s.contains("f32"),
        "{s}"
    );
    let b = Tensor::from_vec(vec![1i64, 0], [1, 2])
        .unwrap()
        .ne_scalar(0.0)
        .unwrap();
    let s = b.to_string();
    assert!(s.contains("True") && s.contains("False"), "{s}");
}

/// Empty tensors print as PyTorch prints them, and without walking their other dims: `[2^62,
/// 0]` is a valid empty tensor, and printing it once tried to allocate 2^62 entries (found by
/// the `shape_program` fuzz target).
#[test]
fn display_of_empty_tensors() {
    let e = Tensor::zeros([0], DType::F32).unwrap();
    assert_eq!(e.to_string(), "tensor([], dtype=f32)");
    let e = Tensor::zeros([3, 0], DType::I64).unwrap();
    assert_eq!(e.to_string(), "tensor([], size=(3, 0), dtype=i64)");
    let huge = Tensor::zeros([1 << 62, 0], DType::F32).unwrap();
    assert_eq!(
        huge.to_string(),
        format!("tensor([], size=({}, 0), dtype=f32)", 1usize << 62)
    );
    // Summing out the empty dim leaves 2^62 zeros: too many bytes, a typed error.
    assert!(matches!(
        huge.sum(&[1], false),
        Err(Error::ShapeOverflow { .. })
    ));
}

// ---- nn and optim against hand-written reference updates -----------------------------------------

#[test]
fn linear_and_sequential_forward() {
    use eddy::tensor::nn::{Func, Init, Linear, Module, Sequential};
    let w = Arr::new(&[3, 2], vec![0.5, -1.0, 2.0, 0.25, -0.75, 1.5]);
    let b = Arr::new(&[3], vec![0.1, -0.2, 0.3]);
    let x = Arr::new(&[4, 2], vec![1.0, 2.0, -1.0, 0.5, 0.0, 3.0, 2.5, -2.0]);
    let lin = Linear {
        weight: tensor(&w, F64).requires_grad_(true),
        bias: Some(tensor(&b, F64).requires_grad_(true)),
    };
    let want = x
        .matmul(&w.transpose(0, 1))
        .unwrap()
        .zip(&b, |p, q| p + q)
        .unwrap();
    check(
        "linear",
        &lin.forward(&tensor(&x, F64)).unwrap(),
        &want,
        F64,
    );
    assert_eq!(lin.parameters().len(), 2);
    let w2 = Arr::new(&[1, 3], vec![1.0, -2.0, 0.5]);
    let mlp = Sequential::new()
        .add(lin)
        .add(Func::new(Tensor::relu))
        .add(Linear {
            weight: tensor(&w2, F64).requires_grad_(true),
            bias: None,
        });
    assert_eq!((mlp.len(), mlp.parameters().len()), (3, 3));
    let want2 = want
        .map(|v| v.max(0.0))
        .matmul(&w2.transpose(0, 1))
        .unwrap();
    check(
        "sequential",
        &mlp.forward(&tensor(&x, F64)).unwrap(),
        &want2,
        F64,
    );
    // Initialisers: shapes, bounds and spread.
    let (fi, fo) = (50usize, 30usize);
    let ku = Init::KaimingUniform
        .tensor(&[fo, fi], fi, fo, F64)
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    let b = 1.0 / (fi as f64).sqrt();
    assert!(ku.iter().all(|v| v.abs() <= b) && ku.iter().any(|v| v.abs() > b / 2.0));
    let xu = Init::XavierUniform
        .tensor(&[fo, fi], fi, fo, F64)
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    let b = (6.0 / (fi + fo) as f64).sqrt();
    assert!(xu.iter().all(|v| v.abs() <= b) && xu.iter().any(|v| v.abs() > b / 2.0));
    let kn = Init::KaimingNormal
        .tensor(&[fo, fi], fi, fo, F64)
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    let sd = (kn.iter().map(|v| v * v).sum::<f64>() / kn.len() as f64).sqrt();
    assert!(
        (sd - (2.0 / fi as f64).sqrt()).abs() < 0.03,
        "kaiming normal std {sd}"
    );
    assert!(
        Init::Zeros
            .tensor(&[3], 1, 3, F32)
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .all(|&v| v == 0.0)
    );
    let l = Linear::new(5, 7, false, F32).unwrap();
    assert_eq!((l.weight.dims(), l.bias.is_none()), (&[7, 5][..], true));
}

#[test]
fn linear_is_the_product_then_the_bias_bit_for_bit() {
    // The MLP workload's shapes (batch 1 takes the single-row kernel, batch 128 gemm with its
    // column-major output, split over the pool), a transposed input, and an empty inner dim
    // (the bias alone).
    eddy::tensor::manual_seed(3);
    for (m, k, n, transposed) in [
        (1, 784, 512, false),
        (128, 784, 512, false),
        (128, 512, 10, false),
        (37, 100, 70, true),
        (3, 0, 5, false),
    ] {
        let x = match transposed {
            false => Tensor::randn([m, k], 0.0, 1.0, F32).unwrap(),
            true => Tensor::randn([k, m], 0.0, 1.0, F32).unwrap().t().unwrap(),
        };
        let w = Tensor::randn([n, k], 0.0, 1.0, F32).unwrap();
        let b = Tensor::randn([n], 0.0, 1.0, F32).unwrap();
        let fused = x.linear(&w, Some(&b)).unwrap().to_vec::<f32>().unwrap();
        let apart = x.matmul(&w.t().unwrap()).unwrap().add(&b).unwrap();
        assert_eq!(
            fused,
            apart.to_vec::<f32>().unwrap(),
            "[{m}, {k}] @ [{n}, {k}]ᵀ"
        );
        if k == 0 {
            assert_eq!(fused, b.expand([m, n]).unwrap().to_vec::<f32>().unwrap());
        }
    }
}

#[test]
fn linear_relu_is_linear_then_relu_bit_for_bit() {
    // The single-row kernel, gemm split over the pool, a transposed input, an empty inner dim,
    // a broadcast one-element bias, 3-D input, and the unfused paths (no bias, `f16`); with a
    // NaN in the input's first row (of several), which must stay NaN through the ReLU, as the
    // `relu` kernel keeps it.
    let bits = |t: &Tensor| -> Vec<u64> {
        let v = t.to_dtype(F64).unwrap().to_vec::<f64>().unwrap();
        v.into_iter().map(f64::to_bits).collect()
    };
    let mut rng = StdRng::seed_from_u64(41);
    let mut host = |n: usize, nan: bool| -> Vec<f64> {
        let mut v: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
        if nan && n > 0 {
            v[0] = f64::NAN;
        }
        v
    };
    for dt in [F32, F64, F16] {
        for (m, k, n, transposed, one_bias, rank3) in [
            (1, 784, 512, false, false, false),
            (128, 300, 70, false, false, false),
            (37, 100, 70, true, false, false),
            (3, 0, 5, false, false, false),
            (4, 9, 6, false, true, false),
            (6, 9, 6, false, false, true),
        ] {
            let x = Tensor::from_vec(host(m * k, m > 1), [m, k]).unwrap();
            let x = match (transposed, rank3) {
                (true, _) => x.t().unwrap().contiguous().unwrap().t().unwrap(),
                (_, true) => x.reshape([2, m / 2, k]).unwrap(),
                _ => x,
            };
            let x = x.to_dtype(dt).unwrap();
            let w = Tensor::from_vec(host(n * k, false), [n, k]).unwrap();
            let b = Tensor::from_vec(
                host(if one_bias { 1 } else { n }, false),
                [if one_bias { 1 } else { n }],
            )
            .unwrap();
            let (w, b) = (w.to_dtype(dt).unwrap(), b.to_dtype(dt).unwrap());
            let what = format!("{dt:?} [{m}, {k}] @ [{n}, {k}]ᵀ");
            let fused = x.linear_relu(&w, Some(&b)).unwrap();
            let apart = x.linear(&w, Some(&b)).unwrap().relu().unwrap();
            assert_eq!(fused.dims(), apart.dims(), "{what}");
            let (f, a) = (bits(&fused), bits(&apart));
            assert_eq!(f, a, "{what}");
            // Both signs occur and the NaN row is NaN: the ReLU did something to compare.
            let v = fused.to_dtype(F64).unwrap().to_vec::<f64>().unwrap();
            if k > 0 {
                let rest = &v[if m > 1 { n } else { 0 }..];
                assert!(
                    m == 1 || v[..n].iter().all(|v| v.is_nan()),
                    "{what}: the NaN row"
                );
                assert!(rest.contains(&0.0), "{what}: no clipped output");
                assert!(rest.iter().any(|&v| v > 0.0), "{what}: no positive output");
            }
            let unbiased = x.linear_relu(&w, None).unwrap();
            let want = x.linear(&w, None).unwrap().relu().unwrap();
            assert_eq!(bits(&unbiased), bits(&want), "{what}, no bias");
        }
    }
    // Its errors name it.
    let x = Tensor::ones([2, 3], F32).unwrap();
    let w = Tensor::ones([4, 3], F32).unwrap();
    assert!(matches!(
        x.linear_relu(&w.t().unwrap(), None),
        Err(Error::ShapeMismatch {
            op: "linear_relu",
            ..
        })
    ));
    assert!(matches!(
        x.linear_relu(&w, Some(&Tensor::ones([3], F32).unwrap())),
        Err(Error::ShapeMismatch {
            op: "linear_relu",
            ..
        })
    ));
}

#[test]
fn linear_refuses_bad_operands_at_the_call() {
    let x = Tensor::ones([2, 3], F32).unwrap();
    let w = Tensor::ones([4, 3], F32).unwrap();
    let b = Tensor::ones([4], F32).unwrap();
    let shape = |r: eddy::tensor::Result<Tensor>| match r {
        Err(Error::ShapeMismatch {
            op: "linear",
            lhs,
            rhs,
        }) => (lhs, rhs),
        other => panic!("want a linear ShapeMismatch, got {other:?}"),
    };
    assert_eq!(
        shape(x.linear(&w.t().unwrap(), None)),
        (vec![2, 3], vec![3, 4])
    );
    let bad_bias = Tensor::ones([3], F32).unwrap();
    assert_eq!(shape(x.linear(&w, Some(&bad_bias))), (vec![4], vec![3]));
    let b2 = Tensor::ones([1, 4], F32).unwrap();
    assert_eq!(shape(x.linear(&w, Some(&b2))), (vec![4], vec![1, 4]));
    let invalid = |r: eddy::tensor::Result<Tensor>| {
        assert!(
            matches!(r, Err(Error::InvalidArgument { op: "linear", .. })),
            "{r:?}"
        )
    };
    invalid(Tensor::scalar(1f32).unwrap().linear(&w, None));
    invalid(x.linear(&Tensor::ones([3], F32).unwrap(), None));
    let wd = Tensor::ones([4, 3], F64).unwrap();
    assert!(matches!(
        x.linear(&wd, Some(&b)),
        Err(Error::DTypeMismatch {
            op: "linear",
            lhs: F32,
            rhs: F64
        })
    ));
    assert!(matches!(
        x.linear(&w, Some(&b.to_dtype(F64).unwrap())),
        Err(Error::DTypeMismatch { op: "linear", .. })
    ));
    let xb = Tensor::ones([2, 3], DType::Bool).unwrap();
    let wb = Tensor::ones([4, 3], DType::Bool).unwrap();
    assert!(matches!(
        xb.linear(&wb, None),
        Err(Error::UnsupportedDType {
            op: "linear",
            dtype: DType::Bool
        })
    ));
    // One element broadcasts; rows of zero and ones work.
    let one = Tensor::full([1], 0.5, F32).unwrap();
    assert_eq!(
        x.linear(&w, Some(&one)).unwrap().to_vec::<f32>().unwrap(),
        [3.5; 8]
    );
    let empty = Tensor::ones([0, 3], F32)
        .unwrap()
        .linear(&w, Some(&b))
        .unwrap();
    assert_eq!(empty.dims(), &[0, 4]);
}

/// Three optimizer steps on `L = Σ (w − t)²` (so `∂L/∂w = 2(w − t)`), against `update`,
/// which maps (weights, gradients, step) to the new weights.
fn optimizer_matches(
    name: &str,
    make: impl Fn(Vec<Tensor>) -> Box<dyn eddy::tensor::optim::Optimizer>,
    mut update: impl FnMut(&mut [f64], &[f64], i32),
) {
    let w0 = vec![0.5, -1.5, 2.0, 0.0];
    let t = vec![1.0, 1.0, -1.0, 0.5];
    let w = Tensor::from_vec(w0.clone(), [4])
        .unwrap()
        .requires_grad_(true);
    let target = Tensor::from_vec(t.clone(), [4]).unwrap();
    let mut opt = make(vec![w.clone()]);
    let mut rw = w0;
    for step in 1..=3 {
        opt.zero_grad();
        w.sub(&target)
            .unwrap()
            .square()
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        opt.step().unwrap();
        let g: Vec<f64> = rw.iter().zip(&t).map(|(a, b)| 2.0 * (a - b)).collect();
        update(&mut rw, &g, step);
        let got = w.to_vec::<f64>().unwrap();
        for (a, b) in got.iter().zip(&rw) {
            assert!(
                (a - b).abs() < 1e-12,
                "{name} step {step}: got {got:?}, want {rw:?}"
            );
        }
    }
    assert!(
        w.is_leaf() && w.requires_grad(),
        "{name}: the parameter stays a leaf"
    );
}

#[test]
fn optimizers_match_their_update_rules() {
    use eddy::tensor::optim::{Adam, Sgd};
    optimizer_matches(
        "sgd",
        |p| Box::new(Sgd::new(p, 0.1).unwrap()),
        |w, g, _| {
            for (w, g) in w.iter_mut().zip(g) {
                *w -= 0.1 * g;
            }
        },
    );
    let mut buf = [0.0; 4];
    optimizer_matches(
        "sgd momentum + weight decay",
        |p| Box::new(Sgd::new(p, 0.05).unwrap().momentum(0.9).unwrap().weight_decay(0.1).unwrap()),
        |w, g, step| {
            for i in 0..4 {
                let gi = g[i] + 0.1 * w[i];
                buf[i] = if step == 1 { gi } else { 0.9 * buf[i] + gi };
                w[i] -= 0.05 * buf[i];
            }
        },
    );
    for (decoupled, wd) in [(false, 0.0), (false, 0.2), (true, 0.2)] {
        let (mut m, mut v) = ([0.0; 4], [0.0; 4]);
        optimizer_matches(
            &format!("adam decoupled={decoupled} wd={wd}"),
            |p| {
                let mut a = if decoupled {
                    Adam::adamw(p, 0.01, wd).unwrap()
                } else {
                    Adam::new(p, 0.01).unwrap()
                };
                a.weight_decay = wd;
                Box::new(a)
            },
            |w, g, step| {
                let (b1, b2, lr, eps) = (0.9f64, 0.999f64, 0.01, 1e-8);
                for i in 0..4 {
                    let mut gi = g[i];
                    if decoupled {
                        w[i] *= 1.0 - lr * wd;
                    } else {
                        gi += wd * w[i];
                    }
                    m[i] = b1 * m[i] + (1.0 - b1) * gi;
                    v[i] = b2 * v[i] + (1.0 - b2) * gi * gi;
                    let mh = m[i] / (1.0 - b1.powi(step));
                    let vh = v[i] / (1.0 - b2.powi(step));
                    w[i] -= lr * mh / (vh.sqrt() + eps);
                }
            },
        );
    }
    // Optimizers take only leaves that require grad.
    let x = Tensor::ones([2], F32).unwrap();
    assert!(matches!(
        Sgd::new(vec![x.clone()], 0.1),
        Err(Error::InvalidArgument { .. })
    ));
    let y = x.requires_grad_(true).mul_scalar(2.0).unwrap();
    assert!(matches!(
        Adam::new(vec![y], 0.1),
        Err(Error::InvalidArgument { .. })
    ));
}

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

// ---- operators --------------------------------------------------------------------------------

/// The values and dtype of `t`, as `f64`s (bit-exact for every dtype these tests use).
fn exact(t: &Tensor) -> (DType, Vec<f64>) {
    (t.dtype(), t.to_f64_vec().unwrap())
}

#[test]
fn operators_compute_what_the_named_methods_do() -> R<()> {
    let a = Tensor::from_vec(vec![1.5f32, -2.0, 0.25, 3.0, -0.5, 8.0], [2, 3]).unwrap();
    let b = Tensor::from_vec(vec![0.5f32, 4.0, -3.0], [3]).unwrap(); // broadcasts over rows
    let (ta, tb) = (|| a.clone(), || b.clone());
    let named: [(&str, R<Tensor>); 4] = [
        ("add", a.add(&b)),
        ("sub", a.sub(&b)),
        ("mul", a.mul(&b)),
        ("div", a.div(&b)),
    ];
    // Every operand form on each side: tensor, borrowed tensor, op result.
    let forms: [(&str, [R<Tensor>; 4]); 7] = [
        ("&a op &b", [&a + &b, &a - &b, &a * &b, &a / &b]),
        (
            "a op b",
            [ta() + tb(), ta() - tb(), ta() * tb(), ta() / tb()],
        ),
        ("a op &b", [ta() + &b, ta() - &b, ta() * &b, ta() / &b]),
        ("&a op b", [&a + tb(), &a - tb(), &a * tb(), &a / tb()]),
        (
            "&a op Ok(b)",
            [&a + Ok(tb()), &a - Ok(tb()), &a * Ok(tb()), &a / Ok(tb())],
        ),
        (
            "Ok(a) op &b",
            [Ok(ta()) + &b, Ok(ta()) - &b, Ok(ta()) * &b, Ok(ta()) / &b],
        ),
        (
            "Ok(a) op b",
            [
                Ok(ta()) + tb(),
                Ok(ta()) - tb(),
                Ok(ta()) * tb(),
                Ok(ta()) / tb(),
            ],
        ),
    ];
    for (form, got) in forms {
        for ((op, want), got) in named.iter().zip(got) {
            let want = exact(want.as_ref().unwrap());
            assert_eq!(exact(&got.unwrap()), want, "{form} ({op})");
        }
    }
    assert_eq!(exact(&(-&a).unwrap()), exact(&a.neg().unwrap()));
    assert_eq!(exact(&(-ta()).unwrap()), exact(&a.neg().unwrap()));
    // An expression chains through results: a * b + a - b / a.
    let chained = ((&a * &b + &a)? - (&b / &a)?)?;
    let stepwise = a.mul(&b)?.add(&a)?.sub(&b.div(&a)?)?;
    assert_eq!(exact(&chained), exact(&stepwise));
    Ok(())
}

#[test]
fn operators_with_scalars_match_the_scalar_methods() {
    let f = Tensor::from_vec(vec![1.5f32, -2.0, 0.25, 3.0], [4]).unwrap();
    let d = Tensor::from_vec(vec![1.5f64, -2.0, 0.1, 3.0], [4]).unwrap();
    let i = Tensor::from_vec(vec![7i64, -3, 0, 12], [4]).unwrap();
    for t in [&f, &d, &i] {
        let pairs: [(R<Tensor>, R<Tensor>); 12] = [
            (t + 2.0, t.add_scalar(2.0)),
            (t - 2.5, t.sub_scalar(2.5)),
            (t * 3, t.mul_scalar(3.0)),
            (t / 4, t.div_scalar(4.0)),
            (2.0 + t, t.add_scalar(2.0)),
            (2.5 - t, t.rsub_scalar(2.5)),
            (3 * t, t.mul_scalar(3.0)),
            (t.clone() + 1, t.add_scalar(1.0)),
            (t.clone() - 0.5, t.sub_scalar(0.5)),
            (t.clone() * -2, t.mul_scalar(-2.0)),
            (5 - t.clone(), t.rsub_scalar(5.0)),
            (t.clone() / 0.5, t.div_scalar(0.5)),
        ];
        for (k, (got, want)) in pairs.into_iter().enumerate() {
            assert_eq!(
                exact(&got.unwrap()),
                exact(&want.unwrap()),
                "{:?} pair {k}",
                t.dtype()
            );
        }
    }
    // Integer tensors stay integer with integral scalars, as the methods keep them.
    assert_eq!((&i + 2).unwrap().dtype(), DType::I64);
    assert_eq!((&i * 0.5).unwrap().dtype(), DType::F32);
}

#[test]
fn a_scalar_over_a_tensor_is_rounded_once() {
    let xs = [3.0f32, -7.0, 0.1, 1e-3, 0.0, 6.0];
    let x = Tensor::from_slice(&xs, [2, 3]).unwrap();
    let got = (1.0 / &x).unwrap();
    assert_eq!(got.dtype(), DType::F32);
    assert_eq!(got.dims(), &[2, 3]);
    let want: Vec<f32> = xs.iter().map(|v| 1.0 / v).collect();
    assert_eq!(got.to_vec::<f32>().unwrap(), want);
    let got = (0.1 / x.clone()).unwrap().to_vec::<f32>().unwrap();
    let want: Vec<f32> = xs.iter().map(|v| 0.1f32 / v).collect();
    assert_eq!(got, want);
    let d = Tensor::from_slice(&[3.0f64, 0.7], [2]).unwrap();
    assert_eq!(
        (2 / &d).unwrap().to_vec::<f64>().unwrap(),
        [2.0 / 3.0, 2.0 / 0.7]
    );
    // Integer division is true division, in f32 (as `div`).
    let i = Tensor::from_slice(&[4i32, -8, 3], [3]).unwrap();
    let q = (6 / &i).unwrap();
    assert_eq!(q.dtype(), DType::F32);
    assert_eq!(q.to_vec::<f32>().unwrap(), [1.5, -0.75, 2.0]);
}

#[test]
fn operator_errors_are_the_ops_errors_left_first() {
    let a = Tensor::zeros([2, 3], DType::F32).unwrap();
    let b = Tensor::zeros([4], DType::F32).unwrap();
    let e = (&a + &b).unwrap_err();
    assert!(
        matches!(&e, Error::ShapeMismatch { op, lhs, rhs } if *op == "add" && lhs == &[2, 3] && rhs == &[4]),
        "{e}"
    );
    assert!(matches!(
        (&a / &b).unwrap_err(),
        Error::ShapeMismatch { op: "div", .. }
    ));
    // An operand that is already an error is returned as it is, the left one first.
    let left = (&a + &b) * &a;
    assert!(matches!(
        left.unwrap_err(),
        Error::ShapeMismatch { op: "add", .. }
    ));
    let right = &a * (&a - &b);
    assert!(matches!(
        right.unwrap_err(),
        Error::ShapeMismatch { op: "sub", .. }
    ));
}

#[test]
fn gradients_flow_through_operators() -> R<()> {
    let x = Tensor::from_vec(vec![0.5f64, -1.5, 2.0], [3])
        .unwrap()
        .requires_grad_(true);
    // y = sum(x*x + 3x - 1/x + 2) ; dy/dx = 2x + 3 + 1/x^2
    let y = ((&x * &x + (&x * 3.0)?)? - (1.0 / &x)?)?;
    let y = (y + 2.0)?.sum_all()?;
    y.backward()?;
    let g = x.grad().unwrap().to_vec::<f64>().unwrap();
    for (g, x) in g.iter().zip([0.5f64, -1.5, 2.0]) {
        let want = 2.0 * x + 3.0 + 1.0 / (x * x);
        assert!((g - want).abs() < 1e-12, "{g} vs {want}");
    }
    Ok(())
}

proptest! {
    #![proptest_config(cfg())]

    /// `cumsum` along every dim (negative ones too) of random shapes, views and dtypes:
    /// floats keep their dtype, integers sum to `i64`; a dim out of range is `InvalidDim`.
    #[test]
    fn cumsum_matches_reference(
        shape in shape(0..=3), steps in steps(), dt in dtype(), pick in any::<u8>(),
        seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (t, a) = input(&shape, &steps, dt, Dom::Any, &mut rng);
        let rank = shape.len();
        let out_dt = if dt.is_float() { dt } else { I64 };
        let span = rank.max(1);
        let d = pick as usize % span;
        let dim = if pick & 0x80 != 0 { d as isize - span as isize } else { d as isize };
        let got = t.cumsum(dim).unwrap();
        // The reference: a running sum that restarts at index 0 of `d`.
        let stride: usize = shape.iter().skip(d + 1).product();
        let size = shape.get(d).copied().unwrap_or(1);
        let mut want = a.data.clone();
        for i in 0..want.len() {
            if !(i / stride).is_multiple_of(size) {
                want[i] += want[i - stride];
            }
        }
        check("cumsum", &got, &Arr { shape: shape.clone(), data: want }, out_dt);
        assert!(got.is_contiguous());
        let bad = span as isize + (pick % 3) as isize;
        let e = t.cumsum(bad).unwrap_err();
        assert!(matches!(e, Error::InvalidDim { op: "cumsum", dim, .. } if dim == bad), "{e}");
    }
}

/// Each row of `a` along `d`, stably ordered with NaN largest: `(values, positions)`, the first
/// `k` of each row, in the layout of `a` with `d` resized to `k`.
fn sorted_reference(a: &Arr, d: usize, k: usize, descending: bool) -> (Arr, Arr) {
    let n = a.shape[d];
    let inner: usize = a.shape[d + 1..].iter().product();
    let outer: usize = a.shape[..d].iter().product();
    let mut out_shape = a.shape.clone();
    out_shape[d] = k;
    let (mut vals, mut pos) = (vec![0.0; outer * k * inner], vec![0.0; outer * k * inner]);
    for o in 0..outer {
        for q in 0..inner {
            let mut row: Vec<(f64, usize)> = (0..n)
                .map(|j| (a.data[(o * n + j) * inner + q], j))
                .collect();
            // (is NaN, value): NaN above every number; `sort_by` is stable.
            row.sort_by(|x, y| {
                let c =
                    x.0.is_nan()
                        .cmp(&y.0.is_nan())
                        .then_with(|| x.0.partial_cmp(&y.0).unwrap_or(std::cmp::Ordering::Equal));
                if descending { c.reverse() } else { c }
            });
            for (j, &(v, p)) in row.iter().take(k).enumerate() {
                vals[(o * k + j) * inner + q] = v;
                pos[(o * k + j) * inner + q] = p as f64;
            }
        }
    }
    (Arr::new(&out_shape, vals), Arr::new(&out_shape, pos))
}

proptest! {
    #![proptest_config(cfg())]

    /// `sort`, `argsort`, `topk` and `median` along every dim of random shapes, views and
    /// dtypes, with many ties (small integers) and NaNs in float inputs: values and positions
    /// against a stable reference sort; `k` past the dim and bad dims are typed errors.
    #[test]
    fn sort_and_topk_match_reference(
        shape in shape(0..=3), steps in steps(), dt in dtype(), pick in any::<u8>(),
        kpick in any::<u8>(), descending in any::<bool>(), seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let nan_rate = if dt.is_float() { 0.15 } else { 0.0 };
        let (t, a) = build(&shape, &steps, dt, &mut || {
            if rng.random_bool(nan_rate) { f64::NAN } else { sample(&mut rng, Dom::Grid, dt) }
        });
        let rank = shape.len();
        let span = rank.max(1);
        let d = pick as usize % span;
        let dim = if pick & 0x80 != 0 { d as isize - span as isize } else { d as isize };
        // The reference works on a rank-1 view of a 0-dim input.
        let a1 = if rank == 0 { Arr::new(&[1], a.data.clone()) } else { a.clone() };
        let n = a1.shape[d];
        let unshape = |r: Arr| if rank == 0 { Arr::new(&[], r.data) } else { r };

        let (v, i) = t.sort(dim, descending).unwrap();
        let (wv, wi) = sorted_reference(&a1, d, n, descending);
        let (wv, wi) = (unshape(wv), unshape(wi));
        check("sort values", &v, &wv, dt);
        check("sort positions", &i, &wi, I64);
        prop_assert!(v.is_contiguous() && i.is_contiguous());
        check("argsort", &t.argsort(dim, descending).unwrap(), &wi, I64);

        let k = kpick as usize % (n + 1);
        let (v, i) = t.topk(k, dim, descending).unwrap();
        let (wv, wi) = sorted_reference(&a1, d, k, descending);
        if rank == 0 && k == 1 {
            check("topk values", &v, &unshape(wv), dt);
            check("topk positions", &i, &unshape(wi), I64);
        } else {
            check("topk values", &v, &wv, dt);
            check("topk positions", &i, &wi, I64);
        }
        let e = t.topk(n + 1 + k, dim, descending).unwrap_err();
        prop_assert!(matches!(e, Error::InvalidArgument { op: "topk", .. }), "{e}");

        if n == 0 {
            let e = t.median(dim, false).unwrap_err();
            prop_assert!(matches!(e, Error::EmptyTensor { op: "median" }), "{e}");
        } else if rank > 0 {
            let (m, mi) = t.median(dim, true).unwrap();
            let (wv, wi) = sorted_reference(&a1, d, n, false);
            // A row with NaN has the median NaN, at its first NaN (PyTorch's `median`).
            let first_nan = |ix: &[usize]| {
                (0..n).find(|&j| {
                    let mut ix = ix.to_vec();
                    ix[d] = j;
                    a1.data[reference::ravel(&ix, &a1.shape)].is_nan()
                })
            };
            let at = |r: &Arr, nan: fn(usize) -> f64| {
                let mut s = r.shape.clone();
                s[d] = 1;
                Arr::from_fn(&s, |ix| {
                    if let Some(j) = first_nan(ix) {
                        return nan(j);
                    }
                    let mut ix = ix.to_vec();
                    ix[d] = (n - 1) / 2;
                    r.data[reference::ravel(&ix, &r.shape)]
                })
            };
            check("median", &m, &at(&wv, |_| f64::NAN), dt);
            check("median positions", &mi, &at(&wi, |j| j as f64), I64);
            prop_assert_eq!(t.median(dim, false).unwrap().0.rank(), rank - 1);
        }

        let bad = span as isize + (pick % 3) as isize;
        let e = t.sort(bad, descending).unwrap_err();
        prop_assert!(matches!(e, Error::InvalidDim { op: "sort", dim, .. } if dim == bad), "{e}");
    }
}

/// A sort long enough to run on both cores gives the same order as the reference, with
/// the ties of a coarse value grid in their original order.
#[test]
fn a_large_cumsum_splits_rows_across_cores_along_either_dim() {
    // Small integers in f32: every running sum is exact, so any misplaced row shows.
    let (rows, cols) = (300usize, 257usize);
    let data: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 7919) % 13) as f32 - 6.0)
        .collect();
    let t = Tensor::from_vec(data.clone(), [rows, cols]).unwrap();
    for (dim, through) in [(1isize, false), (0, false), (0, true)] {
        let x = if through { t.t().unwrap() } else { t.clone() };
        let (r, c) = (x.dims()[0], x.dims()[1]);
        let at = |i: usize, j: usize| {
            if through {
                data[j * cols + i]
            } else {
                data[i * cols + j]
            }
        };
        let mut want = vec![0f32; r * c];
        for i in 0..r {
            for j in 0..c {
                let prev = match dim {
                    1 if j > 0 => want[i * c + j - 1],
                    0 if i > 0 => want[(i - 1) * c + j],
                    _ => 0.0,
                };
                want[i * c + j] = prev + at(i, j);
            }
        }
        assert_eq!(
            x.cumsum(dim).unwrap().to_vec::<f32>().unwrap(),
            want,
            "dim {dim}, transposed {through}"
        );
    }
    let ints =
        Tensor::from_vec((0..rows * cols).map(|i| i as i64).collect(), [rows * cols]).unwrap();
    let last = ints.cumsum(0).unwrap().to_vec::<i64>().unwrap()[rows * cols - 1];
    assert_eq!(last, (rows * cols * (rows * cols - 1) / 2) as i64);
}

#[test]
fn a_large_sort_splits_rows_across_cores_and_stays_stable() {
    let (rows, n) = (64, 1500);
    let data: Vec<f32> = (0..rows * n).map(|i| ((i * 7919) % 101) as f32).collect();
    let t = Tensor::from_vec(data.clone(), [rows, n]).unwrap();
    let a = Arr::new(&[rows, n], data.iter().map(|&v| v as f64).collect());
    for descending in [false, true] {
        let (v, i) = t.sort(1, descending).unwrap();
        let (wv, wi) = sorted_reference(&a, 1, n, descending);
        check("sort values", &v, &wv, F32);
        check("sort positions", &i, &wi, I64);
        let (v, i) = t.t().unwrap().topk(5, 0, !descending).unwrap();
        let at = Arr::new(
            &[n, rows],
            (0..n * rows)
                .map(|x| a.data[(x % rows) * n + x / rows])
                .collect(),
        );
        let (wv, wi) = sorted_reference(&at, 0, 5, !descending);
        check("topk values", &v, &wv, F32);
        check("topk positions", &i, &wi, I64);
    }
}

proptest! {
    #![proptest_config(cfg())]

    /// Out-of-place `scatter_add` and `index_add` on random shapes, views and dtypes (integers
    /// exact), with repeated indices, an index smaller than `src`, and an empty index; against
    /// a plain-loop reference. Bad shapes, dtypes and indices (past the end or negative) are
    /// typed errors.
    #[test]
    fn scatter_add_and_index_add_match_reference(
        shape in prop::collection::vec(dim(), 1..=3), steps in steps(), dt in dtype(),
        pick in any::<u8>(), extra in prop::collection::vec(0usize..=2, 3), seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (t, a) = input(&shape, &steps, dt, Dom::Grid, &mut rng);
        let rank = shape.len();
        let d = pick as usize % rank;
        let dim = if pick & 0x80 != 0 { d as isize - rank as isize } else { d as isize };
        let size = shape[d];
        let index_of = |rng: &mut StdRng, n: usize| -> Vec<i64> {
            (0..n).map(|_| rng.random_range(0..size as i64)).collect()
        };
        let norm = |i: i64| i as usize;

        // scatter_add: the index may be shorter than `self` off `dim`, any length at `dim`
        // (nothing when `dim` is empty), and `src` may be larger than the index.
        let mut ishape: Vec<usize> = shape.iter().map(|&s| s.saturating_sub(pick as usize >> 6 & 1)).collect();
        ishape[d] = if size == 0 { 0 } else { 1 + extra[0] + extra[1] };
        let sshape: Vec<usize> = ishape.iter().zip(&extra).map(|(&s, &e)| s + e % 2).collect();
        let ivals = index_of(&mut rng, numel(&ishape));
        let index = Tensor::from_vec(ivals.clone(), ishape.clone()).unwrap();
        let (src, sa) = input(&sshape, &[], dt, Dom::Grid, &mut rng);
        let mut want = a.clone();
        for (i, &v) in ivals.iter().enumerate() {
            let ix = reference::unravel(i, &ishape);
            let mut to = ix.clone();
            to[d] = norm(v);
            want.data[reference::ravel(&to, &shape)] += sa.data[reference::ravel(&ix, &sshape)];
        }
        let want = Arr::new(&shape, want.data.iter().map(|&v| round(dt, v)).collect());
        check("scatter_add", &t.scatter_add(dim, &index, &src).unwrap(), &want, dt);

        // index_add: a 1-D index of any length.
        let m = if size == 0 { 0 } else { extra[2] * 2 };
        let ivals = index_of(&mut rng, m);
        let index = Tensor::from_vec(ivals.clone(), [m]).unwrap();
        let mut sshape = shape.clone();
        sshape[d] = m;
        let (src, sa) = input(&sshape, &steps, dt, Dom::Grid, &mut rng);
        let mut want = a.clone();
        for i in 0..numel(&sshape) {
            let ix = reference::unravel(i, &sshape);
            let mut to = ix.clone();
            to[d] = norm(ivals[ix[d]]);
            want.data[reference::ravel(&to, &shape)] += sa.data[i];
        }
        let want = Arr::new(&shape, want.data.iter().map(|&v| round(dt, v)).collect());
        check("index_add", &t.index_add(dim, &index, &src).unwrap(), &want, dt);

        // Bad input.
        let other = if dt == F64 { F32 } else { F64 };
        let e = t.index_add(dim, &index, &src.to_dtype(other).unwrap()).unwrap_err();
        prop_assert!(matches!(e, Error::DTypeMismatch { op: "index_add", .. }), "{e}");
        let mut wrong = sshape.clone();
        wrong[d] += 1;
        let e = t.index_add(dim, &index, &Tensor::zeros(wrong, dt).unwrap()).unwrap_err();
        prop_assert!(matches!(e, Error::ShapeMismatch { op: "index_add", .. }), "{e}");
        let far = Tensor::from_vec(vec![size as i64], [1]).unwrap();
        let mut one = shape.clone();
        one[d] = 1;
        if (0..rank).all(|j| j == d || shape[j] > 0) {
            let e = t.scatter_add(dim, &far.reshape(vec![1; rank]).unwrap(), &Tensor::zeros(vec![1; rank], dt).unwrap()).unwrap_err();
            prop_assert!(matches!(e, Error::IndexOutOfRange { op: "scatter_add", index, .. } if index == size as i64), "{e}");
        }
        let e = t.index_add(dim, &far, &Tensor::zeros(one.clone(), dt).unwrap()).unwrap_err();
        prop_assert!(matches!(e, Error::IndexOutOfRange { op: "index_add", .. }), "{e}");
        // A negative index is out of range too, as in PyTorch.
        let neg = Tensor::from_vec(vec![-1i64], [1]).unwrap();
        let e = t.index_add(dim, &neg, &Tensor::zeros(one, dt).unwrap()).unwrap_err();
        prop_assert!(matches!(e, Error::IndexOutOfRange { op: "index_add", index: -1, .. }), "{e}");
        if (0..rank).all(|j| j == d || shape[j] > 0) {
            let e = t.scatter_add(dim, &neg.reshape(vec![1; rank]).unwrap(), &Tensor::zeros(vec![1; rank], dt).unwrap()).unwrap_err();
            prop_assert!(matches!(e, Error::IndexOutOfRange { op: "scatter_add", index: -1, .. }), "{e}");
        }
        let e = t.scatter_add(dim, &Tensor::zeros(vec![1; rank + 1], I64).unwrap(), &t).unwrap_err();
        prop_assert!(matches!(e, Error::ShapeMismatch { op: "scatter_add", .. }), "{e}");
        let e = t.scatter_add(dim, &Tensor::zeros(vec![1; rank], F32).unwrap(), &t).unwrap_err();
        prop_assert!(matches!(e, Error::UnsupportedDType { op: "scatter_add", .. }), "{e}");
    }
}

/// An index computed on the engine (its values unknown at the call) that points past the dim
/// fails the kernel; the error names the op and surfaces at the sync of the result only.
#[test]
fn an_out_of_range_scatter_index_fails_at_sync() {
    let x = Tensor::zeros([3], F32).unwrap();
    let idx = Tensor::from_vec(vec![0i64, 1], [2])
        .unwrap()
        .add_scalar(2.0)
        .unwrap();
    let src = Tensor::ones([2], F32).unwrap();
    let y = x.scatter_add(0, &idx, &src).unwrap();
    let e = y.to_vec::<f32>().unwrap_err().to_string();
    assert!(e.contains("scatter_add") && e.contains("index 3"), "{e}");
    let z = x.index_add(0, &idx, &src).unwrap();
    let e = z.to_vec::<f32>().unwrap_err().to_string();
    assert!(e.contains("index_add") && e.contains("index 3"), "{e}");
    assert_eq!(
        x.add_scalar(1.0).unwrap().to_vec::<f32>().unwrap(),
        [1.0; 3]
    );
}

/// Reduces `a` over the dims marked in `red` with `f` applied to each group's values (in
/// row-major order); the result keeps the reduced dims as size 1.
fn reduce_ref(a: &Arr, red: &[bool], f: impl Fn(&[f64]) -> f64) -> Arr {
    let kshape: Vec<usize> = a
        .shape
        .iter()
        .zip(red)
        .map(|(&s, &r)| if r { 1 } else { s })
        .collect();
    let mut groups = vec![Vec::new(); numel(&kshape)];
    for (i, &v) in a.data.iter().enumerate() {
        let mut ix = reference::unravel(i, &a.shape);
        for (x, &r) in ix.iter_mut().zip(red) {
            if r {
                *x = 0;
            }
        }
        groups[reference::ravel(&ix, &kshape)].push(v);
    }
    Arr::new(&kshape, groups.iter().map(|g| f(g)).collect())
}

proptest! {
    #![proptest_config(cfg())]

    /// `logsumexp`, `norm` for several `p`, `any`/`all` over random dim sets of random views and
    /// dtypes, against plain loops; with `keepdim` either way.
    #[test]
    fn composed_reductions_match_reference(
        shape in shape(0..=3), steps in steps(), dt in dtype(), mask in any::<u8>(),
        keepdim in any::<bool>(), big in any::<bool>(), seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (t, a) = input(&shape, &steps, dt, Dom::Grid, &mut rng);
        let rank = shape.len();
        let red: Vec<bool> = (0..rank).map(|d| mask >> d & 1 == 1).collect();
        let dims: Vec<isize> = (0..rank).filter(|&d| red[d]).map(|d| d as isize).collect();
        let out_shape = |k: &Arr| -> Arr {
            if keepdim {
                k.clone()
            } else {
                let s: Vec<usize> = (0..rank).filter(|&d| !red[d]).map(|d| shape[d]).collect();
                Arr::new(&s, k.data.clone())
            }
        };
        let fdt = to_float(dt);

        // logsumexp, shifted by a large constant in half the cases (it must not overflow).
        let shift = if big && dt.is_float() && dt != F16 && dt != BF16 { 500.0 } else { 0.0 };
        let ts = if shift != 0.0 { t.add_scalar(shift).unwrap() } else { t.clone() };
        let want = reduce_ref(&a, &red, |g| {
            if g.is_empty() { return f64::NEG_INFINITY; }
            let m = g.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v + shift));
            m + g.iter().map(|&v| (v + shift - m).exp()).sum::<f64>().ln()
        });
        let got = ts.logsumexp(&dims, keepdim).unwrap();
        let amp = vec![1.0 + shift.abs(); numel(&want.shape)];
        check_amp("logsumexp", &got, &out_shape(&want), fdt, tol(fdt) * 4.0, &amp);

        // any / all.
        let any = reduce_ref(&a, &red, |g| g.iter().any(|&v| v != 0.0) as u8 as f64);
        let all = reduce_ref(&a, &red, |g| g.iter().all(|&v| v != 0.0) as u8 as f64);
        check("any", &t.any(&dims, keepdim).unwrap(), &out_shape(&any), DType::Bool);
        check("all", &t.all(&dims, keepdim).unwrap(), &out_shape(&all), DType::Bool);
        check("any_all", &t.any_all().unwrap(), &Arr::new(&[], vec![a.data.iter().any(|&v| v != 0.0) as u8 as f64]), DType::Bool);
        check("all_all", &t.all_all().unwrap(), &Arr::new(&[], vec![a.data.iter().all(|&v| v != 0.0) as u8 as f64]), DType::Bool);

        // Norms.
        if !dt.is_float() {
            let e = t.norm(2.0, &dims, keepdim).unwrap_err();
            prop_assert!(matches!(e, Error::UnsupportedDType { op: "norm", .. }), "{e}");
        } else {
            let empty = (0..rank).any(|d| red[d] && shape[d] == 0);
            for p in [2.0, 1.0, 3.0, 0.5, 0.0, f64::INFINITY, f64::NEG_INFINITY] {
                let got = t.norm(p, &dims, keepdim);
                if p.is_infinite() && empty {
                    prop_assert!(matches!(got, Err(Error::EmptyTensor { .. })), "{got:?}");
                    continue;
                }
                let want = reduce_ref(&a, &red, |g| {
                    let abs = g.iter().map(|v| v.abs());
                    if p == f64::INFINITY {
                        abs.fold(0.0, f64::max)
                    } else if p == f64::NEG_INFINITY {
                        abs.fold(f64::INFINITY, f64::min)
                    } else if p == 0.0 {
                        abs.filter(|&v| v != 0.0).count() as f64
                    } else {
                        abs.map(|v| v.powf(p)).sum::<f64>().powf(1.0 / p)
                    }
                });
                check_amp(&format!("norm p={p}"), &got.unwrap(), &out_shape(&want), dt, tol(dt) * 4.0, &[]);
            }
            let e = t.norm(f64::NAN, &dims, keepdim).unwrap_err();
            prop_assert!(matches!(e, Error::InvalidArgument { op: "norm", .. }), "{e}");
        }
        let bad = [rank as isize];
        for (op, e) in [
            ("logsumexp", t.logsumexp(&bad, keepdim).unwrap_err()),
            ("norm", t.norm(2.0, &bad, keepdim).unwrap_err()),
            ("any", t.any(&bad, keepdim).unwrap_err()),
            ("all", t.all(&bad, keepdim).unwrap_err()),
        ] {
            prop_assert!(matches!(e, Error::InvalidDim { op: o, .. } if o == op), "{e}");
        }
    }

    /// `masked_fill`, `tril`/`triu`, `flip` and `split`/`split_sizes`/`chunk`/`unbind` on
    /// random views and dtypes, against plain loops.
    #[test]
    fn masks_flips_and_splits_match_reference(
        shape in shape(0..=3), steps in steps(), dt in dtype(), pick in any::<u8>(),
        diag in -3i64..=3, size in 0usize..=3, seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (t, a) = input(&shape, &steps, dt, Dom::Grid, &mut rng);
        let rank = shape.len();

        // masked_fill with a mask over the trailing dims (it broadcasts).
        let mshape: Vec<usize> = shape[rank.min(pick as usize % 2)..].to_vec();
        let mbits: Vec<bool> = (0..numel(&mshape)).map(|_| rng.random()).collect();
        let m = Tensor::from_vec(mbits.iter().map(|&b| b as i64).collect::<Vec<_>>(), mshape.clone())
            .unwrap()
            .gt_scalar(0.0)
            .unwrap();
        let fill = -7.0;
        let want = Arr::from_fn(&shape, |ix| {
            let mi = &ix[rank - mshape.len()..];
            if mbits[reference::ravel(mi, &mshape)] { fill } else { a.data[reference::ravel(ix, &shape)] }
        });
        check("masked_fill", &t.masked_fill(&m, fill).unwrap(), &want, dt);
        let e = t.masked_fill(&t, fill);
        if dt != DType::Bool {
            prop_assert!(matches!(e, Err(Error::UnsupportedDType { op: "masked_fill", .. })), "{e:?}");
        }
        if rank >= 1 {
            let mut wide = shape.clone();
            wide[0] += 2;
            let e = t.masked_fill(&Tensor::zeros(wide, DType::Bool).unwrap(), fill).unwrap_err();
            prop_assert!(matches!(e, Error::ShapeMismatch { op: "masked_fill", .. }), "{e}");
        }

        // tril / triu.
        if rank >= 2 {
            for (op, lower) in [("tril", true), ("triu", false)] {
                let want = Arr::from_fn(&shape, |ix| {
                    let (i, j) = (ix[rank - 2] as i64, ix[rank - 1] as i64);
                    let keep = if lower { j - i <= diag } else { j - i >= diag };
                    if keep { a.data[reference::ravel(ix, &shape)] } else { 0.0 }
                });
                let got = if lower { t.tril(diag) } else { t.triu(diag) }.unwrap();
                check(op, &got, &want, dt);
            }
        } else {
            assert!(matches!(t.tril(diag), Err(Error::InvalidArgument { op: "tril", .. })));
            assert!(matches!(t.triu(diag), Err(Error::InvalidArgument { op: "triu", .. })));
        }

        // flip over a random set of dims (negative names too).
        let fl: Vec<usize> = (0..rank).filter(|&d| pick >> (d + 2) & 1 == 1).collect();
        let names: Vec<isize> = fl.iter().map(|&d| if pick & 1 == 1 { d as isize - rank as isize } else { d as isize }).collect();
        let want = Arr::from_fn(&shape, |ix| {
            let mut src = ix.to_vec();
            for &d in &fl {
                src[d] = shape[d] - 1 - ix[d];
            }
            a.data[reference::ravel(&src, &shape)]
        });
        let got = t.flip(&names).unwrap();
        check("flip", &got, &want, dt);
        prop_assert!(got.is_contiguous() && !got.shares_storage(&t));
        if let Some(&d) = names.first() {
            let e = t.flip(&[d, d]).unwrap_err();
            prop_assert!(matches!(e, Error::InvalidArgument { op: "flip", .. }), "{e}");
        }

        // Pieces along a dim put back together give the input.
        if rank >= 1 {
            let d = pick as usize % rank;
            let n = shape[d];
            let join = |parts: &[Tensor]| {
                let refs: Vec<&Tensor> = parts.iter().collect();
                Tensor::cat(&refs, d as isize).unwrap()
            };
            if size > 0 || n == 0 {
                let parts = t.split(size, d as isize).unwrap();
                prop_assert!(parts.iter().all(|p| p.dims()[d] <= size));
                check("split", &join(&parts), &a, dt);
            } else {
                assert!(matches!(t.split(0, d as isize), Err(Error::InvalidArgument { op: "split", .. })));
            }
            let sizes = [n / 3, n - n / 3];
            check("split_sizes", &join(&t.split_sizes(&sizes, d as isize).unwrap()), &a, dt);
            assert!(matches!(t.split_sizes(&[n + 1], d as isize), Err(Error::InvalidArgument { .. })));
            let c = t.chunk(size + 1, d as isize).unwrap();
            prop_assert!(c.len() <= size + 1);
            check("chunk", &join(&c), &a, dt);
            let u = t.unbind(d as isize).unwrap();
            prop_assert_eq!(u.len(), n);
            if n > 0 {
                let us: Vec<Tensor> = u.iter().map(|p| p.unsqueeze(d as isize).unwrap()).collect();
                check("unbind", &join(&us), &a, dt);
            }
        }
    }
}

/// Views of 0-d and 1-d tensors and of empty dims, as PyTorch: `t` returns a 0-d or 1-d tensor
/// as it is; `squeeze` and `transpose` take dim 0 or -1 of a 0-d tensor; `chunk` of an empty
/// dim gives `chunks` empty pieces.
#[test]
fn views_of_small_ranks_and_empty_dims_match_pytorch() {
    let v = Tensor::from_vec(vec![1f32, 2., 3.], [3]).unwrap();
    let vt = v.t().unwrap();
    assert_eq!(vt.dims(), &[3]);
    assert!(vt.shares_storage(&v));
    let s = Tensor::scalar(5f32).unwrap();
    assert_eq!(s.t().unwrap().item::<f32>().unwrap(), 5.0);
    for d in [0, -1] {
        assert_eq!(s.squeeze(d).unwrap().dims(), &[] as &[usize]);
        assert_eq!(s.transpose(d, 0).unwrap().item::<f32>().unwrap(), 5.0);
    }
    assert!(matches!(s.squeeze(1), Err(Error::InvalidDim { .. })));
    assert!(matches!(s.transpose(0, 1), Err(Error::InvalidDim { .. })));
    // The gradient flows through a 0-d transpose.
    let x = Tensor::scalar(3f32).unwrap().requires_grad_(true);
    x.transpose(0, 0)
        .unwrap()
        .mul_scalar(2.0)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(x.grad().unwrap().item::<f32>().unwrap(), 2.0);
    let e = Tensor::zeros([0, 2], F32).unwrap();
    let parts = e.chunk(3, 0).unwrap();
    assert_eq!(parts.len(), 3);
    assert!(parts.iter().all(|p| p.dims() == [0, 2]));
    assert_eq!(e.chunk(3, 1).unwrap().len(), 2); // a non-empty dim: as before
    let huge = e.chunk(usize::MAX, 0).unwrap_err();
    assert!(huge.to_string().contains("chunk"), "{huge}");
}

/// `flatten(start, end)` merges dims `start..=end` as PyTorch: negative dims count from the end,
/// a 0-d tensor becomes 1-d, a contiguous tensor gives a view, and the gradient flows back in
/// the input's shape.
#[test]
fn flatten_merges_a_range_of_dims_as_pytorch() {
    let t = Tensor::arange(0.0, 24.0, 1.0, F32)
        .unwrap()
        .reshape([2, 3, 4])
        .unwrap();
    let cases: [(isize, isize, &[usize]); 5] = [
        (0, -1, &[24]),
        (1, 2, &[2, 12]),
        (0, 1, &[6, 4]),
        (-1, -1, &[2, 3, 4]),
        (1, 1, &[2, 3, 4]),
    ];
    for (s, e, want) in cases {
        let f = t.flatten(s, e).unwrap();
        assert_eq!(f.dims(), want, "flatten({s}, {e})");
        assert!(f.shares_storage(&t));
        assert_eq!(
            f.flatten_all().unwrap().to_vec::<f32>().unwrap(),
            t.to_vec::<f32>().unwrap()
        );
    }
    // A transposed input is copied in its logical order.
    let tt = t.transpose(0, 2).unwrap().flatten(0, 1).unwrap();
    assert_eq!(tt.dims(), &[12, 2]);
    assert_eq!(tt.to_vec2::<f32>().unwrap()[1], [4.0, 16.0]);
    let s = Tensor::scalar(7f32).unwrap();
    for (a, b) in [(0, 0), (0, -1), (-1, -1)] {
        assert_eq!(s.flatten(a, b).unwrap().to_vec::<f32>().unwrap(), [7.0]);
    }
    assert!(matches!(
        s.flatten(0, 1),
        Err(Error::InvalidDim { op: "flatten", .. })
    ));
    assert!(matches!(
        t.flatten(0, 3),
        Err(Error::InvalidDim {
            op: "flatten",
            dim: 3,
            rank: 3
        })
    ));
    assert!(matches!(
        t.flatten(-4, 0),
        Err(Error::InvalidDim {
            op: "flatten",
            dim: -4,
            ..
        })
    ));
    let after = t.flatten(2, 1).unwrap_err();
    assert!(
        matches!(after, Error::InvalidArgument { op: "flatten", .. }),
        "{after}"
    );
    assert!(
        after
            .to_string()
            .contains("start_dim 2 comes after end_dim 1"),
        "{after}"
    );
    // Beside a dim of size 0 the merged size can overflow; it is refused, not wrapped.
    let big = 1usize << 40;
    let e = Tensor::zeros([0, 1], F32)
        .unwrap()
        .expand([0, big])
        .unwrap();
    let e = e.unsqueeze(2).unwrap().expand([0, big, big]).unwrap();
    let over = e.flatten(1, 2).unwrap_err();
    assert!(
        matches!(over, Error::InvalidArgument { op: "flatten", .. }),
        "{over}"
    );
    // The gradient comes back in the input's shape.
    let x = Tensor::ones([2, 3, 4], F32).unwrap().requires_grad_(true);
    x.flatten(1, 2)
        .unwrap()
        .mul_scalar(3.0)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    let g = x.grad().unwrap();
    assert_eq!(g.dims(), &[2, 3, 4]);
    assert!(g.to_vec::<f32>().unwrap().iter().all(|&v| v == 3.0));
}

/// `linspace` as PyTorch's CPU kernel: the first half counts up from `start`, the second down
/// from `end` (so both ends are exact and the sequence is symmetric), in `f32` arithmetic for
/// `f32`; integer dtypes truncate the bounds, then each value; bounds the dtype cannot hold
/// are refused.
#[test]
fn linspace_follows_pytorchs_kernel() {
    // PyTorch's formula, written out on its own (the first half up, the second down).
    fn reference(s: f32, e: f32, n: usize) -> Vec<f32> {
        let step = (e - s) / (n - 1) as f32;
        (0..n)
            .map(|i| {
                if i < n / 2 {
                    s + step * i as f32
                } else {
                    e - step * (n - 1 - i) as f32
                }
            })
            .collect()
    }
    for (s, e, n) in [
        (0.0, 1.0, 7),
        (-3.3, 9.1, 11),
        (1e-3, 7.0, 100),
        (5.0, -5.0, 6),
    ] {
        let t = Tensor::linspace(s, e, n, F32)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(
            t,
            reference(s as f32, e as f32, n),
            "linspace({s}, {e}, {n})"
        );
        assert_eq!((t[0], t[n - 1]), (s as f32, e as f32));
    }
    // Symmetric about the middle when the bounds are: x[i] == -x[n-1-i].
    let t = Tensor::linspace(-1.0, 1.0, 9, F32)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert!((0..9).all(|i| t[i] == -t[8 - i]), "{t:?}");
    let one = Tensor::linspace(2.0, 3.0, 1, F32)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(one, [2.0], "one step is start");
    let i = Tensor::linspace(0.0, 10.0, 4, I64)
        .unwrap()
        .to_vec::<i64>()
        .unwrap();
    assert_eq!(i, [0, 3, 6, 10]);
    let i = Tensor::linspace(0.9, 10.7, 3, I32)
        .unwrap()
        .to_vec::<i32>()
        .unwrap();
    assert_eq!(i, [0, 5, 10]);
    let e = Tensor::linspace(0.0, 300.0, 3, DType::U8).unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument { op: "linspace", .. }),
        "{e}"
    );
}
