//! The `f32` forward and backward with 16-lane registers, where the CPU has AVX-512F.
//!
//! The same computation as the generic kernels, laid out for the wider registers: eight query
//! rows at a time, their scores against two tiles of 16 keys in sixteen accumulators (each
//! query element broadcast once for both tiles), the softmax of each row with a vectorised
//! exponential, and the products with the values (or, backward, the keys) read in place, the
//! last tile under a lane mask, each forward row divided by its sum once at the end. The
//! backward's transposed products (`dK`, `dV`) keep the block's rows in registers and add each
//! key's row once. Keys and values are transposed once per problem (16 × 16 in registers).

use super::{BwdProblem, FwdProblem, Mask, floor};
use crate::attention::Attention;
use crate::cpu::matmul::transpose::copy_cols_to_rows;
use std::arch::x86_64::*;

/// Query rows in a register block.
const BR: usize = 8;
/// Lanes of a register.
const W: usize = 16;

/// A thread's buffers, reused from problem to problem.
#[derive(Default)]
pub(super) struct Buf {
    /// Keys transposed, `[e][sp]` with `sp` the key count rounded up to [`W`].
    kt: Vec<f32>,
    /// Values transposed, `[ev][sp]` (backward).
    vt: Vec<f32>,
    /// A block's scores, then its probabilities (unnormalised in the forward), `[BR][sp]`.
    p: Vec<f32>,
    /// A block's `dP`, then `dS`, `[BR][sp]` (backward).
    dp: Vec<f32>,
    /// `dK` and `dV` accumulated, `[s][pad e]` and `[s][pad ev]` (backward).
    dk: Vec<f32>,
    dv: Vec<f32>,
}

/// `v` resized to at least `n` elements (contents unspecified), or to exactly `n` zeros.
fn room(v: &mut Vec<f32>, n: usize, zero: bool) {
    if zero {
        v.clear();
        v.resize(n, 0.0);
    } else if v.len() < n {
        v.resize(n, 0.0);
    }
}

/// `dst` (`[w][sp]`) = the `n × w` row-major `src` transposed, zero past row `n`.
///
/// # Safety
///
/// The CPU has AVX-512F and AVX2; `src` holds `n · w` elements.
#[target_feature(enable = "avx512f")]
unsafe fn transpose(dst: &mut Vec<f32>, src: &[f32], n: usize, w: usize, sp: usize) {
    room(dst, w * sp, true);
    assert!(src.len() >= n * w && sp >= n);
    // SAFETY: `src` holds `n` rows of `w` and `dst` `w` rows of `sp ≥ n`, apart; the CPU has
    // the AVX2 the copy needs (the caller's promise).
    unsafe { copy_cols_to_rows(src.as_ptr(), w, w, n, dst.as_mut_ptr(), sp) };
}

/// The lanes `0..n` (`n ≤ 16`).
#[inline(always)]
fn lanes(n: usize) -> __mmask16 {
    if n >= W {
        !0
    } else {
        ((1u32 << n) - 1) as __mmask16
    }
}

/// `e^x` for `x ≤ 0` (a score minus its row's maximum), zero below `lo`; NaN stays NaN.
/// [`exp_f32`](crate::cpu::fastmath::exp_f32)'s reduction and polynomial, where `2^n` is
/// one normal power of two because `n` lies in `[-125, 0]`.
///
/// # Safety
///
/// The CPU has AVX-512F.
#[inline]
#[target_feature(enable = "avx512f")]
#[allow(clippy::excessive_precision)] // Cephes' coefficients, as `exp_f32` has them.
unsafe fn exp_nonpositive(x: __m512, lo: __m512) -> __m512 {
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    const MAGIC: f32 = 12_582_912.0;
    let below = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, lo);
    // `max(lo, x)` keeps a NaN `x` (the second operand wins when either is NaN).
    let xc = _mm512_max_ps(lo, x);
    let t = _mm512_fmadd_ps(
        xc,
        _mm512_set1_ps(std::f32::consts::LOG2_E),
        _mm512_set1_ps(MAGIC),
    );
    let n = _mm512_sub_ps(t, _mm512_set1_ps(MAGIC));
    let ni = _mm512_sub_epi32(
        _mm512_castps_si512(t),
        _mm512_set1_epi32(MAGIC.to_bits() as i32),
    );
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_HI), xc);
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_LO), r);
    let mut p = _mm512_set1_ps(1.987_569_1e-4);
    for c in [
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        1.666_666_5e-1,
        5.000_000_1e-1,
    ] {
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
    }
    let r2 = _mm512_mul_ps(r, r);
    let er = _mm512_add_ps(_mm512_fmadd_ps(p, r2, r), _mm512_set1_ps(1.0));
    let scale = _mm512_castsi512_ps(_mm512_slli_epi32::<23>(_mm512_add_epi32(
        ni,
        _mm512_set1_epi32(127),
    )));
    _mm512_maskz_mov_ps(!below, _mm512_mul_ps(er, scale))
}

