//! `OpCall`: run a kernel over input and output blobs.

use super::policy::{ComputeCtx, InstructionPolicy};
use crate::blob::Blob;
use crate::error::Result;
use smallvec::SmallVec;
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
