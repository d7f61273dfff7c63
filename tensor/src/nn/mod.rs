//! A small `nn` module: the [`Module`] trait, [`Linear`], [`Embedding`], [`LayerNorm`],
//! [`Dropout`], activations ([`Relu`], [`Func`]), [`Sequential`], init schemes, [`save`]/[`load`] of
//! named parameters, and gradient clipping ([`clip_grad_norm`], [`clip_grad_value`]).
//! Parameters are leaf tensors that require grad.

mod clip;
mod layers;
mod module;
mod state;
pub(crate) use clip::check_params;
pub use clip::{clip_grad_norm, clip_grad_value};
pub use layers::{Dropout, Embedding, Func, LayerNorm, Relu, Sequential};
pub use module::{Init, Linear, Module};
pub use state::{load, save};
