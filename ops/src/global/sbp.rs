//! SBP: how a global tensor is laid out along one grid axis, and the balanced split.

use super::Placement;
use crate::collective::{ReduceKind, split_range};
use crate::error::{Error, Result};
use smallvec::SmallVec;
use std::fmt;
use std::ops::Range;

/// The layout of a global tensor along one grid axis.
///
/// # Examples
///
/// ```
/// use eddy_ops::global::{ReduceKind, Sbp};
/// assert_eq!(Sbp::Split(0).to_string(), "S(0)");
/// assert_eq!(Sbp::Broadcast.to_string(), "B");
/// assert_eq!(Sbp::Partial(ReduceKind::Sum).to_string(), "P(sum)");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Sbp {
    /// Each rank holds a slice along this tensor dim ([balanced](split_range)).
    Split(usize),
    /// Each rank holds the whole tensor.
    Broadcast,
    /// Each rank holds a tensor of the whole shape; the logical value is their reduction.
    Partial(ReduceKind),
}

impl Sbp {
    /// `Partial(Sum)`.
    pub const PARTIAL_SUM: Sbp = Sbp::Partial(ReduceKind::Sum);
}

impl fmt::Display for Sbp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Sbp::Split(d) => write!(f, "S({d})"),
            Sbp::Broadcast => f.write_str("B"),
            Sbp::Partial(k) => write!(f, "P({k})"),
        }
    }
}

/// One [`Sbp`] per grid axis.
pub type NdSbp = SmallVec<[Sbp; 2]>;

/// A copy of `s`: for one or two axes a fixed-size copy into the inline buffer, where
/// `SmallVec`'s `clone` goes element by element through an iterator (about ninety
/// instructions for one axis, on every global op's result).
///
/// # Examples
///
/// ```
/// use eddy_ops::global::{Sbp, nd_sbp_copy};
/// assert_eq!(&nd_sbp_copy(&[Sbp::Split(0), Sbp::Broadcast])[..], &[Sbp::Split(0), Sbp::Broadcast]);
/// ```
#[inline]
pub fn nd_sbp_copy(s: &[Sbp]) -> NdSbp {
    match *s {
        [a] => SmallVec::from_buf_and_len([a, a], 1),
        [a, b] => SmallVec::from_buf([a, b]),
        _ => SmallVec::from_slice(s),
    }
}

/// `sbp` written as `(S(0), B)`, or `S(0)` for one axis.
///
/// # Examples
///
/// ```
/// use eddy_ops::global::{show_sbp, Sbp};
/// assert_eq!(show_sbp(&[Sbp::Split(0), Sbp::Broadcast]), "(S(0), B)");
/// assert_eq!(show_sbp(&[Sbp::Broadcast]), "B");
/// ```
pub fn show_sbp(sbp: &[Sbp]) -> String {
    let parts: Vec<String> = sbp.iter().map(Sbp::to_string).collect();
    if parts.len() == 1 {
        parts[0].clone()
    } else {
        format!("({})", parts.join(", "))
    }
}

/// The element range, per tensor dim, that position `i` of `placement` holds of a logical
/// tensor of `dims` laid out by `sbp`: splits nest axis after axis (an axis's split divides
/// the part the earlier axes left).
///
/// # Examples
///
/// ```
/// use eddy_ops::global::{component_ranges, DeviceKind, Placement, Sbp};
/// let g = Placement::grid(DeviceKind::Cpu, [0, 1, 2, 3], [2, 2])?;
/// let r = component_ranges(&[5, 4], &g, &[Sbp::Split(0), Sbp::Split(0)], 1);
/// assert_eq!(r, [2..3, 0..4]); // rows 0..3 for axis 0, then the second part of those
/// # Ok::<(), eddy_ops::Error>(())
/// ```
pub fn component_ranges(
    dims: &[usize],
    placement: &Placement,
    sbp: &[Sbp],
    i: usize,
) -> Vec<Range<usize>> {
    let coord = placement.coord(i);
    let mut r: Vec<Range<usize>> = dims.iter().map(|&n| 0..n).collect();
    for (a, s) in sbp.iter().enumerate() {
        if let Sbp::Split(d) = *s {
            let part = split_range(r[d].len(), placement.grid_dims()[a], coord[a]);
            r[d] = r[d].start + part.start..r[d].start + part.end;
        }
    }
    r
}

/// The checks of an nd-SBP for a tensor of `rank` dims on `placement`: one SBP per grid axis,
/// each split dim within the rank, and partial axes of one kind (two kinds do not commute).
///
/// # Errors
///
/// `InvalidArgument` naming what does not fit.
///
/// # Examples
///
/// ```
/// use eddy_ops::global::{check_sbp, DeviceKind, Placement, ReduceKind, Sbp};
/// let p = Placement::new(DeviceKind::Cpu, [0, 1])?;
/// assert!(check_sbp("to_global", 2, &p, &[Sbp::Split(1)]).is_ok());
/// assert!(check_sbp("to_global", 2, &p, &[Sbp::Split(2)]).is_err());
/// assert!(check_sbp("to_global", 2, &p, &[Sbp::Broadcast, Sbp::Broadcast]).is_err());
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[track_caller]
pub fn check_sbp(op: &'static str, rank: usize, placement: &Placement, sbp: &[Sbp]) -> Result<()> {
    let axes = placement.grid_dims().len();
    if sbp.len() != axes {
        return Err(Error::invalid(
            op,
            format!(
                "{} has {axes} grid axes but {} SBPs were given",
                placement,
                sbp.len()
            ),
        ));
    }
    if let Some(d) = sbp.iter().find_map(|s| match *s {
        Sbp::Split(d) if d >= rank => Some(d),
        _ => None,
    }) {
        return Err(Error::invalid(
            op,
            format!("S({d}) splits dim {d} of a tensor of rank {rank}"),
        ));
    }
    let mut kinds = sbp.iter().filter_map(|s| match s {
        Sbp::Partial(k) => Some(*k),
        _ => None,
    });
    if let Some(k) = kinds.next()
        && let Some(other) = kinds.find(|&o| o != k)
    {
        return Err(Error::invalid(
            op,
            format!("partial axes of two kinds ({k} and {other}) do not commute"),
        ));
    }
    Ok(())
}
