//! Matrix products: their inference (dims and dtype) and the kernel for the operands'
//! device.

use crate::device::{Device, pick};
use crate::error::{Error, Result};
use crate::shape::broadcast_shapes;
use crate::{DType, Layout, Shape, cpu};
use eddy_vm::instruction::Kernel;

/// The dims of a product `a @ b` of operands of at least 2 dims: `a` is `[.., m, k]`, `b` is
/// `[.., k, n]`, and the batch dims (`..`) broadcast.
///
/// # Examples
///
/// ```
/// use eddy_ops::linalg::infer_matmul;
/// let d = infer_matmul(&[4, 1, 2, 3], &[5, 3, 6])?;
/// assert_eq!((d.m, d.k, d.n), (2, 3, 6));
/// assert_eq!(d.shape().dims(), &[4, 5, 2, 6]);
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatmulDims {
    /// The batch dims, broadcast.
    pub batch: Shape,
    /// Rows of `a` and of the output.
    pub m: usize,
    /// The dim summed over.
    pub k: usize,
    /// Columns of `b` and of the output.
    pub n: usize,
}

impl MatmulDims {
    /// The output's shape: the batch dims, then `[m, n]`.
    pub fn shape(&self) -> Shape {
        self.with(self.m, self.n)
    }

    /// The batch dims followed by `[x, y]`: an operand's shape broadcast over the batch.
    pub fn with(&self, x: usize, y: usize) -> Shape {
        let mut s = self.batch.clone();
        s.0.extend([x, y]);
        s
    }
}

/// Checks the operands of `a @ b` before any dim is looked at: one dtype (as PyTorch's
/// `matmul`, which does not promote), and at least one dim each.
///
/// # Errors
///
/// `DTypeMismatch`; `InvalidArgument` for a 0-dim operand.
///
/// # Examples
///
/// ```
/// use eddy_ops::{linalg::matmul_operands, DType};
/// assert!(matmul_operands((DType::F32, 2), (DType::F32, 1)).is_ok());
/// assert!(matmul_operands((DType::F32, 2), (DType::F64, 2)).is_err());
/// assert!(matmul_operands((DType::F32, 0), (DType::F32, 2)).is_err());
/// ```
#[track_caller]
pub fn matmul_operands((a, a_rank): (DType, usize), (b, b_rank): (DType, usize)) -> Result<()> {
    if a != b {
        return Err(Error::DTypeMismatch {
            at: crate::Caller::here(),
            op: "matmul",
            lhs: a,
            rhs: b,
        });
    }
    if a_rank == 0 || b_rank == 0 {
        return Err(Error::invalid(
            "matmul",
            "both operands need at least one dim",
        ));
    }
    Ok(())
}

/// Infers `a @ b` for operands of dims `a` and `b`, each of at least 2 dims (the tensor layer
/// turns a 1-D operand into a matrix first, as PyTorch does): the inner dims equal, the batch
/// dims broadcast.
///
/// # Errors
///
/// `ShapeMismatch` naming both shapes.
///
/// # Examples
///
/// See [`MatmulDims`].
#[track_caller]
pub fn infer_matmul(a: &[usize], b: &[usize]) -> Result<MatmulDims> {
    let at = crate::Caller::here();
    let mismatch = || Error::ShapeMismatch {
        at,
        op: "matmul",
        lhs: a.to_vec(),
        rhs: b.to_vec(),
    };
    let (ra, rb) = (a.len(), b.len());
    if ra < 2 || rb < 2 {
        return Err(mismatch());
    }
    let (m, k) = (a[ra - 2], a[ra - 1]);
    let (k2, n) = (b[rb - 2], b[rb - 1]);
    if k != k2 {
        return Err(mismatch());
    }
    let batch = broadcast_shapes(
        "matmul",
        &Shape::from(&a[..ra - 2]),
        &Shape::from(&b[..rb - 2]),
    )
    .map_err(|_| mismatch())?;
    Ok(MatmulDims { batch, m, k, n })
}

/// The kernel of `out = a @ b` (batched; layouts give the batch, rows and columns), on
/// `device`.
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`](crate::Error::Unsupported)).
///
/// # Examples
///
/// ```
/// use eddy_ops::{linalg::matmul, DType, Device, Layout};
/// let (a, b) = (Layout::contiguous([2, 3]), Layout::contiguous([3, 4]));
/// assert!(matmul(Device::CPU, DType::F32, a, b).is_some());
/// ```
pub fn matmul(device: Device, dtype: DType, la: Layout, lb: Layout) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::matmul::matmul(dtype, la, lb),
        crate::cuda::ops::matmul(dtype, la, lb)
    )
}

