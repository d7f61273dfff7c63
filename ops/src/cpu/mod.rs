//! CPU kernels, one file per family. Each constructor takes the layouts and dtypes the op
//! definition inferred and returns a [`Kernel`](eddy_vm::instruction::Kernel) for an `OpCall`.

pub mod attention;
pub mod collective;
pub mod conv;
pub mod conv_blocked;
pub mod copy;
pub mod elementwise;
pub mod fastmath;
pub(crate) mod fused;
pub mod gemv;
pub mod index;
pub mod matmul;
pub mod nn;
pub mod norm;
pub mod optim;
pub mod reduce;
pub mod sort;
pub mod stream_store;
