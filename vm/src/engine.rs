//! [`Vm`]: the engine handle — receive instructions, wait, read blobs, shut down.

use crate::Counted;
use crate::alloc::{AllocStats, DeviceAllocator};
use crate::blob::Blob;
use crate::builder::InstructionsBuilder;
use crate::config::{Config, VmBuilder};
use crate::error::{Error, Result};
use crate::exec::{EngineScope, in_engine};
use crate::handoff::HandOff;
use crate::instruction::op_call::{KernelCall, SHALLOW_MAX, Shallow};
use crate::instruction::{
    AccessBlobByCallback, Barrier, InstrList, InstructionPolicy, Kernel, OpCall,
};
use crate::pending::PendingStack;
use crate::scheduler::Scheduler;
use crate::stats::{StatCounters, VmStats};
use crate::stream::{Device, StreamId, StreamKind, StreamPolicy};
use crate::trace::TraceEvent;
use crate::wait::Waiter;
use crossbeam_utils::CachePadded;
use parking_lot::{Condvar, Mutex};
use qcell::{QCellOwner, QCellOwnerID};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub(crate) struct StreamEntry {
    pub policy: Arc<dyn StreamPolicy>,
    pub allocator: Arc<DeviceAllocator>,
}

/// State shared between user threads, the scheduler and workers.
pub(crate) struct Shared {
    pub config: Config,
    pub streams: Vec<StreamEntry>,
    pub any_async_stream: bool,
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
    bp_lock: Mutex<()>,
    bp_cv: Condvar,
    bp_waiters: AtomicUsize,
    pub stats: CachePadded<StatCounters>,
    errors: Mutex<Vec<(u64, Error)>>,
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
    /// `shutdown_timeout` gave up on the scheduler thread.
    abandoned: AtomicBool,
    /// Set when an engine thread failed (`EngineFailed`).
    failed: Mutex<Option<Error>>,
    trace: Mutex<Vec<TraceEvent>>,
    /// Whether instructions are recorded on the timeline (`Vm::set_trace`).
    tracing: AtomicBool,
    trace_origin: Instant,
    /// The scheduler thread has exited.
    sched_exited: Mutex<bool>,
    sched_exited_cv: Condvar,
}

impl Shared {
    pub(crate) fn record_error(&self, id: u64, e: Error) {
        tracing::debug!(instr = id, error = %e, "instruction failed");
        self.errors.lock().push((id, e));
    }

    /// Moves the engine to `EngineFailed` after a panic of the engine itself (not of a kernel)
    /// on any thread that ran passes: every waiter wakes with it, new work is refused, and
    /// `Drop` still returns. Returns the error.
    pub(crate) fn fail(&self, panic: &(dyn std::any::Any + Send)) -> Error {
        let cause = crate::exec::panic_message(panic);
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
    /// raises `bp_waiters` and then reads `in_flight` (`Vm::block_on_high_water`). All four
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
}

enum Mode {
    /// The scheduler thread holds `sched` only while it runs passes, and lets go of it to spin
    /// and to sleep; a thread that waits on an engine whose scheduler is out of work takes it
    /// and runs the passes itself (see [`Vm::wait`]), instead of paying for waking the
    /// scheduler thread, and a thread that submits a cheap instruction to an idle engine runs
    /// it at once (`scheduler/inline.rs`).
    Threaded {
        handle: Mutex<Option<JoinHandle<()>>>,
        sched: Arc<Mutex<Scheduler>>,
    },
    Sync(Box<Mutex<Scheduler>>),
}

pub(crate) struct VmInner {
    pub(crate) shared: Arc<Shared>,
    mode: Mode,
}

/// The engine: a cheap, cloneable handle. The engine shuts down (drains, joins its threads)
/// when the last handle drops.
///
/// # Examples
///
/// ```
/// use eddy_vm::{Vm, testing::Noop};
/// let vm = Vm::builder().build().unwrap();
/// let (a, b) = (vm.new_blob(4), vm.new_blob(4));
/// vm.run(eddy_vm::StreamId::CPU, Noop::new(vec![a.clone()], vec![b.clone()])).unwrap();
/// vm.sync().unwrap();
/// assert_eq!(vm.stats().in_flight, 0);
/// ```
#[derive(Clone)]
pub struct Vm {
    pub(crate) inner: Arc<VmInner>,
}

impl std::fmt::Debug for Vm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vm")
            .field("streams", &self.stream_count())
            .field("stats", &self.stats())
            .finish()
    }
}

