//! Reductions and scans: the op descriptor, the inference of a reduction's output, and the
//! kernel for the operands' device.

use crate::device::{Device, pick};
use crate::error::{Error, Result};
use crate::{DType, Layout, Shape, cpu, norm_dim};
use eddy_vm::instruction::Kernel;
use smallvec::SmallVec;

pub use crate::kinds::ReduceOp;

/// What a reduction computes, inferred from its input's dims and dtype: which dims it
/// reduces, how many elements go into each output element, and the output.
///
/// # Examples
///
/// ```
/// use eddy_ops::{reduce::{infer_reduce, ReduceOp}, DType};
/// let r = infer_reduce(ReduceOp::Sum, &[2, 3, 4], DType::I32, &[0, -1], true)?;
/// assert_eq!((r.n_red, r.out_numel, r.dtype), (8, 3, DType::I64));
/// assert_eq!(r.shape.dims(), &[1, 3, 1]);
/// assert!(!r.leading); // dims 0 and 2: not a run of leading dims
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReduceDims {
    /// Whether each input dim is reduced.
    pub reduced: SmallVec<[bool; 8]>,
    /// The elements that go into each output element (saturating: a zero-sized input may
    /// have other dims whose product overflows, and then has no output element).
    pub n_red: usize,
    /// The output's elements (saturating likewise).
    pub out_numel: usize,
    /// The output's shape (reduced dims kept as 1 with `keepdim`).
    pub shape: Shape,
    /// Whether the reduced dims are the leading ones, at least one of them.
    pub leading: bool,
    /// The output's dtype.
    pub dtype: DType,
}

/// Infers reduction `op` over `axes` (negative from the end; a 0-dim input takes 0 or -1 and
/// reduces nothing, as in PyTorch) of an input of `dims` and `dtype`, the reduced dims kept as
/// 1 with `keepdim`.
///
/// # Errors
///
/// `InvalidDim` for an axis out of range; `InvalidArgument` for an axis named twice;
/// `UnsupportedDType` where `op` takes no `dtype`; `EmptyTensor` where `op` needs elements
/// (max, min, their arg forms) and a run has none.
///
/// # Examples
///
/// See [`ReduceDims`].
#[track_caller]
#[inline]
pub fn infer_reduce(
    op: ReduceOp,
    dims: &[usize],
    dtype: DType,
    axes: &[isize],
    keepdim: bool,
) -> Result<ReduceDims> {
    let name = op.name();
    let r = dims.len();
    let mut reduced: SmallVec<[bool; 8]> = SmallVec::from_elem(false, r);
    for &d in axes {
        let nd = norm_dim(name, d, r.max(1))?;
        if r > 0 && std::mem::replace(&mut reduced[nd], true) {
            return Err(Error::invalid(
                name,
                format!("dim {nd} appears more than once in the dims {axes:?}"),
            ));
        }
    }
    let out_dtype = op.out_dtype(dtype).ok_or(Error::UnsupportedDType {
        at: crate::Caller::here(),
        op: name,
        dtype,
    })?;
    // One pass over the dims. Plain pushes: filtered `collect`s cost more than a small
    // reduction's kernel.
    let (mut n_red, mut out_numel, mut n_reduced) = (1usize, 1usize, 0usize);
    let mut leading = true;
    let mut out_dims: SmallVec<[usize; 4]> = SmallVec::new();
    for (d, &size) in dims.iter().enumerate() {
        if reduced[d] {
            n_red = n_red.saturating_mul(size);
            leading &= n_reduced == d;
            n_reduced += 1;
            if keepdim {
                out_dims.push(1);
            }
        } else {
            out_numel = out_numel.saturating_mul(size);
            out_dims.push(size);
        }
    }
    if op.needs_elements() && n_red == 0 {
        return Err(Error::EmptyTensor {
            at: crate::Caller::here(),
            op: name,
        });
    }
    Ok(ReduceDims {
        reduced,
        n_red,
        out_numel,
        shape: Shape(out_dims),
        leading: leading && n_reduced > 0,
        dtype: out_dtype,
    })
}

/// The kernel reducing the trailing `r` elements of each output element's run of `la` (the
/// reduced dims permuted last) with `op`, on `device`.
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`](crate::Error::Unsupported)).
///
/// # Examples
///
/// ```
/// use eddy_ops::{reduce::{reduce, ReduceOp}, DType, Device, Layout};
/// assert!(reduce(Device::CPU, ReduceOp::Sum, DType::F32, Layout::contiguous([2, 3]), 3).is_some());
/// ```
pub fn reduce(
    device: Device,
    op: ReduceOp,
    dtype: DType,
    la: Layout,
    r: usize,
) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::reduce::reduce(op, dtype, la, r),
        crate::cuda::ops::reduce(op, dtype, la, r)
    )
}

