//! Eddy's ops: element types, shapes and layouts, the typed [`Error`] every op call returns,
//! and the op layer: for each op, its inference (shapes, dtypes, devices) and the kernel for
//! its operands' device, which the tensor API enqueues as an `OpCall` instruction.
//!
//! The op-layer modules ([`elementwise`], [`reduce`], [`linalg`], [`nn`], [`index`],
//! [`sort`], [`copy`]) infer their ops' outputs and take a [`Device`] to return that device's
//! kernel, or [`Error::Unsupported`] where it has none ([`device`]). Kernels live in one module
//! per device ([`cpu`], and `cuda` with the feature of that name); they see blobs, layouts and
//! dtypes, never a tensor or the scheduler. Inference runs on the caller's thread before
//! anything is enqueued. Below them all, [`fuse`]'s data (what an elementwise kernel computes)
//! is read by both the kernels and the fusion pass. [`view`] infers the views, which need no
//! kernel. [`global`] holds the global view's rules: placements, SBPs, each
//! op's signatures beside its inference, and the cost model that chooses among them.
//!
//! # Examples
//!
//! ```
//! use eddy_ops::{elementwise::{binary, BinaryOp}, DType, Device, Lay, Layout};
//! use eddy_vm::{instruction::OpCall, StreamId, Vm};
//! let vm = Vm::builder().build().unwrap();
//! let (a, b, c) = (vm.new_blob(8), vm.new_blob(8), vm.new_blob(8));
//! for (blob, v) in [(&a, 1.0f32), (&b, 2.0)] {
//!     vm.write_blob(blob, move |m| m.chunks_mut(4).for_each(|c| c.copy_from_slice(&v.to_ne_bytes()))).unwrap();
//! }
//! let l = Layout::contiguous([2]);
//! let k = binary(Device::CPU, BinaryOp::Add, DType::F32, Lay::of(l.clone()), Lay::of(l)).unwrap();
//! vm.run(StreamId::CPU, OpCall::new(k, [a, b].into_iter().collect(), [c.clone()].into_iter().collect())).unwrap();
//! let out = vm.read_blob(&c, |m| f32::from_ne_bytes(m[..4].try_into().unwrap())).unwrap();
//! assert_eq!(out, 3.0);
//! ```

mod attention;
mod collective;
pub mod conv;
pub mod copy;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod device;
mod dtype;
pub mod elementwise;
mod error;
pub mod fuse;
pub mod global;
pub mod index;
pub mod kernel;
mod kinds;
mod lay;
pub mod linalg;
pub mod nn;
pub mod optim;
pub(crate) mod program;
pub mod random;
pub mod reduce;
mod scalar;
mod shape;
pub mod sort;
pub mod view;
mod window;

pub use device::Device;
pub use dtype::{Bool8, DType, Elem, cast};
pub use error::{Caller, Divergence, Error, Result};
pub use half;
pub use kernel::FnKernel;
pub use lay::Lay;
pub use scalar::Scalar;
pub use shape::{Layout, Shape, broadcast_shapes, broadcasts_to, norm_dim, numel_of};
