//! Mock policies for testing the engine without real kernels (also used by benches).
//!
//! - [`Noop`]: reads and writes blobs, does nothing (fusable).
//! - [`Link`]: reads one blob and writes another, with no list to allocate (the benchmarks').
//! - [`Record`]: appends its tag to a shared log when it computes (optionally running a body).
//! - [`Gate`]: blocks its worker until the test opens it (test-controlled completion on CPU).
//! - [`Fail`] and [`Panic`]: a kernel that returns an error or panics.
//! - [`DeviceOp`]: launches its work on an [`AsyncStream`](crate::stream::async_device::AsyncStream).
//! - [`Cheap`]: any of these, marked cheap (an idle engine runs it on the submitting thread).

use crate::Counted;
use crate::blob::Blob;
use crate::error::{Error, Result};
use crate::instruction::{ComputeCtx, InstructionPolicy};
use crate::stream::async_device::AsyncStream;
use parking_lot::{Condvar, Mutex};
use std::sync::Arc;

/// Reads `inputs`, writes `outputs`, does nothing.
///
/// # Examples
///
/// ```
/// use eddy_vm::{testing::Noop, StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (a, b) = (vm.new_blob(8), vm.new_blob(8));
/// vm.run(StreamId::CPU, Noop::new(vec![], vec![a.clone()]))?;
/// vm.run(StreamId::CPU, Noop::new(vec![a], vec![b.clone()]))?;
/// vm.sync()?;
/// assert!(b.is_allocated(), "`prepare` gave the output memory");
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub struct Noop {
    inputs: Vec<Counted<Blob>>,
    outputs: Vec<Counted<Blob>>,
}

impl Noop {
    /// A no-op over the given operands.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::Noop, InstructionPolicy, Vm};
    /// let vm = Vm::builder().build().unwrap();
    /// let op = Noop::new(vec![vm.new_blob(4), vm.new_blob(4)], vec![vm.new_blob(4)]);
    /// assert_eq!((op.inputs().len(), op.outputs().len()), (2, 1));
    /// assert!(op.fusable());
    /// ```
    pub fn new(inputs: Vec<Counted<Blob>>, outputs: Vec<Counted<Blob>>) -> Self {
        Noop { inputs, outputs }
    }
}

impl InstructionPolicy for Noop {
    fn name(&self) -> &str {
        "noop"
    }
    fn inputs(&self) -> &[Counted<Blob>] {
        &self.inputs
    }
    fn outputs(&self) -> &[Counted<Blob>] {
        &self.outputs
    }
    fn fusable(&self) -> bool {
        true
    }
    fn deferred_drop(&self) -> bool {
        true
    }
    fn compute(&mut self, _ctx: &mut ComputeCtx<'_>) -> Result<()> {
        Ok(())
    }
}

/// Reads `0[0]`, writes `0[1]`, does nothing; fusable. The two handles live in the policy
/// itself, which fits in an instruction node, so submitting one allocates nothing: the engine
/// benchmarks (`vm_chain`, `vm_fanout`) and `benches/probes/cg_chain.rs` measure the engine alone.
///
/// ```
/// use eddy_vm::{testing::Link, StreamId, Vm};
/// let vm = Vm::builder().build().unwrap();
/// let (a, b) = (vm.new_blob(0), vm.new_blob(0));
/// vm.run(StreamId::CPU, Link([a, b])).unwrap();
/// vm.sync().unwrap();
/// ```
pub struct Link(pub [Counted<Blob>; 2]);

impl InstructionPolicy for Link {
    fn name(&self) -> &str {
        "chain_op"
    }
    fn inputs(&self) -> &[Counted<Blob>] {
        &self.0[..1]
    }
    fn outputs(&self) -> &[Counted<Blob>] {
        &self.0[1..]
    }
    fn fusable(&self) -> bool {
        true
    }
    fn deferred_drop(&self) -> bool {
        true
    }
    fn compute(&mut self, _ctx: &mut ComputeCtx<'_>) -> Result<()> {
        Ok(())
    }
}

/// A kernel that adds its byte to every byte of its first input (or of nothing: 0) and writes
/// the sums to its outputs: for tests of op calls, captures and plans.
///
/// ```
/// use eddy_vm::{testing::AddByte, StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (a, b) = (vm.new_blob(2), vm.new_blob(2));
/// vm.run_op(StreamId::CPU, AddByte(3), &[], &[&a], true)?;
/// vm.run_op(StreamId::CPU, AddByte(4), &[&a], &[&b], true)?;
/// assert_eq!(vm.read_blob(&b, |m| m.to_vec())?, [7, 7]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub struct AddByte(pub u8);

