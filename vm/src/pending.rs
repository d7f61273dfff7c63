//! `PendingStack`: the lock-free hand-off from submitting threads to the scheduler.
//!
//! Protocol. Producers push a whole list with one compare-and-swap on `head` (a Treiber stack of
//! instructions linked through `Instruction::pending_next`, newest first). The single consumer
//! takes everything with one `swap(null)` and reverses the chain into submission order. Per
//! producer, order is kept: a producer's batches are pushed in order and each batch is linked
//! oldest-last. The push whose CAS replaced a null head made the stack non-empty and notifies
//! the consumer; every other push found it non-empty, so a notification is pending or a take
//! is coming (the same argument as for `HandOff`). There is no ABA hazard: the consumer never
//! pops a single node, it only swaps the whole stack out.
//!
//! Compared with a mutexed list this is one atomic read-modify-write per submission instead of
//! three on a line the polling scheduler keeps reading, which the `vm_chain` profile showed to
//! be the submitting thread's largest cost.

use crate::instruction::{InstrAdapter, InstrList, Instruction};
use crate::notifier::Notifier;
use crate::sync::AtomicPtr;
use std::cell::Cell;
use std::ptr;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

/// How many pushes back a node's prefetch hint points (see [`hint_for`]).
const HINT_DISTANCE: usize = 8;

thread_local! {
    /// The addresses of this thread's last [`HINT_DISTANCE`] pushed nodes, and the next index.
    static RECENT: ([Cell<usize>; HINT_DISTANCE], Cell<usize>) =
        const { ([const { Cell::new(0) }; HINT_DISTANCE], Cell::new(0)) };
}

/// The prefetch hint for `node`, about to be pushed by this thread: the address of the node
/// this thread pushed [`HINT_DISTANCE`] pushes before (0 at first).
///
/// The consumer walks the stack newest first, and each step waits for a line the submitter
/// has just written: a chain of misses, one after the other (the `vm_fanout` profile put 45 %
/// of the scheduler's time on that wait). With the hint, each step also asks for the node that
/// many steps further on, so the misses overlap. Nodes of one thread lie in that order on the
/// stack unless other threads push between them, and a stale hint is only a wasted prefetch:
/// the address is never dereferenced.
fn hint_for(node: &Instruction) -> usize {
    RECENT
        .try_with(|(ring, next)| {
            let i = next.get();
            next.set((i + 1) % HINT_DISTANCE);
            ring[i].replace(node as *const Instruction as usize)
        })
        .unwrap_or(0)
}

pub(crate) struct PendingStack {
    head: AtomicPtr<Instruction>,
    /// Wakes the scheduler (also used by workers and device wakers).
    pub(crate) notifier: Notifier,
}

// SAFETY: the stack owns the boxed instructions linked from `head` (each was a unique `Box`
// turned into a raw pointer by `push`); `Instruction` is `Send`, and every access to the chain
// goes through the atomic `head` (publish with Release, take with Acquire).
unsafe impl Send for PendingStack {}
// SAFETY: as above; `push` and `take` may run concurrently on different threads.
unsafe impl Sync for PendingStack {}

impl PendingStack {
    pub(crate) fn new() -> Self {
        PendingStack {
            head: AtomicPtr::new(ptr::null_mut()),
            notifier: Notifier::new(),
        }
    }

    /// Pushes `list` (in order) and wakes the scheduler if the stack was empty.
    pub(crate) fn push(&self, mut list: InstrList) {
        // Link the batch newest-first: `newest` -> ... -> `oldest` -> (the old head).
        let mut newest: *mut Instruction = ptr::null_mut();
        let mut oldest: *mut Instruction = ptr::null_mut();
        while let Some(mut node) = list.pop_front() {
            node.pending_hint = hint_for(&node);
            let p = Box::into_raw(node);
            // SAFETY: `p` comes from `Box::into_raw` just above: valid and not shared yet.
            unsafe { (*p).pending_next.store(newest, Relaxed) };
            if oldest.is_null() {
                oldest = p;
            }
            newest = p;
        }
        if newest.is_null() {
            return;
        }
        self.publish(newest, oldest);
    }

