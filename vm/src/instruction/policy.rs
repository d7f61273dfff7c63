//! The [`InstructionPolicy`] trait and the contexts its hooks receive.

use crate::Counted;
use crate::alloc::{AllocError, DeviceAllocator};
use crate::blob::Blob;
use crate::error::{Error, Result};
use crate::stream::{Event, StreamId, StreamPolicy};
use std::sync::Arc;

/// What an instruction does and what it touches.
///
/// The scheduler reads `inputs` and `outputs` to build the dependency DAG (reads and writes of
/// each blob's dependence), calls `prepare` on the scheduler thread when the instruction is
/// dispatched, and `compute` on the stream (inline on the scheduler thread or on a worker).
/// A failing or panicking `compute` poisons the outputs; instructions reading a poisoned blob
/// are skipped (their outputs poisoned with the same root error) unless `handles_poison`.
///
/// # Examples
///
/// ```
/// use eddy_vm::{Blob, Counted, Result, instruction::{ComputeCtx, InstructionPolicy}};
///
/// /// Writes one blob; a no-op kernel.
/// struct Touch(Vec<Counted<Blob>>);
/// impl InstructionPolicy for Touch {
///     fn name(&self) -> &str { "touch" }
///     fn outputs(&self) -> &[Counted<Blob>] { &self.0 }
///     fn compute(&mut self, _ctx: &mut ComputeCtx<'_>) -> Result<()> { Ok(()) }
/// }
///
/// let vm = eddy_vm::Vm::builder().build().unwrap();
/// let b = vm.new_blob(8);
/// vm.run(eddy_vm::StreamId::CPU, Touch(vec![b.clone()])).unwrap();
/// vm.sync().unwrap();
/// assert!(b.is_allocated());
/// ```
pub trait InstructionPolicy: Send + 'static {
    /// The op's name, used in errors, traces and dumps.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::instruction::{Barrier, InstructionPolicy};
    /// use eddy_vm::testing::Noop;
    /// assert_eq!(Barrier::new(|| {}).name(), "barrier");
    /// assert_eq!(Noop::new(vec![], vec![]).name(), "noop");
    /// ```
    fn name(&self) -> &str;

    /// Blobs read.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Counted, InstructionPolicy, testing::Link};
    /// let vm = eddy_vm::Vm::builder().build().unwrap();
    /// let (a, b) = (vm.new_blob(4), vm.new_blob(4));
    /// let op = Link([a.clone(), b]);
    /// assert_eq!(op.inputs().len(), 1);
    /// assert!(Counted::ptr_eq(&op.inputs()[0], &a));
    /// ```
    fn inputs(&self) -> &[Counted<Blob>] {
        &[]
    }

    /// Blobs written (also listed in `inputs` if read, as in an in-place op).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{InstructionPolicy, instruction::AccessBlobByCallback};
    /// let vm = eddy_vm::Vm::builder().build().unwrap();
    /// let x = vm.new_blob(4);
    /// let read = AccessBlobByCallback::new(x.clone(), false, |_| {});
    /// let write = AccessBlobByCallback::new(x.clone(), true, |_| {});
    /// assert_eq!((read.inputs().len(), read.outputs().len()), (1, 0));
    /// assert_eq!((write.inputs().len(), write.outputs().len()), (1, 1)); // read and written
    /// ```
    fn outputs(&self) -> &[Counted<Blob>] {
        &[]
    }

    /// Whether the instruction is cheap enough to be fused with its same-stream neighbours.
    /// Asked once, when the instruction is submitted.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{InstructionPolicy, instruction::Barrier, testing::Noop};
    /// assert!(Noop::new(vec![], vec![]).fusable());
    /// assert!(!Barrier::new(|| {}).fusable());
    /// ```
    fn fusable(&self) -> bool {
        false
    }

    /// Whether the instruction's compute frees memory that later allocations may need (as
    /// [`ReleaseTensor`](crate::instruction::ReleaseTensor)'s does). Such an instruction ends
    /// a fused unit, and fusion's look-ahead does not step over it: every member of a unit is
    /// prepared (its outputs allocated) before any computes, so a member after a free could
    /// not use the freed memory, and would report out of memory where running unfused would
    /// not. Asked once, when the instruction is submitted.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{InstructionPolicy, instruction::ReleaseTensor, testing::Noop, Vm};
    /// let vm = Vm::builder().build()?;
    /// assert!(ReleaseTensor::new(vm.new_blob(4)).frees_memory());
    /// assert!(!Noop::new(vec![], vec![]).frees_memory());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    fn frees_memory(&self) -> bool {
        false
    }

    /// Whether the engine may drop this policy later, and on a submitting thread, instead of
    /// on the scheduler thread when the instruction is released. Default: no.
    ///
    /// Answer yes only when dropping it has no effect anyone waits for: it lets go of blob
    /// handles and plain data, and wakes, sends or blocks on nothing. The engine then hands
    /// the node back to the submitting threads with the policy in it, and the thread that
    /// reuses the node drops it. That keeps each blob's reference count on the thread that
    /// keeps raising it: dropped on the scheduler, the count's cache line moved between the
    /// two cores twice per instruction, the largest cost of a queued instruction in the
    /// `vm_chain` profile. Each such policy is still dropped by the next barrier (so by the
    /// time [`Vm::sync`](crate::Vm::sync) returns, unless another submitting thread has already
    /// taken its node) or when the scheduler goes to sleep. Asked once, when the instruction is
    /// submitted.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{InstructionPolicy, instruction::Barrier, testing::Link, Vm};
    /// let vm = Vm::builder().build()?;
    /// assert!(Link([vm.new_blob(0), vm.new_blob(0)]).deferred_drop());
    /// assert!(!Barrier::new(|| {}).deferred_drop(), "a callback's drop glue is the user's");
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    fn deferred_drop(&self) -> bool {
        false
    }

    /// The kernel this instruction runs, for an instruction that is an op call (see
    /// [`OpCall`](crate::instruction::OpCall)): a device's [`UnitMerge`](crate::merge::UnitMerge)
    /// looks into the members of a fused unit through it. `None` (the default) for any other
    /// instruction, which no merge takes.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::instruction::{Barrier, InstructionPolicy, OpCall};
    /// use eddy_vm::{testing::AddByte, Vm};
    /// let vm = Vm::builder().build()?;
    /// let call = OpCall::new(AddByte(1), vec![].into(), vec![vm.new_blob(1)].into());
    /// assert_eq!(call.kernel().map(|k| k.name()), Some("add_byte"));
    /// assert!(Barrier::new(|| {}).kernel().is_none());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    fn kernel(&self) -> Option<&dyn super::Kernel> {
        None
    }

    /// Whether `compute` runs even when an input is poisoned (release and host access do).
    /// Asked once, when the instruction is submitted.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{InstructionPolicy, instruction::ReleaseTensor, testing::Noop};
    /// let vm = eddy_vm::Vm::builder().build().unwrap();
    /// assert!(ReleaseTensor::new(vm.new_blob(8)).handles_poison());
    /// assert!(!Noop::new(vec![], vec![]).handles_poison());
    /// ```
    fn handles_poison(&self) -> bool {
        false
    }

    /// Whether the policy marks its own outputs failed or not ([`handles_poison`] too): an
    /// error it returns is recorded, but does not mark every output failed. A plan run, whose
    /// outputs depend on different steps, marks only those that depend on a failure. Default:
    /// no.
    ///
    /// [`handles_poison`]: Self::handles_poison
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{InstructionPolicy, testing::Noop};
    /// assert!(!Noop::new(vec![], vec![]).poisons_selectively());
    /// ```
    fn poisons_selectively(&self) -> bool {
        false
    }

    /// Where the user's code called the op, named by the errors it reports, including one
    /// that surfaces later at a sync (see [`Caller`](crate::error::Caller)). Default: unknown;
    /// [`OpCall`](super::OpCall) remembers the caller of `OpCall::new`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{InstructionPolicy, testing::Noop};
    /// assert!(!Noop::new(vec![], vec![]).caller().is_known());
    /// ```
    fn caller(&self) -> crate::error::Caller {
        crate::error::Caller::UNKNOWN
    }

    /// Whether the work is about as cheap as queueing it (well under a microsecond). An idle
    /// engine then runs the instruction at once on the submitting thread instead of handing it
    /// to the scheduler: nothing is live to order it against, and a hand-off between threads
    /// costs more than the work (see the book's lifecycle chapter). Default: no.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{InstructionPolicy, testing::{Cheap, Noop}};
    /// assert!(!Noop::new(vec![], vec![]).cheap());
    /// assert!(Cheap(Noop::new(vec![], vec![])).cheap());
    /// ```
    fn cheap(&self) -> bool {
        false
    }

    /// Whether this is a barrier: it then runs on the scheduler thread once everything received
    /// before it is released, and takes part in no dependence. Asked once, when the
    /// instruction is submitted.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{InstructionPolicy, instruction::Barrier, testing::Noop};
    /// assert!(Barrier::new(|| {}).is_barrier());
    /// assert!(!Noop::new(vec![], vec![]).is_barrier());
    /// ```
    fn is_barrier(&self) -> bool {
        false
    }

    /// Allocates what `compute` needs; by default every output's memory.
    ///
    /// # Errors
    ///
    /// [`PrepareError::OutOfMemory`] starts the engine's OOM path (wait, shrink, retry once).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::alloc::{AllocMode, CpuBackend, DeviceAllocator};
    /// use eddy_vm::instruction::{InstructionPolicy, PrepareCtx};
    /// use eddy_vm::testing::Noop;
    /// let vm = eddy_vm::Vm::builder().build().unwrap();
    /// let x = vm.new_blob(1000);
    /// let alloc = DeviceAllocator::new(Box::new(CpuBackend::new(None)), AllocMode::Caching);
    /// let mut op = Noop::new(vec![], vec![x.clone()]);
    /// op.prepare(&mut PrepareCtx { allocator: &alloc }).unwrap();
    /// assert!(x.is_allocated());
    /// assert_eq!(alloc.stats().in_use, 1024);
    /// ```
    fn prepare(&mut self, ctx: &mut PrepareCtx<'_>) -> Result<(), PrepareError> {
        allocate_outputs(self.outputs(), ctx)
    }

    /// Does the work on the stream.
    ///
    /// # Errors
    ///
    /// Any error poisons the outputs and is reported at the next sync.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Error, StreamId, Vm, testing::Fail};
    /// let vm = Vm::builder().build()?;
    /// let x = vm.new_blob(4);
    /// vm.run(StreamId::CPU, Fail::new(vec![], vec![x.clone()]))?; // its `compute` fails
    /// assert!(matches!(vm.sync(), Err(Error::KernelFailed { .. })));
    /// assert!(x.is_poisoned());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    fn compute(&mut self, ctx: &mut ComputeCtx<'_>) -> Result<()>;
}

