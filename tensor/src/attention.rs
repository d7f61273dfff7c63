//! Scaled dot-product attention, PyTorch's `F.scaled_dot_product_attention`: one fused
//! instruction forward and one backward on the CPU (the `[l, s]` scores never exist whole),
//! and the composed form (matmul, softmax, dropout, matmul) where dropout is asked for, an
//! explicit float mask needs its own gradient, or an operand is global.

use crate::{DType, Error, Result, Shape, Tensor};
use eddy_ops::nn::{self as kn, Attention, AttentionShape, MaskLayout, Rows};

/// PyTorch's keyword arguments of [`Tensor::scaled_dot_product_attention`]: an explicit mask
/// (`attn_mask`), `dropout_p`, `is_causal` and `scale`. The default is none of them.
///
/// # Examples
///
/// ```
/// use eddy_tensor::AttentionOptions;
/// let o = AttentionOptions::causal().scale(0.5);
/// assert!(o.is_causal && o.mask.is_none() && o.dropout_p == 0.0 && o.scale == Some(0.5));
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct AttentionOptions<'a> {
    /// A mask broadcastable to `[..., l, s]`: bool (`true` takes part, as in PyTorch) or a
    /// float of the queries' dtype added to the scores.
    pub mask: Option<&'a Tensor>,
    /// The probability of dropping an attention weight (the survivors scaled by `1 / (1 - p)`).
    pub dropout_p: f64,
    /// Query `i` attends to keys `0..=i` only (the top-left aligned lower triangle).
    pub is_causal: bool,
    /// The scores' factor; `1 / √e` when `None`.
    pub scale: Option<f64>,
}

impl<'a> AttentionOptions<'a> {
    /// Causal attention.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(eddy_tensor::AttentionOptions::causal().is_causal);
    /// ```
    pub fn causal() -> Self {
        AttentionOptions {
            is_causal: true,
            ..Default::default()
        }
    }

    /// With the explicit mask `mask`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{AttentionOptions, DType, Tensor};
    /// let m = Tensor::ones([2, 3], DType::Bool)?;
    /// assert!(AttentionOptions::default().mask(&m).mask.is_some());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn mask(self, mask: &'a Tensor) -> Self {
        AttentionOptions {
            mask: Some(mask),
            ..self
        }
    }

    /// With dropout of probability `p` on the attention weights.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(eddy_tensor::AttentionOptions::default().dropout(0.1).dropout_p, 0.1);
    /// ```
    pub fn dropout(self, p: f64) -> Self {
        AttentionOptions {
            dropout_p: p,
            ..self
        }
    }

    /// With the scores' factor `scale` in place of `1 / √e`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(eddy_tensor::AttentionOptions::default().scale(2.0).scale, Some(2.0));
    /// ```
    pub fn scale(self, scale: f64) -> Self {
        AttentionOptions {
            scale: Some(scale),
            ..self
        }
    }
}

const OP: &str = "scaled_dot_product_attention";

