//! Scaled dot-product attention on the CPU, forward and backward, one fused kernel each.
//!
//! Each problem (one batch element and head) is worked through a few query rows at a time:
//! the rows' scores against every key they see are formed in a small buffer, softmaxed, and
//! multiplied into the values, so memory is linear in the key count and the `[l, s]` matrix
//! of scores never exists. The forward saves each row's log-sum-exp; the backward recomputes
//! the probabilities from it (as FlashAttention does) and accumulates the three gradients in
//! the same pass. The products are register-blocked micro-kernels over 8 lanes, compiled for
//! AVX2 where the CPU has it; for `f32` both have their own 16-lane form where the CPU has
//! AVX-512F (module `avx512`). Problems are shared among the kernel threads.

use super::elementwise::FloatElem;
use super::fastmath::Transcendental;
use crate::attention::{Attention, MaskLayout};
use num_traits::{Float, Zero};

#[cfg(target_arch = "x86_64")]
mod avx512;
mod kernels;

pub use kernels::{attention, attention_backward};

/// Query rows worked together (the register block's height).
const ROWS: usize = 4;
/// Lanes of a micro-kernel's accumulator (two AVX2 registers of `f32`).
const LANES: usize = 16;

/// `acc + a · b`, fused into one rounding where `F` (the CPU has FMA), else two.
#[inline(always)]
fn mac<A: Float, const F: bool>(acc: A, a: A, b: A) -> A {
    if F { a.mul_add(b, acc) } else { acc + a * b }
}

fn pad(n: usize) -> usize {
    n.div_ceil(LANES) * LANES
}

/// `out[r][j] = Σ_c coef[c·R + r] · mat[c·stride + j]` for `R` rows and `j < width` (a multiple
/// of [`LANES`]); rows of `out` are `stride` apart.
#[inline(always)]
fn rows_times<A: Float, const R: usize, const F: bool>(
    coef: &[A],
    depth: usize,
    mat: &[A],
    stride: usize,
    width: usize,
    out: &mut [A],
) {
    for j0 in (0..width).step_by(LANES) {
        let mut acc = [[A::zero(); LANES]; R];
        for c in 0..depth {
            let m: &[A; LANES] = mat[c * stride + j0..][..LANES].try_into().unwrap();
            let cf: &[A; R] = coef[c * R..][..R].try_into().unwrap();
            for r in 0..R {
                for t in 0..LANES {
                    acc[r][t] = mac::<A, F>(acc[r][t], cf[r], m[t]);
                }
            }
        }
        for (r, a) in acc.iter().enumerate() {
            out[r * stride + j0..][..LANES].copy_from_slice(a);
        }
    }
}

/// `out[r][t] = Σ_{j < n} p[r·ps + j] · mat[j·w + t]` for `R` rows and `t < w` (a multiple of
/// [`LANES`]); rows of `out` are `w` apart.
#[inline(always)]
fn probs_times<A: Float, const R: usize, const F: bool>(
    p: &[A],
    ps: usize,
    n: usize,
    mat: &[A],
    w: usize,
    out: &mut [A],
) {
    for t0 in (0..w).step_by(LANES) {
        let mut acc = [[A::zero(); LANES]; R];
        for j in 0..n {
            let m: &[A; LANES] = mat[j * w + t0..][..LANES].try_into().unwrap();
            for r in 0..R {
                let pr = p[r * ps + j];
                for t in 0..LANES {
                    acc[r][t] = mac::<A, F>(acc[r][t], pr, m[t]);
                }
            }
        }
        for (r, a) in acc.iter().enumerate() {
            out[r * w + t0..][..LANES].copy_from_slice(a);
        }
    }
}

/// `acc[j][t] += Σ_r p[r·ps + j] · rows[r·w + t]` for `j < n`, `t < w` (a multiple of
/// [`LANES`]): the transposed product, accumulated; a key no row weighs is skipped.
#[inline(always)]
fn add_transposed<A: Float, const R: usize, const F: bool>(
    p: &[A],
    ps: usize,
    n: usize,
    rows: &[A],
    w: usize,
    acc: &mut [A],
) {
    for j in 0..n {
        let pr: [A; R] = std::array::from_fn(|r| p[r * ps + j]);
        if pr.iter().all(|v| v.is_zero()) {
            continue;
        }
        for t0 in (0..w).step_by(LANES) {
            let a: &mut [A; LANES] = (&mut acc[j * w + t0..][..LANES]).try_into().unwrap();
            for r in 0..R {
                let x: &[A; LANES] = rows[r * w + t0..][..LANES].try_into().unwrap();
                for t in 0..LANES {
                    a[t] = mac::<A, F>(a[t], pr[r], x[t]);
                }
            }
        }
    }
}

