//! [`DeviceAllocator`]: the thread-safe allocator of one device, with statistics.

use super::backend::Backend;
use super::caching::{CachingAllocator, round_size};
use parking_lot::Mutex;
use std::ptr::NonNull;
use std::sync::Arc;

/// The most bytes a blob keeps inside itself, on a host device, instead of asking the
/// allocator: 64 `f32`s. A small op's output then costs no allocator call, lock or atomic
/// reference count; its memory comes and goes with the blob (see
/// [`DeviceAllocator::inline_max`]).
pub const INLINE_BYTES: usize = 256;

/// How a [`DeviceAllocator`] serves requests.
///
/// # Examples
///
/// ```
/// use eddy_vm::alloc::{AllocMode, CpuBackend, DeviceAllocator};
/// let a = DeviceAllocator::new(Box::new(CpuBackend::new(None)), AllocMode::Passthrough);
/// drop(a.allocate(1000).unwrap());
/// assert_eq!(a.stats().reserved, 0, "a pass-through free goes straight to the backend");
/// assert_eq!(AllocMode::default(), AllocMode::Caching);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AllocMode {
    /// Cache freed pieces and reuse them (the default).
    #[default]
    Caching,
    /// Every allocation and free goes straight to the backend, so that valgrind and sanitizers
    /// see real frees (`EDDY_VM_ALLOCATOR=passthrough`).
    Passthrough,
}

/// A failed allocation, with the allocator's figures at the time.
///
/// # Examples
///
/// ```
/// use eddy_vm::alloc::{AllocMode, CpuBackend, DeviceAllocator};
/// let a = DeviceAllocator::new(Box::new(CpuBackend::new(Some(1024))), AllocMode::Caching);
/// let e = a.allocate(2000).err().expect("over capacity");
/// assert_eq!((e.requested, e.in_use, e.cached), (2000, 0, 0));
/// assert_eq!(e.capacity, Some(1024));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllocError {
    /// Bytes asked for.
    pub requested: usize,
    /// Bytes handed out.
    pub in_use: usize,
    /// Bytes held but free.
    pub cached: usize,
    /// The backend's capacity.
    pub capacity: Option<usize>,
}

/// Allocator statistics.
///
/// # Examples
///
/// ```
/// use eddy_vm::alloc::{AllocMode, CpuBackend, DeviceAllocator};
/// let a = DeviceAllocator::new(Box::new(CpuBackend::new(None)), AllocMode::Caching);
/// let (x, y) = (a.allocate(512).unwrap(), a.allocate(512).unwrap());
/// drop(x);
/// let s = a.stats();
/// assert_eq!((s.in_use, s.peak_in_use, s.allocations), (512, 1024, 2));
/// assert_eq!(s.system_allocations, 1, "both pieces come from one chunk");
/// assert_eq!(s.reserved, s.in_use + s.cached);
/// # drop(y);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocStats {
    /// Bytes handed out now.
    pub in_use: usize,
    /// Bytes held from the backend but free.
    pub cached: usize,
    /// Bytes held from the backend (`in_use + cached`).
    pub reserved: usize,
    /// The most bytes ever in use at once.
    pub peak_in_use: usize,
    /// Allocations served.
    pub allocations: u64,
    /// Calls to the backend's `allocate` that succeeded.
    pub system_allocations: u64,
    /// Out-of-memory retries that succeeded after shrinking.
    pub oom_retries: u64,
    /// Allocations that failed for good.
    pub ooms: u64,
}

struct Inner {
    cache: CachingAllocator,
    stats: AllocStats,
    /// Passthrough mode: live allocations and their sizes.
    direct_in_use: usize,
}

