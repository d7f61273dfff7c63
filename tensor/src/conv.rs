//! Convolutions over the spatial dims of `[batch, channels, h, w]` tensors (and `[batch,
//! channels, len]` for the 1-d convolution): `unfold2d`/`fold2d` (PyTorch's
//! `F.unfold`/`F.fold`), `conv1d`, `conv2d` and `conv_transpose2d`, with their gradients.
//! Pooling is in `pool.rs`.
//!
//! A convolution is a product: [`unfold2d`](Tensor::unfold2d) lays each window out as a
//! column, and the weight, `[out, in · kh · kw]`, multiplies the columns of every image (per
//! group) in one batched `gemm`. Its gradients are products too, the input's folded back by the
//! adjoint of the unfold. A 1×1 convolution of stride 1 skips the unfold: its columns are the
//! input itself.

use crate::{DType, Error, Result, Shape, Tensor};
use eddy_ops::conv::{self as kc, Window2d};

pub use eddy_ops::conv::Pair;

/// `UnsupportedDType` for a tensor that is not a float (every op here averages or multiplies).
#[track_caller]
pub(crate) fn float_only(op: &'static str, t: &Tensor) -> Result<()> {
    if t.dtype().is_float() {
        return Ok(());
    }
    Err(Error::UnsupportedDType {
        at: crate::Caller::here(),
        op,
        dtype: t.dtype(),
    })
}

/// `ShapeMismatch` naming `what`'s shape against the one `op` expects.
#[track_caller]
fn mismatch(op: &'static str, got: &[usize], want: &[usize]) -> Error {
    Error::ShapeMismatch {
        at: crate::Caller::here(),
        op,
        lhs: got.to_vec(),
        rhs: want.to_vec(),
    }
}

impl Tensor {
    /// `[batch, channels, h, w]` of a 4-d tensor, or of a 3-d one read as a batch of one
    /// (`true`: the caller removes the batch dim again), as PyTorch's unbatched input.
    #[track_caller]
    pub(crate) fn image_dims(&self, op: &'static str) -> Result<([usize; 4], bool)> {
        match *self.dims() {
            [n, c, h, w] => Ok(([n, c, h, w], false)),
            [c, h, w] => Ok(([1, c, h, w], true)),
            _ => Err(Error::invalid(
                op,
                format!(
                    "expects 3-d (unbatched) or 4-d (batched) input, got shape {:?}",
                    self.dims()
                ),
            )),
        }
    }

    /// Runs `f` on `self` as a batch (`[1, ..]` if `single`), and removes that dim after.
    #[track_caller]
    pub(crate) fn batched(
        &self,
        single: bool,
        f: impl FnOnce(&Tensor) -> Result<Tensor>,
    ) -> Result<Tensor> {
        if single {
            f(&self.unsqueeze(0)?)?.squeeze(0)
        } else {
            f(self)
        }
    }

    /// The columns of `w` over `self` (`[batch, channels, h, w]`): `[batch, channels · taps,
    /// positions]`, differentiable (the gradient folds back).
    #[track_caller]
    pub(crate) fn im2col_of(&self, w: Window2d) -> Result<Tensor> {
        let shape = Shape::from([w.batch, w.channels * w.taps(), w.positions()]);
        if self.is_global() {
            // Each rank's images (the batch may be split); zero padding passes partial sums.
            let out = by_image("unfold", self, 4, shape, w, |x, w| x.im2col_of(w))?;
            return Ok(out.record("unfold", &[self], move |g, _, _| {
                Ok(vec![Some(g.col2im_of(w)?)])
            }));
        }
        let x = {
            let _g = crate::no_grad();
            self.contiguous()?
        };
        let out = self.empty_like_shape(shape, self.dtype())?;
        let (dev, offset) = (x.device(), x.layout().offset);
        let k = kernel!("unfold", dev, kc::im2col(dev, x.dtype(), w, offset));
        let work = out.numel().saturating_mul(2);
        Tensor::launch_with_work(k, &[&x], &[&out], Some(work))?;
        Ok(out.record("unfold", &[self], move |g, _, _| {
            Ok(vec![Some(g.col2im_of(w)?)])
        }))
    }