/// The default `prepare`: gives every output memory.
#[inline]
pub(crate) fn allocate_outputs(
    outputs: &[Counted<Blob>],
    ctx: &mut PrepareCtx<'_>,
) -> Result<(), PrepareError> {
    for o in outputs {
        o.ensure_allocated(ctx.allocator)
            .map_err(PrepareError::OutOfMemory)?;
    }
    Ok(())
}

/// Why `prepare` failed.
///
/// # Examples
///
/// ```
/// use eddy_vm::alloc::{AllocMode, CpuBackend, DeviceAllocator};
/// use eddy_vm::instruction::{InstructionPolicy, PrepareCtx, PrepareError};
/// use eddy_vm::testing::Noop;
/// let vm = eddy_vm::Vm::builder().build().unwrap();
/// let x = vm.new_blob(4096);
/// let full = DeviceAllocator::new(Box::new(CpuBackend::new(Some(1024))), AllocMode::Caching);
/// let mut op = Noop::new(vec![], vec![x]);
/// match op.prepare(&mut PrepareCtx { allocator: &full }) {
///     Err(PrepareError::OutOfMemory(e)) => assert_eq!(e.requested, 4096),
///     other => panic!("expected OutOfMemory, got {other:?}"),
/// }
/// ```
#[derive(Debug, Clone)]
pub enum PrepareError {
    /// An allocation failed; the engine shrinks its caches and retries once.
    OutOfMemory(AllocError),
    /// Anything else: the instruction fails.
    Other(Error),
}