impl Vm {
    /// A builder with defaults overridden by the `EDDY_VM_*` environment variables.
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().window(16).build()?;
    /// assert_eq!(vm.config().window, 16);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn builder() -> VmBuilder {
        VmBuilder::from_env()
    }

    pub(crate) fn start(mut b: VmBuilder) -> Result<Vm> {
        let owner = QCellOwner::new();
        let policies = std::mem::take(&mut b.streams);
        let streams: Vec<StreamEntry> = policies
            .into_iter()
            .map(|p| StreamEntry {
                allocator: b.allocator_for(p.device()),
                policy: p,
            })
            .collect();
        let any_async_stream = streams.iter().any(|s| s.policy.done_means_launched());
        let config = b.config.clone();
        let shared = Arc::new(Shared {
            trace: Mutex::new(Vec::new()),
            tracing: AtomicBool::new(config.trace),
            config,
            streams,
            any_async_stream,
            owner_id: owner.id(),
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
            abandoned: AtomicBool::new(false),
            failed: Mutex::new(None),
            trace_origin: Instant::now(),
            sched_exited: Mutex::new(false),
            sched_exited_cv: Condvar::new(),
        });
        let io = |e: std::io::Error| Error::InvalidArgument {
            op: "Vm::start".into(),
            message: format!("cannot spawn an engine thread: {e}"),
        };
        let sched = Scheduler::new(shared.clone(), owner).map_err(io)?;
        let mode = if shared.config.sync_mode {
            Mode::Sync(Box::new(Mutex::new(sched)))
        } else {
            let sh = shared.clone();
            let sched = Arc::new(Mutex::new(sched));
            let cell = sched.clone();
            let h = std::thread::Builder::new()
                .name("eddy-scheduler".into())
                .spawn(move || {
                    // A panic of the scheduler itself (an internal invariant, not a kernel:
                    // those are caught per instruction) fails the engine.
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        Scheduler::run_thread(&cell)
                    }));
                    if let Err(p) = r {
                        sh.fail(&*p);
                    }
                    *sh.sched_exited.lock() = true;
                    sh.sched_exited_cv.notify_all();
                    sh.bp_cv.notify_all();
                })
                .map_err(io)?;
            Mode::Threaded {
                handle: Mutex::new(Some(h)),
                sched,
            }
        };
        Ok(Vm {
            inner: Arc::new(VmInner { shared, mode }),
        })
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.inner.shared
    }

    /// The settings the engine runs with.
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().fusion(false).build()?;
    /// assert!(!vm.config().fusion);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn config(&self) -> &Config {
        &self.shared().config
    }

    /// A new blob of `bytes` bytes (memory is allocated by the first instruction that writes it).
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().build()?;
    /// let b = vm.new_blob(64);
    /// assert_eq!(b.bytes(), 64);
    /// assert!(!b.is_allocated(), "no memory until the first write");
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn new_blob(&self, bytes: usize) -> Counted<Blob> {
        Blob::new_arc(self.shared().owner_id, bytes)
    }

    /// Number of streams (the main CPU stream is `StreamId::CPU`).
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().build()?;
    /// assert_eq!(vm.stream_count(), 1, "the main CPU stream");
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn stream_count(&self) -> usize {
        self.shared().streams.len()
    }

    /// The policy of `stream`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Device, StreamId, Vm};
    /// let vm = Vm::builder().build()?;
    /// assert_eq!(vm.stream_policy(StreamId::CPU).unwrap().device(), Device::CPU);
    /// assert!(vm.stream_policy(StreamId(3)).is_none());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn stream_policy(&self, stream: StreamId) -> Option<&Arc<dyn StreamPolicy>> {
        self.shared()
            .streams
            .get(stream.0 as usize)
            .map(|s| &s.policy)
    }

    /// The allocator of `device`, if the engine has a stream on it.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Device, Vm};
    /// let vm = Vm::builder().build()?;
    /// assert!(vm.allocator(Device::CPU).is_some());
    /// assert!(vm.allocator(Device::Test(0)).is_none(), "no stream on that device");
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn allocator(&self, device: Device) -> Option<Arc<DeviceAllocator>> {
        self.shared()
            .streams
            .iter()
            .find(|s| s.policy.device() == device)
            .map(|s| s.allocator.clone())
    }

    /// The compute stream of `device`: where ops on its tensors run. `None` if the engine has
    /// no stream on that device.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Device, StreamId, Vm};
    /// let vm = Vm::builder().cpu_devices(2).build()?;
    /// assert_eq!(vm.device_stream(Device::CPU), Some(StreamId::CPU));
    /// assert!(vm.device_stream(Device::Cpu(1)).is_some());
    /// assert_eq!(vm.device_stream(Device::Cpu(2)), None);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn device_stream(&self, device: Device) -> Option<StreamId> {
        if device == Device::CPU {
            return Some(StreamId::CPU); // the main stream, always stream 0
        }
        self.shared()
            .streams
            .iter()
            .position(|s| s.policy.device() == device && s.policy.kind() == StreamKind::Compute)
            .map(|i| StreamId(i as u32))
    }

    /// The devices the engine has streams on, in order, each once.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Device, Vm};
    /// assert_eq!(Vm::builder().build()?.devices(), [Device::CPU]);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn devices(&self) -> Vec<Device> {
        let mut out: Vec<Device> = Vec::new();
        for s in &self.shared().streams {
            if !out.contains(&s.policy.device()) {
                out.push(s.policy.device());
            }
        }
        out.sort();
        out
    }

    /// Whether `self` and `other` are handles to the same engine.
    ///
    /// # Examples
    ///
    /// ```
    /// let a = eddy_vm::Vm::builder().build().unwrap();
    /// assert!(a.same_engine(&a.clone()));
    /// assert!(!a.same_engine(&eddy_vm::Vm::builder().build().unwrap()));
    /// ```
    pub fn same_engine(&self, other: &Vm) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// A builder for a list of instructions submitted together.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::Noop, StreamId, Vm};
    /// let vm = Vm::builder().build()?;
    /// let x = vm.new_blob(4);
    /// let mut b = vm.instructions();
    /// b.push(StreamId::CPU, Noop::new(vec![], vec![x.clone()]))?;
    /// b.submit()?;
    /// vm.sync()?;
    /// assert!(x.is_allocated());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn instructions(&self) -> InstructionsBuilder<'_> {
        InstructionsBuilder::new(self)
    }

    /// Submits one instruction.
    ///
    /// # Errors
    ///
    /// As [`InstructionsBuilder::push`] and [`InstructionsBuilder::submit`].
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::{Log, Record}, StreamId, Vm};
    /// let vm = Vm::builder().build()?;
    /// let (log, x) = (Log::default(), vm.new_blob(4));
    /// vm.run(StreamId::CPU, Record::new(1, vec![], vec![x.clone()], &log))?;
    /// vm.run(StreamId::CPU, Record::new(2, vec![x.clone()], vec![], &log))?;
    /// vm.sync()?;
    /// assert_eq!(*log.lock(), vec![1, 2], "the reader ran after the writer");
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn run<P: InstructionPolicy>(&self, stream: StreamId, mut policy: P) -> Result<()> {
        let sh = self.shared();
        if sh.any_async_stream || policy.is_barrier() {
            // The builder inserts the soft sync an asynchronous stream may need.
            let mut b = self.instructions();
            b.push(stream, policy)?;
            return b.submit();
        }
        // Synchronous-completion streams (no soft sync can be needed): check and track the
        // operands in one pass; then at once on an idle engine if cheap, else one node.
        crate::builder::check_and_track(
            sh,
            policy.name(),
            stream,
            policy.inputs(),
            policy.outputs(),
        )?;
        if policy.cheap() && self.run_now(stream, &mut policy)? {
            crate::scheduler::drop_policy(policy);
            return Ok(());
        }
        self.submit_checked(stream, policy)
    }

    /// Submits an op call of `kernel` reading `inputs` and writing `outputs`: what
    /// `run(stream, OpCall::new(kernel, inputs, outputs).with_cheap(cheap))` does, except
    /// that a call run at once (cheap, on an idle engine) takes no new handles to the blobs.
    /// The tensor layer submits every op this way.
    ///
    /// # Errors
    ///
    /// As [`run`](Self::run).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Blob, Counted, Result, StreamId, Vm, instruction::{ComputeCtx, Kernel}};
    /// struct Fill(u8);
    /// impl Kernel for Fill {
    ///     fn name(&self) -> &str { "fill" }
    ///     fn compute(&mut self, _: &[Counted<Blob>], outs: &[Counted<Blob>], _: &mut ComputeCtx<'_>) -> Result<()> {
    ///         // SAFETY: the engine runs this kernel with exclusive access to its outputs.
    ///         unsafe { outs[0].bytes_mut().fill(self.0) };
    ///         Ok(())
    ///     }
    /// }
    /// let vm = Vm::builder().build()?;
    /// let b = vm.new_blob(4);
    /// vm.run_op(StreamId::CPU, Fill(7), &[], &[&b], true)?;
    /// assert_eq!(vm.read_blob(&b, |bytes| bytes.to_vec())?, vec![7; 4]);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn run_op<K: Kernel>(
        &self,
        stream: StreamId,
        // `mut` here rather than a `let mut` copy below: the kernel stays where the caller
        // built it. The copy read it back in 16-byte pieces right after the caller's narrower
        // stores, a store-forwarding stall that took a sixth of `launch`'s time.
        mut kernel: K,
        inputs: &[&Counted<Blob>],
        outputs: &[&Counted<Blob>],
        cheap: bool,
    ) -> Result<()> {
        let owned = |bs: &[&Counted<Blob>]| bs.iter().map(|&b| b.clone()).collect();
        // Owned handles unless the call may run at once with borrowed copies (cheap, no
        // asynchronous stream, few enough operands for `Shallow`); `run` still runs a cheap
        // call at once on an idle engine.
        let borrowable = inputs.len() <= SHALLOW_MAX && outputs.len() <= SHALLOW_MAX;
        if !cheap || self.shared().any_async_stream || !borrowable {
            let call = OpCall::new(kernel, owned(inputs), owned(outputs)).with_cheap(cheap);
            return self.run(stream, call);
        }
        let (mut ins, mut outs) = (Shallow::EMPTY, Shallow::EMPTY);
        // SAFETY: the copies stay in this frame, which holds the borrows of `inputs` and
        // `outputs`; they are gone before it returns.
        unsafe { ins.fill(inputs) };
        // SAFETY: as above.
        unsafe { outs.fill(outputs) };
        let mut call = KernelCall {
            kernel: &mut kernel,
            inputs: ins.as_slice(),
            outputs: outs.as_slice(),
        };
        crate::builder::check_and_track(
            self.shared(),
            call.kernel.name(),
            stream,
            call.inputs,
            call.outputs,
        )?;
        if self.run_now(stream, &mut call)? {
            crate::scheduler::drop_policy(kernel);
            return Ok(());
        }
        // Not idle: queue an ordinary call with its own handles (already checked).
        let call = OpCall::new(kernel, owned(inputs), owned(outputs)).with_cheap(true);
        self.submit_checked(stream, call)
    }

    /// Queues a checked and tracked policy as one node (no soft sync can be needed).
    fn submit_checked<P: InstructionPolicy>(&self, stream: StreamId, policy: P) -> Result<()> {
        let sh = self.shared();
        let mut node = crate::pool::take_node(sh);
        node.set(stream, policy);
        if let Mode::Sync(_) = self.inner.mode {
            let mut list = InstrList::new(crate::instruction::InstrAdapter::new());
            list.push_back(node);
            return self.receive(list, 1);
        }
        self.enqueue(1, |p| p.push_one(node))
    }

    /// Releases a blob: its memory is freed once every earlier access, on every stream, is done.
    ///
    /// # Errors
    ///
    /// `TensorReleased` if it was released before; `ForeignBlob` if it belongs to another engine.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Error, Vm};
    /// let vm = Vm::builder().build()?;
    /// let b = vm.new_blob(16);
    /// vm.write_blob(&b, |bytes| bytes.fill(1))?;
    /// vm.release(&b)?;
    /// vm.sync()?;
    /// assert!(!b.is_allocated());
    /// assert!(matches!(vm.release(&b), Err(Error::TensorReleased { .. })));
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn release(&self, blob: &Counted<Blob>) -> Result<()> {
        let stream = crate::builder::mark_released(self.shared(), blob, false)?;
        self.release_marked(stream, blob)
    }

    /// [`release`](Self::release) for the caller whose [`Blob::unhold`] just returned `true`:
    /// the last of the blob's holders, so no other holder can release it at the same time.
    /// Marking it released then needs no locked instruction (one per dropped tensor).
    ///
    /// Called while another thread releases the same blob through [`release`](Self::release)
    /// (a caller that mixes the two protocols), both calls may succeed; the second release
    /// then frees nothing, as the memory is freed once.
    ///
    /// # Errors
    ///
    /// As [`release`](Self::release).
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().build().unwrap();
    /// let b = vm.new_blob(16);
    /// if b.unhold() {
    ///     vm.release_unheld(&b)?; // the creator was the only holder
    /// }
    /// assert!(b.is_released());
    /// assert!(vm.release_unheld(&b).is_err(), "released twice");
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn release_unheld(&self, blob: &Counted<Blob>) -> Result<()> {
        let stream = crate::builder::mark_released(self.shared(), blob, true)?;
        self.release_marked(stream, blob)
    }

    /// The rest of a release once `blob` is marked released: free it at once, or queue it.
    fn release_marked(&self, stream: StreamId, blob: &Counted<Blob>) -> Result<()> {
        let sh = self.shared();
        // Inline memory has nothing to free: it goes with the blob, whose last handle drops
        // only after every instruction that uses it is released. So no instruction and no lock.
        if blob.has_inline_memory() {
            return Ok(());
        }
        // At once on an idle engine: every earlier access is done, so free the memory now.
        if !sh.any_async_stream
            && let Some(mut s) = self.try_sched()
            && (s.is_idle() || self.catch_up(&mut s)?)
            && s.try_release_now(stream, blob)
        {
            return Ok(());
        }
        let policy = crate::instruction::ReleaseTensor::new(blob.clone());
        if sh.any_async_stream || matches!(self.inner.mode, Mode::Sync(_)) {
            let mut b = self.instructions();
            b.push_release(stream, policy);
            return b.submit();
        }
        // The fast path, as in `run`: one node, one push (no soft sync can be needed).
        let mut node = crate::pool::take_node(sh);
        node.set(stream, policy);
        self.enqueue(1, |p| p.push_one(node))
    }

    /// The scheduler, for running work at once on this thread: if the engine is not shutting
    /// down, this is not engine code, and no thread holds it (the scheduler thread runs no
    /// passes; in synchronous mode no other thread is submitting).
    fn try_sched(&self) -> Option<parking_lot::MutexGuard<'_, Scheduler>> {
        if self.shared().shutdown.load(Ordering::Acquire) || in_engine() {
            return None;
        }
        match &self.inner.mode {
            Mode::Threaded { sched, .. } => sched.try_lock(),
            Mode::Sync(s) => s.try_lock(),
        }
    }

    /// Runs a checked, cheap `policy` at once on this thread if the engine is idle and its
    /// scheduler free (see `scheduler/inline.rs`); returns whether it did (if not, the caller
    /// queues it).
    #[inline]
    fn run_now<P: crate::exec::Run + ?Sized>(
        &self,
        stream: StreamId,
        policy: &mut P,
    ) -> Result<bool> {
        let Some(mut s) = self.try_sched().or_else(|| self.sched_after_pass()) else {
            return Ok(false);
        };
        // Not idle, yet the scheduler thread runs no pass (this thread holds its state): if
        // all that is queued is cheap, run it here, then this one (see
        // `Scheduler::only_cheap_queued`). Otherwise the caller queues this one too, and the
        // scheduler thread, woken by the pushes, takes it all. (One call of `try_run_now`, so
        // that it inlines here.)
        if (!s.is_idle() && !self.catch_up(&mut s)?) || !s.try_run_now(stream, policy) {
            return Ok(false);
        }
        // A kernel that submitted work queued it; synchronous mode runs it now (the scheduler
        // thread was woken by the push).
        if matches!(self.inner.mode, Mode::Sync(_)) && !s.is_idle() {
            self.run_sync_passes(&mut s)?;
        }
        Ok(true)
    }

    /// The scheduler, once the scheduler thread's current pass ends, if that comes soon: on the
    /// threaded engine, while no instruction that is not cheap computes, a bounded spin
    /// (about a microsecond) on the lock.
    ///
    /// A submitter of a cheap op that finds the scheduler thread in a pass (over cheap work:
    /// queued ops, releases) waits for that pass instead of queueing its op behind it. Queueing
    /// would keep the engine busy for the next op too, and a loop of small ops would stay in
    /// the queued mode, at two to five times the cost per op, for good; waiting lets this
    /// thread catch up and return to running ops at once (`Scheduler::only_cheap_queued`).
    /// No blocking lock: the pass may run a callback that waits for this thread.
    #[cold]
    fn sched_after_pass(&self) -> Option<parking_lot::MutexGuard<'_, Scheduler>> {
        const SPINS: u32 = 256;
        let Mode::Threaded { sched, .. } = &self.inner.mode else {
            return None;
        };
        let sh = self.shared();
        if in_engine() {
            return None;
        }
        for _ in 0..SPINS {
            if sh.heavy.load(Ordering::Relaxed) || sh.shutdown.load(Ordering::Relaxed) {
                return None;
            }
            if !sched.is_locked()
                && let Some(s) = sched.try_lock()
            {
                return Some(s);
            }
            std::hint::spin_loop();
        }
        None
    }

    /// On the threaded engine, with its scheduler held by this thread and work queued: runs
    /// that work here if all of it is cheap (see `Scheduler::only_cheap_queued`); returns
    /// whether the engine is idle afterwards.
    ///
    /// The passes are bounded by what was queued when this thread looked: work submitted
    /// meanwhile (by kernels, or by other threads while this one holds the scheduler) is
    /// taken too, but a stream of it must not keep this caller running other threads' work.
    /// A chain of `n` cheap instructions takes about `n + 2` passes (each pass releases the
    /// one that ran and dispatches the next), so `2n + 8` only stops a stream of new work.
    #[cold]
    #[inline(never)]
    fn catch_up(&self, s: &mut Scheduler) -> Result<bool> {
        if !matches!(self.inner.mode, Mode::Threaded { .. }) {
            return Ok(false);
        }
        let Some(queued) = s.only_cheap_queued() else {
            return Ok(false);
        };
        let budget = std::cell::Cell::new(queued.saturating_mul(2).saturating_add(8));
        self.run_passes_here(s, || {
            let left = budget.get();
            budget.set(left.saturating_sub(1));
            left == 0
        })?;
        if s.is_idle() {
            return Ok(true);
        }
        // A queued kernel submitted more work, or an allocation failed: the scheduler thread
        // takes it from here.
        self.wake();
        Ok(false)
    }

    /// Hands a built list to the scheduler. Blocks above the high-water mark.
    pub(crate) fn receive(&self, list: InstrList, n: usize) -> Result<()> {
        match &self.inner.mode {
            // Submitted from a kernel or callback inside a synchronous pass: the pass holds the
            // scheduler and will take this from the pending list.
            Mode::Sync(_) if in_engine() => self.enqueue(n, |p| p.push(list)),
            Mode::Sync(s) => {
                self.enqueue(n, |_| ())?; // if refused, `list` drops here
                let mut s = s.lock();
                s.push_local(list);
                self.run_sync_passes(&mut s)
            }
            Mode::Threaded { .. } => self.enqueue(n, |p| p.push(list)),
        }
    }

    /// The common part of every submission: refuse work after shutdown (the unused `push`
    /// closure then drops what was built, whose drop glue tells any waiting callback), count it
    /// in flight, `push` it, and apply back-pressure on the threaded engine.
    fn enqueue(&self, n: usize, push: impl FnOnce(&PendingStack)) -> Result<()> {
        let sh = self.shared();
        if sh.shutdown.load(Ordering::Acquire) {
            return Err(self.shut_down_error());
        }
        sh.in_flight.fetch_add(n, Ordering::AcqRel);
        push(&sh.pending);
        if matches!(self.inner.mode, Mode::Threaded { .. })
            && sh.in_flight.load(Ordering::Acquire) > sh.config.high_water
            && !in_engine()
        {
            self.block_on_high_water();
        }
        Ok(())
    }

    fn block_on_high_water(&self) {
        let sh = self.shared();
        // SeqCst: the other half of the protocol in `Shared::wake_submitters`.
        sh.bp_waiters.fetch_add(1, Ordering::SeqCst);
        let mut g = sh.bp_lock.lock();
        while sh.in_flight.load(Ordering::SeqCst) > sh.config.low_water
            && !sh.shutdown.load(Ordering::Acquire)
        {
            // The timed wait is a safety net; the scheduler notifies when crossing low water.
            sh.bp_cv.wait_for(&mut g, Duration::from_millis(5));
        }
        drop(g);
        sh.bp_waiters.fetch_sub(1, Ordering::AcqRel);
    }

    /// In synchronous mode, lets the scheduler make progress (device events may have completed).
    fn drive(&self) {
        if let Mode::Sync(s) = &self.inner.mode {
            let _ = self.run_sync_passes(&mut s.lock());
        }
    }

    /// Runs synchronous-mode passes on this thread until nothing moves.
    fn run_sync_passes(&self, s: &mut Scheduler) -> Result<()> {
        self.run_passes_here(s, || false)
    }

    /// Runs passes on this thread (the scheduler thread is asleep) until `w` is signalled or
    /// nothing moves. Work left behind (on a worker, on a device, or submitted meanwhile)
    /// goes back to the scheduler thread, which is woken for it.
    fn run_passes_until(&self, s: &mut Scheduler, w: &Waiter) -> Result<()> {
        let r = self.run_passes_here(s, || w.is_done());
        // After a failure the scheduler thread must see it and exit; otherwise it takes over
        // whatever is left.
        if r.is_err() || !s.is_idle() {
            self.wake();
        }
        r
    }

    /// Runs passes on this thread, as engine code, until `stop()` or nothing moves. A panic of
    /// the engine itself (not of a kernel: those are caught per instruction) fails the engine,
    /// as on the scheduler thread.
    fn run_passes_here(&self, s: &mut Scheduler, stop: impl Fn() -> bool) -> Result<()> {
        let sh = self.shared();
        if let Some(e) = sh.failed.lock().clone() {
            return Err(e);
        }
        let scope = EngineScope::enter();
        let r =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(
                || {
                    while !stop() && s.pass() {}
                },
            ));
        drop(scope);
        r.map_err(|p| sh.fail(&*p))
    }

    /// Wakes the scheduler (for devices that complete work outside the engine).
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().build()?;
    /// vm.wake(); // harmless on an idle engine: the scheduler finds nothing to do
    /// vm.sync()?;
    /// assert_eq!(vm.stats().in_flight, 0);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn wake(&self) {
        self.shared().pending.notifier.notify();
    }

    /// A function that wakes the scheduler; give it to a device's completion callback.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{stream::async_device::AsyncDevice, testing::DeviceOp, Vm};
    /// use std::sync::{atomic::{AtomicBool, Ordering}, Arc};
    /// let dev = AsyncDevice::new(0);
    /// let mut b = Vm::builder();
    /// let s = b.add_stream(Arc::new(dev.stream("dev")));
    /// let vm = b.build()?;
    /// dev.set_waker(vm.waker()); // the device's progress re-polls the scheduler
    /// let ran = Arc::new(AtomicBool::new(false));
    /// let r = ran.clone();
    /// vm.run(s, DeviceOp::new(vec![], vec![], move || r.store(true, Ordering::Release)))?;
    /// vm.sync()?; // done means launched
    /// assert!(!ran.load(Ordering::Acquire));
    /// assert_eq!(dev.run_all(), 1);
    /// assert!(ran.load(Ordering::Acquire));
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn waker(&self) -> impl Fn() + Send + Sync + 'static + use<> {
        let sh = Arc::downgrade(&self.inner.shared);
        move || {
            if let Some(s) = sh.upgrade() {
                s.pending.notifier.notify();
            }
        }
    }

    /// Waits for `w`, failing with `Deadlock` if nothing is released for a whole timeout.
    pub(crate) fn wait(&self, w: &Waiter, op: &str) -> Result<()> {
        if in_engine() {
            return Err(Error::ReentrantWait { op: op.to_string() });
        }
        if let Mode::Threaded { sched, .. } = &self.inner.mode {
            // The scheduler thread is out of work (it holds `sched` whenever it runs passes):
            // run the passes here rather than wait for it to wake, which costs tens of
            // microseconds on an idle machine.
            if let Some(mut s) = sched.try_lock() {
                let busy = &self.shared().waiter_in_passes;
                busy.store(true, Ordering::Relaxed);
                let r = self.run_passes_until(&mut s, w);
                busy.store(false, Ordering::Relaxed);
                r?;
            }
        }
        if w.spin(Duration::from_micros(50)) {
            return Ok(());
        }
        let sh = self.shared();
        let timeout = sh.config.timeout;
        let mut last_erased = sh.stats.erased.load(Ordering::Acquire);
        let mut last_progress = Instant::now();
        loop {
            self.drive();
            if w.wait_for(Duration::from_millis(20).min(timeout)) {
                return Ok(());
            }
            if *sh.sched_exited.lock() {
                return if w.is_done() {
                    Ok(())
                } else {
                    Err(self.shut_down_error())
                };
            }
            let erased = sh.stats.erased.load(Ordering::Acquire);
            if erased != last_erased {
                last_erased = erased;
                last_progress = Instant::now();
            } else if last_progress.elapsed() >= timeout {
                return Err(Error::Deadlock {
                    timeout_ms: timeout.as_millis() as u64,
                    dump: self.request_dump(),
                });
            }
        }
    }

    /// Asks the scheduler for a dump of the live instructions.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{stream::{cpu::CpuStream, Exec}, testing::{Gate, Noop}, StreamId, VmBuilder};
    /// use std::sync::Arc;
    /// let mut b = VmBuilder::new();
    /// let side = b.add_stream(Arc::new(CpuStream::new("side", Exec::Worker)));
    /// let vm = b.build()?;
    /// let (gate, x) = (Gate::new(), vm.new_blob(4));
    /// vm.run(side, gate.hold(vec![x.clone()]))?; // blocks the side stream's worker
    /// vm.run(StreamId::CPU, Noop::new(vec![x.clone()], vec![]))?;
    /// while vm.stats().inserted < 2 {
    ///     std::thread::yield_now(); // until the scheduler has taken both in
    /// }
    /// let dump = vm.dump();
    /// gate.open();
    /// vm.sync()?;
    /// assert!(dump.contains("noop on stream 0 (cpu): waiting, 1 unmet"), "{dump}");
    /// assert!(dump.contains("on stream 1 (side): running"), "{dump}");
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn dump(&self) -> String {
        self.request_dump()
    }

    fn request_dump(&self) -> String {
        let sh = self.shared();
        if let Mode::Sync(s) = &self.inner.mode {
            return match s.try_lock() {
                Some(s) => s.dump(),
                None => "  (the scheduler is busy on another thread)\n".into(),
            };
        }
        *sh.dump.lock() = None;
        sh.dump_request.store(true, Ordering::Release);
        self.wake();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(500) {
            if let Some(d) = sh.dump.lock().take() {
                return d;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        "  (the scheduler did not answer: it may be blocked inside an inline kernel)\n".into()
    }

    /// Waits until every instruction received before this call is released; then returns the
    /// first asynchronous error (by submission order) since the last [`clear_errors`], if any.
    ///
    /// # Errors
    ///
    /// The sticky root error; `Deadlock`; `ReentrantWait` from inside a kernel; `EngineShutDown`.
    ///
    /// [`clear_errors`]: Self::clear_errors
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::Fail, StreamId, Vm};
    /// let vm = Vm::builder().build()?;
    /// vm.run(StreamId::CPU, Fail::new(vec![], vec![vm.new_blob(4)]))?;
    /// let e = vm.sync().unwrap_err();
    /// assert_eq!(e.op(), Some("fail_op"));
    /// vm.clear_errors();
    /// vm.sync()?;
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn sync(&self) -> Result<()> {
        self.barrier()?;
        match self.first_error() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Waits until every instruction received before this call is released (errors aside).
    ///
    /// # Errors
    ///
    /// `Deadlock`, `ReentrantWait`, `EngineShutDown`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::Fail, StreamId, Vm};
    /// let vm = Vm::builder().build()?;
    /// vm.run(StreamId::CPU, Fail::new(vec![], vec![vm.new_blob(4)]))?;
    /// vm.barrier()?; // waits, but does not report the failure
    /// assert_eq!(vm.stats().in_flight, 0);
    /// assert!(vm.sync().is_err());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn barrier(&self) -> Result<()> {
        if in_engine() {
            return Err(Error::ReentrantWait { op: "sync".into() });
        }
        let mut held = self.try_sched();
        if held.as_mut().is_some_and(|s| s.pass_idle_barrier()) {
            return Ok(()); // nothing received is still live
        }
        let w = Arc::new(Waiter::new());
        let w2 = w.clone();
        let barrier = Barrier::new(move || w2.signal());
        self.run_then_wait(held, StreamId::CPU, barrier, &w, "sync")
    }

    /// Submits `policy`, whose completion signals `w`, and waits for it (`op` names the wait).
    ///
    /// If this thread holds the scheduler (`held`, else it tries to take it) and the engine
    /// is busy, the scheduler thread runs no pass: queue `policy` behind everything received
    /// and run the passes here, without letting go. Letting go and pushing would wake the
    /// scheduler thread (the work before was pushed, so it is waking already), which would
    /// then often take the scheduler first while this thread waits for it: a hand-off to a
    /// thread that is still waking up. Otherwise (idle: `run` may run it at once; synchronous
    /// mode, whose `receive` runs the passes itself; or the scheduler thread in a pass) it is
    /// an ordinary `run` and `wait`.
    fn run_then_wait<P: InstructionPolicy>(
        &self,
        held: Option<parking_lot::MutexGuard<'_, Scheduler>>,
        stream: StreamId,
        policy: P,
        w: &Waiter,
        op: &str,
    ) -> Result<()> {
        let threaded = matches!(self.inner.mode, Mode::Threaded { .. });
        let held = if threaded {
            held.or_else(|| self.try_sched())
        } else {
            drop(held); // synchronous mode's `receive` takes the scheduler
            None
        };
        let Some(mut s) = held.filter(|s| !s.is_idle()) else {
            self.run(stream, policy)?;
            return self.wait(w, op);
        };
        let mut b = self.instructions();
        b.push(stream, policy)?;
        let (list, n) = b.into_list();
        let sh = self.shared();
        if sh.shutdown.load(Ordering::Acquire) {
            return Err(self.shut_down_error()); // `list` drops here
        }
        sh.in_flight.fetch_add(n, Ordering::AcqRel);
        s.push_after_pending(list);
        self.run_passes_until(&mut s, w)?;
        drop(s);
        if w.is_done() {
            Ok(())
        } else {
            self.wait(w, op)
        }
    }

    /// The first root error by submission order since the last `clear_errors`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::Fail, StreamId, Vm};
    /// let vm = Vm::builder().build()?;
    /// assert_eq!(vm.first_error(), None);
    /// vm.run(StreamId::CPU, Fail::new(vec![], vec![vm.new_blob(4)]))?;
    /// vm.barrier()?;
    /// assert_eq!(vm.first_error().unwrap().op(), Some("fail_op"));
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn first_error(&self) -> Option<Error> {
        self.shared()
            .errors
            .lock()
            .iter()
            .min_by_key(|(id, _)| *id)
            .map(|(_, e)| e.clone())
    }

    /// Every root error since the last `clear_errors`, in submission order.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::Fail, StreamId, Vm};
    /// let vm = Vm::builder().build()?;
    /// vm.run(StreamId::CPU, Fail::new(vec![], vec![vm.new_blob(4)]))?;
    /// vm.run(StreamId::CPU, Fail::new(vec![], vec![vm.new_blob(4)]))?;
    /// vm.barrier()?;
    /// assert_eq!(vm.errors().len(), 2);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn errors(&self) -> Vec<Error> {
        let mut v = self.shared().errors.lock().clone();
        v.sort_by_key(|(id, _)| *id);
        v.into_iter().map(|(_, e)| e).collect()
    }

    /// Forgets the root errors (poisoned blobs stay poisoned until overwritten or released).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::Fail, StreamId, Vm};
    /// let vm = Vm::builder().build()?;
    /// vm.run(StreamId::CPU, Fail::new(vec![], vec![vm.new_blob(4)]))?;
    /// assert!(vm.sync().is_err());
    /// vm.clear_errors();
    /// assert!(vm.errors().is_empty());
    /// vm.sync()?;
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn clear_errors(&self) {
        self.shared().errors.lock().clear();
    }

    /// Runs `f` on `blob`'s bytes once every earlier write to it is done, and returns its result.
    ///
    /// # Errors
    ///
    /// The blob's poison (the root error of what failed upstream), `Deadlock`,
    /// `ReentrantWait`, `EngineShutDown`.
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().build()?;
    /// let b = vm.new_blob(4);
    /// vm.write_blob(&b, |bytes| bytes.copy_from_slice(&[1, 2, 3, 4]))?;
    /// let sum = vm.read_blob(&b, |bytes| bytes.iter().map(|&x| x as u32).sum::<u32>())?;
    /// assert_eq!(sum, 10);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn read_blob<R: Send + 'static>(
        &self,
        blob: &Counted<Blob>,
        f: impl FnOnce(&[u8]) -> R + Send + 'static,
    ) -> Result<R> {
        if in_engine() {
            return Err(Error::ReentrantWait {
                op: "access_blob".into(),
            });
        }
        let w = Arc::new(Waiter::new());
        let slot: HostSlot<R> = Arc::new(Mutex::new(None));
        let (w2, s2) = (w.clone(), slot.clone());
        let access = AccessBlobByCallback::new(blob.clone(), false, move |r| {
            host_reply(&s2, &w2, || {
                // SAFETY: this callback runs as the compute of an instruction that reads
                // `blob`, so every earlier writer has finished and no later writer starts until
                // it returns.
                r.map(|b| f(unsafe { b.bytes_ref() }))
            })
        })
        .waited();
        // Host reads run on the main CPU stream; soft sync orders them.
        self.run_then_wait(None, StreamId::CPU, access, &w, "read_blob")?;
        self.host_result(&slot)
    }

    /// What a host access's closure returned, from its slot: its panic goes on on the calling
    /// thread, as a panic in a closure passed to `std::thread::scope` does.
    fn host_result<R>(&self, slot: &HostSlot<R>) -> Result<R> {
        match slot.lock().take() {
            Some(Ok(r)) => self.or_failed(r),
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            None => self.or_failed(Err(Error::EngineShutDown)),
        }
    }

    /// Runs `f` on `blob`'s bytes for writing, ordered after every earlier access.
    ///
    /// # Errors
    ///
    /// As [`read_blob`](Self::read_blob), plus `OutOfMemory` if the blob could not be allocated.
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().build()?;
    /// let b = vm.new_blob(4);
    /// let n = vm.write_blob(&b, |bytes| {
    ///     bytes.fill(9);
    ///     bytes.len()
    /// })?;
    /// assert_eq!(n, 4);
    /// assert_eq!(vm.read_blob(&b, |bytes| bytes.to_vec())?, vec![9; 4]);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn write_blob<R: Send + 'static>(
        &self,
        blob: &Counted<Blob>,
        f: impl FnOnce(&mut [u8]) -> R + Send + 'static,
    ) -> Result<R> {
        if in_engine() {
            return Err(Error::ReentrantWait {
                op: "access_blob".into(),
            });
        }
        let w = Arc::new(Waiter::new());
        let slot: HostSlot<R> = Arc::new(Mutex::new(None));
        let (w2, s2) = (w.clone(), slot.clone());
        let access = AccessBlobByCallback::new(blob.clone(), true, move |r| {
            host_reply(&s2, &w2, || {
                r.map(|b| {
                    b.clear_poison();
                    // SAFETY: this callback runs as the compute of an instruction that writes
                    // `blob`, so it has exclusive access until it returns.
                    f(unsafe { b.bytes_mut() })
                })
            })
        })
        .waited();
        self.run_then_wait(None, StreamId::CPU, access, &w, "write_blob")?;
        self.host_result(&slot)
    }

    /// Registers a probe: polled by the scheduler every pass until it returns `true`. A probe
    /// that panics is dropped (the panic is logged through `tracing`); the engine goes on.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{atomic::{AtomicUsize, Ordering}, Arc};
    /// let vm = eddy_vm::Vm::builder().build()?;
    /// let polls = Arc::new(AtomicUsize::new(0));
    /// let p = polls.clone();
    /// vm.add_probe(move || p.fetch_add(1, Ordering::Relaxed) + 1 == 3); // done on its third poll
    /// while polls.load(Ordering::Relaxed) < 3 {
    ///     std::thread::yield_now();
    /// }
    /// vm.sync()?;
    /// assert_eq!(polls.load(Ordering::Relaxed), 3, "not polled once done");
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn add_probe(&self, probe: impl FnMut() -> bool + Send + 'static) {
        let mut p = self.shared().probes.lock();
        p.push(Box::new(probe));
        self.shared().has_probes.store(true, Ordering::Release);
        drop(p);
        self.wake();
    }

    /// Counters and allocator figures.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::Noop, StreamId, Vm};
    /// let vm = Vm::builder().build()?;
    /// vm.run(StreamId::CPU, Noop::new(vec![], vec![vm.new_blob(4)]))?;
    /// vm.sync()?;
    /// let st = vm.stats();
    /// assert_eq!(st.in_flight, 0);
    /// assert_eq!(st.inserted, st.erased, "nothing is live");
    /// assert!(st.erased >= 1);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn stats(&self) -> VmStats {
        let sh = self.shared();
        let alloc = self
            .allocator(Device::CPU)
            .map(|a| a.stats())
            .unwrap_or_default();
        sh.stats
            .snapshot(sh.in_flight.load(Ordering::Acquire) as u64, alloc)
    }

    /// The CPU allocator's figures.
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().build()?;
    /// let b = vm.new_blob(1024); // above `INLINE_BYTES`: from the allocator
    /// vm.write_blob(&b, |bytes| bytes.fill(0))?;
    /// assert!(vm.alloc_stats().in_use >= 1024);
    /// vm.release(&b)?;
    /// vm.sync()?;
    /// assert_eq!(vm.alloc_stats().in_use, 0);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn alloc_stats(&self) -> AllocStats {
        self.allocator(Device::CPU)
            .map(|a| a.stats())
            .unwrap_or_default()
    }

    /// The recorded timeline (empty unless tracing was on).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::Noop, StreamId, Vm};
    /// let vm = Vm::builder().trace(true).build()?;
    /// vm.run(StreamId::CPU, Noop::new(vec![], vec![vm.new_blob(4)]))?;
    /// vm.sync()?;
    /// assert!(vm.trace_events().iter().any(|e| e.name == "noop" && e.stream == 0));
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn trace_events(&self) -> Vec<TraceEvent> {
        self.shared().trace.lock().clone()
    }

    /// Clears the recorded timeline.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::Noop, StreamId, Vm};
    /// let vm = Vm::builder().trace(true).build()?;
    /// vm.run(StreamId::CPU, Noop::new(vec![], vec![vm.new_blob(4)]))?;
    /// vm.sync()?;
    /// assert!(!vm.trace_events().is_empty());
    /// vm.clear_trace();
    /// assert!(vm.trace_events().is_empty());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn clear_trace(&self) {
        self.shared().trace.lock().clear();
    }

    /// Turns recording of the timeline on or off from now on (the builder's `trace` switch,
    /// `EDDY_VM_TRACE`, sets it at start). Instructions already running are not affected.
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().build()?;
    /// assert!(!vm.is_tracing());
    /// vm.set_trace(true);
    /// assert!(vm.is_tracing());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn set_trace(&self, on: bool) {
        self.shared().tracing.store(on, Ordering::Relaxed);
    }

    /// Whether the timeline is being recorded.
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().trace(true).build()?;
    /// assert!(vm.is_tracing());
    /// vm.set_trace(false);
    /// assert!(!vm.is_tracing());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn is_tracing(&self) -> bool {
        self.shared().tracing.load(Ordering::Relaxed)
    }

    /// Writes the timeline as chrome-trace / Perfetto JSON.
    ///
    /// # Errors
    ///
    /// I/O errors from `w`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::Noop, StreamId, Vm};
    /// let vm = Vm::builder().trace(true).build()?;
    /// vm.run(StreamId::CPU, Noop::new(vec![], vec![vm.new_blob(4)]))?;
    /// vm.sync()?;
    /// let mut json = Vec::new();
    /// vm.write_chrome_trace(&mut json).unwrap();
    /// let json = String::from_utf8(json).unwrap();
    /// assert!(json.starts_with("{\"traceEvents\":["));
    /// assert!(json.contains("\"name\":\"noop\""));
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn write_chrome_trace(&self, w: impl std::io::Write) -> std::io::Result<()> {
        let names: Vec<String> = self
            .shared()
            .streams
            .iter()
            .map(|s| s.policy.name().to_string())
            .collect();
        crate::trace::write_chrome_trace(&self.trace_events(), &names, w)
    }

    /// Stops accepting work and waits at most `d` for everything in flight to drain and the
    /// engine's threads to exit. On timeout the stuck threads are left behind (not joined).
    ///
    /// # Errors
    ///
    /// `ShutdownTimeout` with the number of instructions still live.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::Noop, Error, StreamId, Vm};
    /// use std::time::Duration;
    /// let vm = Vm::builder().build()?;
    /// vm.run(StreamId::CPU, Noop::new(vec![], vec![vm.new_blob(4)]))?;
    /// vm.shutdown_timeout(Duration::from_secs(10))?; // drains, then stops
    /// assert_eq!(vm.stats().in_flight, 0);
    /// assert_eq!(vm.run(StreamId::CPU, Noop::new(vec![], vec![])), Err(Error::EngineShutDown));
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn shutdown_timeout(&self, d: Duration) -> Result<()> {
        let sh = self.shared();
        sh.shutdown.store(true, Ordering::Release);
        self.wake();
        match &self.inner.mode {
            Mode::Sync(s) => {
                let mut s = s.lock();
                self.run_sync_passes(&mut s)?;
                if !s.is_idle() {
                    return Err(Error::ShutdownTimeout {
                        pending: sh.in_flight.load(Ordering::Acquire) as u64,
                    });
                }
                s.shutdown_workers();
                Ok(())
            }
            Mode::Threaded { handle: h, .. } => {
                let deadline = Instant::now() + d.min(crate::config::FOREVER);
                let mut g = sh.sched_exited.lock();
                while !*g {
                    if sh.sched_exited_cv.wait_until(&mut g, deadline).timed_out() && !*g {
                        sh.abandoned.store(true, Ordering::Release);
                        return Err(Error::ShutdownTimeout {
                            pending: sh.in_flight.load(Ordering::Acquire) as u64,
                        });
                    }
                }
                drop(g);
                if let Some(h) = h.lock().take() {
                    let _ = h.join();
                }
                Ok(())
            }
        }
    }

    /// Replaces an `EngineShutDown` by the engine's failure, if it failed.
    fn or_failed<R>(&self, r: Result<R>) -> Result<R> {
        match r {
            Err(Error::EngineShutDown) => Err(self.shut_down_error()),
            r => r,
        }
    }

    /// `EngineFailed` if an engine thread failed, else `EngineShutDown`.
    fn shut_down_error(&self) -> Error {
        self.shared()
            .failed
            .lock()
            .clone()
            .unwrap_or(Error::EngineShutDown)
    }

    /// Whether the engine is shutting down or shut down.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let vm = eddy_vm::Vm::builder().build()?;
    /// assert!(!vm.is_shut_down());
    /// vm.shutdown_timeout(Duration::from_secs(10))?;
    /// assert!(vm.is_shut_down());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn is_shut_down(&self) -> bool {
        self.shared().shutdown.load(Ordering::Acquire)
    }
}

