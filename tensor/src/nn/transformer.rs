//! Attention modules with PyTorch's parameter names and `state_dict` layout:
//! [`MultiheadAttention`], [`TransformerEncoderLayer`] and [`TransformerDecoderLayer`].

use super::{Dropout, Init, LayerNorm, Linear, Module};
use crate::{AttentionOptions, DType, Error, Result, Tensor};
use std::sync::atomic::{AtomicBool, Ordering};

/// The masks and flags of one [`MultiheadAttention::attend`] call, PyTorch's keyword
/// arguments. Masks follow PyTorch's `nn.MultiheadAttention`: a bool `attn_mask` or
/// `key_padding_mask` is `true` where attention is *not* allowed (the opposite of
/// [`AttentionOptions::mask`]); a float one is added to the scores.
///
/// # Examples
///
/// ```
/// use eddy_tensor::nn::MhaOptions;
/// let o = MhaOptions { is_causal: true, ..Default::default() };
/// assert!(!o.need_weights && o.attn_mask.is_none());
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct MhaOptions<'a> {
    /// `[n, s]`: the keys of each batch element to ignore.
    pub key_padding_mask: Option<&'a Tensor>,
    /// `[l, s]` or `[n · heads, l, s]`.
    pub attn_mask: Option<&'a Tensor>,
    /// Return the attention weights too (this computes the `[l, s]` scores whole).
    pub need_weights: bool,
    /// Average the returned weights over the heads (PyTorch's default) rather than keep them.
    pub average_attn_weights: bool,
    /// Causal attention; with an `attn_mask` it is only a hint, as in PyTorch.
    pub is_causal: bool,
}

/// PyTorch's `nn.MultiheadAttention(embed_dim, num_heads, dropout, bias, batch_first=...)`
/// with equal query, key and value widths: parameters `in_proj_weight` `[3e, e]` (Xavier
/// uniform), `in_proj_bias` `[3e]` (zeros), `out_proj.weight` and `out_proj.bias` (zeros).
/// Inputs are `[l, n, e]`, or `[n, l, e]` when `batch_first` (or `[l, e]` unbatched).
///
/// # Examples
///
/// ```
/// use eddy_tensor::nn::{Module, MultiheadAttention};
/// use eddy_tensor::{DType, Tensor};
/// let mha = MultiheadAttention::new(8, 2, 0.0, true, true, DType::F32)?;
/// let x = Tensor::randn([3, 5, 8], 0.0, 1.0, DType::F32)?;
/// assert_eq!(mha.forward(&x)?.dims(), &[3, 5, 8]); // self-attention
/// let names: Vec<String> = mha.named_parameters().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]);
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
pub struct MultiheadAttention {
    /// The model width `e`.
    pub embed_dim: usize,
    /// Heads; `e` is a multiple of it.
    pub num_heads: usize,
    /// Whether inputs are `[n, l, e]`.
    pub batch_first: bool,
    /// `[3e, e]`: the query, key and value projections stacked.
    pub in_proj_weight: Tensor,
    /// `[3e]`, when the module has biases.
    pub in_proj_bias: Option<Tensor>,
    /// The output projection.
    pub out_proj: Linear,
    dropout: f64,
    training: AtomicBool,
}

