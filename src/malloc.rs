//! [`Malloc`]: the global allocator of the `eddy` binary, benches and examples.
//!
//! mimalloc, called by its plain entry points whenever the requested alignment is one that
//! every mimalloc block already has. The `mimalloc` crate's `MiMalloc` sends every request
//! through `mi_malloc_aligned`, which in mimalloc 3 leaves the allocation fast path: it cost
//! about 90 instructions per call against about 20 for `mi_malloc`, and a small tensor op
//! makes three such allocations (its handle, its storage, its blob). Requests aligned beyond
//! 16 bytes still go to the aligned entry points.
//!
//! Why mimalloc at all: frees made on the scheduler thread of memory allocated on the user
//! thread are cheap (glibc malloc takes the owning arena's lock for each, which serialises
//! the threads). It is built with `no_thp` (Cargo.toml): with transparent huge pages, each
//! arena region mimalloc touches becomes resident in 2 MiB pieces, which took the training
//! workload's peak RSS from 19 MiB to 32 MiB.
//!
//! # Examples
//!
//! ```
//! #[global_allocator]
//! static GLOBAL: eddy::Malloc = eddy::Malloc;
//! let v: Vec<u64> = (0..1000).collect();
//! assert_eq!(v.iter().sum::<u64>(), 499_500);
//! ```

use libmimalloc_sys as ffi;
use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

/// The alignment every mimalloc block has (`MI_MAX_ALIGN_SIZE`, the alignment of
/// `max_align_t` on the platforms Eddy builds for).
const MIN_ALIGN: usize = 16;

/// mimalloc with a fast path for ordinary alignments (see the [module docs](self)).
///
/// # Examples
///
/// ```
/// use std::alloc::{GlobalAlloc, Layout};
/// let l = Layout::from_size_align(256, 64).unwrap();
/// // SAFETY: `l` has a non-zero size, and the block is freed with the same layout.
/// unsafe {
///     let p = eddy::Malloc.alloc_zeroed(l);
///     assert!(!p.is_null() && p as usize % 64 == 0);
///     assert_eq!(*p.add(255), 0);
///     eddy::Malloc.dealloc(p, l);
/// }
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Malloc;

// SAFETY: every method forwards to mimalloc, which returns memory of at least `layout.size()`
// bytes aligned to at least `layout.align()`: the plain entry points align every block to
// `MIN_ALIGN` (mimalloc's `MI_MAX_ALIGN_SIZE`), and they are used only when `layout.align()`
// is at most that; larger alignments use the aligned entry points. `mi_free` frees blocks
// from either, and `mi_realloc` keeps a block's alignment up to `MIN_ALIGN`.
unsafe impl GlobalAlloc for Malloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl's comment; `GlobalAlloc`'s contract gives a non-zero size.
        unsafe {
            if layout.align() <= MIN_ALIGN {
                ffi::mi_malloc(layout.size()) as *mut u8
            } else {
                ffi::mi_malloc_aligned(layout.size(), layout.align()) as *mut u8
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe {
            if layout.align() <= MIN_ALIGN {
                ffi::mi_zalloc(layout.size()) as *mut u8
            } else {
                ffi::mi_zalloc_aligned(layout.size(), layout.align()) as *mut u8
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator (the caller's contract), hence from mimalloc.
        unsafe { ffi::mi_free(ptr as *mut c_void) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout` (the caller's contract).
        unsafe {
            if layout.align() <= MIN_ALIGN {
                ffi::mi_realloc(ptr as *mut c_void, new_size) as *mut u8
            } else {
                ffi::mi_realloc_aligned(ptr as *mut c_void, new_size, layout.align()) as *mut u8
            }
        }
    }
}
