//! Neural-network ops: softmax family, losses, layer norm, indexing (`index_select`,
//! `embedding`, `gather`, and their scattering inverses `index_add`, `scatter_add`) and joining
//! (`cat`, `stack`).

use crate::{DType, Error, Result, Shape, Tensor};
use eddy_ops::index::{self as ki, IndexDims};
use eddy_ops::nn as kn;
use eddy_ops::norm_dim;
use smallvec::SmallVec;

impl Tensor {
    /// Moves `dim` last and makes the tensor contiguous (for row-wise kernels).
    #[track_caller]
    fn dim_last(&self, d: usize) -> Result<Tensor> {
        let last = self.rank() - 1;
        if d == last {
            self.contiguous()
        } else {
            self.transpose(d as isize, last as isize)?.contiguous()
        }
    }

    #[track_caller]
    fn softmax_impl(&self, dim: isize, log: bool) -> Result<Tensor> {
        let op = if log { "log_softmax" } else { "softmax" };
        let d = kn::infer_softmax(op, self.dims(), self.dtype(), dim)?;
        if self.is_global() && self.rank() > 0 {
            let out = self.global_softmax(d, log)?;
            return Ok(out.record_saving(op, &[self], &[], true, move |g, _, y| {
                let gx = if log {
                    g.sub(&y.exp()?.mul(&g.sum(&[d as isize], true)?)?)?
                } else {
                    y.mul(&g.sub(&g.mul(y)?.sum(&[d as isize], true)?)?)?
                };
                Ok(vec![Some(gx)])
            }));
        }
        if self.rank() == 0 {
            // A 0-d tensor takes dim 0 or -1, as in PyTorch.
            return self.unsqueeze(0)?.softmax_impl(0, log)?.squeeze(0);
        }
        let last = self.rank() - 1;
        let x = {
            let _g = crate::no_grad();
            self.dim_last(d)?
        };
        let cols = x.dims()[last];
        let rows = x.numel() / cols.max(1);
        let out = x.empty_like_shape(x.shape().clone(), x.dtype())?;
        let k = kernel!(
            "softmax",
            x.device(),
            kn::softmax(x.device(), x.dtype(), x.layout().offset, rows, cols, log)
        );
        Tensor::launch(k, &[&x], &[&out])?;
        let out = if d == last {
            out
        } else {
            out.transpose(d as isize, last as isize)?
        };
        Ok(out.record_saving(op, &[self], &[], true, move |g, _, y| {
            if d == last {
                let (g, dev) = (g.contiguous()?, g.device());
                let (go, yo) = (g.layout().offset, y.layout().offset);
                if let Some(k) = kn::softmax_backward(dev, g.dtype(), go, yo, rows, cols, log) {
                    let gx = g.empty_like_shape(g.shape().clone(), g.dtype())?;
                    Tensor::launch(k, &[&g, y], &[&gx])?;
                    return Ok(vec![Some(gx)]);
                }
            }
            let gx = if log {
                g.sub(&y.exp()?.mul(&g.sum(&[d as isize], true)?)?)?
            } else {
                y.mul(&g.sub(&g.mul(y)?.sum(&[d as isize], true)?)?)?
            };
            Ok(vec![Some(gx)])
        }))
    }

