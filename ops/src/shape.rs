//! [`Shape`] and [`Layout`]: dims, strides and offset, with checked arithmetic.

use crate::DType;
use crate::error::{Error, Result};
use smallvec::SmallVec;

/// Dimension sizes, outermost first.
///
/// # Examples
///
/// ```
/// use eddy_ops::{Shape, DType};
/// let s = Shape::from([2, 3]);
/// assert_eq!(s.numel(), 6);
/// assert!(Shape::from([usize::MAX, 2]).checked_bytes(DType::F32).is_err());
/// ```
#[derive(Eq, Default)]
pub struct Shape(pub SmallVec<[usize; 4]>);

// By hand: the derived comparison of the dims calls `memcmp`, about 25 instructions for a
// one-dim shape, and every elementwise op compares shapes three times (broadcast, and each
// operand's layout); a plain loop over a handful of dims is a few. Same meaning as derived.
impl PartialEq for Shape {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (&self.0[..], &other.0[..]);
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
    }
}

// By hand beside the hand-written `eq`: the dims as a slice, so equal shapes hash equally.
impl std::hash::Hash for Shape {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.as_slice().hash(state);
    }
}

// By hand: `SmallVec`'s derived `clone` goes element by element through an iterator, which the
// per-op paths (every op clones a shape or a layout) showed in profiles.
impl Clone for Shape {
    #[inline]
    fn clone(&self) -> Self {
        Shape(dims_copy(&self.0))
    }
}

/// A copy of `d` (dims or strides). Up to four, each length is a fixed-size copy into the
/// inline buffer: `SmallVec::from_slice` calls `memcpy` for any length, about 60 instructions
/// for one dim, and every op copies a shape.
#[inline(always)]
fn dims_copy(d: &[usize]) -> SmallVec<[usize; 4]> {
    let buf = match *d {
        [] => return SmallVec::new(),
        [a] => [a, 0, 0, 0],
        [a, b] => [a, b, 0, 0],
        [a, b, c] => [a, b, c, 0],
        [a, b, c, e] => [a, b, c, e],
        _ => return SmallVec::from_slice(d),
    };
    SmallVec::from_buf_and_len(buf, d.len())
}

/// Contiguous strides for three or more dims (see [`Shape::contiguous_strides`]); up to four
/// fill the inline buffer, without `from_elem`'s loop.
#[inline(never)]
fn long_strides(dims: &[usize]) -> SmallVec<[usize; 4]> {
    let fill = |s: &mut [usize]| {
        let mut acc = 1usize;
        for (st, &d) in s.iter_mut().zip(dims).rev() {
            *st = acc;
            acc = acc.saturating_mul(d.max(1));
        }
    };
    if dims.len() <= 4 {
        let mut buf = [0usize; 4];
        fill(&mut buf[..dims.len()]);
        return SmallVec::from_buf_and_len(buf, dims.len());
    }
    let mut s: SmallVec<[usize; 4]> = SmallVec::from_elem(1, dims.len());
    fill(&mut s);
    s
}

impl std::fmt::Debug for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.0.as_slice())
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.0.as_slice())
    }
}

// Through `dims_copy`: collecting an iterator into a `SmallVec` reserves and pushes element by
// element, and ops build shapes from arrays (`broadcast_to([64])`, `reshape([2, 3])`) per call.
impl<const N: usize> From<[usize; N]> for Shape {
    #[inline]
    fn from(d: [usize; N]) -> Self {
        Shape(dims_copy(&d))
    }
}
impl From<&[usize]> for Shape {
    #[inline]
    fn from(d: &[usize]) -> Self {
        Shape(dims_copy(d))
    }
}
impl From<Vec<usize>> for Shape {
    fn from(d: Vec<usize>) -> Self {
        Shape(d.into_iter().collect())
    }
}
impl From<&Vec<usize>> for Shape {
    fn from(d: &Vec<usize>) -> Self {
        Shape(d.iter().copied().collect())
    }
}
impl From<&Shape> for Shape {
    fn from(s: &Shape) -> Self {
        s.clone()
    }
}
impl From<()> for Shape {
    fn from(_: ()) -> Self {
        Shape::default()
    }
}
impl From<usize> for Shape {
    fn from(d: usize) -> Self {
        Shape::from([d])
    }
}

