//! The device lanes of the trace: when the engine records its timeline, each kernel body
//! launched on a CUDA stream is bracketed by two timing events, and the events' times, read
//! back once they have completed, become trace events on a lane of the stream's own
//! (`cuda:0 device`), beside the host's lanes.
//!
//! Device times are relative to an anchor: the first bracketed launch of a stream records an
//! event, waits for it, and notes the host's clock right after, so a device time is the
//! anchor's host time plus the elapsed time between the two events (within the few
//! microseconds the wait takes to return).

use super::cuda::CudaStream;
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

/// A stream's bracketed launches not yet read back, and its anchor.
#[derive(Default)]
pub(crate) struct Timeline {
    anchor: Option<(sys::CUevent, Instant)>,
    pending: Vec<Timed>,
}

// SAFETY: event handles may be used from any thread with their context bound; the timeline
// sits behind its stream's mutex.
unsafe impl Send for Timeline {}

/// A new timing event recorded on `stream` (the context bound).
fn timing_event(stream: sys::CUstream) -> Result<sys::CUevent, String> {
    let ev =
        result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT).map_err(|e| e.to_string())?;
    // SAFETY: both handles are live in the bound context.
    if let Err(e) = unsafe { result::event::record(ev, stream) } {
        // SAFETY: created above and not shared.
        let _ = unsafe { result::event::destroy(ev) };
        return Err(e.to_string());
    }
    Ok(ev)
}

/// Milliseconds from `a` to `b`, both complete.
fn elapsed_ms(a: sys::CUevent, b: sys::CUevent) -> Option<f32> {
    // SAFETY: both are live timing events of the bound context.
    unsafe { result::event::elapsed(a, b) }.ok()
}

impl CudaStream {
    /// Runs `launch` (a kernel body that launches on this stream) bracketed by timing events,
    /// kept to become trace event `name` (instruction `id`) on the stream's device lane. A
    /// failure to make the events leaves the launch untimed.
    pub fn timed<R>(&self, id: u64, name: &str, launch: impl FnOnce() -> R) -> R {
        let mut t = self.timeline().lock();
        if t.anchor.is_none()
            && let Ok(ev) = timing_event(self.raw())
        {
            // SAFETY: a live event of the bound context (the kernel body binds it).
            if unsafe { result::event::synchronize(ev) }.is_ok() {
                t.anchor = Some((ev, Instant::now()));
            } else {
                // SAFETY: as above; not kept.
                let _ = unsafe { result::event::destroy(ev) };
            }
        }
        let start = timing_event(self.raw()).ok();
        let r = launch();
        if let Some(start) = start {
            match timing_event(self.raw()) {
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
        r
    }

    /// The bracketed launches that have completed, as trace events on lane `lane` of stream
    /// `stream` (times in µs since `origin`); the others stay for a later call. With `clear`,
    /// every bracketed launch is dropped instead.
    pub(crate) fn device_events(
        &self,
        stream: u32,
        origin: Instant,
        lane: &str,
        clear: bool,
    ) -> Vec<TraceEvent> {
        let mut t = self.timeline().lock();
        if t.pending.is_empty() || self.cuda_device().bind().is_err() {
            return Vec::new();
        }
        let mut out = Vec::new();
        let mut kept = Vec::new();
        for p in std::mem::take(&mut t.pending) {
            // SAFETY: a live event of the bound context.
            let done = unsafe { result::event::query(p.end) }.is_ok();
            if !done && !clear {
                kept.push(p);
                continue;
            }
            if let (false, Some((anchor, at))) = (clear, t.anchor) {
                let from = elapsed_ms(anchor, p.start);
                let dur = elapsed_ms(p.start, p.end);
                if let (Some(from), Some(dur)) = (from, dur) {
                    let base = at.saturating_duration_since(origin).as_secs_f64() * 1e6;
                    out.push(TraceEvent {
                        name: p.name.clone(),
                        id: p.id,
                        stream,
                        thread: lane.to_string(),
                        start_us: base + f64::from(from) * 1e3,
                        dur_us: f64::from(dur) * 1e3,
                    });
                }
            }
            // SAFETY: complete (or no longer wanted) and not shared: the driver destroys an
            // event still pending once it completes.
            unsafe {
                let _ = result::event::destroy(p.start);
                let _ = result::event::destroy(p.end);
            }
        }
        t.pending = kept;
        out
    }
}

impl Timeline {
    /// Destroys every event (the stream's context bound): the stream is going.
    pub(crate) fn destroy(&mut self) {
        for p in self.pending.drain(..) {
            // SAFETY: owned here; the driver destroys a pending event once it completes.
            unsafe {
                let _ = result::event::destroy(p.start);
                let _ = result::event::destroy(p.end);
            }
        }
        if let Some((a, _)) = self.anchor.take() {
            // SAFETY: owned here.
            let _ = unsafe { result::event::destroy(a) };
        }
    }
}
