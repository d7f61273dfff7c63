//! `AccessBlobByCallback`: run host code on a blob's bytes in dependence order (`to_vec`).

use super::policy::{ComputeCtx, InstructionPolicy, PrepareCtx, PrepareError};
use crate::Counted;
use crate::blob::Blob;
use crate::error::{Error, Result};

/// What an access callback receives: the blob, or the error that poisoned it.
pub type AccessCallback = Box<dyn FnOnce(Result<&Blob, Error>) + Send>;

/// Calls a function with a blob once every earlier write to it is done (and, if `mutable`,
/// every earlier read too). A poisoned blob gives the callback the poison instead.
///
/// # Examples
///
/// ```
/// use eddy_vm::{instruction::AccessBlobByCallback, StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let x = vm.new_blob(4);
/// vm.write_blob(&x, |b| b.fill(3))?;
/// let (tx, rx) = std::sync::mpsc::channel();
/// vm.run(StreamId::CPU, AccessBlobByCallback::new(x.clone(), false, move |r| {
///     // SAFETY: the callback runs as the compute of an instruction that reads `x`.
///     tx.send(r.map(|b| unsafe { b.bytes_ref() }.to_vec())).unwrap();
/// }))?;
/// assert_eq!(rx.recv().unwrap()?, vec![3; 4]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub struct AccessBlobByCallback {
    blob: [Counted<Blob>; 1],
    mutable: bool,
    callback: Option<AccessCallback>,
    /// The submitter waits for it (`read_blob`, `write_blob`): running it at once on an idle
    /// engine is then never worse (see [`InstructionPolicy::cheap`]).
    waited: bool,
}

impl AccessBlobByCallback {
    /// Reads (`mutable == false`) or writes `blob` with `f`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{instruction::AccessBlobByCallback, testing::Fail, StreamId, Vm};
    /// let vm = Vm::builder().build()?;
    /// let x = vm.new_blob(4);
    /// vm.run(StreamId::CPU, Fail::new(vec![], vec![x.clone()]))?;
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let access = AccessBlobByCallback::new(x.clone(), false, move |r| {
    ///     tx.send(r.err()).unwrap();
    /// });
    /// vm.run(StreamId::CPU, access)?;
    /// let poison = rx.recv().unwrap().expect("the callback gets the poison");
    /// assert_eq!(poison.op(), Some("fail_op"));
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn new(
        blob: Counted<Blob>,
        mutable: bool,
        f: impl FnOnce(Result<&Blob, Error>) + Send + 'static,
    ) -> Self {
        AccessBlobByCallback {
            blob: [blob],
            mutable,
            callback: Some(Box::new(f)),
            waited: false,
        }
    }

    /// Marks the access as one its submitter waits for.
    pub(crate) fn waited(mut self) -> Self {
        self.waited = true;
        self
    }
}

impl InstructionPolicy for AccessBlobByCallback {
    fn name(&self) -> &str {
        "access_blob_by_callback"
    }
    fn inputs(&self) -> &[Counted<Blob>] {
        &self.blob
    }
    fn outputs(&self) -> &[Counted<Blob>] {
        if self.mutable { &self.blob } else { &[] }
    }
    fn handles_poison(&self) -> bool {
        true
    }
    fn cheap(&self) -> bool {
        self.waited
    }
    fn prepare(&mut self, ctx: &mut PrepareCtx<'_>) -> Result<(), PrepareError> {
        if self.mutable {
            self.blob[0]
                .ensure_allocated(ctx.allocator)
                .map_err(PrepareError::OutOfMemory)?;
        }
        Ok(())
    }
    fn compute(&mut self, _ctx: &mut ComputeCtx<'_>) -> Result<()> {
        let b = &self.blob[0];
        if let Some(f) = self.callback.take() {
            match b.poison() {
                Some(e) => f(Err(e)),
                None => f(Ok(b)),
            }
        }
        Ok(())
    }
}

impl Drop for AccessBlobByCallback {
    fn drop(&mut self) {
        // Never computed (the engine shut down first): tell the waiter instead of leaving it.
        if let Some(f) = self.callback.take() {
            f(Err(Error::EngineShutDown));
        }
    }
}
