//! A coalescing notifier: many `notify` calls between two waits wake the waiter once.
//!
//! Protocol. `pending` is set by `notify` and consumed by `wait`. The waiter announces that it is
//! about to block by setting `sleeping` under the mutex, re-checks `pending`, and blocks on the
//! condvar. `notify` sets `pending` (SeqCst) and, only if it then sees `sleeping`, takes the mutex
//! and signals. Because the waiter re-checks `pending` after publishing `sleeping` (both SeqCst),
//! either the notifier sees `sleeping == true` or the waiter sees `pending == true`: no lost
//! wake-up. A notify that finds no sleeper costs one atomic swap and one load.

use crate::sync::{AtomicBool, Condvar, Mutex};
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

/// Wakes one waiting thread; notifications that arrive while it is awake coalesce into one.
pub(crate) struct Notifier {
    pending: AtomicBool,
    sleeping: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Notifier {
    pub(crate) fn new() -> Self {
        Notifier {
            pending: AtomicBool::new(false),
            sleeping: AtomicBool::new(false),
            lock: Mutex::new(()),
            cv: Condvar::new(),
        }
    }

    /// Records a notification and wakes the waiter if it is blocked.
    pub(crate) fn notify(&self) {
        if self.pending.swap(true, SeqCst) {
            return; // already pending: the waiter will see it
        }
        if self.sleeping.load(SeqCst) {
            let _g = self.lock.lock();
            self.cv.notify_one();
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
        self.sleeping.store(true, SeqCst);
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
        self.sleeping.store(false, SeqCst);
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
