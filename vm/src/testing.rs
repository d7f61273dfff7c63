//! Mock policies for testing the engine without real kernels (also used by benches).
//!
//! - [`Noop`]: reads and writes blobs, does nothing (fusable).
//! - [`Link`]: reads one blob and writes another, with no list to allocate (the benchmarks').
//! - [`Record`]: appends its tag to a shared log when it computes (optionally running a body).
//! - [`Gate`]: blocks its worker until the test opens it (test-controlled completion on CPU).
//! - [`Fail`] and [`Panic`]: a kernel that returns an error or panics.
//! - [`DeviceOp`]: launches its work on an [`AsyncStream`](crate::stream::async_device::AsyncStream).
//! - [`Cheap`]: any of these, marked cheap (an idle engine runs it on the submitting thread).

use crate::blob::Blob;
use crate::error::{Error, Result};
use crate::instruction::{ComputeCtx, InstructionPolicy};
use crate::stream::async_device::AsyncStream;
use crate::Counted;
use parking_lot::{Condvar, Mutex};
use std::sync::Arc;

/// Reads `inputs`, writes `outputs`, does nothing.
pub struct Noop {
    inputs: Vec<Counted<Blob>>,
    outputs: Vec<Counted<Blob>>,
}

impl Noop {
    /// A no-op over the given operands.
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
    fn compute(&mut self, _ctx: &mut ComputeCtx<'_>) -> Result<()> {
        Ok(())
    }
}

/// Reads `0[0]`, writes `0[1]`, does nothing; fusable. The two handles live in the policy
/// itself, which fits in an instruction node, so submitting one allocates nothing: the engine
/// benchmarks (`vm_chain`, `vm_fanout`) and `examples/cg_chain.rs` measure the engine alone.
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
    fn compute(&mut self, _ctx: &mut ComputeCtx<'_>) -> Result<()> {
        Ok(())
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
    pub fn fusable(mut self, on: bool) -> Self {
        self.fusable = on;
        self
    }
    /// Runs `f` when computed, before logging.
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
#[derive(Default)]
pub struct Gate {
    open: Mutex<bool>,
    cv: Condvar,
}

impl Gate {
    /// A closed gate.
    pub fn new() -> Arc<Self> {
        Arc::new(Gate::default())
    }
    /// Opens the gate.
    pub fn open(&self) {
        *self.open.lock() = true;
        self.cv.notify_all();
    }
    /// Blocks until the gate is open.
    pub fn wait(&self) {
        let mut g = self.open.lock();
        while !*g {
            self.cv.wait(&mut g);
        }
    }
    /// An instruction that blocks until the gate opens, writing `outputs`.
    pub fn hold(self: &Arc<Self>, outputs: Vec<Counted<Blob>>) -> GateOp {
        GateOp {
            gate: self.clone(),
            outputs,
        }
    }
}

/// See [`Gate::hold`].
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
pub struct Fail {
    inputs: Vec<Counted<Blob>>,
    outputs: Vec<Counted<Blob>>,
}

impl Fail {
    /// Fails when computed, poisoning `outputs`.
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
pub struct Panic {
    outputs: Vec<Counted<Blob>>,
}

impl Panic {
    /// Panics when computed, poisoning `outputs`.
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
pub struct DeviceOp {
    inputs: Vec<Counted<Blob>>,
    outputs: Vec<Counted<Blob>>,
    work: Option<Box<dyn FnOnce() + Send>>,
}

impl DeviceOp {
    /// A device op over the given operands.
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
