//! Single-row products (`m == 1`: a batch-1 forward), `f32` with AVX2 and FMA, and with
//! 16-lane loops where the CPU has AVX-512F.
//!
//! `gemm` packs both operands into tiles meant to be reused across many rows; a single row never
//! reuses them, so the product is a pass over the matrix with the packing on top. These loops
//! stream the matrix once, straight from its storage: one `[1, 784] @ [512, 784]ᵀ` took 14.8 µs
//! through `gemm` on two threads and takes about 9 µs here on a Zen 4 (1.6 MB read from L3 at
//! about 176 GB/s). The calling thread takes the first band and a spinning helper the second,
//! so each core reads the same band on every call; on a CPU with 2 MiB of L2 per core a
//! model's bands then stay in L2 between forwards, and the L2's rate bounds the product (about
//! 13 µs on a 2-vCPU Xeon with AVX-512).
//!
//! Every output element is computed by the same sequence of operations whatever the thread
//! count or the band it falls in, so results do not depend on `EDDY_THREADS`.

/// Rows per group in the dot-product form: with two 8-lane accumulators each, eight
/// independent FMA chains are in flight.
const ROWS: usize = 4;

/// Columns per block in the row-major form: eight 8-lane accumulators.
const COLS: usize = 64;

/// From this many multiply-adds on, the product is split over the kernel pool.
const PAR_MIN: usize = 32 * 1024;

/// Bands per pool thread: the threads' halves are not equally fast (the caller starts first,
/// a core may be shared), and the faster one takes over the slower one's last bands.
const BANDS: usize = 8;

/// The fewest multiply-adds in a band (a claim is an atomic compare-and-swap).
const BAND_MIN: usize = 8 * 1024;

/// `y = x @ B` for one row `x` of length `k`, `B` starting at `b[0]` with row stride `rs` and
/// column stride `cs`, if this CPU has AVX2 and FMA and `B` has contiguous rows (`cs == 1`)
/// or columns (`rs == 1`, a transposed weight). Returns whether it ran.
///
/// Called directly (not through an instruction) by `eddy bench --roof`, as the floor of the
/// batch-1 forward.
///
/// # Panics
///
/// If `B` reaches past `b` (the caller checked the layout).
///
/// # Examples
///
/// ```
/// // `[1, 3] @ wᵀ` for `w` of `[2, 3]`: `B = wᵀ` has row stride 1 and column stride 3.
/// let (x, w) = ([1f32, 2., 3.], [1f32, 0., -1., 2., 2., 2.]);
/// let mut y = [0f32; 2];
/// if eddy_ops::cpu::gemv::gemv(&x, &w, 1, 3, &mut y) {
///     assert_eq!(y, [-2., 12.]);
/// } // else this CPU lacks AVX2 and FMA: `matmul` takes the general path
/// ```
pub fn gemv(x: &[f32], b: &[f32], rs: usize, cs: usize, y: &mut [f32]) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if !(std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma"))
        {
            return false;
        }
        let k = x.len();
        let n = y.len();
        if k == 0 || n == 0 {
            y.fill(0.0);
            return true;
        }
        let wide = std::arch::is_x86_feature_detected!("avx512f");
        if rs == 1 {
            assert!((n - 1) * cs + k <= b.len(), "gemv: B past its storage");
            // SAFETY: AVX2 and FMA were detected above, AVX-512F where `wide`.
            split(y, k, ROWS, |s, ys| unsafe {
                if wide {
                    avx512::dot_band(x, b, cs, s, ys)
                } else {
                    avx2::dot_band(x, b, cs, s, ys)
                }
            });
        } else if cs == 1 {
            assert!((k - 1) * rs + n <= b.len(), "gemv: B past its storage");
            // SAFETY: as above.
            split(y, k, COLS, |s, ys| unsafe {
                avx2::axpy_band(x, b, rs, s, ys)
            });
        } else {
            return false;
        }
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (x, b, rs, cs, y);
        false
    }
}

