//! What a capture takes ([`Vm::capture`](crate::Vm::capture)): the op calls, and the state of a
//! capture in progress. Apart from the engine and the plans, which both use it; it names only
//! the types below both (the builder checks a call before it is taken).

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