/// Where a host access (`read_blob`, `write_blob`) leaves its closure's result, or its panic.
type HostSlot<R> = Arc<Mutex<Option<std::thread::Result<Result<R>>>>>;

/// Runs a host access's closure on the engine, catching its panic, then fills `slot` and wakes
/// `w`: the caller gets the result or the panic, and never waits out the deadlock timeout for
/// a signal that a panic skipped.
fn host_reply<R>(slot: &HostSlot<R>, w: &Waiter, f: impl FnOnce() -> Result<R>) {
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    *slot.lock() = Some(out);
    w.signal();
}

impl Drop for VmInner {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::Release);
        self.shared.pending.notifier.notify();
        match &self.mode {
            Mode::Threaded { handle: h, .. } => {
                let stuck = self.shared.abandoned.load(Ordering::Acquire)
                    && !*self.shared.sched_exited.lock();
                if let Some(h) = h.lock().take()
                    && !stuck
                {
                    let _ = h.join();
                } // else: `shutdown_timeout` gave up on it; leave it behind, as documented
            }
            Mode::Sync(s) => {
                let mut s = s.lock();
                if self.shared.failed.lock().is_none() {
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        s.run_until_stalled()
                    }));
                    if r.is_err() {
                        tracing::error!("the engine failed while draining at drop");
                    }
                }
                s.shutdown_workers();
            }
        }
    }
}