    /// The sum of the columns `self` (`[batch, channels · taps, positions]`) back onto the
    /// `[batch, channels, h, w]` input of `w`, differentiable (the gradient unfolds).
    #[track_caller]
    fn col2im_of(&self, w: Window2d) -> Result<Tensor> {
        let shape = Shape::from([w.batch, w.channels, w.in_hw[0], w.in_hw[1]]);
        if self.is_global() {
            let out = by_image("fold", self, 3, shape, w, |c, w| c.col2im_of(w))?;
            return Ok(out.record("fold", &[self], move |g, _, _| {
                Ok(vec![Some(g.im2col_of(w)?)])
            }));
        }
        let c = {
            let _g = crate::no_grad();
            self.contiguous()?
        };
        let out = self.empty_like_shape(shape, self.dtype())?;
        let (dev, offset) = (c.device(), c.layout().offset);
        let k = kernel!("fold", dev, kc::col2im(dev, c.dtype(), w, offset));
        let work = c.numel().saturating_mul(2);
        Tensor::launch_with_work(k, &[&c], &[&out], Some(work))?;
        Ok(out.record("fold", &[self], move |g, _, _| {
            Ok(vec![Some(g.im2col_of(w)?)])
        }))
    }

    /// Every `kernel`-sized window of `self` (`[batch, channels, h, w]`, or `[channels, h, w]`)
    /// as a column, PyTorch's `F.unfold(x, kernel_size, dilation, padding, stride)`: the
    /// result is `[batch, channels · kh · kw, positions]` (without the batch dim for 3-d
    /// input), row `c · kh · kw + i · kw + j` holding tap `(i, j)` of plane `c` at each window
    /// position (zero in the padding). Differentiable: the gradient is
    /// [`fold2d`](Self::fold2d) of the incoming one.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for input that is not 3-d or 4-d, a zero kernel, stride or dilation,
    /// or a window larger than the padded input; `UnsupportedDType` for integers and `bool`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let x = Tensor::arange(0.0, 9.0, 1.0, DType::F32)?.reshape([1, 1, 3, 3])?;
    /// let cols = x.unfold2d(2, 1, 0, 1)?; // 2×2 windows, stride 1: 4 taps × 4 positions
    /// assert_eq!(cols.dims(), &[1, 4, 4]);
    /// assert_eq!(cols.to_vec2::<f32>().ok(), None); // 3-d
    /// assert_eq!(cols.squeeze(0)?.to_vec2::<f32>()?[0], [0., 1., 3., 4.]); // top-left taps
    /// assert!(x.unfold2d(4, 1, 0, 1).is_err()); // no 4×4 window in a 3×3 plane
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn unfold2d(
        &self,
        kernel: impl Into<Pair>,
        dilation: impl Into<Pair>,
        padding: impl Into<Pair>,
        stride: impl Into<Pair>,
    ) -> Result<Tensor> {
        let (dims, single) = self.image_dims("unfold")?;
        float_only("unfold", self)?;
        let (k, d, p, s) = (
            kernel.into(),
            dilation.into(),
            padding.into(),
            stride.into(),
        );
        let w = Window2d::new("unfold", dims, k, s, p, d, false)?;
        self.batched(single, |x| x.im2col_of(w))
    }