/// The `f32` forward of `probs` with 16-lane registers.
///
/// # Safety
///
/// The CPU has AVX-512F and AVX2, and `T` and `A` are `f32`.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn forward_chunk<T, A>(
    g: &Attention,
    mask: Mask<'_, T>,
    probs: &mut [FwdProblem<'_, T, A>],
) {
    // SAFETY: `T` and `A` are `f32` (the caller's promise): each slice is itself.
    let f = |s: &[T]| unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<f32>(), s.len()) };
    debug_assert!(size_of::<T>() == 4 && size_of::<A>() == 4);
    let mask = mask.map(|(m, lay)| (f(m), lay));
    let mut buf = Buf::default();
    for (b, [q, k, v], o, lse) in probs.iter_mut() {
        let ops = [f(q), f(k), f(v)];
        // SAFETY: as above.
        let (o, lse) = unsafe {
            (
                std::slice::from_raw_parts_mut(o.as_mut_ptr().cast::<f32>(), o.len()),
                std::slice::from_raw_parts_mut(lse.as_mut_ptr().cast::<f32>(), lse.len()),
            )
        };
        // SAFETY: the CPU has AVX-512F and AVX2; `forward_problem` checks the lengths.
        unsafe { forward_problem(g, *b, ops, mask, o, lse, &mut buf) };
    }
}

/// The `f32` backward of `probs` with 16-lane registers.
///
/// # Safety
///
/// The CPU has AVX-512F and AVX2, and `T` and `A` are `f32`.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn backward_chunk<T, A>(
    g: &Attention,
    mask: Mask<'_, T>,
    probs: &mut [BwdProblem<'_, T, A>],
) {
    // SAFETY: `T` and `A` are `f32` (the caller's promise): each slice is itself.
    let f = |s: &[T]| unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<f32>(), s.len()) };
    // SAFETY: as above.
    let fm = |s: &mut [T]| unsafe {
        std::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<f32>(), s.len())
    };
    debug_assert!(size_of::<T>() == 4 && size_of::<A>() == 4);
    let mask = mask.map(|(m, lay)| (f(m), lay));
    let mut buf = Buf::default();
    for (b, ops, lse, [dq, dk, dv]) in probs.iter_mut() {
        let ops = ops.map(f);
        // SAFETY: as above.
        let lse = unsafe { std::slice::from_raw_parts(lse.as_ptr().cast::<f32>(), lse.len()) };
        let grads = [fm(dq), fm(dk), fm(dv)];
        // SAFETY: the CPU has AVX-512F and AVX2; `backward_problem` checks the lengths.
        unsafe { backward_problem(g, *b, ops, lse, mask, grads, &mut buf) };
    }
}