/// The element count of `dims`, saturating: a zero-sized tensor may have other dims whose
/// product overflows (`[2^63, 4, 0]`), and a 0 anywhere makes the count 0 whatever came
/// before it. Ops use it for the outer and inner extents around an axis.
///
/// # Examples
///
/// ```
/// use eddy_ops::numel_of;
/// assert_eq!(numel_of(&[2, 3]), 6);
/// assert_eq!(numel_of(&[usize::MAX, 4, 0]), 0);
/// ```
#[inline]
pub fn numel_of(dims: &[usize]) -> usize {
    dims.iter().fold(1usize, |a, &d| a.saturating_mul(d))
}

impl Shape {
    /// The dims.
    pub fn dims(&self) -> &[usize] {
        &self.0
    }
    /// The number of dims.
    pub fn rank(&self) -> usize {
        self.0.len()
    }
    /// The element count (call [`checked_numel`](Self::checked_numel) for untrusted shapes).
    /// Saturating, as [`numel_of`].
    pub fn numel(&self) -> usize {
        numel_of(&self.0)
    }
    /// The element count, or `None` on overflow. A 0 anywhere makes it 0, whatever the other
    /// dims and their order.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::Shape;
    /// assert_eq!(Shape::from([2, 3]).checked_numel(), Some(6));
    /// assert_eq!(Shape::from([1 << 62, 4]).checked_numel(), None);
    /// assert_eq!(Shape::from([1 << 62, 4, 0]).checked_numel(), Some(0));
    /// assert_eq!(Shape::from([0, 1 << 62, 4]).checked_numel(), Some(0));
    /// ```
    pub fn checked_numel(&self) -> Option<usize> {
        match self.0.iter().try_fold(1usize, |a, &d| a.checked_mul(d)) {
            Some(n) => Some(n),
            None if self.0.contains(&0) => Some(0),
            None => None,
        }
    }
    /// The byte size for `dtype`, or `ShapeOverflow` if it overflows or exceeds `isize::MAX`.
    ///
    /// # Errors
    ///
    /// `ShapeOverflow` (F2): the allocator is never asked for such a size.
    #[inline]
    #[track_caller]
    pub fn checked_bytes(&self, dtype: DType) -> Result<usize> {
        match self
            .checked_numel()
            .and_then(|n| n.checked_mul(dtype.size_in_bytes()))
        {
            Some(b) if b <= isize::MAX as usize => Ok(b),
            _ => Err(self.overflow(dtype)),
        }
    }

    #[cold]
    #[inline(never)]
    #[track_caller]
    fn overflow(&self, dtype: DType) -> Error {
        Error::ShapeOverflow {
            at: crate::Caller::here(),
            shape: self.0.to_vec(),
            dtype,
        }
    }
    /// Row-major (C-contiguous) strides, in elements.
    ///
    /// They saturate: only a shape without elements can have strides past `usize::MAX` (its
    /// other dims may be huge, as `[0, usize::MAX, 2]`), and such strides never address memory.
    // Inlined: returned from a call, the vector was written in 8-byte pieces and read back in
    // 16-byte ones, a store-forwarding stall that cost more than building it (about half of
    // a small op's `empty_with_range` samples).
    #[inline(always)]
    pub fn contiguous_strides(&self) -> SmallVec<[usize; 4]> {
        // The common ranks without a loop; more dims out of line.
        match *self.dims() {
            [] => SmallVec::new(),
            [_] => SmallVec::from_buf_and_len([1, 0, 0, 0], 1),
            [_, d] => SmallVec::from_buf_and_len([d.max(1), 1, 0, 0], 2),
            _ => long_strides(self.dims()),
        }
    }

    /// Normalises a possibly negative dim (`-1` is the last) for `op`.
    ///
    /// # Errors
    ///
    /// `InvalidDim` if it is out of range.
    #[track_caller]
    pub fn dim(&self, op: &'static str, d: isize) -> Result<usize> {
        norm_dim(op, d, self.rank())
    }
}

/// Normalises dim `d` (negative counts from the end) for a tensor of `rank` dims.
///
/// # Errors
///
/// `InvalidDim` if `d` is outside `-rank..rank`.
#[track_caller]
pub fn norm_dim(op: &'static str, d: isize, rank: usize) -> Result<usize> {
    let r = rank as isize;
    let n = if d < 0 { d + r } else { d };
    if n < 0 || n >= r {
        return Err(Error::InvalidDim {
            at: crate::Caller::here(),
            op,
            dim: d,
            rank,
        });
    }
    Ok(n as usize)
}

