//! The `f32` forward with 16-lane registers, where the CPU has AVX-512F.
//!
//! The same computation as the generic forward, laid out for the wider registers: eight query
//! rows at a time, their scores against two tiles of 16 keys in sixteen accumulators (each
//! query element broadcast once for both tiles), the softmax of each row with a vectorised
//! exponential, and the products with the values read in place (rows of `v`, the last tile
//! under a lane mask), each row divided by its sum once at the end. Keys are transposed once
//! per problem; nothing else is copied or zero-filled.

use super::{Mask, floor};
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
    /// A block's scores, then its unnormalised probabilities, `[BR][sp]`.
    p: Vec<f32>,
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

/// The forward of one problem: queries `q` (`[l][e]`), keys `k` (`[s][e]`), values `v`
/// (`[s][ev]`) into the output rows `o` (`[l][ev]`) and each row's log-sum-exp `lse`.
///
/// # Safety
///
/// The CPU has AVX-512F; the operands hold at least the elements their shapes say.
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
    buf.kt.clear();
    buf.kt.resize(g.e * sp, 0.0);
    // SAFETY: AVX-512F implies the AVX2 the copy needs (checked at dispatch); `k` holds `s`
    // rows of `e` and `kt` `e` rows of `sp ≥ s`, apart.
    unsafe { copy_cols_to_rows(k.as_ptr(), g.e, g.e, g.s, buf.kt.as_mut_ptr(), sp) };
    if buf.p.len() < BR * sp {
        buf.p.resize(BR * sp, 0.0);
    }
    let mut r0 = 0;
    while r0 < g.l {
        if r0 + BR <= g.l {
            // SAFETY: the CPU has AVX-512F; rows `r0..r0 + BR` exist.
            unsafe { block::<BR>(g, b, r0, q, v, mask, o, lse, buf) };
            r0 += BR;
        } else {
            // SAFETY: as above, for row `r0`.
            unsafe { block::<1>(g, b, r0, q, v, mask, o, lse, buf) };
            r0 += 1;
        }
    }
}

