//! [`CudaBackend`]: device memory from `cuMemAlloc` for a device's caching allocator.
//!
//! The caching allocator above it keeps freed blocks for reuse. That reuse is safe without
//! events because a device's memory is used by its one compute stream, in order: a block
//! freed after its last reader was launched is handed to a kernel launched later on the same
//! stream. `free` (the allocator's `shrink`, on the out-of-memory path or `empty_cache`) goes
//! through `cuMemFree`, which waits for the device's pending work.

use super::Backend;
use crate::stream::cuda::CudaDevice;
use cudarc::driver::result;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Device memory of one CUDA device.
pub struct CudaBackend {
    device: Arc<CudaDevice>,
    used: AtomicUsize,
    capacity: Option<usize>,
}

impl CudaBackend {
    /// A backend over `device`'s memory, capped at `capacity` bytes if given (else the
    /// device's total memory).
    pub fn new(device: Arc<CudaDevice>, capacity: Option<usize>) -> Self {
        let total = device.mem_info().map(|(_, total)| total).ok();
        CudaBackend {
            device,
            used: AtomicUsize::new(0),
            capacity: capacity.or(total),
        }
    }
}

impl Backend for CudaBackend {
    fn allocate(&self, size: usize) -> Option<NonNull<u8>> {
        if let Some(cap) = self.capacity
            && self.used.load(Ordering::Relaxed).saturating_add(size) > cap
        {
            return None;
        }
        self.device.bind().ok()?;
        // SAFETY: the device's context is current; a failed allocation returns an error.
        let ptr = unsafe { result::malloc_sync(size) }.ok()?;
        self.used.fetch_add(size, Ordering::Relaxed);
        // A device address, never dereferenced on the host: kernels and copies take it back
        // as a `CUdeviceptr`. `cuMemAlloc` aligns to at least 256 bytes.
        NonNull::new(ptr as usize as *mut u8)
    }

    unsafe fn free(&self, ptr: NonNull<u8>, size: usize) {
        if self.device.bind().is_ok() {
            // SAFETY: forwarded: `ptr` came from `allocate` and is freed once.
            let _ = unsafe { result::free_sync(ptr.as_ptr() as usize as u64) };
        }
        self.used.fetch_sub(size, Ordering::Relaxed);
    }

    fn capacity(&self) -> Option<usize> {
        self.capacity
    }

    fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    fn is_host(&self) -> bool {
        false
    }
}
