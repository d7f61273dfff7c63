//! [`VmBuilder`]: the engine's switches, from code or `EDDY_VM_*` environment variables.

use crate::alloc::{AllocMode, CpuBackend, DeviceAllocator};
use crate::error::{Error, Result};
use crate::stream::cpu::CpuStream;
use crate::stream::{Device, Exec, StreamId, StreamPolicy};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Gives a device the function that wakes its engine's scheduler (see `Vm::waker`).
pub(crate) type SetWaker = Box<dyn FnOnce(Arc<dyn Fn() + Send + Sync>)>;

/// The longest timeout or spin a `VmBuilder` keeps: a century, far below what makes
/// `Instant::now() + d` overflow.
pub(crate) const FOREVER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// The most CPU devices an engine may have ([`VmBuilder::cpu_devices`]).
pub const MAX_CPU_DEVICES: u32 = 64;

/// The engine's settings. Every field has an `EDDY_VM_*` variable (see [`VmBuilder::from_env`]).
///
/// # Examples
///
/// ```
/// let c = eddy_vm::Config::default();
/// assert_eq!((c.window, c.high_water, c.low_water), (10, 4096, 2048));
/// assert!(c.fusion && !c.sync_mode && !c.trace);
/// assert_eq!(c.capacity, None);
/// ```
#[derive(Clone, Debug)]
pub struct Config {
    /// Run everything on the submitting thread, in order (`EDDY_VM_SYNC=1`). This is also the
    /// reference executor the differential tests compare against.
    pub sync_mode: bool,
    /// Received instructions ingested per scheduler pass (`EDDY_VM_WINDOW`, default 10).
    pub window: usize,
    /// `receive` blocks once this many instructions are in flight (`EDDY_VM_HIGH_WATER`,
    /// default 4096). Low enough that the instructions in flight stay in the caches: a
    /// submitter far ahead of the scheduler makes it read every node cold from memory.
    pub high_water: usize,
    /// ... until no more than this many are (`EDDY_VM_LOW_WATER`, default 2048).
    pub low_water: usize,
    /// Fuse runs of fusable same-stream instructions (`EDDY_VM_FUSION=0` to turn off).
    pub fusion: bool,
    /// Cap in bytes on each device's default allocator (`EDDY_VM_CAPACITY`, e.g. `64M`). `None`:
    /// the device's own size; for CPU devices the host's limit, the smaller of physical memory
    /// and the cgroup's limit ([`host_limit`](crate::alloc::host_limit)).
    pub capacity: Option<usize>,
    /// A wait that sees nothing released for this long fails with `Deadlock`
    /// (`EDDY_VM_TIMEOUT_MS`, default 600 000).
    pub timeout: Duration,
    /// Caching or pass-through allocation (`EDDY_VM_ALLOCATOR=caching|passthrough`).
    pub alloc_mode: AllocMode,
    /// Where the CPU devices' streams compute (`EDDY_VM_CPU_EXEC=inline|worker`, default inline).
    pub cpu_exec: Exec,
    /// How many CPU devices the engine has, `cpu:0` to `cpu:{n-1}`, each with its own compute
    /// stream and allocator (`EDDY_VM_CPU_DEVICES`, default 1, at most 64).
    pub cpu_devices: u32,
    /// Whether each CPU device gets a lazy-job launcher stream, on its own worker thread, where
    /// the runs of compiled plans go (`EDDY_VM_LAZY_LAUNCHER=1`, default off: plans run on the
    /// device's compute stream).
    pub lazy_launcher: bool,
    /// Whether each CPU device gets a collective stream on a worker thread of its own, even
    /// an engine of one device (`EDDY_VM_COLLECTIVE_WORKERS=1`, default off): a collective
    /// between processes then waits there, and the scheduler thread runs the compute it
    /// overlaps meanwhile. Off, an engine of several devices has collective streams that run
    /// on the scheduler thread, and one of a single device runs collectives on its compute
    /// stream: on a host of few cores the extra thread costs more than the overlap saves.
    pub collective_workers: bool,
    /// Whether the engine has a transport stream (`EDDY_VM_TRANSPORT_STREAM=1`, default off),
    /// where collectives between processes are handed to a communication thread and return
    /// at once (see [`stream::transport`](crate::stream::transport)): compute overlaps them,
    /// and back-to-back collectives pipeline. It pays where the communication thread has a
    /// core of its own; where every core computes, the overlap slows both (MPI moves the
    /// bytes of a collective only while the thread runs), hence off by default.
    pub transport_stream: bool,
    /// Whether the engine promotes a thread's op calls between sync points to a plan once
    /// they repeat (`EDDY_VM_PROMOTION=1`, default off; see `VmBuilder::promotion`).
    pub promotion: bool,
    /// Whether promotion times each kind of window both ways and runs eagerly for a while a
    /// kind whose plan runs are slower (default on; `EDDY_VM_PROMOTION=always` turns promotion
    /// on without it; see `VmBuilder::promotion_measured`).
    pub promotion_measured: bool,
    /// How many CUDA devices the engine opens, `cuda:0` to `cuda:{n-1}`, each with compute and
    /// copy streams and their allocators (`EDDY_VM_CUDA_DEVICES`, a number or `all`; default 0).
    /// Needs the `cuda` feature; `u32::MAX` means every device the machine has.
    pub cuda_devices: u32,
    /// How long the scheduler keeps polling after its last progress before sleeping
    /// (`EDDY_VM_SPIN_US`, default 1000).
    pub spin: Duration,
    /// Record a chrome-trace timeline of every instruction (`EDDY_VM_TRACE=1`).
    pub trace: bool,
    /// How many live instructions a deadlock dump lists (`EDDY_VM_DUMP_LIMIT`, default 32).
    pub dump_limit: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            sync_mode: false,
            window: 10,
            high_water: 4096,
            low_water: 2048,
            fusion: true,
            capacity: None,
            timeout: Duration::from_secs(600),
            alloc_mode: AllocMode::Caching,
            cpu_exec: Exec::Inline,
            cpu_devices: 1,
            lazy_launcher: false,
            collective_workers: false,
            transport_stream: false,
            promotion: false,
            promotion_measured: true,
            cuda_devices: 0,
            spin: Duration::from_millis(1),
            trace: false,
            dump_limit: 32,
        }
    }
}