/// The allocator of one device: a [`CachingAllocator`] (or a pass-through) over a [`Backend`].
///
/// # Examples
///
/// ```
/// use eddy_vm::alloc::{AllocMode, CpuBackend, DeviceAllocator};
/// let a = DeviceAllocator::new(Box::new(CpuBackend::new(None)), AllocMode::Caching);
/// let x = a.allocate(1000).unwrap();
/// assert_eq!(a.stats().in_use, 1024); // rounded to the 512-byte bin
/// drop(x);
/// assert_eq!(a.stats().in_use, 0);
/// assert!(a.stats().cached > 0); // kept for reuse until `shrink`
/// a.shrink();
/// assert_eq!(a.stats().reserved, 0);
/// ```
pub struct DeviceAllocator {
    backend: Box<dyn Backend>,
    mode: AllocMode,
    inline_max: usize,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for DeviceAllocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceAllocator")
            .field("mode", &self.mode)
            .field("stats", &self.stats())
            .finish()
    }
}

/// Memory handed out by a [`DeviceAllocator`]; returned to it on drop.
///
/// # Examples
///
/// ```
/// use eddy_vm::alloc::{AllocMode, CpuBackend, DeviceAllocator};
/// let a = DeviceAllocator::new(Box::new(CpuBackend::new(None)), AllocMode::Caching);
/// let x = a.allocate(100).unwrap();
/// assert_eq!(a.stats().in_use, 512);
/// drop(x); // back to the allocator
/// assert_eq!(a.stats().in_use, 0);
/// ```
pub struct Allocation {
    ptr: NonNull<u8>,
    size: usize,
    owner: Arc<DeviceAllocator>,
}

// SAFETY: an `Allocation` is a unique handle to a range of device memory; it carries no
// thread-affine state, and freeing goes through the allocator's mutex.
unsafe impl Send for Allocation {}
// SAFETY: `&Allocation` only exposes the pointer value and size; access to the bytes is ordered
// by the engine, not by this handle.
unsafe impl Sync for Allocation {}

impl Allocation {
    /// The start of the memory.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::alloc::{AllocMode, CpuBackend, DeviceAllocator};
    /// let a = DeviceAllocator::new(Box::new(CpuBackend::new(None)), AllocMode::Caching);
    /// let x = a.allocate(8).unwrap();
    /// assert!(!x.ptr().is_null());
    /// assert_eq!(x.ptr() as usize % 64, 0);
    /// // SAFETY: `x` owns at least 8 bytes at `ptr`.
    /// unsafe { x.ptr().write_bytes(0xff, 8) };
    /// ```
    pub fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    /// Whether this memory came from `alloc`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::alloc::{AllocMode, CpuBackend, DeviceAllocator};
    /// let a = DeviceAllocator::new(Box::new(CpuBackend::new(None)), AllocMode::Caching);
    /// let b = DeviceAllocator::new(Box::new(CpuBackend::new(None)), AllocMode::Caching);
    /// let x = a.allocate(1024).unwrap();
    /// assert!(x.is_from(&a) && !x.is_from(&b));
    /// ```
    pub fn is_from(&self, alloc: &Arc<DeviceAllocator>) -> bool {
        Arc::ptr_eq(&self.owner, alloc)
    }

    /// The size actually reserved (the request rounded up).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::alloc::{AllocMode, CpuBackend, DeviceAllocator};
    /// let a = DeviceAllocator::new(Box::new(CpuBackend::new(None)), AllocMode::Caching);
    /// assert_eq!(a.allocate(1).unwrap().size(), 512);
    /// assert_eq!(a.allocate(513).unwrap().size(), 1024);
    /// ```
    pub fn size(&self) -> usize {
        self.size
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        self.owner.free(self.ptr, self.size);
    }
}

impl Drop for DeviceAllocator {
    fn drop(&mut self) {
        // Every `Allocation` holds an `Arc` to its allocator, so nothing is in use here: every
        // chunk is one free piece, and `shrink` returns them all to the backend.
        let g = self.inner.get_mut();
        g.cache.shrink(&*self.backend);
        debug_assert_eq!(g.cache.reserved(), 0, "a chunk outlived its allocator");
    }
}

