//! Register transposes of f32 blocks (AVX2 8 × 8, AVX-512 16 × 16) for the products' operand
//! copies.

use std::arch::x86_64::*;

/// Writes the `rows × cols` matrix whose column `j` is the `rows` contiguous floats at
/// `src + j * ld` to `dst`, row-major with rows `ldd` floats apart: 16 × 16 blocks
/// transposed in AVX-512 registers where the CPU has AVX-512F, the rest in 8 × 8 AVX2
/// blocks, the edges one element at a time.
///
/// Why both widths: on this host (2 MiB of L2 per core) the 16 × 16 form moved a
/// 512 × 256 block in 37 µs against 65 µs, and the 512 × 128 left-operand copy of
/// `with_reordered` in 15 µs against 19 µs (medians of 9 runs of a probe).
///
/// # Safety
///
/// AVX2 is available; `src + i + j * ld` is readable and `dst + i * ldd + j` writable for
/// `i < rows`, `j < cols`, and the two do not overlap.
pub(crate) unsafe fn copy_cols_to_rows(
    src: *const f32,
    ld: usize,
    rows: usize,
    cols: usize,
    dst: *mut f32,
    ldd: usize,
) {
    if rows >= 16 && cols >= 16 && is_x86_feature_detected!("avx512f") {
        let (r16, c16) = (rows / 16 * 16, cols / 16 * 16);
        // SAFETY: AVX-512F was detected; the three calls split the caller's `rows × cols`
        // matrix into disjoint blocks (`r16 × c16`, the rows below it, the columns to its
        // right), each inside what the caller lets us read and write.
        unsafe {
            copy16(src, ld, r16, c16, dst, ldd);
            copy8(src.add(r16), ld, rows - r16, c16, dst.add(r16 * ldd), ldd);
            copy8(src.add(c16 * ld), ld, rows, cols - c16, dst.add(c16), ldd);
        }
    } else {
        // SAFETY: the caller's guarantees.
        unsafe { copy8(src, ld, rows, cols, dst, ldd) }
    }
}

/// [`copy_cols_to_rows`] for `rows` and `cols` that are multiples of 16, in 16 × 16
/// AVX-512 blocks.
///
/// # Safety
///
/// AVX-512F is available; `rows` and `cols` are multiples of 16; the pointers as for
/// [`copy_cols_to_rows`].
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn copy16(
    src: *const f32,
    ld: usize,
    rows: usize,
    cols: usize,
    dst: *mut f32,
    ldd: usize,
) {
    debug_assert!(rows.is_multiple_of(16) && cols.is_multiple_of(16));
    // SAFETY: every block lies inside the `rows × cols` matrix the caller lets us read
    // (`src`) and write (`dst`); AVX-512F is available (the caller's guarantee).
    unsafe {
        for j in (0..cols).step_by(16) {
            for i in (0..rows).step_by(16) {
                let v: [__m512; 16] =
                    std::array::from_fn(|c| _mm512_loadu_ps(src.add(i + (j + c) * ld)));
                for (r, row) in transpose16(v).iter().enumerate() {
                    _mm512_storeu_ps(dst.add((i + r) * ldd + j), *row);
                }
            }
        }
    }
}

/// The transpose of the 16 × 16 block whose rows are `r`, in four rounds of two-input
/// shuffles: pairs of floats, then of 64-bit pairs, then of 128-bit lanes twice.
#[inline]
#[target_feature(enable = "avx512f")]
fn transpose16(r: [__m512; 16]) -> [__m512; 16] {
    // t[2p], t[2p + 1]: rows 2p and 2p + 1 interleaved float by float (low, high halves
    // of each 128-bit lane).
    let t: [__m512; 16] = std::array::from_fn(|i| {
        let (a, b) = (r[i / 2 * 2], r[i / 2 * 2 + 1]);
        if i % 2 == 0 {
            _mm512_unpacklo_ps(a, b)
        } else {
            _mm512_unpackhi_ps(a, b)
        }
    });
    // u[4q + s]: the 4 × 4 transposes inside each 128-bit lane of rows 4q..4q + 4, from
    // t[4q + s / 2] and t[4q + 2 + s / 2], low (0x44) or high (0xEE) 64-bit pairs.
    let u: [__m512; 16] = std::array::from_fn(|i| {
        let (q, s) = (i / 4, i % 4);
        let (a, b) = (t[4 * q + s / 2], t[4 * q + 2 + s / 2]);
        if s % 2 == 0 {
            _mm512_shuffle_ps::<0x44>(a, b)
        } else {
            _mm512_shuffle_ps::<0xEE>(a, b)
        }
    });
    // v[8h + j]: even (0x88) or odd (0xDD) 128-bit lanes of u[8h + j % 4] and
    // u[8h + 4 + j % 4].
    let v: [__m512; 16] = std::array::from_fn(|i| {
        let (h, j) = (i / 8, i % 8);
        let (a, b) = (u[8 * h + j % 4], u[8 * h + 4 + j % 4]);
        if j < 4 {
            _mm512_shuffle_f32x4::<0x88>(a, b)
        } else {
            _mm512_shuffle_f32x4::<0xDD>(a, b)
        }
    });
    std::array::from_fn(|i| {
        let (a, b) = (v[i % 8], v[8 + i % 8]);
        if i < 8 {
            _mm512_shuffle_f32x4::<0x88>(a, b)
        } else {
            _mm512_shuffle_f32x4::<0xDD>(a, b)
        }
    })
}