impl MultiheadAttention {
    /// A fresh module, PyTorch's initialisation.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` when `embed_dim` is zero or not a multiple of `num_heads`, or
    /// `dropout` is outside `[0, 1]`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::MultiheadAttention, DType};
    /// assert!(MultiheadAttention::new(10, 3, 0.0, true, false, DType::F32).is_err());
    /// ```
    #[track_caller]
    pub fn new(
        embed_dim: usize,
        num_heads: usize,
        dropout: f64,
        bias: bool,
        batch_first: bool,
        dtype: DType,
    ) -> Result<MultiheadAttention> {
        if embed_dim == 0 || num_heads == 0 || !embed_dim.is_multiple_of(num_heads) {
            return Err(Error::invalid(
                "MultiheadAttention",
                format!(
                    "embed_dim {embed_dim} must be a positive multiple of num_heads {num_heads}"
                ),
            ));
        }
        crate::nn_ops::check_probability("MultiheadAttention", dropout)?;
        let e = embed_dim;
        let w = Init::XavierUniform.tensor(&[3 * e, e], e, 3 * e, dtype)?;
        let mut out_proj = Linear::new(e, e, bias, dtype)?;
        if bias {
            out_proj.bias = Some(Tensor::zeros([e], dtype)?.requires_grad_(true)?);
        }
        Ok(MultiheadAttention {
            embed_dim,
            num_heads,
            batch_first,
            in_proj_weight: w.requires_grad_(true)?,
            in_proj_bias: bias
                .then(|| Tensor::zeros([3 * e], dtype)?.requires_grad_(true))
                .transpose()?,
            out_proj,
            dropout,
            training: AtomicBool::new(true),
        })
    }

