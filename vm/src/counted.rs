//! [`Counted`]: a shared pointer whose last drop takes no locked instruction when no other
//! reference exists.
//!
//! `std::sync::Arc` takes two locked read-modify-writes to drop its last reference (the strong
//! count, then the weak count in `drop_slow`), and `triomphe::Arc` one. On the small-op path
//! each op drops a tensor handle and a blob, and those locked instructions were about a fifth
//! of its time in `perf` profiles (each waits for the store buffer to drain). Most such values
//! have one owner when they die, so `Counted` first reads its count: at one, the caller holds
//! the only reference, nobody else can clone or drop it concurrently, and the value is freed
//! without a write to the count. Otherwise it decrements as `Arc` does. There are no weak
//! references, which is what makes the read sufficient.

use std::fmt;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ops::Deref;
use std::ptr::{NonNull, addr_of, addr_of_mut};
use std::sync::atomic::{AtomicUsize, Ordering, fence};

/// The allocation: the count, then the value.
#[repr(C)]
struct Inner<T> {
    count: AtomicUsize,
    value: T,
}

/// A thread-safe reference-counted pointer, like [`std::sync::Arc`] without weak references,
/// whose drop of the only reference reads the count instead of decrementing it.
///
/// # Examples
///
/// ```
/// use eddy_vm::Counted;
/// let a = Counted::new(vec![1, 2, 3]);
/// let b = a.clone();
/// assert!(Counted::ptr_eq(&a, &b));
/// assert_eq!(Counted::count(&a), 2);
/// std::thread::spawn(move || assert_eq!(b.len(), 3)).join().unwrap();
/// assert_eq!(Counted::try_unwrap(a).ok(), Some(vec![1, 2, 3]));
/// ```
pub struct Counted<T> {
    ptr: NonNull<Inner<T>>,
    /// Drop check: a `Counted` owns an `Inner<T>`.
    _owns: PhantomData<Inner<T>>,
}

// SAFETY: as `Arc`: the value is shared between threads (`Sync`) and dropped by whichever
// thread drops the last reference (`Send`).
unsafe impl<T: Send + Sync> Send for Counted<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for Counted<T> {}

impl<T> Counted<T> {
    /// `value` in a new allocation with a count of one.
    pub fn new(value: T) -> Self {
        Counted::from_inner(Box::new(Inner {
            count: AtomicUsize::new(1),
            value,
        }))
    }

    /// A new allocation whose value `init` writes in place (a large value then needs no copy
    /// from the stack).
    ///
    /// # Safety
    ///
    /// `init` must initialise the whole value behind the pointer it is given. If it panics,
    /// the allocation is freed and the value is not dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// let c = unsafe { eddy_vm::Counted::new_with(|p: *mut [u64; 64]| p.write([7; 64])) };
    /// assert_eq!(c[63], 7);
    /// ```
    pub unsafe fn new_with(init: impl FnOnce(*mut T)) -> Self {
        /// Frees the allocation, without dropping a value, if `init` unwinds.
        struct Guard<T>(*mut MaybeUninit<Inner<T>>);
        impl<T> Drop for Guard<T> {
            fn drop(&mut self) {
                // SAFETY: `self.0` came from `Box::into_raw` below and is freed only here;
                // `MaybeUninit` drops nothing.
                drop(unsafe { Box::from_raw(self.0) });
            }
        }
        let guard = Guard(Box::into_raw(Box::<Inner<T>>::new_uninit()));
        let p = guard.0.cast::<Inner<T>>();
        // SAFETY: `p` points to a fresh, writable, aligned allocation for an `Inner<T>`; the
        // count is written here and the value by `init` (the caller's contract).
        unsafe {
            addr_of_mut!((*p).count).write(AtomicUsize::new(1));
            init(addr_of_mut!((*p).value));
        }
        std::mem::forget(guard);
        Counted {
            // SAFETY: from `Box::into_raw`, never null.
            ptr: unsafe { NonNull::new_unchecked(p) },
            _owns: PhantomData,
        }
    }

    fn from_inner(b: Box<Inner<T>>) -> Self {
        Counted {
            ptr: NonNull::from(Box::leak(b)),
            _owns: PhantomData,
        }
    }

    fn inner(&self) -> &Inner<T> {
        // SAFETY: the allocation lives while any reference does, and this is one.
        unsafe { self.ptr.as_ref() }
    }

