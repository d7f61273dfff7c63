//! Engine counters.

use crate::alloc::AllocStats;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Default)]
pub(crate) struct StatCounters {
    pub inserted: AtomicU64,
    pub erased: AtomicU64,
    pub fused: AtomicU64,
    pub dispatched: AtomicU64,
    pub inlined: AtomicU64,
    pub oom_retries: AtomicU64,
    pub ooms: AtomicU64,
}

impl StatCounters {
    pub(crate) fn snapshot(&self, in_flight: u64, alloc: AllocStats) -> VmStats {
        VmStats {
            inserted: self.inserted.load(Relaxed),
            erased: self.erased.load(Relaxed),
            fused: self.fused.load(Relaxed),
            dispatched: self.dispatched.load(Relaxed),
            inlined: self.inlined.load(Relaxed),
            in_flight,
            oom_retries: self.oom_retries.load(Relaxed),
            ooms: self.ooms.load(Relaxed),
            alloc,
        }
    }
}

/// A snapshot of the engine's counters (see [`Vm::stats`](crate::Vm::stats)).
///
/// `inserted − erased` is the number of live instructions (barriers included);
/// `in_flight` counts received but not yet released ones, including those still in the pending
/// list.
///
/// # Examples
///
/// ```
/// use eddy_vm::{testing::Noop, StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// vm.run(StreamId::CPU, Noop::new(vec![], vec![vm.new_blob(4)]))?;
/// vm.sync()?;
/// let st = vm.stats();
/// assert_eq!((st.in_flight, st.inserted - st.erased), (0, 0));
/// assert!(st.to_string().contains("in flight 0"));
/// # Ok::<(), eddy_vm::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VmStats {
    /// Instructions the scheduler has taken in.
    pub inserted: u64,
    /// Instructions released.
    pub erased: u64,
    /// Instructions that joined a fused group (not counting each group's first member).
    pub fused: u64,
    /// Instructions dispatched to a stream.
    pub dispatched: u64,
    /// Of those, cheap ones an idle engine ran at once on the submitting thread (counted in
    /// `inserted`, `dispatched` and `erased` too).
    pub inlined: u64,
    /// Received and not yet released.
    pub in_flight: u64,
    /// Allocations that succeeded on the retry after shrinking.
    pub oom_retries: u64,
    /// Allocations that failed for good.
    pub ooms: u64,
    /// The CPU allocator's figures.
    pub alloc: AllocStats,
}

impl std::fmt::Display for VmStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "instructions {} (fused {}), in flight {}, OOM retries {}, OOMs {}, memory in use {} B, cached {} B, peak {} B",
            self.erased,
            self.fused,
            self.in_flight,
            self.oom_retries,
            self.ooms,
            self.alloc.in_use,
            self.alloc.cached,
            self.alloc.peak_in_use
        )
    }
}