/// What `prepare` gets: the allocator of the stream's device.
///
/// # Examples
///
/// ```
/// use eddy_vm::alloc::{AllocMode, CpuBackend, DeviceAllocator};
/// use eddy_vm::instruction::{InstructionPolicy, PrepareCtx, ReleaseTensor};
/// let vm = eddy_vm::Vm::builder().build().unwrap();
/// let x = vm.new_blob(1000);
/// let alloc = DeviceAllocator::new(Box::new(CpuBackend::new(None)), AllocMode::Caching);
/// let mut ctx = PrepareCtx { allocator: &alloc };
/// ReleaseTensor::new(x.clone()).prepare(&mut ctx).unwrap();
/// assert!(!x.is_allocated(), "a release allocates nothing");
/// ```
pub struct PrepareCtx<'a> {
    /// The device's allocator.
    pub allocator: &'a Arc<DeviceAllocator>,
}

/// What `compute` gets: its ids and the stream it runs on.
///
/// # Examples
///
/// ```
/// use eddy_vm::{Result, StreamId, Vm, instruction::{ComputeCtx, InstructionPolicy}};
/// use std::sync::{Arc, Mutex};
///
/// /// Notes where it ran.
/// struct Where(Arc<Mutex<Option<(StreamId, String)>>>);
/// impl InstructionPolicy for Where {
///     fn name(&self) -> &str { "where" }
///     fn compute(&mut self, ctx: &mut ComputeCtx<'_>) -> Result<()> {
///         let seen = (ctx.stream_id(), ctx.stream().name().to_string());
///         *self.0.lock().unwrap() = Some(seen);
///         Ok(())
///     }
/// }
///
/// let vm = Vm::builder().build()?;
/// let seen = Arc::new(Mutex::new(None));
/// vm.run(StreamId::CPU, Where(seen.clone()))?;
/// vm.sync()?;
/// assert_eq!(*seen.lock().unwrap(), Some((StreamId::CPU, "cpu".to_string())));
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub struct ComputeCtx<'a> {
    pub(crate) instr_id: u64,
    pub(crate) stream_id: StreamId,
    pub(crate) stream: &'a dyn StreamPolicy,
    pub(crate) allocator: &'a Arc<DeviceAllocator>,
    pub(crate) completion: Option<Arc<dyn Event>>,
}

