//! The synchronisation primitives of the hand-off protocols, behind one facade so that `loom`
//! replaces them under `cfg(loom)` and model-checks the notifier, the pending hand-off, the
//! worker hand-off and the done flag. Outside loom these are `std` atomics and `parking_lot`.

#[cfg(not(loom))]
pub(crate) use parking_lot::{Condvar, Mutex};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize};
#[cfg(loom)]
pub(crate) use shim::{Condvar, Mutex};

#[cfg(loom)]
mod shim {
    //! loom's mutex and condvar, reshaped to `parking_lot`'s non-poisoning API.
    use std::ops::{Deref, DerefMut};
    use std::time::Duration;

    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);
    pub(crate) struct MutexGuard<'a, T>(Option<loom::sync::MutexGuard<'a, T>>);

    impl<T> Mutex<T> {
        pub(crate) fn new(v: T) -> Self {
            Mutex(loom::sync::Mutex::new(v))
        }
        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            MutexGuard(Some(self.0.lock().unwrap()))
        }
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

    pub(crate) struct Condvar(loom::sync::Condvar);
    pub(crate) struct WaitTimeoutResult;
    impl WaitTimeoutResult {
        pub(crate) fn timed_out(&self) -> bool {
            false
        }
    }
    impl Condvar {
        pub(crate) fn new() -> Self {
            Condvar(loom::sync::Condvar::new())
        }
        pub(crate) fn wait<T>(&self, g: &mut MutexGuard<'_, T>) {
            let inner = g.0.take().unwrap();
            g.0 = Some(self.0.wait(inner).unwrap());
        }
        /// loom does not model time: a timed wait is an untimed one, so a lost wake-up shows up
        /// as a deadlock instead of hiding behind the timeout.
        pub(crate) fn wait_for<T>(
            &self,
            g: &mut MutexGuard<'_, T>,
            _d: Duration,
        ) -> WaitTimeoutResult {
            self.wait(g);
            WaitTimeoutResult
        }
        pub(crate) fn notify_one(&self) -> bool {
            self.0.notify_one();
            true
        }
        pub(crate) fn notify_all(&self) -> usize {
            self.0.notify_all();
            0
        }
    }
}
