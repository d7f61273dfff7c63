//! Randomised schedules of the hand-off protocols with more threads than loom can explore
//! (failure modes F14, F15 and F23 of the reliability plan).
//!
//! loom checks every interleaving of two or three threads; these run the same real types
//! (`PendingStack`, `HandOff`, `Notifier`, the kernel pool, the transport stream's tickets)
//! under `shuttle` with two to six threads, thousands of random schedules (`check_random`) and
//! schedules that drive threads into rare orders on purpose (`check_pct`, which finds bugs of
//! a given depth with a known probability). A lost wake-up shows up as a deadlock (every
//! thread blocked), which shuttle reports with the schedule that reproduces it.
//!
//! Run with
//! `RUSTFLAGS="--cfg shuttle" CARGO_TARGET_DIR=target/shuttle cargo test -p eddy-vm --lib --release shuttle`.

use crate::handoff::HandOff;
use crate::instruction::{InstrList, model_batch as batch};
use crate::notifier::Notifier;
use crate::par::Pool;
use crate::pending::PendingStack;
use crate::sync::{AtomicBool, AtomicUsize, Condvar, Mutex};
use shuttle::sync::Arc;
use shuttle::thread;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};

/// Random schedules per test, and PCT schedules (depth 3) per test.
const RANDOM: usize = 20_000;
const PCT: usize = 10_000;

/// Runs `f` under both schedulers.
fn check(f: impl Fn() + Send + Sync + Clone + 'static) {
    shuttle::check_random(f.clone(), RANDOM);
    shuttle::check_pct(f, PCT, 3);
}

/// Producer `p`'s three batches: ids `p * 100 + k`, k = 0..5, in submission order.
fn batches_of(p: u64) -> [Vec<u64>; 3] {
    let id = |k| p * 100 + k;
    [vec![id(0), id(1)], vec![id(2)], vec![id(3), id(4)]]
}

/// Every id of `producers` arrived exactly once, and each producer's ids in order.
fn assert_once_in_order(seen: &[u64], producers: u64) {
    let mut sorted = seen.to_vec();
    sorted.sort();
    let want: Vec<u64> = (0..producers)
        .flat_map(|p| batches_of(p).into_iter().flatten())
        .collect();
    assert_eq!(sorted, want, "every instruction exactly once");
    for p in 0..producers {
        let mine: Vec<u64> = seen.iter().copied().filter(|&i| i / 100 == p).collect();
        assert!(
            mine.windows(2).all(|w| w[0] < w[1]),
            "producer {p}'s order: {seen:?}"
        );
    }
}

/// The two submission queues, as the models use them.
trait Queue: Send + Sync + 'static {
    fn new() -> Self;
    fn push(&self, l: InstrList);
    fn take(&self) -> InstrList;
    fn notifier(&self) -> &Notifier;
}

impl Queue for PendingStack {
    fn new() -> Self {
        PendingStack::new()
    }
    fn push(&self, l: InstrList) {
        PendingStack::push(self, l)
    }
    fn take(&self) -> InstrList {
        PendingStack::take(self)
    }
    fn notifier(&self) -> &Notifier {
        &self.notifier
    }
}

impl Queue for HandOff {
    fn new() -> Self {
        HandOff::new()
    }
    fn push(&self, l: InstrList) {
        HandOff::push(self, l)
    }
    fn take(&self) -> InstrList {
        HandOff::take(self)
    }
    fn notifier(&self) -> &Notifier {
        &self.notifier
    }
}