    /// Whether dropout is active.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{nn::{Module, MultiheadAttention}, DType};
    /// let m = MultiheadAttention::new(4, 1, 0.1, true, true, DType::F32)?;
    /// m.set_training(false);
    /// assert!(!m.is_training());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn is_training(&self) -> bool {
        self.training.load(Ordering::Relaxed)
    }

    /// Attention of `query` over `key` and `value`, PyTorch's `forward(query, key, value,
    /// ...)`: the output, and the attention weights when `opts.need_weights` (`[n, l, s]`
    /// averaged over heads, else `[n, heads, l, s]`).
    ///
    /// # Errors
    ///
    /// `ShapeMismatch` for inputs whose last dim is not `embed_dim` or whose batch or
    /// sequence dims disagree; the errors of
    /// [`scaled_dot_product_attention`](Tensor::scaled_dot_product_attention).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::nn::{MhaOptions, MultiheadAttention};
    /// use eddy_tensor::{DType, Tensor};
    /// let mha = MultiheadAttention::new(8, 2, 0.0, true, true, DType::F32)?;
    /// let (q, kv) = (Tensor::randn([2, 3, 8], 0.0, 1.0, DType::F32)?, Tensor::randn([2, 5, 8], 0.0, 1.0, DType::F32)?);
    /// let opts = MhaOptions { need_weights: true, average_attn_weights: true, ..Default::default() };
    /// let (y, w) = mha.attend(&q, &kv, &kv, opts)?;
    /// assert_eq!((y.dims(), w.unwrap().dims()), (&[2, 3, 8][..], &[2, 3, 5][..]));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn attend(
        &self,
        query: &Tensor,
        key: &Tensor,
        value: &Tensor,
        opts: MhaOptions<'_>,
    ) -> Result<(Tensor, Option<Tensor>)> {
        let op = "MultiheadAttention";
        let e = self.embed_dim;
        for t in [query, key, value] {
            if !(2..=3).contains(&t.rank()) || t.dims()[t.rank() - 1] != e {
                return Err(Error::ShapeMismatch {
                    op,
                    lhs: t.dims().to_vec(),
                    rhs: vec![e],
                    at: crate::Caller::here(),
                });
            }
        }
        let unbatched = query.rank() == 2;
        // To [n, l, e].
        let lay = |t: &Tensor| -> Result<Tensor> {
            match (unbatched, self.batch_first) {
                (true, _) => t.unsqueeze(0),
                (false, true) => Ok(t.clone()),
                (false, false) => t.transpose(0, 1),
            }
        };
        let (q, k, v) = (lay(query)?, lay(key)?, lay(value)?);
        let (n, l, s) = (q.dims()[0], q.dims()[1], k.dims()[1]);
        if k.dims()[..2] != v.dims()[..2] || k.dims()[0] != n {
            return Err(Error::ShapeMismatch {
                op,
                lhs: key.dims().to_vec(),
                rhs: value.dims().to_vec(),
                at: crate::Caller::here(),
            });
        }
        let (h, d) = (self.num_heads, e / self.num_heads);
        let b = self.in_proj_bias.as_ref();
        let mask = self.merged_mask(&opts, n, l, s, query.dtype())?;
        let p = if self.is_training() {
            self.dropout
        } else {
            0.0
        };
        let causal = opts.is_causal && mask.is_none();
        let self_attention = same(query, key) && same(key, value);
        // Self-attention without weights, mask or dropout: one instruction over the packed
        // projection, which reads the heads in place.
        let packed = self_attention && !opts.need_weights && mask.is_none() && p == 0.0;
        let qkv = if self_attention {
            Some(q.linear(&self.in_proj_weight, b)?)
        } else {
            None
        };
        if let (true, Some(qkv)) = (packed, &qkv)
            && let Some(o) = qkv.packed_self_attention(h, causal)?
        {
            return self.finish(o, None, unbatched);
        }
        let part = |t: &Tensor, i: usize| -> Result<Tensor> {
            let w = self.in_proj_weight.narrow(0, i * e, e)?;
            let bias = b.map(|b| b.narrow(0, i * e, e)).transpose()?;
            t.linear(&w, bias.as_ref())
        };
        let (pq, pk, pv) = if let Some(qkv) = qkv {
            // Self-attention: one product for the three projections.
            let c = qkv.chunk(3, -1)?;
            (c[0].clone(), c[1].clone(), c[2].clone())
        } else {
            (part(&q, 0)?, part(&k, 1)?, part(&v, 2)?)
        };
        let heads = |t: &Tensor, len: usize| t.reshape([n, len, h, d])?.transpose(1, 2);
        let (pq, pk, pv) = (heads(&pq, l)?, heads(&pk, s)?, heads(&pv, s)?);
        let (o, weights) = if opts.need_weights {
            let mut scores = pq
                .matmul(&pk.transpose(-2, -1)?)?
                .mul_scalar(1.0 / (d as f64).sqrt())?;
            if let Some(m) = &mask {
                scores = scores.add(m)?;
            } else if causal {
                let above = Tensor::full([l, s], f64::NEG_INFINITY, scores.dtype())?
                    .triu(1)?
                    .to_device(scores.device())?;
                scores = scores.add(&above)?;
            }
            let w = scores.softmax(-1)?;
            let o = w.dropout(p, true)?.matmul(&pv)?;
            let w = if opts.average_attn_weights {
                w.mean(&[1], false)?
            } else {
                w
            };
            (o, Some(w))
        } else {
            let mut o = AttentionOptions {
                is_causal: causal,
                dropout_p: p,
                ..Default::default()
            };
            if let Some(m) = &mask {
                o = o.mask(m);
            }
            (pq.scaled_dot_product_attention(&pk, &pv, o)?, None)
        };
        let o = o.transpose(1, 2)?.reshape([n, l, e])?;
        self.finish(o, weights, unbatched)
    }

    /// The output projection of the heads `o` (`[n, l, e]`), laid out as the input was.
    #[track_caller]
    fn finish(
        &self,
        o: Tensor,
        weights: Option<Tensor>,
        unbatched: bool,
    ) -> Result<(Tensor, Option<Tensor>)> {
        let o = self.out_proj.forward(&o)?;
        let o = match (unbatched, self.batch_first) {
            (true, _) => o.squeeze(0)?,
            (false, true) => o,
            (false, false) => o.transpose(0, 1)?,
        };
        let weights = match (weights, unbatched) {
            (Some(w), true) => Some(w.squeeze(0)?),
            (w, _) => w,
        };
        Ok((o, weights))
    }

    /// `attn_mask` and `key_padding_mask` as one additive float mask broadcastable to `[n,
    /// heads, l, s]`, or `None`.
    #[track_caller]
    fn merged_mask(
        &self,
        opts: &MhaOptions<'_>,
        n: usize,
        l: usize,
        s: usize,
        dtype: DType,
    ) -> Result<Option<Tensor>> {
        let additive = |m: &Tensor| -> Result<Tensor> {
            match m.dtype() {
                DType::Bool => Tensor::zeros(m.shape().clone(), dtype)?
                    .to_device(m.device())?
                    .masked_fill(m, f64::NEG_INFINITY),
                _ => Ok(m.clone()),
            }
        };
        let mut out: Option<Tensor> = None;
        if let Some(m) = opts.attn_mask {
            let a = additive(m)?;
            let a = match *a.dims() {
                [ml, ms] if (ml, ms) == (l, s) => a,
                [nh, ml, ms] if (nh, ml, ms) == (n * self.num_heads, l, s) => {
                    a.reshape([n, self.num_heads, l, s])?
                }
                _ => {
                    return Err(Error::ShapeMismatch {
                        op: "MultiheadAttention",
                        lhs: m.dims().to_vec(),
                        rhs: vec![n * self.num_heads, l, s],
                        at: crate::Caller::here(),
                    });
                }
            };
            out = Some(a);
        }
        if let Some(m) = opts.key_padding_mask {
            if m.dims() != [n, s] {
                return Err(Error::ShapeMismatch {
                    op: "MultiheadAttention",
                    lhs: m.dims().to_vec(),
                    rhs: vec![n, s],
                    at: crate::Caller::here(),
                });
            }
            let k = additive(m)?.reshape([n, 1, 1, s])?;
            out = Some(match out {
                Some(a) => a.add(&k)?,
                None => k,
            });
        }
        Ok(out)
    }
}

