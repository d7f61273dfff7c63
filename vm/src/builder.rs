//! [`InstructionsBuilder`]: turns calls into a list of instructions, with soft sync.
//!
//! The builder checks every blob (it belongs to this engine and is not released) and the
//! stream, then tracks each blob's producer and last-used stream. When an instruction uses a
//! blob last used on another stream whose "done" only means "launched" (an asynchronous device),
//! it first inserts the cross-stream sync of [`stream_wait`](crate::instruction::stream_wait):
//! a `RecordEvent` on the old stream and, if the new stream can wait device-side on the same
//! device, a `StreamWait` on the new one; otherwise the `RecordEvent` completes only when its
//! event does, and the ordinary cross-stream edge makes the consumer wait for it.

use crate::Counted;
use crate::blob::{Blob, NO_STREAM};
use crate::captured::{Captured, Operands};
use crate::error::Caller;
use crate::error::{Error, Result};
use crate::instruction::{
    Barrier, EventSlot, InstrAdapter, InstrList, InstructionPolicy, Kernel, RecordEvent,
    ReleaseTensor, StreamWait,
};
use crate::shared::Shared;
use crate::stream::StreamId;
use smallvec::SmallVec;
use std::sync::atomic::Ordering::Relaxed;

/// Where a builder hands its list: the engine (the `Vm` handle implements it). The builder
/// needs nothing else of the engine but its [`Shared`] state.
pub(crate) trait Receive {
    /// Takes a built list of `n` instructions (blocking above the high-water mark).
    fn receive(&self, list: InstrList, n: usize) -> Result<()>;
}

/// Checks an instruction's stream and operands and records the stream as their last user, in
/// one pass (for engines without asynchronous streams, where no soft sync is ever needed).
pub(crate) fn check_and_track(
    sh: &Shared,
    op: &str,
    stream: StreamId,
    inputs: &[Counted<Blob>],
    outputs: &[Counted<Blob>],
) -> Result<()> {
    // Every check before any tracking: a refused call changes nothing.
    check_only(sh, op, stream, inputs, outputs)?;
    track_streams(stream, inputs);
    track_streams(stream, outputs);
    Ok(())
}

/// Whether an instruction on `stream` over these operands needs the builder's cross-stream
/// sync: the stream, or the last user of an operand, is an asynchronous device stream. Work
/// of the host alone, on an engine that also has a device, then keeps the direct path.
#[inline]
pub(crate) fn needs_soft_sync(
    sh: &Shared,
    stream: StreamId,
    inputs: &[Counted<Blob>],
    outputs: &[Counted<Blob>],
) -> bool {
    sh.is_async(stream.0)
        || inputs
            .iter()
            .chain(outputs)
            .any(|b| sh.is_async(b.last_used_stream.load(Relaxed)))
}

impl Captured {
    /// The call of `kernel` on `inputs` and `outputs`, with owned handles, once its operands
    /// pass the checks a run makes (so a call taken instead of run fails where it was made).
    pub(crate) fn checked<K: Kernel>(
        sh: &Shared,
        stream: StreamId,
        kernel: K,
        inputs: &[&Counted<Blob>],
        outputs: &[&Counted<Blob>],
        at: Caller,
    ) -> crate::Result<Captured> {
        let owned = |bs: &[&Counted<Blob>]| bs.iter().map(|&b| b.clone()).collect::<Operands>();
        let (inputs, outputs) = (owned(inputs), owned(outputs));
        check_only(sh, kernel.name(), stream, &inputs, &outputs).map_err(|e| e.at(at))?;
        Ok(Captured {
            stream,
            kernel: Box::new(kernel),
            inputs,
            outputs,
            at,
        })
    }
}

/// Checks an instruction's stream and operands without tracking them (a captured op call).
pub(crate) fn check_only(
    sh: &Shared,
    op: &str,
    stream: StreamId,
    inputs: &[Counted<Blob>],
    outputs: &[Counted<Blob>],
) -> Result<()> {
    check_stream(sh, op, stream)?;
    // Plain loops: an iterator chaining the two lists cost more than the checks (per-step
    // `Option` state).
    check_blobs(sh, op, inputs)?;
    check_blobs(sh, op, outputs)
}

/// The stream exists.
#[inline]
fn check_stream(sh: &Shared, op: &str, stream: StreamId) -> Result<()> {
    if stream.0 as usize >= sh.streams.len() {
        return Err(stream_error(op, stream));
    }
    Ok(())
}