/// Runs `f(start, band)` over `y` cut into about [`BANDS`] bands per pool thread (multiples
/// of `unit`, each at least [`BAND_MIN`] multiply-adds), or over all of `y` at once when the
/// product is small. The caller claims bands from the front and the helper from the back
/// (`eddy_vm::par`), so the two meet where their speeds put them, and each reads about the
/// same rows, from its own L2, on every call.
#[cfg(target_arch = "x86_64")]
fn split(y: &mut [f32], k: usize, unit: usize, f: impl Fn(usize, &mut [f32]) + Sync) {
    let n = y.len();
    let threads = eddy_vm::par::threads();
    if n * k < PAR_MIN || threads < 2 || n < 2 * unit {
        f(0, y);
        return;
    }
    let band = n
        .div_ceil(threads * BANDS)
        .max(BAND_MIN.div_ceil(k))
        .next_multiple_of(unit);
    eddy_vm::par::for_each_chunk_mut(y, band, f);
}

/// Checks that rows `start..start + n` of `w` (`k` elements each, `ld` apart) lie in `w`, and
/// returns the pointer to row `start + j`, for `j < n`.
///
/// # Panics
///
/// If they do not (the caller checked the layout).
#[cfg(target_arch = "x86_64")]
#[inline]
fn rows_of(k: usize, w: &[f32], ld: usize, start: usize, n: usize) -> impl Fn(usize) -> *const f32 {
    assert!(
        n == 0 || (start + n - 1) * ld + k <= w.len(),
        "gemv: rows {start}..{} of {k} past B's {} elements",
        start + n,
        w.len()
    );
    let wp = w.as_ptr();
    // `wrapping_add`: computing the pointer is safe; reading it is `dot_rows`', within bounds.
    move |j| wp.wrapping_add((start + j) * ld)
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{COLS, ROWS};
    use std::arch::x86_64::*;

    /// `y[r] = x · row (start + r) of w`, rows `ld` apart, `ROWS` rows at a time. Each row's
    /// result is the same whichever group it falls in.
    ///
    /// # Safety
    ///
    /// The CPU has AVX2 and FMA. (Bounds are checked once per band, by [`super::rows_of`].)
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn dot_band(x: &[f32], w: &[f32], ld: usize, start: usize, y: &mut [f32]) {
        let row = super::rows_of(x.len(), w, ld, start, y.len());
        let mut j = 0;
        while j + ROWS <= y.len() {
            // SAFETY: `row` checked every row of the band against `w`.
            let r = unsafe { dot_rows(x, [row(j), row(j + 1), row(j + 2), row(j + 3)]) };
            y[j..j + ROWS].copy_from_slice(&r);
            j += ROWS;
        }
        while j < y.len() {
            // SAFETY: as above.
            y[j] = unsafe { dot_rows(x, [row(j)])[0] };
            j += 1;
        }
    }

    /// The dot products of `x` with `R` rows of its length: per row two 8-lane FMA
    /// accumulators over 16-element steps, added lane-wise and reduced pairwise, then the tail
    /// one FMA at a time.
    ///
    /// # Safety
    ///
    /// Each of `rows` points to `x.len()` readable elements.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn dot_rows<const R: usize>(x: &[f32], rows: [*const f32; R]) -> [f32; R] {
        let k = x.len();
        let full = k / 16 * 16;
        let mut acc = [[_mm256_setzero_ps(); 2]; R];
        let xp = x.as_ptr();
        let mut i = 0;
        while i < full {
            // SAFETY: `i + 16 <= full <= k`, and `x` and every row have `k` elements.
            unsafe {
                let x0 = _mm256_loadu_ps(xp.add(i));
                let x1 = _mm256_loadu_ps(xp.add(i + 8));
                for r in 0..R {
                    let p = rows[r].add(i);
                    acc[r][0] = _mm256_fmadd_ps(x0, _mm256_loadu_ps(p), acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(x1, _mm256_loadu_ps(p.add(8)), acc[r][1]);
                }
            }
            i += 16;
        }
        let mut out = [0f32; R];
        for r in 0..R {
            let s = _mm256_add_ps(acc[r][0], acc[r][1]);
            let q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps::<1>(s));
            let q = _mm_add_ps(q, _mm_movehl_ps(q, q));
            let q = _mm_add_ss(q, _mm_shuffle_ps::<1>(q, q));
            let mut t = _mm_cvtss_f32(q);
            for (i, a) in x.iter().enumerate().skip(full) {
                // SAFETY: `i < k`.
                t = a.mul_add(unsafe { *rows[r].add(i) }, t);
            }
            out[r] = t;
        }
        out
    }

    /// `y[c] = Σ_i x[i] · b[i·ld + start + c]`, `COLS` columns at a time; every column sums
    /// over `i` in order with one FMA per term, inside a block or not.
    ///
    /// # Safety
    ///
    /// The CPU has AVX2 and FMA. (Bounds are checked once per band, below.)
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn axpy_band(x: &[f32], b: &[f32], ld: usize, start: usize, y: &mut [f32]) {
        let n = y.len();
        let k = x.len();
        assert!(
            k == 0 || n == 0 || (k - 1) * ld + start + n <= b.len(),
            "gemv: B past its storage"
        );
        let bp = b.as_ptr();
        let mut c = 0;
        while c + COLS <= n {
            let mut acc = [_mm256_setzero_ps(); COLS / 8];
            for (i, &xi) in x.iter().enumerate() {
                let xv = _mm256_set1_ps(xi);
                // SAFETY: columns `start + c .. start + c + COLS` of row `i < k` are in `b`
                // (asserted above: `i * ld + start + c + COLS <= (k - 1) * ld + start + n`).
                unsafe {
                    let p = bp.add(i * ld + start + c);
                    for (v, a) in acc.iter_mut().enumerate() {
                        *a = _mm256_fmadd_ps(xv, _mm256_loadu_ps(p.add(8 * v)), *a);
                    }
                }
            }
            for (v, a) in acc.iter().enumerate() {
                // SAFETY: `c + 8 * v + 8 <= c + COLS <= n`.
                unsafe { _mm256_storeu_ps(y.as_mut_ptr().add(c + 8 * v), *a) };
            }
            c += COLS;
        }
        for (cc, yc) in y.iter_mut().enumerate().skip(c) {
            let mut t = 0f32;
            for (i, &xi) in x.iter().enumerate() {
                // SAFETY: as above, for column `start + cc < start + n`.
                t = xi.mul_add(unsafe { *bp.add(i * ld + start + cc) }, t);
            }
            *yc = t;
        }
    }
}

