//! What a capture takes ([`Vm::capture`](crate::Vm::capture)): the op calls, and the state of a
//! capture in progress. Apart from the engine and the plans, which both use it.

use crate::Counted;
use crate::blob::Blob;
use crate::error::Caller;
use crate::instruction::Kernel;
use crate::stream::StreamId;
use std::fmt;

/// A captured call's blobs, in order: up to four without a heap allocation.
///
/// # Examples
///
/// ```
/// use eddy_vm::{plan::Operands, Vm};
/// let vm = Vm::builder().build()?;
/// let ops: Operands = [vm.new_blob(4), vm.new_blob(8)].into_iter().collect();
/// assert!(!ops.spilled()); // held inline
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub type Operands = smallvec::SmallVec<[Counted<Blob>; 4]>;

/// One op call captured by [`Vm::capture`](crate::Vm::capture): what `run_op` was given.
pub struct Captured {
    /// The stream it was submitted to.
    pub stream: StreamId,
    /// The kernel, not run.
    pub kernel: Box<dyn Kernel>,
    /// The blobs it reads.
    pub inputs: Operands,
    /// The blobs it writes.
    pub outputs: Operands,
    /// Where the user's code called the op.
    pub at: Caller,
}

impl Captured {
    /// The call of `kernel` on `inputs` and `outputs`, with owned handles, once its operands
    /// pass the checks a run makes (so a call taken instead of run fails where it was made).
    pub(crate) fn checked<K: Kernel>(
        sh: &crate::shared::Shared,
        stream: StreamId,
        kernel: K,
        inputs: &[&Counted<Blob>],
        outputs: &[&Counted<Blob>],
        at: Caller,
    ) -> crate::Result<Captured> {
        let owned = |bs: &[&Counted<Blob>]| bs.iter().map(|&b| b.clone()).collect::<Operands>();
        let (inputs, outputs) = (owned(inputs), owned(outputs));
        crate::builder::check_only(sh, kernel.name(), stream, &inputs, &outputs)
            .map_err(|e| e.at(at))?;
        Ok(Captured {
            stream,
            kernel: Box::new(kernel),
            inputs,
            outputs,
            at,
        })
    }
}

impl fmt::Debug for Captured {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids = |bs: &[Counted<Blob>]| bs.iter().map(|b| b.id()).collect::<Vec<_>>();
        f.debug_struct("Captured")
            .field("op", &self.kernel.name())
            .field("stream", &self.stream)
            .field("inputs", &ids(&self.inputs))
            .field("outputs", &ids(&self.outputs))
            .finish()
    }
}

/// The capture in progress on an engine: the thread whose op calls it takes, and those taken.
pub(crate) struct CaptureState {
    pub(crate) thread: std::thread::ThreadId,
    pub(crate) ops: Vec<Captured>,
}
