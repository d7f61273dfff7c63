//! Matrix products (`matmul`, batched, with broadcast batch dims) through the `gemm` crate.

use crate::{DType, Error, Result, Shape, Tensor};
use eddy_ops::{broadcast_shapes, cpu::matmul as km};

impl Tensor {
    /// The matrix product, as PyTorch's `matmul`: 1-D operands are promoted to a row (lhs) or
    /// a column (rhs) and the added dim removed; leading dims broadcast (batched matmul).
    /// `f16`/`bf16` compute in `f32`; integers are exact, their products and sums wrapping in
    /// the dtype (as `torch.mm`'s do).
    ///
    /// # Errors
    ///
    /// `ShapeMismatch` if the inner dims differ or the batch dims do not broadcast;
    /// `DTypeMismatch`, `DeviceMismatch`; `UnsupportedDType` for `bool`; `InvalidArgument` for
    /// 0-dim operands.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let a = Tensor::ones([4, 2, 3], DType::F32)?;
    /// let b = Tensor::ones([3, 5], DType::F32)?;
    /// assert_eq!(a.matmul(&b)?.dims(), &[4, 2, 5]);
    /// assert!(a.matmul(&a).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn matmul(&self, rhs: &Tensor) -> Result<Tensor> {
        self.same_device("matmul", rhs)?;
        if self.dtype() != rhs.dtype() {
            return Err(Error::DTypeMismatch {
                op: "matmul",
                lhs: self.dtype(),
                rhs: rhs.dtype(),
            });
        }
        if self.rank() == 0 || rhs.rank() == 0 {
            return Err(Error::invalid(
                "matmul",
                "both operands need at least one dim",
            ));
        }
        if self.rank() == 1 {
            // The added row dim is second to last, or last for a 1-D rhs (whose column dim
            // was removed already): 1-D @ 1-D is a 0-dim dot product, as in PyTorch.
            let r = self.unsqueeze(0)?.matmul(rhs)?;
            return r.squeeze(if rhs.rank() == 1 { -1 } else { -2 });
        }
        if rhs.rank() == 1 {
            return self.matmul(&rhs.unsqueeze(1)?)?.squeeze(-1);
        }
        // Shapes are checked before the casts of f16 and integer operands are enqueued (F1).
        let (ra, rb) = (self.rank(), rhs.rank());
        let (m, k) = (self.dims()[ra - 2], self.dims()[ra - 1]);
        let (k2, n) = (rhs.dims()[rb - 2], rhs.dims()[rb - 1]);
        if k != k2 {
            return Err(Error::ShapeMismatch {
                op: "matmul",
                lhs: self.dims().to_vec(),
                rhs: rhs.dims().to_vec(),
            });
        }
        let batch = broadcast_shapes(
            "matmul",
            &Shape::from(&self.dims()[..ra - 2]),
            &Shape::from(&rhs.dims()[..rb - 2]),
        )
        .map_err(|_| Error::ShapeMismatch {
            op: "matmul",
            lhs: self.dims().to_vec(),
            rhs: rhs.dims().to_vec(),
        })?;
        let dt = self.dtype();
        match dt {
            DType::F32 | DType::F64 | DType::I64 | DType::I32 | DType::U8 => {}
            DType::F16 | DType::BF16 => {
                return self
                    .cast(DType::F32)?
                    .matmul(&rhs.cast(DType::F32)?)?
                    .cast(dt);
            }
            DType::Bool => {
                // Arithmetic on `bool` is unsupported, as everywhere (and in `torch.mm`).
                return Err(Error::UnsupportedDType {
                    op: "matmul",
                    dtype: dt,
                });
            }
        }
        let full = |x: usize, y: usize| {
            let mut s = batch.clone();
            s.0.extend([x, y]);
            s
        };
        let la = self.layout().broadcast_to(&full(m, k));
        let lb = rhs.layout().broadcast_to(&full(k, n));
        let out = self.empty_like_shape(full(m, n), dt)?;
        let macs = eddy_ops::numel_of(&[batch.numel(), m, n, k]);
        Tensor::launch_with_work(km::matmul(dt, la, lb), &[self, rhs], &[&out], Some(macs))?;
        // The gradient of each operand reads the other.
        let saved: &[&Tensor] = match (self.requires_grad(), rhs.requires_grad()) {
            (true, true) => &[self, rhs],
            (true, false) => &[rhs],
            (false, _) => &[self],
        };
        Ok(
            out.record_saving("matmul", &[self, rhs], saved, false, |g, ins, _| {
                let (a, b) = (&ins[0], &ins[1]);
                // A column-major 2-D operand (a transposed view, as `Linear`'s `w.t()`) gets its
                // gradient column-major too, `(gᵀa)ᵀ` rather than `aᵀg`, so that the transpose's
                // backward hands the weight a contiguous gradient (the optimizer's update then
                // streams instead of striding).
                let col_major =
                    |t: &Tensor| t.rank() == 2 && t.layout().strides[0] == 1 && t.dims()[0] > 1;
                let ga = a
                    .requires_grad()
                    .then(|| match col_major(a) && g.rank() == 2 {
                        true => b.matmul(&g.t()?)?.t(),
                        false => g.matmul(&b.t()?)?.sum_to(a.shape()),
                    })
                    .transpose()?;
                let gb = b
                    .requires_grad()
                    .then(|| match col_major(b) && g.rank() == 2 {
                        true => g.t()?.matmul(a)?.t(),
                        false => a.t()?.matmul(g)?.sum_to(b.shape()),
                    })
                    .transpose()?;
                Ok(vec![ga, gb])
            }),
        )
    }
}