impl Tensor {
    /// Scaled dot-product attention, PyTorch's `F.scaled_dot_product_attention(query, key,
    /// value, attn_mask, dropout_p, is_causal, scale)`: `softmax(q · kᵀ · scale + mask) · v`
    /// with `self` the queries `[..., l, e]`, keys `[..., s, e]` and values `[..., s, ev]`
    /// (batch dims broadcast), giving `[..., l, ev]`. A row that sees no key (all masked) is
    /// zero, as in PyTorch. Differentiable in the queries, keys, values and a float mask.
    ///
    /// On the CPU, without dropout, it is one instruction that works a few query rows at a
    /// time, so memory stays linear in `s`; its backward is one instruction too. Dropout (drawn
    /// from the global generator, as [`dropout`](Self::dropout)) runs the composed form.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for an operand of fewer than 2 dims, a mask with `is_causal`, or a
    /// dropout probability outside `[0, 1]`; `DTypeMismatch` for operands of different
    /// dtypes or a mask neither bool nor theirs; `UnsupportedDType` for integer operands;
    /// `ShapeMismatch` when widths, key counts or batch dims do not fit or the mask does not
    /// broadcast; `DeviceMismatch`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{AttentionOptions, DType, Tensor};
    /// let q = Tensor::from_vec(vec![1f32, 0., 0., 1.], [2, 2])?;
    /// let v = Tensor::from_vec(vec![10f32, 20.], [2, 1])?;
    /// let causal = q.scaled_dot_product_attention(&q, &v, AttentionOptions::causal())?;
    /// let y = causal.to_vec::<f32>()?; // row 0 sees only key 0
    /// assert_eq!(y[0], 10.0);
    /// let full = q.scaled_dot_product_attention(&q, &v, AttentionOptions::default())?;
    /// assert!(full.to_vec::<f32>()?[0] > 10.0 && full.to_vec::<f32>()?[0] < 15.0);
    /// let bad = Tensor::zeros([2, 3], DType::F32)?;
    /// assert!(q.scaled_dot_product_attention(&bad, &v, AttentionOptions::default()).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn scaled_dot_product_attention(
        &self,
        key: &Tensor,
        value: &Tensor,
        opts: AttentionOptions<'_>,
    ) -> Result<Tensor> {
        self.same_device(OP, key)?;
        self.same_device(OP, value)?;
        if let Some(m) = opts.mask {
            self.same_device(OP, m)?;
        }
        for t in [key, value] {
            if t.dtype() != self.dtype() {
                return Err(Error::DTypeMismatch {
                    op: OP,
                    lhs: self.dtype(),
                    rhs: t.dtype(),
                    at: crate::Caller::here(),
                });
            }
        }
        let shape = kn::infer_attention(
            [self.dims(), key.dims(), value.dims()],
            self.dtype(),
            opts.mask.map(|m| (m.dims(), m.dtype())),
            opts.is_causal,
            opts.dropout_p,
            opts.scale,
        )?;
        let mask_grad = opts
            .mask
            .is_some_and(|m| m.requires_grad() && crate::is_grad_enabled());
        let global = [Some(self), Some(key), Some(value), opts.mask]
            .into_iter()
            .flatten()
            .any(Tensor::is_global);
        if opts.dropout_p > 0.0 || mask_grad || global {
            return self.attention_composed(key, value, &opts, &shape);
        }
        self.attention_fused(key, value, opts.mask, &shape)
    }

    /// The attention as PyTorch's math form writes it: scores, mask, softmax (a row that sees
    /// no key gives zeros), dropout, product.
    #[track_caller]
    fn attention_composed(
        &self,
        key: &Tensor,
        value: &Tensor,
        opts: &AttentionOptions<'_>,
        shape: &AttentionShape,
    ) -> Result<Tensor> {
        let g = shape.geom;
        let mut scores = self.matmul(&key.transpose(-2, -1)?)?.mul_scalar(g.scale)?;
        if g.causal {
            let above = Tensor::full([g.l, g.s], f64::NEG_INFINITY, self.dtype())?
                .triu(1)?
                .to_device(self.device())?;
            scores = scores.add(&above)?;
        }
        if let Some(m) = opts.mask {
            scores = match m.dtype() {
                DType::Bool => scores.masked_fill(&m.logical_not()?, f64::NEG_INFINITY)?,
                _ => scores.add(m)?,
            };
        }
        let none = scores.amax(&[-1], true)?.eq_scalar(f64::NEG_INFINITY)?;
        let p = scores.softmax(-1)?.masked_fill(&none, 0.0)?;
        let p = p.dropout(opts.dropout_p, true)?;
        p.matmul(value)
    }

    /// The attention as one instruction, its gradient as another.
    #[track_caller]
    fn attention_fused(
        &self,
        key: &Tensor,
        value: &Tensor,
        mask: Option<&Tensor>,
        shape: &AttentionShape,
    ) -> Result<Tensor> {
        let g = shape.geom;
        let (dev, dt) = (self.device(), self.dtype());
        let batch = &shape.batch.0;
        let dense = |t: &Tensor, rows: usize, w: usize| -> Result<Tensor> {
            let mut dims = batch.to_vec();
            dims.extend([rows, w]);
            let _g = crate::no_grad();
            t.expand(Shape::from(dims))?.contiguous()
        };
        let (q, k, v) = (
            dense(self, g.l, g.e)?,
            dense(key, g.s, g.e)?,
            dense(value, g.s, g.ev)?,
        );
        let mask = match mask {
            Some(m) => Some(additive_mask(m, dt, batch, g.l, g.s)?),
            None => None,
        };
        let lay = mask.as_ref().map(|(_, lay)| lay.clone());
        let out = self.empty_like_shape(shape.out.clone(), dt)?;
        let lse_dt = if dt == DType::F64 { dt } else { DType::F32 };
        let lse = self.empty_like_shape(Shape::from([g.batch, g.l]), lse_dt)?;
        let at = |t: &Tensor, rows: usize, w: usize| Rows::dense(t.layout().offset, rows, w);
        let lays = [
            at(&q, g.l, g.e),
            at(&k, g.s, g.e),
            at(&v, g.s, g.ev),
            at(&out, g.l, g.ev),
        ];
        let kern = kernel!(OP, dev, kn::attention(dev, dt, g, lays, lay.clone()));
        let work = g.batch * g.l * g.s * (g.e + g.ev);
        let mut ins = vec![&q, &k, &v];
        ins.extend(mask.as_ref().map(|(m, _)| m));
        Tensor::launch_with_work(kern, &ins, &[&out, &lse], Some(work))?;
        let saved = [self, key, value];
        Ok(
            out.record_saving(OP, &saved, &saved, true, move |gout, ins, out| {
                let dout = gout.contiguous()?;
                let grads = [(g.l, g.e), (g.s, g.e), (g.s, g.ev)].map(|(r, w)| {
                    let mut dims = batch_dims(&dout, 2);
                    dims.extend([r, w]);
                    dout.empty_like_shape(Shape::from(dims), dt)
                });
                let [dq, dk, dv] = grads;
                let (dq, dk, dv) = (dq?, dk?, dv?);
                let lays = [
                    at(&q, g.l, g.e),
                    at(&k, g.s, g.e),
                    at(&v, g.s, g.ev),
                    at(out, g.l, g.ev),
                    at(&dout, g.l, g.ev),
                    at(&dq, g.l, g.e),
                    at(&dk, g.s, g.e),
                    at(&dv, g.s, g.ev),
                ];
                let dev = dout.device();
                let name = "scaled_dot_product_attention_backward";
                let kern = kernel!(
                    name,
                    dev,
                    kn::attention_backward(dev, dt, g, lays, lay.clone())
                );
                let mut bins = vec![&q, &k, &v, out, &dout, &lse];
                bins.extend(mask.as_ref().map(|(m, _)| m));
                Tensor::launch_with_work(kern, &bins, &[&dq, &dk, &dv], Some(2 * work))?;
                Ok(vec![
                    Some(dq.sum_to(ins[0].shape())?),
                    Some(dk.sum_to(ins[1].shape())?),
                    Some(dv.sum_to(ins[2].shape())?),
                ])
            }),
        )
    }
}

