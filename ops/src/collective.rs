//! The collectives of boxing as the engine runs them: what each one computes over the
//! components of one group of ranks, and the shape each rank gets; how partial values combine
//! ([`ReduceKind`]) and the balanced split ([`split_range`]). The global view's rules
//! (`global`) and the kernels (`cpu::collective`) both build on it.

use crate::Shape;
use std::fmt;
use std::ops::Range;

/// How the ranks of a `Partial` axis combine into the logical value.
///
/// # Examples
///
/// ```
/// use eddy_ops::global::ReduceKind;
/// assert_eq!(ReduceKind::Max.to_string(), "max");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceKind {
    /// The logical value is the elementwise sum of the ranks' tensors.
    Sum,
    /// The elementwise maximum.
    Max,
    /// The elementwise minimum.
    Min,
}

impl fmt::Display for ReduceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ReduceKind::Sum => "sum",
            ReduceKind::Max => "max",
            ReduceKind::Min => "min",
        })
    }
}

/// The elements of part `i` of `n` split into `parts` balanced parts: the first `n % parts`
/// parts have one element more than the others.
///
/// # Examples
///
/// ```
/// use eddy_ops::global::split_range;
/// assert_eq!((0..3).map(|i| split_range(7, 3, i)).collect::<Vec<_>>(), [0..3, 3..5, 5..7]);
/// assert_eq!(split_range(1, 2, 1), 1..1); // an empty part
/// ```
pub fn split_range(n: usize, parts: usize, i: usize) -> Range<usize> {
    let (q, r) = (n / parts, n % parts);
    let start = i * q + i.min(r);
    start..start + q + usize::from(i < r)
}

/// A collective over the components of one group of ranks (`p` of them, in the group's order).
///
/// # Examples
///
/// ```
/// use eddy_ops::global::{Collective, ReduceKind};
/// let c = Collective::ReduceScatter { kind: ReduceKind::Sum, dim: 0 };
/// // Five rows over two ranks: the first gets three, the second two.
/// let parts = [[5, 4].into(), [5, 4].into()];
/// assert_eq!(c.out_shape(&parts, 0).dims(), [3, 4]);
/// assert_eq!(c.out_shape(&parts, 1).dims(), [2, 4]);
/// assert_eq!(c.name(), "reduce_scatter");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Collective {
    /// `S(dim) → B`: each rank gets the concatenation of every part along `dim`.
    AllGather {
        /// The split dim.
        dim: usize,
    },
    /// `P → B`: each rank gets the reduction of every part, in the parts' order.
    AllReduce {
        /// How the parts combine.
        kind: ReduceKind,
    },
    /// `P → S(dim)`: rank `k` gets its balanced slice along `dim` of the reduction.
    ReduceScatter {
        /// How the parts combine.
        kind: ReduceKind,
        /// The dim of the result's split.
        dim: usize,
    },
    /// `S(from) → S(to)`: rank `k` gets its balanced slice along `to` of the whole, which it
    /// joins from every part along `from`.
    AllToAll {
        /// The split dim of the parts.
        from: usize,
        /// The split dim of the result.
        to: usize,
    },
}

impl Collective {
    /// The collective's name, as traces and errors show it.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::global::Collective;
    /// assert_eq!(Collective::AllGather { dim: 1 }.name(), "all_gather");
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            Collective::AllGather { .. } => "all_gather",
            Collective::AllReduce { .. } => "all_reduce",
            Collective::ReduceScatter { .. } => "reduce_scatter",
            Collective::AllToAll { .. } => "all_to_all",
        }
    }

    /// The shape rank `k` of the group gets from parts of shapes `parts` (parts that agree on
    /// every dim but the split one, as a global tensor's components do).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::global::Collective;
    /// let parts = [[3, 4].into(), [2, 4].into()];
    /// assert_eq!(Collective::AllGather { dim: 0 }.out_shape(&parts, 1).dims(), [5, 4]);
    /// let a2a = Collective::AllToAll { from: 0, to: 1 };
    /// assert_eq!(a2a.out_shape(&parts, 0).dims(), [5, 2]);
    /// ```
    pub fn out_shape(&self, parts: &[Shape], k: usize) -> Shape {
        let mut dims = parts[0].0.clone();
        let p = parts.len();
        match *self {
            Collective::AllGather { dim } => dims[dim] = parts.iter().map(|s| s.0[dim]).sum(),
            Collective::AllReduce { .. } => {}
            Collective::ReduceScatter { dim, .. } => dims[dim] = split_range(dims[dim], p, k).len(),
            Collective::AllToAll { from, to } => {
                dims[from] = parts.iter().map(|s| s.0[from]).sum();
                dims[to] = split_range(dims[to], p, k).len();
            }
        }
        Shape(dims)
    }
}