    /// The adjoint of [`unfold2d`](Self::unfold2d), PyTorch's `F.fold(x, output_size,
    /// kernel_size, dilation, padding, stride)`: columns `[batch, channels · kh · kw,
    /// positions]` (or without the batch dim) summed back onto `[batch, channels,
    /// output_size]`, each element the sum of the column entries that read it.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` as [`unfold2d`](Self::unfold2d), for input that is not 2-d or 3-d,
    /// and `ShapeMismatch` when its second dim is not a multiple of `kh · kw` or its last is
    /// not the number of window positions over `output_size`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let ones = Tensor::ones([1, 4, 4], DType::F32)?;
    /// let counts = ones.fold2d(3, 2, 1, 0, 1)?; // how many 2×2 windows cover each element
    /// assert_eq!(counts.reshape([9])?.to_vec::<f32>()?, [1., 2., 1., 2., 4., 2., 1., 2., 1.]);
    /// assert!(ones.fold2d(4, 2, 1, 0, 1).is_err()); // 9 positions over 4×4, not 4
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn fold2d(
        &self,
        output_size: impl Into<Pair>,
        kernel: impl Into<Pair>,
        dilation: impl Into<Pair>,
        padding: impl Into<Pair>,
        stride: impl Into<Pair>,
    ) -> Result<Tensor> {
        let op = "fold";
        let (n, rows, len, single) = match *self.dims() {
            [n, rows, len] => (n, rows, len, false),
            [rows, len] => (1, rows, len, true),
            _ => {
                return Err(Error::invalid(
                    op,
                    format!(
                        "expects 2-d (unbatched) or 3-d (batched) input, got shape {:?}",
                        self.dims()
                    ),
                ));
            }
        };
        float_only(op, self)?;
        let (o, k) = (output_size.into(), kernel.into());
        let taps = k.0[0] * k.0[1];
        let channels = rows.checked_div(taps).unwrap_or(0);
        let (d, p, s) = (dilation.into(), padding.into(), stride.into());
        let w = Window2d::new(op, [n, channels, o.0[0], o.0[1]], k, s, p, d, false)?;
        if !rows.is_multiple_of(taps) || len != w.positions() {
            let want = [n, channels.max(1) * taps, w.positions()];
            return Err(mismatch(op, self.dims(), &want[single as usize..]));
        }
        self.batched(single, |c| c.col2im_of(w))
    }

