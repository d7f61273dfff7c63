//! [`Shared`]: the state the engine's threads share (user threads, the scheduler, workers).
//!
//! It sits below every part of the engine that uses it: the scheduler, the workers, the
//! builder and the `Vm` handle import it, and it imports none of them.

use crate::Counted;
use crate::alloc::DeviceAllocator;
use crate::blob::Blob;
use crate::config::Config;
use crate::error::Error;
use crate::handoff::HandOff;
use crate::pending::PendingStack;
use crate::stats::StatCounters;
use crate::stream::{Device, StreamId, StreamPolicy};
use crate::trace::TraceEvent;
use crossbeam_utils::CachePadded;
use parking_lot::{Condvar, Mutex};
use qcell::QCellOwnerID;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub(crate) struct StreamEntry {
    pub policy: Arc<dyn StreamPolicy>,
    pub allocator: Arc<DeviceAllocator>,
    /// How the stream's fused units of op calls become one kernel, if its device says
    /// ([`Vm::set_unit_merge`](crate::Vm::set_unit_merge)).
    pub merge: std::sync::OnceLock<crate::merge::UnitMerge>,
}

/// In `Shared::submit_flags`: `run_op` takes its general path.
pub(crate) const SUBMIT_SLOW: u8 = 1;
/// In `Shared::submit_flags`: the engine has an asynchronous stream.
pub(crate) const SUBMIT_DEVICE: u8 = 2;

/// In `Shared::divert_flags`: automatic promotion is on.
pub(crate) const PROMOTION_ON: usize = 1 << 40;
/// In `Shared::divert_flags`: automatic promotion holds calls; every `run` lets them run first.
pub(crate) const PROMOTION_HOLDING: usize = 1 << 41;
/// In `Shared::divert_flags`: the count of captures in progress.
pub(crate) const CAPTURES: usize = PROMOTION_ON - 1;

/// Memory an engine keeps on a device beyond its allocators' caches, for work that may come
/// back (the plans of a promoted loop): the out-of-memory path and `Vm::empty_cache` have it
/// let go of what no instruction uses, before they shrink the allocators' caches.
pub(crate) trait DeviceCache: Send + Sync {
    /// Lets go of what it keeps on `device`; returns how many things it let go.
    fn shed(&self, device: Device) -> usize;
}

/// State shared between user threads, the scheduler and workers.
pub(crate) struct Shared {
    pub config: Config,
    pub streams: Vec<StreamEntry>,
    pub any_async_stream: bool,
    /// Bit `s` (the last bit for streams 63 and up): stream `s` only launches (see
    /// [`Shared::is_async`]).
    pub async_mask: u64,
    /// What `run_op` must look at, one word so that the per-op path loads one: [`SUBMIT_SLOW`]
    /// (take the general path, owned handles and the builder where needed: automatic promotion
    /// is on, or a capture is in progress) and [`SUBMIT_DEVICE`] (an asynchronous stream
    /// exists: tell per call whether the builder's cross-stream sync is needed, so that
    /// registering a device does not slow the host's ops).
    pub submit_flags: AtomicU8,
    /// Captures in progress (`Vm::capture`), one per capturing thread (the bits of
    /// [`CAPTURES`]), and automatic promotion's two flags ([`PROMOTION_ON`], [`PROMOTION_HOLDING`]): what
    /// diverts op calls from running, in one word. A capture that begins and promotion that
    /// turns on also set [`SUBMIT_SLOW`] in `submit_flags`, so that `run_op`, whose fast path
    /// loads only `submit_flags`, takes the path that looks here.
    pub divert_flags: AtomicUsize,
    pub capture: Mutex<Vec<crate::captured::CaptureState>>,
    pub owner_id: QCellOwnerID,
    /// User threads → scheduler. Its notifier is the scheduler's.
    pub pending: CachePadded<PendingStack>,
    /// Scheduler → submitting threads: emptied instruction nodes (see `pool`).
    pub free_nodes: CachePadded<HandOff>,
    pub free_count: AtomicUsize,
    /// Scheduler → submitting threads: released nodes that still hold a policy whose drop is
    /// deferred (see `InstructionPolicy::deferred_drop` and `pool`).
    pub deferred_nodes: CachePadded<HandOff>,
    pub deferred_count: AtomicUsize,
    /// Workers → scheduler.
    pub completions: CachePadded<HandOff>,
    /// Received and not yet released (back-pressure). The scheduler subtracts once per pass.
    pub in_flight: CachePadded<AtomicUsize>,
    pub bp_lock: Mutex<()>,
    pub bp_cv: Condvar,
    pub bp_waiters: AtomicUsize,
    pub stats: CachePadded<StatCounters>,
    pub errors: Mutex<Vec<(u64, Error)>>,
    pub shutdown: AtomicBool,
    pub dump_request: AtomicBool,
    pub dump: Mutex<Option<String>>,
    pub probes: Mutex<Vec<Box<dyn FnMut() -> bool + Send>>>,
    pub has_probes: AtomicBool,
    /// An instruction that is not cheap is computing inline, on whichever thread runs passes:
    /// a submitter of a cheap one then does not wait for the scheduler (see `Vm::run_now`).
    pub heavy: AtomicBool,
    /// A user thread is running the passes in `Vm::wait` (it holds the scheduler). Meanwhile
    /// the scheduler thread sleeps instead of spinning: it could only take a core from that
    /// thread or its kernel helpers (see `scheduler::spin_until_notified`).
    pub waiter_in_passes: AtomicBool,
    /// User threads in `Vm::wait` asking the scheduler thread for the scheduler: it lets go
    /// after the instruction it is running and sleeps, and the waiter runs the passes with the
    /// kernel pool's helpers (see `Vm::take_scheduler`).
    pub waiters_wanting: AtomicUsize,
    /// `shutdown_timeout` gave up on the scheduler thread.
    pub abandoned: AtomicBool,
    /// Set when an engine thread failed (`EngineFailed`).
    pub failed: Mutex<Option<Error>>,
    pub trace: Mutex<Vec<TraceEvent>>,
    /// Whether instructions are recorded on the timeline (`Vm::set_trace`).
    pub tracing: AtomicBool,
    pub trace_origin: Instant,
    /// Memory kept beyond the allocators' caches ([`DeviceCache`]).
    pub caches: Mutex<Vec<Arc<dyn DeviceCache>>>,
    /// The scheduler thread has exited.
    pub sched_exited: Mutex<bool>,
    pub sched_exited_cv: Condvar,
    /// The transport dependence: every collective instruction writes it (`Vm::transport`).
    pub transport: Counted<Blob>,
    /// Held while one collective's instructions are submitted (`Vm::transport_turn`).
    pub transport_turn: Mutex<()>,
    /// The released blob of no bytes that `Vm::unusable_blob` hands out.
    pub unusable: Counted<Blob>,
}

