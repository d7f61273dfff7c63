//! The scheduler: one thread (or the caller, in synchronous mode) that owns every live
//! instruction and moves it through its life.
//!
//! ```text
//!   user threads                 scheduler (owns Scheduler)                 workers / devices
//!   ────────────                 ──────────────────────────                 ─────────────────
//!   receive(list) ──splice──► pending ─┐
//!                                      │ one pass, always in this order:
//!                                      │ 1. release: take completions; per stream, release
//!                                      │    from the front of the running list while done
//!                                      │ 2. barriers: run the first one whose epoch is empty
//!                                      │ 3. ingest ≤ window: fuse runs of fusable same-stream
//!                                      │    instructions, give each unit a slot, build edges
//!                                      │ 4. dispatch: per stream, while the head of its waiting
//!                                      │    FIFO has no in-edges: prepare (OOM path), then
//!                                      │    compute inline or splice to the worker ─────────► run
//!                                      │ 5. probes                                            │
//!                          completions ◄──────────────────────────────────────── splice back ┘
//! ```
//!
//! Ownership: `Scheduler` and everything in it (slots, stream FIFOs, access lists through the
//! `QCellOwner`) is touched only by the thread that holds `&mut Scheduler`. Other threads reach
//! it only through the `HandOff` lists and atomics in `Shared`.
//!
//! Ordering: each stream dispatches in submission order and runs FIFO (its sequential
//! dependence), so edges are only made across streams, and a cross-stream edge is satisfied
//! when its source is released (for an asynchronous stream, the builder's soft-sync events make
//! "released" mean "finished").
//!
//! Idling: after the last progress the thread keeps polling (spin, then yield) for the
//! configured spin time (~1 ms), then sleeps on the coalescing notifier until work arrives.
//! It stops spinning early while a waiting user thread runs the passes itself (`Vm::wait`):
//! on a 2-core machine that thread and a kernel helper already fill the cores, and a third
//! spinning thread would take their time (the book's `mlp_infer` section has the figures).
//! For the same reason a user thread that starts waiting while this thread runs passes asks
//! for the scheduler (`Vm::take_scheduler`): this thread lets go after the instruction it is
//! running, skips its spin and sleeps, and the waiter runs the rest.

mod dispatch;
mod ingest;
mod inline;
mod release;
mod worker;

pub(crate) use inline::drop_policy;

use crate::alloc::DeviceAllocator;
use crate::exec::IN_ENGINE;
use crate::instruction::{InstrAdapter, InstrList, Instruction};
use crate::shared::Shared;
use crate::stream::{Device, Event, Exec, StreamId, StreamPolicy};
use crossbeam_utils::Backoff;
use qcell::QCellOwner;
use smallvec::SmallVec;
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;
use worker::ThreadCtx;

/// One live unit (an instruction or a fused group).
struct Slot {
    node: Option<Box<Instruction>>,
    id: u64,
    stream: u32,
    in_degree: u32,
    out: SmallVec<[u32; 4]>,
    epoch: u64,
    members: u32,
    done: bool,
    event: Option<Arc<dyn Event>>,
}

impl Slot {
    fn empty() -> Self {
        Slot {
            node: None,
            id: 0,
            stream: 0,
            in_degree: 0,
            out: SmallVec::new(),
            epoch: 0,
            members: 0,

            done: false,
            event: None,
        }
    }
}

/// Per-stream scheduling state.
struct StreamState {
    policy: Arc<dyn StreamPolicy>,
    allocator: Arc<DeviceAllocator>,
    device: Device,
    exec: Exec,
    fusion: bool,
    /// Computes inline with synchronous completion: work may run at once on a submitting
    /// thread (`inline.rs`).
    runs_now: bool,
    /// Units received, not yet dispatched, in submission order.
    waiting: VecDeque<u32>,
    /// Units dispatched, not yet released, in dispatch order.
    running: VecDeque<u32>,
    /// Units dispatched this pass, to splice to the worker at once.
    worker_batch: InstrList,
    worker: Option<ThreadCtx>,
}