/// The logarithm of the smallest normal number, plus one: below it `exp` is subnormal.
#[inline(always)]
fn floor<A: Float>() -> A {
    A::min_positive_value().ln() + A::one()
}

/// `e^x`, or zero below `lo` (from [`floor`]): a probability under 1e-37 beside a row sum of
/// at least 1 changes nothing, and a subnormal result costs x86 a microcode assist of a
/// hundred cycles, on every masked key of a row. NaN stays NaN.
#[inline(always)]
fn exp_normal<A: Float + Transcendental>(x: A, lo: A) -> A {
    let y = if x < lo { lo } else { x }.exp_();
    if x < lo { A::zero() } else { y }
}

/// The largest of `v` (NaN ignored), over [`LANES`] independent lanes so that it vectorises.
#[inline(always)]
fn lane_max<A: Float>(v: &[A]) -> A {
    let mut acc = [A::neg_infinity(); LANES];
    let chunks = v.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for t in 0..LANES {
            acc[t] = if c[t] > acc[t] { c[t] } else { acc[t] };
        }
    }
    let m = acc.iter().fold(A::neg_infinity(), |m, &x| m.max(x));
    rest.iter().fold(m, |m, &x| m.max(x))
}

/// The sum of `v` over [`LANES`] independent lanes.
#[inline(always)]
fn lane_sum<A: Float>(v: &[A]) -> A {
    let mut acc = [A::zero(); LANES];
    let chunks = v.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for t in 0..LANES {
            acc[t] = acc[t] + c[t];
        }
    }
    let s = acc.iter().fold(A::zero(), |a, &x| a + x);
    rest.iter().fold(s, |a, &x| a + x)
}

/// One problem's operands, widened and laid out for the micro-kernels, reused from problem to
/// problem by a thread.
struct Scratch<A> {
    /// Keys transposed, `[e][pad s]`.
    kt: Vec<A>,
    /// Values transposed, `[ev][pad s]` (backward).
    vt: Vec<A>,
    /// Keys, `[s][pad e]` (backward).
    k: Vec<A>,
    /// Values, `[s][pad ev]` (forward).
    v: Vec<A>,
    /// The block's scaled queries as coefficients, `[e][R]`.
    coef: Vec<A>,
    /// The block's scores, then probabilities, `[R][pad s]`.
    p: Vec<A>,
    /// The block's `dP`, then `dS`, `[R][pad s]` (backward).
    dp: Vec<A>,
    /// The block's rows of an operand, `[R][pad w]`.
    rows: Vec<A>,
    /// A second block of rows (backward).
    rows2: Vec<A>,
    /// `dK` and `dV` accumulated, `[s][pad e]` and `[s][pad ev]` (backward).
    dk: Vec<A>,
    dv: Vec<A>,
}

impl<A> Default for Scratch<A> {
    fn default() -> Self {
        Scratch {
            kt: Vec::new(),
            vt: Vec::new(),
            k: Vec::new(),
            v: Vec::new(),
            coef: Vec::new(),
            p: Vec::new(),
            dp: Vec::new(),
            rows: Vec::new(),
            rows2: Vec::new(),
            dk: Vec::new(),
            dv: Vec::new(),
        }
    }
}

fn fill<A: Copy>(v: &mut Vec<A>, n: usize, x: A) {
    v.clear();
    v.resize(n, x);
}

/// `dst[c·ds + j] = src[j·w + c]` widened: a `[n][w]` operand transposed to `[w][ds]`,
/// the padding zero.
fn transpose_into<T: FloatElem>(dst: &mut Vec<T::A>, src: &[T], n: usize, w: usize, ds: usize) {
    fill(dst, w * ds, T::A::zero());
    for (j, row) in src.chunks_exact(w.max(1)).take(n).enumerate() {
        for (c, x) in row.iter().enumerate() {
            dst[c * ds + j] = x.up();
        }
    }
}