impl Shared {
    /// Whether stream `s` only launches its work (an asynchronous device stream), so that
    /// work after it on another stream needs the builder's cross-stream sync. `NO_STREAM`
    /// (a blob never used) is not.
    #[inline]
    pub(crate) fn is_async(&self, s: u32) -> bool {
        s != crate::blob::NO_STREAM && self.async_mask >> s.min(63) & 1 != 0
    }

    /// Has every [`DeviceCache`] let go of what it keeps on `device`; returns how many things
    /// went.
    pub(crate) fn shed_caches(&self, device: Device) -> usize {
        let caches = self.caches.lock().clone();
        caches.iter().map(|c| c.shed(device)).sum()
    }

    /// The shared state of an engine with `streams`, before any thread starts.
    pub(crate) fn new(config: Config, streams: Vec<StreamEntry>, owner_id: QCellOwnerID) -> Self {
        // Every stream that only launches, once: the flag, the mask and the submit flags
        // derive from it.
        let async_mask = streams
            .iter()
            .enumerate()
            .filter(|(_, s)| s.policy.done_means_launched())
            .fold(0u64, |m, (k, _)| m | 1 << k.min(63));
        Shared {
            trace: Mutex::new(Vec::new()),
            tracing: AtomicBool::new(config.trace),
            any_async_stream: async_mask != 0,
            async_mask,
            submit_flags: AtomicU8::new(
                if config.promotion { SUBMIT_SLOW } else { 0 }
                    | if async_mask != 0 { SUBMIT_DEVICE } else { 0 },
            ),
            divert_flags: AtomicUsize::new(if config.promotion { PROMOTION_ON } else { 0 }),
            capture: Mutex::new(Vec::new()),
            config,
            streams,
            owner_id,
            pending: CachePadded::new(PendingStack::new()),
            completions: CachePadded::new(HandOff::new()),
            free_nodes: CachePadded::new(HandOff::new()),
            free_count: AtomicUsize::new(0),
            deferred_nodes: CachePadded::new(HandOff::new()),
            deferred_count: AtomicUsize::new(0),
            in_flight: CachePadded::new(AtomicUsize::new(0)),
            bp_lock: Mutex::new(()),
            bp_cv: Condvar::new(),
            bp_waiters: AtomicUsize::new(0),
            stats: CachePadded::new(StatCounters::default()),
            errors: Mutex::new(Vec::new()),
            shutdown: AtomicBool::new(false),
            dump_request: AtomicBool::new(false),
            dump: Mutex::new(None),
            probes: Mutex::new(Vec::new()),
            has_probes: AtomicBool::new(false),
            heavy: AtomicBool::new(false),
            waiter_in_passes: AtomicBool::new(false),
            waiters_wanting: AtomicUsize::new(0),
            abandoned: AtomicBool::new(false),
            failed: Mutex::new(None),
            trace_origin: Instant::now(),
            caches: Mutex::new(Vec::new()),
            sched_exited: Mutex::new(false),
            sched_exited_cv: Condvar::new(),
            transport: Blob::new_arc(owner_id, 0),
            transport_turn: Mutex::new(()),
            unusable: {
                let b = Blob::new_arc(owner_id, 0);
                b.mark_released();
                b
            },
        }
    }

