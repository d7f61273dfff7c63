//! Eddy's instruction engine.
//!
//! An op call becomes [`Instruction`]s (built by an [`InstructionsBuilder`]) that the
//! [`Vm`]'s scheduler thread orders by what each reads and writes, and runs on per-device
//! [`stream`]s, asynchronously. Memory comes from a per-device caching [`alloc`]ator with an
//! out-of-memory path that waits, shrinks and retries. Errors inside instructions poison their
//! outputs and surface at the next sync. The engine knows nothing about particular ops. A
//! captured run of op calls becomes a [`plan`] (static memory, optionally actors) that runs as
//! one instruction; the engine promotes a recurring eager window to a plan by itself; a device
//! may [`merge`] a fused unit of op calls into one kernel.
//!
//! # Layers
//!
//! Each module uses only the modules of the layers below it (a folder counts as one module;
//! `tests/import_layers.rs` fails on an import circle between files or between these):
//!
//! | layer | modules |
//! |---|---|
//! | 7 | `engine` (the [`Vm`] handle: submission, waits, host access, captures, promotion, the plans' public calls) |
//! | 6 | `builder`, `scheduler` |
//! | 5 | `exec` (running an instruction, merged units), `plan`, `pool` |
//! | 4 | `shared` (the state the engine's threads share) |
//! | 3 | `captured`, `handoff`, `merge`, `pending`, `testing` |
//! | 2 | `config`, `instruction` |
//! | 1 | `blob`, `notifier`, `par`, `stats`, `stream` (CPU and CUDA streams, the CUDA memory backends) |
//! | 0 | `alloc`, `counted`, `dependence`, `error`, `ids`, `prefetch`, `sync`, `trace`, `wait` |
//!
//! Where a lower layer needs something of a higher one, it declares what it needs and the
//! higher one provides it: the builder hands its list to a `Receive` the handle implements,
//! and a plan is built and launched through a `plan::Host` the handle implements.
//!
//! # Examples
//!
//! ```
//! use eddy_vm::{Vm, StreamId, testing::{Log, Record}};
//! let vm = Vm::builder().build().unwrap();
//! let x = vm.new_blob(4);
//! let log = Log::default();
//! vm.run(StreamId::CPU, Record::new(1, vec![], vec![x.clone()], &log)).unwrap();
//! vm.run(StreamId::CPU, Record::new(2, vec![x.clone()], vec![], &log)).unwrap();
//! vm.sync().unwrap();
//! assert_eq!(*log.lock(), vec![1, 2]);
//! ```

pub mod alloc;
pub mod blob;
pub mod builder;
mod captured;
pub mod config;
mod counted;
mod cpu;
mod dependence;
pub mod engine;
pub mod error;
mod exec;
mod handoff;
mod ids;
pub mod instruction;
pub mod lane;
pub mod merge;
mod notifier;
pub mod par;
mod pending;
pub mod plan;
mod pool;
mod prefetch;
mod scheduler;
mod shared;
#[cfg(all(test, shuttle))]
mod shuttle_tests;
pub mod stats;
pub mod stream;
mod sync;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod trace;
mod wait;

pub use blob::Blob;
pub use builder::InstructionsBuilder;
pub use config::{Config, MAX_CPU_DEVICES, VmBuilder};
pub use counted::Counted;
/// The CUDA driver bindings the CUDA backend uses (`cudarc`), for code that goes below the
/// engine: probes that time the driver, or kernels of its own on a [`stream::cuda::CudaStream`].
#[cfg(feature = "cuda")]
pub use cudarc;
pub use engine::{PromotionStats, Vm};
pub use error::{Error, Result};
pub use ids::unique_id;
pub use instruction::{Instruction, InstructionPolicy};
pub use stats::VmStats;
pub use stream::{Device, StreamId, StreamPolicy};

/// Whether the fail points (feature `failpoints`) are consulted: off until a test arms them
/// with [`testing::arm_failpoints`], so a build that merely has the feature on (every `cargo
/// test` and `cargo bench` build, through the dev-dependencies) pays one relaxed load per point
/// instead of the `fail` crate's registry lookup.
#[cfg(feature = "failpoints")]
pub(crate) static FAILPOINTS_ARMED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// `fail::fail_point!`, consulted only while the fail points are armed.
macro_rules! fail_point {
    ($($t:tt)*) => {
        #[cfg(feature = "failpoints")]
        if $crate::FAILPOINTS_ARMED.load(std::sync::atomic::Ordering::Relaxed) {
            fail::fail_point!($($t)*);
        }
    };
}
pub(crate) use fail_point;
