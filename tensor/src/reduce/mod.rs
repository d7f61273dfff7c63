//! Reductions over dims, with `keepdim`: `sum`, `mean`, `prod`, `max`, `min`, `argmax`,
//! `argmin`, `var`/`std`, `logsumexp`, `norm`, `any`/`all` composed of them, and the running sum
//! `cumsum`. Empty reductions return the identity (sum 0, prod 1, logsumexp -inf, all true);
//! `max`/`min`/`arg*` over an empty dim are `EmptyTensor` errors.

use crate::{DType, Error, Result, Shape, Tensor};
use eddy_ops::norm_dim;
use eddy_ops::reduce::{self as kr, ReduceOp};
use smallvec::SmallVec;

mod composed;

/// A list of dims: inline up to 4, so that a small reduction allocates only its output.
type Dims<T> = SmallVec<[T; 4]>;

impl Tensor {
    #[track_caller]
    fn reduce(&self, op: ReduceOp, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        let name = op.name();
        let r = self.rank();
        let rd = kr::infer_reduce(op, self.dims(), self.dtype(), dims, keepdim)?;
        let (red, n_red, out_numel) = (&rd.reduced, rd.n_red, rd.out_numel);
        let src = self.dims();
        if self.is_global() && op == ReduceOp::Mean {
            // The logical sum over the logical count: uneven splits weigh right.
            return self
                .reduce(ReduceOp::Sum, dims, keepdim)?
                .div_scalar(n_red.max(1) as f64);
        }
        let out = if self.is_global() {
            self.global_reduce(op, red, keepdim, rd.shape.clone())?
        } else {
            self.empty_like_shape(rd.shape.clone(), rd.dtype)?
        };
        if self.is_global() {
            // Computed above, component by component.
        } else if op == ReduceOp::Sum
            && self.dtype().is_float()
            && self.is_contiguous()
            && rd.leading
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
        self.extreme_at(ReduceOp::Max, dim, keepdim)
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
        self.extreme_at(ReduceOp::Min, dim, keepdim)
    }

    /// [`max`](Self::max) or [`min`](Self::min) over `dim`, as PyTorch's `max(dim)`: the
    /// gradient goes to the element [`argmax`](Self::argmax) (or `argmin`) picks, the first
    /// of ties, where [`amax`](Self::amax) splits it among the ties.
    #[track_caller]
    fn extreme_at(&self, op: ReduceOp, dim: isize, keepdim: bool) -> Result<Tensor> {
        if !self.dtype().is_float() || !crate::autograd::records(&[self]) {
            return self.reduce(op, &[dim], keepdim);
        }
        let (values, at) = {
            let _g = crate::no_grad();
            let at = match op {
                ReduceOp::Max => self.argmax(dim, true)?,
                _ => self.argmin(dim, true)?,
            };
            (self.reduce(op, &[dim], keepdim)?, at)
        };
        let d = norm_dim(op.name(), dim, self.rank().max(1))? as isize;
        let shape = self.shape().clone();
        let rank = self.rank();
        Ok(values.record(op.name(), &[self], move |g, _, _| {
            let g = if keepdim || rank == 0 {
                g.clone()
            } else {
                g.unsqueeze(d)?
            };
            if rank == 0 {
                return Ok(vec![Some(g)]);
            }
            let zeros = g.new_filled(shape.clone(), g.dtype(), 0.0)?;
            Ok(vec![Some(zeros.scatter_add(d, &at, &g)?)])
        }))
    }

