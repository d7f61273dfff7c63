//! [`Lay`]: how an elementwise kernel reads one operand, whatever the device.

use crate::Layout;

/// An elementwise operand's layout as a kernel keeps it: `Dense(offset)` when its elements are
/// stored in the output's row-major order from `offset` (the common case: a word to move and
/// nothing to walk), else the layout broadcast to the output's shape, boxed so that the kernel,
/// which the engine moves a few times per op, stays small.
///
/// # Examples
///
/// ```
/// use eddy_ops::{Lay, Layout};
/// let mut row = Layout::contiguous([3]);
/// row.offset = 6;
/// assert_eq!(Lay::of(row), Lay::Dense(6));
/// let scalar = Layout::contiguous([1]).broadcast_to(&[2, 3].into());
/// assert_eq!(Lay::of(scalar), Lay::Splat(0));
/// let t = Layout::contiguous([3, 2]).transpose(0, 1);
/// assert_eq!(Lay::of(t.clone()), Lay::Strided(Box::new(t)));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum Lay {
    /// Contiguous, the output's shape, starting at this element offset.
    Dense(usize),
    /// One element, at this offset, read for every element of the output (a scalar broadcast
    /// to the output's shape, as `sum(y).broadcast_to(..)`): the kernel loads it once.
    Splat(usize),
    /// Any layout of the output's shape.
    Strided(Box<Layout>),
}

impl Lay {
    /// `l` (already of the output's shape), as dense when it is contiguous.
    ///
    /// ```
    /// use eddy_ops::{Lay, Layout};
    /// assert_eq!(Lay::of(Layout::contiguous([2, 3])), Lay::Dense(0));
    /// assert!(matches!(Lay::of(Layout::contiguous([2, 3]).transpose(0, 1)), Lay::Strided(_)));
    /// assert_eq!(Lay::of(Layout::contiguous([1]).broadcast_to(&[4, 3].into())), Lay::Splat(0));
    /// ```
    pub fn of(l: Layout) -> Lay {
        if l.is_contiguous() {
            Lay::Dense(l.offset)
        } else if Lay::is_splat(&l) {
            Lay::Splat(l.offset)
        } else {
            Lay::Strided(Box::new(l))
        }
    }

    /// `l` read at its own shape as a dense run or a splat (`contiguous` as the caller knows
    /// it), or `None` for any other layout: the operands that an op of one shape can take
    /// without the layout analysis.
    ///
    /// ```
    /// use eddy_ops::{Lay, Layout};
    /// assert_eq!(Lay::flat(&Layout::contiguous([2, 3]), true), Some(Lay::Dense(0)));
    /// let stretched = Layout::contiguous([1]).broadcast_to(&[4].into());
    /// assert_eq!(Lay::flat(&stretched, false), Some(Lay::Splat(0)));
    /// assert_eq!(Lay::flat(&Layout::contiguous([3, 2]).transpose(0, 1), false), None);
    /// ```
    #[inline]
    pub fn flat(l: &Layout, contiguous: bool) -> Option<Lay> {
        if contiguous {
            Some(Lay::Dense(l.offset))
        } else if Lay::is_splat(l) {
            Some(Lay::Splat(l.offset))
        } else {
            None
        }
    }

    /// `l` broadcast to `shape` (the output's), without building the broadcast layout when it
    /// is not kept: dense when `l` is contiguous (`contiguous`, which the caller knows) and of
    /// that shape, a splat when it holds one element or steps 0 along every dim longer than 1.
    ///
    /// ```
    /// use eddy_ops::{Lay, Layout};
    /// let s = [2, 3].into();
    /// assert_eq!(Lay::for_shape(&Layout::contiguous([2, 3]), true, &s), Lay::Dense(0));
    /// assert_eq!(Lay::for_shape(&Layout::contiguous([1]), true, &s), Lay::Splat(0));
    /// let stretched = Layout::contiguous([1]).broadcast_to(&s);
    /// assert_eq!(Lay::for_shape(&stretched, false, &s), Lay::Splat(0));
    /// let t = Layout::contiguous([3, 2]).transpose(0, 1);
    /// assert!(matches!(Lay::for_shape(&t, false, &s), Lay::Strided(_)));
    /// ```
    pub fn for_shape(l: &Layout, contiguous: bool, shape: &crate::Shape) -> Lay {
        if l.shape != *shape {
            if l.shape.dims().iter().all(|&d| d == 1) {
                return Lay::Splat(l.offset); // one element, read for every output element
            }
            return Lay::of(l.broadcast_to(shape));
        }
        Lay::flat(l, contiguous).unwrap_or_else(|| Lay::Strided(Box::new(l.clone())))
    }

    /// Whether `l` has elements and reads one of them everywhere: it steps 0 along every dim
    /// longer than 1.
    pub(crate) fn is_splat(l: &Layout) -> bool {
        l.numel() > 0
            && l.strides
                .iter()
                .zip(l.dims())
                .all(|(&st, &d)| st == 0 || d == 1)
    }

    /// The full layout, given the output's shape (taken from a strided operand's layout).
    pub(crate) fn layout(&self, shape: &crate::Shape) -> std::borrow::Cow<'_, Layout> {
        match self {
            Lay::Dense(off) => {
                let mut l = Layout::contiguous(shape.clone());
                l.offset = *off;
                std::borrow::Cow::Owned(l)
            }
            Lay::Splat(off) => std::borrow::Cow::Owned(Layout {
                strides: smallvec::smallvec![0; shape.rank()],
                shape: shape.clone(),
                offset: *off,
            }),
            Lay::Strided(l) => std::borrow::Cow::Borrowed(l),
        }
    }
}