pub(crate) struct Scheduler {
    shared: Arc<Shared>,
    owner: QCellOwner,
    slots: Vec<Slot>,
    free_slots: Vec<u32>,
    local: InstrList,
    streams: Vec<StreamState>,
    /// Bit `s` set: stream `s` may complete its instructions out of order, so accesses on it
    /// need edges between them too (a mask, not a field of the stream's state: the test is
    /// on every op's path).
    out_of_order: u64,
    /// Live units per barrier epoch, from `first_epoch` on.
    epochs: VecDeque<usize>,
    first_epoch: u64,
    barriers: VecDeque<(u64, Box<Instruction>)>,
    live: usize,
    next_id: u64,
    counts: release::Counts,
    /// Released, emptied nodes waiting to go to the pool at the end of the pass.
    recycle: InstrList,
    /// Released nodes that keep their policy for a submitting thread to drop (see
    /// `InstructionPolicy::deferred_drop`), waiting to go to the pool at the end of the pass.
    deferred: InstrList,
    /// The addresses of the last few nodes put on `deferred`, for each new one's prefetch
    /// hint (see `pool::take_node`), and the next index.
    deferred_recent: [usize; 8],
    deferred_next: usize,
    /// Whether released policies that allow it are left for a submitting thread to drop: set
    /// while the scheduler thread runs its passes, where it pays off (the policies' blob
    /// counts stay with the thread that raises them). A user thread running the passes
    /// drops them itself.
    pub(crate) defer_drops: bool,
    /// Nodes on `recycle` and `deferred`, and of those on `deferred`: see `publish`.
    pooled: usize,
    pooled_deferred: usize,
    /// Streams whose failing allocation is in the OOM path (see `oom_drain`).
    draining: SmallVec<[usize; 4]>,
}

impl Scheduler {
    pub(crate) fn new(shared: Arc<Shared>, owner: QCellOwner) -> crate::Result<Self> {
        let sync_mode = shared.config.sync_mode;
        let mut streams = Vec::with_capacity(shared.streams.len());
        for (i, s) in shared.streams.iter().enumerate() {
            let exec = if sync_mode {
                Exec::Inline
            } else {
                s.policy.exec()
            };
            let worker = match exec {
                Exec::Worker => Some(ThreadCtx::spawn(
                    StreamId(i as u32),
                    s.policy.clone(),
                    s.allocator.clone(),
                    shared.clone(),
                )?),
                Exec::Inline => None,
            };
            streams.push(StreamState {
                policy: s.policy.clone(),
                allocator: s.allocator.clone(),
                device: s.policy.device(),
                exec,
                fusion: s.policy.fusion() && shared.config.fusion,
                runs_now: exec == Exec::Inline && !s.policy.done_means_launched(),
                waiting: VecDeque::new(),
                running: VecDeque::new(),
                worker_batch: InstrList::new(InstrAdapter::new()),
                worker,
            });
        }
        let mut out_of_order = 0u64;
        for (i, s) in shared.streams.iter().enumerate() {
            if !s.policy.completes_in_order() {
                if i >= 64 {
                    return Err(crate::Error::InvalidArgument {
                        at: crate::error::Caller::UNKNOWN,
                        op: "Vm::start".into(),
                        message: format!(
                            "stream {i} ({}) completes out of order; only the first 64 streams may",
                            s.policy.name()
                        ),
                    });
                }
                out_of_order |= 1 << i;
            }
        }
        Ok(Scheduler {
            shared,
            owner,
            out_of_order,
            slots: Vec::new(),
            free_slots: Vec::new(),
            local: InstrList::new(InstrAdapter::new()),
            streams,
            epochs: VecDeque::from([0]),
            first_epoch: 0,
            barriers: VecDeque::new(),
            live: 0,
            next_id: 1,
            counts: Default::default(),
            recycle: InstrList::new(InstrAdapter::new()),
            deferred: InstrList::new(InstrAdapter::new()),
            deferred_recent: [0; 8],
            deferred_next: 0,
            defer_drops: false,
            pooled: 0,
            pooled_deferred: 0,
            draining: SmallVec::new(),
        })
    }

