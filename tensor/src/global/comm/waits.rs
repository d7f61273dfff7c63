//! Waiting for MPI's non-blocking calls until a deadline, so that a process stuck in its own
//! work (or stopped) makes the others fail instead of waiting for ever.

use mpi::request::{Request, StaticScope};
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, CommunicatorCollectives, Equivalence};
use std::time::{Duration, Instant};

/// How long [`wait`] polls, yielding the core between polls, before it sleeps between them:
/// MPI moves a non-blocking collective on only while it is polled, so a large one (64 MiB
/// takes tens of milliseconds here) slowed by a third when each poll slept.
const POLL_BUSY: Duration = Duration::from_secs(1);

/// Waits for `req` until `deadline`: spinning briefly, then yielding between polls for
/// [`POLL_BUSY`], then sleeping between them (a process waiting on a stuck one leaves the core
/// to others). `false` if it is still pending then: it is forgotten, and MPI may still use its
/// buffers.
pub(super) fn wait<R: ?Sized>(
    mut req: Request<'static, R, StaticScope>,
    deadline: Instant,
) -> bool {
    let mut polls = 0u32;
    // Read once the spinning is over: a clock read costs about what a poll does.
    let mut busy_until = None;
    loop {
        match req.test() {
            Ok(_) => return true,
            Err(r) => req = r,
        }
        polls = polls.wrapping_add(1);
        if polls < 2000 && !polls.is_multiple_of(64) {
            std::hint::spin_loop();
            continue;
        }
        let now = Instant::now();
        if now >= deadline {
            // SAFETY: the request is taken apart so that its drop does not abort the process;
            // its buffers were leaked by the caller and stay valid for MPI for ever.
            let _ = unsafe { req.into_raw() };
            return false;
        }
        if polls < 2000 {
            continue;
        }
        if now < *busy_until.get_or_insert(now + POLL_BUSY) {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

/// A non-blocking collective started by `start` from `send` into a buffer of `n` elements,
/// waited for until `deadline`; the received elements, or `None` on timeout.
pub(super) fn timed<T: Equivalence + Default + Clone + 'static>(
    send: Vec<T>,
    n: usize,
    deadline: Instant,
    start: impl FnOnce(&'static [T], &'static mut [T]) -> Request<'static, [T], StaticScope>,
) -> Option<Vec<T>> {
    let send: *mut [T] = Box::into_raw(send.into_boxed_slice());
    let recv: *mut [T] = Box::into_raw(vec![T::default(); n].into_boxed_slice());
    // SAFETY: both buffers were just leaked from boxes: nothing else refers to them until
    // the request completes, and a request that does not complete keeps them for ever.
    let done = wait(unsafe { start(&*send, &mut *recv) }, deadline);
    if !done {
        return None;
    }
    // SAFETY: the request completed, so MPI holds neither buffer; each is the box it came
    // from, reclaimed once.
    let (send, recv) = unsafe { (Box::from_raw(send), Box::from_raw(recv)) };
    drop(send);
    Some(recv.into_vec())
}

/// The tag of the fingerprints' messages.
const FINGERPRINT_TAG: i32 = 0x4544;

/// Every process's `send` (at most `slot` bytes), each in a slot of `slot` bytes (zeros after
/// what it sent), in process order: sent to and received from each other process by
/// non-blocking point-to-point messages, waited for until `deadline`; `None` on timeout (the
/// buffers then stay MPI's for ever). For the few hundred bytes of a fingerprint, MPI's
/// non-blocking all-gather spent more on its schedule than on its messages: between two
/// processes over shared memory the messages alone take about half its time.
pub(super) fn timed_gather_small(
    w: &SimpleCommunicator,
    send: Vec<u8>,
    slot: usize,
    deadline: Instant,
) -> Option<Vec<u8>> {
    use mpi::point_to_point::{Destination, Source};
    debug_assert!(
        send.len() <= slot,
        "{} bytes in slots of {slot}",
        send.len()
    );
    let (size, rank) = (w.size() as usize, w.rank() as usize);
    let mut all = vec![0u8; slot * size];
    all[rank * slot..][..send.len()].copy_from_slice(&send);
    let send: *mut [u8] = Box::into_raw(send.into_boxed_slice());
    let recv: *mut [u8] = Box::into_raw(all.into_boxed_slice());
    let mut reqs: smallvec::SmallVec<[_; 4]> = smallvec::SmallVec::with_capacity(2 * (size - 1));
    // SAFETY: both buffers were just leaked from boxes: nothing else refers to them until
    // every request completes, and requests that do not complete keep them for ever. The
    // receives write disjoint chunks of `recv`, none of them this process's, which no send
    // reads.
    let (sent, chunks) = unsafe { (&*send, (*recv).chunks_mut(slot)) };
    for (q, chunk) in chunks.enumerate().filter(|(q, _)| *q != rank) {
        let from = w.process_at_rank(q as i32);
        reqs.push(from.immediate_receive_into_with_tag(StaticScope, chunk, FINGERPRINT_TAG));
    }
    for q in (0..size).filter(|&q| q != rank) {
        let to = w.process_at_rank(q as i32);
        reqs.push(to.immediate_send_with_tag(StaticScope, sent, FINGERPRINT_TAG));
    }
    let mut reqs = reqs.into_iter();
    while let Some(r) = reqs.next() {
        if !wait(r, deadline) {
            for r in reqs {
                // SAFETY: as in `wait`: the buffers stay valid for MPI for ever.
                let _ = unsafe { r.into_raw() };
            }
            return None;
        }
    }
    // SAFETY: every request completed, so MPI holds neither buffer; each is the box it came
    // from, reclaimed once.
    let (send, recv) = unsafe { (Box::from_raw(send), Box::from_raw(recv)) };
    drop(send);
    Some(recv.into_vec())
}

/// A non-blocking all-gather of `send` (process `q` sends `counts[q]` bytes) waited for until
/// `deadline`; every process's bytes in process order, or `None` on timeout.
pub(super) fn timed_varcount(
    w: &SimpleCommunicator,
    send: Vec<u8>,
    counts: &[usize],
    deadline: Instant,
) -> Option<Vec<u8>> {
    use mpi::datatype::PartitionMut;
    let counts: Vec<i32> = counts.iter().map(|&c| c as i32).collect();
    let displs: Vec<i32> = (counts.iter())
        .scan(0i32, |at, &c| {
            let d = *at;
            *at += c;
            Some(d)
        })
        .collect();
    let total: usize = counts.iter().map(|&c| c as usize).sum();
    type Part = PartitionMut<'static, [u8], Vec<i32>, Vec<i32>>;
    let send: *mut [u8] = Box::into_raw(send.into_boxed_slice());
    let recv: *mut [u8] = Box::into_raw(vec![0u8; total].into_boxed_slice());
    // SAFETY: `recv` was just leaked from a box; the partition is its only user until the
    // request completes, and a request that does not complete keeps both for ever.
    let part: *mut Part = Box::into_raw(Box::new(PartitionMut::new(
        unsafe { &mut *recv },
        counts,
        displs,
    )));
    // SAFETY: `send` and the partition were leaked from boxes: nothing else refers to them
    // until the request completes.
    let req =
        w.immediate_all_gather_varcount_into(StaticScope, unsafe { &*send }, unsafe { &mut *part });
    if !wait(req, deadline) {
        return None;
    }
    // SAFETY: the request completed, so MPI holds none of the three; each is the box it came
    // from, reclaimed once (the partition, which borrows `recv`, first).
    unsafe {
        drop(Box::from_raw(part));
        drop(Box::from_raw(send));
        Some(Box::from_raw(recv).into_vec())
    }
}
