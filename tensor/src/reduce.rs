//! Reductions over dims, with `keepdim`: `sum`, `mean`, `prod`, `max`, `min`, `argmax`,
//! `argmin`, `var`/`std`, `logsumexp`, `norm`, `any`/`all` composed of them, and the running sum
//! `cumsum`. Empty reductions return the identity (sum 0, prod 1, logsumexp -inf, all true);
//! `max`/`min`/`arg*` over an empty dim are `EmptyTensor` errors.

use crate::{DType, Error, Result, Shape, Tensor};
use eddy_ops::norm_dim;
use eddy_ops::reduce::{self as kr, ReduceOp};
use smallvec::SmallVec;

/// A list of dims: inline up to 4, so that a small reduction allocates only its output.
type Dims<T> = SmallVec<[T; 4]>;

impl Tensor {
    #[track_caller]
    fn reduce(&self, op: ReduceOp, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        let name = op.name();
        let r = self.rank();
        let mut red: SmallVec<[bool; 8]> = SmallVec::from_elem(false, r);
        for &d in dims {
            // A 0-dim tensor takes dim 0 or -1, as in PyTorch, and reduces nothing.
            let nd = norm_dim(name, d, r.max(1))?;
            if r > 0 && std::mem::replace(&mut red[nd], true) {
                return Err(Error::invalid(
                    name,
                    format!("dim {nd} appears more than once in the dims {dims:?}"),
                ));
            }
        }
        let out_dtype = op.out_dtype(self.dtype()).ok_or(Error::UnsupportedDType {
            at: crate::Caller::here(),
            op: name,
            dtype: self.dtype(),
        })?;
        // One pass over the dims: the sizes, the output's dims, and whether the reduced dims
        // are the leading ones (then a contiguous sum is one dense kernel). Plain pushes: the
        // filtered `collect`s this replaces cost more than a small reduction's kernel.
        let src = self.dims();
        let (mut n_red, mut out_numel, mut n_reduced) = (1usize, 1usize, 0usize);
        let mut prefix = true;
        let mut out_dims: Dims<usize> = SmallVec::new();
        // Saturating products: a zero-sized tensor may have other dims whose product overflows;
        // then a 0 among them makes the product 0 (as it should), and otherwise it has no
        // elements on the other side, so the kernel never uses the saturated count.
        for (d, &size) in src.iter().enumerate() {
            if red[d] {
                n_red = n_red.saturating_mul(size);
                prefix &= n_reduced == d;
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
        let out = self.empty_like_shape(Shape(out_dims), out_dtype)?;
        if op == ReduceOp::Sum
            && self.dtype().is_float()
            && self.is_contiguous()
            && prefix
            && n_reduced > 0
        {
            let (dt, off) = (self.dtype(), self.layout().offset);
            let k = kernel!(
                "sum",
                self.device(),
                kr::sum_leading(self.device(), dt, off, n_red, out_numel)
            );
            Tensor::launch(k, &[self], &[&out])?;
        } else {
            // The kept dims first, then the reduced ones.
            let perm: Dims<usize> = (0..r)
                .filter(|&d| !red[d])
                .chain((0..r).filter(|&d| red[d]))
                .collect();
            let la = self.layout().permute(&perm);
            let k = kernel!(
                op.name(),
                self.device(),
                kr::reduce(self.device(), op, self.dtype(), la, n_red)
            );
            Tensor::launch(k, &[self], &[&out])?;
        }
        if !self.dtype().is_float()
            || matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin)
            || !crate::autograd::records(&[self])
        {
            return Ok(out);
        }
        let keep_shape = Shape((0..r).map(|d| if red[d] { 1 } else { src[d] }).collect());
        let in_shape = self.shape().clone();
        let reduced: Vec<isize> = (0..r as isize).filter(|&d| red[d as usize]).collect();
        // Sum and mean need only shapes; prod, max and min read the input and the output.
        let reads = !matches!(op, ReduceOp::Sum | ReduceOp::Mean);
        let saved: &[&Tensor] = if reads { &[self] } else { &[] };
        Ok(
            out.record_saving(name, &[self], saved, reads, move |g, ins, y| {
                let g = g.reshape(keep_shape.clone())?;
                let gx = match op {
                    ReduceOp::Sum => g.broadcast_to(in_shape.clone())?.contiguous()?,
                    ReduceOp::Mean => g
                        .div_scalar(n_red.max(1) as f64)?
                        .broadcast_to(in_shape.clone())?
                        .contiguous()?,
                    ReduceOp::Prod => {
                        // The product of the other elements, as PyTorch's `prod_backward`: `y / x`
                        // without zeros; with one zero, the product of the rest at the zero and 0
                        // elsewhere; with more, 0 everywhere (`y / x` would be 0/0 at a zero).
                        let x = &ins[0];
                        let zero = x.eq_scalar(0.0)?;
                        let zeros = zero.to_dtype(x.dtype())?.sum(&reduced, true)?;
                        let nought = x.new_filled(Shape::default(), x.dtype(), 0.0)?;
                        let rest = zero.where_(&x.ones_like()?, x)?.prod(&reduced, true)?;
                        let at_one = zero.where_(&rest, &nought)?;
                        let plain = y.reshape(keep_shape.clone())?.div(x)?;
                        let two = zeros.gt_scalar(1.0)?.where_(&nought, &at_one)?;
                        zeros.eq_scalar(0.0)?.where_(&plain, &two)?.mul(&g)?
                    }
                    _ => {
                        // Ties share the gradient evenly, as PyTorch's amax/amin.
                        let mask = ins[0]
                            .eq(&y.reshape(keep_shape.clone())?)?
                            .cast(g.dtype())?;
                        let count = mask.sum(
                            &(0..in_shape.rank() as isize)
                                .filter(|&d| {
                                    keep_shape.dims()[d as usize] == 1
                                        && in_shape.dims()[d as usize] != 1
                                })
                                .collect::<Vec<_>>(),
                            true,
                        )?;
                        mask.mul(&g)?.div(&count)?
                    }
                };
                Ok(vec![Some(gx)])
            }),
        )
    }

    /// Sum over `dims` (`keepdim` keeps them as size 1). Integers and bools sum to `i64`.
    ///
    /// # Errors
    ///
    /// `InvalidDim`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::arange(0.0, 6.0, 1.0, DType::F32)?.reshape([2, 3])?;
    /// assert_eq!(t.sum(&[1], false)?.to_vec::<f32>()?, vec![3., 12.]);
    /// assert_eq!(t.sum(&[0], true)?.dims(), &[1, 3]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn sum(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Sum, dims, keepdim)
    }
    /// Sum of all elements (0-dim).
    ///
    /// # Errors
    ///
    /// Engine errors.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1f32, 2., 3., 4.], [2, 2])?;
    /// let s = t.sum_all()?;
    /// assert_eq!((s.rank(), s.item::<f32>()?), (0, 10.));
    /// let b = Tensor::from_vec(vec![true, false, true], [3])?;
    /// assert_eq!(b.sum_all()?.item::<i64>()?, 2); // bools count as i64
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn sum_all(&self) -> Result<Tensor> {
        self.reduce(ReduceOp::Sum, &all(self.rank()), false)
    }
    /// Mean over `dims` (float tensors only).
    ///
    /// # Errors
    ///
    /// `InvalidDim`; `UnsupportedDType` for integer tensors (as PyTorch).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1f32, 2., 3., 4.], [2, 2])?;
    /// assert_eq!(t.mean(&[0], false)?.to_vec::<f32>()?, [2., 3.]);
    /// assert_eq!(t.mean(&[1], true)?.to_vec2::<f32>()?, [[1.5], [3.5]]);
    /// assert!(Tensor::from_vec(vec![1i64, 2], [2])?.mean(&[0], false).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn mean(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Mean, dims, keepdim)
    }
    /// Mean of all elements (0-dim; NaN for an empty tensor, as PyTorch).
    ///
    /// # Errors
    ///
    /// As [`mean`](Self::mean).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1f32, 2., 3., 4.], [2, 2])?;
    /// assert_eq!(t.mean_all()?.item::<f32>()?, 2.5);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn mean_all(&self) -> Result<Tensor> {
        self.reduce(ReduceOp::Mean, &all(self.rank()), false)
    }
    /// Product over `dims`.
    ///
    /// # Errors
    ///
    /// `InvalidDim`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1f32, 2., 3., 4.], [2, 2])?;
    /// assert_eq!(t.prod(&[1], false)?.to_vec::<f32>()?, [2., 12.]);
    /// assert_eq!(t.prod(&[0, 1], false)?.item::<f32>()?, 24.);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn prod(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Prod, dims, keepdim)
    }
    /// Maximum over `dim` (NaN propagates).
    ///
    /// # Errors
    ///
    /// `InvalidDim`; `EmptyTensor` if the dim is empty.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::from_vec(vec![1f32, 2., 3., 4.], [2, 2])?;
    /// assert_eq!(t.max(1, false)?.to_vec::<f32>()?, [2., 4.]);
    /// assert_eq!(t.max(0, true)?.dims(), &[1, 2]);
    /// assert!(Tensor::zeros([2, 0], DType::F32)?.max(1, false).is_err()); // an empty dim
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn max(&self, dim: isize, keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Max, &[dim], keepdim)
    }
    /// Minimum over `dim`.
    ///
    /// # Errors
    ///
    /// As [`max`](Self::max).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1f32, 2., 3., 0.], [2, 2])?;
    /// assert_eq!(t.min(0, false)?.to_vec::<f32>()?, [1., 0.]);
    /// assert_eq!(t.min(-1, false)?.to_vec::<f32>()?, [1., 0.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn min(&self, dim: isize, keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Min, &[dim], keepdim)
    }
    /// Maximum of all elements.
    ///
    /// # Errors
    ///
    /// `EmptyTensor` for an empty tensor.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::from_vec(vec![1f32, 2., 3., 4.], [2, 2])?;
    /// assert_eq!(t.max_all()?.item::<f32>()?, 4.);
    /// assert!(Tensor::zeros([0], DType::F32)?.max_all().is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn max_all(&self) -> Result<Tensor> {
        self.reduce(ReduceOp::Max, &all(self.rank()), false)
    }
    /// Minimum of all elements.
    ///
    /// # Errors
    ///
    /// `EmptyTensor` for an empty tensor.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::from_vec(vec![3i64, -1, 2], [3])?;
    /// assert_eq!(t.min_all()?.item::<i64>()?, -1);
    /// assert!(Tensor::zeros([0], DType::F32)?.min_all().is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn min_all(&self) -> Result<Tensor> {
        self.reduce(ReduceOp::Min, &all(self.rank()), false)
    }
    /// Index (`i64`) of the maximum over `dim`; the first one on ties.
    ///
    /// # Errors
    ///
    /// As [`max`](Self::max).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1f32, 5., 5., 7., 0., 2.], [2, 3])?;
    /// assert_eq!(t.argmax(1, false)?.to_vec::<i64>()?, [1, 0]); // the first 5 on the tie
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn argmax(&self, dim: isize, keepdim: bool) -> Result<Tensor> {
        self.refuse_bool("argmax")?;
        self.reduce(ReduceOp::ArgMax, &[dim], keepdim)
    }
    /// Index (`i64`) of the minimum over `dim`.
    ///
    /// # Errors
    ///
    /// As [`max`](Self::max).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1f32, 5., 5., 7., 0., 2.], [2, 3])?;
    /// assert_eq!(t.argmin(1, false)?.to_vec::<i64>()?, [0, 1]);
    /// assert_eq!(t.argmin(0, true)?.to_vec2::<i64>()?, [[0, 1, 1]]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn argmin(&self, dim: isize, keepdim: bool) -> Result<Tensor> {
        self.refuse_bool("argmin")?;
        self.reduce(ReduceOp::ArgMin, &[dim], keepdim)
    }

    /// `UnsupportedDType` for a bool tensor: the ops PyTorch does not define on bool.
    #[track_caller]
    pub(crate) fn refuse_bool(&self, op: &'static str) -> Result<()> {
        if self.dtype() == DType::Bool {
            return Err(Error::UnsupportedDType {
                at: crate::Caller::here(),
                op,
                dtype: DType::Bool,
            });
        }
        Ok(())
    }

    /// Variance over `dims`: `Σ (x - mean)² / max(N - correction, 0)`, where `N` is the number
    /// of elements each output value reduces (as PyTorch's `var(dims, correction=…)`).
    /// `correction` 1 is the unbiased estimate, 0 the population variance. `N ≤ correction`
    /// divides by zero: `inf`, or NaN where the squared deviations sum to 0 (an empty or
    /// single-element reduction), as PyTorch. Like [`sum`](Self::sum), an empty `dims`
    /// reduces nothing. `f16` and `bf16` compute in `f32`. Differentiable.
    ///
    /// # Errors
    ///
    /// `InvalidDim`; `UnsupportedDType` for integer and bool tensors (as [`mean`](Self::mean)).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![1f32, 2.0, 3.0, 4.0, 6.0, 8.0], [2, 3])?;
    /// assert_eq!(x.var(&[1], 1, false)?.to_vec::<f32>()?, [1.0, 4.0]);
    /// assert_eq!(x.var(&[1], 0, true)?.dims(), &[2, 1]);
    /// assert_eq!(x.std(&[0, 1], 0, false)?.item::<f32>()?, (34.0f32 / 6.0).sqrt());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn var(&self, dims: &[isize], correction: usize, keepdim: bool) -> Result<Tensor> {
        self.var_named("var", dims, correction, keepdim)
    }

    /// Standard deviation over `dims`: the square root of [`var`](Self::var), with its
    /// arguments and edge cases.
    ///
    /// # Errors
    ///
    /// As [`var`](Self::var).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![2f64, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0], [8])?;
    /// assert_eq!(x.std(&[0], 0, false)?.item::<f64>()?, 2.0);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn std(&self, dims: &[isize], correction: usize, keepdim: bool) -> Result<Tensor> {
        let v = self.var_named("std", dims, correction, keepdim)?;
        let y = {
            let _g = crate::no_grad();
            v.sqrt()?
        };
        // sqrt's gradient, taken as 0 where the deviation is 0 (all elements equal), as
        // PyTorch's `std_backward`: `1 / (2·0)` times var's zero gradient would be NaN.
        Ok(y.record_saving("std", &[&v], &[], true, |g, _, y| {
            let gv = g.div(y)?.mul_scalar(0.5)?;
            let zero = gv.new_filled(Shape::default(), gv.dtype(), 0.0)?;
            Ok(vec![Some(y.eq_scalar(0.0)?.where_(&zero, &gv)?)])
        }))
    }

    /// Running sums along `dim`: `out[.., i, ..] = Σ_{j ≤ i} self[.., j, ..]`, of `self`'s
    /// shape (contiguous). Floats keep their dtype (`f16`/`bf16` accumulate in `f32`);
    /// integers and bools sum to `i64`, as PyTorch. A 0-dim tensor takes `dim` 0 or -1 and is
    /// its own sum. Differentiable for floats: the gradient is the running sum of the output
    /// gradient from the other end.
    ///
    /// # Errors
    ///
    /// `InvalidDim`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{DType, Tensor};
    /// let x = Tensor::from_vec(vec![1f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3])?;
    /// assert_eq!(x.cumsum(1)?.to_vec::<f32>()?, [1.0, 3.0, 6.0, 4.0, 9.0, 15.0]);
    /// assert_eq!(x.cumsum(0)?.to_vec::<f32>()?, [1.0, 2.0, 3.0, 5.0, 7.0, 9.0]);
    /// let ones = Tensor::ones([4], DType::Bool)?;
    /// assert_eq!(ones.cumsum(-1)?.to_vec::<i64>()?, [1, 2, 3, 4]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn cumsum(&self, dim: isize) -> Result<Tensor> {
        let r = self.rank();
        if r == 0 {
            norm_dim("cumsum", dim, 1)?;
            return self.reshape([1])?.cumsum(0)?.reshape(Shape::default());
        }
        let d = norm_dim("cumsum", dim, r)?;
        let dtype = self.dtype();
        let out_dtype = if dtype.is_float() {
            dtype
        } else {
            crate::DType::I64
        };
        let out = self.empty_like_shape(self.shape().clone(), out_dtype)?;
        let perm: Dims<usize> = (0..r).filter(|&k| k != d).chain([d]).collect();
        let k = kernel!(
            "cumsum",
            self.device(),
            kr::cumsum(
                self.device(),
                dtype,
                self.layout().permute(&perm),
                out.layout().permute(&perm),
            )
        );
        Tensor::launch(k, &[self], &[&out])?;
        if !dtype.is_float() || !crate::autograd::records(&[self]) {
            return Ok(out);
        }
        let d = d as isize;
        Ok(out.record("cumsum", &[self], move |g, _, _| {
            // Σ_{j ≥ i} g_j = Σ_j g_j - Σ_{j < i} g_j = total - cumsum(g)_i + g_i.
            let total = g.sum(&[d], true)?;
            Ok(vec![Some(total.sub(&g.cumsum(d)?)?.add(g)?)])
        }))
    }

    /// [`var`](Self::var), its errors naming `op`: two passes (the mean, then the squared
    /// deviations from it), which keeps the rounding of a large mean out of the result.
    #[track_caller]
    fn var_named(
        &self,
        op: &'static str,
        dims: &[isize],
        correction: usize,
        keepdim: bool,
    ) -> Result<Tensor> {
        let dtype = self.dtype();
        if !dtype.is_float() {
            return Err(Error::UnsupportedDType {
                at: crate::Caller::here(),
                op,
                dtype,
            });
        }
        let r = self.rank();
        let mut red: SmallVec<[bool; 8]> = SmallVec::from_elem(false, r);
        for &d in dims {
            red[norm_dim(op, d, r)?] = true;
        }
        if matches!(dtype, crate::DType::F16 | crate::DType::BF16) {
            return self
                .to_dtype(crate::DType::F32)?
                .var_named(op, dims, correction, keepdim)?
                .to_dtype(dtype);
        }
        let n = (0..r)
            .filter(|&d| red[d])
            .fold(1usize, |n, d| n.saturating_mul(self.dims()[d]));
        let dev = self.sub(&self.mean(dims, true)?)?;
        dev.square()?
            .sum(dims, keepdim)?
            .div_scalar(n.saturating_sub(correction) as f64)
    }

    /// Sums a broadcast gradient back to `shape` (the inverse of broadcasting).
    ///
    /// # Errors
    ///
    /// `ShapeMismatch` if `shape` does not broadcast to `self`'s shape.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Shape, Tensor, DType};
    /// let g = Tensor::ones([2, 3], DType::F32)?; // a gradient for a [1, 3] operand, broadcast
    /// let s = g.sum_to(&Shape::from([1, 3]))?;
    /// assert_eq!((s.dims(), s.to_vec::<f32>()?), (&[1, 3][..], vec![2., 2., 2.]));
    /// assert_eq!(g.sum_to(&Shape::from([3]))?.to_vec::<f32>()?, [2., 2., 2.]);
    /// assert!(g.sum_to(&Shape::from([4])).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn sum_to(&self, shape: &Shape) -> Result<Tensor> {
        if self.shape() == shape {
            return Ok(self.clone());
        }
        let (r, k) = (self.rank(), shape.rank());
        if k > r {
            return Err(Error::ShapeMismatch {
                at: crate::Caller::here(),
                op: "sum_to",
                lhs: self.dims().to_vec(),
                rhs: shape.dims().to_vec(),
            });
        }
        let mut dims = Vec::new();
        for d in 0..r {
            let target = if d + k >= r {
                shape.dims()[d + k - r]
            } else {
                1
            };
            if d + k < r || (target == 1 && self.dims()[d] != 1) {
                dims.push(d as isize);
            } else if target != self.dims()[d] {
                return Err(Error::ShapeMismatch {
                    at: crate::Caller::here(),
                    op: "sum_to",
                    lhs: self.dims().to_vec(),
                    rhs: shape.dims().to_vec(),
                });
            }
        }
        let s = if dims.is_empty() {
            self.clone()
        } else {
            self.sum(&dims, true)?
        };
        s.reshape(shape.clone())
    }
}