/// Four producers of three batches each and a consumer that sleeps on the queue's notifier
/// whenever it finds the queue empty: everything arrives once, in each producer's order, and
/// the consumer is never left asleep with work queued (that would be a deadlock at the end).
fn four_producers_one_sleeping_consumer<Q: Queue>() {
    let q = Arc::new(Q::new());
    let producers: Vec<_> = (0..4)
        .map(|p| {
            let q = q.clone();
            thread::spawn(move || {
                for b in batches_of(p) {
                    q.push(batch(&b));
                }
            })
        })
        .collect();
    let mut seen = vec![];
    while seen.len() < 20 {
        let mut l = q.take();
        if l.is_empty() {
            q.notifier().wait(None);
            continue;
        }
        while let Some(i) = l.pop_front() {
            seen.push(i.id);
        }
    }
    for p in producers {
        p.join().unwrap();
    }
    assert!(q.take().is_empty());
    assert_once_in_order(&seen, 4);
}

/// The lock-free pending stack (user threads to the scheduler).
#[test]
fn shuttle_pending_stack_with_four_producers() {
    check(four_producers_one_sleeping_consumer::<PendingStack>);
}

/// The mutexed hand-off list (completions, the workers' queues, free nodes).
#[test]
fn shuttle_handoff_with_four_producers() {
    check(four_producers_one_sleeping_consumer::<HandOff>);
}

/// Five notifying threads and one waiter that sleeps until it has seen all their work: the
/// notifications coalesce, but none is lost.
#[test]
fn shuttle_notifier_with_five_notifiers() {
    check(|| {
        let n = Arc::new(Notifier::new());
        let done = Arc::new(AtomicUsize::new(0));
        let notifiers: Vec<_> = (0..5)
            .map(|_| {
                let (n, done) = (n.clone(), done.clone());
                thread::spawn(move || {
                    done.fetch_add(1, SeqCst);
                    n.notify();
                })
            })
            .collect();
        while done.load(SeqCst) < 5 {
            n.wait(None);
        }
        for t in notifiers {
            t.join().unwrap();
        }
    });
}

/// The scheduler's round trip with two workers: it hands each worker its instructions, both
/// report completions on one list with the scheduler's notifier, and closing a worker wakes it
/// so it exits.
#[test]
fn shuttle_two_workers_round_trip() {
    check(|| {
        let done = Arc::new(HandOff::new());
        let sched = Arc::new(Notifier::new());
        let works: Vec<Arc<HandOff>> = (0..2).map(|_| Arc::new(HandOff::new())).collect();
        let workers: Vec<_> = works
            .iter()
            .map(|work| {
                let (work, done, sched) = (work.clone(), done.clone(), sched.clone());
                thread::spawn(move || {
                    loop {
                        let l = work.take();
                        if l.is_empty() {
                            if work.is_closed() {
                                break;
                            }
                            work.notifier.wait(None);
                            continue;
                        }
                        done.push_to(l, &sched);
                    }
                })
            })
            .collect();
        for id in 0..6u64 {
            works[id as usize % 2].push(batch(&[id]));
        }
        let mut got = vec![];
        while got.len() < 6 {
            let mut l = done.take();
            if l.is_empty() {
                sched.wait(None);
                continue;
            }
            while let Some(i) = l.pop_front() {
                got.push(i.id);
            }
        }
        for w in &works {
            w.close();
        }
        for w in workers {
            w.join().unwrap();
        }
        let per_worker =
            |k: u64| -> Vec<u64> { got.iter().copied().filter(|i| i % 2 == k).collect() };
        assert_eq!(per_worker(0), vec![0, 2, 4], "worker 0 in order: {got:?}");
        assert_eq!(per_worker(1), vec![1, 3, 5], "worker 1 in order: {got:?}");
    });
}

