//! `ReleaseTensor`: free a blob's memory once every earlier access, on every stream, is done.

use super::policy::{ComputeCtx, InstructionPolicy, PrepareCtx, PrepareError};
use crate::Counted;
use crate::blob::Blob;
use crate::error::Result;

/// Frees a blob's memory. It *writes* the blob, so it runs after every earlier reader and writer
/// (cross-stream ones through edges, same-stream ones by FIFO order); on a stream-ordered device
/// the free is itself stream-ordered.
///
/// On a stream where "done" means "launched", earlier kernels may still be running on the
/// device when this computes. Memory from the stream's own allocator on a stream that orders
/// memory ([`StreamPolicy::orders_memory`](crate::stream::StreamPolicy::orders_memory), a CUDA
/// stream) is freed at once all the same: only later launches on that stream can reuse it.
/// Otherwise the free is deferred: the instruction records an event, counts as done only when
/// the event completes, and frees the memory when it is released (its drop).
///
/// # Examples
///
/// ```
/// use eddy_vm::{instruction::ReleaseTensor, testing::Noop, StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let x = vm.new_blob(1024);
/// vm.run(StreamId::CPU, Noop::new(vec![], vec![x.clone()]))?; // allocates `x`
/// vm.run(StreamId::CPU, ReleaseTensor::new(x.clone()))?;
/// vm.sync()?;
/// assert!(!x.is_allocated());
/// assert_eq!(vm.alloc_stats().in_use, 0);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub struct ReleaseTensor {
    blob: [Counted<Blob>; 1],
    deferred: bool,
}

impl ReleaseTensor {
    /// Releases `blob`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{instruction::ReleaseTensor, InstructionPolicy, Vm};
    /// let vm = Vm::builder().build().unwrap();
    /// let x = vm.new_blob(16);
    /// let r = ReleaseTensor::new(x.clone());
    /// assert_eq!(r.name(), "release_tensor");
    /// assert_eq!(r.outputs().len(), 1, "a release writes its blob");
    /// ```
    pub fn new(blob: Counted<Blob>) -> Self {
        ReleaseTensor {
            blob: [blob],
            deferred: false,
        }
    }
}

impl InstructionPolicy for ReleaseTensor {
    fn name(&self) -> &str {
        "release_tensor"
    }
    fn outputs(&self) -> &[Counted<Blob>] {
        &self.blob
    }
    fn fusable(&self) -> bool {
        true
    }
    fn frees_memory(&self) -> bool {
        true
    }
    fn deferred_drop(&self) -> bool {
        true // a blob handle (the memory is freed by `compute`)
    }
    fn handles_poison(&self) -> bool {
        true
    }
    fn cheap(&self) -> bool {
        true // a free into the caching allocator, or an event record
    }
    fn prepare(&mut self, _ctx: &mut PrepareCtx<'_>) -> Result<(), PrepareError> {
        Ok(()) // never allocate what is about to be freed
    }
    fn compute(&mut self, ctx: &mut ComputeCtx<'_>) -> Result<()> {
        let stream = ctx.stream();
        // Stream-ordered memory of the stream's own allocator goes back at once: only later
        // launches on this stream can be handed it, and the device runs them after every
        // earlier reader. Anything else waits for an event when the stream only launches.
        let at_once = !stream.done_means_launched()
            || (stream.orders_memory() && self.blob[0].memory_from(ctx.allocator()));
        if !at_once && let Some(ev) = stream.record_event() {
            ctx.complete_when(ev);
            self.deferred = true;
            return Ok(());
        }
        self.blob[0].free_memory();
        Ok(())
    }
}

impl Drop for ReleaseTensor {
    fn drop(&mut self) {
        if self.deferred {
            self.blob[0].free_memory();
        }
    }
}
