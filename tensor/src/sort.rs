//! Ordering along a dim: `sort`, `argsort`, `topk` and `median`, all from one kernel
//! ([`eddy_ops::sort`]). NaN counts as larger than every number and equal values keep
//! their order (the sort is stable), so results are the same on any thread count.

use crate::{DType, Error, Result, Shape, Tensor};
use eddy_ops::norm_dim;
use eddy_ops::sort as ks;
use smallvec::SmallVec;

impl Tensor {
    /// The values along `dim` in ascending order (descending if `descending`), and the `i64`
    /// positions they came from, both of `self`'s shape and contiguous.
    ///
    /// The sort is stable: equal values keep their order, in either direction. NaN sorts as
    /// the largest value (last ascending, first descending), as in PyTorch. Any dtype sorts;
    /// the values are differentiable for floats (the gradient flows back to the positions
    /// they came from).
    ///
    /// # Errors
    ///
    /// `InvalidDim`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![3f32, 1.0, 2.0, 1.0], [4])?;
    /// let (v, i) = x.sort(0, false)?;
    /// assert_eq!(v.to_vec::<f32>()?, [1.0, 1.0, 2.0, 3.0]);
    /// assert_eq!(i.to_vec::<i64>()?, [1, 3, 2, 0]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn sort(&self, dim: isize, descending: bool) -> Result<(Tensor, Tensor)> {
        self.ordered("sort", dim, None, descending)
    }

    /// The positions that sort `self` along `dim` ([`sort`](Self::sort)'s second result).
    ///
    /// # Errors
    ///
    /// `InvalidDim`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![3i64, 1, 2, 5, 4, 0], [2, 3])?;
    /// assert_eq!(x.argsort(1, true)?.to_vec::<i64>()?, [0, 2, 1, 0, 1, 2]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn argsort(&self, dim: isize, descending: bool) -> Result<Tensor> {
        Ok(self.ordered("argsort", dim, None, descending)?.1)
    }

    /// The `k` largest values along `dim` (the smallest if `!largest`), in order from the
    /// largest (smallest) down, with their `i64` positions; `dim` has size `k` in both results.
    ///
    /// Ties go to the earlier position; NaN counts as the largest value. Selects before it
    /// sorts, so a small `k` of a long dim costs little more than one pass.
    ///
    /// # Errors
    ///
    /// `InvalidDim`; `InvalidArgument` if `k` exceeds the size of `dim`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![1f32, 5.0, 3.0, 5.0, 2.0], [5])?;
    /// let (v, i) = x.topk(2, -1, true)?;
    /// assert_eq!(v.to_vec::<f32>()?, [5.0, 5.0]);
    /// assert_eq!(i.to_vec::<i64>()?, [1, 3]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn topk(&self, k: usize, dim: isize, largest: bool) -> Result<(Tensor, Tensor)> {
        self.ordered("topk", dim, Some(k), largest)
    }

    /// The `k`-th smallest value along `dim` (counting from 1) and its `i64` position, as
    /// PyTorch's `kthvalue`; `dim` is kept with size 1 if `keepdim`, else removed.
    ///
    /// # Errors
    ///
    /// `InvalidDim`; `InvalidArgument` unless `1 ≤ k ≤` the size of `dim`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![3f32, -1.0, 2.0, 5.0], [4])?;
    /// let (v, i) = x.kthvalue(2, 0, false)?;
    /// assert_eq!((v.item::<f32>()?, i.item::<i64>()?), (2.0, 2));
    /// assert!(x.kthvalue(5, 0, false).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn kthvalue(&self, k: usize, dim: isize, keepdim: bool) -> Result<(Tensor, Tensor)> {
        self.refuse_bool("kthvalue")?;
        ks::check_kth(self.dims(), k, dim)?;
        let (v, i) = self.ordered("kthvalue", dim, Some(k), false)?;
        if self.rank() == 0 {
            return Ok((v, i));
        }
        let (v, i) = (v.narrow(dim, k - 1, 1)?, i.narrow(dim, k - 1, 1)?);
        if keepdim {
            Ok((v, i))
        } else {
            Ok((v.squeeze(dim)?, i.squeeze(dim)?))
        }
    }

    /// The lower median along `dim` (the `⌊(n−1)/2⌋`-th smallest value, as PyTorch's `median`)
    /// and its `i64` position; `dim` is kept with size 1 if `keepdim`, else removed. A row
    /// holding NaN has the median NaN, at its first NaN (as PyTorch's; not `nanmedian`).
    ///
    /// # Errors
    ///
    /// `InvalidDim`; `EmptyTensor` if `dim` is empty.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![4f32, 1.0, 3.0, 2.0], [2, 2])?;
    /// let (m, i) = x.median(1, false)?;
    /// assert_eq!(m.to_vec::<f32>()?, [1.0, 2.0]);
    /// assert_eq!(i.to_vec::<i64>()?, [1, 1]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn median(&self, dim: isize, keepdim: bool) -> Result<(Tensor, Tensor)> {
        self.refuse_bool("median")?;
        let r = self.rank();
        let d = norm_dim("median", dim, r.max(1))?;
        let n = if r == 0 { 1 } else { self.dims()[d] };
        if n == 0 {
            return Err(Error::EmptyTensor {
                at: crate::Caller::here(),
                op: "median",
            });
        }
        let (v, i) = self.ordered("median", dim, Some((n - 1) / 2 + 1), false)?;
        if r == 0 {
            return Ok((v, i));
        }
        let (mut v, mut i) = (
            v.narrow(dim, (n - 1) / 2, 1)?,
            i.narrow(dim, (n - 1) / 2, 1)?,
        );
        if self.dtype().is_float() {
            // A row with a NaN has the median NaN, at its first NaN, as PyTorch's `median`
            // (the sort puts NaN last, so the middle value would skip it). The value is then
            // gathered from that position, which takes the gradient there.
            let nan = {
                let _g = crate::no_grad();
                self.ne(self)?
            };
            let has_nan = nan.any(&[dim], true)?;
            let first_nan = nan.to_dtype(DType::U8)?.argmax(dim, true)?;
            i = has_nan.where_(&first_nan, &i)?;
            v = self.gather(dim, &i)?;
        }
        if keepdim {
            Ok((v, i))
        } else {
            Ok((v.squeeze(dim)?, i.squeeze(dim)?))
        }
    }

    /// The first `k` (all if `None`) entries of each row's order along `dim`, ascending or
    /// descending, as values and positions; errors name `op`.
    #[track_caller]
    pub(crate) fn ordered(
        &self,
        op: &'static str,
        dim: isize,
        k: Option<usize>,
        descending: bool,
    ) -> Result<(Tensor, Tensor)> {
        let r = self.rank();
        if r == 0 {
            norm_dim(op, dim, 1)?;
            let (v, i) = self.reshape([1])?.ordered(op, 0, k, descending)?;
            // A 0-dim tensor is its own order; `topk` with `k = 0` leaves nothing.
            return if v.numel() == 1 {
                Ok((v.reshape(Shape::default())?, i.reshape(Shape::default())?))
            } else {
                Ok((v, i))
            };
        }
        let (d, shape) = ks::infer_sort(op, self.dims(), dim, k)?;
        let (values, indices) = if self.is_global() {
            self.global_ordered(op, d, k, descending, shape)?
        } else {
            let values = self.empty_like_shape(shape.clone(), self.dtype())?;
            let indices = self.empty_like_shape(shape, DType::I64)?;
            let perm: SmallVec<[usize; 6]> = (0..r).filter(|&j| j != d).chain([d]).collect();
            let kern = kernel!(
                "sort",
                self.device(),
                ks::sort(
                    self.device(),
                    self.dtype(),
                    self.layout().permute(&perm),
                    values.layout().permute(&perm),
                    descending,
                )
            );
            Tensor::launch(kern, &[self], &[&values, &indices])?;
            (values, indices)
        };
        if !self.dtype().is_float() || !crate::autograd::records(&[self]) {
            return Ok((values, indices));
        }
        // The gradient goes back to the positions the values came from (a gather's backward).
        let (idx, in_shape) = (indices.clone(), self.shape().clone());
        let values = values.record_saving(op, &[self], &[&indices], false, move |g, _, _| {
            Ok(vec![Some(g.add_at_gathered(&idx, &in_shape, d)?)])
        });
        Ok((values, indices))
    }
}
