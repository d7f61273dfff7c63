//! Host access to a blob's bytes (`read_blob`, `write_blob`) and probes.
use super::Vm;
use crate::Counted;
use crate::blob::Blob;
use crate::error::{Error, Result};
use crate::exec::in_engine;
use crate::instruction::AccessBlobByCallback;
use crate::stream::StreamId;
use crate::wait::Waiter;
use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::Ordering;

impl Vm {
    /// Runs `f` on `blob`'s bytes once every earlier write to it is done, and returns its result.
    ///
    /// # Errors
    ///
    /// The blob's poison (the root error of what failed upstream), `Deadlock`,
    /// `ReentrantWait`, `EngineShutDown`.
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().build()?;
    /// let b = vm.new_blob(4);
    /// vm.write_blob(&b, |bytes| bytes.copy_from_slice(&[1, 2, 3, 4]))?;
    /// let sum = vm.read_blob(&b, |bytes| bytes.iter().map(|&x| x as u32).sum::<u32>())?;
    /// assert_eq!(sum, 10);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    #[track_caller]
    pub fn read_blob<R: Send + 'static>(
        &self,
        blob: &Counted<Blob>,
        f: impl FnOnce(&[u8]) -> R + Send + 'static,
    ) -> Result<R> {
        self.refuse_in_capture("read_blob")?;
        let held = self.access_begins();
        if in_engine() {
            return Err(Error::ReentrantWait {
                at: crate::error::Caller::UNKNOWN,
                op: "access_blob".into(),
            });
        }
        let w = Arc::new(Waiter::new());
        let slot: HostSlot<R> = Arc::new(Mutex::new(None));
        let (w2, s2) = (w.clone(), slot.clone());
        let access = AccessBlobByCallback::new(blob.clone(), false, move |r| {
            host_reply(&s2, &w2, || {
                // SAFETY: this callback runs as the compute of an instruction that reads
                // `blob`, so every earlier writer has finished and no later writer starts until
                // it returns.
                r.map(|b| f(unsafe { b.bytes_ref() }))
            })
        })
        .waited();
        // Host reads run on the main CPU stream; soft sync orders them.
        self.run_then_wait(held, StreamId::CPU, access, &w, "read_blob")?;
        self.access_done();
        self.host_result(&slot)
    }

    /// What a host access's closure returned, from its slot: its panic goes on on the calling
    /// thread, as a panic in a closure passed to `std::thread::scope` does.
    pub(super) fn host_result<R>(&self, slot: &HostSlot<R>) -> Result<R> {
        match slot.lock().take() {
            Some(Ok(r)) => self.or_failed(r),
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            None => self.or_failed(Err(Error::EngineShutDown)),
        }
    }

    /// Runs `f` on `blob`'s bytes for writing, ordered after every earlier access.
    ///
    /// # Errors
    ///
    /// As [`read_blob`](Self::read_blob), plus `OutOfMemory` if the blob could not be allocated.
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().build()?;
    /// let b = vm.new_blob(4);
    /// let n = vm.write_blob(&b, |bytes| {
    ///     bytes.fill(9);
    ///     bytes.len()
    /// })?;
    /// assert_eq!(n, 4);
    /// assert_eq!(vm.read_blob(&b, |bytes| bytes.to_vec())?, vec![9; 4]);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    #[track_caller]
    pub fn write_blob<R: Send + 'static>(
        &self,
        blob: &Counted<Blob>,
        f: impl FnOnce(&mut [u8]) -> R + Send + 'static,
    ) -> Result<R> {
        self.refuse_in_capture("write_blob")?;
        let held = self.access_begins();
        if in_engine() {
            return Err(Error::ReentrantWait {
                at: crate::error::Caller::UNKNOWN,
                op: "access_blob".into(),
            });
        }
        let w = Arc::new(Waiter::new());
        let slot: HostSlot<R> = Arc::new(Mutex::new(None));
        let (w2, s2) = (w.clone(), slot.clone());
        let access = AccessBlobByCallback::new(blob.clone(), true, move |r| {
            host_reply(&s2, &w2, || {
                r.map(|b| {
                    b.clear_poison();
                    // SAFETY: this callback runs as the compute of an instruction that writes
                    // `blob`, so it has exclusive access until it returns.
                    f(unsafe { b.bytes_mut() })
                })
            })
        })
        .waited();
        self.run_then_wait(held, StreamId::CPU, access, &w, "write_blob")?;
        self.access_done();
        self.host_result(&slot)
    }

    /// Registers a probe: polled by the scheduler every pass until it returns `true`. A probe
    /// that panics is dropped (the panic is logged through `tracing`); the engine goes on.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{atomic::{AtomicUsize, Ordering}, Arc};
    /// let vm = eddy_vm::Vm::builder().build()?;
    /// let polls = Arc::new(AtomicUsize::new(0));
    /// let p = polls.clone();
    /// vm.add_probe(move || p.fetch_add(1, Ordering::Relaxed) + 1 == 3); // done on its third poll
    /// while polls.load(Ordering::Relaxed) < 3 {
    ///     std::thread::yield_now();
    /// }
    /// vm.sync()?;
    /// assert_eq!(polls.load(Ordering::Relaxed), 3, "not polled once done");
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn add_probe(&self, probe: impl FnMut() -> bool + Send + 'static) {
        let mut p = self.shared().probes.lock();
        p.push(Box::new(probe));
        self.shared().has_probes.store(true, Ordering::Release);
        drop(p);
        self.wake();
    }
}

/// Where a host access (`read_blob`, `write_blob`) leaves its closure's result, or its panic.
type HostSlot<R> = Arc<Mutex<Option<std::thread::Result<Result<R>>>>>;

/// Runs a host access's closure on the engine, catching its panic, then fills `slot` and wakes
/// `w`: the caller gets the result or the panic, and never waits out the deadlock timeout for
/// a signal that a panic skipped.
fn host_reply<R>(slot: &HostSlot<R>, w: &Waiter, f: impl FnOnce() -> Result<R>) {
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    *slot.lock() = Some(out);
    w.signal();
}
