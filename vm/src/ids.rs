//! [`unique_id`]: process-unique ids without a shared atomic per call.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// The next block of ids not handed to any thread.
static NEXT_BLOCK: AtomicU64 = AtomicU64::new(1);

/// Ids a thread takes from [`NEXT_BLOCK`] at a time.
const BLOCK: u64 = 1024;

thread_local! {
    /// This thread's next id and the end of its block.
    static LOCAL: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// A process-unique, non-zero id: blobs and tensors take theirs from here.
///
/// Each thread takes ids from a block of its own, so an id costs no locked instruction (a
/// shared counter cost one per blob and one per tensor, on every small op); ids are unique but
/// not ordered across threads.
///
/// # Examples
///
/// ```
/// let (a, b) = (eddy_vm::unique_id(), eddy_vm::unique_id());
/// assert_ne!(a, b);
/// let c = std::thread::spawn(eddy_vm::unique_id).join().unwrap();
/// assert!(c != a && c != b);
/// ```
#[inline]
pub fn unique_id() -> u64 {
    LOCAL.with(|l| {
        let (next, end) = l.get();
        let next = if next < end {
            next
        } else {
            NEXT_BLOCK.fetch_add(BLOCK, Ordering::Relaxed)
        };
        l.set((next + 1, if next < end { end } else { next + BLOCK }));
        next
    })
}
