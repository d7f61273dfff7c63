//! The device lanes of the trace: when the engine records its timeline, each kernel body
//! launched on a CUDA stream is bracketed by two timing events, and the events' times, read
//! back once they have completed, become trace events on a lane of the stream's own
//! (`cuda:0 device`), beside the host's lanes.
//!
//! Device times are relative to an anchor: the first bracketed launch of a stream records an
//! event, waits for it, and notes the host's clock right after, so a device time is the
//! anchor's host time (within the few microseconds the wait takes to return) plus the elapsed
//! times from event to event since. Completed launches are read back, and their events
//! destroyed, when the trace is read and every 256 launches.

use crate::trace::TraceEvent;
use cudarc::driver::{result, sys};
use std::time::Instant;

/// One bracketed launch: its events and what it was.
struct Timed {
    start: sys::CUevent,
    end: sys::CUevent,
    name: String,
    id: u64,
}

/// A launch whose events have been read: µs after the anchor, and its duration.
struct Resolved {
    name: String,
    id: u64,
    start_us: f64,
    dur_us: f64,
}

/// How many bracketed launches wait before the completed ones are read back (and their
/// events destroyed) at the next launch: the driver's events stay few in a long traced run.
const REAP_AT: usize = 256;

/// A stream's bracketed launches, and where their times are measured from.
#[derive(Default)]
pub(crate) struct Timeline {
    /// When the anchor event completed, on the host's clock.
    anchor_at: Option<Instant>,
    /// The last event read (first the anchor) and its time in µs after the anchor: each
    /// launch is timed from the one before, so the f32 milliseconds the driver reports stay
    /// short and precise however long the trace runs.
    reference: Option<(sys::CUevent, f64)>,
    pending: Vec<Timed>,
    resolved: Vec<Resolved>,
}

// SAFETY: event handles may be used from any thread with their context bound; the timeline
// sits behind its stream's mutex.
unsafe impl Send for Timeline {}

/// A new timing event recorded on `stream` (the context bound).
fn timing_event(stream: sys::CUstream) -> Result<sys::CUevent, result::DriverError> {
    let ev = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)?;
    // SAFETY: both handles are live in the bound context.
    if let Err(e) = unsafe { result::event::record(ev, stream) } {
        // SAFETY: created above and not shared.
        let _ = unsafe { result::event::destroy(ev) };
        return Err(e);
    }
    Ok(ev)
}

/// Milliseconds from `a` to `b`, both complete.
fn elapsed_ms(a: sys::CUevent, b: sys::CUevent) -> Option<f32> {
    // SAFETY: both are live timing events of the bound context.
    unsafe { result::event::elapsed(a, b) }.ok()
}

impl Timeline {
    /// Runs `launch` (a kernel body that launches on `stream`, the context bound) bracketed
    /// by timing events, kept to become trace event `name` (instruction `id`). A failure to
    /// make the events leaves the launch untimed.
    pub(crate) fn timed<R>(
        &mut self,
        stream: sys::CUstream,
        id: u64,
        name: &str,
        launch: impl FnOnce() -> R,
    ) -> R {
        let t = self;
        if t.reference.is_none()
            && let Ok(ev) = timing_event(stream)
        {
            // SAFETY: a live event of the bound context.
            if unsafe { result::event::synchronize(ev) }.is_ok() {
                t.anchor_at = Some(Instant::now());
                t.reference = Some((ev, 0.0));
            } else {
                // SAFETY: as above; not kept.
                let _ = unsafe { result::event::destroy(ev) };
            }
        }
        if t.reference.is_none() {
            // No anchor (the driver refused an event): the stream's launches go untimed.
            return launch();
        }
        let start = timing_event(stream).ok();
        let r = launch();
        if let Some(start) = start {
            match timing_event(stream) {
                Ok(end) => t.pending.push(Timed {
                    start,
                    end,
                    name: name.to_string(),
                    id,
                }),
                // SAFETY: created above and not kept.
                Err(_) => drop(unsafe { result::event::destroy(start) }),
            }
        }
        if t.pending.len() >= REAP_AT {
            t.read_completed();
        }
        r
    }

    /// Whether no launch is kept.
    pub(crate) fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.resolved.is_empty()
    }

    /// The launches read back so far, as trace events on lane `lane` of stream `stream`
    /// (times in µs since `origin`); launches still running stay for a later call. With
    /// `clear`, every launch is dropped instead. The context must be bound.
    pub(crate) fn device_events(
        &mut self,
        stream: u32,
        origin: Instant,
        lane: &str,
        clear: bool,
    ) -> Vec<TraceEvent> {
        let t = self;
        if clear {
            t.destroy_pending();
            t.resolved.clear();
            return Vec::new();
        }
        t.read_completed();
        let base = (t.anchor_at).map_or(0.0, |a| {
            a.saturating_duration_since(origin).as_secs_f64() * 1e6
        });
        (t.resolved.drain(..))
            .map(|r| TraceEvent {
                name: r.name,
                id: r.id,
                stream,
                thread: lane.to_string(),
                start_us: base + r.start_us,
                dur_us: r.dur_us,
            })
            .collect()
    }

    /// Reads back the launches that have completed, in launch order (the stream runs in
    /// order, so the first still running ends the pass), and destroys their events but the
    /// last start, the next reference. The context must be bound.
    fn read_completed(&mut self) {
        let mut done = 0;
        for p in &self.pending {
            // SAFETY: a live event of the bound context.
            if unsafe { result::event::query(p.end) }.is_err() {
                break;
            }
            let Some((reference, at)) = self.reference else {
                break;
            };
            let from = elapsed_ms(reference, p.start).map_or(0.0, f64::from);
            let dur = elapsed_ms(p.start, p.end).map_or(0.0, f64::from);
            let start_us = at + from * 1e3;
            self.resolved.push(Resolved {
                name: p.name.clone(),
                id: p.id,
                start_us,
                dur_us: dur * 1e3,
            });
            self.reference = Some((p.start, start_us));
            // SAFETY: complete and not shared; `reference` was the previous start (or the
            // anchor), replaced just above.
            unsafe {
                let _ = result::event::destroy(reference);
                let _ = result::event::destroy(p.end);
            }
            done += 1;
        }
        self.pending.drain(..done);
    }

    /// Destroys the events of the launches not read back.
    fn destroy_pending(&mut self) {
        for p in self.pending.drain(..) {
            // SAFETY: owned here; the driver destroys a pending event once it completes.
            unsafe {
                let _ = result::event::destroy(p.start);
                let _ = result::event::destroy(p.end);
            }
        }
    }

    /// Destroys every event (the stream's context bound): the stream is going.
    pub(crate) fn destroy(&mut self) {
        self.destroy_pending();
        if let Some((r, _)) = self.reference.take() {
            // SAFETY: owned here.
            let _ = unsafe { result::event::destroy(r) };
        }
    }
}