impl Module for MultiheadAttention {
    /// Self-attention of `x`, without masks.
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.attend(x, x, x, MhaOptions::default())?.0)
    }
    fn parameters(&self) -> Vec<Tensor> {
        self.named_parameters()
            .into_iter()
            .map(|(_, t)| t)
            .collect()
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut v = vec![("in_proj_weight".to_string(), self.in_proj_weight.clone())];
        v.extend((self.in_proj_bias.iter()).map(|b| ("in_proj_bias".to_string(), b.clone())));
        v.extend(prefixed("out_proj", &self.out_proj));
        v
    }
    fn set_training(&self, training: bool) {
        self.training.store(training, Ordering::Relaxed);
    }
}

/// Whether `a` and `b` are the same view of the same storage.
fn same(a: &Tensor, b: &Tensor) -> bool {
    let (la, lb) = (a.layout(), b.layout());
    a.shares_storage(b)
        && la.shape == lb.shape
        && la.strides == lb.strides
        && la.offset == lb.offset
}

/// `module`'s named parameters under `prefix.`.
fn prefixed(prefix: &str, module: &dyn Module) -> Vec<(String, Tensor)> {
    (module.named_parameters().into_iter())
        .map(|(n, t)| (format!("{prefix}.{n}"), t))
        .collect()
}

/// The activation of a transformer layer's feed-forward block.
///
/// # Examples
///
/// ```
/// use eddy_tensor::nn::Activation;
/// assert_ne!(Activation::Relu, Activation::Gelu);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// PyTorch's default.
    Relu,
    /// The exact (erf) GELU.
    Gelu,
}

impl Activation {
    fn apply(self, x: &Tensor) -> Result<Tensor> {
        match self {
            Activation::Relu => x.relu(),
            Activation::Gelu => x.gelu(),
        }
    }
}

/// The settings of a transformer layer, PyTorch's constructor arguments after `d_model` and
/// `nhead`. The default is PyTorch's: feed-forward 2048, dropout 0.1, ReLU, eps 1e-5,
/// sequence-first, post-norm, biases.
///
/// # Examples
///
/// ```
/// use eddy_tensor::nn::{Activation, TransformerOptions};
/// let o = TransformerOptions { dim_feedforward: 512, activation: Activation::Gelu, norm_first: true, ..Default::default() };
/// assert_eq!((o.dropout, o.batch_first), (0.1, false));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TransformerOptions {
    /// Width of the feed-forward block.
    pub dim_feedforward: usize,
    /// Dropout after attention, inside and after the feed-forward block.
    pub dropout: f64,
    /// The feed-forward activation.
    pub activation: Activation,
    /// The layer norms' epsilon.
    pub layer_norm_eps: f64,
    /// Inputs `[n, l, e]` rather than `[l, n, e]`.
    pub batch_first: bool,
    /// Normalise before each block (pre-norm) rather than after.
    pub norm_first: bool,
    /// Biases in the linear layers and layer norms.
    pub bias: bool,
    /// The parameters' dtype.
    pub dtype: DType,
}

