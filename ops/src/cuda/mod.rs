//! CUDA kernels (feature `cuda`): NVRTC-compiled from the files of `kernels/` (embedded in
//! the crate), once per device, and float products through cuBLAS. Every dtype the CPU
//! kernels take, computed as they compute it (f16 and bf16 in f32, integers in i64 wrapping).
//!
//! Each constructor returns `None` for what the device does not cover (a layout of more than
//! 8 dims, say), which the tensor layer reports as `Unsupported` naming the op and the device;
//! nothing falls back to the host behind the caller's back.
//!
//! A kernel runs on the device's compute stream: `compute` binds the device's context, takes
//! the operands' device addresses from their blobs and launches; the engine counts it done
//! once launched. With `EDDY_LAUNCH_BLOCKING=1` every launch is followed by a stream
//! synchronisation, so a fault is reported by the op that caused it.

pub(crate) mod fused;
mod launch;
pub mod ops;
mod unit;

pub use launch::{
    CudaKernel, DevLay, Launch, SOURCE, arch_of, compile, compile_source, launch_blocking,
    module_for, prelude, with_launch, with_launch_as,
};
pub use unit::unit_merge;