#[cfg(all(test, not(loom), not(shuttle)))]
mod catch_up_tests {
    //! A submitter that holds the scheduler while work is queued (`Vm::catch_up`): it runs
    //! the queued work itself only if all of it is cheap, and always in submission order.
    use super::*;
    use crate::testing::{Cheap, Log, Record};

    fn sched(vm: &Vm) -> &Mutex<Scheduler> {
        match &vm.inner.mode {
            Mode::Threaded { sched, .. } => sched,
            Mode::Sync(_) => unreachable!("a threaded engine"),
        }
    }

    #[test]
    fn a_submitter_runs_queued_cheap_work_then_its_own_in_order() {
        let vm = Vm::builder().build().unwrap();
        let (log, x) = (Log::default(), vm.new_blob(8));
        // Holding the scheduler, as a submitter that found it free does: the scheduler
        // thread runs no pass meanwhile, and `run` finds it taken, so it queues.
        let mut s = sched(&vm).lock();
        for tag in [1, 2] {
            let op = Cheap(Record::new(tag, vec![x.clone()], vec![x.clone()], &log));
            vm.run(StreamId::CPU, op).unwrap();
        }
        assert!(log.lock().is_empty(), "queued, not run");
        let mut third = Cheap(Record::new(3, vec![x.clone()], vec![], &log));
        assert!(!s.try_run_now(StreamId::CPU, &mut third), "not idle");
        assert!(vm.catch_up(&mut s).unwrap(), "idle after catching up");
        assert_eq!(*log.lock(), vec![1, 2], "the queued ones, in order");
        assert!(s.try_run_now(StreamId::CPU, &mut third));
        assert_eq!(*log.lock(), vec![1, 2, 3]);
        drop(s);
        vm.sync().unwrap();
        let st = vm.stats();
        assert_eq!((st.inserted, st.erased, st.in_flight), (4, 4, 0), "{st:?}");
    }