/// The scheduler thread against three user threads, reduced as in the loom model of
/// `scheduler/mod.rs`: the scheduler's state is a mutex the scheduler thread holds while it
/// runs passes and drops to sleep on the pending stack's notifier. Each user thread submits
/// two instructions, the second cheap (run at once by its submitter when it holds the state
/// and nothing is queued, as `scheduler/inline.rs` does), then waits for both: by running the
/// passes itself if the state is free (`Vm::wait`), else by letting the scheduler thread work.
/// Every instruction runs exactly once, each thread's in submission order, and the scheduler
/// thread never sleeps through work (it would deadlock at shutdown).
#[test]
fn shuttle_scheduler_and_three_waiting_threads() {
    check(|| {
        let pending = Arc::new(PendingStack::new());
        let state: Arc<Mutex<Vec<u64>>> = Arc::new(Mutex::new(Vec::new()));
        let shutdown = Arc::new(AtomicBool::new(false));
        let pass = |s: &mut Vec<u64>, p: &PendingStack| {
            let mut l = p.take();
            let any = !l.is_empty();
            while let Some(i) = l.pop_front() {
                s.push(i.id);
            }
            any
        };
        let sched = {
            let (p, st, sd) = (pending.clone(), state.clone(), shutdown.clone());
            thread::spawn(move || {
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
            })
        };
        let users: Vec<_> = (0..3u64)
            .map(|u| {
                let (p, st) = (pending.clone(), state.clone());
                thread::spawn(move || {
                    let (first, cheap) = (u * 100, u * 100 + 1);
                    p.push(batch(&[first]));
                    let ran_inline = match st.try_lock() {
                        Some(mut s) if p.is_empty() => {
                            s.push(cheap);
                            true
                        }
                        _ => false,
                    };
                    if !ran_inline {
                        p.push(batch(&[cheap]));
                    }
                    loop {
                        if let Some(mut s) = st.try_lock() {
                            while pass(&mut s, &p) {}
                            if s.contains(&cheap) {
                                break;
                            }
                        } else if st.lock().contains(&cheap) {
                            break;
                        }
                        thread::yield_now();
                    }
                })
            })
            .collect();
        for u in users {
            u.join().unwrap();
        }
        shutdown.store(true, SeqCst);
        pending.notifier.notify();
        sched.join().unwrap();
        let ran = state.lock().clone();
        let mut sorted = ran.clone();
        sorted.sort();
        assert_eq!(sorted, vec![0, 1, 100, 101, 200, 201], "once each: {ran:?}");
        for u in 0..3u64 {
            let a = ran.iter().position(|&i| i == u * 100).unwrap();
            let b = ran.iter().position(|&i| i == u * 100 + 1).unwrap();
            assert!(a < b, "thread {u}'s order: {ran:?}");
        }
    });
}