    /// Maximum over `dims` (every dim if empty), as PyTorch's `amax`: the gradient is split
    /// evenly among ties, where [`max`](Self::max) sends it to one.
    ///
    /// # Errors
    ///
    /// As [`max`](Self::max).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1f32, 3., 3.], [1, 3])?.requires_grad_(true)?;
    /// t.amax(&[1], false)?.sum_all()?.backward()?;
    /// assert_eq!(t.grad().unwrap().to_vec::<f32>()?, [0., 0.5, 0.5]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn amax(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        let dims = if dims.is_empty() {
            all(self.rank())
        } else {
            SmallVec::from_slice(dims)
        };
        self.reduce(ReduceOp::Max, &dims, keepdim)
    }

    /// Minimum over `dims`, as PyTorch's `amin`: see [`amax`](Self::amax).
    ///
    /// # Errors
    ///
    /// As [`max`](Self::max).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1f32, 3., 0., 5.], [2, 2])?;
    /// assert_eq!(t.amin(&[0, 1], false)?.item::<f32>()?, 0.);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn amin(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        let dims = if dims.is_empty() {
            all(self.rank())
        } else {
            SmallVec::from_slice(dims)
        };
        self.reduce(ReduceOp::Min, &dims, keepdim)
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
        let out = if self.is_global() {
            self.global_cumulative("cumsum", d, Tensor::cumsum)?
        } else {
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
            out
        };
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

    /// Running products along `dim`, as PyTorch's `cumprod`: floats keep their dtype,
    /// integers and bools become `i64` (wrapping). Differentiable, exactly also where some
    /// element is 0 (the gradient is not the products divided by the element).
    ///
    /// # Errors
    ///
    /// `InvalidDim`; `Unsupported` on a device without the kernel.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{DType, Tensor};
    /// let x = Tensor::from_vec(vec![1f32, 2., 3., 4., 5., 6.], [2, 3])?;
    /// assert_eq!(x.cumprod(1)?.to_vec::<f32>()?, [1., 2., 6., 4., 20., 120.]);
    /// assert_eq!(x.cumprod(0)?.to_vec::<f32>()?, [1., 2., 3., 4., 10., 18.]);
    /// let i = Tensor::from_vec(vec![2u8, 3, 4], [3])?;
    /// assert_eq!(i.cumprod(0)?.to_vec::<i64>()?, [2, 6, 24]);
    /// let w = Tensor::from_vec(vec![2f32, 0., 3.], [3])?.requires_grad_(true)?;
    /// w.cumprod(0)?.sum_all()?.backward()?;
    /// assert_eq!(w.grad().unwrap().to_vec::<f32>()?, [1., 8., 0.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn cumprod(&self, dim: isize) -> Result<Tensor> {
        let r = self.rank();
        if r == 0 {
            norm_dim("cumprod", dim, 1)?;
            return self.reshape([1])?.cumprod(0)?.reshape(Shape::default());
        }
        let d = norm_dim("cumprod", dim, r)?;
        let (dtype, dev) = (self.dtype(), self.device());
        let out_dtype = if dtype.is_float() { dtype } else { DType::I64 };
        let out = if self.is_global() {
            self.global_cumulative("cumprod", d, Tensor::cumprod)?
        } else {
            let out = self.empty_like_shape(self.shape().clone(), out_dtype)?;
            let perm: Dims<usize> = (0..r).filter(|&k| k != d).chain([d]).collect();
            let (la, lo) = (self.layout().permute(&perm), out.layout().permute(&perm));
            let k = kernel!("cumprod", dev, kr::cumprod(dev, dtype, la, lo));
            Tensor::launch(k, &[self], &[&out])?;
            out
        };
        if !dtype.is_float() || !crate::autograd::records(&[self]) {
            return Ok(out);
        }
        let d = d as isize;
        let x = self.detach();
        Ok(
            out.record_saving("cumprod", &[self], &[&x.clone()], false, move |g, _, _| {
                Ok(vec![Some(cumprod_grad(&x, g, d)?)])
            }),
        )
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
        let dims = eddy_ops::reduce::sum_to_dims(self.dims(), shape.dims())?;
        let s = if dims.is_empty() {
            self.clone()
        } else {
            self.sum(&dims, true)?
        };
        s.reshape(shape.clone())
    }
}

/// Every dim of a tensor of rank `rank`.
fn all(rank: usize) -> Dims<isize> {
    (0..rank as isize).collect()
}

/// The gradient of `cumprod` along `d` at `x` for the output's gradient `g`, exact where some
/// element is 0; on global operands each rank takes its whole rows.
#[track_caller]
fn cumprod_grad(x: &Tensor, g: &Tensor, d: isize) -> Result<Tensor> {
    if x.is_global() || g.is_global() {
        let rule = eddy_ops::global::Rule::Along { dim: d as usize };
        return crate::global::run(
            "cumprod_backward",
            rule,
            &[x, g],
            x.shape().clone(),
            |v, _| cumprod_grad(v[0], v[1], d),
        );
    }
    // The dim last, in dense rows, for the kernel.
    let xt = x.transpose(d, -1)?.contiguous()?;
    let gt = g.cast(x.dtype())?.transpose(d, -1)?.contiguous()?;
    let n = xt.dims().last().copied().unwrap_or(1);
    let rows = xt.numel().checked_div(n).unwrap_or(0);
    let gx = xt.empty_like_shape(xt.shape().clone(), xt.dtype())?;
    let offsets = (xt.layout().offset, gt.layout().offset);
    let dev = xt.device();
    let k = kernel!(
        "cumprod",
        dev,
        kr::cumprod_backward(dev, xt.dtype(), rows, n, offsets)
    );
    Tensor::launch(k, &[&xt, &gt], &[&gx])?;
    gx.transpose(d, -1)
}