    /// A chain of cheap kernels, each submitting the next, as a stream of work from elsewhere:
    /// the thread catching up runs a bounded part of it and leaves the rest to the scheduler
    /// thread (it used to run all of it, however long, before returning to its own op).
    #[test]
    fn catching_up_stops_when_work_keeps_arriving() {
        fn link(vm: &Vm, log: &Log, x: &Counted<Blob>, left: u64) -> Cheap<Record> {
            let (v, l, b) = (vm.clone(), log.clone(), x.clone());
            let r = Record::new(left, vec![x.clone()], vec![x.clone()], log).with_body(move || {
                if left > 0 {
                    v.run(StreamId::CPU, link(&v, &l, &b, left - 1)).unwrap();
                }
            });
            Cheap(r)
        }
        const LEN: u64 = 2_000;
        let vm = Vm::builder().build().unwrap();
        let (log, x) = (Log::default(), vm.new_blob(8));
        let mut s = sched(&vm).lock();
        vm.run(StreamId::CPU, link(&vm, &log, &x, LEN)).unwrap();
        assert!(!vm.catch_up(&mut s).unwrap(), "stopped with work left");
        let ran = log.lock().len();
        assert!((1..100).contains(&ran), "ran {ran} of {} here", LEN + 1);
        drop(s);
        // A sync waits for what was submitted before it; each kernel submits its successor,
        // so sync until the chain is done.
        let deadline = Instant::now() + Duration::from_secs(60);
        while log.lock().len() as u64 <= LEN && Instant::now() < deadline {
            vm.sync().unwrap();
        }
        let want: Vec<u64> = (0..=LEN).rev().collect();
        assert_eq!(*log.lock(), want, "all of the chain, once each, in order");
    }

