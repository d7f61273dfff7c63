//! Writing large outputs with non-temporal (streaming) stores.
//!
//! An ordinary store to a line that is not in the cache first reads the line from memory (a
//! read for ownership), so `c = a + b` over tensors much larger than the last-level cache moves
//! four tensors' worth of bytes for three. A streaming store writes the line without reading
//! it and without evicting the inputs from the cache. It pays off only for outputs the caches
//! could not keep anyway: below [`STREAM_MIN_BYTES`] the kernels store as usual, so that the
//! next op finds a mid-sized result in the cache.
//!
//! The kernels stay generic: [`write_chunk`] lets the kernel's own loop fill a small buffer on
//! the stack (it stays in L1), then copies the buffer out with 16-byte streaming stores
//! (SSE2, which every x86-64 CPU has). Other architectures store as usual.

use crate::dtype::Elem;

/// Outputs of at least this many bytes are written with streaming stores: half the 32 MiB
/// last-level cache of the machine the benchmarks run on. A result of this size would have
/// evicted most of itself (and the inputs) before the next op could read it.
pub const STREAM_MIN_BYTES: usize = 16 << 20;

/// Bytes the kernel computes into the stack buffer per streaming copy (64 floats, four cache
/// lines). In a standalone `c = a + b` over 16 Mi floats on 2 threads here, 256 bytes did
/// best among 256 to 16 Ki, and came close to streaming straight from the registers.
const BUF_BYTES: usize = 256;

/// Whether an output of `n` elements of `D` should be written with streaming stores.
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::stream_store::{wants_streaming, STREAM_MIN_BYTES};
/// assert!(!wants_streaming::<f32>(1024)); // small: keep it in the cache
/// let big = STREAM_MIN_BYTES / 4;
/// assert_eq!(wants_streaming::<f32>(big), cfg!(target_arch = "x86_64"));
/// assert!(!wants_streaming::<f32>(big - 1));
/// ```
#[inline]
pub fn wants_streaming<D>(n: usize) -> bool {
    cfg!(target_arch = "x86_64") && n.saturating_mul(std::mem::size_of::<D>()) >= STREAM_MIN_BYTES
}

/// Fills `out` by calling `fill(i, dst)`, which must compute the output elements
/// `i .. i + dst.len()` of `out` into `dst`. With `streaming`, `dst` is a stack buffer whose
/// contents are then streamed into `out`; without, `fill(0, out)` writes `out` directly.
///
/// ```
/// # use eddy_ops::cpu::stream_store::write_chunk;
/// let a: Vec<f32> = (0..1000).map(|i| i as f32).collect();
/// let mut out = vec![0.0f32; 1000];
/// write_chunk(&mut out, true, |i, dst| {
///     for (k, d) in dst.iter_mut().enumerate() {
///         *d = 2.0 * a[i + k];
///     }
/// });
/// assert!(out.iter().enumerate().all(|(i, &v)| v == 2.0 * i as f32));
/// ```
#[inline]
pub fn write_chunk<D: Elem>(out: &mut [D], streaming: bool, fill: impl Fn(usize, &mut [D])) {
    #[cfg(target_arch = "x86_64")]
    if streaming {
        return write_streaming(out, fill);
    }
    let _ = streaming;
    fill(0, out);
}

#[cfg(target_arch = "x86_64")]
fn write_streaming<D: Elem>(out: &mut [D], fill: impl Fn(usize, &mut [D])) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
    let size = std::mem::size_of::<D>();
    // Elements before the first 16-byte boundary. Every `Elem` is 1, 2, 4 or 8 bytes and
    // aligned to its size, so the distance to the boundary is a whole number of elements.
    let misalign = out.as_ptr() as usize % 16;
    let head = if misalign == 0 || size == 0 {
        0
    } else {
        ((16 - misalign) / size).min(out.len())
    };
    fill(0, &mut out[..head]);
    // `BUF_BYTES` elements is room enough for any element size; the loop uses `BUF_BYTES` bytes.
    let mut storage = [D::ZERO; BUF_BYTES];
    let per = BUF_BYTES / size;
    let buf = &mut storage[..per];
    let mut i = head;
    while i + per <= out.len() {
        fill(i, buf);
        let bytes = per * size;
        // SAFETY: `out[i .. i + per]` is in bounds (the loop condition) and starts on a 16-byte
        // boundary (the head above, and each step is `BUF_BYTES`, a multiple of 16); the
        // buffer holds `bytes` initialised bytes; unaligned loads read it, and the two do not
        // overlap (one is on this stack frame, the other is the caller's slice). SSE2 is part
        // of x86-64.
        unsafe {
            let src = buf.as_ptr() as *const __m128i;
            let dst = out.as_mut_ptr().add(i) as *mut __m128i;
            for k in 0..bytes / 16 {
                _mm_stream_si128(dst.add(k), _mm_loadu_si128(src.add(k)));
            }
        }
        i += per;
    }
    fill(i, &mut out[i..]);
    // Streaming stores are weakly ordered: fence them before the pool (or the engine) tells
    // another thread that the chunk is done.
    // SAFETY: SSE is part of x86-64.
    unsafe { _mm_sfence() };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length and alignment around the buffer size and the 16-byte boundary, for 1-, 2-,
    /// 4- and 8-byte elements: the streamed result equals the direct one.
    #[test]
    fn streaming_matches_direct_for_every_alignment() {
        fn check<D: Elem + PartialEq>(from: impl Fn(usize) -> D) {
            for skip in 0..16 {
                for n in [0, 1, 15, 16, 17, 255, 256, 257, 512, 1000, 1030] {
                    let src: Vec<D> = (0..n).map(&from).collect();
                    let mut backing = vec![D::ZERO; n + 16];
                    let out = &mut backing[skip.min(16)..skip.min(16) + n];
                    write_chunk(out, true, |i, dst| {
                        dst.copy_from_slice(&src[i..i + dst.len()])
                    });
                    assert!(
                        out.iter().zip(&src).all(|(a, b)| a == b),
                        "n {n} skip {skip}"
                    );
                }
            }
        }
        check(|i| i as u8);
        check(|i| half::f16::from_f32(i as f32));
        check(|i| i as f32 * 0.5);
        check(|i| i as i64 - 7);
        check(|i| crate::Bool8((i % 3 == 0) as u8));
    }

    #[test]
    fn the_threshold_is_in_bytes() {
        assert!(!wants_streaming::<f32>((STREAM_MIN_BYTES / 4) - 1));
        assert_eq!(
            wants_streaming::<f32>(STREAM_MIN_BYTES / 4),
            cfg!(target_arch = "x86_64")
        );
        assert!(!wants_streaming::<f32>(1000));
    }
}