    /// Pushes one instruction (the `Vm::run` fast path: no list to unlink).
    pub(crate) fn push_one(&self, mut node: Box<Instruction>) {
        node.pending_hint = hint_for(&node);
        let p = Box::into_raw(node);
        self.publish(p, p);
    }

    /// Publishes the chain `newest -> ... -> oldest` (linked by `pending_next`, not yet visible
    /// to other threads) on top of the stack; wakes the scheduler if the stack was empty.
    fn publish(&self, newest: *mut Instruction, oldest: *mut Instruction) {
        let mut head = self.head.load(Relaxed);
        loop {
            // SAFETY: `oldest` belongs to a chain of boxes from `Box::into_raw` that no other
            // thread can see until the compare-and-swap below publishes it.
            unsafe { (*oldest).pending_next.store(head, Relaxed) };
            match self
                .head
                .compare_exchange_weak(head, newest, Release, Relaxed)
            {
                Ok(_) => break,
                Err(h) => head = h,
            }
        }
        if head.is_null() {
            self.notifier.notify();
        }
    }

    /// Takes everything pushed so far, in submission order.
    pub(crate) fn take(&self) -> InstrList {
        let mut list = InstrList::new(InstrAdapter::new());
        if self.head.load(Relaxed).is_null() {
            return list;
        }
        let mut p = self.head.swap(ptr::null_mut(), Acquire);
        while !p.is_null() {
            // The node's lines are in the submitter's cache: ask for both in exclusive state
            // (this loop and `ingest` write them), so the policy's line arrives while the
            // link is read, and neither needs a second trip to be written.
            crate::prefetch::node_for_write(p);
            // SAFETY: as below: `p` is a node of the chain this thread now owns.
            crate::prefetch::node_for_write(unsafe { (*p).pending_hint } as *const Instruction);
            // SAFETY: every pointer in the chain came from `Box::into_raw` in `push` and was
            // published by a Release CAS that our Acquire swap synchronises with; the swap made
            // this thread the chain's only owner, so each node is turned back into a `Box` once.
            let node = unsafe { Box::from_raw(p) };
            // A plain load and store, not a swap: the node is this thread's alone now, so a
            // locked exchange per instruction would buy nothing.
            p = node.pending_next.load(Relaxed);
            node.pending_next.store(ptr::null_mut(), Relaxed);
            list.push_front(node); // newest-first chain → oldest-first list
        }
        list
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.head.load(Acquire).is_null()
    }
}

impl Drop for PendingStack {
    fn drop(&mut self) {
        drop(self.take());
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::instruction::model_batch as batch;
    use loom::sync::Arc;
    use loom::thread;

    /// Two producers and a sleeping consumer: everything arrives exactly once, each producer's
    /// order is kept, and the consumer is never left asleep with work queued.
    #[test]
    fn pending_stack_delivers_everything_once_in_order() {
        loom::model(|| {
            let q = Arc::new(PendingStack::new());
            let p1 = {
                let q = q.clone();
                thread::spawn(move || q.push(batch(&[1, 2])))
            };
            let p2 = {
                let q = q.clone();
                thread::spawn(move || {
                    q.push(batch(&[3]));
                    q.push(batch(&[4]));
                })
            };
            let mut seen = vec![];
            while seen.len() < 4 {
                let mut l = q.take();
                if l.is_empty() {
                    q.notifier.wait(None);
                    continue;
                }
                while let Some(i) = l.pop_front() {
                    seen.push(i.id);
                }
            }
            p1.join().unwrap();
            p2.join().unwrap();
            let pos = |x| seen.iter().position(|&v| v == x).unwrap();
            assert!(
                pos(1) < pos(2) && pos(3) < pos(4),
                "per-producer order: {seen:?}"
            );
            let mut s = seen.clone();
            s.sort();
            assert_eq!(s, vec![1, 2, 3, 4]);
        });
    }
}