/// Rows `r0..r0 + R` of [`forward_problem`].
///
/// # Safety
///
/// As [`forward_problem`], and `r0 + R ≤ l`.
#[inline]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn block<const R: usize>(
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
    let (e, ev) = (g.e, g.ev);
    let sp = g.s.div_ceil(W) * W;
    let nk = g.keys(r0 + R - 1);
    let tiles = nk.div_ceil(W);
    let scale = _mm512_set1_ps(g.scale as f32);
    let (qp, kt, p) = (
        q.as_ptr().wrapping_add(r0 * e),
        buf.kt.as_ptr(),
        buf.p.as_mut_ptr(),
    );
    // Scores, two tiles of keys at a time.
    let mut t = 0;
    while t < tiles {
        let two = t + 1 < tiles;
        let mut acc = [[_mm512_setzero_ps(); 2]; R];
        for c in 0..e {
            // SAFETY: `kt` is `[e][sp]` and tiles `t` (and `t + 1`) lie below `sp`; the
            // block's rows of `q` have `e` elements each.
            unsafe {
                let k0 = _mm512_loadu_ps(kt.add(c * sp + t * W));
                let k1 = if two {
                    _mm512_loadu_ps(kt.add(c * sp + t * W + W))
                } else {
                    k0
                };
                for (r, a) in acc.iter_mut().enumerate() {
                    let x = _mm512_set1_ps(*qp.add(r * e + c));
                    a[0] = _mm512_fmadd_ps(x, k0, a[0]);
                    a[1] = _mm512_fmadd_ps(x, k1, a[1]);
                }
            }
        }
        for (r, a) in acc.iter().enumerate() {
            // SAFETY: `p` is `[BR][sp]`, `R ≤ BR`.
            unsafe {
                _mm512_storeu_ps(p.add(r * sp + t * W), _mm512_mul_ps(a[0], scale));
                if two {
                    _mm512_storeu_ps(p.add(r * sp + t * W + W), _mm512_mul_ps(a[1], scale));
                }
            }
        }
        t += 2;
    }
    // Each row's softmax, unnormalised; `inv` keeps the reciprocal of its sum.
    let width = tiles * W;
    let lo = _mm512_set1_ps(floor::<f32>());
    let mut inv = [1f32; R];
    for (r, inv) in inv.iter_mut().enumerate() {
        let i = r0 + r;
        let n = g.keys(i);
        // SAFETY: row `r` of `p` has `sp ≥ width` elements.
        let row = unsafe { std::slice::from_raw_parts_mut(p.add(r * sp), width) };
        if let Some((m, lay)) = mask {
            for (j, x) in row[..n].iter_mut().enumerate() {
                *x += m[lay.at(b, i, j)];
            }
        }
        row[n..].fill(f32::NEG_INFINITY);
        let mut mx = _mm512_set1_ps(f32::NEG_INFINITY);
        for c in row.chunks_exact(W) {
            // SAFETY: `c` has `W` elements. `max(x, mx)` ignores a NaN `x`.
            mx = _mm512_max_ps(unsafe { _mm512_loadu_ps(c.as_ptr()) }, mx);
        }
        let m = _mm512_reduce_max_ps(mx);
        if m == f32::NEG_INFINITY {
            // No key seen: zeros, as PyTorch; unless the scores were all NaN.
            let nan = row.iter().any(|x| x.is_nan());
            row.fill(if nan { f32::NAN } else { 0.0 });
            lse[i] = if nan { f32::NAN } else { f32::INFINITY };
            continue;
        }
        let (mv, mut sum) = (_mm512_set1_ps(m), _mm512_setzero_ps());
        for c in row.chunks_exact_mut(W) {
            // SAFETY: `c` has `W` elements; the CPU has AVX-512F.
            unsafe {
                let y = exp_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(c.as_ptr()), mv), lo);
                sum = _mm512_add_ps(sum, y);
                _mm512_storeu_ps(c.as_mut_ptr(), y);
            }
        }
        let s = _mm512_reduce_add_ps(sum);
        *inv = 1.0 / s;
        lse[i] = m + s.ln();
    }
    // The rows times the values, two tiles of the value width at a time.
    let (vp, op) = (v.as_ptr(), o.as_mut_ptr().wrapping_add(r0 * ev));
    let mut c0 = 0;
    while c0 < ev {
        let (m0, m1) = (lanes(ev - c0), lanes(ev.saturating_sub(c0 + W)));
        let two = m1 != 0;
        let mut acc = [[_mm512_setzero_ps(); 2]; R];
        for j in 0..nk {
            // SAFETY: row `j < s` of `v` has `ev` elements and the lane masks stop there;
            // `p` holds `nk ≤ width` probabilities per row.
            unsafe {
                let v0 = _mm512_maskz_loadu_ps(m0, vp.add(j * ev + c0));
                let v1 = if two {
                    _mm512_maskz_loadu_ps(m1, vp.add(j * ev + c0 + W))
                } else {
                    v0
                };
                for (r, a) in acc.iter_mut().enumerate() {
                    let x = _mm512_set1_ps(*p.add(r * sp + j));
                    a[0] = _mm512_fmadd_ps(x, v0, a[0]);
                    a[1] = _mm512_fmadd_ps(x, v1, a[1]);
                }
            }
        }
        for (r, a) in acc.iter().enumerate() {
            let s = _mm512_set1_ps(inv[r]);
            // SAFETY: output row `r0 + r` has `ev` elements; the masks stop there.
            unsafe {
                _mm512_mask_storeu_ps(op.add(r * ev + c0), m0, _mm512_mul_ps(a[0], s));
                if two {
                    _mm512_mask_storeu_ps(op.add(r * ev + c0 + W), m1, _mm512_mul_ps(a[1], s));
                }
            }
        }
        c0 += 2 * W;
    }
}