/// The forward of one problem: queries `q` (`[l][e]`), keys `k` (`[s][e]`), values `v`
/// (`[s][ev]`) into the output rows `o` (`[l][ev]`) and each row's log-sum-exp `lse`.
///
/// # Safety
///
/// The CPU has AVX-512F and AVX2. (The operands' lengths are checked.)
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn forward_problem(
    g: &Attention,
    b: usize,
    [q, k, v]: [&[f32]; 3],
    mask: Mask<'_, f32>,
    o: &mut [f32],
    lse: &mut [f32],
    buf: &mut Buf,
) {
    let sp = g.s.div_ceil(W) * W;
    assert!(q.len() >= g.l * g.e && k.len() >= g.s * g.e && v.len() >= g.s * g.ev);
    assert!(o.len() >= g.l * g.ev && lse.len() >= g.l);
    // SAFETY: the CPU has AVX-512F and AVX2 (checked at dispatch); `k` holds `s · e`.
    unsafe { transpose(&mut buf.kt, k, g.s, g.e, sp) };
    room(&mut buf.p, BR * sp, false);
    let mut r0 = 0;
    while r0 < g.l {
        if r0 + BR <= g.l {
            // SAFETY: the CPU has AVX-512F; rows `r0..r0 + BR` exist.
            unsafe { forward_block::<BR>(g, b, r0, q, v, mask, o, lse, buf) };
            r0 += BR;
        } else {
            // SAFETY: as above, for row `r0`.
            unsafe { forward_block::<1>(g, b, r0, q, v, mask, o, lse, buf) };
            r0 += 1;
        }
    }
}