/// `dst[j·ws + c] = src[j·w + c]` widened: a `[n][w]` operand with rows padded to `ws`, and
/// zero rows up to a multiple of [`LANES`].
fn widen_into<T: FloatElem>(dst: &mut Vec<T::A>, src: &[T], n: usize, w: usize, ws: usize) {
    fill(dst, pad(n) * ws, T::A::zero());
    for (j, row) in src.chunks_exact(w.max(1)).take(n).enumerate() {
        for (d, x) in dst[j * ws..].iter_mut().zip(row) {
            *d = x.up();
        }
    }
}

/// The mask of problem `b` when one was given: its elements and where they are.
type Mask<'a, T> = Option<(&'a [T], &'a MaskLayout)>;

/// Scores of rows `r0..r0 + R` against their keys in `sc.p` (`[R][pad s]`, scaled, masked,
/// `-inf` past each row's keys), from `sc.kt` and the queries `q` (`[l][e]`).
#[inline(always)]
fn scores<T: FloatElem, const R: usize, const F: bool>(
    g: &Attention,
    b: usize,
    r0: usize,
    q: &[T],
    mask: Mask<'_, T>,
    sc: &mut Scratch<T::A>,
) -> usize {
    let (e, sp) = (g.e, pad(g.s));
    let scale = T::param(g.scale);
    let nb = pad(g.keys(r0 + R - 1));
    fill(&mut sc.coef, e * R, T::A::zero());
    for r in 0..R {
        for c in 0..e {
            sc.coef[c * R + r] = q[(r0 + r) * e + c].up() * scale;
        }
    }
    fill(&mut sc.p, R * sp, T::A::zero());
    rows_times::<_, R, F>(&sc.coef, e, &sc.kt, sp, nb, &mut sc.p);
    for r in 0..R {
        let n = g.keys(r0 + r);
        let row = &mut sc.p[r * sp..][..nb];
        if let Some((m, lay)) = mask {
            for (j, x) in row[..n].iter_mut().enumerate() {
                *x = *x + m[lay.at(b, r0 + r, j)].up();
            }
        }
        row[n..].fill(T::A::neg_infinity());
    }
    nb
}

