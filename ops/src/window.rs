//! The geometry of a sliding window over two spatial dims, which the op layer infers and the
//! kernels read (re-exported by [`conv`](crate::conv)).

use crate::{Error, Result};

/// Two sizes, one per spatial dim (height, width), as PyTorch's `int or (int, int)` arguments:
/// from a `usize` (both dims), a `[usize; 2]` or a `(usize, usize)`.
///
/// # Examples
///
/// ```
/// use eddy_ops::conv::Pair;
/// assert_eq!(Pair::from(3), Pair([3, 3]));
/// assert_eq!(Pair::from((1, 2)), Pair([1, 2]));
/// assert_eq!(Pair::from([2, 1]).0, [2, 1]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pair(pub [usize; 2]);

impl From<usize> for Pair {
    fn from(v: usize) -> Pair {
        Pair([v, v])
    }
}

impl From<[usize; 2]> for Pair {
    fn from(v: [usize; 2]) -> Pair {
        Pair(v)
    }
}

impl From<(usize, usize)> for Pair {
    fn from((a, b): (usize, usize)) -> Pair {
        Pair([a, b])
    }
}

/// Where a sliding window goes over `[batch, channels, h, w]` input: its size, step, the zeros
/// added on each side and the spacing of its taps, with the output's spatial size.
///
/// # Examples
///
/// ```
/// use eddy_ops::conv::Window2d;
/// let w = Window2d::new("conv2d", [1, 3, 5, 5], 3.into(), 1.into(), 1.into(), 1.into(), false)?;
/// assert_eq!(w.out_hw, [5, 5]); // "same" padding for a 3×3 window
/// assert_eq!(w.taps(), 9);
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Window2d {
    /// Images.
    pub batch: usize,
    /// Planes per image.
    pub channels: usize,
    /// The input's height and width.
    pub in_hw: [usize; 2],
    /// The window's height and width (before dilation).
    pub kernel: [usize; 2],
    /// The step between two windows.
    pub stride: [usize; 2],
    /// The zeros added before and after each spatial dim.
    pub padding: [usize; 2],
    /// The spacing between two taps of the window (1: adjacent).
    pub dilation: [usize; 2],
    /// The output's height and width: the number of window positions.
    pub out_hw: [usize; 2],
}

impl Window2d {
    /// The window of `kernel`, `stride`, `padding` and `dilation` over input of `dims`
    /// (`[batch, channels, h, w]`), failing as `op`. With `ceil_mode` (pooling) the output
    /// size rounds up, as PyTorch's, keeping only windows that start inside the input or its
    /// leading padding.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for a zero kernel, stride or dilation, or a window larger than the
    /// padded input (no output position), naming the sizes.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::conv::Window2d;
    /// let pool = Window2d::new("max_pool2d", [2, 4, 7, 7], 2.into(), 2.into(), 0.into(), 1.into(), false)?;
    /// assert_eq!(pool.out_hw, [3, 3]);
    /// let ceil = Window2d::new("max_pool2d", [2, 4, 7, 7], 2.into(), 2.into(), 0.into(), 1.into(), true)?;
    /// assert_eq!(ceil.out_hw, [4, 4]);
    /// assert!(Window2d::new("conv2d", [1, 1, 2, 2], 3.into(), 1.into(), 0.into(), 1.into(), false).is_err());
    /// assert!(Window2d::new("conv2d", [1, 1, 5, 5], 3.into(), 0.into(), 0.into(), 1.into(), false).is_err());
    /// # Ok::<(), eddy_ops::Error>(())
    /// ```
    #[track_caller]
    pub fn new(
        op: &'static str,
        dims: [usize; 4],
        kernel: Pair,
        stride: Pair,
        padding: Pair,
        dilation: Pair,
        ceil_mode: bool,
    ) -> Result<Window2d> {
        let (k, s, p, d) = (kernel.0, stride.0, padding.0, dilation.0);
        if k.contains(&0) || s.contains(&0) || d.contains(&0) {
            return Err(Error::invalid(
                op,
                format!(
                    "kernel size, stride and dilation must be positive, got kernel {k:?}, \
                     stride {s:?}, dilation {d:?}"
                ),
            ));
        }
        let mut out_hw = [0; 2];
        for i in 0..2 {
            let span = d[i]
                .checked_mul(k[i] - 1)
                .and_then(|v| v.checked_add(1))
                .unwrap_or(usize::MAX);
            let padded = dims[2 + i].saturating_add(2 * p[i]);
            if padded < span {
                return Err(Error::invalid(
                    op,
                    format!(
                        "input of {:?} padded by {p:?} is smaller than the window {k:?} \
                         dilated by {d:?}: no output position",
                        &dims[2..]
                    ),
                ));
            }
            let room = padded - span;
            let mut o = if ceil_mode {
                room.div_ceil(s[i]) + 1
            } else {
                room / s[i] + 1
            };
            // A last window starting in the trailing padding is dropped (PyTorch's rule).
            if ceil_mode && (o - 1) * s[i] >= dims[2 + i] + p[i] {
                o -= 1;
            }
            out_hw[i] = o;
        }
        Ok(Window2d {
            batch: dims[0],
            channels: dims[1],
            in_hw: [dims[2], dims[3]],
            kernel: k,
            stride: s,
            padding: p,
            dilation: d,
            out_hw,
        })
    }

    /// Taps per window: `kernel[0] * kernel[1]`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::conv::Window2d;
    /// let w = Window2d::new("unfold", [1, 1, 4, 4], (2, 3).into(), 1.into(), 0.into(), 1.into(), false)?;
    /// assert_eq!(w.taps(), 6);
    /// # Ok::<(), eddy_ops::Error>(())
    /// ```
    pub fn taps(&self) -> usize {
        self.kernel[0] * self.kernel[1]
    }

    /// Window positions per plane: `out_hw[0] * out_hw[1]`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::conv::Window2d;
    /// let w = Window2d::new("unfold", [1, 1, 4, 4], 2.into(), 2.into(), 0.into(), 1.into(), false)?;
    /// assert_eq!(w.positions(), 4);
    /// # Ok::<(), eddy_ops::Error>(())
    /// ```
    pub fn positions(&self) -> usize {
        self.out_hw[0] * self.out_hw[1]
    }

    /// The input row (or column, `axis` 1) that tap `tap` of window position `pos` reads, or
    /// `None` where it falls in the padding.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::conv::Window2d;
    /// let w = Window2d::new("unfold", [1, 1, 4, 4], 3.into(), 1.into(), 1.into(), 1.into(), false)?;
    /// assert_eq!(w.source(0, 0, 0), None);    // first tap of the first window: padding
    /// assert_eq!(w.source(0, 0, 1), Some(0));
    /// assert_eq!(w.source(0, 3, 2), None);    // past the last row
    /// # Ok::<(), eddy_ops::Error>(())
    /// ```
    #[inline(always)]
    pub fn source(&self, axis: usize, pos: usize, tap: usize) -> Option<usize> {
        let at = (pos * self.stride[axis] + tap * self.dilation[axis])
            .checked_sub(self.padding[axis])?;
        (at < self.in_hw[axis]).then_some(at)
    }
}