impl DeviceAllocator {
    /// An allocator over `backend`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::alloc::{AllocMode, CpuBackend, DeviceAllocator};
    /// let a = DeviceAllocator::new(Box::new(CpuBackend::new(Some(1 << 20))), AllocMode::Caching);
    /// assert_eq!(a.mode(), AllocMode::Caching);
    /// assert_eq!(a.capacity(), Some(1 << 20));
    /// assert_eq!(a.stats().reserved, 0, "nothing is taken from the backend up front");
    /// ```
    pub fn new(backend: Box<dyn Backend>, mode: AllocMode) -> Arc<Self> {
        let inline_max = if mode == AllocMode::Caching && backend.is_host() {
            INLINE_BYTES
        } else {
            0
        };
        Arc::new(DeviceAllocator {
            backend,
            mode,
            inline_max,
            inner: Mutex::new(Inner {
                cache: CachingAllocator::new(),
                stats: AllocStats::default(),
                direct_in_use: 0,
            }),
        })
    }

    /// The mode.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::alloc::{AllocMode, CpuBackend, DeviceAllocator};
    /// let a = DeviceAllocator::new(Box::new(CpuBackend::new(None)), AllocMode::Passthrough);
    /// assert_eq!(a.mode(), AllocMode::Passthrough);
    /// ```
    pub fn mode(&self) -> AllocMode {
        self.mode
    }

    /// The largest blob that keeps its bytes inside itself instead of asking this allocator:
    /// [`INLINE_BYTES`] over host memory in caching mode, else 0
    /// (device memory cannot live in a host struct, and pass-through mode exists so that
    /// valgrind sees every tensor's memory as its own heap block).
    ///
    /// Such a blob costs no allocator call, lock or statistics entry: a 16-float tensor's
    /// memory comes and goes with its blob. Its bytes are not counted in [`stats`](Self::stats)
    /// and not bounded by the capacity, like the rest of the blob's host-side struct.
    ///
    /// ```
    /// use eddy_vm::alloc::{AllocMode, CpuBackend, DeviceAllocator};
    /// let a = DeviceAllocator::new(Box::new(CpuBackend::new(None)), AllocMode::Caching);
    /// assert_eq!(a.inline_max(), eddy_vm::blob::INLINE_BYTES);
    /// let p = DeviceAllocator::new(Box::new(CpuBackend::new(None)), AllocMode::Passthrough);
    /// assert_eq!(p.inline_max(), 0);
    /// ```
    pub fn inline_max(&self) -> usize {
        self.inline_max
    }

    /// Allocates `size > 0` bytes (one attempt; the engine's OOM path shrinks and retries).
    ///
    /// # Errors
    ///
    /// [`AllocError`] when neither the cache nor the backend can serve the request.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::alloc::{AllocMode, CpuBackend, DeviceAllocator};
    /// let a = DeviceAllocator::new(Box::new(CpuBackend::new(Some(1 << 20))), AllocMode::Caching);
    /// let x = a.allocate(600 << 10).unwrap();
    /// assert_eq!(x.size(), 600 << 10);
    /// let e = a.allocate(600 << 10).err().expect("the device is full");
    /// assert_eq!(e.in_use, 600 << 10);
    /// ```
    pub fn allocate(self: &Arc<Self>, size: usize) -> Result<Allocation, AllocError> {
        let mut g = self.inner.lock();
        // Fault injection: "return" makes this attempt fail as if the device were full.
        crate::fail_point!("vm::alloc", |_| {
            let (in_use, reserved) = (self.in_use_locked(&g), self.reserved_locked(&g));
            Err(AllocError {
                requested: size,
                in_use,
                cached: reserved - in_use,
                capacity: self.backend.capacity(),
            })
        });
        let got = match self.mode {
            AllocMode::Caching => {
                let chunks = g.cache.chunk_count();
                let r = g.cache.allocate(size, &*self.backend);
                if g.cache.chunk_count() > chunks {
                    g.stats.system_allocations += 1;
                }
                r
            }
            AllocMode::Passthrough => round_size(size).and_then(|r| {
                let p = self.backend.allocate(r)?;
                g.direct_in_use += r;
                g.stats.system_allocations += 1;
                Some((p, r))
            }),
        };
        match got {
            Some((ptr, rounded)) => {
                g.stats.allocations += 1;
                let in_use = self.in_use_locked(&g);
                g.stats.peak_in_use = g.stats.peak_in_use.max(in_use);
                Ok(Allocation {
                    ptr,
                    size: rounded,
                    owner: self.clone(),
                })
            }
            None => {
                let in_use = self.in_use_locked(&g);
                let reserved = self.reserved_locked(&g);
                Err(AllocError {
                    requested: size,
                    in_use,
                    cached: reserved - in_use,
                    capacity: self.backend.capacity(),
                })
            }
        }
    }