impl Default for TransformerOptions {
    fn default() -> Self {
        TransformerOptions {
            dim_feedforward: 2048,
            dropout: 0.1,
            activation: Activation::Relu,
            layer_norm_eps: 1e-5,
            batch_first: false,
            norm_first: false,
            bias: true,
            dtype: DType::F32,
        }
    }
}

/// The feed-forward block and norms both layer kinds share.
struct Block {
    linear1: Linear,
    linear2: Linear,
    dropout: Dropout,
    activation: Activation,
}

impl Block {
    fn new(d: usize, o: &TransformerOptions) -> Result<Block> {
        Ok(Block {
            linear1: Linear::new(d, o.dim_feedforward, o.bias, o.dtype)?,
            linear2: Linear::new(o.dim_feedforward, d, o.bias, o.dtype)?,
            dropout: Dropout::new(o.dropout)?,
            activation: o.activation,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.activation.apply(&self.linear1.forward(x)?)?;
        let y = self.linear2.forward(&self.dropout.forward(&h)?)?;
        self.dropout.forward(&y)
    }
}

fn norm(d: usize, o: &TransformerOptions) -> Result<LayerNorm> {
    let mut n = LayerNorm::new(&[d], o.layer_norm_eps, true, o.dtype)?;
    if !o.bias {
        n.bias = None;
    }
    Ok(n)
}

/// PyTorch's `nn.TransformerEncoderLayer`: self-attention then a feed-forward block, each
/// with a residual and a layer norm (after, or before when `norm_first`). Parameter names as
/// PyTorch's `state_dict`: `self_attn.*`, `linear1.*`, `linear2.*`, `norm1.*`, `norm2.*`.
///
/// # Examples
///
/// ```
/// use eddy_tensor::nn::{Module, TransformerEncoderLayer, TransformerOptions};
/// use eddy_tensor::{DType, Tensor};
/// let o = TransformerOptions { dim_feedforward: 16, batch_first: true, ..Default::default() };
/// let layer = TransformerEncoderLayer::new(8, 2, o)?;
/// let x = Tensor::randn([2, 5, 8], 0.0, 1.0, DType::F32)?;
/// assert_eq!(layer.forward_with(&x, None, None, true)?.dims(), &[2, 5, 8]); // causal
/// assert_eq!(layer.named_parameters().len(), 12);
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
pub struct TransformerEncoderLayer {
    /// The self-attention.
    pub self_attn: MultiheadAttention,
    block: Block,
    /// The norm of the attention block.
    pub norm1: LayerNorm,
    /// The norm of the feed-forward block.
    pub norm2: LayerNorm,
    norm_first: bool,
}

impl TransformerEncoderLayer {
    /// A fresh layer of width `d_model` with `nhead` heads.
    ///
    /// # Errors
    ///
    /// As [`MultiheadAttention::new`]; `InvalidArgument` for a bad dropout or eps.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::nn::{TransformerEncoderLayer, TransformerOptions};
    /// assert!(TransformerEncoderLayer::new(6, 4, TransformerOptions::default()).is_err());
    /// ```
    #[track_caller]
    pub fn new(d_model: usize, nhead: usize, o: TransformerOptions) -> Result<Self> {
        Ok(TransformerEncoderLayer {
            self_attn: MultiheadAttention::new(
                d_model,
                nhead,
                o.dropout,
                o.bias,
                o.batch_first,
                o.dtype,
            )?,
            block: Block::new(d_model, &o)?,
            norm1: norm(d_model, &o)?,
            norm2: norm(d_model, &o)?,
            norm_first: o.norm_first,
        })
    }

    /// PyTorch's `forward(src, src_mask, src_key_padding_mask, is_causal)`.
    ///
    /// # Errors
    ///
    /// As [`MultiheadAttention::attend`].
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::nn::{TransformerEncoderLayer, TransformerOptions};
    /// use eddy_tensor::{DType, Tensor};
    /// let layer = TransformerEncoderLayer::new(4, 1, TransformerOptions { dim_feedforward: 8, ..Default::default() })?;
    /// let pad = Tensor::from_vec(vec![false, false, true], [1, 3])?; // ignore the last key
    /// let y = layer.forward_with(&Tensor::randn([3, 1, 4], 0.0, 1.0, DType::F32)?, None, Some(&pad), false)?;
    /// assert_eq!(y.dims(), &[3, 1, 4]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn forward_with(
        &self,
        src: &Tensor,
        src_mask: Option<&Tensor>,
        src_key_padding_mask: Option<&Tensor>,
        is_causal: bool,
    ) -> Result<Tensor> {
        let opts = MhaOptions {
            attn_mask: src_mask,
            key_padding_mask: src_key_padding_mask,
            is_causal,
            ..Default::default()
        };
        let sa = |x: &Tensor| -> Result<Tensor> {
            let y = self.self_attn.attend(x, x, x, opts)?.0;
            self.block.dropout.forward(&y)
        };
        if self.norm_first {
            let x = src.add(&sa(&self.norm1.forward(src)?)?)?;
            x.add(&self.block.forward(&self.norm2.forward(&x)?)?)
        } else {
            let x = self.norm1.forward(&src.add(&sa(src)?)?)?;
            self.norm2.forward(&x.add(&self.block.forward(&x)?)?)
        }
    }
}

impl Module for TransformerEncoderLayer {
    /// [`forward_with`](TransformerEncoderLayer::forward_with) without masks.
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.forward_with(x, None, None, false)
    }
    fn parameters(&self) -> Vec<Tensor> {
        self.named_parameters()
            .into_iter()
            .map(|(_, t)| t)
            .collect()
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut v = prefixed("self_attn", &self.self_attn);
        v.extend(prefixed("linear1", &self.block.linear1));
        v.extend(prefixed("linear2", &self.block.linear2));
        v.extend(prefixed("norm1", &self.norm1));
        v.extend(prefixed("norm2", &self.norm2));
        v
    }
    fn set_training(&self, training: bool) {
        self.self_attn.set_training(training);
        self.block.dropout.set_training(training);
    }
}