/// `out[r·sp + t·W ..][..W] = scale · Σ_{c < depth} a[r·ars + c] · bt[c·sp + t·W ..]` for
/// rows `r < R` and tiles `t < tiles`: a block of rows times a transposed operand, two tiles
/// (sixteen accumulators for eight rows) at a time.
///
/// # Safety
///
/// The CPU has AVX-512F; `a` holds `R` rows of `depth` elements `ars` apart, `bt` holds `depth`
/// rows of `sp ≥ tiles · W`, and `out` `R` rows of `sp`.
#[inline]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn rows_times_t<const R: usize>(
    a: *const f32,
    ars: usize,
    depth: usize,
    bt: *const f32,
    sp: usize,
    tiles: usize,
    scale: f32,
    out: *mut f32,
) {
    let scale = _mm512_set1_ps(scale);
    let mut t = 0;
    while t < tiles {
        let two = t + 1 < tiles;
        let mut acc = [[_mm512_setzero_ps(); 2]; R];
        for c in 0..depth {
            // SAFETY: tiles `t` (and `t + 1`) of row `c` of `bt`, element `c` of each row of
            // `a`: inside, by the caller's promise.
            unsafe {
                let b0 = _mm512_loadu_ps(bt.add(c * sp + t * W));
                let b1 = if two {
                    _mm512_loadu_ps(bt.add(c * sp + t * W + W))
                } else {
                    b0
                };
                for (r, acc) in acc.iter_mut().enumerate() {
                    let x = _mm512_set1_ps(*a.add(r * ars + c));
                    acc[0] = _mm512_fmadd_ps(x, b0, acc[0]);
                    acc[1] = _mm512_fmadd_ps(x, b1, acc[1]);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            // SAFETY: tiles `t` (and `t + 1`) of row `r` of `out`.
            unsafe {
                _mm512_storeu_ps(out.add(r * sp + t * W), _mm512_mul_ps(acc[0], scale));
                if two {
                    _mm512_storeu_ps(out.add(r * sp + t * W + W), _mm512_mul_ps(acc[1], scale));
                }
            }
        }
        t += 2;
    }
}

/// `out[r·os + c] = sc[r] · Σ_{j < n} p[r·sp + j] · m[j·ms + c]` for rows `r < R` and columns
/// `c < w`: a block of probabilities times the rows of an operand read in place, two tiles of
/// columns at a time, the last under a lane mask.
///
/// # Safety
///
/// The CPU has AVX-512F; `p` holds `R` rows of `n` elements `sp` apart, `m` `n` rows of `w`
/// elements `ms` apart, and `out` `R` rows of `w` elements `os` apart.
#[inline]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn probs_times<const R: usize>(
    p: *const f32,
    sp: usize,
    n: usize,
    m: *const f32,
    ms: usize,
    w: usize,
    sc: [f32; R],
    out: *mut f32,
    os: usize,
) {
    let mut c0 = 0;
    while c0 < w {
        let (m0, m1) = (lanes(w - c0), lanes(w.saturating_sub(c0 + W)));
        let two = m1 != 0;
        let mut acc = [[_mm512_setzero_ps(); 2]; R];
        for j in 0..n {
            // SAFETY: row `j < n` of `m`, its columns `c0..` up to `w` under the masks, and
            // element `j` of each row of `p`: inside, by the caller's promise.
            unsafe {
                let v0 = _mm512_maskz_loadu_ps(m0, m.add(j * ms + c0));
                let v1 = if two {
                    _mm512_maskz_loadu_ps(m1, m.add(j * ms + c0 + W))
                } else {
                    v0
                };
                for (r, acc) in acc.iter_mut().enumerate() {
                    let x = _mm512_set1_ps(*p.add(r * sp + j));
                    acc[0] = _mm512_fmadd_ps(x, v0, acc[0]);
                    acc[1] = _mm512_fmadd_ps(x, v1, acc[1]);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            let s = _mm512_set1_ps(sc[r]);
            // SAFETY: row `r` of `out`, its columns `c0..` up to `w` under the masks.
            unsafe {
                _mm512_mask_storeu_ps(out.add(r * os + c0), m0, _mm512_mul_ps(acc[0], s));
                if two {
                    _mm512_mask_storeu_ps(out.add(r * os + c0 + W), m1, _mm512_mul_ps(acc[1], s));
                }
            }
        }
        c0 += 2 * W;
    }
}

/// `acc[j·ws + c] += Σ_{r < R} p[r·sp + j] · x[r·xs + c]` for keys `j < n` and columns
/// `c < w`: the transposed product, the block's rows of `x` held in registers (two tiles at a
/// time) while each key's row of `acc` is read and written once.
///
/// # Safety
///
/// The CPU has AVX-512F; `p` holds `R` rows of `n` elements `sp` apart, `x` `R` rows of `w`
/// elements `xs` apart, and `acc` `n` rows of `ws ≥ w` rounded up to [`W`].
#[inline]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn add_transposed<const R: usize>(
    p: *const f32,
    sp: usize,
    n: usize,
    x: *const f32,
    xs: usize,
    w: usize,
    acc: *mut f32,
    ws: usize,
) {
    let mut c0 = 0;
    while c0 < w {
        let (m0, m1) = (lanes(w - c0), lanes(w.saturating_sub(c0 + W)));
        let two = m1 != 0;
        // SAFETY: columns `c0..` of each of the `R` rows of `x`, up to `w` under the masks.
        let rows: [[__m512; 2]; R] = std::array::from_fn(|r| unsafe {
            let a = _mm512_maskz_loadu_ps(m0, x.add(r * xs + c0));
            let b = if two {
                _mm512_maskz_loadu_ps(m1, x.add(r * xs + c0 + W))
            } else {
                a
            };
            [a, b]
        });
        for j in 0..n {
            // SAFETY: row `j < n` of `acc`, whose `ws` columns cover both tiles where the
            // second is used (`w > c0 + W`, so `ws ≥ c0 + 2W`); element `j` of each row of `p`.
            unsafe {
                let d = acc.add(j * ws + c0);
                let mut a0 = _mm512_loadu_ps(d);
                let mut a1 = if two { _mm512_loadu_ps(d.add(W)) } else { a0 };
                for (r, x) in rows.iter().enumerate() {
                    let pr = _mm512_set1_ps(*p.add(r * sp + j));
                    a0 = _mm512_fmadd_ps(pr, x[0], a0);
                    a1 = _mm512_fmadd_ps(pr, x[1], a1);
                }
                _mm512_storeu_ps(d, a0);
                if two {
                    _mm512_storeu_ps(d.add(W), a1);
                }
            }
        }
        c0 += 2 * W;
    }
}

/// Each lane of tile `t` that row `i` sees (its first `n` keys).
#[inline(always)]
fn seen(n: usize, t: usize) -> __mmask16 {
    lanes(n.saturating_sub(t * W))
}

/// Adds the explicit mask of rows `r0..r0 + R` to their scores in `p` (`[R][sp]`).
///
/// # Safety
///
/// `p` holds `R` rows of `sp ≥ s` scores.
#[inline]
unsafe fn add_mask<const R: usize>(
    g: &Attention,
    b: usize,
    r0: usize,
    mask: Mask<'_, f32>,
    p: *mut f32,
) {
    let sp = g.s.div_ceil(W) * W;
    if let Some((m, lay)) = mask {
        for r in 0..R {
            let i = r0 + r;
            // SAFETY: row `r` of `p` holds `sp ≥ keys(i)` scores.
            let row = unsafe { std::slice::from_raw_parts_mut(p.add(r * sp), g.keys(i)) };
            for (j, x) in row.iter_mut().enumerate() {
                *x += m[lay.at(b, i, j)];
            }
        }
    }
}

/// The softmax of rows `r0..r0 + R`, whose scores are `p` (`[R][sp]`, `tiles` tiles each),
/// left unnormalised in `p` (zero past each row's keys), with each row's log-sum-exp in
/// `lse`; returns the reciprocals of the rows' sums. The rows go side by side, so that their
/// chains of maxima, exponentials and sums overlap. A row that sees no key is zero (its
/// log-sum-exp `+inf`), or NaN if its scores were.
///
/// # Safety
///
/// The CPU has AVX-512F; `p` holds `R` rows of `sp ≥ tiles · W` scores.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn softmax_rows<const R: usize>(
    g: &Attention,
    b: usize,
    r0: usize,
    mask: Mask<'_, f32>,
    p: *mut f32,
    tiles: usize,
    lse: &mut [f32],
) -> [f32; R] {
    let sp = g.s.div_ceil(W) * W;
    // SAFETY: the caller's promise.
    unsafe { add_mask::<R>(g, b, r0, mask, p) };
    let n: [usize; R] = std::array::from_fn(|r| g.keys(r0 + r));
    let ninf = _mm512_set1_ps(f32::NEG_INFINITY);
    let (mut mx, mut nan) = ([ninf; R], [0 as __mmask16; R]);
    for t in 0..tiles {
        for r in 0..R {
            // SAFETY: tile `t` of row `r`; the lanes past the row's keys read as `-inf`.
            let x = unsafe { _mm512_mask_loadu_ps(ninf, seen(n[r], t), p.add(r * sp + t * W)) };
            nan[r] |= _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x);
            // `max(x, mx)` ignores a NaN `x`.
            mx[r] = _mm512_max_ps(x, mx[r]);
        }
    }
    let m: [f32; R] = std::array::from_fn(|r| _mm512_reduce_max_ps(mx[r]));
    let lo = _mm512_set1_ps(floor::<f32>());
    let mut sum = [_mm512_setzero_ps(); R];
    for t in 0..tiles {
        for r in 0..R {
            // SAFETY: tile `t` of row `r`, as above; the CPU has AVX-512F.
            unsafe {
                let at = p.add(r * sp + t * W);
                let x = _mm512_mask_loadu_ps(ninf, seen(n[r], t), at);
                let y = exp_nonpositive(_mm512_sub_ps(x, _mm512_set1_ps(m[r])), lo);
                sum[r] = _mm512_add_ps(sum[r], y);
                _mm512_storeu_ps(at, y);
            }
        }
    }
    let mut inv = [1f32; R];
    for r in 0..R {
        if m[r] == f32::NEG_INFINITY {
            // No key seen: zeros, as PyTorch; unless the scores were NaN.
            let z = if nan[r] != 0 { f32::NAN } else { 0.0 };
            // SAFETY: row `r` holds `tiles · W ≤ sp` values.
            unsafe { std::slice::from_raw_parts_mut(p.add(r * sp), tiles * W) }.fill(z);
            lse[r] = if nan[r] != 0 { f32::NAN } else { f32::INFINITY };
            continue;
        }
        let s = _mm512_reduce_add_ps(sum[r]);
        inv[r] = 1.0 / s;
        lse[r] = m[r] + s.ln();
    }
    inv
}

