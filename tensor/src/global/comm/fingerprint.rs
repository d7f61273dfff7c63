//! A collective's fingerprint: what every process compares before the collective runs, so a
//! program that branches on the rank around one fails on every process, naming both sites.

use crate::{Caller, DType};
use std::io::Write as _;

/// The bytes of a fingerprint.
pub(super) const FP: usize = 320;

/// Where a fingerprint's layout starts: after the sequence number (8 bytes), the collective's
/// name (16), the dtype (8) and the shape (a count and 8 dims of 8 bytes).
const FP_LAYOUT: usize = 8 + 16 + 8 + 1 + 64;

/// Where a fingerprint's call site starts: after the layout (64 bytes).
const FP_SITE: usize = FP_LAYOUT + 64;

/// What a collective is, as its fingerprint tells the other processes.
pub(crate) struct Call {
    /// The collective, as `all_reduce(sum)`.
    pub(crate) op: &'static str,
    /// The placement and SBPs of a global tensor's collective, as `cpu:[0, 1] P(sum) → B`.
    pub(crate) layout: &'static str,
    pub(crate) dtype: DType,
    /// The logical shape.
    pub(crate) dims: smallvec::SmallVec<[usize; 4]>,
    /// The user's call site.
    pub(crate) at: Caller,
    /// The bytes this process sends.
    pub(crate) bytes: usize,
}

impl Call {
    /// The call site as `file:line:column`.
    pub(super) fn site(&self) -> String {
        site(self.at)
    }

    /// A 64-bit digest of what the fingerprint with sequence number `seq` holds, the same in
    /// every process that runs the same program: what processes compare first, sending 8
    /// bytes where the fingerprint takes [`FP`] (and formatting nothing).
    pub(super) fn digest(&self, seq: u64) -> u64 {
        let mut h = Digest(0);
        h.word(seq);
        h.bytes(self.op.as_bytes());
        h.bytes(self.dtype.as_str().as_bytes());
        h.word(self.dims.len() as u64);
        for &d in &self.dims {
            h.word(d as u64);
        }
        h.bytes(self.layout.as_bytes());
        match self.at.location() {
            Some(l) => {
                h.bytes(l.file().as_bytes());
                h.word(((l.line() as u64) << 32) | l.column() as u64);
            }
            None => h.word(u64::MAX),
        }
        h.0
    }

    /// Writes `self` with sequence number `seq` as a fingerprint into `f` (zeroed, [`FP`]
    /// bytes); dims past the eighth folded into it.
    pub(super) fn fingerprint(&self, seq: u64, f: &mut [u8]) {
        debug_assert_eq!(f.len(), FP);
        f[..8].copy_from_slice(&seq.to_le_bytes());
        let text = |f: &mut [u8], s: &str| {
            let n = s.len().min(f.len());
            f[..n].copy_from_slice(&s.as_bytes()[..n]);
        };
        text(&mut f[8..24], self.op);
        text(&mut f[24..32], self.dtype.as_str());
        let dims = &self.dims;
        f[32] = dims.len().min(255) as u8;
        for (i, d) in dims.iter().take(8).enumerate() {
            let d = if i == 7 {
                dims[7..].iter().product()
            } else {
                *d
            };
            f[33 + 8 * i..41 + 8 * i].copy_from_slice(&(d as u64).to_le_bytes());
        }
        text(&mut f[FP_LAYOUT..FP_SITE], self.layout);
        // Written in place: a collective's own cost, on the communication thread.
        if let Some(l) = self.at.location() {
            let mut rest = &mut f[FP_SITE..];
            let _ = write!(rest, "{}:{}:{}", l.file(), l.line(), l.column());
        } else {
            text(&mut f[FP_SITE..], &self.site());
        }
    }
}

/// `at` as `file:line:column`.
pub(super) fn site(at: Caller) -> String {
    (at.location())
        .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
        .unwrap_or_else(|| "an unknown place".into())
}

/// The fields of a fingerprint, named, in the order they are compared (the call site last).
pub(super) fn fields(f: &[u8]) -> [(&'static str, String); 6] {
    let text = |b: &[u8]| {
        String::from_utf8_lossy(b)
            .trim_end_matches('\0')
            .to_string()
    };
    let seq = u64::from_le_bytes(f[..8].try_into().expect("8 bytes"));
    let n = f[32] as usize;
    let dims: Vec<u64> = (0..n.min(8))
        .map(|i| u64::from_le_bytes(f[33 + 8 * i..41 + 8 * i].try_into().expect("8 bytes")))
        .collect();
    [
        ("sequence number", seq.to_string()),
        ("collective", text(&f[8..24])),
        ("dtype", text(&f[24..32])),
        ("shape", format!("{dims:?} ({n} dims)")),
        ("layout", text(&f[FP_LAYOUT..FP_SITE])),
        ("call site", text(&f[FP_SITE..])),
    ]
}

/// A word-at-a-time multiplicative hash (the one rustc's `FxHasher` uses), fixed here so that
/// every process computes the same digest whatever its build of the standard library.
struct Digest(u64);

impl Digest {
    fn word(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    /// `b`, its length first (so that `"ab", "c"` and `"a", "bc"` differ).
    fn bytes(&mut self, b: &[u8]) {
        self.word(b.len() as u64);
        let mut chunks = b.chunks_exact(8);
        for c in &mut chunks {
            self.word(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let mut last = [0u8; 8];
        last[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
        self.word(u64::from_le_bytes(last));
    }
}