/// A waiting thread takes the scheduler from the scheduler thread (`Vm::take_scheduler`):
/// the scheduler thread, between two instructions, lets go when a waiter wants it and
/// sleeps; a waiter tries for a bounded while, runs the passes if it got the scheduler (and
/// notifies if it left work behind), and notifies if it gave up, since the scheduler thread
/// may have let go after it stopped trying. Three waiters, each submitting two instructions:
/// every instruction runs exactly once, each waiter's in order, and no instruction is left
/// queued while every thread sleeps (shuttle reports that as a deadlock).
#[test]
fn shuttle_waiters_take_the_scheduler_between_instructions() {
    use crate::sync::Condvar;
    use std::collections::VecDeque;
    #[derive(Default)]
    struct State {
        local: VecDeque<u64>,
        ran: Vec<u64>,
    }
    /// Runs what is queued, one instruction at a time; the scheduler thread (`yields`) stops
    /// between two when a waiter wants the state. Returns whether work is left.
    fn passes(
        s: &mut State,
        p: &PendingStack,
        done: &Condvar,
        wanting: &AtomicUsize,
        yields: bool,
    ) -> bool {
        loop {
            if s.local.is_empty() {
                let mut l = p.take();
                while let Some(i) = l.pop_front() {
                    s.local.push_back(i.id);
                }
            }
            if s.local.is_empty() {
                return false;
            }
            if yields && wanting.load(Relaxed) > 0 {
                return true;
            }
            let i = s.local.pop_front().unwrap();
            s.ran.push(i);
            done.notify_all();
        }
    }
    check(|| {
        let pending = Arc::new(PendingStack::new());
        let state = Arc::new(Mutex::new(State::default()));
        let done = Arc::new(Condvar::new());
        let wanting = Arc::new(AtomicUsize::new(0));
        let shutdown = Arc::new(AtomicBool::new(false));
        let sched = {
            let (p, st, d, w, sd) = (
                pending.clone(),
                state.clone(),
                done.clone(),
                wanting.clone(),
                shutdown.clone(),
            );
            thread::spawn(move || {
                loop {
                    let mut s = st.lock();
                    let left = passes(&mut s, &p, &d, &w, true);
                    let stop = sd.load(SeqCst) && !left && p.is_empty();
                    drop(s);
                    if stop {
                        break;
                    }
                    p.notifier.wait(None);
                }
            })
        };
        let users: Vec<_> = (0..3u64)
            .map(|u| {
                let (p, st, d, w) = (
                    pending.clone(),
                    state.clone(),
                    done.clone(),
                    wanting.clone(),
                );
                thread::spawn(move || {
                    let (a, b) = (u * 100, u * 100 + 1);
                    p.push(batch(&[a]));
                    p.push(batch(&[b]));
                    w.fetch_add(1, Relaxed);
                    let mut taken = None;
                    for _ in 0..3 {
                        if let Some(s) = st.try_lock() {
                            taken = Some(s);
                            break;
                        }
                        thread::yield_now();
                    }
                    w.fetch_sub(1, SeqCst);
                    match taken {
                        Some(mut s) => {
                            if passes(&mut s, &p, &d, &w, false) || !p.is_empty() {
                                p.notifier.notify();
                            }
                        }
                        None => p.notifier.notify(),
                    }
                    let mut s = st.lock();
                    while !s.ran.contains(&b) {
                        d.wait(&mut s);
                    }
                })
            })
            .collect();
        for u in users {
            u.join().unwrap();
        }
        shutdown.store(true, SeqCst);
        pending.notifier.notify();
        sched.join().unwrap();
        let ran = state.lock().ran.clone();
        let mut sorted = ran.clone();
        sorted.sort();
        assert_eq!(sorted, vec![0, 1, 100, 101, 200, 201], "once each: {ran:?}");
        for u in 0..3u64 {
            let a = ran.iter().position(|&i| i == u * 100).unwrap();
            let b = ran.iter().position(|&i| i == u * 100 + 1).unwrap();
            assert!(a < b, "waiter {u}'s order: {ran:?}");
        }
    });
}

/// The kernel pool with three helpers and two callers at once: a caller that finds a helper
/// busy with the other's job runs those chunks itself; every chunk of both jobs runs exactly
/// once, and neither caller returns while one of its chunks still runs on a helper.
#[test]
fn shuttle_kernel_pool_two_callers_three_helpers() {
    check(|| {
        let pool = Arc::new(Pool::new(4));
        let callers: Vec<_> = (0..2)
            .map(|_| {
                let pool = pool.clone();
                thread::spawn(move || {
                    let hits: Vec<AtomicUsize> = (0..4).map(|_| AtomicUsize::new(0)).collect();
                    let inside = AtomicUsize::new(0);
                    pool.for_each(4, |i| {
                        inside.fetch_add(1, Relaxed);
                        hits[i].fetch_add(1, Relaxed);
                        inside.fetch_sub(1, SeqCst);
                    });
                    assert_eq!(inside.load(SeqCst), 0, "a chunk still runs after for_each");
                    for (i, h) in hits.iter().enumerate() {
                        assert_eq!(h.load(Relaxed), 1, "chunk {i} ran once");
                    }
                })
            })
            .collect();
        for c in callers {
            c.join().unwrap();
        }
        drop(pool);
    });
}

/// The ranks of each user thread's collectives in the transport model: overlapping sets.
const COLLECTIVE_RANKS: [&[u64]; 3] = [&[0, 1], &[1, 2], &[0, 1, 2]];

