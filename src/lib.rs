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
pub mod malloc;
pub mod models;
pub mod plot;
pub mod repl;
pub mod train;

pub use eddy_ops as ops;
pub use eddy_tensor as tensor;
pub use eddy_tensor::{DType, Device, Error, Result, Shape, Tensor, no_grad};
pub use eddy_vm as vm;
pub use eddy_vm::{Vm, VmBuilder};
pub use malloc::Malloc;

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The book's Rust snippets, compiled and run as doctests, so the book cannot drift from the
/// code (`cargo test --doc -p eddy`).
#[cfg(doctest)]
pub mod book {
    macro_rules! chapters {
        ($($name:ident => $file:literal),* $(,)?) => {
            $(
                #[doc = include_str!(concat!("../book/src/", $file))]
                pub struct $name;
            )*
        };
    }
    chapters! {
        Introduction => "introduction.md",
        GettingStarted => "getting-started.md",
        Tensors => "tensors.md",
        Autograd => "autograd.md",
        AddingAnOp => "adding-an-op.md",
        Architecture => "architecture.md",
        Lifecycle => "lifecycle.md",
        Memory => "memory.md",
        Errors => "errors.md",
        Switches => "switches.md",
        Testing => "testing.md",
        Benchmarks => "benchmarks.md",
    }
}
