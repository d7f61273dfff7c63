//! Pooling over the spatial dims of `[batch, channels, h, w]` tensors: `max_pool2d` (with the
//! positions of its maxima), `avg_pool2d` and `adaptive_avg_pool2d`, with their gradients.

use crate::conv::{Pair, float_only};
use crate::{DType, Error, Result, Shape, Tensor};
use eddy_ops::conv::{self as kc, Window2d};
use eddy_ops::global::Rule;

impl Tensor {
    /// The window of a pooling op, checked as PyTorch's (padding at most half the kernel).
    #[track_caller]
    fn pool_window(
        &self,
        op: &'static str,
        dims: [usize; 4],
        [kernel, stride, padding, dilation]: [Pair; 4],
        ceil_mode: bool,
    ) -> Result<Window2d> {
        if op == "max_pool2d" && !self.dtype().is_float() {
            // Integers as PyTorch's CPU pools them (`int_window.rs`).
            self.int_window_dtype(op)?;
        } else {
            float_only(op, self)?;
        }
        if (0..2).any(|i| padding.0[i] > kernel.0[i] / 2) {
            return Err(Error::invalid(
                op,
                format!(
                    "padding must be at most half the kernel size, got padding {:?} for kernel {:?}",
                    padding.0, kernel.0
                ),
            ));
        }
        Window2d::new(op, dims, kernel, stride, padding, dilation, ceil_mode)
    }

    /// 2-d max pooling, PyTorch's `F.max_pool2d(x, kernel_size, stride, padding, dilation,
    /// ceil_mode)` (PyTorch's default stride is the kernel size): the largest element of each
    /// window of `self` (`[batch, channels, h, w]` or `[channels, h, w]`), padding never
    /// chosen, NaN propagated. The gradient goes to the element chosen.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for input that is not 3-d or 4-d, a zero kernel, stride or dilation,
    /// padding over half the kernel, or a window larger than the padded input;
    /// `UnsupportedDType` for `bool`. Integers are pooled exactly, as PyTorch's CPU does.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![1f32, 5., 0., 0., 2., 3., 0., 9.], [1, 1, 2, 4])?;
    /// assert_eq!(x.max_pool2d(2, 2, 0, 1, false)?.to_vec::<f32>()?, [5., 9.]);
    /// let i = Tensor::from_vec(vec![1i64, 5, 0, 0, -2, 3, 0, 9], [1, 1, 2, 4])?;
    /// assert_eq!(i.max_pool2d(2, 2, 0, 1, false)?.to_vec::<i64>()?, [5, 9]);
    /// assert_eq!(x.max_pool2d(3, 2, 1, 1, false)?.to_vec::<f32>()?, [5., 9.]);
    /// assert!(x.max_pool2d(2, 2, 2, 1, false).is_err()); // padding over half the kernel
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn max_pool2d(
        &self,
        kernel: impl Into<Pair>,
        stride: impl Into<Pair>,
        padding: impl Into<Pair>,
        dilation: impl Into<Pair>,
        ceil_mode: bool,
    ) -> Result<Tensor> {
        let (k, s, p, d) = (
            kernel.into(),
            stride.into(),
            padding.into(),
            dilation.into(),
        );
        Ok(self.max_pool2d_with_indices(k, s, p, d, ceil_mode)?.0)
    }