/// Whether `from` broadcasts to `to` itself: `to` has at least as many dims, and each dim of
/// `from`, aligned at the right, equals `to`'s or is `1`. The same answer as
/// `broadcast_shapes(op, from, to) == Ok(to)`, without building a shape.
///
/// ```
/// use eddy_ops::{broadcasts_to, Shape};
/// assert!(broadcasts_to(&Shape::from([3, 1]), &Shape::from([2, 3, 4])));
/// assert!(broadcasts_to(&Shape::from([1]), &Shape::from([0])));
/// assert!(!broadcasts_to(&Shape::from([0]), &Shape::from([1])));
/// assert!(!broadcasts_to(&Shape::from([2, 3]), &Shape::from([3])));
/// ```
#[inline]
pub fn broadcasts_to(from: &Shape, to: &Shape) -> bool {
    let (f, t) = (from.dims(), to.dims());
    f.len() <= t.len()
        && f.iter()
            .zip(&t[t.len() - f.len()..])
            .all(|(&a, &b)| a == b || a == 1)
}

/// The broadcast shape of `a` and `b` (NumPy rules; a `0` dim broadcasts only with `0` or `1`,
/// and the result keeps the `0`).
///
/// # Errors
///
/// `ShapeMismatch` if the shapes are incompatible.
///
/// # Examples
///
/// ```
/// use eddy_ops::{broadcast_shapes, Shape};
/// assert_eq!(broadcast_shapes("add", &Shape::from([0]), &Shape::from([1])).unwrap(), Shape::from([0]));
/// assert!(broadcast_shapes("add", &Shape::from([2]), &Shape::from([3])).is_err());
/// ```
#[inline]
#[track_caller]
pub fn broadcast_shapes(op: &'static str, a: &Shape, b: &Shape) -> Result<Shape> {
    if a == b {
        return Ok(a.clone()); // the common case, without the per-dim walk
    }
    broadcast_walk(op, a, b)
}

/// [`broadcast_shapes`] of different shapes: dim by dim from the right.
#[inline(never)]
#[track_caller]
fn broadcast_walk(op: &'static str, a: &Shape, b: &Shape) -> Result<Shape> {
    let n = a.rank().max(b.rank());
    let mut out = SmallVec::with_capacity(n);
    for i in 0..n {
        let da = if i + a.rank() >= n {
            a.0[i + a.rank() - n]
        } else {
            1
        };
        let db = if i + b.rank() >= n {
            b.0[i + b.rank() - n]
        } else {
            1
        };
        let d = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(Error::ShapeMismatch {
                at: crate::Caller::here(),
                op,
                lhs: a.0.to_vec(),
                rhs: b.0.to_vec(),
            });
        };
        out.push(d);
    }
    Ok(Shape(out))
}

/// Where a tensor's elements sit in its storage: shape, strides (in elements) and offset.
///
/// # Examples
///
/// ```
/// use eddy_ops::Layout;
/// let l = Layout::contiguous([2, 3]);
/// let t = l.transpose(0, 1);
/// assert_eq!(t.shape.dims(), &[3, 2]);
/// assert_eq!(t.strides.as_slice(), &[1, 3]);
/// assert!(!t.is_contiguous());
/// ```
#[derive(PartialEq, Eq, Debug)]
pub struct Layout {
    /// The dims.
    pub shape: Shape,
    /// Elements to skip per step in each dim (0 for broadcast dims).
    pub strides: SmallVec<[usize; 4]>,
    /// The first element's index in the storage.
    pub offset: usize,
}

impl Clone for Layout {
    #[inline]
    fn clone(&self) -> Self {
        Layout {
            shape: self.shape.clone(),
            strides: dims_copy(&self.strides),
            offset: self.offset,
        }
    }
}