    /// Appends received instructions (synchronous mode feeds the scheduler directly).
    pub(crate) fn push_local(&mut self, list: InstrList) {
        self.local.back_mut().splice_after(list);
    }

    /// Appends `list` after everything received so far, for a thread that holds the scheduler
    /// and submits (the pending stack's earlier work first, so program order holds).
    pub(crate) fn push_after_pending(&mut self, list: InstrList) {
        let earlier = self.shared.pending.take();
        self.local.back_mut().splice_after(earlier);
        self.local.back_mut().splice_after(list);
    }

    /// One scheduling pass; returns whether anything moved.
    pub(crate) fn pass(&mut self) -> bool {
        crate::fail_point!("vm::pass");
        if self.shared.dump_request.load(Ordering::Relaxed)
            && self.shared.dump_request.swap(false, Ordering::AcqRel)
        {
            let d = self.dump();
            *self.shared.dump.lock() = Some(d);
        }
        let mut progress = self.release_finished();
        progress |= self.run_barriers();
        if self.local.is_empty() {
            self.local = self.shared.pending.take();
        }
        progress |= self.ingest();
        progress |= self.dispatch_ready();
        progress |= self.run_probes();
        progress
    }

    /// Whether the scheduler thread should let go of the scheduler now, between two
    /// instructions: a user thread waits for it (`Vm::take_scheduler`). Only the scheduler
    /// thread's passes (those that defer drops) hand over; a user thread's run to the end.
    pub(crate) fn hands_over(&self) -> bool {
        self.defer_drops && self.shared.waiters_wanting.load(Ordering::Relaxed) > 0
    }

    /// Runs passes until nothing moves (synchronous mode, and draining).
    pub(crate) fn run_until_stalled(&mut self) {
        while self.pass() {}
    }

    /// Whether some instruction is dispatched and not yet released.
    pub(crate) fn has_live(&self) -> bool {
        self.live != 0
    }

    /// Whether nothing is live or queued.
    pub(crate) fn is_idle(&self) -> bool {
        self.live == 0
            && self.barriers.is_empty()
            && self.local.is_empty()
            && self.shared.pending.is_empty()
    }

    fn has_events(&self) -> bool {
        self.streams.iter().any(|s| {
            s.running
                .front()
                .is_some_and(|&f| self.slots[f as usize].event.is_some())
        })
    }

    fn run_probes(&mut self) -> bool {
        if !self.shared.has_probes.load(Ordering::Acquire) {
            return false;
        }
        let mut probes = std::mem::take(&mut *self.shared.probes.lock());
        if probes.is_empty() {
            return false;
        }
        let before = probes.len();
        // A panicking probe is dropped, as one that is done: it must not fail the engine, nor
        // lose the other probes taken out of the shared list above.
        probes.retain_mut(
            |p| match std::panic::catch_unwind(std::panic::AssertUnwindSafe(p)) {
                Ok(done) => !done,
                Err(e) => {
                    tracing::error!(
                        message = %crate::error::panic_message(&*e),
                        "a probe panicked; it is dropped"
                    );
                    false
                }
            },
        );
        let progressed = probes.len() != before;
        let mut all = self.shared.probes.lock();
        all.extend(probes);
        self.shared
            .has_probes
            .store(!all.is_empty(), Ordering::Release);
        progressed
    }