/// The forward of one problem: output rows `o` (`[l][ev]`) and each row's log-sum-exp `lse`
/// (`+inf` for a row that sees no key, so that its probabilities are zero).
#[inline(always)]
fn forward_problem<T: FloatElem, const F: bool>(
    g: &Attention,
    b: usize,
    [q, k, v]: [&[T]; 3],
    mask: Mask<'_, T>,
    o: &mut [T],
    lse: &mut [T::A],
    sc: &mut Scratch<T::A>,
) {
    let (sp, evp) = (pad(g.s), pad(g.ev));
    transpose_into(&mut sc.kt, k, g.s, g.e, sp);
    widen_into(&mut sc.v, v, g.s, g.ev, evp);
    let mut r0 = 0;
    while r0 < g.l {
        if r0 + ROWS <= g.l {
            forward_block::<T, ROWS, F>(g, b, r0, q, mask, o, lse, sc);
            r0 += ROWS;
        } else {
            forward_block::<T, 1, F>(g, b, r0, q, mask, o, lse, sc);
            r0 += 1;
        }
    }
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn forward_block<T: FloatElem, const R: usize, const F: bool>(
    g: &Attention,
    b: usize,
    r0: usize,
    q: &[T],
    mask: Mask<'_, T>,
    o: &mut [T],
    lse: &mut [T::A],
    sc: &mut Scratch<T::A>,
) {
    let (sp, evp) = (pad(g.s), pad(g.ev));
    let nb = scores::<T, R, F>(g, b, r0, q, mask, sc);
    for r in 0..R {
        let row = &mut sc.p[r * sp..][..nb];
        let m = lane_max(row);
        if m == T::A::neg_infinity() {
            // No key seen: zeros, as PyTorch; unless the scores were all NaN.
            let nan = row.iter().any(|x| x.is_nan());
            row.fill(if nan { T::A::nan() } else { T::A::zero() });
            lse[r0 + r] = if nan { T::A::nan() } else { T::A::infinity() };
            continue;
        }
        let lo = floor::<T::A>();
        for x in row.iter_mut() {
            *x = exp_normal(*x - m, lo);
        }
        let s = lane_sum(row);
        let inv = s.recip();
        for x in row.iter_mut() {
            *x = *x * inv;
        }
        lse[r0 + r] = m + s.ln();
    }
    fill(&mut sc.rows, R * evp, T::A::zero());
    probs_times::<_, R, F>(&sc.p, sp, nb, &sc.v, evp, &mut sc.rows);
    for r in 0..R {
        for (d, x) in o[(r0 + r) * g.ev..][..g.ev]
            .iter_mut()
            .zip(&sc.rows[r * evp..])
        {
            *d = T::down(*x);
        }
    }
}

/// The backward of one problem: `dq` (`[l][e]`), `dk` (`[s][e]`), `dv` (`[s][ev]`) from the
/// operands, the output's gradient `dout` and the forward's output `out` and `lse`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn backward_problem<T: FloatElem, const F: bool>(
    g: &Attention,
    b: usize,
    [q, k, v, out, dout]: [&[T]; 5],
    lse: &[T::A],
    mask: Mask<'_, T>,
    [dq, dk, dv]: [&mut [T]; 3],
    sc: &mut Scratch<T::A>,
) {
    let (sp, ep, evp) = (pad(g.s), pad(g.e), pad(g.ev));
    transpose_into(&mut sc.kt, k, g.s, g.e, sp);
    transpose_into(&mut sc.vt, v, g.s, g.ev, sp);
    widen_into(&mut sc.k, k, g.s, g.e, ep);
    fill(&mut sc.dk, g.s * ep, T::A::zero());
    fill(&mut sc.dv, g.s * evp, T::A::zero());
    let mut r0 = 0;
    while r0 < g.l {
        let ops = [q, out, dout];
        if r0 + ROWS <= g.l {
            backward_block::<T, ROWS, F>(g, b, r0, ops, lse, mask, dq, sc);
            r0 += ROWS;
        } else {
            backward_block::<T, 1, F>(g, b, r0, ops, lse, mask, dq, sc);
            r0 += 1;
        }
    }
    let scale = T::param(g.scale);
    for (j, row) in dk.chunks_exact_mut(g.e.max(1)).take(g.s).enumerate() {
        for (d, x) in row.iter_mut().zip(&sc.dk[j * ep..]) {
            *d = T::down(*x * scale);
        }
    }
    for (j, row) in dv.chunks_exact_mut(g.ev.max(1)).take(g.s).enumerate() {
        for (d, x) in row.iter_mut().zip(&sc.dv[j * evp..]) {
            *d = T::down(*x);
        }
    }
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn backward_block<T: FloatElem, const R: usize, const F: bool>(
    g: &Attention,
    b: usize,
    r0: usize,
    [q, out, dout]: [&[T]; 3],
    lse: &[T::A],
    mask: Mask<'_, T>,
    dq: &mut [T],
    sc: &mut Scratch<T::A>,
) {
    let (e, ev) = (g.e, g.ev);
    let (sp, ep, evp) = (pad(g.s), pad(e), pad(ev));
    let nb = scores::<T, R, F>(g, b, r0, q, mask, sc);
    for r in 0..R {
        let (l, lo) = (lse[r0 + r], floor::<T::A>());
        for x in sc.p[r * sp..][..nb].iter_mut() {
            *x = exp_normal(*x - l, lo); // zero past the row's keys, and everywhere if it sees none
        }
    }
    // dP = dO · Vᵀ, then dS = P ⊙ (dP − rowsum(dO ⊙ O)).
    fill(&mut sc.coef, ev * R, T::A::zero());
    for r in 0..R {
        for c in 0..ev {
            sc.coef[c * R + r] = dout[(r0 + r) * ev + c].up();
        }
    }
    fill(&mut sc.dp, R * sp, T::A::zero());
    rows_times::<_, R, F>(&sc.coef, ev, &sc.vt, sp, nb, &mut sc.dp);
    for r in 0..R {
        let i = r0 + r;
        let d = out[i * ev..][..ev]
            .iter()
            .zip(&dout[i * ev..][..ev])
            .fold(T::A::zero(), |a, (o, g)| a + o.up() * g.up());
        for (ds, &p) in sc.dp[r * sp..][..nb].iter_mut().zip(&sc.p[r * sp..][..nb]) {
            *ds = p * (*ds - d);
        }
    }
    // dV += Pᵀ · dO.
    fill(&mut sc.rows, R * evp, T::A::zero());
    for r in 0..R {
        for (d, x) in sc.rows[r * evp..]
            .iter_mut()
            .zip(&dout[(r0 + r) * ev..][..ev])
        {
            *d = x.up();
        }
    }
    add_transposed::<_, R, F>(&sc.p, sp, nb, &sc.rows, evp, &mut sc.dv);
    // dK += dSᵀ · Q (scaled at the end), dQ = dS · K · scale.
    fill(&mut sc.rows, R * ep, T::A::zero());
    for r in 0..R {
        for (d, x) in sc.rows[r * ep..].iter_mut().zip(&q[(r0 + r) * e..][..e]) {
            *d = x.up();
        }
    }
    add_transposed::<_, R, F>(&sc.dp, sp, nb, &sc.rows, ep, &mut sc.dk);
    fill(&mut sc.rows2, R * ep, T::A::zero());
    probs_times::<_, R, F>(&sc.dp, sp, nb, &sc.k, ep, &mut sc.rows2);
    let scale = T::param(g.scale);
    for r in 0..R {
        for (d, x) in dq[(r0 + r) * e..][..e].iter_mut().zip(&sc.rows2[r * ep..]) {
            *d = T::down(*x * scale);
        }
    }
}

/// Whether the CPU has AVX2 and FMA (the micro-kernels' wide form).
fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// One problem of the forward: its index, its queries `[l][e]`, keys `[s][e]` and values
/// `[s][ev]`, and its output rows `[l][ev]` and log-sum-exps `[l]`.
pub(super) type FwdProblem<'a, T, A> = (usize, [&'a [T]; 3], &'a mut [T], &'a mut [A]);

