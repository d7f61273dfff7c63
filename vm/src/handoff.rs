//! `HandOff`: a mutexed list of instructions with a coalescing notifier, used for every
//! cross-thread hand-off (user threads → scheduler, scheduler → worker, worker → scheduler).
//!
//! Protocol: a producer splices a whole list in under the lock (O(1), no allocation, because
//! the list is intrusive) and notifies only when the list goes from empty to non-empty. The
//! consumer takes the whole list under the lock, and waits on the notifier only after a take
//! found it empty. A list that is non-empty was made so by a push that notified, and that
//! notification is either still pending or was consumed by a wait that is followed by a take,
//! so no wake-up is lost (checked by the loom models below).

use crate::instruction::{InstrAdapter, InstrList};
use crate::notifier::Notifier;
use crate::sync::{AtomicBool, Mutex};
use std::sync::atomic::Ordering;

pub(crate) struct HandOff {
    list: Mutex<InstrList>,
    /// Whether `list` may be non-empty: set under the lock by `push`, cleared under the lock by
    /// `take`. Read without the lock so that a polling consumer does not contend on the mutex
    /// (which would force a lock hand-off per item). A stale `false` is harmless: the push that
    /// made the list non-empty also notified.
    nonempty: AtomicBool,
    pub(crate) notifier: Notifier,
    closed: AtomicBool,
}

impl HandOff {
    pub(crate) fn new() -> Self {
        HandOff {
            list: Mutex::new(InstrList::new(InstrAdapter::new())),
            nonempty: AtomicBool::new(false),
            notifier: Notifier::new(),
            closed: AtomicBool::new(false),
        }
    }

    /// Appends `items` (keeping their order) and wakes the consumer if the list was empty.
    pub(crate) fn push(&self, items: InstrList) {
        self.push_to(items, &self.notifier);
    }

    /// Like `push`, but wakes `waker` (a consumer that waits on a notifier of its own).
    pub(crate) fn push_to(&self, mut items: InstrList, waker: &Notifier) {
        if items.is_empty() {
            return;
        }
        let was_empty = {
            let mut g = self.list.lock();
            let was_empty = g.is_empty();
            g.back_mut().splice_after(items.take());
            self.nonempty.store(true, Ordering::SeqCst);
            was_empty
        };
        if was_empty {
            waker.notify();
        }
    }

    /// Takes everything queued.
    pub(crate) fn take(&self) -> InstrList {
        if !self.nonempty.load(Ordering::SeqCst) {
            return InstrList::new(InstrAdapter::new());
        }
        let mut g = self.list.lock();
        self.nonempty.store(false, Ordering::SeqCst);
        g.take()
    }

    pub(crate) fn is_empty(&self) -> bool {
        !self.nonempty.load(Ordering::SeqCst)
    }

    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.notifier.notify();
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    fn one(id: u64) -> InstrList {
        crate::instruction::model_batch(&[id])
    }

    /// Two producers, one consumer that sleeps on the notifier: every item arrives exactly once,
    /// each producer's items in order, and the consumer is never left asleep with work queued.
    #[test]
    fn pending_handoff_delivers_everything_once() {
        loom::model(|| {
            let q = Arc::new(HandOff::new());
            let p1 = {
                let q = q.clone();
                thread::spawn(move || q.push(one(1)))
            };
            let p2 = {
                let q = q.clone();
                thread::spawn(move || {
                    q.push(one(2));
                    q.push(one(3));
                })
            };
            let mut seen = vec![];
            while seen.len() < 3 {
                let mut l = q.take();
                if l.is_empty() {
                    q.notifier.wait(None);
                    continue;
                }
                while let Some(i) = l.pop_front() {
                    seen.push(i.id);
                }
            }
            p1.join().unwrap();
            p2.join().unwrap();
            let pos = |x| seen.iter().position(|&v| v == x).unwrap();
            assert!(pos(2) < pos(3), "per-producer order kept: {seen:?}");
            let mut s = seen.clone();
            s.sort();
            assert_eq!(s, vec![1, 2, 3]);
        });
    }

    /// Scheduler → worker → scheduler round trip: the worker's "done" (the completion pushed back
    /// with a notify on the scheduler's notifier) is always observed, and closing the worker
    /// wakes it so it exits.
    #[test]
    fn worker_round_trip_and_done_flag() {
        loom::model(|| {
            let work = Arc::new(HandOff::new());
            let done = Arc::new(HandOff::new());
            let sched = Arc::new(Notifier::new());
            let w = {
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
            };
            work.push(one(7));
            let got = loop {
                let mut l = done.take();
                if let Some(i) = l.pop_front() {
                    break i.id;
                }
                sched.wait(None);
            };
            assert_eq!(got, 7);
            work.close();
            w.join().unwrap();
        });
    }
}
