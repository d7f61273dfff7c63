//! Eddy: an eager virtual machine for tensors.
//!
//! This facade re-exports the workspace's crates: [`vm`] (the instruction engine), [`ops`]
//! (the op layer and its kernels) and [`tensor`] (the user API). With the default feature
//! `cli` it also holds the pieces the `eddy` command line is made of: the `data` loader, the
//! `models` the benchmarks train, the `bench` harness, the `repl`, `train` and `plot`. A crate
//! that uses Eddy as a library depends on it with `default-features = false` and compiles none
//! of the command line's dependencies.
//!
//! # Examples
//!
//! ```
//! use eddy::{Tensor, DType};
//! let y = Tensor::ones([2, 2], DType::F32)?.add_scalar(1.0)?;
//! assert_eq!(y.sum_all()?.item::<f32>()?, 8.0);
//! # Ok::<(), eddy::Error>(())
//! ```

#[cfg(feature = "cli")]
pub mod bench;
#[cfg(feature = "cli")]
pub mod data;
#[cfg(feature = "cli")]
pub mod malloc;
#[cfg(feature = "cli")]
pub mod models;
#[cfg(feature = "cli")]
pub mod plot;
#[cfg(feature = "cli")]
pub mod repl;
#[cfg(feature = "cli")]
pub mod train;
#[cfg(feature = "cli")]
pub mod train_text;

pub use eddy_ops as ops;
pub use eddy_tensor as tensor;
pub use eddy_tensor::{DType, Device, Error, Result, Scalar, Shape, Tensor, no_grad};
pub use eddy_vm as vm;
pub use eddy_vm::{Vm, VmBuilder};
#[cfg(feature = "cli")]
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
        Global => "global.md",
        AddingAnOp => "adding-an-op.md",
        Architecture => "architecture.md",
        Lifecycle => "lifecycle.md",
        Memory => "memory.md",
        Errors => "errors.md",
        Graphs => "graphs.md",
        Switches => "switches.md",
        Testing => "testing.md",
        Reliability => "reliability.md",
        Benchmarks => "benchmarks.md",
    }
}