    pub(crate) fn record_error(&self, id: u64, e: Error) {
        tracing::debug!(instr = id, error = %e, "instruction failed");
        self.errors.lock().push((id, e));
    }

    /// Moves the engine to `EngineFailed` after a panic of the engine itself (not of a kernel)
    /// on any thread that ran passes: every waiter wakes with it, new work is refused, and
    /// `Drop` still returns. Returns the error.
    pub(crate) fn fail(&self, panic: &(dyn std::any::Any + Send)) -> Error {
        let cause = crate::error::panic_message(panic);
        tracing::error!("the engine failed: {cause}");
        let e = Error::EngineFailed { cause };
        *self.failed.lock() = Some(e.clone());
        self.shutdown.store(true, Ordering::Release);
        // A pass on a user thread may fail while the scheduler thread sleeps: wake it to see
        // the failure and exit, and wake submitters blocked on back-pressure to see shutdown.
        self.pending.notifier.notify();
        let _g = self.bp_lock.lock();
        self.bp_cv.notify_all();
        e
    }

    /// Whether an engine thread (or a pass run by a waiting thread) failed.
    pub(crate) fn is_failed(&self) -> bool {
        self.failed.lock().is_some()
    }

    pub(crate) fn trace_now(&self) -> Option<Instant> {
        self.tracing.load(Ordering::Relaxed).then(Instant::now)
    }

    pub(crate) fn trace_record(&self, name: &str, id: u64, stream: StreamId, start: Instant) {
        let end = Instant::now();
        let thread = std::thread::current().name().unwrap_or("user").to_string();
        self.trace.lock().push(TraceEvent {
            name: name.to_string(),
            id,
            stream: stream.0,
            thread,
            start_us: (start - self.trace_origin).as_secs_f64() * 1e6,
            dur_us: (end - start).as_secs_f64() * 1e6,
        });
    }

    /// Wakes submitters blocked on the high-water mark once at most `low_water` are in flight.
    ///
    /// The releaser lowers `in_flight` and then reads `bp_waiters`; a blocking submitter
    /// raises `bp_waiters` and then reads `in_flight` (`block_on_high_water`). All four
    /// are `SeqCst`, so at least one of the two sees the other's write: either the submitter
    /// finds low water and does not sleep, or the releaser finds the waiter and notifies it.
    /// With acquire/release alone both could read the old values, and the submitter would
    /// sleep out its timed wait.
    pub(crate) fn wake_submitters(&self) {
        if self.bp_waiters.load(Ordering::SeqCst) > 0
            && self.in_flight.load(Ordering::SeqCst) <= self.config.low_water
        {
            let _g = self.bp_lock.lock();
            self.bp_cv.notify_all();
        }
    }

    /// Blocks a submitter above the high-water mark until at most `low_water` are in flight
    /// (or the engine shuts down): the other half of the protocol in `wake_submitters`.
    pub(crate) fn block_on_high_water(&self) {
        // SeqCst: the other half of the protocol in `wake_submitters`.
        self.bp_waiters.fetch_add(1, Ordering::SeqCst);
        let mut g = self.bp_lock.lock();
        while self.in_flight.load(Ordering::SeqCst) > self.config.low_water
            && !self.shutdown.load(Ordering::Acquire)
        {
            // The timed wait is a safety net; the scheduler notifies when crossing low water.
            self.bp_cv.wait_for(&mut g, Duration::from_millis(5));
        }
        drop(g);
        self.bp_waiters.fetch_sub(1, Ordering::AcqRel);
    }

    /// The scheduler thread has exited: wakes `shutdown_timeout` and blocked submitters.
    pub(crate) fn scheduler_exited(&self) {
        *self.sched_exited.lock() = true;
        self.sched_exited_cv.notify_all();
        self.bp_cv.notify_all();
    }
}