/// Three user threads each submit two collectives over overlapping ranks, one instruction
/// per rank pushed on its own as `Vm::run_op` does, holding the transport turn around each
/// collective's pushes when `turns`. The scheduler takes the pending list and registers each
/// instruction's write of the transport dependence (the real `AccessList`), queueing it on
/// its rank's stream. Checked: every instruction arrives once; the dependence chains the
/// collectives' instructions in arrival order (each waits for the one before, so nothing
/// runs out of it); each thread's collectives keep its program order on every rank; and every
/// two ranks see the collectives they share in the same order, the property that keeps ranks
/// in several processes from waiting on each other's next collective.
fn collectives_over_overlapping_ranks(turns: bool) {
    use crate::dependence::{Access, AccessList};
    check(move || {
        let pending = Arc::new(PendingStack::new());
        let turn = Arc::new(Mutex::new(()));
        let users: Vec<_> = (0..3u64)
            .map(|u| {
                let (pending, turn) = (pending.clone(), turn.clone());
                thread::spawn(move || {
                    for k in 0..2 {
                        let c = u * 100 + k;
                        let _t = turns.then(|| turn.lock());
                        for &r in COLLECTIVE_RANKS[u as usize] {
                            pending.push(batch(&[c * 10 + r]));
                        }
                    }
                })
            })
            .collect();
        let total: usize = COLLECTIVE_RANKS.iter().map(|r| 2 * r.len()).sum();
        let mut transport = AccessList::default();
        let mut arrived: Vec<u64> = vec![];
        let mut streams: [Vec<u64>; 3] = Default::default();
        while arrived.len() < total {
            let mut l = pending.take();
            if l.is_empty() {
                thread::yield_now();
                continue;
            }
            while let Some(i) = l.pop_front() {
                let (slot, rank) = (arrived.len() as u32, i.id % 10);
                let mut edges = vec![];
                transport.write(
                    Access {
                        slot,
                        stream: rank as u32,
                    },
                    |from| edges.push(from),
                );
                // A write on another stream than the last writer's waits for it; one on the
                // same stream is ordered by the stream itself.
                if let Some(prev) = slot.checked_sub(1) {
                    let same = arrived[prev as usize] % 10 == rank;
                    assert_eq!(edges, if same { vec![] } else { vec![prev] });
                }
                arrived.push(i.id);
                streams[rank as usize].push(i.id / 10);
            }
        }
        for u in users {
            u.join().unwrap();
        }
        let mut sorted = arrived.clone();
        sorted.sort();
        let mut want: Vec<u64> = (0..3u64)
            .flat_map(|u| (0..2).map(move |k| u * 100 + k))
            .flat_map(|c| {
                COLLECTIVE_RANKS[(c / 100) as usize]
                    .iter()
                    .map(move |r| c * 10 + r)
            })
            .collect();
        want.sort();
        assert_eq!(sorted, want, "every instruction once");
        for s in &streams {
            for u in 0..3 {
                let mine: Vec<u64> = s.iter().copied().filter(|c| c / 100 == u).collect();
                assert!(mine.windows(2).all(|w| w[0] < w[1]), "program order");
            }
        }
        for a in 0..3 {
            for b in a + 1..3 {
                let shared = |x: &Vec<u64>, y: &Vec<u64>| -> Vec<u64> {
                    x.iter().copied().filter(|c| y.contains(c)).collect()
                };
                assert_eq!(
                    shared(&streams[a], &streams[b]),
                    shared(&streams[b], &streams[a]),
                    "rank order differs between ranks {a} and {b}: {arrived:?}"
                );
            }
        }
    });
}

/// With the transport turn held around each collective's pushes, every rank sees the
/// process's collectives in one order.
#[test]
fn shuttle_collectives_keep_one_order_on_every_rank() {
    collectives_over_overlapping_ranks(true);
}