impl crate::instruction::Kernel for AddByte {
    fn name(&self) -> &str {
        "add_byte"
    }
    fn compute(
        &mut self,
        inputs: &[Counted<Blob>],
        outputs: &[Counted<Blob>],
        _ctx: &mut ComputeCtx<'_>,
    ) -> Result<()> {
        let src: Vec<u8> = match inputs.first() {
            // SAFETY: the engine gives a kernel its inputs to read.
            Some(i) => unsafe { i.bytes_ref().to_vec() },
            None => Vec::new(),
        };
        for o in outputs {
            // SAFETY: the engine gives a kernel its outputs to write, alone.
            let out = unsafe { o.bytes_mut() };
            for (k, v) in out.iter_mut().enumerate() {
                *v = src.get(k).copied().unwrap_or(0).wrapping_add(self.0);
            }
        }
        Ok(())
    }
}

/// [`AddByte`] that may write its output over its input
/// ([`Kernel::may_alias`](crate::instruction::Kernel::may_alias)): it copies the input before
/// it writes, so the two may be the same memory.
///
/// ```
/// use eddy_vm::plan::{Plan, PlanSpec, Slot, Step};
/// use eddy_vm::{StreamId, Vm, testing::AddByteOver};
/// let vm = Vm::builder().build()?;
/// // in → t0 → t1 → out: t1 is written over t0.
/// let step = |i, o| Step::new(Box::new(AddByteOver(1)), vec![i], vec![o]);
/// let steps = vec![
///     step(Slot::Input(0), Slot::Temp(0)),
///     step(Slot::Temp(0), Slot::Temp(1)),
///     step(Slot::Temp(1), Slot::Output(0)),
/// ];
/// let plan = Plan::new(&vm, PlanSpec::new(StreamId::CPU, steps, 1, 1, vec![64, 64], vec![]))?;
/// assert_eq!(plan.memory().arena, 64);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub struct AddByteOver(pub u8);

impl crate::instruction::Kernel for AddByteOver {
    fn name(&self) -> &str {
        "add_byte_over"
    }
    fn compute(
        &mut self,
        inputs: &[Counted<Blob>],
        outputs: &[Counted<Blob>],
        ctx: &mut ComputeCtx<'_>,
    ) -> Result<()> {
        // The input is copied out before any output is borrowed (see `AddByte`).
        crate::instruction::Kernel::compute(&mut AddByte(self.0), inputs, outputs, ctx)
    }
    fn may_alias(&self, _output: usize, _input: usize) -> bool {
        true
    }
}

/// Marks a policy [cheap](InstructionPolicy::cheap): an idle engine runs it at once on the
/// submitting thread.
///
/// ```
/// use eddy_vm::{testing::{Cheap, Noop}, StreamId, Vm};
/// let vm = Vm::builder().build().unwrap();
/// let x = vm.new_blob(8);
/// vm.sync().unwrap(); // the engine is idle
/// vm.run(StreamId::CPU, Cheap(Noop::new(vec![], vec![x.clone()]))).unwrap();
/// assert!(x.is_allocated(), "ran before `run` returned");
/// ```
pub struct Cheap<P>(pub P);

impl<P: InstructionPolicy> InstructionPolicy for Cheap<P> {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn inputs(&self) -> &[Counted<Blob>] {
        self.0.inputs()
    }
    fn outputs(&self) -> &[Counted<Blob>] {
        self.0.outputs()
    }
    fn fusable(&self) -> bool {
        self.0.fusable()
    }
    fn handles_poison(&self) -> bool {
        self.0.handles_poison()
    }
    fn cheap(&self) -> bool {
        true
    }
    fn deferred_drop(&self) -> bool {
        self.0.deferred_drop()
    }
    fn prepare(
        &mut self,
        ctx: &mut crate::instruction::PrepareCtx<'_>,
    ) -> Result<(), crate::instruction::PrepareError> {
        self.0.prepare(ctx)
    }
    fn compute(&mut self, ctx: &mut ComputeCtx<'_>) -> Result<()> {
        self.0.compute(ctx)
    }
}

/// A shared, append-only log of computed tags.
pub type Log = Arc<Mutex<Vec<u64>>>;

