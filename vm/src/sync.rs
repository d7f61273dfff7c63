//! The synchronisation primitives of the hand-off protocols, behind one facade so that a
//! model checker replaces them: `loom` under `cfg(loom)` explores every interleaving of small
//! models (the notifier, the pending hand-off, the worker hand-off and the done flag, the
//! kernel pool); `shuttle` under `cfg(shuttle)` runs randomised schedules of the same types
//! with more threads than loom can explore (`shuttle_tests.rs`). Otherwise these are `std`
//! atomics and `parking_lot`.

#[cfg(all(loom, shuttle))]
compile_error!("cfg(loom) and cfg(shuttle) are exclusive: build one model checker at a time");

#[cfg(not(any(loom, shuttle)))]
pub(crate) use parking_lot::{Condvar, Mutex};
#[cfg(not(any(loom, shuttle)))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize};

#[cfg(any(loom, shuttle))]
pub(crate) use model::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize};
#[cfg(any(loom, shuttle))]
pub(crate) use shim::{Condvar, Mutex};

#[cfg(loom)]
use loom::sync as model;
#[cfg(shuttle)]
use shuttle::sync as model;

#[cfg(any(loom, shuttle))]
mod shim {
    //! The model checker's mutex and condvar (std-shaped in both), reshaped to `parking_lot`'s
    //! non-poisoning API.
    use super::model;
    use std::ops::{Deref, DerefMut};
    use std::time::Duration;

    pub(crate) struct Mutex<T>(model::Mutex<T>);
    pub(crate) struct MutexGuard<'a, T>(Option<model::MutexGuard<'a, T>>);

    impl<T> Mutex<T> {
        pub(crate) fn new(v: T) -> Self {
            Mutex(model::Mutex::new(v))
        }
        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            MutexGuard(Some(self.0.lock().unwrap()))
        }
        #[allow(dead_code)] // only the models' tests take it without blocking
        pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
            self.0.try_lock().ok().map(|g| MutexGuard(Some(g)))
        }
    }
    impl<T> Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            self.0.as_ref().unwrap()
        }
    }
    impl<T> DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            self.0.as_mut().unwrap()
        }
    }

    pub(crate) struct Condvar(model::Condvar);
    pub(crate) struct WaitTimeoutResult;
    impl WaitTimeoutResult {
        pub(crate) fn timed_out(&self) -> bool {
            false
        }
    }
    impl Condvar {
        pub(crate) fn new() -> Self {
            Condvar(model::Condvar::new())
        }
        pub(crate) fn wait<T>(&self, g: &mut MutexGuard<'_, T>) {
            let inner = g.0.take().unwrap();
            g.0 = Some(self.0.wait(inner).unwrap());
        }
        /// Neither checker models time: a timed wait is an untimed one, so a lost wake-up shows
        /// up as a deadlock instead of hiding behind the timeout.
        pub(crate) fn wait_for<T>(
            &self,
            g: &mut MutexGuard<'_, T>,
            _d: Duration,
        ) -> WaitTimeoutResult {
            self.wait(g);
            WaitTimeoutResult
        }
        pub(crate) fn notify_all(&self) -> usize {
            self.0.notify_all();
            0
        }
        pub(crate) fn notify_one(&self) -> bool {
            self.0.notify_one();
            true
        }
    }
}