    /// Whether `a` and `b` point to the same allocation.
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        a.ptr == b.ptr
    }

    /// The value's address (stable for the allocation's life).
    pub fn as_ptr(this: &Self) -> *const T {
        // SAFETY: `ptr` points to a live `Inner<T>`; no reference is created.
        unsafe { addr_of!((*this.ptr.as_ptr()).value) }
    }

    /// How many references exist (a snapshot when other threads hold some).
    pub fn count(this: &Self) -> usize {
        this.inner().count.load(Ordering::Acquire)
    }

    /// The value, if `this` is the only reference; else `this` back.
    pub fn try_unwrap(this: Self) -> Result<T, Self> {
        if Counted::count(&this) != 1 {
            return Err(this);
        }
        let this = std::mem::ManuallyDrop::new(this);
        // SAFETY: the only reference (count one, read with Acquire: every other reference's
        // drop happened before), and it is not dropped (`ManuallyDrop`), so the allocation is
        // taken back exactly once.
        let inner = unsafe { Box::from_raw(this.ptr.as_ptr()) };
        Ok(inner.value)
    }

    /// The value, mutably, if `this` is the only reference.
    pub fn get_mut(this: &mut Self) -> Option<&mut T> {
        if Counted::count(this) != 1 {
            return None;
        }
        // SAFETY: the only reference, borrowed mutably: nothing else can reach the value.
        Some(unsafe { &mut (*this.ptr.as_ptr()).value })
    }

    /// Frees the allocation and drops the value: the last reference went.
    ///
    /// # Safety
    ///
    /// No other reference exists, and every use through the others happened before.
    #[inline(never)]
    unsafe fn drop_slow(&mut self) {
        // SAFETY: the caller's contract; the allocation came from a `Box`.
        drop(unsafe { Box::from_raw(self.ptr.as_ptr()) });
    }
}

impl<T> Clone for Counted<T> {
    #[inline]
    fn clone(&self) -> Self {
        // Relaxed, as `Arc::clone`: a new reference is made from an existing one, which
        // this thread already sees.
        let old = self.inner().count.fetch_add(1, Ordering::Relaxed);
        if old > isize::MAX as usize {
            // As `Arc`: so many leaked clones would overflow the count.
            std::process::abort();
        }
        Counted {
            ptr: self.ptr,
            _owns: PhantomData,
        }
    }
}

impl<T> Drop for Counted<T> {
    #[inline]
    fn drop(&mut self) {
        let count = &self.inner().count;
        // At one this is the only reference: no other exists to be cloned or dropped, so
        // the count needs no write. Acquire pairs with the Release decrements of the
        // references dropped before, so their uses happen before the value is dropped.
        if count.load(Ordering::Acquire) != 1 {
            // As `Arc`: Release so this reference's uses happen before the last drop; the
            // last one then fences with Acquire.
            if count.fetch_sub(1, Ordering::Release) != 1 {
                return;
            }
            fence(Ordering::Acquire);
        }
        // SAFETY: the last reference, with every other's uses ordered before (above).
        unsafe { self.drop_slow() }
    }
}

impl<T> Deref for Counted<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.inner().value
    }
}

impl<T> AsRef<T> for Counted<T> {
    fn as_ref(&self) -> &T {
        self
    }
}

impl<T: fmt::Debug> fmt::Debug for Counted<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::Counted;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts its drops.
    struct Probe(Arc<AtomicUsize>);
    impl Drop for Probe {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn the_value_drops_once_whoever_drops_last() {
        let drops = Arc::new(AtomicUsize::new(0));
        for threads in [1, 2, 4] {
            let c = Counted::new(Probe(drops.clone()));
            let hs: Vec<_> = (0..threads)
                .map(|_| {
                    let c = c.clone();
                    std::thread::spawn(move || {
                        let more: Vec<_> = (0..3).map(|_| c.clone()).collect();
                        drop(more);
                        drop(c);
                    })
                })
                .collect();
            drop(c);
            for h in hs {
                h.join().unwrap();
            }
        }
        assert_eq!(drops.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn the_only_reference_unwraps_and_a_shared_one_does_not() {
        let a = Counted::new(String::from("x"));
        let b = a.clone();
        let a = Counted::try_unwrap(a).unwrap_err();
        assert_eq!(Counted::count(&b), 2);
        drop(b);
        let mut a = a;
        Counted::get_mut(&mut a).unwrap().push('y');
        assert_eq!(Counted::try_unwrap(a).unwrap(), "xy");
    }

    #[test]
    fn a_panicking_initialiser_frees_the_allocation() {
        let r = std::panic::catch_unwind(|| {
            // SAFETY: the initialiser panics before writing; `new_with` frees the memory.
            unsafe { Counted::<String>::new_with(|_| panic!("no value")) }
        });
        assert!(r.is_err());
        // SAFETY: `init` writes the whole value.
        let ok = unsafe { Counted::new_with(|p: *mut String| p.write("v".into())) };
        assert_eq!(&*ok, "v");
    }
}