impl<'a> ComputeCtx<'a> {
    /// The instruction's id (its submission sequence number).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Result, StreamId, Vm, instruction::{ComputeCtx, InstructionPolicy}};
    /// use std::sync::{Arc, Mutex};
    /// struct Id(Arc<Mutex<Vec<u64>>>);
    /// impl InstructionPolicy for Id {
    ///     fn name(&self) -> &str { "id" }
    ///     fn compute(&mut self, ctx: &mut ComputeCtx<'_>) -> Result<()> {
    ///         self.0.lock().unwrap().push(ctx.instr_id());
    ///         Ok(())
    ///     }
    /// }
    /// let vm = Vm::builder().build()?;
    /// let ids = Arc::new(Mutex::new(vec![]));
    /// vm.run(StreamId::CPU, Id(ids.clone()))?;
    /// vm.run(StreamId::CPU, Id(ids.clone()))?;
    /// vm.sync()?;
    /// let ids = ids.lock().unwrap();
    /// assert!(ids[0] < ids[1], "ids follow submission order: {ids:?}");
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn instr_id(&self) -> u64 {
        self.instr_id
    }
    /// The stream's id.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Result, StreamId, Vm, instruction::{ComputeCtx, InstructionPolicy}};
    /// use eddy_vm::stream::{cpu::CpuStream, Exec};
    /// use std::sync::{Arc, Mutex};
    /// struct On(Arc<Mutex<Option<StreamId>>>);
    /// impl InstructionPolicy for On {
    ///     fn name(&self) -> &str { "on" }
    ///     fn compute(&mut self, ctx: &mut ComputeCtx<'_>) -> Result<()> {
    ///         *self.0.lock().unwrap() = Some(ctx.stream_id());
    ///         Ok(())
    ///     }
    /// }
    /// let mut b = Vm::builder();
    /// let side = b.add_stream(Arc::new(CpuStream::new("side", Exec::Inline)));
    /// let vm = b.build()?;
    /// let seen = Arc::new(Mutex::new(None));
    /// vm.run(side, On(seen.clone()))?;
    /// vm.sync()?;
    /// assert_eq!(*seen.lock().unwrap(), Some(side));
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn stream_id(&self) -> StreamId {
        self.stream_id
    }
    /// The stream's policy; device kernels downcast it (`as_any`) to reach their queue.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Result, StreamId, Vm, instruction::{ComputeCtx, InstructionPolicy}};
    /// use eddy_vm::stream::{Device, Exec};
    /// use std::sync::{Arc, Mutex};
    /// struct Ask(Arc<Mutex<Option<(Device, Exec)>>>);
    /// impl InstructionPolicy for Ask {
    ///     fn name(&self) -> &str { "ask" }
    ///     fn compute(&mut self, ctx: &mut ComputeCtx<'_>) -> Result<()> {
    ///         *self.0.lock().unwrap() = Some((ctx.stream().device(), ctx.stream().exec()));
    ///         Ok(())
    ///     }
    /// }
    /// let vm = Vm::builder().cpu_exec(Exec::Inline).build()?;
    /// let seen = Arc::new(Mutex::new(None));
    /// vm.run(StreamId::CPU, Ask(seen.clone()))?;
    /// vm.sync()?;
    /// assert_eq!(*seen.lock().unwrap(), Some((Device::CPU, Exec::Inline)));
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn stream(&self) -> &'a dyn StreamPolicy {
        self.stream
    }
    /// The device's allocator, for temporary buffers (stream-ordered: free them after launch).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Result, StreamId, Vm, instruction::{ComputeCtx, InstructionPolicy}};
    /// use std::sync::{Arc, Mutex};
    /// /// Uses a 4000-byte scratch buffer.
    /// struct Scratch(Arc<Mutex<Option<usize>>>);
    /// impl InstructionPolicy for Scratch {
    ///     fn name(&self) -> &str { "scratch" }
    ///     fn compute(&mut self, ctx: &mut ComputeCtx<'_>) -> Result<()> {
    ///         let tmp = ctx.allocator().allocate(4000).ok();
    ///         *self.0.lock().unwrap() = tmp.map(|t| t.size()); // freed here, at the drop
    ///         Ok(())
    ///     }
    /// }
    /// let vm = Vm::builder().build()?;
    /// let got = Arc::new(Mutex::new(None));
    /// vm.run(StreamId::CPU, Scratch(got.clone()))?;
    /// vm.sync()?;
    /// assert_eq!(*got.lock().unwrap(), Some(4096));
    /// assert_eq!(vm.alloc_stats().in_use, 0);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn allocator(&self) -> &'a Arc<DeviceAllocator> {
        self.allocator
    }
    /// Declares that the instruction is done only when `event` completes (not when `compute`
    /// returns). Used by asynchronous streams for host-visible completion.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Result, StreamId, Vm, instruction::{ComputeCtx, InstructionPolicy}};
    /// use eddy_vm::stream::Event;
    /// use std::sync::{Arc, atomic::{AtomicUsize, Ordering}};
    /// /// An event that is complete, and counts how often it was asked.
    /// struct Polled(AtomicUsize);
    /// impl Event for Polled {
    ///     fn is_complete(&self) -> bool { self.0.fetch_add(1, Ordering::SeqCst); true }
    /// }
    /// struct Launch(Arc<Polled>);
    /// impl InstructionPolicy for Launch {
    ///     fn name(&self) -> &str { "launch" }
    ///     fn compute(&mut self, ctx: &mut ComputeCtx<'_>) -> Result<()> {
    ///         ctx.complete_when(self.0.clone());
    ///         Ok(())
    ///     }
    /// }
    /// let vm = Vm::builder().build()?;
    /// let ev = Arc::new(Polled(AtomicUsize::new(0)));
    /// vm.run(StreamId::CPU, Launch(ev.clone()))?;
    /// vm.sync()?;
    /// assert!(ev.0.load(Ordering::SeqCst) >= 1, "the engine waited for the event");
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn complete_when(&mut self, event: Arc<dyn Event>) {
        self.stream.watch(&event);
        self.completion = Some(event);
    }
}

