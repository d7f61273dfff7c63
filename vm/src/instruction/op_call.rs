//! `OpCall`: run a kernel over input and output blobs.

use super::policy::{ComputeCtx, InstructionPolicy};
use crate::blob::Blob;
use crate::error::Result;
use smallvec::SmallVec;
use std::mem::ManuallyDrop;
use std::sync::Arc;

/// A kernel: the op-specific part of an [`OpCall`]. The ops crate implements it; kernels see
/// blobs and a context, never tensors or the scheduler.
///
/// # Examples
///
/// ```
/// use eddy_vm::{Blob, Result, instruction::{ComputeCtx, Kernel}};
/// struct Fill(u8);
/// impl Kernel for Fill {
///     fn name(&self) -> &str { "fill" }
///     fn compute(&mut self, _: &[std::sync::Arc<Blob>], outs: &[std::sync::Arc<Blob>], _: &mut ComputeCtx<'_>) -> Result<()> {
///         // SAFETY: the engine runs this kernel with exclusive access to its outputs.
///         unsafe { outs[0].bytes_mut().fill(self.0) };
///         Ok(())
///     }
/// }
/// ```
pub trait Kernel: Send + 'static {
    /// The op's name.
    fn name(&self) -> &str;
    /// Runs the kernel.
    ///
    /// # Errors
    ///
    /// Any error poisons the outputs.
    fn compute(
        &mut self,
        inputs: &[Arc<Blob>],
        outputs: &[Arc<Blob>],
        ctx: &mut ComputeCtx<'_>,
    ) -> Result<()>;
    /// Whether the kernel is small enough to fuse with neighbours (default: yes).
    fn fusable(&self) -> bool {
        true
    }
    /// Whether the kernel is about as cheap as queueing it (see
    /// [`InstructionPolicy::cheap`]); default: no. [`OpCall::cheap`] overrides it per call.
    fn cheap(&self) -> bool {
        false
    }
}

/// Operand lists, inline for up to four blobs.
pub type Blobs = SmallVec<[Arc<Blob>; 4]>;

/// The instruction for one op call: a kernel, its inputs and its outputs.
pub struct OpCall<K: Kernel> {
    kernel: K,
    inputs: Blobs,
    outputs: Blobs,
    cheap: bool,
}

impl<K: Kernel> OpCall<K> {
    /// An op call of `kernel` reading `inputs` and writing `outputs`.
    pub fn new(kernel: K, inputs: Blobs, outputs: Blobs) -> Self {
        OpCall {
            cheap: kernel.cheap(),
            kernel,
            inputs,
            outputs,
        }
    }

    /// Marks the call cheap or not (for a kernel whose cost depends on its operands' sizes,
    /// which the caller knows): see [`InstructionPolicy::cheap`].
    ///
    /// ```
    /// use eddy_vm::instruction::{ComputeCtx, InstructionPolicy, Kernel, OpCall};
    /// struct Nothing;
    /// impl Kernel for Nothing {
    ///     fn name(&self) -> &str { "nothing" }
    ///     fn compute(&mut self, _: &[std::sync::Arc<eddy_vm::Blob>], _: &[std::sync::Arc<eddy_vm::Blob>], _: &mut ComputeCtx<'_>) -> eddy_vm::Result<()> { Ok(()) }
    /// }
    /// let call = OpCall::new(Nothing, Default::default(), Default::default());
    /// assert!(!call.cheap());
    /// assert!(call.with_cheap(true).cheap());
    /// ```
    pub fn with_cheap(mut self, cheap: bool) -> Self {
        self.cheap = cheap;
        self
    }
}

impl<K: Kernel> InstructionPolicy for OpCall<K> {
    fn name(&self) -> &str {
        self.kernel.name()
    }
    fn inputs(&self) -> &[Arc<Blob>] {
        &self.inputs
    }
    fn outputs(&self) -> &[Arc<Blob>] {
        &self.outputs
    }
    fn fusable(&self) -> bool {
        self.kernel.fusable()
    }
    fn cheap(&self) -> bool {
        self.cheap
    }
    fn compute(&mut self, ctx: &mut ComputeCtx<'_>) -> Result<()> {
        self.kernel.compute(&self.inputs, &self.outputs, ctx)
    }
}

/// An op call run at once by [`Vm::run_op`](crate::Vm::run_op), whose operand lists are
/// bitwise copies of the caller's handles: running a cheap op on an idle engine then takes no
/// reference-count traffic (six locked operations for a binary op) and builds no owned lists.
///
/// The copies share their originals' reference counts and are never dropped (only the kernel
/// is), so the counts are neither raised nor lowered; a kernel that clones one raises the
/// shared count, as it should. A value lives only inside `run_op`, while the caller's borrows
/// of the originals keep every blob alive.
pub(crate) struct InlineCall<K: Kernel>(ManuallyDrop<OpCall<K>>);

impl<K: Kernel> InlineCall<K> {
    /// # Safety
    ///
    /// The value must be dropped (or turned [`into_kernel`](Self::into_kernel)) before any of
    /// the borrowed handles `inputs` and `outputs` is dropped, and it must not be sent to
    /// another thread or stored.
    pub(crate) unsafe fn new(
        kernel: K,
        inputs: &[&Arc<Blob>],
        outputs: &[&Arc<Blob>],
        cheap: bool,
    ) -> Self {
        // SAFETY: forwarded from this function's contract.
        let (inputs, outputs) = unsafe { (shallow_copies(inputs), shallow_copies(outputs)) };
        InlineCall(ManuallyDrop::new(OpCall {
            kernel,
            inputs,
            outputs,
            cheap,
        }))
    }

    /// The call, to run as an instruction.
    pub(crate) fn call(&mut self) -> &mut OpCall<K> {
        &mut self.0
    }

    /// The kernel; the copied lists are forgotten.
    pub(crate) fn into_kernel(self) -> K {
        let me = ManuallyDrop::new(self);
        // SAFETY: `me` is never dropped, so the kernel is read out exactly once and the lists
        // (bitwise copies) are never dropped.
        unsafe { std::ptr::read(&me.0.kernel) }
    }
}

impl<K: Kernel> Drop for InlineCall<K> {
    fn drop(&mut self) {
        // SAFETY: the kernel is dropped once, here (`into_kernel` skips this drop); the lists
        // are bitwise copies that must not be dropped.
        unsafe { std::ptr::drop_in_place(&mut self.0.kernel) }
    }
}

/// Bitwise copies of `blobs`, in a list whose elements must never be dropped.
///
/// # Safety
///
/// As [`InlineCall::new`]: the copies must not be used after any original is dropped.
unsafe fn shallow_copies(blobs: &[&Arc<Blob>]) -> Blobs {
    // SAFETY: `ptr::read` makes a bitwise copy of a live `Arc`; the copies are never dropped
    // (`InlineCall` never drops its lists, and `from_buf_and_len` leaks the slots past `len`,
    // which repeat the last handle), so the allocation's count stays balanced, and the caller
    // keeps the originals, hence the blobs, alive for as long as the copies are used.
    let copy = |b: &&Arc<Blob>| unsafe { std::ptr::read(*b) };
    match blobs {
        [] => Blobs::new(),
        // The usual case, without `collect`'s capacity checks: a full buffer, `len` used.
        [.., last] if blobs.len() <= 4 => Blobs::from_buf_and_len(
            std::array::from_fn(|k| copy(blobs.get(k).unwrap_or(last))),
            blobs.len(),
        ),
        _ => blobs.iter().map(copy).collect(),
    }
}
