//! Reductions and scans: the op descriptor and the kernel for the operands' device.

use crate::device::{Device, pick};
use crate::{DType, Layout, cpu};
use eddy_vm::instruction::Kernel;

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
    pick!(device, cpu::reduce::cumsum(dtype, la, lo))
}

/// A reduction.
///
/// # Examples
///
/// ```
/// use eddy_ops::reduce::ReduceOp;
/// use eddy_ops::DType;
/// let op = ReduceOp::ArgMax;
/// assert_eq!(op.name(), "argmax");
/// assert_eq!(op.out_dtype(DType::F16), Some(DType::I64));
/// assert!(op.needs_elements());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// The sum (`I64` for integer and `Bool` inputs).
    Sum,
    /// The arithmetic mean (float inputs only).
    Mean,
    /// The product (`I64` for integer and `Bool` inputs).
    Prod,
    /// The largest element (a NaN wins).
    Max,
    /// The smallest element (a NaN wins).
    Min,
    /// The position of the largest element in the reduced row, as `I64` (the first on ties; a
    /// NaN wins).
    ArgMax,
    /// The position of the smallest element in the reduced row, as `I64` (the first on ties; a
    /// NaN wins).
    ArgMin,
}

impl ReduceOp {
    /// The op's name.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::reduce::ReduceOp;
    /// assert_eq!(ReduceOp::Prod.name(), "prod");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Mean => "mean",
            ReduceOp::Prod => "prod",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::ArgMax => "argmax",
            ReduceOp::ArgMin => "argmin",
        }
    }

    /// The output dtype for an input of `dtype`, or `None` if the op does not take it.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::{reduce::ReduceOp, DType};
    /// assert_eq!(ReduceOp::Sum.out_dtype(DType::Bool), Some(DType::I64));
    /// assert_eq!(ReduceOp::Max.out_dtype(DType::BF16), Some(DType::BF16));
    /// assert_eq!(ReduceOp::Mean.out_dtype(DType::I32), None);
    /// ```
    pub fn out_dtype(self, dtype: DType) -> Option<DType> {
        match self {
            ReduceOp::Sum | ReduceOp::Prod if !dtype.is_float() => Some(DType::I64),
            ReduceOp::Mean if !dtype.is_float() => None,
            ReduceOp::ArgMax | ReduceOp::ArgMin => Some(DType::I64),
            _ => Some(dtype),
        }
    }

    /// Whether the reduction has no identity (an empty reduced dim is an error).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::reduce::ReduceOp;
    /// assert!(ReduceOp::Min.needs_elements());
    /// assert!(!ReduceOp::Sum.needs_elements()); // the sum of nothing is 0
    /// ```
    pub fn needs_elements(self) -> bool {
        matches!(
            self,
            ReduceOp::Max | ReduceOp::Min | ReduceOp::ArgMax | ReduceOp::ArgMin
        )
    }
}