/// PyTorch's `nn.TransformerDecoderLayer`: self-attention over the target, attention over the
/// encoder's output (`memory`), then a feed-forward block, each with a residual and a layer
/// norm. Parameter names as PyTorch's: `self_attn.*`, `multihead_attn.*`, `linear1.*`,
/// `linear2.*`, `norm1.*` to `norm3.*`.
///
/// # Examples
///
/// ```
/// use eddy_tensor::nn::{Module, TransformerDecoderLayer, TransformerOptions};
/// use eddy_tensor::{DType, Tensor};
/// let o = TransformerOptions { dim_feedforward: 16, batch_first: true, norm_first: true, ..Default::default() };
/// let layer = TransformerDecoderLayer::new(8, 2, o)?;
/// let (tgt, memory) = (Tensor::randn([2, 5, 8], 0.0, 1.0, DType::F32)?, Tensor::randn([2, 7, 8], 0.0, 1.0, DType::F32)?);
/// assert_eq!(layer.forward_with(&tgt, &memory, true)?.dims(), &[2, 5, 8]);
/// assert_eq!(layer.named_parameters().len(), 18);
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
pub struct TransformerDecoderLayer {
    /// The self-attention over the target.
    pub self_attn: MultiheadAttention,
    /// The attention over the memory.
    pub multihead_attn: MultiheadAttention,
    block: Block,
    /// The norms of the three blocks.
    pub norm1: LayerNorm,
    /// See `norm1`.
    pub norm2: LayerNorm,
    /// See `norm1`.
    pub norm3: LayerNorm,
    norm_first: bool,
}

