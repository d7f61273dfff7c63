//! `ThreadCtx`: a worker thread that runs one stream's compute.
//!
//! The scheduler splices batches of dispatched instructions into the worker's [`HandOff`]; the
//! worker runs them in order and splices the finished ones into the engine's completion list,
//! notifying the scheduler. After a batch it spins briefly (new work often follows at once),
//! then sleeps on its notifier. Shutdown: the scheduler closes the hand-off once every
//! instruction is released; the worker sees the empty, closed list and exits; the scheduler
//! joins it.

use crate::alloc::DeviceAllocator;
use crate::exec::{ExecEnv, IN_ENGINE, run_unit};
use crate::handoff::HandOff;
use crate::instruction::{InstrAdapter, InstrList};
use crate::shared::Shared;
use crate::stream::{StreamId, StreamPolicy};
use crossbeam_utils::Backoff;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A worker's handle, owned by the scheduler.
pub(crate) struct ThreadCtx {
    pub(crate) queue: Arc<HandOff>,
    thread: Option<JoinHandle<()>>,
}

/// Report finished work at least this often within a long batch.
const REPORT_EVERY: Duration = Duration::from_micros(20);
/// Spin this long after a batch before sleeping.
const SPIN: Duration = Duration::from_micros(50);

impl ThreadCtx {
    pub(crate) fn spawn(
        stream_id: StreamId,
        policy: Arc<dyn StreamPolicy>,
        allocator: Arc<DeviceAllocator>,
        shared: Arc<Shared>,
    ) -> crate::Result<Self> {
        let queue = Arc::new(HandOff::new());
        let q = queue.clone();
        let name = format!("eddy-worker-{}", stream_id.0);
        let thread = std::thread::Builder::new()
            .name(name.clone())
            .spawn(move || {
                IN_ENGINE.with(|c| c.set(true));
                let env = ExecEnv {
                    stream_id,
                    policy: &*policy,
                    allocator: &allocator,
                    shared: &shared,
                };
                worker_loop(&q, &env);
            })
            .map_err(|e| crate::Error::spawn(&name, &e))?;
        Ok(ThreadCtx {
            queue,
            thread: Some(thread),
        })
    }

    /// Closes the queue and joins the thread.
    pub(crate) fn join(&mut self) {
        self.queue.close();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn worker_loop(q: &HandOff, env: &ExecEnv<'_>) {
    let mut idle_since: Option<Instant> = None;
    let backoff = Backoff::new();
    loop {
        let mut batch = q.take();
        if batch.is_empty() {
            if q.is_closed() {
                return;
            }
            let since = *idle_since.get_or_insert_with(Instant::now);
            if since.elapsed() < SPIN {
                backoff.snooze();
            } else {
                q.notifier.wait(None);
                idle_since = None;
                backoff.reset();
            }
            continue;
        }
        idle_since = None;
        backoff.reset();
        let mut done = InstrList::new(InstrAdapter::new());
        let mut last_report = Instant::now();
        while let Some(mut node) = batch.pop_front() {
            run_unit(&mut node, env);
            done.push_back(node);
            if last_report.elapsed() >= REPORT_EVERY {
                env.shared
                    .completions
                    .push_to(done.take(), &env.shared.pending.notifier);
                last_report = Instant::now();
            }
        }
        env.shared
            .completions
            .push_to(done, &env.shared.pending.notifier);
    }
}