/// Builds a [`Vm`](crate::Vm).
///
/// # Examples
///
/// ```
/// use eddy_vm::{Vm, stream::{cpu::CpuStream, Exec}};
/// use std::sync::Arc;
/// let mut b = Vm::builder().window(32).fusion(false);
/// let side = b.add_stream(Arc::new(CpuStream::new("cpu-side", Exec::Worker)));
/// let vm = b.build().unwrap();
/// assert_eq!(vm.stream_count(), 2);
/// assert_eq!(side.0, 1);
/// ```
pub struct VmBuilder {
    pub(crate) config: Config,
    env_error: Option<Error>,
    pub(crate) streams: Vec<Arc<dyn StreamPolicy>>,
    pub(crate) allocators: HashMap<Device, Arc<DeviceAllocator>>,
}

impl Default for VmBuilder {
    fn default() -> Self {
        Self::from_env()
    }
}

impl VmBuilder {
    /// The defaults, without reading the environment.
    ///
    /// # Examples
    ///
    /// ```
    /// let b = eddy_vm::VmBuilder::new();
    /// assert_eq!(b.config().window, 10);
    /// assert_eq!(b.build().unwrap().stream_count(), 1);
    /// ```
    pub fn new() -> Self {
        VmBuilder {
            config: Config::default(),
            env_error: None,
            streams: Vec::new(),
            allocators: HashMap::new(),
        }
    }