/// Rows `r0..r0 + R` of [`forward_problem`].
///
/// # Safety
///
/// As [`forward_problem`], with `buf` prepared by it and `r0 + R ≤ l`.
#[inline]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn forward_block<const R: usize>(
    g: &Attention,
    b: usize,
    r0: usize,
    q: &[f32],
    v: &[f32],
    mask: Mask<'_, f32>,
    o: &mut [f32],
    lse: &mut [f32],
    buf: &mut Buf,
) {
    let (e, ev, sp) = (g.e, g.ev, g.s.div_ceil(W) * W);
    let nk = g.keys(r0 + R - 1);
    let tiles = nk.div_ceil(W);
    let p = buf.p.as_mut_ptr();
    // SAFETY: rows `r0..r0 + R` of `q`, `kt` of `[e][sp]`, `p` of `[BR][sp]`, `R ≤ BR`.
    unsafe {
        rows_times_t::<R>(
            q.as_ptr().add(r0 * e),
            e,
            e,
            buf.kt.as_ptr(),
            sp,
            tiles,
            g.scale as f32,
            p,
        )
    };
    // Each row's softmax, unnormalised; `inv` keeps the reciprocal of its sum.
    // SAFETY: the CPU has AVX-512F; `p` holds the block's scores.
    let inv = unsafe { softmax_rows::<R>(g, b, r0, mask, p, tiles, &mut lse[r0..r0 + R]) };
    // SAFETY: `p` holds `nk ≤ tiles · W` probabilities per row, `v` `nk ≤ s` rows of `ev`, and the
    // output rows `r0..r0 + R` of `ev`.
    unsafe {
        probs_times::<R>(
            p,
            sp,
            nk,
            v.as_ptr(),
            ev,
            ev,
            inv,
            o.as_mut_ptr().add(r0 * ev),
            ev,
        )
    };
}