    /// Softmax over `dim` (numerically stable).
    ///
    /// # Errors
    ///
    /// `InvalidDim`; `UnsupportedDType` for non-float tensors.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let p = Tensor::from_vec(vec![1f32, 1.], [2])?.softmax(-1)?;
    /// assert_eq!(p.to_vec::<f32>()?, vec![0.5, 0.5]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn softmax(&self, dim: isize) -> Result<Tensor> {
        self.softmax_impl(dim, false)
    }

    /// Log-softmax over `dim`.
    ///
    /// # Errors
    ///
    /// As [`softmax`](Self::softmax).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let y = Tensor::from_vec(vec![0f32, 0.], [1, 2])?.log_softmax(-1)?.to_vec::<f32>()?;
    /// assert!(y.iter().all(|v| (v + 2f32.ln()).abs() < 1e-6)); // ln(1/2) each
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn log_softmax(&self, dim: isize) -> Result<Tensor> {
        self.softmax_impl(dim, true)
    }

    /// Dropout, as PyTorch's `F.dropout(x, p, training)`: when `train`, each element is zeroed
    /// with probability `p` and the rest are scaled by `1 / (1 - p)`, so every element keeps
    /// its expected value; otherwise the result is `self` (the same storage, no op). The mask
    /// comes from the global generator ([`manual_seed`](crate::manual_seed)): the same seed
    /// drops the same elements, on any thread count. The gradient flows through the kept
    /// elements with the same scale. `p = 1` zeroes everything (`x * 0`, so an infinite element
    /// gives NaN, as in PyTorch).
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if `p` is not in `[0, 1]` (NaN included), `UnsupportedDType` for an
    /// integer or bool tensor (checked whether or not `train` is set).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{manual_seed, Tensor, DType};
    /// let x = Tensor::ones([1000], DType::F32)?;
    /// manual_seed(3);
    /// let y = x.dropout(0.25, true)?.to_vec::<f32>()?;
    /// assert!(y.iter().all(|&v| v == 0.0 || (v - 4.0 / 3.0).abs() < 1e-6));
    /// let kept = y.iter().filter(|&&v| v != 0.0).count();
    /// assert!((650..850).contains(&kept));                    // about 750
    /// manual_seed(3);
    /// assert_eq!(x.dropout(0.25, true)?.to_vec::<f32>()?, y); // same seed, same mask
    /// assert!(x.dropout(0.25, false)?.shares_storage(&x));    // evaluation: the input itself
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn dropout(&self, p: f64, train: bool) -> Result<Tensor> {
        check_probability("dropout", p)?;
        let dt = self.dtype();
        if !dt.is_float() {
            return Err(Error::UnsupportedDType {
                at: crate::Caller::here(),
                op: "dropout",
                dtype: dt,
            });
        }
        if !train || p == 0.0 {
            return Ok(self.clone());
        }
        let mask = self.empty_like_shape(self.shape().clone(), dt)?;
        let (seed, offset) = crate::create::take_counters(mask.numel() as u64);
        let scale = 1.0 / (1.0 - p);
        // A scale past f16's largest value (p above 1 - 1/65504) would be infinite in the mask,
        // and a kept zero would come out NaN: the mask holds ones then, and the scale is
        // applied after (a kept zero stays zero, a large value overflows as in PyTorch).
        let late = dt == DType::F16 && scale > 65504.0;
        let mask_scale = if late { 1.0 } else { scale };
        let keep = move |i: usize| {
            if eddy_ops::random::uniform01(seed, offset.wrapping_add(i as u64)) >= p {
                mask_scale
            } else {
                0.0
            }
        };
        let k = kernel!(
            "dropout",
            mask.device(),
            eddy_ops::copy::generate(mask.device(), "dropout", dt, keep)
        );
        Tensor::launch(k, &[], &[&mask])?;
        if late {
            self.mul(&mask)?.mul_scalar(scale)
        } else {
            self.mul(&mask)
        }
    }

    /// Layer normalisation over the last `normalized` dims, with optional affine `weight` and
    /// `bias` of those dims' shape.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if `normalized` exceeds the rank; `ShapeMismatch` for the affine terms.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![1f32, 2., 3., 4.], [1, 4])?;
    /// let y = x.layer_norm(1, None, None, 0.0)?.to_vec::<f32>()?; // mean 2.5, variance 1.25
    /// assert!((y[0] + 1.5 / 1.25f32.sqrt()).abs() < 1e-5);
    /// let b = Tensor::from_vec(vec![10f32; 4], [4])?;
    /// let z = x.layer_norm(1, None, Some(&b), 0.0)?;
    /// assert!((z.mean_all()?.item::<f32>()? - 10.0).abs() < 1e-5);
    /// assert!(x.layer_norm(3, None, None, 1e-5).is_err()); // only 2 dims
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn layer_norm(
        &self,
        normalized: usize,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Result<Tensor> {
        let affine: SmallVec<[&[usize]; 2]> = [weight, bias]
            .into_iter()
            .flatten()
            .map(|t| t.dims())
            .collect();
        // The affine terms are checked before anything is enqueued.
        kn::check_layer_norm(self.dims(), normalized, &affine)?;
        let global = self.is_global() || weight.is_some_and(Tensor::is_global);
        if let Some(y) = (!global)
            .then(|| self.layer_norm_fused(normalized, weight, bias, eps))
            .transpose()?
            .flatten()
        {
            return Ok(y);
        }
        let dims: Vec<isize> = (self.rank() - normalized..self.rank())
            .map(|d| d as isize)
            .collect();
        let mean = self.mean(&dims, true)?;
        let xc = self.sub(&mean)?;
        let var = xc.square()?.mean(&dims, true)?;
        let mut y = xc.mul(&var.add_scalar(eps)?.rsqrt()?)?;
        if let Some(w) = weight {
            y = y.mul(w)?;
        }
        if let Some(b) = bias {
            y = y.add(b)?;
        }
        Ok(y)
    }

    /// [`layer_norm`](Self::layer_norm) as one instruction, its gradient as another; `None`
    /// where the device has no kernel (or the dtype is not a float), for the composed form.
    #[track_caller]
    fn layer_norm_fused(
        &self,
        normalized: usize,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Result<Option<Tensor>> {
        let dt = self.dtype();
        let global = bias.is_some_and(Tensor::is_global);
        if !dt.is_float() || global {
            return Ok(None);
        }
        for t in [weight, bias].into_iter().flatten() {
            self.same_device("layer_norm", t)?;
            if t.dtype() != dt {
                return Ok(None); // mixed dtypes promote through the composed form
            }
        }
        let cols: usize = self.dims()[self.rank() - normalized..].iter().product();
        let rows = self.numel() / cols.max(1);
        let (x, w, b) = {
            let _g = crate::no_grad();
            let dense = |t: Option<&Tensor>| t.map(Tensor::contiguous).transpose();
            (self.contiguous()?, dense(weight)?, dense(bias)?)
        };
        let l = eddy_ops::cpu::norm::NormLayout {
            rows,
            cols,
            x: x.layout().offset,
            weight: w.as_ref().map(|t| t.layout().offset),
            bias: b.as_ref().map(|t| t.layout().offset),
            eps,
        };
        let dev = x.device();
        let Some(k) = kn::layer_norm(dev, dt, l) else {
            return Ok(None);
        };
        let stat = if dt == DType::F64 { dt } else { DType::F32 };
        let y = x.empty_like_shape(self.shape().clone(), dt)?;
        let mean = x.empty_like_shape(Shape::from([rows]), stat)?;
        let rstd = x.empty_like_shape(Shape::from([rows]), stat)?;
        let mut ins = vec![&x];
        ins.extend(w.iter().chain(&b));
        Tensor::launch_with_work(k, &ins, &[&y, &mean, &rstd], Some(4 * rows * cols))?;
        let mut inputs = vec![self];
        inputs.extend(weight.into_iter().chain(bias));
        let (has_w, has_b) = (weight.is_some(), bias.is_some());
        Ok(Some(y.record_saving(
            "layer_norm",
            &inputs,
            &inputs,
            false,
            move |g, ins, _| {
                let dy = g.contiguous()?;
                let l = eddy_ops::cpu::norm::NormLayout {
                    x: dy.layout().offset,
                    ..l
                };
                let dev = dy.device();
                let k = kernel!(
                    "layer_norm_backward",
                    dev,
                    kn::layer_norm_backward(dev, dt, l, x.layout().offset)
                );
                let dx = dy.empty_like_shape(dy.shape().clone(), dt)?;
                let aff = |t: &Option<Tensor>| {
                    t.as_ref()
                        .map(|t| dy.empty_like_shape(t.shape().clone(), dt))
                        .transpose()
                };
                let (dw, db) = (aff(&w)?, aff(&b)?);
                let mut bins = vec![&dy, &x, &mean, &rstd];
                bins.extend(w.iter());
                let mut outs = vec![&dx];
                outs.extend(dw.iter().chain(&db));
                Tensor::launch_with_work(k, &bins, &outs, Some(6 * rows * cols))?;
                let mut grads = vec![Some(dx)];
                if has_w {
                    grads.push(Some(
                        dw.expect("made above").reshape(ins[1].shape().clone())?,
                    ));
                }
                if has_b {
                    let at = if has_w { 2 } else { 1 };
                    grads.push(Some(
                        db.expect("made above").reshape(ins[at].shape().clone())?,
                    ));
                }
                Ok(grads)
            },
        )))
    }

    #[track_caller]
    pub(crate) fn check_index(op: &'static str, idx: &Tensor) -> Result<()> {
        eddy_ops::index::check_index_dtype(op, idx.dtype())
    }

    /// Where `idx`'s values are known on the host (made by `from_vec` and not written since),
    /// checks them against `0..size` now, so the error comes from the call; otherwise the
    /// kernel checks them and a bad one surfaces at the next sync. A negative index is out of
    /// range, as in PyTorch's indexing ops.
    #[track_caller]
    pub(crate) fn check_index_values(op: &'static str, idx: &Tensor, size: usize) -> Result<()> {
        let n = i64::try_from(size).unwrap_or(i64::MAX);
        match idx.known_range() {
            Some((lo, _)) if lo < 0 => Err(Error::IndexOutOfRange {
                at: crate::Caller::here(),
                op,
                index: lo,
                size,
            }),
            Some((_, hi)) if hi >= n => Err(Error::IndexOutOfRange {
                at: crate::Caller::here(),
                op,
                index: hi,
                size,
            }),
            _ => Ok(()),
        }
    }

    /// The entries `index` (1-D, `i64`/`i32`) of dim `dim`. Out-of-range indices are an error
    /// from the call where their values are known on the host (an index tensor made by
    /// `from_vec` and not written since); otherwise they fail the kernel, reported at the next
    /// sync, naming the index.
    ///
    /// # Errors
    ///
    /// `InvalidDim`, `UnsupportedDType`, `ShapeMismatch` if `index` is not 1-D.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::arange(0.0, 6.0, 1.0, DType::F32)?.reshape([3, 2])?;
    /// let r = t.index_select(0, &Tensor::from_vec(vec![2i64, 0], [2])?)?;
    /// assert_eq!(r.to_vec::<f32>()?, vec![4., 5., 0., 1.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn index_select(&self, dim: isize, index: &Tensor) -> Result<Tensor> {
        Tensor::check_index("index_select", index)?;
        self.same_device("index_select", index)?;
        let d = ki::infer_index_select(self.dims(), dim, index.dims())?;
        Tensor::check_index_values("index_select", index, self.dims()[d])?;
        let idx = index.contiguous()?;
        let nidx = index.numel();
        let mut shape = self.shape().clone();
        shape.0[d] = nidx;
        let out = if self.is_global() || index.is_global() {
            self.global_index_select(d, &idx, shape)?
        } else {
            let x = {
                let _g = crate::no_grad();
                self.contiguous()?
            };
            let out = self.empty_like_shape(shape, self.dtype())?;
            let (values, indices) = (
                (x.dtype(), x.layout().offset),
                (idx.dtype(), idx.layout().offset),
            );
            let dims = IndexDims::along(self.dims(), d, nidx, values, indices);
            let k = kernel!(
                "index_select",
                x.device(),
                ki::index_select(x.device(), dims)
            );
            Tensor::launch(k, &[&x, &idx], &[&out])?;
            out
        };
        let in_shape = self.shape().clone();
        Ok(out.record_saving(
            "index_select",
            &[self],
            &[&idx.clone()],
            false,
            move |g, _, _| {
                Ok(vec![Some(
                    g.contiguous()?.add_at_index(&idx, &in_shape, d)?,
                )])
            },
        ))
    }

    /// `zeros(shape)` with slice `j` of `self` along `d` added at slice `idx[j]`: the
    /// scattering half of `index_add`, and `index_select`'s backward. `idx` is contiguous.
    #[track_caller]
    pub(crate) fn add_at_index(&self, idx: &Tensor, shape: &Shape, d: usize) -> Result<Tensor> {
        if self.is_global() || idx.is_global() {
            return self.global_add_at_index(idx, shape, d);
        }
        let src = self.contiguous()?;
        let out = self.empty_like_shape(shape.clone(), self.dtype())?;
        let (values, indices) = (
            (src.dtype(), src.layout().offset),
            (idx.dtype(), idx.layout().offset),
        );
        let dims = IndexDims::along(shape.dims(), d, idx.numel(), values, indices);
        let k = kernel!("index_add", src.device(), ki::index_add(src.device(), dims));
        Tensor::launch(k, &[&src, idx], &[&out])?;
        Ok(out)
    }

    /// `zeros(shape)` with each element of `self` added at its own position with dim `d`
    /// replaced by its entry of `idx` (`idx` contiguous, of `self`'s shape): the scattering
    /// half of `scatter_add`, and the backward of `gather` and `sort`.
    #[track_caller]
    pub(crate) fn add_at_gathered(&self, idx: &Tensor, shape: &Shape, d: usize) -> Result<Tensor> {
        if self.is_global() || idx.is_global() {
            return self.global_add_at_gathered(idx, shape, d);
        }
        let src = self.contiguous()?;
        let out = self.empty_like_shape(shape.clone(), self.dtype())?;
        let mut lo = eddy_ops::Layout::contiguous(shape.clone());
        lo.shape = idx.shape().clone();
        let stride_dim = std::mem::replace(&mut lo.strides[d], 0);
        let k = kernel!(
            "scatter_add",
            src.device(),
            ki::scatter_add(
                src.device(),
                src.dtype(),
                idx.dtype(),
                src.layout().offset,
                lo,
                stride_dim,
                shape.dims()[d],
                shape.numel(),
                idx.layout().offset,
            )
        );
        Tensor::launch(k, &[&src, idx], &[&out])?;
        Ok(out)
    }

    /// Out-of-place `index_add`: `self` with slice `j` of `src` along `dim` added to slice
    /// `index[j]` (repeated indices add up), as PyTorch's `index_add`. `index` is 1-D (`i64` or
    /// `i32`, each in `0..size`); `src` has `self`'s shape except `index.len()`
    /// at `dim`, and `self`'s dtype. Integers wrap. Differentiable in `self` and `src`.
    ///
    /// # Errors
    ///
    /// `InvalidDim`, `UnsupportedDType` for the index, `DTypeMismatch`, `ShapeMismatch`,
    /// `DeviceMismatch`; `IndexOutOfRange` where the indices are known on the host (else at
    /// the next sync).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let x = Tensor::zeros([3, 2], DType::F32)?;
    /// let src = Tensor::from_vec(vec![1f32, 2.0, 3.0, 4.0, 5.0, 6.0], [3, 2])?;
    /// let idx = Tensor::from_vec(vec![2i64, 0, 2], [3])?;
    /// let y = x.index_add(0, &idx, &src)?;
    /// assert_eq!(y.to_vec::<f32>()?, [3.0, 4.0, 0.0, 0.0, 6.0, 8.0]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn index_add(&self, dim: isize, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        const OP: &str = "index_add";
        Tensor::check_index(OP, index)?;
        self.same_device(OP, index)?;
        self.same_device(OP, src)?;
        if self.rank() == 0 {
            norm_dim(OP, dim, 1)?;
            return self
                .reshape([1])?
                .index_add(0, index, &src.reshape([index.numel()])?)?
                .reshape(Shape::default());
        }
        self.same_dtype(OP, src)?;
        let d = ki::infer_index_add(self.dims(), dim, index.dims(), src.dims())?;
        Tensor::check_index_values(OP, index, self.dims()[d])?;
        let idx = index.contiguous()?;
        let added = src.add_at_index(&idx, self.shape(), d)?.record_saving(
            OP,
            &[src],
            &[&idx.clone()],
            false,
            move |g, _, _| Ok(vec![Some(g.index_select(d as isize, &idx)?)]),
        );
        self.add(&added)
    }

    /// Out-of-place `scatter_add`: `self` with `src[i]` added at `i`'s position with dim `dim`
    /// replaced by `index[i]`, for every position `i` of `index` (repeated targets add up), as
    /// PyTorch's `scatter_add`. `index` has `self`'s rank, no dim larger than `src`'s, and
    /// none larger than `self`'s except at `dim`; only the part of `src` that `index` covers is
    /// used. Integers wrap. Differentiable in `self` and `src`.
    ///
    /// # Errors
    ///
    /// `InvalidDim`, `UnsupportedDType` for the index, `DTypeMismatch`, `ShapeMismatch`,
    /// `DeviceMismatch`; `IndexOutOfRange` where the indices are known on the host (else at
    /// the next sync).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// // A histogram: count each label.
    /// let labels = Tensor::from_vec(vec![2i64, 0, 2, 2], [4])?;
    /// let ones = Tensor::ones([4], DType::I64)?;
    /// let counts = Tensor::zeros([3], DType::I64)?.scatter_add(0, &labels, &ones)?;
    /// assert_eq!(counts.to_vec::<i64>()?, [1, 0, 3]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn scatter_add(&self, dim: isize, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        const OP: &str = "scatter_add";
        Tensor::check_index(OP, index)?;
        self.same_device(OP, index)?;
        self.same_device(OP, src)?;
        if self.rank() == 0 && index.rank() == 0 && src.rank() == 0 {
            norm_dim(OP, dim, 1)?;
            return self
                .reshape([1])?
                .scatter_add(0, &index.reshape([1])?, &src.reshape([1])?)?
                .reshape(Shape::default());
        }
        let d0 = norm_dim(OP, dim, self.rank().max(1))?;
        self.same_dtype(OP, src)?;
        let r = self.rank();
        let d = ki::infer_scatter(OP, self.dims(), d0 as isize, index.dims(), src.dims())?;
        Tensor::check_index_values(OP, index, self.dims()[d])?;
        let idx = index.contiguous()?;
        let mut part = src.clone();
        for j in 0..r {
            if part.dims()[j] != idx.dims()[j] {
                part = part.narrow(j as isize, 0, idx.dims()[j])?;
            }
        }
        let added = part.add_at_gathered(&idx, self.shape(), d)?.record_saving(
            OP,
            &[&part],
            &[&idx.clone()],
            false,
            move |g, _, _| Ok(vec![Some(g.gather(d as isize, &idx)?)]),
        );
        self.add(&added)
    }

    /// Embedding lookup: rows of `self` (`[vocab, dim]`) for every index in `ids` (any shape);
    /// the result has shape `ids.shape + [dim]`.
    ///
    /// # Errors
    ///
    /// As [`index_select`](Self::index_select); `InvalidArgument` if `self` is not 2-D.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let w = Tensor::arange(0.0, 6.0, 1.0, DType::F32)?.reshape([3, 2])?;
    /// let ids = Tensor::from_vec(vec![2i64, 0], [1, 2])?;
    /// let e = w.embedding(&ids)?;
    /// assert_eq!(e.dims(), &[1, 2, 2]);
    /// assert_eq!(e.to_vec::<f32>()?, [4., 5., 0., 1.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn embedding(&self, ids: &Tensor) -> Result<Tensor> {
        // Checked before flattening, which copies strided ids.
        let shape = ki::infer_embedding(self.dims(), ids.dims(), ids.dtype())?;
        Tensor::check_index_values("embedding", ids, self.dims()[0])?;
        let rows = self.index_select(0, &ids.flatten_all()?)?;
        rows.reshape(shape)
    }

    /// PyTorch's `gather`: `out[i][j] = self[i][index[i][j]]` for `dim = 1` (any rank). `index`
    /// has `self`'s rank and no dim larger than `self`'s, except `dim`.
    ///
    /// # Errors
    ///
    /// `InvalidDim`, `UnsupportedDType`, `ShapeMismatch`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1f32, 2., 3., 4.], [2, 2])?;
    /// let idx = Tensor::from_vec(vec![1i64, 0], [2, 1])?;
    /// assert_eq!(t.gather(1, &idx)?.to_vec2::<f32>()?, [[2.], [3.]]);
    /// assert!(t.gather(1, &Tensor::from_vec(vec![1i64, 0], [2])?).is_err()); // rank differs
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn gather(&self, dim: isize, index: &Tensor) -> Result<Tensor> {
        self.gather_impl("gather", dim, index)
    }

    /// [`gather`](Self::gather) as op `op`.
    #[track_caller]
    pub(crate) fn gather_impl(
        &self,
        op: &'static str,
        dim: isize,
        index: &Tensor,
    ) -> Result<Tensor> {
        Tensor::check_index(op, index)?;
        self.same_device(op, index)?;
        let d = ki::infer_gather(op, self.dims(), dim, index.dims())?;
        Tensor::check_index_values(op, index, self.dims()[d])?;
        let idx = index.contiguous()?;
        let out = if self.is_global() || idx.is_global() {
            self.global_gather(op, d, &idx)?
        } else {
            let (ls, stride_dim) = ki::gather_layout(self.layout(), idx.dims(), d);
            let size = self.dims()[d];
            let out = self.empty_like_shape(idx.shape().clone(), self.dtype())?;
            let k = kernel!(
                op,
                self.device(),
                ki::gather(
                    self.device(),
                    op,
                    self.dtype(),
                    idx.dtype(),
                    ls,
                    stride_dim,
                    size,
                    idx.layout().offset,
                )
            );
            Tensor::launch(k, &[self, &idx], &[&out])?;
            out
        };
        let in_shape = self.shape().clone();
        Ok(
            out.record_saving(op, &[self], &[&idx.clone()], false, move |g, _, _| {
                Ok(vec![Some(g.add_at_gathered(&idx, &in_shape, d)?)])
            }),
        )
    }

    /// Concatenates `tensors` along `dim` (same shape elsewhere). Mixed dtypes promote, as in
    /// PyTorch: `i64` with `f32` gives `f32`.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for an empty list; `InvalidDim`, `ShapeMismatch`, `DeviceMismatch`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let a = Tensor::zeros([1, 2], DType::F32)?;
    /// let b = Tensor::ones([2, 2], DType::F32)?;
    /// assert_eq!(Tensor::cat(&[&a, &b], 0)?.to_vec::<f32>()?, vec![0., 0., 1., 1., 1., 1.]);
    /// let i = Tensor::from_vec(vec![7i64, 8], [1, 2])?;
    /// assert_eq!(Tensor::cat(&[&i, &a], 0)?.dtype(), DType::F32); // promoted
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn cat(tensors: &[&Tensor], dim: isize) -> Result<Tensor> {
        let metas: SmallVec<[(&[usize], DType); 4]> =
            tensors.iter().map(|t| (t.dims(), t.dtype())).collect();
        let eddy_ops::view::Cat {
            dim: d,
            shape,
            dtype,
        } = eddy_ops::view::infer_cat("cat", &metas, dim)?;
        let mut at = 0;
        let sizes: Vec<(usize, usize)> = (tensors.iter())
            .map(|t| {
                let n = t.dims()[d];
                at += n;
                (at - n, n)
            })
            .collect();
        let out = if tensors.iter().any(|t| t.is_global()) {
            Tensor::global_cat(tensors, d, shape)?
        } else {
            let first = tensors[0];
            for t in tensors {
                first.same_device("cat", t)?;
            }
            let out = first.empty_like_shape(shape, dtype)?;
            let _g = crate::no_grad();
            for (t, &(at, n)) in tensors.iter().zip(&sizes) {
                out.narrow(d as isize, at, n)?.copy_(t)?;
            }
            out
        };
        Ok(out.record("cat", tensors, move |g, inputs, _| {
            sizes
                .iter()
                .zip(inputs)
                .map(|(&(s, n), t)| {
                    // A promoted input gets its gradient back in its own dtype.
                    let gi = g.narrow(d as isize, s, n)?.contiguous()?;
                    Ok(Some(gi.cast(t.dtype())?))
                })
                .collect()
        }))
    }

    /// Stacks `tensors` (same shape) along a new dim `dim`.
    ///
    /// # Errors
    ///
    /// As [`cat`](Self::cat).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 2.], [2])?;
    /// let b = Tensor::from_vec(vec![3f32, 4.], [2])?;
    /// assert_eq!(Tensor::stack(&[&a, &b], 0)?.to_vec2::<f32>()?, [[1., 2.], [3., 4.]]);
    /// assert_eq!(Tensor::stack(&[&a, &b], 1)?.to_vec2::<f32>()?, [[1., 3.], [2., 4.]]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn stack(tensors: &[&Tensor], dim: isize) -> Result<Tensor> {
        let Some(&first) = tensors.first() else {
            return Err(Error::invalid("stack", "needs at least one tensor"));
        };
        let d = norm_dim("stack", dim, first.rank() + 1)? as isize;
        let mut us = Vec::with_capacity(tensors.len());
        for t in tensors {
            us.push(t.unsqueeze(d)?);
        }
        Tensor::cat(&us.iter().collect::<Vec<_>>(), d)
    }
}

/// `InvalidArgument` unless `p` is a probability, in `[0, 1]` (NaN is not).
#[track_caller]
pub(crate) fn check_probability(op: &'static str, p: f64) -> Result<()> {
    if (0.0..=1.0).contains(&p) {
        Ok(())
    } else {
        Err(Error::invalid(
            op,
            format!("probability {p} is not in [0, 1]"),
        ))
    }
}