    /// 2-d convolution (cross-correlation, as PyTorch's `F.conv2d(x, weight, bias, stride,
    /// padding, dilation, groups)`): `self` `[batch, in, h, w]` (or `[in, h, w]`), `weight`
    /// `[out, in / groups, kh, kw]`, `bias` `[out]`; the result is `[batch, out, oh, ow]` with
    /// `oh = (h + 2·padding − dilation·(kh − 1) − 1) / stride + 1`. Each group of `in /
    /// groups` input channels feeds `out / groups` outputs. Differentiable in all three.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for input that is not 3-d or 4-d, a weight that is not 4-d, zero
    /// `groups`, stride or dilation, or a window larger than the padded input; `ShapeMismatch`
    /// when the channels do not divide into the groups or the weight or bias do not fit;
    /// `DTypeMismatch`, `DeviceMismatch`; `UnsupportedDType` for `bool`. Integers are
    /// convolved exactly (wrapping on overflow), as PyTorch's CPU does, by a slower path.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let x = Tensor::ones([2, 3, 5, 5], DType::F32)?;
    /// let w = Tensor::ones([4, 3, 3, 3], DType::F32)?;
    /// let b = Tensor::from_vec(vec![0f32, 1., 2., 3.], [4])?;
    /// let y = x.conv2d(&w, Some(&b), 1, 1, 1, 1)?; // 3×3, padding 1: the same size
    /// assert_eq!(y.dims(), &[2, 4, 5, 5]);
    /// let y = y.to_vec::<f32>()?;
    /// assert_eq!((y[0], y[6], y[25]), (12., 27., 13.)); // a corner sees 2×2 taps × 3 channels
    /// assert!(x.conv2d(&w, None, 1, 0, 1, 2).is_err()); // 3 channels in 2 groups
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn conv2d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: impl Into<Pair>,
        padding: impl Into<Pair>,
        dilation: impl Into<Pair>,
        groups: usize,
    ) -> Result<Tensor> {
        let pairs = [stride.into(), padding.into(), dilation.into()];
        self.conv2d_with(weight, bias, pairs, groups, false)
    }

    /// [`conv2d`](Self::conv2d) of `[stride, padding, dilation]`, then ReLU if `relu`: one
    /// instruction for the product, the bias and the activation (`f32`, `f64`).
    #[track_caller]
    pub(crate) fn conv2d_with(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        pairs: [Pair; 3],
        groups: usize,
        relu: bool,
    ) -> Result<Tensor> {
        let op = "conv2d";
        let (dims, single) = self.image_dims(op)?;
        if weight.rank() != 4 {
            return Err(Error::invalid(
                op,
                format!("expects a 4-d weight, got shape {:?}", weight.dims()),
            ));
        }
        let w = self.conv_window(op, dims, weight, bias, pairs, groups)?;
        self.batched(single, |x| x.conv_of(weight, bias, w, groups, relu))
    }

    /// 1-d convolution, PyTorch's `F.conv1d(x, weight, bias, stride, padding, dilation,
    /// groups)`: `self` `[batch, in, len]` (or `[in, len]`), `weight` `[out, in / groups, k]`,
    /// `bias` `[out]`; the result is `[batch, out, olen]`. Computed as a 2-d convolution of
    /// height 1.
    ///
    /// # Errors
    ///
    /// As [`conv2d`](Self::conv2d), for 2-d or 3-d input and a 3-d weight.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let x = Tensor::from_vec(vec![1f32, 2., 3., 4., 5.], [1, 1, 5])?;
    /// let w = Tensor::from_vec(vec![1f32, 0., -1.], [1, 1, 3])?; // a difference
    /// let y = x.conv1d(&w, None, 1, 0, 1, 1)?;
    /// assert_eq!(y.to_vec::<f32>()?, [-2., -2., -2.]);
    /// assert_eq!(x.conv1d(&w, None, 2, 1, 1, 1)?.to_vec::<f32>()?, [-2., -2., 4.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn conv1d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: usize,
        padding: usize,
        dilation: usize,
        groups: usize,
    ) -> Result<Tensor> {
        let op = "conv1d";
        let (dims, single) = match *self.dims() {
            [n, c, l] => ([n, c, 1, l], false),
            [c, l] => ([1, c, 1, l], true),
            _ => {
                return Err(Error::invalid(
                    op,
                    format!(
                        "expects 2-d (unbatched) or 3-d (batched) input, got shape {:?}",
                        self.dims()
                    ),
                ));
            }
        };
        if weight.rank() != 3 {
            return Err(Error::invalid(
                op,
                format!("expects a 3-d weight, got shape {:?}", weight.dims()),
            ));
        }
        let w2 = weight.unsqueeze(2)?;
        let pairs = [Pair([1, stride]), Pair([0, padding]), Pair([1, dilation])];
        let w = self.conv_window(op, dims, &w2, bias, pairs, groups)?;
        let x = self.reshape(dims.to_vec())?;
        x.conv_of(&w2, bias, w, groups, false)?
            .squeeze(2)
            .and_then(|y| if single { y.squeeze(0) } else { Ok(y) })
    }

    /// Checks a convolution's operands (`self` of `dims`, a 4-d `weight`, `bias`, `groups`)
    /// and returns its window.
    #[track_caller]
    fn conv_window(
        &self,
        op: &'static str,
        dims: [usize; 4],
        weight: &Tensor,
        bias: Option<&Tensor>,
        [stride, padding, dilation]: [Pair; 3],
        groups: usize,
    ) -> Result<Window2d> {
        if self.dtype().is_float() {
            float_only(op, self)?;
        } else {
            // Integers as PyTorch's CPU convolves them (`int_window.rs`).
            self.int_window_dtype(op)?;
        }
        for t in std::iter::once(weight).chain(bias) {
            self.same_device(op, t)?;
            self.same_dtype(op, t)?;
        }
        let wd = weight.dims();
        if groups == 0 {
            return Err(Error::invalid(op, "groups must be positive, got 0"));
        }
        let cout = wd[0];
        if dims[1] != wd[1] * groups || !cout.is_multiple_of(groups) {
            let mut want = wd.to_vec();
            want[0] = cout.next_multiple_of(groups);
            want[1] = dims[1] / groups;
            return Err(mismatch(op, wd, &want));
        }
        if let Some(b) = bias
            && b.dims() != [cout]
        {
            return Err(mismatch(op, b.dims(), &[cout]));
        }
        let k = Pair([wd[2], wd[3]]);
        Window2d::new(op, dims, k, stride, padding, dilation, false)
    }

    /// The convolution of 4-d `self` by `weight` over the window `w`, checked; ReLU'd if
    /// `relu`.
    #[track_caller]
    pub(crate) fn conv_of(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        w: Window2d,
        groups: usize,
        relu: bool,
    ) -> Result<Tensor> {
        if !self.dtype().is_float() {
            let y = self.int_conv(weight, bias, w, groups)?;
            return if relu { y.relu() } else { Ok(y) };
        }
        if let Some(y) = self.conv_blocked(weight, bias, w, groups, relu)? {
            return Ok(y);
        }
        let (n, cout, len) = (w.batch, weight.dims()[0], w.positions());
        let kg = w.channels / groups * w.taps();
        let pointwise = w.taps() == 1 && w.stride == [1, 1] && w.padding == [0, 0];
        let cols = if pointwise {
            self.reshape([n, w.channels, len])?
        } else {
            self.im2col_of(w)?
        };
        let (wm, cols, bias_shape) = if groups == 1 {
            let wm = weight.reshape([cout, kg])?;
            (wm, cols, vec![cout, 1])
        } else {
            let wm = weight.reshape([groups, cout / groups, kg])?;
            let cols = cols.reshape([n, groups, kg, len])?;
            (wm, cols, vec![groups, cout / groups, 1])
        };
        let bias = bias.map(|b| b.reshape(bias_shape)).transpose()?;
        let y = wm.product_bias(&cols, bias.as_ref(), relu)?;
        y.reshape([n, cout, w.out_hw[0], w.out_hw[1]])
    }

    /// The convolution as one blocked instruction (each block of positions unfolded and
    /// multiplied in cache), where it applies: a CPU `f32` or `f64` convolution of one group,
    /// not global, recording no gradient (the training path keeps the columns for the
    /// weight's gradient). `None` where it does not apply.
    #[track_caller]
    fn conv_blocked(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        w: Window2d,
        groups: usize,
        relu: bool,
    ) -> Result<Option<Tensor>> {
        let dt = self.dtype();
        let mut ins = vec![self, weight];
        ins.extend(bias);
        if groups != 1
            || !matches!(dt, DType::F32 | DType::F64)
            || ins.iter().any(|t| t.is_global())
            || crate::autograd::records(&ins)
        {
            return Ok(None);
        }
        let cout = weight.dims()[0];
        let dev = self.device();
        let (x, wm, b) = {
            let _g = crate::no_grad();
            (
                self.contiguous()?,
                weight
                    .reshape([cout, w.channels * w.taps()])?
                    .contiguous()?,
                bias.map(Tensor::contiguous).transpose()?,
            )
        };
        let offsets = [
            x.layout().offset,
            wm.layout().offset,
            b.as_ref().map_or(0, |b| b.layout().offset),
        ];
        let has_bias = b.is_some();
        let Some(k) = kc::conv2d_blocked(dev, dt, w, cout, offsets, has_bias, relu) else {
            return Ok(None);
        };
        let out =
            self.empty_like_shape(Shape::from([w.batch, cout, w.out_hw[0], w.out_hw[1]]), dt)?;
        let macs = w.batch * cout * w.positions() * w.channels * w.taps();
        let mut ins = vec![&x, &wm];
        ins.extend(b.as_ref());
        Tensor::launch_with_work(k, &ins, &[&out], Some(macs))?;
        Ok(Some(out))
    }

    /// `self @ rhs + bias`, then ReLU if `relu`, with `bias` broadcast to the product: for
    /// `f32` and `f64` one instruction (the bias added block by block while the block is in
    /// cache, as `linear`'s), for other dtypes the ops one by one. The bias's gradient sums
    /// over the batch dims and the last.
    #[track_caller]
    fn product_bias(&self, rhs: &Tensor, bias: Option<&Tensor>, relu: bool) -> Result<Tensor> {
        let dt = self.dtype();
        let global = self.is_global() || rhs.is_global() || bias.is_some_and(Tensor::is_global);
        let Some(b) = bias.filter(|_| matches!(dt, DType::F32 | DType::F64) && !global) else {
            let y = self.matmul(rhs)?;
            let y = match bias {
                Some(b) => y.add(b)?,
                None => y,
            };
            return if relu { y.relu() } else { Ok(y) };
        };
        let d = eddy_ops::linalg::infer_matmul(self.dims(), rhs.dims())?;
        let (m, k, n) = (d.m, d.k, d.n);
        let la = self.layout().broadcast_to(&d.with(m, k));
        let lb = rhs.layout().broadcast_to(&d.with(k, n));
        let lc = b.layout().broadcast_to(&d.shape());
        let out = self.empty_like_shape(d.shape(), dt)?;
        let macs = Some(eddy_ops::numel_of(&[d.batch.numel(), m, n, k]));
        let dev = self.device();
        match relu {
            true => {
                let k = kernel!(
                    "conv2d",
                    dev,
                    eddy_ops::linalg::matmul_bias_relu(dev, dt, la, lb, lc)
                );
                Tensor::launch_with_work(k, &[self, rhs, b], &[&out], macs)?
            }
            false => {
                let k = kernel!(
                    "conv2d",
                    dev,
                    eddy_ops::linalg::matmul_bias(dev, dt, la, lb, lc)
                );
                Tensor::launch_with_work(k, &[self, rhs, b], &[&out], macs)?
            }
        }
        let saved = &[self, rhs][crate::linalg::saved_operands(self, rhs)];
        Ok(
            out.record_saving("conv2d", &[self, rhs, b], saved, relu, move |g, ins, y| {
                // ReLU's backward masks by the output, positive exactly where the sum was.
                let masked;
                let g = match relu {
                    true => {
                        masked = y.binary(g, eddy_ops::elementwise::BinaryOp::ReluBackward)?;
                        &masked
                    }
                    false => g,
                };
                let (ga, gb) = crate::linalg::matmul_grads(g, &ins[0], &ins[1])?;
                // Over the last dim first, a reduction of contiguous rows, then the batch.
                let gc = (ins[2].requires_grad())
                    .then(|| g.sum(&[-1], true)?.sum_to(ins[2].shape()))
                    .transpose()?;
                Ok(vec![ga, gb, gc])
            }),
        )
    }

    /// Transposed 2-d convolution (the gradient of [`conv2d`](Self::conv2d) with respect to
    /// its input), PyTorch's `F.conv_transpose2d(x, weight, bias, stride, padding,
    /// output_padding, groups, dilation)`: `self` `[batch, in, h, w]` (or `[in, h, w]`),
    /// `weight` `[in, out / groups, kh, kw]`, `bias` `[out]`; the result is `[batch, out, oh,
    /// ow]` with `oh = (h − 1)·stride − 2·padding + dilation·(kh − 1) + output_padding + 1`.
    ///
    /// # Errors
    ///
    /// As [`conv2d`](Self::conv2d), and `InvalidArgument` for an `output_padding` not below
    /// the stride or the dilation, or an empty result.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let x = Tensor::ones([1, 1, 2, 2], DType::F32)?;
    /// let w = Tensor::ones([1, 1, 2, 2], DType::F32)?;
    /// let y = x.conv_transpose2d(&w, None, 2, 0, 0, 1, 1)?; // each input spreads over 2×2
    /// assert_eq!(y.dims(), &[1, 1, 4, 4]);
    /// assert_eq!(y.to_vec::<f32>()?, vec![1.0; 16]);
    /// let y = x.conv_transpose2d(&w, None, 1, 0, 0, 1, 1)?; // overlapping: counts
    /// assert_eq!(y.reshape([9])?.to_vec::<f32>()?, [1., 2., 1., 2., 4., 2., 1., 2., 1.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub fn conv_transpose2d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: impl Into<Pair>,
        padding: impl Into<Pair>,
        output_padding: impl Into<Pair>,
        groups: usize,
        dilation: impl Into<Pair>,
    ) -> Result<Tensor> {
        let op = "conv_transpose2d";
        let (dims, single) = self.image_dims(op)?;
        if weight.rank() != 4 {
            return Err(Error::invalid(
                op,
                format!("expects a 4-d weight, got shape {:?}", weight.dims()),
            ));
        }
        float_only(op, self)?;
        for t in std::iter::once(weight).chain(bias) {
            self.same_device(op, t)?;
            self.same_dtype(op, t)?;
        }
        let (s, p, op_, d) = (
            stride.into().0,
            padding.into().0,
            output_padding.into().0,
            dilation.into().0,
        );
        let wd = weight.dims();
        if groups == 0 || s.contains(&0) || d.contains(&0) {
            return Err(Error::invalid(
                op,
                format!("groups, stride and dilation must be positive, got {groups}, {s:?}, {d:?}"),
            ));
        }
        if (0..2).any(|i| op_[i] >= s[i] && op_[i] >= d[i]) {
            return Err(Error::invalid(
                op,
                format!(
                    "output padding must be smaller than the stride or the dilation, got \
                     {op_:?} with stride {s:?} and dilation {d:?}"
                ),
            ));
        }
        let (cin, cout) = (wd[0], wd[1] * groups);
        if dims[1] != cin || !cin.is_multiple_of(groups) {
            let mut want = wd.to_vec();
            want[0] = dims[1].next_multiple_of(groups);
            return Err(mismatch(op, wd, &want));
        }
        if let Some(b) = bias
            && b.dims() != [cout]
        {
            return Err(mismatch(op, b.dims(), &[cout]));
        }
        let mut out_hw = [0; 2];
        for i in 0..2 {
            let full = (dims[2 + i].max(1) - 1) * s[i] + d[i] * (wd[2 + i] - 1) + op_[i] + 1;
            out_hw[i] = match full.checked_sub(2 * p[i]) {
                Some(o) if o > 0 && dims[2 + i] > 0 => o,
                _ => {
                    return Err(Error::invalid(
                        op,
                        format!(
                            "input of {:?} with padding {p:?} gives no output",
                            &dims[2..]
                        ),
                    ));
                }
            };
        }
        // The window of the matching convolution over the output, with one position per input
        // element (windows past them, from a large output padding, are absent).
        let k = Pair([wd[2], wd[3]]);
        let out_dims = [dims[0], cout, out_hw[0], out_hw[1]];
        let mut w = Window2d::new(op, out_dims, k, Pair(s), Pair(p), Pair(d), false)?;
        w.out_hw = [dims[2], dims[3]];
        self.batched(single, |x| {
            let (n, len, taps) = (dims[0], dims[2] * dims[3], w.taps());
            let (gin, gout) = (cin / groups, cout / groups);
            let wg = weight
                .reshape([groups, gin, gout * taps])?
                .transpose(-1, -2)?;
            let cols = wg.matmul(&x.reshape([n, groups, gin, len])?)?;
            let y = cols.reshape([n, cout * taps, len])?.col2im_of(w)?;
            match bias {
                Some(b) => y.add(&b.reshape([cout, 1, 1])?),
                None => Ok(y),
            }
        })
    }
}

/// `local` (unfold or fold, as op `op`) of a global `t` of `rank` dims giving `shape`, on each
/// rank's images: the batch dim may stay split (the window of each rank's component counts
/// its own images), the others stay whole; a partial sum passes (both are linear, the padding
/// zeros). No record.
#[track_caller]
fn by_image(
    op: &'static str,
    t: &Tensor,
    rank: usize,
    shape: Shape,
    w: Window2d,
    local: impl Fn(&Tensor, Window2d) -> Result<Tensor>,
) -> Result<Tensor> {
    let rule = eddy_ops::global::Rule::Map {
        dims: (0..rank).map(|d| (d == 0).then_some(0)).collect(),
        partials: eddy_ops::global::Partials::Sum,
    };
    crate::global::run(op, rule, &[t], shape, |x, dims| {
        local(
            x[0],
            Window2d {
                batch: dims[0],
                ..w
            },
        )
    })
}
