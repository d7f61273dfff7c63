//! CUDA backends for a device's caching allocators: device memory from `cuMemAlloc`
//! ([`CudaBackend`]) and page-locked host memory from `cuMemHostAlloc` ([`PinnedBackend`]).
//!
//! Each stream of a CUDA device has an allocator of its own, over one shared count of device
//! memory. Reuse within one allocator is safe without events because its memory is used by its
//! own in-order stream: a block freed after its last reader was launched is handed to a kernel
//! launched later on the same stream (see `StreamPolicy::orders_memory`). Memory used on another
//! stream goes back only once an event says that stream is done with it. `free` (the
//! allocator's `shrink`, on the out-of-memory path or `Vm::empty_cache`) goes through
//! `cuMemFree`, which waits for the device's pending work.

use super::cuda::CudaDevice;
use crate::alloc::Backend;
use cudarc::driver::result;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A count of bytes taken against an optional capacity, shared by the backends that draw on one
/// memory.
#[derive(Clone)]
struct Budget {
    used: Arc<AtomicUsize>,
    capacity: Option<usize>,
}

impl Budget {
    fn new(capacity: Option<usize>) -> Self {
        Budget {
            used: Arc::new(AtomicUsize::new(0)),
            capacity,
        }
    }

    /// Reserves `size` bytes first, so that two allocators cannot both pass the check.
    fn reserve(&self, size: usize) -> bool {
        let before = self.used.fetch_add(size, Ordering::Relaxed);
        let fits = self
            .capacity
            .is_none_or(|cap| before.saturating_add(size) <= cap);
        if !fits {
            self.release(size);
        }
        fits
    }

    fn release(&self, size: usize) {
        self.used.fetch_sub(size, Ordering::Relaxed);
    }

    fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }
}

/// Device memory of one CUDA device.
pub struct CudaBackend {
    device: Arc<CudaDevice>,
    /// Bytes taken from the device by every backend sharing this budget.
    budget: Budget,
}

impl CudaBackend {
    /// A backend over `device`'s memory, capped at `capacity` bytes if given (else the
    /// device's total memory).
    pub fn new(device: Arc<CudaDevice>, capacity: Option<usize>) -> Self {
        let total = device.mem_info().map(|(_, total)| total).ok();
        CudaBackend {
            device,
            budget: Budget::new(capacity.or(total)),
        }
    }

    /// Another backend over the same device memory, counted against the same capacity: for
    /// the allocator of another stream of the device.
    pub fn share(&self) -> Self {
        CudaBackend {
            device: self.device.clone(),
            budget: self.budget.clone(),
        }
    }
}

impl Backend for CudaBackend {
    fn allocate(&self, size: usize) -> Option<NonNull<u8>> {
        if !self.budget.reserve(size) {
            return None;
        }
        let ptr = self.device.bind().ok().and_then(|()| {
            // SAFETY: the context is current; a failed allocation returns an error, not memory.
            unsafe { result::malloc_sync(size) }.ok()
        });
        // A device address, never dereferenced on the host: kernels and copies take it back as
        // a `CUdeviceptr`. `cuMemAlloc` aligns to at least 256 bytes.
        let p = ptr.and_then(|p| NonNull::new(p as usize as *mut u8));
        if p.is_none() {
            self.budget.release(size);
        }
        p
    }

    unsafe fn free(&self, ptr: NonNull<u8>, size: usize) {
        if self.device.bind().is_ok() {
            // SAFETY: forwarded: `ptr` came from `allocate` and is freed once.
            let _ = unsafe { result::free_sync(ptr.as_ptr() as usize as u64) };
        }
        self.budget.release(size);
    }

    fn capacity(&self) -> Option<usize> {
        self.budget.capacity
    }

    fn used(&self) -> usize {
        self.budget.used()
    }

    fn is_host(&self) -> bool {
        false
    }
}

/// Page-locked host memory through one CUDA device's context: what copies between the host
/// and that device read and write at full speed, and asynchronously.
///
/// The device-to-host stream allocates its outputs (host tensors) here, so its copies land
/// directly in their final place; the host-to-device stream stages its sources here.
pub struct PinnedBackend {
    device: Arc<CudaDevice>,
    budget: Budget,
}

impl PinnedBackend {
    /// Pinned memory for `device`'s copies, capped at `capacity` bytes if given.
    pub fn new(device: Arc<CudaDevice>, capacity: Option<usize>) -> Self {
        PinnedBackend {
            device,
            budget: Budget::new(capacity),
        }
    }
}

impl Backend for PinnedBackend {
    fn allocate(&self, size: usize) -> Option<NonNull<u8>> {
        if !self.budget.reserve(size) {
            return None;
        }
        let flags = cudarc::driver::sys::CU_MEMHOSTALLOC_PORTABLE;
        let ptr = self.device.bind().ok().and_then(|()| {
            // SAFETY: the context is current; the driver returns page-locked host memory of
            // `size` bytes, page-aligned, or an error.
            unsafe { result::malloc_host(size, flags) }.ok()
        });
        let p = ptr.and_then(|p| NonNull::new(p.cast::<u8>()));
        if p.is_none() {
            self.budget.release(size);
        }
        p
    }

    unsafe fn free(&self, ptr: NonNull<u8>, size: usize) {
        if self.device.bind().is_ok() {
            // SAFETY: forwarded: `ptr` came from `malloc_host` in `allocate` and is freed once.
            let _ = unsafe { result::free_host(ptr.as_ptr().cast()) };
        }
        self.budget.release(size);
    }

    fn capacity(&self) -> Option<usize> {
        self.budget.capacity
    }

    fn used(&self) -> usize {
        self.budget.used()
    }

    /// Host memory, but never inline in a blob: a copy must see the pinned pages.
    fn is_host(&self) -> bool {
        false
    }
}
