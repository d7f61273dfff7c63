//! A lane to a library that one thread at a time may call, in one order (MPI's collectives,
//! which every process must issue in the same order): an *owner* thread runs the jobs queued
//! for it, in order, and any other thread may call the library itself instead of queuing,
//! when nothing is queued and nobody is calling it. That saves the two hand-offs between
//! threads of a queued job, which cost more than a small collective.
//!
//! Protocol. A thread about to queue a job counts it first ([`Lane::enqueue`]); the owner runs
//! each job holding the lane's lock and uncounts it after ([`Lane::serve`]). A thread runs its
//! call itself only holding the lock, with the count at zero and the lane open
//! ([`Lane::try_run`]): so no call overtakes a job queued before it (that thread's own, or
//! one another thread queued before it looked), and no two calls overlap. The owner closes
//! the lane under the lock before it tears the library down ([`Lane::close`]).
//!
//! `shuttle_tests.rs` checks the protocol: calls never overlap, each runs once, and a
//! thread's calls run in the order it made them, whichever way each went.

use crate::sync::{AtomicBool, AtomicUsize, Mutex};
use std::sync::atomic::Ordering::{Acquire, Release, SeqCst};

/// A lane to a library that one thread at a time may call (see the module's docs).
///
/// # Examples
///
/// ```
/// use eddy_vm::lane::Lane;
/// let lane = Lane::new();
/// // Closed: calls go to the owner's queue.
/// assert!(lane.try_run(|| 1).is_err());
/// lane.open();
/// assert_eq!(lane.try_run(|| 2).ok(), Some(2));
/// // A queued job not yet run: a later call must queue behind it.
/// lane.enqueue();
/// assert!(lane.try_run(|| 3).is_err());
/// assert_eq!(lane.serve(|| 4), 4);
/// assert_eq!(lane.try_run(|| 5).ok(), Some(5));
/// lane.close();
/// assert!(lane.try_run(|| 6).is_err());
/// ```
pub struct Lane {
    /// Held by the thread that calls the library.
    wire: Mutex<()>,
    /// Jobs counted for the owner's queue and not yet run.
    queued: AtomicUsize,
    /// Whether threads other than the owner may call the library.
    open: AtomicBool,
}

impl Default for Lane {
    fn default() -> Self {
        Lane::new()
    }
}

impl std::fmt::Debug for Lane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lane")
            .field("queued", &self.queued.load(Acquire))
            .field("open", &self.open.load(Acquire))
            .finish()
    }
}

impl Lane {
    /// A closed lane: every call is queued for the owner until it [opens](Self::open) it.
    pub fn new() -> Lane {
        Lane {
            wire: Mutex::new(()),
            queued: AtomicUsize::new(0),
            open: AtomicBool::new(false),
        }
    }

    /// Lets threads other than the owner call the library (the library allows it).
    pub fn open(&self) {
        self.open.store(true, Release);
    }

    /// Runs `f` on this thread if the lane is open, nothing is queued and no other thread
    /// calls the library; otherwise gives `f` back, to be queued.
    pub fn try_run<R, F: FnOnce() -> R>(&self, f: F) -> Result<R, F> {
        if !self.open.load(Acquire) || self.queued.load(SeqCst) != 0 {
            return Err(f);
        }
        let Some(_wire) = self.wire.try_lock() else {
            return Err(f);
        };
        // Again under the lock: a job counted since is queued behind this call (its thread
        // looked after this one), and one counted before it must run first.
        if !self.open.load(Acquire) || self.queued.load(SeqCst) != 0 {
            return Err(f);
        }
        Ok(f())
    }

    /// Counts a job about to be queued for the owner, before it is sent: from here on no
    /// other thread's call overtakes it.
    pub fn enqueue(&self) {
        self.queued.fetch_add(1, SeqCst);
    }

    /// Uncounts a job that could not be queued after all (the owner is gone).
    pub fn unqueue(&self) {
        self.queued.fetch_sub(1, SeqCst);
    }

    /// On the owner: runs a queued job holding the lock, then uncounts it.
    pub fn serve<R>(&self, job: impl FnOnce() -> R) -> R {
        let _wire = self.wire.lock();
        let r = job();
        self.queued.fetch_sub(1, SeqCst);
        r
    }

    /// On the owner, before it tears the library down: closes the lane once no other thread
    /// calls the library; later calls are queued (and find the owner gone).
    pub fn close(&self) {
        let _wire = self.wire.lock();
        self.open.store(false, Release);
    }
}
