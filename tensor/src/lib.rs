//! Eddy's eager tensor API.
//!
//! A [`Tensor`] is a cheap handle; every op checks its arguments on the calling thread (shape,
//! dtype, device and index errors are returned at once, before anything is enqueued), then
//! enqueues an `OpCall` instruction on the tensor's engine and returns. Host reads
//! ([`Tensor::to_vec`], [`Tensor::item`], `Display`) wait and surface asynchronous errors.
//! Autograd records each op's backward; the backward ops are ordinary instructions too.
//!
//! # Examples
//!
//! ```
//! use eddy_tensor::{Tensor, DType};
//! let x = Tensor::randn([8, 4], 0.0, 1.0, DType::F32)?;
//! let w = Tensor::zeros([4, 1], DType::F32)?.requires_grad_(true);
//! let loss = x.matmul(&w)?.sigmoid()?.mean_all()?;
//! loss.backward()?;
//! assert_eq!(w.grad().unwrap().dims(), &[4, 1]);
//! # Ok::<(), eddy_tensor::Error>(())
//! ```

mod autograd;
mod create;
mod custom;
mod elementwise;
mod engine;
mod host;
mod linalg;
pub mod nn;
mod nn_ops;
pub mod optim;
mod reduce;
mod tensor;
mod view;

pub use autograd::{is_grad_enabled, no_grad, NoGradGuard};
pub use create::manual_seed;
pub use custom::CustomBackward;
pub use eddy_ops::{DType, Elem, Error, Layout, Result, Shape};
pub use eddy_vm::Device;
pub use engine::{default_engine, with_engine};
pub use tensor::Tensor;