/// One problem of the backward: its index, its queries, keys, values, forward output and
/// output gradient, its log-sum-exps, and its gradients of the queries, keys and values.
pub(super) type BwdProblem<'a, T, A> = (usize, [&'a [T]; 5], &'a [A], [&'a mut [T]; 3]);

/// The forward of `probs`.
#[inline(always)]
fn forward_chunk<T: FloatElem, const F: bool>(
    g: &Attention,
    mask: Mask<'_, T>,
    probs: &mut [FwdProblem<'_, T, T::A>],
) {
    let mut sc = Scratch::default();
    for (b, ops, o, lse) in probs.iter_mut() {
        forward_problem::<T, F>(g, *b, *ops, mask, o, lse, &mut sc);
    }
}

/// [`forward_chunk`] compiled for AVX2 and FMA.
///
/// # Safety
///
/// The CPU has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn forward_chunk_wide<T: FloatElem>(
    g: &Attention,
    mask: Mask<'_, T>,
    probs: &mut [FwdProblem<'_, T, T::A>],
) {
    forward_chunk::<T, true>(g, mask, probs)
}

/// Whether the `f32` kernels may use AVX-512F.
fn has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f") && has_avx2()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The backward of `probs`.
#[inline(always)]
fn backward_chunk<T: FloatElem, const F: bool>(
    g: &Attention,
    mask: Mask<'_, T>,
    probs: &mut [BwdProblem<'_, T, T::A>],
) {
    let mut sc = Scratch::default();
    for (b, ops, lse, grads) in probs.iter_mut() {
        let [dq, dk, dv] = grads;
        backward_problem::<T, F>(g, *b, *ops, lse, mask, [dq, dk, dv], &mut sc);
    }
}

/// [`backward_chunk`] compiled for AVX2 and FMA.
///
/// # Safety
///
/// The CPU has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn backward_chunk_wide<T: FloatElem>(
    g: &Attention,
    mask: Mask<'_, T>,
    probs: &mut [BwdProblem<'_, T, T::A>],
) {
    backward_chunk::<T, true>(g, mask, probs)
}
