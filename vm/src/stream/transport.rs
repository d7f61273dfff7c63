//! The transport stream: collectives between processes, which its instructions hand to a
//! communication thread of their own, returning at once. As on a CUDA stream, "done" means
//! "launched": the thread runs the hand-offs in order, and the stream's events complete once
//! it has finished everything launched before them. Consumers on other streams wait for such
//! an event (the builder's soft sync), a release frees its memory only after one, and the
//! collectives themselves follow one another on the thread without a round trip through the
//! scheduler each.
//!
//! Each instruction takes a [`Ticket`] when it launches, hands it to the thread with its
//! work, and the ticket marks the work done when dropped there. Tickets must be dropped in
//! the order they were taken (one thread, first in, first out).

use super::{Device, Event, Exec, StreamKind, StreamPolicy};
use crate::sync::{AtomicU64, Mutex};
use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;

/// What the stream and its tickets and events share. A ticket's drop adds to `done`, then
/// reads `watched`; `watch` raises `watched`, and the engine then reads `done` when it
/// polls: sequentially consistent both ways, so one of the two sees the other's write (a
/// watched event that completes wakes the engine, or the engine finds it complete).
struct Counts {
    /// Hand-offs launched.
    launched: AtomicU64,
    /// Hand-offs finished (the first `done` launched).
    done: AtomicU64,
    /// The highest count of finished hand-offs an event that the engine waits for needs.
    watched: AtomicU64,
    /// Wakes the engine (set when it starts).
    waker: Mutex<Option<Arc<dyn Fn() + Send + Sync>>>,
}

impl Counts {
    fn new() -> Self {
        Counts {
            launched: AtomicU64::new(0),
            done: AtomicU64::new(0),
            watched: AtomicU64::new(0),
            waker: Mutex::new(None),
        }
    }
}

/// A CPU stream of collectives handed to another thread (see the module).
///
/// # Examples
///
/// ```
/// use eddy_vm::stream::{transport::TransportStream, Event, StreamKind, StreamPolicy};
/// let s = TransportStream::new("transport");
/// assert!(s.done_means_launched() && s.kind() == StreamKind::Transport);
/// let ticket = s.ticket(); // an instruction launches its hand-off
/// let e = s.record_event().expect("work is pending");
/// assert!(!e.is_complete());
/// std::thread::spawn(move || drop(ticket)).join().unwrap(); // the thread finished it
/// assert!(e.is_complete());
/// assert!(s.record_event().is_none(), "nothing pending");
/// ```
pub struct TransportStream {
    name: String,
    counts: Arc<Counts>,
}

impl TransportStream {
    /// A transport stream named `name`, on `cpu:0`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::{transport::TransportStream, StreamPolicy};
    /// assert_eq!(TransportStream::new("transport").name(), "transport");
    /// ```
    pub fn new(name: impl Into<String>) -> Self {
        TransportStream {
            name: name.into(),
            counts: Arc::new(Counts::new()),
        }
    }

    /// Notes one more hand-off launched: the ticket to drop once it is finished.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::{transport::TransportStream, StreamPolicy};
    /// let s = TransportStream::new("transport");
    /// let (a, b) = (s.ticket(), s.ticket());
    /// let first = s.record_event().unwrap();
    /// drop(a);
    /// assert!(!first.is_complete(), "the second is still pending");
    /// drop(b);
    /// assert!(first.is_complete());
    /// ```
    pub fn ticket(&self) -> Ticket {
        self.counts.launched.fetch_add(1, SeqCst);
        Ticket {
            counts: self.counts.clone(),
        }
    }

    /// Sets what wakes the engine when a watched event completes (the engine sets it when
    /// it starts).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::stream::{transport::TransportStream, StreamPolicy};
    /// use std::sync::{Arc, atomic::{AtomicUsize, Ordering}};
    /// let s = TransportStream::new("transport");
    /// let woken = Arc::new(AtomicUsize::new(0));
    /// let w = woken.clone();
    /// s.set_waker(Arc::new(move || { w.fetch_add(1, Ordering::SeqCst); }));
    /// let t = s.ticket();
    /// s.watch(&s.record_event().unwrap());
    /// drop(t);
    /// assert_eq!(woken.load(Ordering::SeqCst), 1);
    /// ```
    pub fn set_waker(&self, waker: Arc<dyn Fn() + Send + Sync>) {
        *self.counts.waker.lock() = Some(waker);
    }
}

/// One hand-off in flight on a [`TransportStream`]: dropping it marks the hand-off finished
/// (and wakes the engine if it waits for it).
///
/// # Examples
///
/// ```
/// use eddy_vm::stream::{transport::TransportStream, Event, StreamPolicy};
/// let s = TransportStream::new("transport");
/// let t = s.ticket();
/// let e = s.record_event().unwrap();
/// drop(t);
/// assert!(e.is_complete());
/// ```
pub struct Ticket {
    counts: Arc<Counts>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let done = self.counts.done.fetch_add(1, SeqCst) + 1;
        if self.counts.watched.load(SeqCst) >= done {
            let waker = self.counts.waker.lock().clone();
            if let Some(w) = waker {
                w();
            }
        }
    }
}

/// Complete once the first `target` hand-offs of its stream are finished.
struct TransportEvent {
    counts: Arc<Counts>,
    target: u64,
}

impl Event for TransportEvent {
    fn is_complete(&self) -> bool {
        self.counts.done.load(SeqCst) >= self.target
    }
    fn as_any_event(&self) -> &dyn Any {
        self
    }
}

