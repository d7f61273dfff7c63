//! The instruction-node pool: nodes are allocated on submitting threads and released on the
//! scheduler thread; freeing them there would make every instruction a cross-thread
//! `malloc`/`free` pair, which contends on the allocator's arena lock. Instead the scheduler
//! empties released nodes and splices them, once per pass, onto the engine's free list; a
//! submitting thread takes that whole list into a thread-local cache when its cache runs dry.
//! Nodes are plain memory, so one thread-local cache serves every engine.

use crate::instruction::{InstrAdapter, InstrList, Instruction};
use crate::shared::Shared;
use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering;

/// At most this many free nodes are kept in an engine's free list; beyond it the scheduler
/// frees them (bounding the memory a burst leaves behind).
pub(crate) const POOL_CAP: usize = 8192;

/// The scheduler hands released nodes over once this many have gathered (or when it lets go
/// of its work), not every pass.
pub(crate) const POOL_BATCH: usize = 64;

thread_local! {
    static CACHE: RefCell<InstrList> = const { RefCell::new(InstrList::new(InstrAdapter::NEW)) };
}

/// An empty node: from this thread's cache, refilled from the engine's lists, or new.
pub(crate) fn take_node(shared: &Shared) -> Box<Instruction> {
    CACHE
        .try_with(|c| {
            {
                let mut c = c.borrow_mut();
                if let Some(n) = c.pop_front() {
                    // The next node comes back from the scheduler's cache: ask for it now, so
                    // its lines arrive while this one is filled and submitted.
                    if let Some(next) = c.front().get() {
                        crate::prefetch::node_for_write(next);
                    }
                    return n;
                }
            }
            let mut got = InstrList::new(InstrAdapter::new());
            if !shared.deferred_nodes.is_empty() {
                let mut d = shared.deferred_nodes.take();
                shared.deferred_count.store(0, Ordering::Relaxed);
                // Outside the cache's borrow: a policy's drop may submit (a release), which
                // takes a node.
                drop_policies(&mut d, &mut got);
            }
            if !shared.free_nodes.is_empty() {
                got.back_mut().splice_after(shared.free_nodes.take());
                shared.free_count.store(0, Ordering::Relaxed);
            }
            let n = got.pop_front();
            // Appended: a drop above may have refilled the cache.
            c.borrow_mut().back_mut().splice_after(got);
            n.unwrap_or_else(Instruction::empty)
        })
        .unwrap_or_else(|_| Instruction::empty()) // thread-local already torn down
}

/// Drops the policies of the nodes of `list` (released nodes whose policy's drop was
/// deferred, see `InstructionPolicy::deferred_drop`) and moves the emptied nodes to `into`.
///
/// The walk goes from the back, so each node's prefetch hint (the node put on the list a few
/// before it, set by the scheduler) names one this walk reaches a few steps later: the lines,
/// last written by the scheduler, arrive while earlier nodes are emptied. A panicking drop is
/// logged; that node is freed, the others are kept.
pub(crate) fn drop_policies(list: &mut InstrList, into: &mut InstrList) {
    while !list.is_empty() {
        let r = catch_unwind(AssertUnwindSafe(|| {
            while let Some(mut n) = list.pop_back() {
                crate::prefetch::node_for_write(n.pending_hint as *const Instruction);
                n.policy = None;
                into.push_front(n);
            }
        }));
        if let Err(p) = r {
            tracing::error!(
                "an instruction's drop panicked: {}",
                crate::error::panic_message(&*p)
            );
        }
    }
}
