//! `Waiter`: a one-shot signal a user thread waits on (spin briefly, then block).

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub(crate) struct Waiter {
    done: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Waiter {
    pub(crate) fn new() -> Self {
        Waiter {
            done: AtomicBool::new(false),
            lock: Mutex::new(()),
            cv: Condvar::new(),
        }
    }

    pub(crate) fn signal(&self) {
        self.done.store(true, Ordering::Release);
        let _g = self.lock.lock();
        self.cv.notify_all();
    }

    pub(crate) fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Spins up to `d`; returns whether the signal came.
    pub(crate) fn spin(&self, d: Duration) -> bool {
        let t0 = Instant::now();
        let backoff = crossbeam_utils::Backoff::new();
        while !self.is_done() {
            if t0.elapsed() >= d {
                return false;
            }
            backoff.snooze();
        }
        true
    }

    /// Blocks up to `d`; returns whether the signal came.
    pub(crate) fn wait_for(&self, d: Duration) -> bool {
        let mut g = self.lock.lock();
        if !self.is_done() {
            self.cv.wait_for(&mut g, d);
        }
        self.is_done()
    }
}