/// Appends `tag` to a log when computed; with `fusable` it can join fused groups.
///
/// # Examples
///
/// ```
/// use eddy_vm::{testing::{Log, Record}, StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let x = vm.new_blob(4);
/// let log = Log::default();
/// vm.run(StreamId::CPU, Record::new(1, vec![], vec![x.clone()], &log))?;
/// vm.run(StreamId::CPU, Record::new(2, vec![x.clone()], vec![], &log))?;
/// vm.sync()?;
/// assert_eq!(*log.lock(), vec![1, 2]); // the reader after the writer
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub struct Record {
    /// The tag logged.
    pub tag: u64,
    inputs: Vec<Counted<Blob>>,
    outputs: Vec<Counted<Blob>>,
    log: Log,
    fusable: bool,
    body: Option<Box<dyn FnMut() + Send>>,
}

impl Record {
    /// A recording instruction.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::testing::{Log, Record};
    /// let log = Log::default();
    /// let r = Record::new(7, vec![], vec![], &log);
    /// assert_eq!(r.tag, 7);
    /// assert!(log.lock().is_empty(), "logged only when computed");
    /// ```
    pub fn new(
        tag: u64,
        inputs: Vec<Counted<Blob>>,
        outputs: Vec<Counted<Blob>>,
        log: &Log,
    ) -> Self {
        Record {
            tag,
            inputs,
            outputs,
            log: log.clone(),
            fusable: true,
            body: None,
        }
    }
    /// Sets whether it may be fused.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::{Log, Record}, InstructionPolicy};
    /// let log = Log::default();
    /// assert!(InstructionPolicy::fusable(&Record::new(1, vec![], vec![], &log)));
    /// let alone = Record::new(2, vec![], vec![], &log).fusable(false);
    /// assert!(!InstructionPolicy::fusable(&alone));
    /// ```
    pub fn fusable(mut self, on: bool) -> Self {
        self.fusable = on;
        self
    }
    /// Runs `f` when computed, before logging.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::{Log, Record}, StreamId, Vm};
    /// let vm = Vm::builder().build()?;
    /// let log = Log::default();
    /// let l = log.clone();
    /// let r = Record::new(1, vec![], vec![], &log).with_body(move || l.lock().push(0));
    /// vm.run(StreamId::CPU, r)?;
    /// vm.sync()?;
    /// assert_eq!(*log.lock(), vec![0, 1]); // the body, then the tag
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn with_body(mut self, f: impl FnMut() + Send + 'static) -> Self {
        self.body = Some(Box::new(f));
        self
    }
}

impl InstructionPolicy for Record {
    fn name(&self) -> &str {
        "record"
    }
    fn inputs(&self) -> &[Counted<Blob>] {
        &self.inputs
    }
    fn outputs(&self) -> &[Counted<Blob>] {
        &self.outputs
    }
    fn fusable(&self) -> bool {
        self.fusable
    }
    fn compute(&mut self, _ctx: &mut ComputeCtx<'_>) -> Result<()> {
        if let Some(f) = self.body.as_mut() {
            f();
        }
        self.log.lock().push(self.tag);
        Ok(())
    }
}

/// A gate a test opens; instructions that [`Gate::hold`] it block their stream until then.
///
/// # Examples
///
/// ```
/// use eddy_vm::stream::{cpu::CpuStream, Exec};
/// use eddy_vm::testing::{Gate, Log, Record};
/// use eddy_vm::{StreamId, Vm};
/// let mut b = Vm::builder();
/// let worker = b.add_stream(std::sync::Arc::new(CpuStream::new("worker", Exec::Worker)));
/// let vm = b.build()?;
/// let (x, gate, log) = (vm.new_blob(4), Gate::new(), Log::default());
/// vm.run(worker, gate.hold(vec![x.clone()]))?;
/// vm.run(StreamId::CPU, Record::new(1, vec![x.clone()], vec![], &log))?;
/// assert!(log.lock().is_empty(), "the reader waits for the held writer");
/// gate.open();
/// vm.sync()?;
/// assert_eq!(*log.lock(), vec![1]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
#[derive(Default)]
pub struct Gate {
    open: Mutex<bool>,
    cv: Condvar,
}

