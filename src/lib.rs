//! Eddy: an eager virtual machine for tensors.
//!
//! This facade re-exports the workspace's crates: [`vm`] (the instruction engine), [`ops`]
//! (op definitions and kernels) and [`tensor`] (the user API), plus the pieces the `eddy` CLI
//! is made of: the [`data`] loader, the [`models`] the benchmarks train, and the [`bench`]
//! harness.
//!
//! # Examples
//!
//! ```
//! use eddy::{Tensor, DType};
//! let y = Tensor::ones([2, 2], DType::F32)?.add_scalar(1.0)?;
//! assert_eq!(y.sum_all()?.item::<f32>()?, 8.0);
//! # Ok::<(), eddy::Error>(())
//! ```

pub mod bench;
pub mod data;
pub mod models;
pub mod plot;
pub mod repl;
pub mod train;

pub use eddy_ops as ops;
pub use eddy_tensor as tensor;
pub use eddy_tensor::{no_grad, DType, Device, Error, Result, Shape, Tensor};
pub use eddy_vm as vm;
pub use eddy_vm::{Vm, VmBuilder};

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