impl TransformerDecoderLayer {
    /// A fresh layer of width `d_model` with `nhead` heads.
    ///
    /// # Errors
    ///
    /// As [`TransformerEncoderLayer::new`].
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::nn::{TransformerDecoderLayer, TransformerOptions};
    /// assert!(TransformerDecoderLayer::new(8, 2, TransformerOptions::default()).is_ok());
    /// ```
    #[track_caller]
    pub fn new(d_model: usize, nhead: usize, o: TransformerOptions) -> Result<Self> {
        let attn =
            || MultiheadAttention::new(d_model, nhead, o.dropout, o.bias, o.batch_first, o.dtype);
        Ok(TransformerDecoderLayer {
            self_attn: attn()?,
            multihead_attn: attn()?,
            block: Block::new(d_model, &o)?,
            norm1: norm(d_model, &o)?,
            norm2: norm(d_model, &o)?,
            norm3: norm(d_model, &o)?,
            norm_first: o.norm_first,
        })
    }

    /// PyTorch's `forward(tgt, memory, tgt_is_causal=...)` without masks.
    ///
    /// # Errors
    ///
    /// As [`MultiheadAttention::attend`].
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::nn::{TransformerDecoderLayer, TransformerOptions};
    /// use eddy_tensor::{DType, Tensor};
    /// let layer = TransformerDecoderLayer::new(4, 2, TransformerOptions { dim_feedforward: 8, ..Default::default() })?;
    /// let y = layer.forward_with(&Tensor::randn([3, 1, 4], 0.0, 1.0, DType::F32)?, &Tensor::randn([6, 1, 4], 0.0, 1.0, DType::F32)?, false)?;
    /// assert_eq!(y.dims(), &[3, 1, 4]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn forward_with(
        &self,
        tgt: &Tensor,
        memory: &Tensor,
        tgt_is_causal: bool,
    ) -> Result<Tensor> {
        let causal = MhaOptions {
            is_causal: tgt_is_causal,
            ..Default::default()
        };
        let drop = &self.block.dropout;
        let sa = |x: &Tensor| drop.forward(&self.self_attn.attend(x, x, x, causal)?.0);
        let ca = |x: &Tensor| {
            let y = self
                .multihead_attn
                .attend(x, memory, memory, MhaOptions::default())?;
            drop.forward(&y.0)
        };
        if self.norm_first {
            let x = tgt.add(&sa(&self.norm1.forward(tgt)?)?)?;
            let x = x.add(&ca(&self.norm2.forward(&x)?)?)?;
            x.add(&self.block.forward(&self.norm3.forward(&x)?)?)
        } else {
            let x = self.norm1.forward(&tgt.add(&sa(tgt)?)?)?;
            let x = self.norm2.forward(&x.add(&ca(&x)?)?)?;
            self.norm3.forward(&x.add(&self.block.forward(&x)?)?)
        }
    }
}

impl Module for TransformerDecoderLayer {
    /// The layer over `x` as both target and memory.
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.forward_with(x, x, false)
    }
    fn parameters(&self) -> Vec<Tensor> {
        self.named_parameters()
            .into_iter()
            .map(|(_, t)| t)
            .collect()
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut v = prefixed("self_attn", &self.self_attn);
        v.extend(prefixed("multihead_attn", &self.multihead_attn));
        v.extend(prefixed("linear1", &self.block.linear1));
        v.extend(prefixed("linear2", &self.block.linear2));
        v.extend(prefixed("norm1", &self.norm1));
        v.extend(prefixed("norm2", &self.norm2));
        v.extend(prefixed("norm3", &self.norm3));
        v
    }
    fn set_training(&self, training: bool) {
        self.self_attn.set_training(training);
        self.multihead_attn.set_training(training);
        self.block.dropout.set_training(training);
    }
}
