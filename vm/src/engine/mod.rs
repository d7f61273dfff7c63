//! [`Vm`]: the engine handle. Its methods are grouped by concern: `submit` (run, run_op,
//! release, back-pressure), `wait` (sync, barrier, errors, dump), `host` (blob access,
//! probes), `observe` (stats, timeline) and `shutdown`. The state its threads share is
//! `Shared` (`shared.rs`).
//!
//! # Fast paths
//!
//! The paths that keep a small op cheap (the book's benchmarks chapter has their measurements,
//! under `dispatch_small` and `dispatch_mixed`):
//!
//! - **Run at once on an idle engine** (`Vm::run`, `Vm::run_op`, `scheduler/inline.rs`): a
//!   cheap instruction submitted while nothing is live runs on the submitting thread, without
//!   a node, a queue or a wake-up, which cost more than the op.
//! - **Borrowed operands** (`Vm::run_op` with `Shallow`): a kernel run at once takes no new
//!   handles to its blobs; each handle is an atomic increment and decrement.
//! - **Catch-up** (`Vm::catch_up`): a submitter that finds only cheap work queued runs it
//!   itself, in order, and returns to the at-once path, rather than queueing behind it.
//! - **Waiting after a pass** (`Vm::sched_after_pass`): a submitter that finds the scheduler
//!   thread in a short pass spins briefly for it instead of queueing.
//! - **Passes on the waiting thread** (`Vm::wait`, `Vm::run_then_wait`): a thread that waits
//!   on an engine whose scheduler thread sleeps runs the passes itself rather than paying for
//!   the wake-up. A sync that ends a promoted window takes the scheduler before it submits the
//!   window's plan run (`Vm::promotion_boundary`), so the run it waits for is its own to compute.
//! - **Release at once** (`Vm::release_marked`): a blob released on an idle engine is freed
//!   without an instruction; one with inline memory needs nothing at all.
//! - **One node, one push** (`Vm::submit_checked`): when neither the stream nor the last
//!   stream of an operand is asynchronous no soft sync can be needed, so a single instruction
//!   skips the builder, on an engine with a device too. `run_op` learns whether to look from
//!   the one flag word it loads anyway (`Shared::submit_flags`).
//! - **`Vm::run_op` inlined into each op** (`#[inline(always)]`): out of line, the kernel the
//!   caller just built is passed through memory and read back wider than it was written, a
//!   store-forwarding stall.

mod promotion;
#[cfg(test)]
pub(crate) use promotion::Timed;
mod capture;
mod hooks;
mod host;
mod plan;

pub use promotion::PromotionStats;
mod observe;
mod shutdown;
mod submit;
mod wait;

use crate::Counted;
use crate::alloc::DeviceAllocator;
use crate::blob::Blob;
use crate::builder::{InstructionsBuilder, Receive};
use crate::config::{Config, VmBuilder};
use crate::error::{Error, Result};
use crate::instruction::InstrList;
use crate::scheduler::Scheduler;
use crate::shared::{Shared, StreamEntry};
use crate::stream::{Device, StreamId, StreamKind, StreamPolicy};
use parking_lot::Mutex;
use qcell::QCellOwner;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