impl Tensor {
    /// Self-attention over a packed projection: `self` is `[n, l, 3·e]`, the queries, keys and
    /// values side by side as `MultiheadAttention`'s input projection gives them, split into
    /// `heads` heads of `e / heads`; the result is `[n, l, e]`, the heads side by side (what
    /// the output projection reads). One instruction forward and one backward that read the
    /// heads in place and write the projection's gradient whole, where the composed form
    /// copies every head out and back. `None` where the device has no kernel, the dtype is
    /// not a float, or `self` is global or not of that shape.
    #[track_caller]
    pub(crate) fn packed_self_attention(
        &self,
        heads: usize,
        causal: bool,
    ) -> Result<Option<Tensor>> {
        let (dt, dev) = (self.dtype(), self.device());
        let &[n, l, e3] = self.dims() else {
            return Ok(None);
        };
        let e = e3 / 3;
        if self.is_global() || !dt.is_float() || heads == 0 || e3 % 3 != 0 || e % heads != 0 {
            return Ok(None);
        }
        let d = e / heads;
        let x = {
            let _g = crate::no_grad();
            self.contiguous()?
        };
        let g = Attention {
            batch: n * heads,
            l,
            s: l,
            e: d,
            ev: d,
            scale: 1.0 / (d as f64).sqrt(),
            causal,
        };
        // Head `h` of batch element `b`: columns `h·d..` of the part, rows `3·e` apart.
        let part = move |t: &Tensor, i: usize| Rows {
            offset: t.layout().offset + i * e,
            heads,
            sn: l * e3,
            sh: d,
            rs: e3,
        };
        let heads_of = move |t: &Tensor| Rows {
            offset: t.layout().offset,
            heads,
            sn: l * e,
            sh: d,
            rs: e,
        };
        let out = x.empty_like_shape(Shape::from([n, l, e]), dt)?;
        let lays = [part(&x, 0), part(&x, 1), part(&x, 2), heads_of(&out)];
        let Some(kern) = kn::attention(dev, dt, g, lays, None) else {
            return Ok(None);
        };
        let lse_dt = if dt == DType::F64 { dt } else { DType::F32 };
        let lse = x.empty_like_shape(Shape::from([g.batch, l]), lse_dt)?;
        let work = g.batch * l * l * 2 * d;
        Tensor::launch_with_work(kern, &[&x, &x, &x], &[&out, &lse], Some(work))?;
        Ok(Some(out.record_saving(
            OP,
            &[self],
            &[self],
            true,
            move |gout, _, out| {
                let dout = gout.contiguous()?;
                let dx = dout.empty_like_shape(x.shape().clone(), dt)?;
                let lays = [
                    part(&x, 0),
                    part(&x, 1),
                    part(&x, 2),
                    heads_of(out),
                    heads_of(&dout),
                    part(&dx, 0),
                    part(&dx, 1),
                    part(&dx, 2),
                ];
                let dev = dout.device();
                let name = "scaled_dot_product_attention_backward";
                let kern = kernel!(name, dev, kn::attention_backward(dev, dt, g, lays, None));
                let ins = [&x, &x, &x, out, &dout, &lse];
                Tensor::launch_with_work(kern, &ins, &[&dx], Some(2 * work))?;
                Ok(vec![Some(dx)])
            },
        )))
    }
}