#[cold]
#[inline(never)]
fn stream_error(op: &str, stream: StreamId) -> Error {
    Error::UnknownStream {
        at: crate::error::Caller::UNKNOWN,
        op: op.to_string(),
        stream: stream.0 as usize,
    }
}

/// Every blob belongs to this engine and is not released.
#[inline]
fn check_blobs(sh: &Shared, op: &str, blobs: &[Counted<Blob>]) -> Result<()> {
    for b in blobs {
        if b.engine != sh.owner_id || b.is_released() {
            return Err(blob_error(sh, op, b));
        }
    }
    Ok(())
}

/// The error for a blob that [`check_blobs`] refused; out of line, so that the checks' fast
/// path does not pay for building it (the prologue it needs cost more than the checks).
#[cold]
#[inline(never)]
fn blob_error(sh: &Shared, op: &str, b: &Blob) -> Error {
    let (op, id) = (op.to_string(), b.id());
    if b.engine != sh.owner_id {
        Error::ForeignBlob {
            at: crate::error::Caller::UNKNOWN,
            op,
            id,
        }
    } else {
        Error::TensorReleased {
            at: crate::error::Caller::UNKNOWN,
            op,
            id,
        }
    }
}

/// Records `stream` as the last user of `blobs`.
#[inline]
fn track_streams(stream: StreamId, blobs: &[Counted<Blob>]) {
    for b in blobs {
        // Load first: an unchanged value is not re-stored, so the line is not dirtied.
        if b.last_used_stream.load(Relaxed) != stream.0 {
            b.last_used_stream.store(stream.0, Relaxed);
        }
    }
}

/// Checks `blob`, marks it released, and returns the `ReleaseTensor` for it with the stream
/// that last used it.
pub(crate) fn release_policy(
    sh: &Shared,
    blob: &Counted<Blob>,
) -> Result<(StreamId, ReleaseTensor)> {
    let stream = mark_released(sh, blob, false)?;
    Ok((stream, ReleaseTensor::new(blob.clone())))
}

/// Checks `blob` and marks it released; returns the stream that last used it (where its
/// `ReleaseTensor` runs). `unheld`: the caller is the blob's last holder (see
/// [`Vm::release_unheld`](crate::Vm::release_unheld)), so no locked instruction is needed.
pub(crate) fn mark_released(sh: &Shared, blob: &Counted<Blob>, unheld: bool) -> Result<StreamId> {
    check_blobs(sh, "release_tensor", std::slice::from_ref(blob))?;
    let first = if unheld {
        blob.mark_released_unheld()
    } else {
        blob.mark_released()
    };
    if !first {
        return Err(Error::TensorReleased {
            at: crate::error::Caller::UNKNOWN,
            op: "release_tensor".into(),
            id: blob.id(),
        });
    }
    let last = blob.last_used_stream.load(Relaxed);
    Ok(if last == NO_STREAM {
        StreamId::CPU
    } else {
        StreamId(last)
    })
}

/// Collects instructions and submits them to the engine in one hand-off.
///
/// # Examples
///
/// ```
/// use eddy_vm::{Vm, StreamId, testing::Noop};
/// let vm = Vm::builder().build().unwrap();
/// let x = vm.new_blob(8);
/// let mut b = vm.instructions();
/// b.push(StreamId::CPU, Noop::new(vec![], vec![x.clone()])).unwrap();
/// b.push(StreamId::CPU, Noop::new(vec![x.clone()], vec![])).unwrap();
/// b.release(&x).unwrap();
/// assert_eq!(b.len(), 3);
/// b.submit().unwrap();
/// vm.sync().unwrap();
/// ```
pub struct InstructionsBuilder<'a> {
    shared: &'a Shared,
    engine: &'a dyn Receive,
    list: InstrList,
    n: usize,
    /// Each operand's last-used stream as this builder's instructions leave it, in first-use
    /// order. Written to the blobs only at submit: a builder dropped unsubmitted must not
    /// claim a stream for a blob that never ran there (a later instruction on that stream
    /// would then skip the cross-stream sync it needs).
    tracked: SmallVec<[(Counted<Blob>, u32); 4]>,
}

impl<'a> InstructionsBuilder<'a> {
    pub(crate) fn new(shared: &'a Shared, engine: &'a dyn Receive) -> Self {
        InstructionsBuilder {
            shared,
            engine,
            list: InstrList::new(InstrAdapter::new()),
            n: 0,
            tracked: SmallVec::new(),
        }
    }

