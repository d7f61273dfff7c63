//! Memory: a caching allocator per device over a backend that gets memory from the system.
//!
//! - [`backend`]: where chunks come from ([`CpuBackend`]: the heap, with an optional capacity so
//!   out-of-memory paths are testable without a GPU).
//! - [`caching`]: OneFlow's BinAllocator shape: pieces in size bins from 512 B, best fit, split
//!   and merge of neighbours, growth in 2 MiB / 20 MiB / rounded chunks, `shrink`.
//! - [`host`]: how much host memory the process may use ([`host_limit`], [`host_available`]),
//!   which the CPU backend checks before the global allocator sees a request.
//! - [`device`]: [`DeviceAllocator`], the thread-safe front the engine uses, with a caching and a
//!   pass-through mode (for valgrind), statistics, and RAII [`Allocation`]s.

pub mod backend;
pub mod caching;
pub mod device;
pub mod host;

pub use backend::{Backend, CpuBackend};
pub use caching::CachingAllocator;
pub use device::{AllocError, AllocMode, AllocStats, Allocation, DeviceAllocator, INLINE_BYTES};
pub use host::{CHECKED_BYTES, host_available, host_limit};