/// The dot-product form with 16-lane registers, where the CPU has AVX-512F: a row read from L2
/// moves 64 bytes per load instead of 32. It sums its lanes in another order than the AVX2
/// loop, the same for every row and band on a given CPU. (The row-major form, which a linear
/// layer's transposed weight does not take, stays with AVX2.)
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::ROWS;
    use std::arch::x86_64::*;

    /// As [`avx2::dot_band`](super::avx2::dot_band), eight rows at a time (sixteen
    /// accumulators; about 5 % faster than four from L2 on the Xeon this was tuned on).
    ///
    /// # Safety
    ///
    /// The CPU has AVX-512F. (Bounds are checked once per band, by [`super::rows_of`].)
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn dot_band(x: &[f32], w: &[f32], ld: usize, start: usize, y: &mut [f32]) {
        let row = super::rows_of(x.len(), w, ld, start, y.len());
        let mut j = 0;
        while j + 2 * ROWS <= y.len() {
            // (Eight pointers in registers: `array::from_fn` built them on the stack, out of
            // line, and reloading them stalled on store forwarding, 8 % of the kernel.)
            let rows = [
                row(j),
                row(j + 1),
                row(j + 2),
                row(j + 3),
                row(j + 4),
                row(j + 5),
                row(j + 6),
                row(j + 7),
            ];
            // SAFETY: `row` checked every row of the band against `w`.
            let r = unsafe { dot_rows(x, rows) };
            y[j..j + 2 * ROWS].copy_from_slice(&r);
            j += 2 * ROWS;
        }
        while j < y.len() {
            // SAFETY: as above.
            y[j] = unsafe { dot_rows(x, [row(j)])[0] };
            j += 1;
        }
    }

    /// Per row two 16-lane FMA accumulators over 32-element steps, one more 16-element step
    /// into the first when 16 or more remain, the two added and reduced, then the tail one FMA
    /// at a time.
    ///
    /// # Safety
    ///
    /// Each of `rows` points to `x.len()` readable elements.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn dot_rows<const R: usize>(x: &[f32], rows: [*const f32; R]) -> [f32; R] {
        let k = x.len();
        let full = k / 32 * 32;
        let half = if k - full >= 16 { full + 16 } else { full };
        let mut acc = [[_mm512_setzero_ps(); 2]; R];
        let xp = x.as_ptr();
        let mut i = 0;
        while i < full {
            // SAFETY: `i + 32 <= full <= k`, and `x` and every row have `k` elements.
            unsafe {
                let x0 = _mm512_loadu_ps(xp.add(i));
                let x1 = _mm512_loadu_ps(xp.add(i + 16));
                for r in 0..R {
                    let p = rows[r].add(i);
                    acc[r][0] = _mm512_fmadd_ps(x0, _mm512_loadu_ps(p), acc[r][0]);
                    acc[r][1] = _mm512_fmadd_ps(x1, _mm512_loadu_ps(p.add(16)), acc[r][1]);
                }
            }
            i += 32;
        }
        if half > full {
            // SAFETY: `full + 16 == half <= k`.
            unsafe {
                let x0 = _mm512_loadu_ps(xp.add(full));
                for r in 0..R {
                    let p = rows[r].add(full);
                    acc[r][0] = _mm512_fmadd_ps(x0, _mm512_loadu_ps(p), acc[r][0]);
                }
            }
        }
        let mut out = [0f32; R];
        for r in 0..R {
            let mut t = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]));
            for (i, a) in x.iter().enumerate().skip(half) {
                // SAFETY: `i < k`.
                t = a.mul_add(unsafe { *rows[r].add(i) }, t);
            }
            out[r] = t;
        }
        out
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let h = (i as u32).wrapping_mul(2654435761).wrapping_add(seed);
                (h % 1000) as f32 / 500.0 - 1.0
            })
            .collect()
    }

    fn close(got: f32, want: f64) -> bool {
        (got as f64 - want).abs() <= 1e-4 * (1.0 + want.abs())
    }

    #[test]
    fn both_forms_match_a_reference_and_do_not_depend_on_threads() {
        if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
            return;
        }
        // Sizes around the lane, group, block and parallel thresholds; padded rows (ld > k).
        for &(k, n) in &[
            (1, 1),
            (15, 3),
            (17, 5),
            (784, 512),
            (512, 10),
            (33, 130),
            (300, 257),
            (48, 300),
            (31, 129),
            (800, 13),
        ] {
            let x = values(k, 1);
            // Both forms, with padded rows: `B[i, j]` at `i * rs + j * cs`.
            let (ld_t, ld_n) = (k + 3, n + 5);
            for (rs, cs, len) in [(1, ld_t, n * ld_t), (ld_n, 1, k * ld_n)] {
                let b = values(len, 2);
                let mut y = vec![0f32; n];
                assert!(gemv(&x, &b, rs, cs, &mut y));
                for (j, &got) in y.iter().enumerate() {
                    let want: f64 = (0..k)
                        .map(|i| x[i] as f64 * b[i * rs + j * cs] as f64)
                        .sum();
                    assert!(close(got, want), "{k}x{n} rs {rs} [{j}]: {got} vs {want}");
                }
                let wide = is_x86_feature_detected!("avx512f");
                let mut serial = vec![0f32; n];
                let mut narrow = vec![0f32; n];
                // SAFETY: the features were detected above.
                unsafe {
                    match (rs == 1, wide) {
                        (true, true) => avx512::dot_band(&x, &b, cs, 0, &mut serial),
                        (true, false) => avx2::dot_band(&x, &b, cs, 0, &mut serial),
                        (false, _) => avx2::axpy_band(&x, &b, rs, 0, &mut serial),
                    }
                    if rs == 1 {
                        avx2::dot_band(&x, &b, cs, 0, &mut narrow)
                    }
                }
                assert_eq!(y, serial, "{k}x{n} rs {rs}: bands changed the result");
                if rs == 1 {
                    // The AVX2 loop, whichever `gemv` picked on this CPU.
                    for (j, &got) in narrow.iter().enumerate() {
                        let want: f64 = (0..k).map(|i| x[i] as f64 * b[i + j * cs] as f64).sum();
                        assert!(close(got, want), "AVX2 {k}x{n} [{j}]: {got} vs {want}");
                    }
                }
            }
        }
        // Neither form: a strided B is left to gemm.
        assert!(!gemv(&[1.0; 4], &[0.0; 64], 4, 2, &mut [0.0; 2]));
    }
}