/// The backward of one problem: `dq` (`[l][e]`), `dk` (`[s][e]`), `dv` (`[s][ev]`) from the
/// operands, the output's gradient `dout` and the forward's output `out` and `lse`.
///
/// # Safety
///
/// The CPU has AVX-512F and AVX2. (The operands' lengths are checked.)
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn backward_problem(
    g: &Attention,
    b: usize,
    [q, k, v, out, dout]: [&[f32]; 5],
    lse: &[f32],
    mask: Mask<'_, f32>,
    [dq, dk, dv]: [&mut [f32]; 3],
    buf: &mut Buf,
) {
    let (l, s, e, ev) = (g.l, g.s, g.e, g.ev);
    let (sp, ep, evp) = (s.div_ceil(W) * W, e.div_ceil(W) * W, ev.div_ceil(W) * W);
    assert!(q.len() >= l * e && k.len() >= s * e && v.len() >= s * ev && lse.len() >= l);
    assert!(out.len() >= l * ev && dout.len() >= l * ev);
    assert!(dq.len() >= l * e && dk.len() >= s * e && dv.len() >= s * ev);
    // SAFETY: the CPU has AVX-512F and AVX2; `k` and `v` hold `s` rows of `e` and `ev`.
    unsafe {
        transpose(&mut buf.kt, k, s, e, sp);
        transpose(&mut buf.vt, v, s, ev, sp);
    }
    room(&mut buf.p, BR * sp, false);
    room(&mut buf.dp, BR * sp, false);
    room(&mut buf.dk, s * ep, true);
    room(&mut buf.dv, s * evp, true);
    let ops = [q, k, out, dout];
    let mut r0 = 0;
    while r0 < l {
        if r0 + BR <= l {
            // SAFETY: the CPU has AVX-512F; rows `r0..r0 + BR` exist.
            unsafe { backward_block::<BR>(g, b, r0, ops, lse, mask, dq, buf) };
            r0 += BR;
        } else {
            // SAFETY: as above, for row `r0`.
            unsafe { backward_block::<1>(g, b, r0, ops, lse, mask, dq, buf) };
            r0 += 1;
        }
    }
    let scale = g.scale as f32;
    for (j, row) in dk.chunks_exact_mut(e.max(1)).take(s).enumerate() {
        for (d, x) in row.iter_mut().zip(&buf.dk[j * ep..]) {
            *d = x * scale;
        }
    }
    for (j, row) in dv.chunks_exact_mut(ev.max(1)).take(s).enumerate() {
        row.copy_from_slice(&buf.dv[j * evp..][..ev]);
    }
}

