//! A coalescing notifier: many `notify` calls between two waits wake the waiter once.
//!
//! Protocol. `pending` is set by `notify` and consumed by `wait`. A waiter announces that it is
//! about to block by counting itself in `sleepers` under the mutex, re-checks `pending`, and
//! blocks on the condvar. `notify` sets `pending` (SeqCst) and, only if it then sees a sleeper,
//! takes the mutex and wakes them all. Because a waiter re-checks `pending` after publishing
//! itself (both SeqCst), either the notifier sees the sleeper or the waiter sees `pending`: no
//! lost wake-up. A notify that finds no sleeper costs one atomic swap and one load.
//!
//! The scheduler thread is the usual waiter, but a user thread running the passes itself (a
//! `sync` while the scheduler sleeps) may wait here too, inside the OOM path: hence a count, not a
//! flag. (With a flag, the user thread's return cleared it while the scheduler thread still slept,
//! and the next notify, the engine's shutdown, woke nobody.)

use crate::sync::{AtomicBool, AtomicUsize, Condvar, Mutex};
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

/// Wakes one waiting thread; notifications that arrive while it is awake coalesce into one.
pub(crate) struct Notifier {
    pending: AtomicBool,
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Notifier {
    pub(crate) fn new() -> Self {
        Notifier {
            pending: AtomicBool::new(false),
            sleepers: AtomicUsize::new(0),
            lock: Mutex::new(()),
            cv: Condvar::new(),
        }
    }

    /// Records a notification and wakes the waiter if it is blocked.
    pub(crate) fn notify(&self) {
        if self.pending.swap(true, SeqCst) {
            return; // already pending: the waiter will see it
        }
        if self.sleepers.load(SeqCst) > 0 {
            let _g = self.lock.lock();
            self.cv.notify_all();
        }
    }

    /// Consumes a pending notification without blocking; returns whether there was one.
    pub(crate) fn try_take(&self) -> bool {
        self.pending.swap(false, SeqCst)
    }

    /// Blocks until a notification arrives (consuming it) or `timeout` passes.
    /// Returns whether a notification was consumed.
    pub(crate) fn wait(&self, timeout: Option<Duration>) -> bool {
        if self.try_take() {
            return true;
        }
        let mut g = self.lock.lock();
        self.sleepers.fetch_add(1, SeqCst);
        let mut got = self.try_take();
        while !got {
            match timeout {
                Some(d) => {
                    let r = self.cv.wait_for(&mut g, d);
                    got = self.try_take();
                    if r.timed_out() {
                        break;
                    }
                }
                None => {
                    self.cv.wait(&mut g);
                    got = self.try_take();
                }
            }
        }
        self.sleepers.fetch_sub(1, SeqCst);
        got
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// A notify racing with a wait is never lost: the waiter always returns with it.
    #[test]
    fn notify_is_never_lost() {
        loom::model(|| {
            let n = Arc::new(Notifier::new());
            let n2 = n.clone();
            let t = thread::spawn(move || n2.notify());
            assert!(n.wait(None));
            t.join().unwrap();
        });
    }

    /// Two waiters (the scheduler thread, and a user thread running the passes whose OOM path
    /// waits here): the second notify still wakes the one the first left asleep.
    #[test]
    fn a_second_waiter_does_not_hide_the_first() {
        loom::model(|| {
            let n = Arc::new(Notifier::new());
            let woke = Arc::new(loom::sync::atomic::AtomicUsize::new(0));
            let waiters: Vec<_> = (0..2)
                .map(|_| {
                    let (n, woke) = (n.clone(), woke.clone());
                    thread::spawn(move || {
                        n.wait(None);
                        woke.fetch_add(1, SeqCst);
                    })
                })
                .collect();
            n.notify();
            while woke.load(SeqCst) == 0 {
                thread::yield_now();
            }
            n.notify();
            for w in waiters {
                w.join().unwrap();
            }
        });
    }

    /// Two notifies coalesce: after one wait consumed them, nothing is pending.
    #[test]
    fn notifies_coalesce() {
        loom::model(|| {
            let n = Arc::new(Notifier::new());
            let (a, b) = (n.clone(), n.clone());
            let t1 = thread::spawn(move || a.notify());
            let t2 = thread::spawn(move || b.notify());
            t1.join().unwrap();
            t2.join().unwrap();
            assert!(n.wait(None));
            assert!(!n.try_take());
        });
    }
}
