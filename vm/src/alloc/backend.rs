//! Backends: the system-level source of memory chunks for a device.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Where a device's memory comes from. `allocate` may fail (return `None`) when the device is
/// full; that starts the engine's out-of-memory path.
///
/// # Examples
///
/// ```
/// use eddy_vm::alloc::{AllocMode, Backend, CpuBackend, DeviceAllocator};
/// let backend: Box<dyn Backend> = Box::new(CpuBackend::new(Some(4 << 20)));
/// assert_eq!((backend.capacity(), backend.used()), (Some(4 << 20), 0));
/// let a = DeviceAllocator::new(backend, AllocMode::Caching);
/// let x = a.allocate(1000).unwrap();
/// assert_eq!(x.size(), 1024);
/// assert_eq!(a.capacity(), Some(4 << 20));
/// ```
pub trait Backend: Send + Sync + 'static {
    /// Gets `size > 0` bytes, aligned to at least 64, or `None` if the device is full.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::alloc::{Backend, CpuBackend};
    /// let b = CpuBackend::new(Some(4096));
    /// let p = b.allocate(100).unwrap();
    /// assert_eq!(p.as_ptr() as usize % 64, 0);
    /// assert!(b.allocate(4096).is_none(), "only 3996 bytes are left");
    /// // SAFETY: `p` came from `b.allocate(100)` and is freed once.
    /// unsafe { b.free(p, 100) };
    /// ```
    fn allocate(&self, size: usize) -> Option<NonNull<u8>>;
    /// Returns memory obtained from `allocate` with the same `size`.
    ///
    /// # Safety
    ///
    /// `ptr` must come from `self.allocate(size)` and not have been freed.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::alloc::{Backend, CpuBackend};
    /// let b = CpuBackend::new(None);
    /// let p = b.allocate(256).unwrap();
    /// assert_eq!(b.used(), 256);
    /// // SAFETY: `p` came from `b.allocate(256)` and is freed once.
    /// unsafe { b.free(p, 256) };
    /// assert_eq!(b.used(), 0);
    /// ```
    unsafe fn free(&self, ptr: NonNull<u8>, size: usize);
    /// The most bytes the backend will hand out, if bounded.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::alloc::{Backend, CpuBackend};
    /// assert_eq!(CpuBackend::new(Some(1 << 20)).capacity(), Some(1 << 20));
    /// assert_eq!(CpuBackend::new(None).capacity(), None);
    /// ```
    fn capacity(&self) -> Option<usize>;
    /// Bytes currently handed out.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::alloc::{Backend, CpuBackend};
    /// let b = CpuBackend::new(None);
    /// let (p, q) = (b.allocate(100).unwrap(), b.allocate(28).unwrap());
    /// assert_eq!(b.used(), 128);
    /// // SAFETY: each block came from `b.allocate` with that size and is freed once.
    /// unsafe { b.free(p, 100) };
    /// assert_eq!(b.used(), 28);
    /// // SAFETY: `q` came from `b.allocate(28)` and is freed once.
    /// unsafe { b.free(q, 28) };
    /// ```
    fn used(&self) -> usize;
    /// Whether the memory is host memory that kernels reach through an ordinary pointer. Then
    /// a blob of at most [`INLINE_BYTES`](crate::blob::INLINE_BYTES) keeps its bytes inside
    /// itself instead of asking the allocator (see [`DeviceAllocator::inline_max`](super::DeviceAllocator::inline_max)).
    /// Default: no (device memory).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::alloc::{Backend, CpuBackend};
    /// assert!(CpuBackend::new(None).is_host());
    /// ```
    fn is_host(&self) -> bool {
        false
    }
}

/// Host memory from the global allocator, optionally capped at `capacity` bytes. A request of
/// at least [`CHECKED_BYTES`](super::CHECKED_BYTES) is also refused when the host has less
/// memory free than that ([`host_available`](super::host_available)), so that it fails here
/// rather than get the process killed when its pages are touched.
///
/// # Examples
///
/// ```
/// use eddy_vm::alloc::{Backend, CpuBackend};
/// let b = CpuBackend::new(Some(1024));
/// let p = b.allocate(1024).unwrap();
/// assert!(b.allocate(1).is_none()); // over capacity
/// unsafe { b.free(p, 1024) };
/// assert_eq!(b.used(), 0);
/// ```
#[derive(Debug)]
pub struct CpuBackend {
    capacity: Option<usize>,
    used: AtomicUsize,
}

impl CpuBackend {
    /// A backend that hands out at most `capacity` bytes (unbounded if `None`).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::alloc::{Backend, CpuBackend};
    /// let capped = CpuBackend::new(Some(64));
    /// assert!(capped.allocate(65).is_none());
    /// let unbounded = CpuBackend::new(None);
    /// let p = unbounded.allocate(1 << 20).unwrap();
    /// // SAFETY: `p` came from `unbounded.allocate(1 << 20)` and is freed once.
    /// unsafe { unbounded.free(p, 1 << 20) };
    /// ```
    pub fn new(capacity: Option<usize>) -> Self {
        CpuBackend {
            capacity,
            used: AtomicUsize::new(0),
        }
    }

    fn layout(size: usize) -> Option<Layout> {
        // Page-align big chunks (streaming kernels like it), cache-line-align the rest.
        let align = if size >= 1 << 20 { 4096 } else { 64 };
        Layout::from_size_align(size, align).ok()
    }
}

impl Backend for CpuBackend {
    fn allocate(&self, size: usize) -> Option<NonNull<u8>> {
        debug_assert!(size > 0);
        let layout = Self::layout(size)?;
        // Reserve the bytes first so two threads cannot both pass the capacity check.
        let prev = self.used.fetch_add(size, Ordering::AcqRel);
        if self
            .capacity
            .is_some_and(|c| prev.checked_add(size).is_none_or(|n| n > c))
        {
            self.used.fetch_sub(size, Ordering::AcqRel);
            return None;
        }
        if size >= super::CHECKED_BYTES && super::host_available().is_some_and(|free| size > free) {
            self.used.fetch_sub(size, Ordering::AcqRel);
            return None;
        }
        // SAFETY: `layout` has a non-zero size (callers never ask for 0 bytes; checked above in
        // debug builds and the engine never forwards zero-byte requests).
        let p = unsafe { std::alloc::alloc(layout) };
        match NonNull::new(p) {
            Some(p) => Some(p),
            None => {
                self.used.fetch_sub(size, Ordering::AcqRel);
                None
            }
        }
    }

    unsafe fn free(&self, ptr: NonNull<u8>, size: usize) {
        let layout = Self::layout(size).expect("layout was valid at allocation");
        // SAFETY: the caller guarantees `ptr` came from `allocate(size)`, which used this layout.
        unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) };
        self.used.fetch_sub(size, Ordering::AcqRel);
    }

    fn capacity(&self) -> Option<usize> {
        self.capacity
    }

    fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    fn is_host(&self) -> bool {
        true
    }
}