/// The kernel summing the leading `rows` rows of a dense `[rows, cols]` input starting at
/// `offset` into `cols` outputs (a bias gradient), on `device`.
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`](crate::Error::Unsupported)).
///
/// # Examples
///
/// ```
/// use eddy_ops::{reduce::sum_leading, DType, Device};
/// assert!(sum_leading(Device::CPU, DType::F32, 0, 4, 8).is_some());
/// ```
pub fn sum_leading(
    device: Device,
    dtype: DType,
    offset: usize,
    rows: usize,
    cols: usize,
) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::reduce::sum_leading(dtype, offset, rows, cols),
        crate::cuda::ops::sum_leading(dtype, offset, rows, cols)
    )
}

/// The kernel of a cumulative product along the last dim of `la` into `lo`, on `device`
/// (see [`cpu::reduce::cumprod`]).
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`](crate::Error::Unsupported)).
///
/// # Examples
///
/// ```
/// use eddy_ops::{reduce::cumprod, DType, Device, Layout};
/// let l = Layout::contiguous([2, 3]);
/// assert!(cumprod(Device::CPU, DType::F32, l.clone(), l).is_some());
/// ```
pub fn cumprod(
    device: Device,
    dtype: DType,
    la: Layout,
    lo: Layout,
) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::reduce::cumprod(dtype, la, lo),
        crate::cuda::ops::cumprod(dtype, la, lo)
    )
}

/// The kernel of [`cumprod`]'s gradient over `rows` dense rows of `n` (see
/// [`cpu::reduce::cumprod_backward`]), on `device`.
///
/// `None` if `device` has no kernel for it.
///
/// # Examples
///
/// ```
/// use eddy_ops::{reduce::cumprod_backward, DType, Device};
/// assert!(cumprod_backward(Device::CPU, DType::F32, 2, 3, (0, 0)).is_some());
/// ```
pub fn cumprod_backward(
    device: Device,
    dtype: DType,
    rows: usize,
    n: usize,
    offsets: (usize, usize),
) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::reduce::cumprod_backward(dtype, rows, n, offsets),
        crate::cuda::ops::cumprod_backward(dtype, rows, n, offsets)
    )
}

/// The kernel of a cumulative sum along the last dim of `la` into `lo`, on `device`.
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`](crate::Error::Unsupported)).
///
/// # Examples
///
/// ```
/// use eddy_ops::{reduce::cumsum, DType, Device, Layout};
/// let l = Layout::contiguous([2, 3]);
/// assert!(cumsum(Device::CPU, DType::F32, l.clone(), l).is_some());
/// ```
pub fn cumsum(device: Device, dtype: DType, la: Layout, lo: Layout) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::reduce::cumsum(dtype, la, lo),
        crate::cuda::ops::cumsum(dtype, la, lo)
    )
}

/// The dims to sum (keeping them) for `sum_to`, the inverse of broadcasting `to` to `from`:
/// every leading dim `to` lacks, and each dim where `to` has 1 and `from` more.
///
/// # Errors
///
/// `ShapeMismatch` if `to` does not broadcast to `from`.
///
/// # Examples
///
/// ```
/// use eddy_ops::reduce::sum_to_dims;
/// assert_eq!(sum_to_dims(&[2, 3], &[1, 3])?.as_slice(), &[0]);
/// assert_eq!(sum_to_dims(&[4, 2, 3], &[3])?.as_slice(), &[0, 1]);
/// assert!(sum_to_dims(&[2, 3], &[4]).is_err());
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[track_caller]
pub fn sum_to_dims(from: &[usize], to: &[usize]) -> Result<SmallVec<[isize; 4]>> {
    let (r, k) = (from.len(), to.len());
    let mismatch = |at| Error::ShapeMismatch {
        at,
        op: "sum_to",
        lhs: from.to_vec(),
        rhs: to.to_vec(),
    };
    if k > r {
        return Err(mismatch(crate::Caller::here()));
    }
    let mut dims = SmallVec::new();
    for d in 0..r {
        let target = if d + k >= r { to[d + k - r] } else { 1 };
        if d + k < r || (target == 1 && from[d] != 1) {
            dims.push(d as isize);
        } else if target != from[d] {
            return Err(mismatch(crate::Caller::here()));
        }
    }
    Ok(dims)
}