pub(super) enum Mode {
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
    pub(super) mode: Mode,
    /// Automatic promotion's state, where the switch is on (boxed: the fields beside it are
    /// read on every op's path).
    pub(super) promotion: Option<Box<promotion::Promotion>>,
    /// Set by [`Vm::leak`]: a handle is never dropped, so the engine lives until the process
    /// ends.
    forever: std::sync::atomic::AtomicBool,
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
                allocator: p.allocator().unwrap_or_else(|| b.allocator_for(p.device())),
                policy: p,
                merge: std::sync::OnceLock::new(),
            })
            .collect();
        let shared = Arc::new(Shared::new(b.config.clone(), streams, owner.id()));
        if b.config.trace {
            for st in &shared.streams {
                st.policy.tracing_changed(true);
            }
        }
        let sched = Scheduler::new(shared.clone(), owner)?;
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
                    sh.scheduler_exited();
                })
                .map_err(|e| Error::spawn("eddy-scheduler", &e))?;
            Mode::Threaded {
                handle: Mutex::new(Some(h)),
                sched,
            }
        };
        let promotion = (shared.config.promotion)
            .then(|| Box::new(promotion::Promotion::new(shared.config.promotion_measured)));
        if let Some(a) = &promotion {
            shared.caches.lock().push(a.shelf());
        }
        Ok(Vm {
            inner: Arc::new(VmInner {
                shared,
                mode,
                promotion,
                forever: std::sync::atomic::AtomicBool::new(false),
            }),
        })
    }

    /// This engine for the rest of the process: its handle is leaked, so the engine never
    /// shuts down. A layer above that keeps handles per value (the tensor layer, one per
    /// tensor) may then hold the engine without counting, two locked instructions fewer per
    /// value, as it does for its process-wide default engine. For a program's one engine
    /// (a command line tool, a benchmark), not for engines made and dropped in a loop: each
    /// keeps its threads.
    ///
    /// # Examples
    ///
    /// ```
    /// let vm: &'static eddy_vm::Vm = eddy_vm::Vm::builder().build()?.leak();
    /// assert!(vm.lives_forever());
    /// assert!(vm.clone().lives_forever());
    /// assert!(!eddy_vm::Vm::builder().build()?.lives_forever());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn leak(self) -> &'static Vm {
        // Set before the handle is leaked: `self` holds the engine alive in between.
        (self.inner.forever).store(true, Ordering::Relaxed);
        Box::leak(Box::new(self))
    }

    /// Whether [`leak`](Self::leak) made this engine live until the process ends.
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().build()?;
    /// assert!(!vm.lives_forever());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    #[inline]
    pub fn lives_forever(&self) -> bool {
        self.inner.forever.load(Ordering::Relaxed)
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

    /// The engine's *transport dependence*: a blob of no bytes that every collective
    /// instruction lists among its outputs, so that the engine runs the collectives of the
    /// process one after another in program order. Ranks in several processes issue them in
    /// the same order (each runs the same program), so no two wait on each other's second
    /// collective: the order that keeps collectives from deadlocking.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::Noop, StreamId};
    /// let vm = eddy_vm::Vm::builder().build()?;
    /// let t = vm.transport().clone();
    /// assert_eq!(t.bytes(), 0);
    /// vm.run(StreamId::CPU, Noop::new(vec![], vec![t.clone()]))?;
    /// vm.run(StreamId::CPU, Noop::new(vec![], vec![t]))?;
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn transport(&self) -> &Counted<Blob> {
        &self.shared().transport
    }

    /// The turn to submit one collective: a collective of several ranks is one instruction
    /// per rank, each writing the [transport dependence](Self::transport), and holding the
    /// turn while submitting them keeps another thread's collective from coming between two
    /// of them. Every rank then sees the process's collectives in one order, the order of
    /// the turns (`vm/src/shuttle_tests.rs` checks it against random schedules). Hold it only
    /// while submitting: the instructions run after it is let go.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::Noop, StreamId};
    /// let vm = eddy_vm::Vm::builder().build()?;
    /// let t = vm.transport().clone();
    /// {
    ///     let _turn = vm.transport_turn();
    ///     vm.run(StreamId::CPU, Noop::new(vec![], vec![t.clone()]))?; // rank 0's part
    ///     vm.run(StreamId::CPU, Noop::new(vec![], vec![t]))?; // rank 1's part
    /// }
    /// vm.sync()?;
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn transport_turn(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.shared().transport_turn.lock()
    }

    /// A blob of no bytes that no instruction may use: it is released from the start, so
    /// an instruction given it is refused when submitted (`TensorReleased`), before anything
    /// runs. The storage of a handle whose values live elsewhere (a global tensor's). One per
    /// engine, shared by every such handle: making one costs a reference count.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::Noop, StreamId};
    /// let vm = eddy_vm::Vm::builder().build()?;
    /// let b = vm.unusable_blob();
    /// assert!(b.is_released());
    /// let e = vm.run(StreamId::CPU, Noop::new(vec![], vec![b.clone()]));
    /// assert!(matches!(e, Err(eddy_vm::Error::TensorReleased { .. })));
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn unusable_blob(&self) -> Counted<Blob> {
        self.shared().unusable.clone()
    }

    /// The engine's own handle of [`unusable_blob`](Self::unusable_blob), borrowed: it lives
    /// as long as the engine. A caller that keeps the engine alive may hold a bitwise copy
    /// that it never drops, a handle that costs no count.
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().build()?;
    /// assert!(eddy_vm::Counted::ptr_eq(vm.unusable_blob_ref(), &vm.unusable_blob()));
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn unusable_blob_ref(&self) -> &Counted<Blob> {
        &self.shared().unusable
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

    /// The stream of `device` that carries work of `kind`, if the engine has one: a CUDA
    /// device has a [`Host2Device`](StreamKind::Host2Device) and a
    /// [`Device2Host`](StreamKind::Device2Host) stream beside its compute stream, where copies
    /// from and to the host run, overlapping its kernels.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{stream::StreamKind, Device, StreamId, Vm};
    /// let vm = Vm::builder().build()?;
    /// assert_eq!(vm.stream_of(Device::CPU, StreamKind::Compute), Some(StreamId::CPU));
    /// assert_eq!(vm.stream_of(Device::CPU, StreamKind::Host2Device), None);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn stream_of(&self, device: Device, kind: StreamKind) -> Option<StreamId> {
        if kind == StreamKind::Compute {
            return self.device_stream(device);
        }
        self.shared()
            .streams
            .iter()
            .position(|s| s.policy.device() == device && s.policy.kind() == kind)
            .map(|i| StreamId(i as u32))
    }

    /// The lazy-job launcher stream of `device`, where plan runs go, if the engine has one
    /// (see [`VmBuilder::lazy_launcher`](crate::VmBuilder::lazy_launcher)).
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().lazy_launcher(true).cpu_devices(2).build()?;
    /// let (a, b) = (vm.launcher_stream(eddy_vm::Device::Cpu(0)), vm.launcher_stream(eddy_vm::Device::Cpu(1)));
    /// assert!(a.is_some() && b.is_some() && a != b);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn launcher_stream(&self, device: Device) -> Option<StreamId> {
        self.shared()
            .streams
            .iter()
            .position(|s| {
                s.policy.device() == device && s.policy.kind() == StreamKind::LazyJobLauncher
            })
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
        let flags = self.shared().divert_flags.load(Ordering::Acquire);
        if flags & crate::shared::PROMOTION_HOLDING != 0 {
            // Op calls held for a plan run first: what the builder takes comes after them,
            // and its checks see where they ran.
            self.promotion_interrupt();
        }
        InstructionsBuilder::new(self.shared(), self)
    }
}

/// The builder hands its list to the engine through this.
impl Receive for Vm {
    fn receive(&self, list: InstrList, n: usize) -> Result<()> {
        Vm::receive(self, list, n)
    }
}

impl VmBuilder {
    /// Starts the engine.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for a bad setting (an unparsable variable, water marks out of order, a
    /// zero window); `ThreadSpawn` where the operating system refuses one of its threads.
    /// `DeviceUnavailable` for a device that cannot be opened.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Error, VmBuilder};
    /// let vm = VmBuilder::new().build()?;
    /// assert_eq!(vm.stream_count(), 1);
    /// let bad = VmBuilder::new().water_marks(1, 2).build();
    /// assert!(matches!(bad, Err(Error::InvalidArgument { .. })));
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn build(mut self) -> Result<Vm> {
        let wakeable = self.open_devices()?;
        let vm = Vm::start(self)?;
        for set_waker in wakeable {
            set_waker(Arc::new(vm.waker()));
        }
        Ok(vm)
    }
}
