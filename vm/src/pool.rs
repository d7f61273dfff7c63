//! The instruction-node pool: nodes are allocated on submitting threads and released on the
//! scheduler thread; freeing them there would make every instruction a cross-thread
//! `malloc`/`free` pair, which contends on the allocator's arena lock. Instead the scheduler
//! empties released nodes and splices them, once per pass, onto the engine's free list; a
//! submitting thread takes that whole list into a thread-local cache when its cache runs dry.
//! Nodes are plain memory, so one thread-local cache serves every engine.

use crate::engine::Shared;
use crate::instruction::{InstrAdapter, InstrList, Instruction};
use std::cell::RefCell;
use std::sync::atomic::Ordering;

/// At most this many free nodes are kept in an engine's free list; beyond it the scheduler
/// frees them (bounding the memory a burst leaves behind).
pub(crate) const POOL_CAP: usize = 8192;

thread_local! {
    static CACHE: RefCell<InstrList> = const { RefCell::new(InstrList::new(InstrAdapter::NEW)) };
}

/// An empty node: from this thread's cache, refilled from the engine's free list, or new.
pub(crate) fn take_node(shared: &Shared) -> Box<Instruction> {
    CACHE
        .try_with(|c| {
            let mut c = c.borrow_mut();
            if let Some(n) = c.pop_front() {
                // The next node comes back from the scheduler's cache: ask for it now, so its
                // lines arrive while this one is filled and submitted.
                if let Some(next) = c.front().get() {
                    crate::prefetch::node_for_write(next);
                }
                return n;
            }
            if !shared.free_nodes.is_empty() {
                let mut got = shared.free_nodes.take();
                shared.free_count.store(0, Ordering::Relaxed);
                let n = got.pop_front();
                *c = got;
                if let Some(n) = n {
                    return n;
                }
            }
            Instruction::empty()
        })
        .unwrap_or_else(|_| Instruction::empty()) // thread-local already torn down
}