    /// The scheduler thread's loop: passes while there is progress, a short spin, then sleep.
    /// The thread holds `cell` only while it runs passes: when it runs out of work it lets go,
    /// so a waiting user thread can take it and run the passes itself (`Vm::wait`), and a
    /// submitting thread can run a cheap instruction at once on the idle engine
    /// (`scheduler/inline.rs`); it then spins on the notifier (unless a waiting thread is
    /// running the passes), and finally sleeps on it.
    pub(crate) fn run_thread(cell: &parking_lot::Mutex<Scheduler>) {
        IN_ENGINE.with(|c| c.set(true));
        let shared = cell.lock().shared.clone();
        let spin = shared.config.spin;
        let backoff = Backoff::new();
        // Whether to spin after the next quiet pass: after being woken by new work, yes; after
        // a timed-out poll for device events, no.
        let mut spin_after = true;
        let mut last_progress = Instant::now();
        loop {
            let mut s = cell.lock();
            // A pass that panicked on a user thread (`Vm::run_passes_here`) failed the engine
            // and may have left this state inconsistent: do not run another pass on it.
            if shared.shutdown.load(Ordering::Acquire) && shared.is_failed() {
                s.shutdown_workers();
                return;
            }
            let mut progressed = false;
            s.defer_drops = true;
            while s.pass() {
                progressed = true;
                if s.hands_over() {
                    break;
                }
            }
            s.defer_drops = false;
            s.publish_all();
            if progressed {
                last_progress = Instant::now();
                backoff.reset();
            }
            // Shut down once drained, or at once if the engine failed (a pass that panicked
            // on a waiting user thread may have left the state inconsistent).
            if shared.shutdown.load(Ordering::Acquire) && (s.is_idle() || shared.is_failed()) {
                s.shutdown_workers();
                return;
            }
            // Device events and probes are polled, not notified.
            let poll = s.has_events() || shared.has_probes.load(Ordering::Acquire);
            drop(s);
            if spin_after && last_progress.elapsed() < spin {
                if poll {
                    snooze(&backoff);
                    continue;
                }
                if spin_until_notified(&shared, last_progress + spin, &backoff) {
                    continue;
                }
            }
            // Going to sleep: drop the policies left for the submitting threads, which may not
            // come back for them.
            // (Not while a waiting thread takes or holds the scheduler: its barrier sweeps.)
            if !shared.deferred_nodes.is_empty() {
                let waiter = shared.waiter_in_passes.load(Ordering::Relaxed)
                    || shared.waiters_wanting.load(Ordering::Relaxed) > 0;
                if let Some(mut s) = if waiter {
                    cell.try_lock()
                } else {
                    Some(cell.lock())
                } {
                    s.sweep_deferred();
                    s.publish_all();
                }
            }
            // Poll device events and probes at a modest rate; otherwise sleep until notified.
            let timeout = poll.then(|| std::time::Duration::from_micros(100));
            // Woken by new work: spin again after it. A timed-out poll does not.
            spin_after = shared.pending.notifier.wait(timeout);
            if spin_after {
                last_progress = Instant::now();
            }
            backoff.reset();
        }
    }

    pub(crate) fn shutdown_workers(&mut self) {
        for s in &mut self.streams {
            if let Some(w) = s.worker.as_mut() {
                w.join();
            }
        }
    }