/// Reductions composed of the others: `logsumexp`, vector norms, and the logical `any`/`all`.
impl Tensor {
    /// `log Σ exp(x)` over `dims`, computed as `m + log Σ exp(x − m)` with `m` the maximum, so
    /// large values do not overflow; an infinite maximum is handled (all `-inf` gives `-inf`)
    /// and an empty reduction gives `-inf`, as PyTorch. Integers compute in `f32`.
    /// Differentiable (the gradient is the softmax over `dims`).
    ///
    /// # Errors
    ///
    /// `InvalidDim`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![1000f32, 1000.0], [2])?;
    /// let y = x.logsumexp(&[0], false)?.item::<f32>()?;
    /// assert!((y - (1000.0 + 2f32.ln())).abs() < 1e-3);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn logsumexp(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        let r = self.rank();
        let mut empty = false;
        for &d in dims {
            empty |= self.dims()[norm_dim("logsumexp", d, r)?] == 0;
        }
        if !self.dtype().is_float() {
            return self.to_dtype(crate::DType::F32)?.logsumexp(dims, keepdim);
        }
        if empty {
            // Σ over nothing is 0, and its log -inf.
            return self.sum(dims, keepdim)?.add_scalar(f64::NEG_INFINITY);
        }
        let m = {
            let _g = crate::no_grad();
            let m = self.reduce(ReduceOp::Max, dims, true)?;
            // An infinite maximum would make `x − m` NaN (∞ − ∞): shift by 0 there instead.
            let zero = m.new_filled(Shape::default(), m.dtype(), 0.0)?;
            m.abs()?.eq_scalar(f64::INFINITY)?.where_(&zero, &m)?
        };
        let s = self.sub(&m)?.exp()?.sum(dims, keepdim)?;
        s.log()?.add(&m.reshape(s.shape().clone())?)
    }

    /// The vector `p`-norm over `dims`: `(Σ |x|^p)^(1/p)`; `p = ∞` is the largest `|x|`,
    /// `−∞` the smallest, and `0` counts the non-zero elements, as PyTorch's
    /// `linalg.vector_norm`. Float tensors only. Differentiable; the 2-norm's gradient at a zero
    /// vector is 0 (not NaN), as PyTorch's.
    ///
    /// # Errors
    ///
    /// `InvalidDim`; `UnsupportedDType` for integer tensors; `InvalidArgument` for a NaN `p`;
    /// `EmptyTensor` for `p = ±∞` over an empty dim.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let v = Tensor::from_vec(vec![3f32, -4.0, 0.0, 0.0], [2, 2])?;
    /// assert_eq!(v.norm(2.0, &[1], false)?.to_vec::<f32>()?, [5.0, 0.0]);
    /// assert_eq!(v.norm(1.0, &[0, 1], false)?.item::<f32>()?, 7.0);
    /// assert_eq!(v.norm(f64::INFINITY, &[0], false)?.to_vec::<f32>()?, [3.0, 4.0]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn norm(&self, p: f64, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        let r = self.rank();
        let mut keep_shape = self.shape().clone();
        for &d in dims {
            keep_shape.0[norm_dim("norm", d, r)?] = 1;
        }
        if !self.dtype().is_float() {
            return Err(Error::UnsupportedDType {
                at: crate::Caller::here(),
                op: "norm",
                dtype: self.dtype(),
            });
        }
        if p.is_nan() {
            return Err(Error::invalid("norm", "p is NaN"));
        }
        if matches!(self.dtype(), DType::F16 | DType::BF16) {
            // Computed in f32, as PyTorch accumulates half norms: the squares (or p-th powers)
            // of values past 256 overflow f16.
            return self
                .to_dtype(DType::F32)?
                .norm(p, dims, keepdim)?
                .to_dtype(self.dtype());
        }
        if p == 2.0 {
            let y = {
                let _g = crate::no_grad();
                self.square()?.sum(dims, keepdim)?.sqrt()?
            };
            return Ok(
                y.record_saving("norm", &[self], &[self], true, move |g, ins, y| {
                    // d‖x‖/dx = x / ‖x‖, taken as 0 where ‖x‖ = 0.
                    let y = y.reshape(keep_shape.clone())?;
                    let gx = ins[0].div(&y)?.mul(&g.reshape(keep_shape.clone())?)?;
                    let zero = gx.new_filled(Shape::default(), gx.dtype(), 0.0)?;
                    Ok(vec![Some(y.eq_scalar(0.0)?.where_(&zero, &gx)?)])
                }),
            );
        }
        if p == 0.0 {
            let _g = crate::no_grad();
            return self
                .ne_scalar(0.0)?
                .to_dtype(self.dtype())?
                .sum(dims, keepdim);
        }
        let a = self.abs()?;
        if p == f64::INFINITY {
            return a.reduce(ReduceOp::Max, dims, keepdim);
        }
        if p == f64::NEG_INFINITY {
            return a.reduce(ReduceOp::Min, dims, keepdim);
        }
        if p == 1.0 {
            return a.sum(dims, keepdim);
        }
        let y = {
            let _g = crate::no_grad();
            a.pow_scalar(p)?.sum(dims, keepdim)?.pow_scalar(1.0 / p)?
        };
        Ok(
            y.record_saving("norm", &[self], &[self], true, move |g, ins, y| {
                // d‖x‖_p/dx = sign(x)·|x|^(p-1) / ‖x‖^(p-1), with |x|^(p-1) taken as 0 at x = 0 and
                // the whole as 0 where ‖x‖ = 0, as PyTorch's `norm_backward` (the composed
                // gradient is inf·0 = NaN there).
                let x = &ins[0];
                let y = y.reshape(keep_shape.clone())?;
                let zero = x.new_filled(Shape::default(), x.dtype(), 0.0)?;
                let scaled = x.sign()?.mul(
                    &x.eq_scalar(0.0)?
                        .where_(&zero, &x.abs()?.pow_scalar(p - 1.0)?)?,
                )?;
                let scale = g
                    .reshape(keep_shape.clone())?
                    .div(&y.pow_scalar(p - 1.0)?)?;
                let scale = y.eq_scalar(0.0)?.where_(&zero, &scale)?;
                Ok(vec![Some(scaled.mul(&scale)?)])
            }),
        )
    }

    /// Whether any element over `dims` is non-zero (NaN counts as non-zero), as a `Bool`
    /// tensor. Any dtype.
    ///
    /// # Errors
    ///
    /// `InvalidDim`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let m = Tensor::from_vec(vec![0i64, 0, 0, 3], [2, 2])?;
    /// assert_eq!(m.any(&[1], false)?.to_f64_vec()?, [0.0, 1.0]);
    /// assert_eq!(m.all(&[0], false)?.to_f64_vec()?, [0.0, 0.0]);
    /// assert_eq!(m.any_all()?.to_scalar()?, 1.0);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn any(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        for &d in dims {
            norm_dim("any", d, self.rank())?;
        }
        let _g = crate::no_grad();
        self.ne_scalar(0.0)?.sum(dims, keepdim)?.gt_scalar(0.0)
    }

    /// Whether every element over `dims` is non-zero (true over an empty dim), as a `Bool`
    /// tensor. Any dtype.
    ///
    /// # Errors
    ///
    /// `InvalidDim`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1f32, 0., 2., 3.], [2, 2])?;
    /// assert_eq!(t.all(&[1], false)?.to_vec::<bool>()?, [false, true]);
    /// assert_eq!(t.all(&[0], false)?.to_vec::<bool>()?, [true, false]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn all(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        for &d in dims {
            norm_dim("all", d, self.rank())?;
        }
        let _g = crate::no_grad();
        self.eq_scalar(0.0)?.sum(dims, keepdim)?.eq_scalar(0.0)
    }

    /// [`any`](Self::any) over every dim (0-dim).
    ///
    /// # Errors
    ///
    /// Only engine errors.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// assert!(Tensor::from_vec(vec![0i64, 0, 3], [3])?.any_all()?.item::<bool>()?);
    /// assert!(!Tensor::zeros([2, 2], DType::F32)?.any_all()?.item::<bool>()?);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn any_all(&self) -> Result<Tensor> {
        self.any(&all(self.rank()), false)
    }

    /// [`all`](Self::all) over every dim (0-dim).
    ///
    /// # Errors
    ///
    /// Only engine errors.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// assert!(Tensor::from_vec(vec![1f32, -2.], [2])?.all_all()?.item::<bool>()?);
    /// assert!(!Tensor::from_vec(vec![1f32, 0.], [2])?.all_all()?.item::<bool>()?);
    /// assert!(Tensor::zeros([0], DType::F32)?.all_all()?.item::<bool>()?); // vacuously true
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn all_all(&self) -> Result<Tensor> {
        self.all(&all(self.rank()), false)
    }
}

fn all(rank: usize) -> Dims<isize> {
    (0..rank as isize).collect()
}
