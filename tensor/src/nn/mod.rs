//! A small `nn` module: the [`Module`] trait, [`Linear`], [`Embedding`], [`LayerNorm`], the
//! convolutional layers ([`Conv2d`], [`BatchNorm2d`], [`MaxPool2d`], …),
//! [`Dropout`], activations ([`Relu`], [`Func`]), [`Sequential`], init schemes, [`save`]/[`load`] of
//! named parameters, and gradient clipping ([`clip_grad_norm`], [`clip_grad_value`]).
//! Parameters are leaf tensors that require grad.

mod clip;
mod conv;
mod layers;
mod module;
mod state;
mod transformer;
pub(crate) use clip::check_params;
pub use clip::{clip_grad_norm, clip_grad_value};
pub use conv::{
    AdaptiveAvgPool2d, AvgPool2d, BatchNorm2d, Conv1d, Conv2d, ConvOptions, Flatten, GroupNorm,
    MaxPool2d,
};
pub use layers::{Dropout, Embedding, Func, LayerNorm, Relu, Sequential};
pub use module::{Init, Linear, Module};
pub use state::{load, save};
pub use transformer::{
    Activation, MhaOptions, MultiheadAttention, TransformerDecoderLayer, TransformerEncoderLayer,
    TransformerOptions,
};
