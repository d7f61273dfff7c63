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
//! let w = Tensor::zeros([4, 1], DType::F32)?.requires_grad_(true)?;
//! let loss = x.matmul(&w)?.sigmoid()?.mean_all()?;
//! loss.backward()?;
//! assert_eq!(w.grad().unwrap().dims(), &[4, 1]);
//! # Ok::<(), eddy_tensor::Error>(())
//! ```
//!
//! # Operators
//!
//! `+ - * /` and unary `-` work on tensors and scalars. An op can fail (shapes that do not
//! broadcast, dtypes, devices), so every operator returns `Result<Tensor>`, and a
//! `Result<Tensor>` is itself an operand on the left, or on the right of a tensor: an
//! expression of tensors needs one `?` at its end.
//!
//! | operands | same as |
//! |---|---|
//! | tensor `+ - * /` tensor | [`add`](Tensor::add), [`sub`](Tensor::sub), [`mul`](Tensor::mul), [`div`](Tensor::div) (broadcasting, promotion) |
//! | tensor `+ - * /` scalar | [`add_scalar`](Tensor::add_scalar), [`sub_scalar`](Tensor::sub_scalar), [`mul_scalar`](Tensor::mul_scalar), [`div_scalar`](Tensor::div_scalar) |
//! | scalar `+ - *` tensor | [`add_scalar`](Tensor::add_scalar), [`rsub_scalar`](Tensor::rsub_scalar), [`mul_scalar`](Tensor::mul_scalar) |
//! | scalar `/` tensor | a 0-dim tensor of the scalar (in the tensor's float dtype, else `f32`) divided by the tensor: one rounding |
//! | `-` tensor | [`neg`](Tensor::neg) |
//!
//! A tensor operand is a `Tensor`, a `&Tensor` or a `Result<Tensor>`; a scalar is an `f64` or
//! an `i32`, one float and one integer type so that a bare literal (`2.0`, `2`) needs no
//! suffix. An error operand is returned as it is, the left one first. Rust's orphan rules leave
//! out `Result<Tensor>` beside a scalar or another `Result`, and `-Result<Tensor>`: put a `?`
//! on the inner expression there.
//!
//! ```
//! use eddy_tensor::Tensor;
//! let x = Tensor::from_vec(vec![1f32, 2.0], [1, 2])?;
//! let w = Tensor::from_vec(vec![0.5f32, -1.0, 1.0, 2.0], [2, 2])?;
//! let b = Tensor::from_vec(vec![0.25f32, 0.0], [2])?;
//! let y = (x.matmul(&w)? + &b)?;
//! let z = ((2.0 * &y)? - &y * &y)?;
//! assert_eq!(z.to_vec::<f32>()?, [2.0 * 2.75 - 2.75 * 2.75, 6.0 - 9.0]);
//! # Ok::<(), eddy_tensor::Error>(())
//! ```

/// The op layer's kernel from `$call` (an `Option`), or an early return of
/// `Error::Unsupported` naming `$op` and `$device` when the device has no kernel for it. A
/// macro, not a function: the kernel is then never wrapped in a `Result`, whose moves cost
/// the per-op path (see `eddy_ops::device`).
macro_rules! kernel {
    ($op:expr, $device:expr, $call:expr) => {
        match $call {
            Some(k) => k,
            None => return Err(eddy_ops::device::unsupported($op, $device)),
        }
    };
}

mod attention;
mod autograd;
mod conv;
mod create;
mod custom;
mod elementwise;
mod engine;
pub mod global;
pub mod graph;
mod host;
mod int_window;
mod linalg;
mod loss;
pub mod nn;
mod nn_ops;
mod norm;
mod operators;
pub mod optim;
mod pool;
mod reduce;
pub mod safetensors;
mod sort;
mod tensor;
mod view;

pub use attention::AttentionOptions;
pub use autograd::{NoGradGuard, is_grad_enabled, no_grad};
pub use conv::Pair;
pub use create::manual_seed;
pub use custom::CustomBackward;
pub use eddy_ops::{Bool8, Caller, DType, Divergence, Elem, Error, Layout, Result, Scalar, Shape};
pub use eddy_vm::Device;
pub use engine::{default_engine, with_device, with_engine};
/// The half-precision element types of `F16` and `BF16` tensors (from the `half` crate), for
/// `from_vec` and `to_vec` without a direct dependency.
pub use half::{bf16, f16};
pub use tensor::Tensor;