    /// A human-readable list of the live instructions and what each waits for.
    pub(crate) fn dump(&self) -> String {
        let limit = self.shared.config.dump_limit;
        let mut out = String::new();
        let mut n = 0;
        for (si, s) in self.streams.iter().enumerate() {
            for (&slot, state) in s
                .running
                .iter()
                .map(|x| (x, "running"))
                .chain(s.waiting.iter().map(|x| (x, "waiting")))
            {
                n += 1;
                if n > limit {
                    continue;
                }
                let sl = &self.slots[slot as usize];
                let name = sl.node.as_ref().map_or("(on its worker)", |n| n.name());
                let _ = write!(
                    out,
                    "  #{} {name} on stream {si} ({}): {state}",
                    sl.id,
                    s.policy.name()
                );
                if state == "running" {
                    let why = if sl.done {
                        "done, behind an earlier one"
                    } else if sl.event.is_some() {
                        "waiting for its device event"
                    } else {
                        "computing"
                    };
                    let _ = write!(out, ", {why}");
                } else if sl.in_degree > 0 {
                    let _ = write!(out, ", {} unmet cross-stream edge(s)", sl.in_degree);
                }
                out.push('\n');
            }
        }
        for (e, b) in &self.barriers {
            let _ = writeln!(
                out,
                "  {} (epoch {e}) waiting for earlier instructions",
                b.name()
            );
        }
        if n > limit {
            let _ = writeln!(out, "  ... and {} more", n - limit);
        }
        if out.is_empty() {
            out.push_str("  (none)\n");
        }
        out
    }
}

/// One step of a spin: busy-wait, then yield once the backoff is spent.
fn snooze(backoff: &Backoff) {
    if backoff.is_completed() {
        std::thread::yield_now();
    } else {
        backoff.snooze();
    }
}

