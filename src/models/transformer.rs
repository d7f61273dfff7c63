//! A character-level transformer language model: token embedding plus learned positions,
//! pre-norm causal blocks ([`TransformerEncoderLayer`] with `norm_first`), a final layer
//! norm and a linear head to the vocabulary.

use crate::tensor::nn::{
    Activation, Embedding, LayerNorm, Linear, Module, TransformerEncoderLayer, TransformerOptions,
};
use crate::{DType, Result, Tensor};

/// The sizes of a [`CharTransformer`].
///
/// # Examples
///
/// ```
/// let c = eddy::models::TransformerConfig::default();
/// assert_eq!((c.vocab, c.d_model, c.heads, c.layers, c.ffn, c.seq), (256, 128, 4, 2, 512, 64));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransformerConfig {
    /// Tokens (bytes: 256).
    pub vocab: usize,
    /// Model width.
    pub d_model: usize,
    /// Attention heads.
    pub heads: usize,
    /// Blocks.
    pub layers: usize,
    /// Feed-forward width.
    pub ffn: usize,
    /// The longest sequence (the learned positions).
    pub seq: usize,
}

impl Default for TransformerConfig {
    /// The benchmark's model: 2 blocks of width 128, 4 heads, feed-forward 512, sequence 64,
    /// bytes as tokens.
    fn default() -> Self {
        TransformerConfig {
            vocab: 256,
            d_model: 128,
            heads: 4,
            layers: 2,
            ffn: 512,
            seq: 64,
        }
    }
}

/// A decoder-only (GPT-style) transformer over token ids `[batch, len]`, giving logits
/// `[batch · len, vocab]` (rows in token order, ready for `cross_entropy` against the next
/// tokens flattened). Parameter names as the same model written in PyTorch: `tok_emb.weight`,
/// `pos_emb`, `layers.{i}.…` (PyTorch's `TransformerEncoderLayer` names), `norm.*`, `head.*`.
///
/// # Examples
///
/// ```
/// use eddy::models::{CharTransformer, TransformerConfig};
/// use eddy::tensor::nn::Module;
/// use eddy::{DType, Tensor};
/// let cfg = TransformerConfig { vocab: 16, d_model: 8, heads: 2, layers: 1, ffn: 16, seq: 6 };
/// let m = CharTransformer::new(cfg)?;
/// let ids = Tensor::from_vec(vec![1i64, 2, 3, 4, 5, 6, 7, 8], [2, 4])?;
/// assert_eq!(m.forward(&ids)?.dims(), &[8, 16]);
/// assert_eq!(m.named_parameters()[1].0, "pos_emb");
/// # Ok::<(), eddy::Error>(())
/// ```
pub struct CharTransformer {
    /// The sizes.
    pub config: TransformerConfig,
    /// `[vocab, d]`.
    pub tok_emb: Embedding,
    /// `[seq, d]`, drawn from N(0, 0.02²).
    pub pos_emb: Tensor,
    /// The blocks.
    pub layers: Vec<TransformerEncoderLayer>,
    /// The final norm.
    pub norm: LayerNorm,
    /// `[vocab, d]`.
    pub head: Linear,
}

impl CharTransformer {
    /// A fresh model (PyTorch's initialisation of each module), without dropout.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` when `d_model` is not a multiple of `heads`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::models::{CharTransformer, TransformerConfig};
    /// let bad = TransformerConfig { heads: 3, ..Default::default() };
    /// assert!(CharTransformer::new(bad).is_err());
    /// ```
    pub fn new(config: TransformerConfig) -> Result<CharTransformer> {
        let d = config.d_model;
        let opts = TransformerOptions {
            dim_feedforward: config.ffn,
            dropout: 0.0,
            activation: Activation::Gelu,
            batch_first: true,
            norm_first: true,
            ..Default::default()
        };
        let layers = (0..config.layers)
            .map(|_| TransformerEncoderLayer::new(d, config.heads, opts))
            .collect::<Result<Vec<_>>>()?;
        Ok(CharTransformer {
            config,
            tok_emb: Embedding::new(config.vocab, d, DType::F32)?,
            pos_emb: Tensor::randn([config.seq, d], 0.0, 0.02, DType::F32)?.requires_grad_(true)?,
            layers,
            norm: LayerNorm::new(&[d], 1e-5, true, DType::F32)?,
            head: Linear::new(d, config.vocab, true, DType::F32)?,
        })
    }
}

impl Module for CharTransformer {
    /// Logits `[batch · len, vocab]` of ids `[batch, len]` (`len` at most `seq`).
    fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        let len = ids.dims().last().copied().unwrap_or(0);
        if ids.rank() != 2 || len > self.config.seq {
            return Err(crate::Error::invalid(
                "CharTransformer",
                format!(
                    "expects ids [batch, len] with len <= {}, got {:?}",
                    self.config.seq,
                    ids.dims()
                ),
            ));
        }
        let mut x = self
            .tok_emb
            .forward(ids)?
            .add(&self.pos_emb.narrow(0, 0, len)?)?;
        for layer in &self.layers {
            x = layer.forward_with(&x, None, None, true)?;
        }
        let y = self.head.forward(&self.norm.forward(&x)?)?;
        y.reshape([ids.numel(), self.config.vocab])
    }
    fn parameters(&self) -> Vec<Tensor> {
        self.named_parameters()
            .into_iter()
            .map(|(_, t)| t)
            .collect()
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut v = vec![
            ("tok_emb.weight".to_string(), self.tok_emb.weight.clone()),
            ("pos_emb".to_string(), self.pos_emb.clone()),
        ];
        for (i, layer) in self.layers.iter().enumerate() {
            let p = layer.named_parameters().into_iter();
            v.extend(p.map(|(n, t)| (format!("layers.{i}.{n}"), t)));
        }
        let norm = self.norm.named_parameters().into_iter();
        v.extend(norm.map(|(n, t)| (format!("norm.{n}"), t)));
        let head = self.head.named_parameters().into_iter();
        v.extend(head.map(|(n, t)| (format!("head.{n}"), t)));
        v
    }
    fn set_training(&self, training: bool) {
        self.layers.iter().for_each(|l| l.set_training(training));
    }
}