impl Gate {
    /// A closed gate.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::testing::Gate;
    /// let gate = Gate::new(); // closed
    /// let g = gate.clone();
    /// let opener = std::thread::spawn(move || g.open());
    /// gate.wait(); // returns once the other thread opened it
    /// opener.join().unwrap();
    /// ```
    pub fn new() -> Arc<Self> {
        Arc::new(Gate::default())
    }
    /// Opens the gate.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::Gate, StreamId, Vm};
    /// let vm = Vm::builder().build()?;
    /// let gate = Gate::new();
    /// gate.open(); // before: the instruction does not block at all
    /// let x = vm.new_blob(4);
    /// vm.run(StreamId::CPU, gate.hold(vec![x.clone()]))?;
    /// vm.sync()?;
    /// assert!(x.is_allocated());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn open(&self) {
        *self.open.lock() = true;
        self.cv.notify_all();
    }
    /// Blocks until the gate is open.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::testing::Gate;
    /// use std::sync::{Arc, atomic::{AtomicBool, Ordering}};
    /// let (gate, opened) = (Gate::new(), Arc::new(AtomicBool::new(false)));
    /// let (g, o) = (gate.clone(), opened.clone());
    /// let t = std::thread::spawn(move || {
    ///     o.store(true, Ordering::SeqCst);
    ///     g.open();
    /// });
    /// gate.wait();
    /// assert!(opened.load(Ordering::SeqCst));
    /// t.join().unwrap();
    /// ```
    pub fn wait(&self) {
        let mut g = self.open.lock();
        while !*g {
            self.cv.wait(&mut g);
        }
    }
    /// An instruction that blocks until the gate opens, writing `outputs`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::Gate, InstructionPolicy, Vm};
    /// let vm = Vm::builder().build().unwrap();
    /// let gate = Gate::new();
    /// let op = gate.hold(vec![vm.new_blob(4)]);
    /// assert_eq!((op.name(), op.outputs().len()), ("gate", 1));
    /// ```
    pub fn hold(self: &Arc<Self>, outputs: Vec<Counted<Blob>>) -> GateOp {
        GateOp {
            gate: self.clone(),
            outputs,
        }
    }
}

/// See [`Gate::hold`].
///
/// # Examples
///
/// ```
/// use eddy_vm::{testing::Gate, StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let gate = Gate::new();
/// let x = vm.new_blob(4);
/// let op = gate.hold(vec![x.clone()]);
/// gate.open();
/// vm.run(StreamId::CPU, op)?;
/// vm.sync()?;
/// assert!(x.is_allocated());
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub struct GateOp {
    gate: Arc<Gate>,
    outputs: Vec<Counted<Blob>>,
}

impl InstructionPolicy for GateOp {
    fn name(&self) -> &str {
        "gate"
    }
    fn outputs(&self) -> &[Counted<Blob>] {
        &self.outputs
    }
    fn compute(&mut self, _ctx: &mut ComputeCtx<'_>) -> Result<()> {
        self.gate.wait();
        Ok(())
    }
}

/// A kernel that fails with a message.
///
/// # Examples
///
/// ```
/// use eddy_vm::{testing::Fail, Error, StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let x = vm.new_blob(4);
/// vm.run(StreamId::CPU, Fail::new(vec![], vec![x.clone()]))?;
/// let e = vm.sync().unwrap_err();
/// assert!(matches!(&e, Error::KernelFailed { op, .. } if op == "fail_op"));
/// assert_eq!(x.poison(), Some(e));
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub struct Fail {
    inputs: Vec<Counted<Blob>>,
    outputs: Vec<Counted<Blob>>,
}

impl Fail {
    /// Fails when computed, poisoning `outputs`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::{Fail, Noop}, StreamId, Vm};
    /// let vm = Vm::builder().build()?;
    /// let (x, y) = (vm.new_blob(4), vm.new_blob(4));
    /// vm.run(StreamId::CPU, Fail::new(vec![], vec![x.clone()]))?;
    /// vm.run(StreamId::CPU, Noop::new(vec![x.clone()], vec![y.clone()]))?;
    /// assert!(vm.sync().is_err());
    /// assert_eq!(y.poison(), x.poison(), "downstream outputs carry the root error");
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn new(inputs: Vec<Counted<Blob>>, outputs: Vec<Counted<Blob>>) -> Self {
        Fail { inputs, outputs }
    }
}

impl InstructionPolicy for Fail {
    fn name(&self) -> &str {
        "fail_op"
    }
    fn inputs(&self) -> &[Counted<Blob>] {
        &self.inputs
    }
    fn outputs(&self) -> &[Counted<Blob>] {
        &self.outputs
    }
    fn compute(&mut self, _ctx: &mut ComputeCtx<'_>) -> Result<()> {
        Err(Error::kernel("fail_op", "injected failure"))
    }
}