impl StreamPolicy for TransportStream {
    fn name(&self) -> &str {
        &self.name
    }
    fn device(&self) -> Device {
        Device::CPU
    }
    fn kind(&self) -> StreamKind {
        StreamKind::Transport
    }
    fn exec(&self) -> Exec {
        Exec::Inline
    }
    fn done_means_launched(&self) -> bool {
        true
    }
    fn fusion(&self) -> bool {
        false
    }
    fn record_event(&self) -> Option<Arc<dyn Event>> {
        let target = self.counts.launched.load(SeqCst);
        if self.counts.done.load(SeqCst) >= target {
            return None;
        }
        Some(Arc::new(TransportEvent {
            counts: self.counts.clone(),
            target,
        }))
    }
    fn watch(&self, event: &Arc<dyn Event>) {
        if let Some(e) = event.as_any_event().downcast_ref::<TransportEvent>() {
            self.counts.watched.fetch_max(e.target, SeqCst);
        }
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instruction::{ComputeCtx, InstructionPolicy};
    use crate::{Counted, Result, Vm, blob::Blob};
    use std::sync::mpsc::{Sender, channel};
    use std::time::Duration;

    type Job = Box<dyn FnOnce() + Send>;

    /// Writes `value` into its output on a thread of its own, a while after it launched.
    struct Hand {
        outputs: Vec<Counted<Blob>>,
        inputs: Vec<Counted<Blob>>,
        value: u8,
        thread: Sender<Job>,
        /// Set to whether the output still had its memory when the work wrote it.
        allocated: Arc<std::sync::atomic::AtomicBool>,
    }

    impl InstructionPolicy for Hand {
        fn name(&self) -> &str {
            "hand"
        }
        fn inputs(&self) -> &[Counted<Blob>] {
            &self.inputs
        }
        fn outputs(&self) -> &[Counted<Blob>] {
            &self.outputs
        }
        fn compute(&mut self, ctx: &mut ComputeCtx<'_>) -> Result<()> {
            let s = ctx.stream().as_any().downcast_ref::<TransportStream>();
            let ticket = s.expect("on the transport stream").ticket();
            let (out, ins, v) = (self.outputs[0].clone(), self.inputs.clone(), self.value);
            let allocated = self.allocated.clone();
            let job: Job = Box::new(move || {
                std::thread::sleep(Duration::from_millis(20));
                allocated.store(out.is_allocated(), SeqCst);
                // SAFETY: the engine keeps the input readable until the ticket drops.
                let add = ins.first().map_or(0, |b| unsafe { b.bytes_ref()[0] });
                // SAFETY: and the output exclusively writable.
                unsafe { out.bytes_mut().fill(v + add) };
                drop(ticket);
            });
            self.thread.send(job).expect("the thread runs");
            Ok(())
        }
    }

    /// An engine with a transport stream, and a thread that runs what is handed to it.
    fn setup() -> (Vm, crate::StreamId, Sender<Job>) {
        let vm = Vm::builder().transport_stream(true).build().unwrap();
        let s = vm
            .stream_of(Device::CPU, StreamKind::Transport)
            .expect("a transport stream");
        let (tx, rx) = channel::<Job>();
        std::thread::spawn(move || {
            while let Ok(job) = rx.recv() {
                job();
            }
        });
        (vm, s, tx)
    }

    #[test]
    fn readers_on_other_streams_and_the_host_wait_for_the_handed_work() {
        let (vm, s, tx) = setup();
        let (x, y) = (vm.new_blob(8), vm.new_blob(8));
        let hand = |outputs: Vec<_>, inputs: Vec<_>, value| Hand {
            outputs,
            inputs,
            value,
            thread: tx.clone(),
            allocated: Arc::default(),
        };
        vm.run(s, hand(vec![x.clone()], vec![], 5)).unwrap();
        // The second reads the first's output on the same stream: the thread's order keeps
        // it after the first.
        vm.run(s, hand(vec![y.clone()], vec![x.clone()], 1))
            .unwrap();
        // A reader on the compute stream.
        let z = vm.new_blob(8);
        let (yc, zc) = (y.clone(), z.clone());
        vm.run(
            crate::StreamId::CPU,
            crate::testing::Record::new(0, vec![yc.clone()], vec![zc.clone()], &Default::default())
                // SAFETY: the engine runs the body with `yc` readable and `zc` writable.
                .with_body(move || unsafe { zc.bytes_mut().copy_from_slice(yc.bytes_ref()) }),
        )
        .unwrap();
        assert_eq!(vm.read_blob(&z, |b| b.to_vec()).unwrap(), vec![6; 8]);
        assert_eq!(vm.read_blob(&x, |b| b[0]).unwrap(), 5);
    }

    #[test]
    fn a_release_waits_for_the_handed_work_that_uses_the_blob() {
        let (vm, s, tx) = setup();
        let x = vm.new_blob(1 << 16);
        let allocated = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let hand = Hand {
            outputs: vec![x.clone()],
            inputs: vec![],
            value: 7,
            thread: tx,
            allocated: allocated.clone(),
        };
        vm.run(s, hand).unwrap();
        vm.release(&x).unwrap();
        vm.sync().unwrap(); // done means launched: the work may still be running
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while x.is_allocated() {
            assert!(std::time::Instant::now() < deadline, "never freed");
            std::thread::yield_now();
        }
        assert!(allocated.load(SeqCst), "freed before the work wrote it");
    }
}
