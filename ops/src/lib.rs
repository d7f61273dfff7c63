//! Eddy's ops: element types, shapes and layouts, the typed [`Error`] every op call returns,
//! and the CPU kernels the tensor API enqueues as `OpCall` instructions.
//!
//! Kernels see blobs, layouts and dtypes, never a tensor or the scheduler. Shape and dtype
//! inference helpers ([`broadcast_shapes`], [`DType::promote`], [`norm_dim`]) run on the
//! caller's thread before anything is enqueued.
//!
//! # Examples
//!
//! ```
//! use eddy_ops::{cpu::elementwise::{binary, BinaryOp, Lay}, DType, Layout};
//! use eddy_vm::{instruction::OpCall, StreamId, Vm};
//! let vm = Vm::builder().build().unwrap();
//! let (a, b, c) = (vm.new_blob(8), vm.new_blob(8), vm.new_blob(8));
//! for (blob, v) in [(&a, 1.0f32), (&b, 2.0)] {
//!     vm.write_blob(blob, move |m| m.chunks_mut(4).for_each(|c| c.copy_from_slice(&v.to_ne_bytes()))).unwrap();
//! }
//! let l = Layout::contiguous([2]);
//! let k = binary(BinaryOp::Add, DType::F32, Lay::of(l.clone()), Lay::of(l));
//! vm.run(StreamId::CPU, OpCall::new(k, [a, b].into_iter().collect(), [c.clone()].into_iter().collect())).unwrap();
//! let out = vm.read_blob(&c, |m| f32::from_ne_bytes(m[..4].try_into().unwrap())).unwrap();
//! assert_eq!(out, 3.0);
//! ```

pub mod cpu;
mod dtype;
mod error;
pub mod kernel;
mod shape;

pub use dtype::{Bool8, DType, Elem};
pub use error::{Error, Result};
pub use half;
pub use kernel::FnKernel;
pub use shape::{Layout, Shape, broadcast_shapes, broadcasts_to, norm_dim, numel_of};