    /// [`max_pool2d`](Self::max_pool2d) with the position of each maximum in its plane, `row ·
    /// w + col` (`i64`), as PyTorch's `F.max_pool2d(.., return_indices=True)`.
    ///
    /// # Errors
    ///
    /// As [`max_pool2d`](Self::max_pool2d).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![1f32, 5., 0., 0., 2., 3., 0., 9.], [1, 1, 2, 4])?;
    /// let (m, at) = x.max_pool2d_with_indices(2, 2, 0, 1, false)?;
    /// assert_eq!((m.to_vec::<f32>()?, at.to_vec::<i64>()?), (vec![5., 9.], vec![1, 7]));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn max_pool2d_with_indices(
        &self,
        kernel: impl Into<Pair>,
        stride: impl Into<Pair>,
        padding: impl Into<Pair>,
        dilation: impl Into<Pair>,
        ceil_mode: bool,
    ) -> Result<(Tensor, Tensor)> {
        let op = "max_pool2d";
        let (dims, single) = self.image_dims(op)?;
        let pairs = [
            kernel.into(),
            stride.into(),
            padding.into(),
            dilation.into(),
        ];
        let w = self.pool_window(op, dims, pairs, ceil_mode)?;
        let x = if single {
            self.unsqueeze(0)?
        } else {
            self.clone()
        };
        let (m, at) = x.max_pool_of(w)?;
        if single {
            Ok((m.squeeze(0)?, at.squeeze(0)?))
        } else {
            Ok((m, at))
        }
    }

    /// Max pooling of 4-d `self` over `w`: the maxima (differentiable) and their positions.
    #[track_caller]
    fn max_pool_of(&self, w: Window2d) -> Result<(Tensor, Tensor)> {
        if self.is_global() {
            return self.global_max_pool(w);
        }
        if !self.dtype().is_float() {
            return self.int_max_pool(w);
        }
        let x = {
            let _g = crate::no_grad();
            self.contiguous()?
        };
        let shape = Shape::from([w.batch, w.channels, w.out_hw[0], w.out_hw[1]]);
        let out = self.empty_like_shape(shape.clone(), self.dtype())?;
        let at = self.empty_like_shape(shape, DType::I64)?;
        let (dev, offset) = (x.device(), x.layout().offset);
        let k = kernel!("max_pool2d", dev, kc::max_pool2d(dev, x.dtype(), w, offset));
        let work = out.numel().saturating_mul(w.taps());
        Tensor::launch_with_work(k, &[&x], &[&out, &at], Some(work))?;
        let idx = at.reshape([w.batch * w.channels, w.positions()])?;
        let out = out.record_saving("max_pool2d", &[self], &[&at], false, move |g, _, _| {
            Ok(vec![Some(g.unpool(&idx, w)?)])
        });
        Ok((out, at))
    }

    /// The gradient of max pooling over `w`: `self` (`[batch, channels, oh, ow]`) added at
    /// the positions `idx` (`[planes, positions]`, contiguous) of zeros of the input's shape.
    #[track_caller]
    fn unpool(&self, idx: &Tensor, w: Window2d) -> Result<Tensor> {
        if self.is_global() || idx.is_global() {
            // Each rank's planes: `idx` as the maxima are, `[batch, channels, oh, ow]`.
            let shape = Shape::from([w.batch, w.channels, w.in_hw[0], w.in_hw[1]]);
            let rule = Rule::Planes;
            return crate::global::run("max_pool2d", rule, &[self, idx], shape, |x, dims| {
                let w = Window2d {
                    batch: dims[0],
                    channels: dims[1],
                    ..w
                };
                let planes = x[1].reshape([w.batch * w.channels, w.positions()])?;
                x[0].unpool(&planes, w)
            });
        }
        let g = self.contiguous()?;
        let shape = Shape::from([w.batch, w.channels, w.in_hw[0], w.in_hw[1]]);
        let out = self.empty_like_shape(shape, self.dtype())?;
        let (dev, offsets) = (g.device(), (g.layout().offset, idx.layout().offset));
        let k = kernel!(
            "max_pool2d",
            dev,
            kc::max_pool2d_backward(dev, g.dtype(), w, offsets.0, offsets.1)
        );
        Tensor::launch(k, &[&g, idx], &[&out])?;
        Ok(out)
    }

    /// [`max_pool_of`](Self::max_pool_of) of a global `self`: each rank pools its planes (the
    /// batch and channels may stay split); the gradient goes back to each rank's positions.
    #[track_caller]
    fn global_max_pool(&self, w: Window2d) -> Result<(Tensor, Tensor)> {
        let shape = Shape::from([w.batch, w.channels, w.out_hw[0], w.out_hw[1]]);
        let rule = Rule::Planes;
        let mut v = crate::global::run_many("max_pool2d", rule, &[self], shape, |x, dims| {
            let (m, at) = x[0].max_pool_of(Window2d {
                batch: dims[0],
                channels: dims[1],
                ..w
            })?;
            Ok(vec![m, at])
        })?;
        let at = v.pop().expect("the positions");
        let out = v.pop().expect("the maxima");
        let idx = at.clone();
        let out = out.record_saving("max_pool2d", &[self], &[&at], false, move |g, _, _| {
            Ok(vec![Some(g.unpool(&idx, w)?)])
        });
        Ok((out, at))
    }

    /// 2-d average pooling, PyTorch's `F.avg_pool2d(x, kernel_size, stride, padding,
    /// ceil_mode, count_include_pad, divisor_override)` (PyTorch's default stride is the
    /// kernel size): the mean of each window of `self` (`[batch, channels, h, w]` or
    /// `[channels, h, w]`), dividing by the window's size including the zero padding if
    /// `count_include_pad`, by the input elements it covers otherwise, or by
    /// `divisor_override` if given.
    ///
    /// # Errors
    ///
    /// As [`max_pool2d`](Self::max_pool2d), and `InvalidArgument` for a zero
    /// `divisor_override`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let x = Tensor::arange(0.0, 16.0, 1.0, DType::F32)?.reshape([1, 1, 4, 4])?;
    /// assert_eq!(x.avg_pool2d(2, 2, 0, false, true, None)?.to_vec::<f32>()?, [2.5, 4.5, 10.5, 12.5]);
    /// let ones = Tensor::ones([1, 1, 2, 2], DType::F32)?;
    /// let with_pad = ones.avg_pool2d(2, 2, 1, false, true, None)?.to_vec::<f32>()?;
    /// assert_eq!(with_pad, [0.25, 0.25, 0.25, 0.25]); // each window is 3 zeros and a one
    /// let without = ones.avg_pool2d(2, 2, 1, false, false, None)?.to_vec::<f32>()?;
    /// assert_eq!(without, [1.0; 4]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub fn avg_pool2d(
        &self,
        kernel: impl Into<Pair>,
        stride: impl Into<Pair>,
        padding: impl Into<Pair>,
        ceil_mode: bool,
        count_include_pad: bool,
        divisor_override: Option<usize>,
    ) -> Result<Tensor> {
        let op = "avg_pool2d";
        let (dims, single) = self.image_dims(op)?;
        let pairs = [kernel.into(), stride.into(), padding.into(), Pair([1, 1])];
        let w = self.pool_window(op, dims, pairs, ceil_mode)?;
        if divisor_override == Some(0) {
            return Err(Error::invalid(
                op,
                "divisor_override must be positive, got 0",
            ));
        }
        // 1 / divisor per window position, as PyTorch counts: the window clipped to the
        // padded input, then (without the padding) to the input.
        let mut inv = Vec::with_capacity(w.positions());
        let span = |axis: usize, o: usize| {
            let start = (o * w.stride[axis]) as isize - w.padding[axis] as isize;
            let padded_end = (w.in_hw[axis] + w.padding[axis]) as isize;
            let end = (start + w.kernel[axis] as isize).min(padded_end);
            let with_pad = end - start;
            let inside = end.min(w.in_hw[axis] as isize) - start.max(0);
            (with_pad, inside)
        };
        for oy in 0..w.out_hw[0] {
            let (ph, ih) = span(0, oy);
            for ox in 0..w.out_hw[1] {
                let (pw, iw) = span(1, ox);
                let divisor = match divisor_override {
                    Some(d) => d as isize,
                    None if count_include_pad => ph * pw,
                    None => ih * iw,
                };
                inv.push(1.0 / divisor.max(1) as f64);
            }
        }
        let inv = Tensor::from_vec(inv, [w.out_hw[0], w.out_hw[1]])?
            .cast(self.dtype())?
            .to_device(self.device())?;
        let inv = self.beside(inv)?;
        self.batched(single, |x| {
            let planes = [w.batch * w.channels, 1, w.in_hw[0], w.in_hw[1]];
            let mut wp = w;
            (wp.batch, wp.channels) = (planes[0], 1);
            let cols = x.reshape(planes.to_vec())?.im2col_of(wp)?;
            let shape = [w.batch, w.channels, w.out_hw[0], w.out_hw[1]];
            cols.sum(&[1], false)?.reshape(shape)?.mul(&inv)
        })
    }

    /// Adaptive 2-d average pooling, PyTorch's `F.adaptive_avg_pool2d(x, output_size)`:
    /// `self` (`[batch, channels, h, w]` or `[channels, h, w]`) averaged over `output_size`
    /// windows per plane, window `i` of a dim of size `n` spanning `⌊i·n/o⌋ .. ⌈(i+1)·n/o⌉`.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for input that is not 3-d or 4-d; `UnsupportedDType` for integers and
    /// `bool`. A zero output size gives an empty result, as PyTorch's.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let x = Tensor::arange(0.0, 6.0, 1.0, DType::F32)?.reshape([1, 1, 2, 3])?;
    /// assert_eq!(x.adaptive_avg_pool2d(1)?.to_vec::<f32>()?, [2.5]);
    /// // Columns 0..2 and 1..3 of each row, then the rows together.
    /// assert_eq!(x.adaptive_avg_pool2d((1, 2))?.to_vec::<f32>()?, [2., 3.]);
    /// assert_eq!(x.adaptive_avg_pool2d(0)?.dims(), &[1, 1, 0, 0]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn adaptive_avg_pool2d(&self, output_size: impl Into<Pair>) -> Result<Tensor> {
        let op = "adaptive_avg_pool2d";
        let (dims, single) = self.image_dims(op)?;
        float_only(op, self)?;
        let o = output_size.into().0;
        if o == [1, 1] {
            return self.mean(&[-2, -1], true);
        }
        // Each spatial dim is a product by a pooling matrix of 1/len entries.
        let pool = |n: usize, o: usize| -> Result<Tensor> {
            let mut m = vec![0f64; o * n];
            for i in 0..o {
                let (lo, hi) = (i * n / o, ((i + 1) * n).div_ceil(o));
                for j in lo..hi {
                    m[i * n + j] = 1.0 / (hi - lo) as f64;
                }
            }
            self.beside(
                Tensor::from_vec(m, [o, n])?
                    .cast(self.dtype())?
                    .to_device(self.device())?,
            )
        };
        let (ph, pw) = (pool(dims[2], o[0])?, pool(dims[3], o[1])?);
        self.batched(single, |x| ph.matmul(&x.matmul(&pw.t()?)?))
    }
}
