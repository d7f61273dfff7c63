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
use crate::blob::Blob;
use crate::error::{Error, Result};
use crate::stream::Event;
use crate::Counted;
use parking_lot::Mutex;
use std::sync::Arc;

/// Where a `RecordEvent` leaves its event for the matching `StreamWait`.
pub type EventSlot = Arc<Mutex<Option<Arc<dyn Event>>>>;

/// Records an event on the stream after the work that last used `blobs`.
pub struct RecordEvent {
    blobs: Vec<Counted<Blob>>,
    host_wait: bool,
    slot: EventSlot,
}

impl RecordEvent {
    /// Records an event after the producers of `blobs`; if `host_wait`, the instruction is done
    /// only once the event completes.
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
pub struct StreamWait {
    blobs: Vec<Counted<Blob>>,
    slot: EventSlot,
}

impl StreamWait {
    /// Waits for the event in `slot`, ordered after the `RecordEvent` through `blobs`.
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