    /// Synchronous single-thread mode.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::{Log, Record}, StreamId, VmBuilder};
    /// let vm = VmBuilder::new().sync_mode(true).build()?;
    /// let log = Log::default();
    /// vm.run(StreamId::CPU, Record::new(1, vec![], vec![vm.new_blob(4)], &log))?;
    /// assert_eq!(*log.lock(), vec![1], "ran on this thread before `run` returned");
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn sync_mode(mut self, on: bool) -> Self {
        self.config.sync_mode = on;
        self
    }
    /// The ingest window.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::VmBuilder;
    /// assert_eq!(VmBuilder::new().window(32).build()?.config().window, 32);
    /// assert!(VmBuilder::new().window(0).build().is_err());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn window(mut self, n: usize) -> Self {
        self.config.window = n;
        self
    }
    /// Back-pressure water marks (`receive` blocks above `high` until at most `low` are live).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::VmBuilder;
    /// let vm = VmBuilder::new().water_marks(64, 16).build()?;
    /// assert_eq!((vm.config().high_water, vm.config().low_water), (64, 16));
    /// assert!(VmBuilder::new().water_marks(16, 64).build().is_err(), "low above high");
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn water_marks(mut self, high: usize, low: usize) -> Self {
        self.config.high_water = high;
        self.config.low_water = low;
        self
    }
    /// Fusion on or off.
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::VmBuilder::new().fusion(false).build()?;
    /// assert!(!vm.config().fusion);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn fusion(mut self, on: bool) -> Self {
        self.config.fusion = on;
        self
    }
    /// A cap on each device's default allocator; `None` (the default) for the device's own size
    /// (for CPU devices, [`host_limit`](crate::alloc::host_limit)).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{stream::Device, VmBuilder};
    /// let vm = VmBuilder::new().capacity(Some(1 << 20)).build()?;
    /// assert_eq!(vm.allocator(Device::CPU).unwrap().capacity(), Some(1 << 20));
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn capacity(mut self, bytes: Option<usize>) -> Self {
        self.config.capacity = bytes;
        self
    }
    /// The deadlock timeout of waits: more than 0, and at most a century (longer ones, such as
    /// `Duration::MAX`, are taken as a century).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let vm = eddy_vm::VmBuilder::new().timeout(Duration::from_secs(5)).build()?;
    /// assert_eq!(vm.config().timeout, Duration::from_secs(5));
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn timeout(mut self, d: Duration) -> Self {
        self.config.timeout = d;
        self
    }
    /// Caching or pass-through allocation.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{alloc::AllocMode, stream::Device, VmBuilder};
    /// let vm = VmBuilder::new().alloc_mode(AllocMode::Passthrough).build()?;
    /// assert_eq!(vm.allocator(Device::CPU).unwrap().mode(), AllocMode::Passthrough);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn alloc_mode(mut self, m: AllocMode) -> Self {
        self.config.alloc_mode = m;
        self
    }
    /// Where the main CPU stream computes.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{stream::Exec, StreamId, VmBuilder};
    /// let vm = VmBuilder::new().cpu_exec(Exec::Worker).build()?;
    /// assert_eq!(vm.stream_policy(StreamId::CPU).unwrap().exec(), Exec::Worker);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn cpu_exec(mut self, e: Exec) -> Self {
        self.config.cpu_exec = e;
        self
    }

    /// Gives the engine `n` CPU devices, `cpu:0` to `cpu:{n-1}` (1 to 64). Each has its own
    /// compute stream and allocator; they share the host's memory and kernels, so an op gives
    /// the same bits on every one of them, and a copy between two is an instruction ordered
    /// like any other.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Device, VmBuilder};
    /// let vm = VmBuilder::new().cpu_devices(3).build()?;
    /// assert_eq!(vm.devices(), [Device::Cpu(0), Device::Cpu(1), Device::Cpu(2)]);
    /// assert!(VmBuilder::new().cpu_devices(0).build().is_err());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn cpu_devices(mut self, n: u32) -> Self {
        self.config.cpu_devices = n;
        self
    }

    /// Gives each CPU device a lazy-job launcher stream (kind `LazyJobLauncher`, on its own
    /// worker thread): the runs of compiled plans ([`Plan::launch`](crate::plan::Plan::launch))
    /// go there instead of to the device's compute stream, so a long run does not hold the
    /// scheduler thread.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Device, VmBuilder, stream::StreamKind};
    /// let vm = VmBuilder::new().lazy_launcher(true).build()?;
    /// let s = vm.launcher_stream(Device::CPU).unwrap();
    /// assert_eq!(vm.stream_policy(s).unwrap().kind(), StreamKind::LazyJobLauncher);
    /// assert!(VmBuilder::new().build()?.launcher_stream(Device::CPU).is_none());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn lazy_launcher(mut self, on: bool) -> Self {
        self.config.lazy_launcher = on;
        self
    }

    /// Gives each CPU device a collective stream on a worker thread of its own, even an
    /// engine of one device: a collective between processes waits there, and the scheduler
    /// thread goes on with the compute it overlaps. Off by default; see
    /// [`Config::collective_workers`].
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Device, VmBuilder, stream::{Exec, StreamKind}};
    /// let vm = VmBuilder::new().collective_workers(true).build()?;
    /// let s = vm.stream_of(Device::CPU, StreamKind::Collective).unwrap();
    /// assert_eq!(vm.stream_policy(s).unwrap().exec(), Exec::Worker);
    /// let plain = VmBuilder::new().collective_workers(false).build()?;
    /// assert!(plain.stream_of(Device::CPU, StreamKind::Collective).is_none());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn collective_workers(mut self, on: bool) -> Self {
        self.config.collective_workers = on;
        self
    }

    /// Gives the engine a transport stream for collectives between processes; see
    /// [`Config::transport_stream`].
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Device, VmBuilder, stream::StreamKind};
    /// let vm = VmBuilder::new().transport_stream(true).build()?;
    /// let s = vm.stream_of(Device::CPU, StreamKind::Transport).unwrap();
    /// assert!(vm.stream_policy(s).unwrap().done_means_launched());
    /// assert!(VmBuilder::new().build()?.stream_of(Device::CPU, StreamKind::Transport).is_none());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn transport_stream(mut self, on: bool) -> Self {
        self.config.transport_stream = on;
        self
    }

    /// Promotes recurring op calls to plans: a thread's op calls between two sync points (host
    /// reads and writes, `sync`), once two such windows in a row have the same calls (kernels,
    /// streams, operand sizes and data flow), are held in the next window and run as one plan
    /// run, the same kernels on the same operands, with the values of eager execution bit for
    /// bit. A window that differs from the last runs as usual from the first call that
    /// differs. A kind of window whose plan runs are timed slower than its eager windows runs
    /// eagerly for a while (see [`promotion_measured`](Self::promotion_measured)).
    /// `Vm::promotion_stats` says what it did.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{StreamId, VmBuilder, testing::AddByte};
    /// let vm = VmBuilder::new().promotion(true).build()?;
    /// let (a, b, c) = (vm.new_blob(4), vm.new_blob(4), vm.new_blob(4));
    /// vm.write_blob(&a, |m| m.fill(1))?;
    /// for _ in 0..6 {
    ///     vm.run_op(StreamId::CPU, AddByte(1), &[&a], &[&b], false)?;
    ///     vm.run_op(StreamId::CPU, AddByte(1), &[&b], &[&c], false)?;
    ///     assert_eq!(vm.read_blob(&c, |m| m[0])?, 3); // a sync point: the window ends
    /// }
    /// // From the third window on, each ran as a plan, or ran eagerly where the clock said
    /// // that pays more (see `promotion_measured`).
    /// let s = vm.promotion_stats().unwrap();
    /// assert_eq!(s.windows, 6);
    /// assert!(s.plan_runs >= 1 || s.backed_off >= 1, "{s:?}");
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn promotion(mut self, on: bool) -> Self {
        self.config.promotion = on;
        self
    }

    /// Whether automatic promotion keeps promoting only what pays (default on). A promoted
    /// window's calls are held until its end, so they no longer overlap the computing of the
    /// calls before them; where the calls cost as much as the computing (a small model's
    /// step), that loses more than the plan saves. Measured, each kind of window is timed run
    /// eagerly and run as a plan (from the end of the host access before it to the end of its
    /// own), and a kind whose last plan runs are slower than its eager windows (or whose first
    /// plan run is over twice as slow, or whose held calls alone take longer than an eager
    /// window) runs eagerly for the next 8 windows of
    /// the kind, then tries again, waiting twice as long after each new loss (at most 1,024
    /// windows). `PromotionStats::backed_off` counts those turns. Meanwhile a window that
    /// begins like such a kind is not noted past its first call (`PromotionStats::quiet`), so
    /// its calls cost what they cost without promotion. Off,
    /// every recurring window is promoted: what a test of promotion itself wants, whatever
    /// the clock says (`EDDY_VM_PROMOTION=always`).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{StreamId, VmBuilder, testing::AddByte};
    /// let vm = VmBuilder::new().promotion(true).promotion_measured(false).build()?;
    /// let (a, b) = (vm.new_blob(4), vm.new_blob(4));
    /// vm.write_blob(&a, |m| m.fill(1))?;
    /// for _ in 0..20 {
    ///     vm.run_op(StreamId::CPU, AddByte(1), &[&a], &[&b], false)?;
    ///     assert_eq!(vm.read_blob(&b, |m| m[0])?, 2);
    /// }
    /// let s = vm.promotion_stats().unwrap();
    /// // The first window makes `b`; the others write over it, from the fourth on as plans.
    /// assert_eq!((s.plan_runs, s.backed_off), (17, 0));
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn promotion_measured(mut self, on: bool) -> Self {
        self.config.promotion_measured = on;
        self
    }

    /// Opens `n` CUDA devices, `cuda:0` to `cuda:{n-1}` (`u32::MAX`: all the machine has), each
    /// with three in-order streams (compute, host-to-device, device-to-host; see
    /// [`Vm::stream_of`](crate::Vm::stream_of)) and a caching allocator for each: device memory
    /// for the first two, pinned host memory for the third. Needs the `cuda` feature.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Error, VmBuilder};
    /// // Without the feature, or on a machine without CUDA: a typed error, never a panic.
    /// if cfg!(not(feature = "cuda")) {
    ///     let e = VmBuilder::new().cuda_devices(1).build().unwrap_err();
    ///     assert!(matches!(e, Error::DeviceUnavailable { .. }), "{e}");
    /// }
    /// assert!(VmBuilder::new().cuda_devices(0).build().is_ok());
    /// ```
    pub fn cuda_devices(mut self, n: u32) -> Self {
        self.config.cuda_devices = n;
        self
    }
    /// The scheduler's spin time after progress (at most a century, as
    /// [`timeout`](Self::timeout)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let vm = eddy_vm::VmBuilder::new().spin(Duration::from_micros(100)).build()?;
    /// assert_eq!(vm.config().spin, Duration::from_micros(100));
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn spin(mut self, d: Duration) -> Self {
        self.config.spin = d;
        self
    }
    /// Record a chrome-trace timeline.
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::VmBuilder::new().trace(true).build()?;
    /// assert!(vm.is_tracing());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn trace(mut self, on: bool) -> Self {
        self.config.trace = on;
        self
    }

    /// Adds a stream; streams are numbered in order after the main CPU stream (0).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{stream::{cpu::CpuStream, Exec}, StreamId, VmBuilder};
    /// use std::sync::Arc;
    /// let mut b = VmBuilder::new();
    /// let side = b.add_stream(Arc::new(CpuStream::new("side", Exec::Worker)));
    /// assert_eq!(side, StreamId(1));
    /// let vm = b.build()?;
    /// assert_eq!(vm.stream_policy(side).unwrap().name(), "side");
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn add_stream(&mut self, policy: Arc<dyn StreamPolicy>) -> StreamId {
        self.streams.push(policy);
        StreamId(self.streams.len() as u32)
    }

    /// Uses `alloc` for `device` instead of a default CPU-backed allocator.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{alloc::{AllocMode, CpuBackend, DeviceAllocator}, stream::Device, VmBuilder};
    /// let alloc = DeviceAllocator::new(Box::new(CpuBackend::new(Some(4096))), AllocMode::Caching);
    /// let vm = VmBuilder::new().device_allocator(Device::CPU, alloc.clone()).build()?;
    /// assert!(std::sync::Arc::ptr_eq(&vm.allocator(Device::CPU).unwrap(), &alloc));
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn device_allocator(mut self, device: Device, alloc: Arc<DeviceAllocator>) -> Self {
        self.allocators.insert(device, alloc);
        self
    }

    /// The settings so far.
    ///
    /// # Examples
    ///
    /// ```
    /// let b = eddy_vm::VmBuilder::new().window(8).fusion(false);
    /// assert_eq!(b.config().window, 8);
    /// assert!(!b.config().fusion);
    /// ```
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Checks the settings and adds the streams and allocators of every device: what
    /// [`build`](Self::build) does before it starts the engine. Returns, for each device whose
    /// completions come from outside the engine, what gives it the engine's waker.
    pub(crate) fn open_devices(&mut self) -> Result<Vec<SetWaker>> {
        if let Some(e) = self.env_error.take() {
            return Err(e);
        }
        // "Forever" is a century: deadlines are `Instant::now() + d`, which overflows for
        // durations such as `Duration::MAX`.
        let c = &mut self.config;
        c.timeout = c.timeout.min(FOREVER);
        c.spin = c.spin.min(FOREVER);
        if c.window == 0 || c.low_water > c.high_water || c.high_water == 0 {
            return Err(Error::InvalidArgument {
                at: crate::error::Caller::UNKNOWN,
                op: "VmBuilder".into(),
                message: format!(
                    "need window > 0, high_water > 0 and low_water <= high_water (window {}, \
                     low {}, high {})",
                    c.window, c.low_water, c.high_water
                ),
            });
        }
        if c.timeout.is_zero() {
            return Err(Error::InvalidArgument {
                at: crate::error::Caller::UNKNOWN,
                op: "VmBuilder".into(),
                message: "the deadlock timeout must be longer than 0 (every wait would fail)"
                    .into(),
            });
        }
        if !(1..=MAX_CPU_DEVICES).contains(&c.cpu_devices) {
            return Err(Error::InvalidArgument {
                at: crate::error::Caller::UNKNOWN,
                op: "VmBuilder".into(),
                message: format!(
                    "need 1 to {MAX_CPU_DEVICES} CPU devices, not {}",
                    c.cpu_devices
                ),
            });
        }
        let main: Arc<dyn StreamPolicy> = Arc::new(CpuStream::new("cpu", c.cpu_exec));
        self.streams.insert(0, main);
        for n in 1..c.cpu_devices {
            let s = CpuStream::new(format!("cpu:{n}"), c.cpu_exec).on_device(n);
            self.streams.push(Arc::new(s));
        }
        if c.cpu_devices > 1 || c.collective_workers {
            let exec = match c.collective_workers {
                true => Exec::Worker,
                false => c.cpu_exec,
            };
            for n in 0..c.cpu_devices {
                let s = CpuStream::new(format!("cpu:{n}:collective"), exec)
                    .on_device(n)
                    .collective();
                self.streams.push(Arc::new(s));
            }
        }
        if c.lazy_launcher {
            for n in 0..c.cpu_devices {
                let s = CpuStream::new(format!("lazy:cpu:{n}"), Exec::Worker)
                    .on_device(n)
                    .launcher();
                self.streams.push(Arc::new(s));
            }
        }
        let mut wakeable = Vec::new();
        if c.transport_stream {
            let s = Arc::new(crate::stream::transport::TransportStream::new("transport"));
            self.streams.push(s.clone());
            wakeable.push(Box::new(move |w| s.set_waker(w)) as SetWaker);
        }
        let n_cuda = c.cuda_devices;
        wakeable.extend(self.open_cuda(n_cuda)?);
        Ok(wakeable)
    }

    /// Opens `n` CUDA devices (`u32::MAX`: all), adding three streams for each (compute,
    /// host-to-device, device-to-host), each with an allocator of its own: the compute and
    /// host-to-device streams over the device's memory (one capacity), the device-to-host
    /// stream over pinned host memory, where its outputs (host tensors) land.
    #[cfg(feature = "cuda")]
    fn open_cuda(&mut self, n: u32) -> Result<Vec<SetWaker>> {
        use crate::stream::StreamKind;
        use crate::stream::cuda::{CudaDevice, device_count};
        use crate::stream::cuda_memory::{CudaBackend, PinnedBackend};
        if n == 0 {
            return Ok(Vec::new());
        }
        let n = if n == u32::MAX { device_count()? } else { n };
        let mode = self.config.alloc_mode;
        let mut out = Vec::new();
        for i in 0..n {
            let d = CudaDevice::open(i)?;
            let backend = CudaBackend::new(d.clone(), self.config.capacity);
            let h2d_pool = DeviceAllocator::new(Box::new(backend.share()), mode);
            // Device memory is never host memory: blobs keep no bytes inline.
            let alloc = DeviceAllocator::new(Box::new(backend), mode);
            let pinned = d.pinned_pool(|d| {
                let backend = PinnedBackend::new(d.clone(), crate::alloc::host_limit());
                DeviceAllocator::new(Box::new(backend), crate::alloc::AllocMode::Caching)
            });
            self.allocators.insert(Device::Cuda(i), alloc);
            let compute = d.stream(&format!("cuda:{i}"), StreamKind::Compute)?;
            let h2d = d.stream(&format!("cuda:{i}:h2d"), StreamKind::Host2Device)?;
            let d2h = d.stream(&format!("cuda:{i}:d2h"), StreamKind::Device2Host)?;
            self.streams.push(Arc::new(compute));
            self.streams.push(Arc::new(h2d.with_pool(h2d_pool)));
            self.streams.push(Arc::new(d2h.with_pool(pinned)));
            out.push(Box::new(move |w| d.set_waker(w)) as SetWaker);
        }
        Ok(out)
    }

    /// Without the `cuda` feature, asking for a CUDA device is an error.
    #[cfg(not(feature = "cuda"))]
    fn open_cuda(&mut self, n: u32) -> Result<Vec<SetWaker>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        Err(Error::DeviceUnavailable {
            at: crate::error::Caller::UNKNOWN,
            op: "VmBuilder".into(),
            device: "cuda:0".into(),
            reason: "this build has no CUDA support (feature `cuda`)".into(),
        })
    }

    pub(crate) fn allocator_for(&mut self, device: Device) -> Arc<DeviceAllocator> {
        let (cap, mode) = (self.config.capacity, self.config.alloc_mode);
        self.allocators
            .entry(device)
            .or_insert_with(|| {
                let cap = cap.or_else(crate::alloc::host_limit);
                DeviceAllocator::new(Box::new(CpuBackend::new(cap)), mode)
            })
            .clone()
    }
}

#[path = "config_env.rs"]
mod env;

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