/// The model can fail: without the turn, two threads' collectives interleave their ranks'
/// instructions and two ranks see them in different orders.
#[test]
#[should_panic(expected = "rank order differs")]
fn shuttle_collectives_without_turns_interleave() {
    collectives_over_overlapping_ranks(false);
}

/// The transport stream's tickets and events: hand-offs launched one after another, an event
/// recorded after each, and another thread finishing them in order. An event completes only
/// once every hand-off before it has finished, and a watcher that saw its event incomplete and
/// sleeps until woken is always woken (a lost wake-up is a deadlock here).
#[test]
fn shuttle_transport_events_complete_in_order_and_wake_their_watcher() {
    use crate::stream::StreamPolicy;
    use crate::stream::transport::TransportStream;
    check(|| {
        let s = TransportStream::new("transport");
        let woken = Arc::new((Mutex::new(false), Condvar::new()));
        let w = woken.clone();
        s.set_waker(std::sync::Arc::new(move || {
            *w.0.lock() = true;
            w.1.notify_all();
        }));
        let first = s.ticket();
        let e1 = s.record_event().expect("pending");
        let second = s.ticket();
        let e2 = s.record_event().expect("pending");
        let comm = thread::spawn(move || {
            drop(first);
            thread::yield_now();
            drop(second);
        });
        s.watch(&e2);
        let mut g = woken.0.lock();
        while !e2.is_complete() {
            assert!(!*g || e1.is_complete(), "woken before the first finished");
            *g = false;
            woken.1.wait(&mut g);
        }
        drop(g);
        assert!(e1.is_complete(), "the second finished before the first");
        comm.join().unwrap();
        assert!(s.record_event().is_none(), "nothing pending");
    });
}

/// The lane to a one-caller library (`lane.rs`): an owner serving a queue, and two threads
/// that each make two calls, each call run by the thread itself where the lane allows it and
/// queued for the owner otherwise. Calls never overlap, each runs once, and each thread's
/// calls run in the order it made them.
#[test]
fn shuttle_lane_calls_never_overlap_nor_overtake() {
    use crate::lane::Lane;
    use shuttle::sync::mpsc::channel;
    check(|| {
        let lane = Arc::new(Lane::new());
        lane.open();
        let busy = Arc::new(AtomicBool::new(false));
        let log = Arc::new(Mutex::new(Vec::new()));
        let call = {
            let (busy, log) = (busy.clone(), log.clone());
            move |id: u32| {
                assert!(!busy.swap(true, SeqCst), "two calls at once");
                thread::yield_now();
                log.lock().push(id);
                busy.store(false, SeqCst);
            }
        };
        let (tx, rx) = channel::<Box<dyn FnOnce() + Send>>();
        let owner = {
            let lane = lane.clone();
            thread::spawn(move || {
                while let Ok(job) = rx.recv() {
                    lane.serve(job);
                }
                lane.close();
            })
        };
        let users: Vec<_> = (0..2u32)
            .map(|u| {
                let (lane, tx, call) = (lane.clone(), tx.clone(), call.clone());
                thread::spawn(move || {
                    for id in [u * 10, u * 10 + 1] {
                        let c = call.clone();
                        if let Err(f) = lane.try_run(move || c(id)) {
                            lane.enqueue();
                            tx.send(Box::new(f)).unwrap();
                        }
                    }
                })
            })
            .collect();
        for u in users {
            u.join().unwrap();
        }
        drop(tx);
        owner.join().unwrap();
        let log = log.lock().clone();
        assert_eq!(log.len(), 4, "{log:?}");
        for u in 0..2 {
            let at = |id| log.iter().position(|&x| x == id).expect("ran");
            assert!(
                at(u * 10) < at(u * 10 + 1),
                "a call overtook its thread's earlier one: {log:?}"
            );
        }
        assert!(lane.try_run(|| ()).is_err(), "closed");
    });
}