/// The kernel of `out = a @ b + c` (PyTorch's `addmm`, `c` a bias broadcast over the rows),
/// on `device`.
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`](crate::Error::Unsupported)).
///
/// # Examples
///
/// ```
/// use eddy_ops::{linalg::matmul_bias, DType, Device, Layout};
/// let (a, b, c) = (Layout::contiguous([2, 3]), Layout::contiguous([3, 4]), Layout::contiguous([4]));
/// assert!(matmul_bias(Device::CPU, DType::F32, a, b, c).is_some());
/// ```
pub fn matmul_bias(
    device: Device,
    dtype: DType,
    la: Layout,
    lb: Layout,
    lc: Layout,
) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::matmul::matmul_bias(dtype, la, lb, lc),
        crate::cuda::ops::matmul_bias(dtype, la, lb, lc, false)
    )
}

/// The kernel of `out = relu(a @ b + c)` (PyTorch's `_addmm_activation`), on `device`.
///
/// `None` if `device` has no kernel for it (the caller reports [`Error::Unsupported`](crate::Error::Unsupported)).
///
/// # Examples
///
/// ```
/// use eddy_ops::{linalg::matmul_bias_relu, DType, Device, Layout};
/// let (a, b, c) = (Layout::contiguous([2, 3]), Layout::contiguous([3, 4]), Layout::contiguous([4]));
/// assert!(matmul_bias_relu(Device::CPU, DType::F32, a, b, c).is_some());
/// ```
pub fn matmul_bias_relu(
    device: Device,
    dtype: DType,
    la: Layout,
    lb: Layout,
    lc: Layout,
) -> Option<impl Kernel + use<>> {
    pick!(
        device,
        cpu::matmul::matmul_bias_relu(dtype, la, lb, lc),
        crate::cuda::ops::matmul_bias(dtype, la, lb, lc, true)
    )
}

/// The inference of `linear` (as op `op`): `input` (`[…, in]`, not `bool`) times a 2-D
/// `weight` (`[out, in]`) transposed, plus an optional `bias` of `[out]` or one element; every
/// operand of `input`'s dtype. The output's shape is `input`'s with `out` last.
///
/// # Errors
///
/// `DTypeMismatch`; `InvalidArgument` for a 0-dim input or a weight that is not 2-D;
/// `UnsupportedDType` for `bool`; `ShapeMismatch` naming the shapes that do not fit.
///
/// # Examples
///
/// ```
/// use eddy_ops::{linalg::infer_linear, DType};
/// let f = DType::F32;
/// let s = infer_linear("linear", (&[8, 3], f), (&[4, 3], f), Some((&[4], f)))?;
/// assert_eq!(s.dims(), &[8, 4]);
/// assert!(infer_linear("linear", (&[8, 3], f), (&[4, 2], f), None).is_err());
/// assert!(infer_linear("linear", (&[8, 3], f), (&[4, 3], DType::F64), None).is_err());
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[track_caller]
pub fn infer_linear(
    op: &'static str,
    input: (&[usize], DType),
    weight: (&[usize], DType),
    bias: Option<(&[usize], DType)>,
) -> Result<Shape> {
    let ((x, dt), (w, _)) = (input, weight);
    for (_, t) in std::iter::once(weight).chain(bias) {
        if t != dt {
            return Err(Error::DTypeMismatch {
                at: crate::Caller::here(),
                op,
                lhs: dt,
                rhs: t,
            });
        }
    }
    if x.is_empty() || w.len() != 2 {
        return Err(Error::invalid(
            op,
            format!("needs input of at least one dim and a 2-D weight, got {x:?} and {w:?}"),
        ));
    }
    if dt == DType::Bool {
        return Err(Error::UnsupportedDType {
            at: crate::Caller::here(),
            op,
            dtype: DType::Bool,
        });
    }
    let (out_f, in_f) = (w[0], w[1]);
    if x[x.len() - 1] != in_f {
        return Err(Error::ShapeMismatch {
            at: crate::Caller::here(),
            op,
            lhs: x.to_vec(),
            rhs: w.to_vec(),
        });
    }
    if let Some((b, _)) = bias
        && (b.len() > 1 || (crate::numel_of(b) != out_f && crate::numel_of(b) != 1))
    {
        return Err(Error::ShapeMismatch {
            at: crate::Caller::here(),
            op,
            lhs: vec![out_f],
            rhs: b.to_vec(),
        });
    }
    let mut shape = Shape::from(x);
    *shape.0.last_mut().expect("checked: at least one dim") = out_f;
    Ok(shape)
}
