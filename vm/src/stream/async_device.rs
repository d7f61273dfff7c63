//! A test-only asynchronous device with CUDA-shaped semantics, driven by the test.
//!
//! Each [`AsyncStream`] is an in-order queue. `compute` on such a stream only *launches* work
//! ([`AsyncStream::launch`]); the work runs when the test calls [`AsyncDevice::run_next`] or
//! [`AsyncDevice::run_all`]. Events mark a point in a queue; a queue can be made to wait for an
//! event of another queue (device-side wait). This lets tests prove the soft-sync rules without a
//! GPU: a consumer on another stream must never see a producer's work before it ran.

use super::{Device, Event, Exec, StreamPolicy};
use parking_lot::Mutex;
use std::any::Any;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

enum Item {
    Work(Box<dyn FnOnce() + Send>),
    Record(Arc<AsyncEvent>),
    Wait(Arc<dyn Event>),
}

/// An event on the test device.
#[derive(Default, Debug)]
pub struct AsyncEvent {
    done: AtomicBool,
}

impl Event for AsyncEvent {
    fn is_complete(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }
}

/// The test device: a set of in-order queues.
pub struct AsyncDevice {
    index: u32,
    queues: Mutex<Vec<VecDeque<Item>>>,
    waker: Mutex<Option<Box<dyn Fn() + Send + Sync>>>,
}

impl AsyncDevice {
    /// A device `Device::Test(index)`.
    pub fn new(index: u32) -> Arc<Self> {
        Arc::new(AsyncDevice {
            index,
            queues: Mutex::new(Vec::new()),
            waker: Mutex::new(None),
        })
    }

    /// A new stream (queue) on this device.
    pub fn stream(self: &Arc<Self>, name: &str) -> AsyncStream {
        let mut q = self.queues.lock();
        q.push(VecDeque::new());
        AsyncStream {
            name: name.to_string(),
            device: self.clone(),
            queue: q.len() - 1,
        }
    }

    /// Called after the device makes progress (tests set it to the engine's waker so the
    /// scheduler re-polls events).
    pub fn set_waker(&self, f: impl Fn() + Send + Sync + 'static) {
        *self.waker.lock() = Some(Box::new(f));
    }

    /// Runs the next item of queue `q` if it can run; returns whether something ran.
    pub fn run_next(&self, q: usize) -> bool {
        let item = {
            let mut qs = self.queues.lock();
            let Some(front) = qs[q].front() else {
                return false;
            };
            if let Item::Wait(e) = front {
                if !e.is_complete() {
                    return false;
                }
            }
            qs[q].pop_front().expect("front exists")
        };
        match item {
            Item::Work(f) => f(),
            Item::Record(e) => e.done.store(true, Ordering::Release),
            Item::Wait(_) => {}
        }
        if let Some(w) = self.waker.lock().as_ref() {
            w();
        }
        true
    }

    /// Runs every queue until none can make progress; returns how many items ran.
    pub fn run_all(&self) -> usize {
        let mut n = 0;
        loop {
            let queues = self.queues.lock().len();
            let mut progressed = false;
            for q in 0..queues {
                while self.run_next(q) {
                    n += 1;
                    progressed = true;
                }
            }
            if !progressed {
                return n;
            }
        }
    }

    /// Items waiting in queue `q`.
    pub fn queued(&self, q: usize) -> usize {
        self.queues.lock()[q].len()
    }
}

/// A stream of the [`AsyncDevice`]: launches are queued, not run.
pub struct AsyncStream {
    name: String,
    device: Arc<AsyncDevice>,
    queue: usize,
}

impl AsyncStream {
    /// Queues `work` to run when the test advances this queue.
    pub fn launch(&self, work: impl FnOnce() + Send + 'static) {
        self.device.queues.lock()[self.queue].push_back(Item::Work(Box::new(work)));
    }
    /// This stream's queue index on its device.
    pub fn queue(&self) -> usize {
        self.queue
    }
}

impl StreamPolicy for AsyncStream {
    fn name(&self) -> &str {
        &self.name
    }
    fn device(&self) -> Device {
        Device::Test(self.device.index)
    }
    fn exec(&self) -> Exec {
        Exec::Inline
    }
    fn done_means_launched(&self) -> bool {
        true
    }
    fn supports_stream_wait(&self) -> bool {
        true
    }
    fn fusion(&self) -> bool {
        false
    }
    fn record_event(&self) -> Option<Arc<dyn Event>> {
        let e = Arc::new(AsyncEvent::default());
        self.device.queues.lock()[self.queue].push_back(Item::Record(e.clone()));
        Some(e)
    }
    fn wait_event(&self, event: &Arc<dyn Event>) {
        self.device.queues.lock()[self.queue].push_back(Item::Wait(event.clone()));
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