/// The dims of `t` but its last `tail`.
fn batch_dims(t: &Tensor, tail: usize) -> Vec<usize> {
    t.dims()[..t.rank() - tail].to_vec()
}

/// `mask` as the additive float mask the kernel reads (a bool mask's `false` is `-inf`), with
/// where each problem's `[l, s]` block starts in it after broadcasting to `batch + [l, s]`.
#[track_caller]
fn additive_mask(
    mask: &Tensor,
    dt: DType,
    batch: &[usize],
    l: usize,
    s: usize,
) -> Result<(Tensor, MaskLayout)> {
    let _g = crate::no_grad();
    let m = match mask.dtype() {
        DType::Bool => Tensor::zeros(mask.shape().clone(), dt)?
            .to_device(mask.device())?
            .masked_fill(&mask.logical_not()?, f64::NEG_INFINITY)?,
        _ => mask.clone(),
    };
    let mut dims = batch.to_vec();
    dims.extend([l, s]);
    let view = m.expand(Shape::from(dims))?;
    let lay = view.layout();
    let n = batch.len();
    let mut offsets = Vec::with_capacity(batch.iter().product());
    let mut idx = vec![0usize; n];
    for _ in 0..batch.iter().product::<usize>() {
        let at: usize = (idx.iter().zip(&lay.strides)).map(|(i, s)| i * s).sum();
        offsets.push(lay.offset + at);
        for d in (0..n).rev() {
            idx[d] += 1;
            if idx[d] < batch[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    let layout = MaskLayout {
        offsets: offsets.into(),
        rs: lay.strides[n],
        cs: lay.strides[n + 1],
    };
    Ok((view, layout))
}
