//! Cross-stream synchronisation: `RecordEvent` on the producing stream, `StreamWait` on the
//! consuming one (OneFlow's `SoftSyncStreamBetween`).
//!
//! On streams where "done" means "launched" (asynchronous devices), an edge satisfied at the
//! producer's release does not prove its work finished. The builder therefore records an event
//! after the producer. If the consumer's stream can wait on that event device-side
//! (`supports_stream_wait`, same device), a `StreamWait` on the consumer's stream enqueues that
//! wait and the host never blocks. Otherwise the `RecordEvent` instruction itself counts as done
//! only once its event completes, so the consumer's cross-stream edge waits for the real work.

use super::policy::{ComputeCtx, InstructionPolicy, PrepareCtx, PrepareError};
use crate::Counted;
use crate::blob::Blob;
use crate::error::{Error, Result};
use crate::stream::Event;
use parking_lot::Mutex;
use std::sync::Arc;

/// Where a `RecordEvent` leaves its event for the matching `StreamWait`.
pub type EventSlot = Arc<Mutex<Option<Arc<dyn Event>>>>;

/// Records an event on the stream after the work that last used `blobs`.
///
/// # Examples
///
/// ```
/// use eddy_vm::instruction::{EventSlot, RecordEvent};
/// use eddy_vm::stream::{async_device::AsyncDevice, Event};
/// let dev = AsyncDevice::new(0);
/// let mut b = eddy_vm::Vm::builder();
/// let q = b.add_stream(std::sync::Arc::new(dev.stream("compute")));
/// let vm = b.build()?;
/// let slot = EventSlot::default();
/// vm.run(q, RecordEvent::new(vec![], false, slot.clone()))?;
/// vm.sync()?; // recorded, not yet reached by the device
/// let ev = slot.lock().clone().expect("an event was recorded");
/// assert!(!ev.is_complete());
/// dev.run_all();
/// assert!(ev.is_complete());
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub struct RecordEvent {
    blobs: Vec<Counted<Blob>>,
    host_wait: bool,
    slot: EventSlot,
}

impl RecordEvent {
    /// Records an event after the producers of `blobs`; if `host_wait`, the instruction is done
    /// only once the event completes.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::instruction::{EventSlot, RecordEvent};
    /// use eddy_vm::stream::async_device::AsyncDevice;
    /// let dev = AsyncDevice::new(0);
    /// let mut b = eddy_vm::Vm::builder();
    /// let q = b.add_stream(std::sync::Arc::new(dev.stream("compute")));
    /// let vm = b.build()?;
    /// dev.set_waker(vm.waker());
    /// let slot = EventSlot::default();
    /// vm.run(q, RecordEvent::new(vec![], true, slot.clone()))?;
    /// while slot.lock().is_none() {
    ///     std::thread::yield_now(); // until the engine has recorded the event
    /// }
    /// // With `host_wait`, it is not done until its event completes.
    /// assert_eq!(vm.stats().in_flight, 1);
    /// dev.run_all();
    /// vm.sync()?;
    /// assert_eq!(vm.stats().in_flight, 0);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn new(blobs: Vec<Counted<Blob>>, host_wait: bool, slot: EventSlot) -> Self {
        RecordEvent {
            blobs,
            host_wait,
            slot,
        }
    }
}

impl InstructionPolicy for RecordEvent {
    fn name(&self) -> &str {
        "record_event"
    }
    fn outputs(&self) -> &[Counted<Blob>] {
        // A write: ordered after every earlier access, and every later access is ordered after it.
        &self.blobs
    }
    fn handles_poison(&self) -> bool {
        true
    }
    fn prepare(&mut self, _: &mut PrepareCtx<'_>) -> Result<(), PrepareError> {
        Ok(())
    }
    fn compute(&mut self, ctx: &mut ComputeCtx<'_>) -> Result<()> {
        if let Some(ev) = ctx.stream().record_event() {
            if self.host_wait {
                ctx.complete_when(ev.clone());
            }
            *self.slot.lock() = Some(ev);
        }
        Ok(())
    }
}

/// Makes the stream wait, device-side, for the event of a `RecordEvent`.
///
/// # Examples
///
/// ```
/// use eddy_vm::instruction::{EventSlot, RecordEvent, StreamWait};
/// use eddy_vm::stream::async_device::AsyncDevice;
/// use std::sync::Arc;
/// let dev = AsyncDevice::new(0);
/// let mut b = eddy_vm::Vm::builder();
/// let q0 = b.add_stream(Arc::new(dev.stream("compute")));
/// let q1 = b.add_stream(Arc::new(dev.stream("copy")));
/// let vm = b.build()?;
/// let slot = EventSlot::default();
/// vm.run(q0, RecordEvent::new(vec![], false, slot.clone()))?;
/// vm.sync()?;
/// vm.run(q1, StreamWait::new(vec![], slot))?;
/// vm.sync()?;
/// assert!(!dev.run_next(1), "queue 1 waits for queue 0's event");
/// assert!(dev.run_next(0)); // the event completes
/// assert!(dev.run_next(1));
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub struct StreamWait {
    blobs: Vec<Counted<Blob>>,
    slot: EventSlot,
}

impl StreamWait {
    /// Waits for the event in `slot`, ordered after the `RecordEvent` through `blobs`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{instruction::{EventSlot, StreamWait}, StreamId, Vm};
    /// let vm = Vm::builder().build()?;
    /// // Nothing recorded an event into `slot`: the wait fails.
    /// vm.run(StreamId::CPU, StreamWait::new(vec![], EventSlot::default()))?;
    /// assert_eq!(vm.sync().unwrap_err().op(), Some("stream_wait"));
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn new(blobs: Vec<Counted<Blob>>, slot: EventSlot) -> Self {
        StreamWait { blobs, slot }
    }
}

impl InstructionPolicy for StreamWait {
    fn name(&self) -> &str {
        "stream_wait"
    }
    fn outputs(&self) -> &[Counted<Blob>] {
        &self.blobs
    }
    fn handles_poison(&self) -> bool {
        true
    }
    fn prepare(&mut self, _: &mut PrepareCtx<'_>) -> Result<(), PrepareError> {
        Ok(())
    }
    fn compute(&mut self, ctx: &mut ComputeCtx<'_>) -> Result<()> {
        match self.slot.lock().as_ref() {
            Some(ev) => {
                ctx.stream().wait_event(ev);
                Ok(())
            }
            None => Err(Error::kernel("stream_wait", "no event was recorded")),
        }
    }
}