/// Spins, without the scheduler, until something notifies it (new work, a completion, a wake)
/// or `deadline`; returns whether it was notified (the notification is consumed).
fn spin_until_notified(shared: &Shared, deadline: Instant, backoff: &Backoff) -> bool {
    loop {
        if shared.pending.notifier.try_take() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        // A waiting user thread is running the passes itself: nothing will come this thread's
        // way until something notifies it, and its spinning would take a core from that
        // thread or its kernel helpers.
        if shared.waiter_in_passes.load(Ordering::Relaxed)
            || shared.waiters_wanting.load(Ordering::Relaxed) > 0
        {
            return false;
        }
        snooze(backoff);
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.shutdown_workers();
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! The hand-off between the scheduler thread and a waiting thread that runs the passes
    //! itself (`Vm::wait`), and with a submitter that runs a cheap instruction at once
    //! (`inline.rs`) or first catches up with queued work (`Vm::catch_up`), reduced to its
    //! synchronisation: the scheduler's state is a mutex the scheduler thread holds while it
    //! runs passes and drops to wait on the pending list's notifier (its spin is an unlocked
    //! poll of the same notifier); a pass takes the pending list and runs what it took.
    use crate::pending::PendingStack;
    use crate::sync::{AtomicBool, Mutex};
    use loom::sync::Arc;
    use loom::thread;
    use std::sync::atomic::Ordering::SeqCst;

    fn pass(state: &mut Vec<u64>, pending: &PendingStack) -> bool {
        let mut l = pending.take();
        let any = !l.is_empty();
        while let Some(i) = l.pop_front() {
            state.push(i.id);
        }
        any
    }

    fn instr(id: u64) -> crate::instruction::InstrList {
        crate::instruction::model_batch(&[id])
    }

    type State = Arc<Mutex<Vec<u64>>>;

    /// The scheduler thread, reduced: under the state's mutex, passes until none moves; then
    /// let go and wait on the notifier; exit at shutdown once nothing is pending.
    fn spawn_scheduler() -> (
        Arc<PendingStack>,
        State,
        Arc<AtomicBool>,
        thread::JoinHandle<()>,
    ) {
        let pending = Arc::new(PendingStack::new());
        let state: State = Arc::new(Mutex::new(Vec::new()));
        let shutdown = Arc::new(AtomicBool::new(false));
        let (p, st, sd) = (pending.clone(), state.clone(), shutdown.clone());
        let sched = thread::spawn(move || {
            loop {
                let mut s = st.lock();
                while pass(&mut s, &p) {}
                let stop = sd.load(SeqCst) && p.is_empty();
                drop(s);
                if stop {
                    break;
                }
                p.notifier.wait(None);
            }
        });
        (pending, state, shutdown, sched)
    }

    /// The user thread waits (yielding to the model) until instruction `id` ran.
    fn wait_until_ran(state: &State, id: u64) {
        while !state.lock().contains(&id) {
            thread::yield_now();
        }
    }

    fn stop_scheduler(
        pending: &PendingStack,
        shutdown: &AtomicBool,
        sched: thread::JoinHandle<()>,
    ) {
        shutdown.store(true, SeqCst);
        pending.notifier.notify();
        sched.join().unwrap();
    }

    /// Whether the waiting thread or the scheduler thread runs it, the submitted instruction
    /// runs exactly once, the waiter sees it, and the scheduler thread never sleeps through
    /// work (it would deadlock the model at shutdown).
    #[test]
    fn caller_runs_or_scheduler_runs_each_instruction_once() {
        loom::model(|| {
            let (pending, state, shutdown, sched) = spawn_scheduler();
            pending.push(instr(1));
            // Wait: run the passes if the scheduler thread sleeps, else let it work.
            loop {
                if let Some(mut s) = state.try_lock() {
                    while pass(&mut s, &pending) {}
                    if s.contains(&1) {
                        break;
                    }
                } else if state.lock().contains(&1) {
                    break;
                }
                thread::yield_now();
            }
            stop_scheduler(&pending, &shutdown, sched);
            assert_eq!(*state.lock(), vec![1], "run exactly once");
        });
    }

    /// A cheap instruction that its submitter runs itself when it holds the scheduler's state
    /// and nothing is queued (`scheduler/inline.rs`), after one it queued: both run exactly
    /// once, in submission order, whichever thread runs each.
    #[test]
    fn an_inline_run_keeps_submission_order_with_the_scheduler() {
        loom::model(|| {
            let (pending, state, shutdown, sched) = spawn_scheduler();
            pending.push(instr(1));
            // The cheap one: at once if the state is free and the engine idle, else queued.
            let ran_inline = match state.try_lock() {
                Some(mut s) if pending.is_empty() => {
                    s.push(2);
                    true
                }
                _ => false,
            };
            if !ran_inline {
                pending.push(instr(2));
            }
            wait_until_ran(&state, 2);
            stop_scheduler(&pending, &shutdown, sched);
            assert_eq!(*state.lock(), vec![1, 2], "once each, in order");
        });
    }

    /// A submitter that finds work queued and the state free catches up: it runs the passes
    /// itself (`Vm::catch_up`), then its own instruction if nothing is left, else queues it.
    /// With two instructions queued before, all three run exactly once, in submission order,
    /// whichever thread runs each, and the scheduler thread never sleeps through work.
    #[test]
    fn a_submitter_that_catches_up_keeps_submission_order() {
        loom::model(|| {
            let (pending, state, shutdown, sched) = spawn_scheduler();
            pending.push(instr(1));
            pending.push(instr(2));
            let ran_inline = match state.try_lock() {
                Some(mut s) => {
                    while pass(&mut s, &pending) {}
                    if pending.is_empty() {
                        s.push(3);
                        true
                    } else {
                        false
                    }
                }
                None => false,
            };
            if !ran_inline {
                pending.push(instr(3));
            }
            wait_until_ran(&state, 3);
            stop_scheduler(&pending, &shutdown, sched);
            assert_eq!(*state.lock(), vec![1, 2, 3], "once each, in order");
        });
    }

    /// A `sync` that finds the state free queues its barrier behind everything pending and
    /// runs the passes itself, without letting go (`Vm::barrier`), while another thread
    /// submits: the barrier comes after the submitter's earlier work, every instruction runs
    /// exactly once, and the other thread's work, pushed after the take, is not slept through.
    #[test]
    fn a_sync_that_holds_the_state_queues_its_barrier_in_order() {
        loom::model(|| {
            let (pending, state, shutdown, sched) = spawn_scheduler();
            let p2 = pending.clone();
            let other = thread::spawn(move || p2.push(instr(10)));
            pending.push(instr(1));
            match state.try_lock() {
                Some(mut s) => {
                    // `push_after_pending`: what is pending first, then the barrier.
                    let mut l = pending.take();
                    while let Some(i) = l.pop_front() {
                        s.push(i.id);
                    }
                    s.push(2);
                    while pass(&mut s, &pending) {}
                }
                None => pending.push(instr(2)),
            }
            wait_until_ran(&state, 2);
            other.join().unwrap();
            stop_scheduler(&pending, &shutdown, sched);
            let ran = state.lock().clone();
            let pos = |id| ran.iter().position(|&x| x == id).expect("ran");
            assert!(pos(1) < pos(2), "the barrier after earlier work: {ran:?}");
            let mut sorted = ran.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, vec![1, 2, 10], "once each: {ran:?}");
        });
    }

    /// A submitter that takes the queued work to look at it and finds some not cheap leaves
    /// it in the scheduler's local list (`Scheduler::only_cheap_queued`) and queues its own:
    /// the scheduler thread still runs everything once, in order, and never sleeps through
    /// the work left in its local list (the submitter's own push wakes it).
    #[test]
    fn work_left_in_the_local_list_is_not_slept_through() {
        loom::model(|| {
            // (ran, local): a pass runs the local list first, then what it takes.
            type St = Arc<Mutex<(Vec<u64>, Vec<u64>)>>;
            let pending = Arc::new(PendingStack::new());
            let state: St = Arc::new(Mutex::new((Vec::new(), Vec::new())));
            let shutdown = Arc::new(AtomicBool::new(false));
            let (p, st, sd) = (pending.clone(), state.clone(), shutdown.clone());
            let pass = |s: &mut (Vec<u64>, Vec<u64>), p: &PendingStack| {
                let mut any = !s.1.is_empty();
                let local = std::mem::take(&mut s.1);
                s.0.extend(local);
                let mut l = p.take();
                any |= !l.is_empty();
                while let Some(i) = l.pop_front() {
                    s.0.push(i.id);
                }
                any
            };
            let sched = thread::spawn(move || {
                loop {
                    let mut s = st.lock();
                    while pass(&mut s, &p) {}
                    let stop = sd.load(SeqCst) && p.is_empty();
                    drop(s);
                    if stop {
                        break;
                    }
                    p.notifier.wait(None);
                }
            });
            pending.push(instr(1));
            if let Some(mut s) = state.try_lock() {
                // Took it, found it not cheap: left in the local list.
                let mut l = pending.take();
                while let Some(i) = l.pop_front() {
                    s.1.push(i.id);
                }
            }
            pending.push(instr(2));
            loop {
                if state.lock().0.contains(&2) {
                    break;
                }
                thread::yield_now();
            }
            shutdown.store(true, SeqCst);
            pending.notifier.notify();
            sched.join().unwrap();
            assert_eq!(state.lock().0, vec![1, 2], "once each, in order");
        });
    }
}

#[cfg(all(test, not(loom), not(shuttle)))]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The scheduler thread's idle spin ends at its deadline, or at once while a waiting user
    /// thread runs the passes (it would only compete with that thread for a core).
    #[test]
    fn the_idle_spin_yields_to_a_waiter_running_the_passes() {
        let vm = crate::Vm::builder().build().unwrap();
        let sh = vm.shared();
        let spin = |d: Duration| {
            let t = Instant::now();
            let notified = spin_until_notified(sh, t + d, &Backoff::new());
            (notified, t.elapsed())
        };
        let (notified, took) = spin(Duration::from_millis(20));
        assert!(!notified && took >= Duration::from_millis(20), "{took:?}");
        sh.waiter_in_passes.store(true, Ordering::Relaxed);
        let (notified, took) = spin(Duration::from_secs(30));
        sh.waiter_in_passes.store(false, Ordering::Relaxed);
        assert!(!notified && took < Duration::from_secs(10), "{took:?}");
    }
}
