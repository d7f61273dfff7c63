//! Masks: `masked_fill`, `tril`, `triu`.

use crate::{DType, Error, Result, Shape, Tensor};
use eddy_ops::broadcast_shapes;

/// Masking: `masked_fill` and the triangles `tril` / `triu`.
impl Tensor {
    /// `self` with `value` wherever `mask` is true (`mask` is `Bool`; the two broadcast
    /// together, as PyTorch's out-of-place `masked_fill`, so a mask larger than `self` gives
    /// the larger shape). The gradient flows to the elements not filled.
    ///
    /// # Errors
    ///
    /// `UnsupportedDType` if `mask` is not `Bool`; `ShapeMismatch` if the two do not
    /// broadcast; `DeviceMismatch`; `InvalidArgument` for a value `self`'s dtype cannot hold, as
    /// [`full`](Self::full).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let scores = Tensor::from_vec(vec![0.5f32, 1.0, 2.0], [3])?;
    /// let pad = Tensor::from_vec(vec![0i64, 0, 1], [3])?.gt_scalar(0.0)?;
    /// let s = scores.masked_fill(&pad, f64::NEG_INFINITY)?;
    /// assert_eq!(s.to_vec::<f32>()?, [0.5, 1.0, f32::NEG_INFINITY]);
    /// let rows = Tensor::from_vec(vec![true, false], [2, 1])?; // larger than `scores`
    /// assert_eq!(scores.masked_fill(&rows, 0.0)?.dims(), [2, 3]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn masked_fill(&self, mask: &Tensor, value: f64) -> Result<Tensor> {
        const OP: &str = "masked_fill";
        if mask.dtype() != DType::Bool {
            return Err(Error::UnsupportedDType {
                at: crate::Caller::here(),
                op: OP,
                dtype: mask.dtype(),
            });
        }
        self.same_device(OP, mask)?;
        // Out of place, `self` broadcasts too, as in PyTorch: the result has both's shape.
        broadcast_shapes(OP, self.shape(), mask.shape())?;
        let value = crate::create::checked_fill_value(OP, value, self.dtype())?;
        let fill = self.new_filled(Shape::default(), self.dtype(), value)?;
        mask.where_(&fill, self)
    }

    /// The lower triangle of the last two dims: elements with `col − row ≤ diagonal` are kept,
    /// the rest set to 0 (`diagonal` 0 is the main diagonal, positive above it), as PyTorch's
    /// `tril`. Batched over the leading dims; differentiable.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for a tensor of rank below 2.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::ones([3, 3], DType::F32)?;
    /// assert_eq!(t.tril(0)?.to_vec::<f32>()?, [1., 0., 0., 1., 1., 0., 1., 1., 1.]);
    /// assert_eq!(t.triu(1)?.to_vec::<f32>()?, [0., 1., 1., 0., 0., 1., 0., 0., 0.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn tril(&self, diagonal: i64) -> Result<Tensor> {
        self.triangle("tril", |i, j| j - i > diagonal)
    }

    /// The upper triangle of the last two dims: elements with `col − row ≥ diagonal` are kept,
    /// the rest set to 0, as PyTorch's `triu`. See [`tril`](Self::tril).
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for a tensor of rank below 2.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::ones([2, 3], DType::F32)?;
    /// assert_eq!(t.triu(0)?.to_vec::<f32>()?, [1., 1., 1., 0., 1., 1.]);
    /// assert_eq!(t.triu(-1)?.to_vec::<f32>()?, [1.; 6]);
    /// assert!(Tensor::ones([3], DType::F32)?.triu(0).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn triu(&self, diagonal: i64) -> Result<Tensor> {
        self.triangle("triu", |i, j| j - i < diagonal)
    }

    /// Zeros the elements `(row, col)` of the last two dims where `drop(row, col)`: a mask
    /// built on the host (rows × cols bytes) and applied with `masked_fill`.
    #[track_caller]
    pub(super) fn triangle(
        &self,
        op: &'static str,
        drop: impl Fn(i64, i64) -> bool,
    ) -> Result<Tensor> {
        let r = self.rank();
        if r < 2 {
            return Err(Error::invalid(
                op,
                format!("needs at least 2 dims, got {:?}", self.dims()),
            ));
        }
        if self.numel() == 0 {
            // Nothing to zero, and no mask to build over a dim that may be huge: a copy, as
            // `masked_fill` gives.
            return self.to_dtype(self.dtype());
        }
        let (rows, cols) = (self.dims()[r - 2], self.dims()[r - 1]);
        let mask: Vec<eddy_ops::Bool8> = (0..rows as i64)
            .flat_map(|i| (0..cols as i64).map(move |j| (i, j)))
            .map(|(i, j)| eddy_ops::Bool8(drop(i, j) as u8))
            .collect();
        let mask = crate::with_engine(self.engine(), || Tensor::from_vec(mask, [rows, cols]))?;
        self.masked_fill(&self.beside(mask)?, 0.0)
    }
}