impl Layout {
    /// A row-major layout at offset 0.
    #[inline]
    pub fn contiguous(shape: impl Into<Shape>) -> Self {
        let shape = shape.into();
        Layout {
            strides: shape.contiguous_strides(),
            shape,
            offset: 0,
        }
    }
    /// The dims.
    pub fn dims(&self) -> &[usize] {
        self.shape.dims()
    }
    /// The element count.
    pub fn numel(&self) -> usize {
        self.shape.numel()
    }
    /// Whether the elements are row-major and dense (dims of size 1 may have any stride; a
    /// layout without elements is).
    pub fn is_contiguous(&self) -> bool {
        if self.shape.0.contains(&0) {
            return true;
        }
        let mut expect = 1;
        for (&d, &s) in self.shape.0.iter().zip(&self.strides).rev() {
            if d != 1 && s != expect {
                return false;
            }
            expect *= d;
        }
        true
    }
    /// The dense element range in the storage, if contiguous.
    pub fn contiguous_range(&self) -> Option<std::ops::Range<usize>> {
        self.is_contiguous()
            .then(|| self.offset..self.offset + self.numel())
    }
    /// One past the largest storage index the layout touches (0 if empty).
    pub fn storage_extent(&self) -> usize {
        if self.numel() == 0 {
            return 0;
        }
        self.offset
            + self
                .shape
                .0
                .iter()
                .zip(&self.strides)
                .map(|(&d, &s)| (d - 1) * s)
                .sum::<usize>()
            + 1
    }
    /// Whether two elements share a storage position (a stride-0 dim of size > 1).
    pub fn has_broadcast(&self) -> bool {
        self.shape
            .0
            .iter()
            .zip(&self.strides)
            .any(|(&d, &s)| d > 1 && s == 0)
    }
    /// Swaps two dims.
    pub fn transpose(&self, a: usize, b: usize) -> Layout {
        let mut l = self.clone();
        l.shape.0.swap(a, b);
        l.strides.swap(a, b);
        l
    }
    /// Reorders dims: dim `i` of the result is dim `perm[i]` of `self`.
    pub fn permute(&self, perm: &[usize]) -> Layout {
        Layout {
            shape: Shape(perm.iter().map(|&p| self.shape.0[p]).collect()),
            strides: perm.iter().map(|&p| self.strides[p]).collect(),
            offset: self.offset,
        }
    }
    /// Broadcasts to `shape` (a sub-shape aligned at the right): new and size-1 dims get stride 0.
    ///
    /// The caller checked that the shapes broadcast.
    pub fn broadcast_to(&self, shape: &Shape) -> Layout {
        if self.shape == *shape {
            return self.clone(); // no dim is stretched: the same strides
        }
        let n = shape.rank();
        let k = self.shape.rank();
        // New leading dims and stretched ones step 0; the rest keep their strides (dims are
        // aligned from the right). Filled in place: pushes cost a capacity check each, and up
        // to four dims fill the inline buffer without `from_elem`'s loop.
        let fill = |strides: &mut [usize]| {
            for j in k.saturating_sub(n)..k {
                let i = j + n - k;
                if self.shape.0[j] != 1 || shape.0[i] == 1 {
                    strides[i] = self.strides[j];
                }
            }
        };
        let strides: SmallVec<[usize; 4]> = if n <= 4 {
            let mut buf = [0usize; 4];
            fill(&mut buf[..n]);
            SmallVec::from_buf_and_len(buf, n)
        } else {
            let mut s = SmallVec::from_elem(0, n);
            fill(&mut s);
            s
        };
        Layout {
            shape: shape.clone(),
            strides,
            offset: self.offset,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Strides by the definition: each is the product of the (at least 1) dims after it.
    fn naive(dims: &[usize]) -> Vec<usize> {
        (0..dims.len())
            .map(|i| {
                dims[i + 1..]
                    .iter()
                    .fold(1usize, |a, &d| a.saturating_mul(d.max(1)))
            })
            .collect()
    }

    #[test]
    fn contiguous_strides_match_the_definition_at_every_rank() {
        for dims in [
            &[][..],
            &[5],
            &[2, 3],
            &[2, 0, 4],
            &[2, 3, 4, 5],
            &[2, 3, 4, 5, 6],
            &[1, 2, 1, 3, 1, 4],
            &[0, usize::MAX, 2],
            &[3, usize::MAX, usize::MAX, 2, 2],
        ] {
            let s = Shape::from(dims.to_vec());
            assert_eq!(s.contiguous_strides().as_slice(), naive(dims), "{dims:?}");
        }
    }
}