    fn in_use_locked(&self, g: &Inner) -> usize {
        match self.mode {
            AllocMode::Caching => g.cache.in_use(),
            AllocMode::Passthrough => g.direct_in_use,
        }
    }

    fn reserved_locked(&self, g: &Inner) -> usize {
        match self.mode {
            AllocMode::Caching => g.cache.reserved(),
            AllocMode::Passthrough => g.direct_in_use,
        }
    }

    fn free(&self, ptr: NonNull<u8>, size: usize) {
        let mut g = self.inner.lock();
        match self.mode {
            AllocMode::Caching => g.cache.free_sized(ptr, size),
            AllocMode::Passthrough => {
                g.direct_in_use -= size;
                // SAFETY: in pass-through mode every allocation's pointer and rounded size came
                // straight from `backend.allocate(size)`, and `Allocation::drop` frees it once.
                unsafe { self.backend.free(ptr, size) };
            }
        }
    }

    /// Returns fully free chunks to the backend; returns the bytes released.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::alloc::{AllocMode, CpuBackend, DeviceAllocator};
    /// let a = DeviceAllocator::new(Box::new(CpuBackend::new(None)), AllocMode::Caching);
    /// let x = a.allocate(1000).unwrap();
    /// assert_eq!(a.shrink(), 0, "the chunk is in use");
    /// drop(x);
    /// assert_eq!(a.shrink(), 2 << 20); // the whole 2 MiB chunk
    /// assert_eq!(a.stats().reserved, 0);
    /// ```
    pub fn shrink(&self) -> usize {
        let mut g = self.inner.lock();
        match self.mode {
            AllocMode::Caching => g.cache.shrink(&*self.backend),
            AllocMode::Passthrough => 0,
        }
    }

    /// A snapshot of the statistics.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::alloc::{AllocMode, CpuBackend, DeviceAllocator};
    /// let a = DeviceAllocator::new(Box::new(CpuBackend::new(None)), AllocMode::Caching);
    /// let x = a.allocate(2048).unwrap();
    /// let s = a.stats();
    /// assert_eq!((s.in_use, s.reserved, s.allocations), (2048, 2 << 20, 1));
    /// assert_eq!(s.cached, (2 << 20) - 2048);
    /// # drop(x);
    /// ```
    pub fn stats(&self) -> AllocStats {
        let g = self.inner.lock();
        let mut s = g.stats;
        s.in_use = self.in_use_locked(&g);
        s.reserved = self.reserved_locked(&g);
        s.cached = s.reserved - s.in_use;
        s
    }

    /// The backend's capacity, if bounded.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::alloc::{AllocMode, CpuBackend, DeviceAllocator};
    /// let a = DeviceAllocator::new(Box::new(CpuBackend::new(None)), AllocMode::Caching);
    /// assert_eq!(a.capacity(), None);
    /// ```
    pub fn capacity(&self) -> Option<usize> {
        self.backend.capacity()
    }

    pub(crate) fn note_retry(&self, succeeded: bool) {
        let mut g = self.inner.lock();
        if succeeded {
            g.stats.oom_retries += 1;
        } else {
            g.stats.ooms += 1;
        }
    }

    /// Checks the caching allocator's invariants (for tests).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::alloc::{AllocMode, CpuBackend, DeviceAllocator};
    /// let a = DeviceAllocator::new(Box::new(CpuBackend::new(None)), AllocMode::Caching);
    /// let xs: Vec<_> = (1..5).map(|k| a.allocate(k * 1000).unwrap()).collect();
    /// drop(xs);
    /// assert_eq!(a.check_invariants(), Ok(()));
    /// ```
    pub fn check_invariants(&self) -> Result<(), String> {
        self.inner.lock().cache.check_invariants()
    }
}