    /// The stream that last used `b`, counting this builder's own instructions.
    fn last_used(&self, b: &Counted<Blob>) -> u32 {
        match self.tracked.iter().find(|(t, _)| Counted::ptr_eq(t, b)) {
            Some(&(_, s)) => s,
            None => b.last_used_stream.load(Relaxed),
        }
    }

    /// Records `stream` as the last user of `blobs`, for this builder (see `tracked`).
    fn track(&mut self, stream: StreamId, blobs: &[Counted<Blob>]) {
        for b in blobs {
            match self.tracked.iter_mut().find(|(t, _)| Counted::ptr_eq(t, b)) {
                Some((_, s)) => *s = stream.0,
                None if b.last_used_stream.load(Relaxed) == stream.0 => {}
                None => self.tracked.push((b.clone(), stream.0)),
            }
        }
    }

    /// Writes the tracked streams to the blobs: the instructions are being handed over.
    fn commit_tracking(&mut self) {
        for (b, s) in self.tracked.drain(..) {
            track_streams(StreamId(s), std::slice::from_ref(&b));
        }
    }

    /// Instructions collected so far (soft-sync ones included).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Vm, StreamId, testing::Noop};
    /// let vm = Vm::builder().build().unwrap();
    /// let mut b = vm.instructions();
    /// assert_eq!(b.len(), 0);
    /// b.push(StreamId::CPU, Noop::new(vec![], vec![vm.new_blob(4)])).unwrap();
    /// assert_eq!(b.len(), 1);
    /// b.submit().unwrap();
    /// ```
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether nothing was collected.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Vm, StreamId, testing::Noop};
    /// let vm = Vm::builder().build().unwrap();
    /// let mut b = vm.instructions();
    /// assert!(b.is_empty());
    /// b.push(StreamId::CPU, Noop::new(vec![], vec![])).unwrap();
    /// assert!(!b.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    fn append<P: InstructionPolicy>(&mut self, stream: StreamId, policy: P) {
        let mut node = crate::pool::take_node(self.shared);
        node.set(stream, policy);
        self.list.push_back(node);
        self.n += 1;
    }

    /// Inserts the cross-stream sync `blobs` need before being used on `stream`, and records
    /// `stream` as their last user.
    fn soft_sync(&mut self, stream: StreamId, inputs: &[Counted<Blob>], outputs: &[Counted<Blob>]) {
        let sh = self.shared;
        if sh.any_async_stream {
            let mut groups: SmallVec<[(u32, Vec<Counted<Blob>>); 2]> = SmallVec::new();
            for b in inputs.iter().chain(outputs) {
                let last = self.last_used(b);
                if last == NO_STREAM
                    || last == stream.0
                    || !sh.streams[last as usize].policy.done_means_launched()
                {
                    continue;
                }
                match groups.iter_mut().find(|(s, _)| *s == last) {
                    Some((_, v)) => {
                        if !v.iter().any(|x| Counted::ptr_eq(x, b)) {
                            v.push(b.clone())
                        }
                    }
                    None => groups.push((last, vec![b.clone()])),
                }
            }
            for (last, blobs) in groups {
                let from = &sh.streams[last as usize].policy;
                let to = &sh.streams[stream.0 as usize].policy;
                let slot: EventSlot = Default::default();
                if to.supports_stream_wait() && to.device() == from.device() {
                    self.append(
                        StreamId(last),
                        RecordEvent::new(blobs.clone(), false, slot.clone()),
                    );
                    self.append(stream, StreamWait::new(blobs, slot));
                } else {
                    self.append(StreamId(last), RecordEvent::new(blobs, true, slot));
                }
            }
        }
        self.track(stream, inputs);
        self.track(stream, outputs);
    }

    /// Adds an instruction running `policy` on `stream`.
    ///
    /// # Errors
    ///
    /// `UnknownStream`; `ForeignBlob` or `TensorReleased` for a bad operand. Nothing is added.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Error, Vm, StreamId, testing::Noop};
    /// let vm = Vm::builder().build()?;
    /// let x = vm.new_blob(4);
    /// let mut b = vm.instructions();
    /// b.push(StreamId::CPU, Noop::new(vec![], vec![x.clone()]))?;
    /// let bad = b.push(StreamId(7), Noop::new(vec![x.clone()], vec![]));
    /// assert!(matches!(bad, Err(Error::UnknownStream { stream: 7, .. })));
    /// assert_eq!(b.len(), 1, "nothing was added");
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn push<P: InstructionPolicy>(&mut self, stream: StreamId, policy: P) -> Result<()> {
        let sh = self.shared;
        check_stream(sh, policy.name(), stream)?;
        if !policy.is_barrier() {
            check_blobs(sh, policy.name(), policy.inputs())?;
            check_blobs(sh, policy.name(), policy.outputs())?;
            self.soft_sync(stream, policy.inputs(), policy.outputs());
        }
        self.append(stream, policy);
        Ok(())
    }

    /// Like [`push`](Self::push) for a boxed policy.
    ///
    /// # Errors
    ///
    /// As [`push`](Self::push).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{instruction::InstructionPolicy, testing::Noop, StreamId, Vm};
    /// let vm = Vm::builder().build()?;
    /// let x = vm.new_blob(4);
    /// let op: Box<dyn InstructionPolicy> = Box::new(Noop::new(vec![], vec![x.clone()]));
    /// let mut b = vm.instructions();
    /// b.push_boxed(StreamId::CPU, op)?;
    /// b.submit()?;
    /// vm.sync()?;
    /// assert!(x.is_allocated());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn push_boxed(
        &mut self,
        stream: StreamId,
        policy: Box<dyn InstructionPolicy>,
    ) -> Result<()> {
        self.push(stream, policy)
    }

    /// Adds a barrier calling `f` once everything received before it is released.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::{Log, Record}, StreamId, Vm};
    /// let vm = Vm::builder().build()?;
    /// let log = Log::default();
    /// let mut b = vm.instructions();
    /// b.push(StreamId::CPU, Record::new(1, vec![], vec![vm.new_blob(4)], &log))?;
    /// let l = log.clone();
    /// b.barrier(move || l.lock().push(2)); // runs after the record
    /// b.submit()?;
    /// vm.sync()?;
    /// assert_eq!(*log.lock(), vec![1, 2]);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn barrier(&mut self, f: impl FnOnce() + Send + 'static) {
        self.append(StreamId::CPU, Barrier::new(f));
    }

    /// Adds a `ReleaseTensor` for `blob` on the stream that last used it.
    ///
    /// # Errors
    ///
    /// `TensorReleased` if `blob` was released before; `ForeignBlob`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Error, Vm};
    /// let vm = Vm::builder().build()?;
    /// let x = vm.new_blob(4);
    /// let mut b = vm.instructions();
    /// b.release(&x)?;
    /// assert!(x.is_released());
    /// assert!(matches!(b.release(&x), Err(Error::TensorReleased { .. })));
    /// b.submit()?;
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn release(&mut self, blob: &Counted<Blob>) -> Result<()> {
        let (stream, policy) = release_policy(self.shared, blob)?;
        // On the stream that last used it, counting this builder's own instructions.
        let stream = match self.last_used(blob) {
            NO_STREAM => stream,
            s => StreamId(s),
        };
        self.push_release(stream, policy);
        Ok(())
    }

    /// Adds a `ReleaseTensor` made (and its blob checked) by [`release_policy`].
    pub(crate) fn push_release(&mut self, stream: StreamId, policy: ReleaseTensor) {
        self.soft_sync(stream, &[], policy.outputs());
        self.append(stream, policy);
    }

    /// What was built, and how many instructions, for a caller that holds the scheduler and
    /// hands it over itself (see `Vm::run_then_wait`).
    pub(crate) fn into_list(mut self) -> (InstrList, usize) {
        self.commit_tracking();
        (self.list.take(), self.n)
    }

    /// Hands everything to the engine.
    ///
    /// # Errors
    ///
    /// `EngineShutDown` if the engine is shutting down (the instructions are dropped).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::{Log, Record}, StreamId, Vm};
    /// let vm = Vm::builder().build()?;
    /// let (log, x) = (Log::default(), vm.new_blob(4));
    /// let mut b = vm.instructions();
    /// b.push(StreamId::CPU, Record::new(1, vec![], vec![x.clone()], &log))?;
    /// b.push(StreamId::CPU, Record::new(2, vec![x.clone()], vec![], &log))?;
    /// b.submit()?;
    /// vm.sync()?;
    /// assert_eq!(*log.lock(), vec![1, 2]);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn submit(mut self) -> Result<()> {
        if self.n == 0 {
            return Ok(());
        }
        self.commit_tracking();
        let list = self.list.take();
        self.engine.receive(list, self.n)
    }
}