/// [`copy_cols_to_rows`] in 8 × 8 AVX2 blocks only.
///
/// # Safety
///
/// As for [`copy_cols_to_rows`].
#[target_feature(enable = "avx2")]
pub(super) unsafe fn copy8(
    src: *const f32,
    ld: usize,
    rows: usize,
    cols: usize,
    dst: *mut f32,
    ldd: usize,
) {
    let (r8, c8) = (rows / 8 * 8, cols / 8 * 8);
    // SAFETY: every index stays below `rows` and `cols`, as the caller guarantees for both
    // pointers; AVX2 is available (the caller's guarantee).
    unsafe {
        for j in (0..c8).step_by(8) {
            for i in (0..r8).step_by(8) {
                let v: [__m256; 8] =
                    std::array::from_fn(|c| _mm256_loadu_ps(src.add(i + (j + c) * ld)));
                let t = transpose8(v);
                for (r, row) in t.iter().enumerate() {
                    _mm256_storeu_ps(dst.add((i + r) * ldd + j), *row);
                }
            }
        }
        let one = |i: usize, j: usize| *dst.add(i * ldd + j) = *src.add(i + j * ld);
        for j in 0..c8 {
            for i in r8..rows {
                one(i, j);
            }
        }
        for j in c8..cols {
            for i in 0..rows {
                one(i, j);
            }
        }
    }
}

/// The transpose of the 8 × 8 block whose rows are `v`.
#[inline]
#[target_feature(enable = "avx2")]
fn transpose8(v: [__m256; 8]) -> [__m256; 8] {
    let t0 = _mm256_unpacklo_ps(v[0], v[1]);
    let t1 = _mm256_unpackhi_ps(v[0], v[1]);
    let t2 = _mm256_unpacklo_ps(v[2], v[3]);
    let t3 = _mm256_unpackhi_ps(v[2], v[3]);
    let t4 = _mm256_unpacklo_ps(v[4], v[5]);
    let t5 = _mm256_unpackhi_ps(v[4], v[5]);
    let t6 = _mm256_unpacklo_ps(v[6], v[7]);
    let t7 = _mm256_unpackhi_ps(v[6], v[7]);
    let s0 = _mm256_shuffle_ps::<0x44>(t0, t2);
    let s1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
    let s2 = _mm256_shuffle_ps::<0x44>(t1, t3);
    let s3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
    let s4 = _mm256_shuffle_ps::<0x44>(t4, t6);
    let s5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
    let s6 = _mm256_shuffle_ps::<0x44>(t5, t7);
    let s7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
    [
        _mm256_permute2f128_ps::<0x20>(s0, s4),
        _mm256_permute2f128_ps::<0x20>(s1, s5),
        _mm256_permute2f128_ps::<0x20>(s2, s6),
        _mm256_permute2f128_ps::<0x20>(s3, s7),
        _mm256_permute2f128_ps::<0x31>(s0, s4),
        _mm256_permute2f128_ps::<0x31>(s1, s5),
        _mm256_permute2f128_ps::<0x31>(s2, s6),
        _mm256_permute2f128_ps::<0x31>(s3, s7),
    ]
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    /// The register transposes (the dispatching one, the 8 × 8 AVX2 one, and the 16 × 16
    /// AVX-512 one where the CPU has it) against an index-by-index copy, with edges in both
    /// dims, a column stride larger than the rows, and output rows wider than the matrix
    /// (whose gaps must stay untouched).
    #[test]
    fn copy_cols_to_rows_matches_index_copy() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
        let wide = is_x86_feature_detected!("avx512f");
        let shapes = [
            (8, 8, 8, 8),
            (21, 19, 37, 19),
            (64, 40, 256, 40),
            (7, 9, 7, 9),
            (16, 3, 16, 3),
            (24, 16, 24, 37),
            (13, 27, 13, 30),
            (16, 16, 16, 16),
            (48, 32, 64, 35),
            (37, 53, 40, 53),
            (17, 100, 17, 100),
        ];
        type Copy = unsafe fn(*const f32, usize, usize, usize, *mut f32, usize);
        let variants: [(&str, Copy); 3] = [
            ("dispatching", super::copy_cols_to_rows),
            ("8 x 8", super::copy8),
            ("16 x 16", super::copy16),
        ];
        for ((rows, cols, ld, ldd), (name, copy)) in shapes
            .into_iter()
            .flat_map(|s| variants.map(|v| (s, v)))
            // The 16 × 16 form only with AVX-512F and multiples of 16.
            .filter(|&((r, c, _, _), (n, _))| {
                n != "16 x 16" || (wide && r % 16 == 0 && c % 16 == 0)
            })
        {
            let src: Vec<f32> = (0..ld * cols).map(|v| v as f32).collect();
            let mut dst = vec![f32::NAN; rows * ldd];
            // SAFETY: AVX2 was detected; column `j` is `src[j * ld..j * ld + rows]` with
            // `rows <= ld`; `dst` holds `rows` rows of `ldd >= cols` floats.
            // The 16 × 16 form runs only where its extra requirements hold (filtered above).
            unsafe { copy(src.as_ptr(), ld, rows, cols, dst.as_mut_ptr(), ldd) };
            for i in 0..rows {
                for j in 0..ldd {
                    let got = dst[i * ldd + j];
                    if j < cols {
                        assert_eq!(got, src[i + j * ld], "{name}: ({i}, {j}) of {rows}x{cols}");
                    } else {
                        assert!(
                            got.is_nan(),
                            "{name}: gap ({i}, {j}) of {rows}x{cols} written"
                        );
                    }
                }
            }
        }
    }
}