/// A boxed policy is a policy (so `push_boxed` can store it inline in an instruction).
impl InstructionPolicy for Box<dyn InstructionPolicy> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn inputs(&self) -> &[Counted<Blob>] {
        (**self).inputs()
    }
    fn outputs(&self) -> &[Counted<Blob>] {
        (**self).outputs()
    }
    fn fusable(&self) -> bool {
        (**self).fusable()
    }
    fn frees_memory(&self) -> bool {
        (**self).frees_memory()
    }
    fn deferred_drop(&self) -> bool {
        (**self).deferred_drop()
    }
    fn kernel(&self) -> Option<&dyn super::Kernel> {
        (**self).kernel()
    }
    fn handles_poison(&self) -> bool {
        (**self).handles_poison()
    }
    fn cheap(&self) -> bool {
        (**self).cheap()
    }
    fn is_barrier(&self) -> bool {
        (**self).is_barrier()
    }
    fn prepare(&mut self, ctx: &mut PrepareCtx<'_>) -> Result<(), PrepareError> {
        (**self).prepare(ctx)
    }
    fn compute(&mut self, ctx: &mut ComputeCtx<'_>) -> Result<()> {
        (**self).compute(ctx)
    }
}

/// What running an instruction needs of it: the hooks of [`InstructionPolicy`] that
/// `run_policy` and the submitting thread's run at once (`scheduler/inline.rs`) call. Every
/// policy has them; so does a kernel borrowed with its operands
/// ([`KernelCall`](crate::instruction::op_call::KernelCall)), which `Vm::run_op` runs at once
/// without building a policy.
pub(crate) trait Run {
    fn name(&self) -> &str;
    fn inputs(&self) -> &[Counted<Blob>];
    fn outputs(&self) -> &[Counted<Blob>];
    fn handles_poison(&self) -> bool;
    fn poisons_selectively(&self) -> bool;
    fn caller(&self) -> crate::error::Caller;
    fn prepare(&mut self, ctx: &mut PrepareCtx<'_>) -> Result<(), PrepareError>;
    fn compute(&mut self, ctx: &mut ComputeCtx<'_>) -> crate::error::Result<()>;
}

impl<P: InstructionPolicy + ?Sized> Run for P {
    #[inline]
    fn name(&self) -> &str {
        InstructionPolicy::name(self)
    }
    #[inline]
    fn inputs(&self) -> &[Counted<Blob>] {
        InstructionPolicy::inputs(self)
    }
    #[inline]
    fn outputs(&self) -> &[Counted<Blob>] {
        InstructionPolicy::outputs(self)
    }
    #[inline]
    fn handles_poison(&self) -> bool {
        InstructionPolicy::handles_poison(self)
    }
    #[inline]
    fn poisons_selectively(&self) -> bool {
        InstructionPolicy::poisons_selectively(self)
    }
    #[inline]
    fn caller(&self) -> crate::error::Caller {
        InstructionPolicy::caller(self)
    }
    #[inline]
    fn prepare(&mut self, ctx: &mut PrepareCtx<'_>) -> Result<(), PrepareError> {
        InstructionPolicy::prepare(self, ctx)
    }
    #[inline]
    fn compute(&mut self, ctx: &mut ComputeCtx<'_>) -> crate::error::Result<()> {
        InstructionPolicy::compute(self, ctx)
    }
}
