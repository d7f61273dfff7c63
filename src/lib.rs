//! Eddy: an eager virtual machine for tensors.
//!
//! This facade re-exports the workspace's crates: [`vm`] (the instruction engine), [`ops`]
//! (op definitions and kernels) and [`tensor`] (the user API).

pub use eddy_ops as ops;
pub use eddy_tensor as tensor;
pub use eddy_vm as vm;
pub use eddy_vm::{Error, Result, Vm, VmBuilder};

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