/// Rows `r0..r0 + R` of [`backward_problem`].
///
/// # Safety
///
/// As [`backward_problem`], with `buf` prepared by it and `r0 + R ≤ l`.
#[inline]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn backward_block<const R: usize>(
    g: &Attention,
    b: usize,
    r0: usize,
    [q, k, out, dout]: [&[f32]; 4],
    lse: &[f32],
    mask: Mask<'_, f32>,
    dq: &mut [f32],
    buf: &mut Buf,
) {
    let (e, ev) = (g.e, g.ev);
    let (sp, ep, evp) = (g.s.div_ceil(W) * W, e.div_ceil(W) * W, ev.div_ceil(W) * W);
    let nk = g.keys(r0 + R - 1);
    let tiles = nk.div_ceil(W);
    let (p, dp) = (buf.p.as_mut_ptr(), buf.dp.as_mut_ptr());
    let (qb, db) = (
        q.as_ptr().wrapping_add(r0 * e),
        dout.as_ptr().wrapping_add(r0 * ev),
    );
    // P = exp(S − lse), zero past each row's keys (and everywhere in a row that sees none).
    // SAFETY: the block's rows of `q`, `kt` of `[e][sp]`, `p` of `[BR][sp]`, `R ≤ BR`.
    unsafe { rows_times_t::<R>(qb, e, e, buf.kt.as_ptr(), sp, tiles, g.scale as f32, p) };
    // SAFETY: `p` holds the block's scores.
    unsafe { add_mask::<R>(g, b, r0, mask, p) };
    let (lo, ninf) = (
        _mm512_set1_ps(floor::<f32>()),
        _mm512_set1_ps(f32::NEG_INFINITY),
    );
    for t in 0..tiles {
        for r in 0..R {
            let i = r0 + r;
            // SAFETY: tile `t` of row `r`; the lanes past the row's keys read as `-inf` (so
            // their probability is zero) and `lse` is `+inf` for a row that sees none.
            unsafe {
                let at = p.add(r * sp + t * W);
                let x = _mm512_mask_loadu_ps(ninf, seen(g.keys(i), t), at);
                let y = exp_nonpositive(_mm512_sub_ps(x, _mm512_set1_ps(lse[i])), lo);
                _mm512_storeu_ps(at, y);
            }
        }
    }
    // dP = dO · Vᵀ, then dS = P ⊙ (dP − rowsum(dO ⊙ O)).
    // SAFETY: the block's rows of `dout`, `vt` of `[ev][sp]`, `dp` of `[BR][sp]`.
    unsafe { rows_times_t::<R>(db, ev, ev, buf.vt.as_ptr(), sp, tiles, 1.0, dp) };
    for r in 0..R {
        let i = r0 + r;
        let d: f32 = out[i * ev..][..ev]
            .iter()
            .zip(&dout[i * ev..][..ev])
            .map(|(o, g)| o * g)
            .sum();
        let dv = _mm512_set1_ps(d);
        for t in 0..tiles {
            // SAFETY: tile `t < tiles` of row `r` of `p` and `dp`.
            unsafe {
                let (pp, dd) = (p.add(r * sp + t * W), dp.add(r * sp + t * W));
                let ds = _mm512_mul_ps(_mm512_loadu_ps(pp), _mm512_sub_ps(_mm512_loadu_ps(dd), dv));
                _mm512_storeu_ps(dd, ds);
            }
        }
    }
    // SAFETY: `p` and `dp` hold `nk` values per row; the block's rows of `dout` and `q`;
    // `dv` and `dk` hold `s ≥ nk` rows of `evp` and `ep`; `k` `nk` rows of `e`; `dq` the
    // block's rows of `e`.
    unsafe {
        // dV += Pᵀ · dO, dK += dSᵀ · Q (scaled at the end), dQ = dS · K · scale.
        add_transposed::<R>(p, sp, nk, db, ev, ev, buf.dv.as_mut_ptr(), evp);
        add_transposed::<R>(dp, sp, nk, qb, e, e, buf.dk.as_mut_ptr(), ep);
        probs_times::<R>(
            dp,
            sp,
            nk,
            k.as_ptr(),
            e,
            e,
            [g.scale as f32; R],
            dq.as_mut_ptr().add(r0 * e),
            e,
        );
    }
}