/// A kernel that panics.
///
/// # Examples
///
/// ```
/// use eddy_vm::{testing::Panic, Error, StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let x = vm.new_blob(4);
/// vm.run(StreamId::CPU, Panic::new(vec![x.clone()]))?;
/// assert!(matches!(vm.sync(), Err(Error::KernelPanic { .. })));
/// assert!(x.is_poisoned());
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub struct Panic {
    outputs: Vec<Counted<Blob>>,
}

impl Panic {
    /// Panics when computed, poisoning `outputs`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::Panic, InstructionPolicy, Vm};
    /// let vm = Vm::builder().build().unwrap();
    /// let op = Panic::new(vec![vm.new_blob(4)]);
    /// assert_eq!((op.name(), op.outputs().len()), ("panic_op", 1));
    /// ```
    pub fn new(outputs: Vec<Counted<Blob>>) -> Self {
        Panic { outputs }
    }
}

impl InstructionPolicy for Panic {
    fn name(&self) -> &str {
        "panic_op"
    }
    fn outputs(&self) -> &[Counted<Blob>] {
        &self.outputs
    }
    fn compute(&mut self, _ctx: &mut ComputeCtx<'_>) -> Result<()> {
        panic!("injected panic in panic_op");
    }
}

/// Launches `work` on the asynchronous test device when computed.
///
/// # Examples
///
/// ```
/// use eddy_vm::{stream::async_device::AsyncDevice, testing::DeviceOp, Vm};
/// use std::sync::{Arc, atomic::{AtomicBool, Ordering}};
/// let dev = AsyncDevice::new(0);
/// let mut b = Vm::builder();
/// let q = b.add_stream(Arc::new(dev.stream("compute")));
/// let vm = b.build()?;
/// let ran = Arc::new(AtomicBool::new(false));
/// let r = ran.clone();
/// vm.run(q, DeviceOp::new(vec![], vec![], move || r.store(true, Ordering::SeqCst)))?;
/// vm.sync()?;
/// assert_eq!(dev.queued(0), 1, "launched, not run");
/// dev.run_all();
/// assert!(ran.load(Ordering::SeqCst));
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub struct DeviceOp {
    inputs: Vec<Counted<Blob>>,
    outputs: Vec<Counted<Blob>>,
    work: Option<Box<dyn FnOnce() + Send>>,
}

impl DeviceOp {
    /// A device op over the given operands.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::DeviceOp, StreamId, Vm};
    /// let vm = Vm::builder().build()?;
    /// // On a stream that is not an `AsyncStream`, the op fails instead of launching.
    /// vm.run(StreamId::CPU, DeviceOp::new(vec![], vec![], || {}))?;
    /// assert_eq!(vm.sync().unwrap_err().op(), Some("device_op"));
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn new(
        inputs: Vec<Counted<Blob>>,
        outputs: Vec<Counted<Blob>>,
        work: impl FnOnce() + Send + 'static,
    ) -> Self {
        DeviceOp {
            inputs,
            outputs,
            work: Some(Box::new(work)),
        }
    }
}

impl InstructionPolicy for DeviceOp {
    fn name(&self) -> &str {
        "device_op"
    }
    fn inputs(&self) -> &[Counted<Blob>] {
        &self.inputs
    }
    fn outputs(&self) -> &[Counted<Blob>] {
        &self.outputs
    }
    fn compute(&mut self, ctx: &mut ComputeCtx<'_>) -> Result<()> {
        let s = ctx
            .stream()
            .as_any()
            .downcast_ref::<AsyncStream>()
            .ok_or_else(|| Error::kernel("device_op", "not on an async test stream"))?;
        if let Some(w) = self.work.take() {
            s.launch(w);
        }
        Ok(())
    }
}

/// Arms (or disarms) the engine's fail points (feature `failpoints`) for fault-injection
/// tests; until then a fail point costs one relaxed load and never consults `fail`'s registry.
///
/// ```
/// eddy_vm::testing::arm_failpoints(true);
/// eddy_vm::testing::arm_failpoints(false);
/// ```
pub fn arm_failpoints(on: bool) {
    #[cfg(feature = "failpoints")]
    crate::FAILPOINTS_ARMED.store(on, std::sync::atomic::Ordering::Relaxed);
    #[cfg(not(feature = "failpoints"))]
    let _ = on;
}