    /// A long chain queued while this thread held the scheduler is caught up in full: the
    /// bound leaves room for one instruction per pass.
    #[test]
    fn a_long_queued_chain_is_caught_up_in_full() {
        let vm = Vm::builder().build().unwrap();
        let (log, x) = (Log::default(), vm.new_blob(8));
        let mut s = sched(&vm).lock();
        for tag in 0..500 {
            let op = Record::new(tag, vec![x.clone()], vec![x.clone()], &log).fusable(false);
            vm.run(StreamId::CPU, Cheap(op)).unwrap();
        }
        assert!(vm.catch_up(&mut s).unwrap(), "idle after catching up");
        assert_eq!(*log.lock(), (0..500).collect::<Vec<u64>>());
        drop(s);
        vm.sync().unwrap();
    }

    #[test]
    fn work_that_is_not_cheap_stays_with_the_scheduler_thread() {
        let vm = Vm::builder().build().unwrap();
        let (log, x) = (Log::default(), vm.new_blob(8));
        let mut s = sched(&vm).lock();
        vm.run(StreamId::CPU, Record::new(1, vec![], vec![x.clone()], &log))
            .unwrap();
        let op = Cheap(Record::new(2, vec![x.clone()], vec![], &log));
        vm.run(StreamId::CPU, op).unwrap();
        assert!(!vm.catch_up(&mut s).unwrap(), "a queued op is not cheap");
        assert!(log.lock().is_empty(), "nothing ran on this thread");
        drop(s);
        vm.sync().unwrap(); // the scheduler thread (or this one, waiting) runs both
        assert_eq!(*log.lock(), vec![1, 2]);
    }
}
