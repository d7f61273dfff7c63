//! The [`InstructionPolicy`] trait and the contexts its hooks receive.

use crate::alloc::{AllocError, DeviceAllocator};
use crate::blob::Blob;
use crate::error::{Error, Result};
use crate::stream::{Event, StreamId, StreamPolicy};
use crate::Counted;
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
    fn name(&self) -> &str;

    /// Blobs read.
    fn inputs(&self) -> &[Counted<Blob>] {
        &[]
    }

    /// Blobs written (also listed in `inputs` if read, as in an in-place op).
    fn outputs(&self) -> &[Counted<Blob>] {
        &[]
    }

    /// Whether the instruction is cheap enough to be fused with its same-stream neighbours.
    /// Asked once, when the instruction is submitted.
    fn fusable(&self) -> bool {
        false
    }

    /// Whether `compute` runs even when an input is poisoned (release and host access do).
    /// Asked once, when the instruction is submitted.
    fn handles_poison(&self) -> bool {
        false
    }

    /// Whether the work is about as cheap as queueing it (well under a microsecond). An idle
    /// engine then runs the instruction at once on the submitting thread instead of handing it
    /// to the scheduler: nothing is live to order it against, and a hand-off between threads
    /// costs more than the work (see the book's lifecycle chapter). Default: no.
    fn cheap(&self) -> bool {
        false
    }

    /// Whether this is a barrier: it then runs on the scheduler thread once everything received
    /// before it is released, and takes part in no dependence. Asked once, when the
    /// instruction is submitted.
    fn is_barrier(&self) -> bool {
        false
    }

    /// Allocates what `compute` needs; by default every output's memory.
    ///
    /// # Errors
    ///
    /// [`PrepareError::OutOfMemory`] starts the engine's OOM path (wait, shrink, retry once).
    fn prepare(&mut self, ctx: &mut PrepareCtx<'_>) -> Result<(), PrepareError> {
        allocate_outputs(self.outputs(), ctx)
    }

    /// Does the work on the stream.
    ///
    /// # Errors
    ///
    /// Any error poisons the outputs and is reported at the next sync.
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
#[derive(Debug, Clone)]
pub enum PrepareError {
    /// An allocation failed; the engine shrinks its caches and retries once.
    OutOfMemory(AllocError),
    /// Anything else: the instruction fails.
    Other(Error),
}

/// What `prepare` gets: the allocator of the stream's device.
pub struct PrepareCtx<'a> {
    /// The device's allocator.
    pub allocator: &'a Arc<DeviceAllocator>,
}

/// What `compute` gets: its ids and the stream it runs on.
pub struct ComputeCtx<'a> {
    pub(crate) instr_id: u64,
    pub(crate) stream_id: StreamId,
    pub(crate) stream: &'a dyn StreamPolicy,
    pub(crate) allocator: &'a Arc<DeviceAllocator>,
    pub(crate) completion: Option<Arc<dyn Event>>,
}

impl<'a> ComputeCtx<'a> {
    /// The instruction's id (its submission sequence number).
    pub fn instr_id(&self) -> u64 {
        self.instr_id
    }
    /// The stream's id.
    pub fn stream_id(&self) -> StreamId {
        self.stream_id
    }
    /// The stream's policy; device kernels downcast it (`as_any`) to reach their queue.
    pub fn stream(&self) -> &'a dyn StreamPolicy {
        self.stream
    }
    /// The device's allocator, for temporary buffers (stream-ordered: free them after launch).
    pub fn allocator(&self) -> &'a Arc<DeviceAllocator> {
        self.allocator
    }
    /// Declares that the instruction is done only when `event` completes (not when `compute`
    /// returns). Used by asynchronous streams for host-visible completion.
    pub fn complete_when(&mut self, event: Arc<dyn Event>) {
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
