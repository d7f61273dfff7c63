//! A fork-join pool for kernels: the calling thread and the pool's helper threads share one
//! job's chunks.
//!
//! Why not rayon: a kernel runs on the scheduler thread (or a worker), which is not a rayon
//! thread, so every parallel loop was injected into rayon's pool and the caller blocked until
//! two pool threads, usually asleep, woke, ran it and woke the caller again. On this 2-core
//! machine that cost 15–20 µs per loop: a ReLU over 65,536 floats took 20–25 µs in parallel
//! against 5 µs on one core. Here the caller works on the job itself, from its first chunk,
//! and the helpers spin briefly after each job, so back-to-back kernels find them awake: the
//! same ReLU takes 3–5 µs, and a 401,408-float one 25–28 µs against 42–50 µs through rayon
//! (`par_handoff` experiment, alternated runs).
//!
//! Protocol. A job lives on the caller's stack: the chunk function, the range of chunks nobody
//! has claimed (`lo..hi`, in one atomic word), and `remaining`, the number of helpers it was
//! offered to that have not let go of it. The caller offers the job by a compare-and-swap of
//! each idle helper's `slot` from null to the job (counting it in `remaining` first), wakes the
//! helpers that sleep, and claims chunks itself until none is left: the caller from the front
//! (`lo`), the helpers from the back (`hi - 1`). So a job cut finer than one chunk per thread
//! balances itself, and the caller and a single helper meet where their speeds put them; and a
//! kernel run again on the same data gives each thread about the same part as last time, still
//! in its core's cache (on a 2 MiB L2 a batch-1 forward's weights stay there between calls).
//! Then it withdraws the offer from each helper (a compare-and-swap back to null): a withdrawn
//! offer was never seen, so it un-counts it; an offer a helper took (its own compare-and-swap
//! to null) is un-counted by that helper once it has stopped claiming chunks, which is its
//! last touch of the job. The caller returns only when
//! `remaining` is zero, so no helper outlives the job's borrow.
//!
//! A helper spins on its slot for [`SPIN`] after its last job, then announces `sleeping`
//! (SeqCst), re-checks its slot (SeqCst), and parks; a caller stores the offer (SeqCst) and then
//! reads `sleeping` (SeqCst) to decide whether to unpark. One of the two sees the other's
//! write, so no offer is left asleep; park's token covers an unpark that comes before the park.
//! (A lost wake-up would cost speed, not correctness: the caller runs every chunk nobody took.
//! The loom model below checks the part correctness rests on: the caller never returns while a
//! helper still runs one of the job's chunks.)
//!
//! A helper that finds itself on the CPU its caller ran on when it offered the job lets go of
//! the job without running a chunk, moves to another CPU its affinity allows (then gives the
//! affinity back) and spins there. Linux wakes a sleeping helper onto its last CPU, or onto the
//! waker's, and, once the CPUs are busy, stops looking for an idle one; so a helper that once
//! shared the caller's CPU kept sharing it, each job preempting the caller and the spin after
//! it taking the caller's time, and a batch-1 forward took three to four times as long in the
//! processes that fell into that state. A helper with nowhere to go parks at once instead of
//! spinning.
//!
//! A job started while another holds the helpers (two engines' schedulers), or from inside a
//! chunk, runs its chunks on the calling thread alone. A panic in a chunk stops further claims
//! and is re-raised on the caller after every helper has let go.

use crate::cpu;
use crate::sync::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize};
use crossbeam_utils::CachePadded;
use std::any::Any;
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::ptr;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

#[cfg(loom)]
use loom::thread;
#[cfg(shuttle)]
use shuttle::thread;
#[cfg(not(any(loom, shuttle)))]
use std::thread;

/// How long a helper spins for the next job before it parks. Kernels of one training step
/// follow each other within microseconds; an idle engine stops burning CPU this soon after its
/// last parallel kernel.
pub const SPIN: Duration = Duration::from_micros(50);

/// Chunk function of one job, with its lifetime erased for the helper's slot.
type ChunkFn = dyn Fn(usize) + Sync;

struct Job {
    f: *const ChunkFn,
    /// The chunks nobody has claimed, `lo..hi`, as `hi << 32 | lo`.
    unclaimed: AtomicU64,
    remaining: AtomicUsize,
    panic: parking_lot::Mutex<Option<Box<dyn Any + Send>>>,
    /// The CPU the caller ran on when it offered the job, where known.
    caller_cpu: Option<u32>,
}

/// Which end of a job's unclaimed chunks a thread takes from.
#[derive(Clone, Copy)]
enum End {
    /// The caller: `0, 1, 2, ..`.
    Front,
    /// The helpers: `n - 1, n - 2, ..`.
    Back,
}

impl Job {
    /// Takes the next unclaimed chunk from `end`, or `None` when every chunk is taken.
    fn claim(&self, end: End) -> Option<usize> {
        let mut cur = self.unclaimed.load(Relaxed);
        loop {
            let (lo, hi) = (cur & u64::from(u32::MAX), cur >> 32);
            if lo >= hi {
                return None;
            }
            let (next, i) = match end {
                End::Front => (cur + 1, lo),
                End::Back => (cur - (1 << 32), hi - 1),
            };
            match self
                .unclaimed
                .compare_exchange_weak(cur, next, Relaxed, Relaxed)
            {
                Ok(_) => return Some(i as usize),
                Err(c) => cur = c,
            }
        }
    }

    /// Claims chunks from `end` and runs them until none is left (or one panicked).
    fn work(&self, end: End) {
        // SAFETY: `f` points to the caller's closure, which outlives the job: the caller waits
        // for `remaining` to reach zero, and a helper calls `work` only before its un-count.
        let f = unsafe { &*self.f };
        IN_JOB.with(|c| c.set(true));
        while let Some(i) = self.claim(end) {
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| f(i))) {
                self.unclaimed.store(0, Relaxed); // nothing left to claim
                self.panic.lock().get_or_insert(p);
                break;
            }
        }
        IN_JOB.with(|c| c.set(false));
    }
}

std::thread_local! {
    /// Whether this thread is running a job's chunk: a job started inside one runs serially.
    static IN_JOB: Cell<bool> = const { Cell::new(false) };
}

struct Helper {
    slot: AtomicPtr<Job>,
    sleeping: AtomicBool,
    thread: OnceLock<thread::Thread>,
}

struct Shared {
    helpers: Vec<CachePadded<Helper>>,
    shutdown: AtomicBool,
}

/// A fork-join pool: `threads - 1` helper threads that join the calling thread's jobs.
///
/// Kernels use the process-wide one through [`for_each`] and [`for_each_chunk_mut`].
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// let pool = eddy_vm::par::Pool::new(2);
/// let sum = AtomicUsize::new(0);
/// pool.for_each(100, |i| {
///     sum.fetch_add(i, Ordering::Relaxed);
/// });
/// assert_eq!(sum.into_inner(), 4950);
/// ```
pub struct Pool {
    shared: Arc<Shared>,
    joins: Vec<thread::JoinHandle<()>>,
}

/// The most threads a pool runs: a larger request (`usize::MAX` from a typo) is cut to it
/// rather than failing to spawn helpers.
///
/// ```
/// assert!(eddy_vm::par::MAX_THREADS >= 256);
/// ```
pub const MAX_THREADS: usize = 1024;

impl Pool {
    /// A pool whose jobs run on the caller plus `threads - 1` helper threads, `threads` taken
    /// into `1..=`[`MAX_THREADS`].
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::par::Pool;
    /// assert_eq!(Pool::new(3).threads(), 3);
    /// assert_eq!(Pool::new(0).threads(), 1, "the caller alone");
    /// ```
    pub fn new(threads: usize) -> Pool {
        let shared = Arc::new(Shared {
            helpers: (1..threads.clamp(1, MAX_THREADS))
                .map(|_| {
                    CachePadded::new(Helper {
                        slot: AtomicPtr::new(ptr::null_mut()),
                        sleeping: AtomicBool::new(false),
                        thread: OnceLock::new(),
                    })
                })
                .collect(),
            shutdown: AtomicBool::new(false),
        });
        let joins = (0..shared.helpers.len())
            .map(|k| {
                let sh = shared.clone();
                let run = move || helper_loop(&sh, k);
                #[cfg(not(loom))]
                let h = thread::Builder::new()
                    .name(format!("eddy-par-{}", k + 1))
                    .spawn(run)
                    .expect("spawn a kernel helper thread");
                #[cfg(loom)]
                let h = thread::spawn(run);
                let _ = shared.helpers[k].thread.set(h.thread().clone());
                h
            })
            .collect();
        Pool { shared, joins }
    }

    /// How many threads a job may use: the caller and the helpers.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = eddy_vm::par::Pool::new(2);
    /// assert_eq!(pool.threads(), 2);
    /// ```
    pub fn threads(&self) -> usize {
        self.shared.helpers.len() + 1
    }

    /// Runs `f(i)` once for every `i` in `0..n`, on the calling thread and the idle helpers,
    /// and returns when all have run. A panic in `f` is re-raised here after the others stop.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// let pool = eddy_vm::par::Pool::new(2);
    /// let hits: Vec<AtomicU32> = (0..10).map(|_| AtomicU32::new(0)).collect();
    /// pool.for_each(10, |i| {
    ///     hits[i].fetch_add(1, Ordering::Relaxed);
    /// });
    /// assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
    /// ```
    pub fn for_each(&self, n: usize, f: impl Fn(usize) + Sync) {
        // (More than 2^32 chunks do not fit the claim word; they run here, one by one.)
        if n <= 1
            || n > u32::MAX as usize
            || self.shared.helpers.is_empty()
            || IN_JOB.with(|c| c.get())
        {
            (0..n).for_each(f);
            return;
        }
        let f: &(dyn Fn(usize) + Sync + '_) = &f;
        let job = Job {
            // SAFETY: erases the borrow's lifetime for the slot (same fat-pointer layout);
            // `for_each` does not return before every helper has let go of the job (see the
            // module's protocol).
            f: unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync + '_), *const ChunkFn>(f) },
            unclaimed: AtomicU64::new((n as u64) << 32),
            remaining: AtomicUsize::new(0),
            panic: parking_lot::Mutex::new(None),
            caller_cpu: cpu::current(),
        };
        let jp = &job as *const Job as *mut Job;
        let helpers = &self.shared.helpers[..(n - 1).min(self.shared.helpers.len())];
        let mut offered = 0u64; // bit k: the offer to helper k stands
        for (k, h) in helpers.iter().enumerate().take(64) {
            job.remaining.fetch_add(1, Relaxed);
            if h.slot
                .compare_exchange(ptr::null_mut(), jp, SeqCst, Relaxed)
                .is_ok()
            {
                offered |= 1 << k;
                if h.sleeping.load(SeqCst)
                    && let Some(t) = h.thread.get()
                {
                    t.unpark();
                }
            } else {
                job.remaining.fetch_sub(1, Relaxed); // busy with another caller's job
            }
        }
        job.work(End::Front);
        for (k, h) in helpers.iter().enumerate().take(64) {
            if offered & (1 << k) != 0
                && h.slot
                    .compare_exchange(jp, ptr::null_mut(), AcqRel, Relaxed)
                    .is_ok()
            {
                job.remaining.fetch_sub(1, Relaxed); // never taken
            }
        }
        let mut spins = 0u32;
        while job.remaining.load(Acquire) != 0 {
            // A helper holding the job is finishing its last chunk; it may be descheduled.
            spins += 1;
            if spins < 256 {
                std::hint::spin_loop();
            } else {
                thread::yield_now();
            }
        }
        let panicked = job.panic.lock().take();
        if let Some(p) = panicked {
            resume_unwind(p);
        }
    }

    /// Splits `out` into chunks of `chunk` elements (the last may be shorter) and runs
    /// `f(start, chunk)` for each, as [`for_each`](Self::for_each); `start` is the chunk's index
    /// in `out`.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = eddy_vm::par::Pool::new(2);
    /// let mut v = vec![0usize; 7];
    /// pool.for_each_chunk_mut(&mut v, 3, |start, chunk| chunk.fill(start));
    /// assert_eq!(v, [0, 0, 0, 3, 3, 3, 6]);
    /// ```
    pub fn for_each_chunk_mut<T: Send>(
        &self,
        out: &mut [T],
        chunk: usize,
        f: impl Fn(usize, &mut [T]) + Sync,
    ) {
        let len = out.len();
        let chunk = chunk.max(1);
        let base = SendPtr(out.as_mut_ptr());
        self.for_each(len.div_ceil(chunk), |i| {
            let start = i * chunk;
            let n = chunk.min(len - start);
            // SAFETY: `for_each` runs each `i` once, so the chunks `start..start + n` are
            // disjoint parts of `out`, which stays mutably borrowed until it returns.
            let c = unsafe { std::slice::from_raw_parts_mut(base.get().add(start), n) };
            f(start, c)
        });
    }
}

/// A raw pointer that may cross to a helper (the chunk discipline makes the accesses disjoint).
struct SendPtr<T>(*mut T);
impl<T> Clone for SendPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SendPtr<T> {}
// SAFETY: only used by `for_each_chunk_mut`, whose chunks never overlap.
unsafe impl<T: Send> Send for SendPtr<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for SendPtr<T> {}
impl<T> SendPtr<T> {
    fn get(self) -> *mut T {
        self.0
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, SeqCst);
        for h in &self.shared.helpers {
            if let Some(t) = h.thread.get() {
                t.unpark();
            }
        }
        for j in self.joins.drain(..) {
            let _ = j.join();
        }
    }
}

fn helper_loop(sh: &Shared, k: usize) {
    let h = &sh.helpers[k];
    // Whether to spin for the next job before sleeping: not on a CPU this helper could not
    // leave, where the spin would take the time of the thread that offers the next job.
    let mut spin = true;
    loop {
        // Spin for the next job, then sleep.
        let t0 = Instant::now();
        let mut spins = 0u32;
        let job = loop {
            let p = h.slot.load(Acquire);
            if !p.is_null()
                && h.slot
                    .compare_exchange(p, ptr::null_mut(), Acquire, Relaxed)
                    .is_ok()
            {
                break Some(p);
            }
            if sh.shutdown.load(Relaxed) {
                return;
            }
            spins += 1;
            // Under a model checker, park at once: time is not modelled.
            if cfg!(any(loom, shuttle))
                || !spin
                || (spins.is_multiple_of(64) && t0.elapsed() > SPIN)
            {
                break None;
            }
            std::hint::spin_loop();
        };
        let p = match job {
            Some(p) => p,
            None => {
                h.sleeping.store(true, SeqCst);
                if h.slot.load(SeqCst).is_null() && !sh.shutdown.load(SeqCst) {
                    thread::park();
                }
                h.sleeping.store(false, Relaxed);
                continue;
            }
        };
        // SAFETY: the caller keeps the job alive until `remaining` reaches zero, and this
        // helper's un-count below is its last access.
        let job = unsafe { &*p };
        let offered_from = job.caller_cpu;
        if offered_from.is_some() && offered_from == cpu::current() {
            // Woken onto the caller's CPU: here it could only take turns with the caller. It
            // lets go of the job untouched (the caller runs every chunk) and moves.
            job.remaining.fetch_sub(1, Release);
            spin = offered_from.is_some_and(cpu::leave);
            continue;
        }
        spin = true;
        job.work(End::Back);
        job.remaining.fetch_sub(1, Release);
    }
}

static POOL: OnceLock<Pool> = OnceLock::new();

/// The process-wide pool, started on first use with [`set_threads`]'s count, else
/// `EDDY_THREADS`, else the machine's available parallelism.
///
/// # Examples
///
/// ```
/// let pool = eddy_vm::par::global();
/// assert_eq!(pool.threads(), eddy_vm::par::threads());
/// assert!(std::ptr::eq(pool, eddy_vm::par::global()), "one pool per process");
/// ```
pub fn global() -> &'static Pool {
    POOL.get_or_init(|| Pool::new(default_threads()))
}

fn default_threads() -> usize {
    std::env::var("EDDY_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(thread_count_of_machine)
}

#[cfg(not(any(loom, shuttle)))]
fn thread_count_of_machine() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
#[cfg(any(loom, shuttle))]
fn thread_count_of_machine() -> usize {
    2
}

/// Sizes the process-wide pool to `threads` (the caller plus `threads - 1` helpers). Returns
/// whether it took effect: false once the pool has started.
///
/// # Examples
///
/// ```
/// eddy_vm::par::set_threads(2);
/// assert!(eddy_vm::par::threads() >= 1);
/// ```
pub fn set_threads(threads: usize) -> bool {
    let mut fresh = false;
    POOL.get_or_init(|| {
        fresh = true;
        Pool::new(threads)
    });
    fresh
}

/// The process-wide pool's thread count.
///
/// ```
/// assert!(eddy_vm::par::threads() >= 1);
/// ```
pub fn threads() -> usize {
    global().threads()
}

/// [`Pool::for_each`] on the process-wide pool.
///
/// ```
/// let v: Vec<std::sync::atomic::AtomicU32> = (0..8).map(|_| Default::default()).collect();
/// eddy_vm::par::for_each(8, |i| { v[i].store(i as u32, std::sync::atomic::Ordering::Relaxed); });
/// assert_eq!(v[7].load(std::sync::atomic::Ordering::Relaxed), 7);
/// ```
pub fn for_each(n: usize, f: impl Fn(usize) + Sync) {
    global().for_each(n, f)
}

/// [`Pool::for_each_chunk_mut`] on the process-wide pool.
///
/// ```
/// let mut v = vec![0usize; 10];
/// eddy_vm::par::for_each_chunk_mut(&mut v, 3, |start, c| {
///     for (k, x) in c.iter_mut().enumerate() { *x = start + k; }
/// });
/// assert_eq!(v, (0..10).collect::<Vec<_>>());
/// ```
pub fn for_each_chunk_mut<T: Send>(
    out: &mut [T],
    chunk: usize,
    f: impl Fn(usize, &mut [T]) + Sync,
) {
    global().for_each_chunk_mut(out, chunk, f)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn every_chunk_runs_exactly_once() {
        let pool = Pool::new(3);
        for n in [0, 1, 2, 3, 7, 64, 1000] {
            for _ in 0..50 {
                let hits: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
                pool.for_each(n, |i| {
                    hits[i].fetch_add(1, Relaxed);
                });
                assert!(hits.iter().all(|h| h.load(Relaxed) == 1), "n = {n}");
            }
        }
    }

    #[test]
    fn chunks_cover_the_slice() {
        let pool = Pool::new(2);
        let mut v = vec![0u32; 1001];
        pool.for_each_chunk_mut(&mut v, 64, |start, c| {
            for (k, x) in c.iter_mut().enumerate() {
                *x += (start + k) as u32;
            }
        });
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u32));
    }

    #[test]
    fn a_panic_reaches_the_caller_and_the_pool_keeps_working() {
        let pool = Pool::new(2);
        let r = catch_unwind(AssertUnwindSafe(|| {
            pool.for_each(16, |i| {
                if i == 5 {
                    panic!("chunk 5");
                }
            })
        }));
        let msg = r.expect_err("the panic propagates");
        assert_eq!(msg.downcast_ref::<&str>(), Some(&"chunk 5"));
        let hits = AtomicU64::new(0);
        pool.for_each(16, |_| {
            hits.fetch_add(1, Relaxed);
        });
        assert_eq!(hits.into_inner(), 16);
    }

    #[test]
    fn nested_and_concurrent_jobs_complete() {
        let pool = Arc::new(Pool::new(2));
        let total = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let (pool, total) = (pool.clone(), total.clone());
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        pool.for_each(4, |_| {
                            pool.for_each(3, |_| {
                                total.fetch_add(1, Relaxed);
                            })
                        });
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(total.load(Relaxed), 3 * 200 * 4 * 3);
    }

    #[test]
    fn the_caller_claims_from_the_front_and_the_helper_from_the_back() {
        let pool = Pool::new(2);
        let caller = std::thread::current().id();
        for _ in 0..200 {
            let by_caller: Vec<AtomicU64> = (0..64).map(|_| AtomicU64::new(0)).collect();
            pool.for_each(64, |i| {
                if std::thread::current().id() == caller {
                    by_caller[i].store(1, Relaxed);
                }
                std::hint::black_box((0..200).sum::<u64>());
            });
            let mine: Vec<u64> = by_caller.iter().map(|b| b.load(Relaxed)).collect();
            let first = mine.iter().take_while(|&&b| b == 1).count();
            assert!(
                mine[first..].iter().all(|&b| b == 0),
                "the caller's chunks are not a prefix: {mine:?}"
            );
        }
    }

    #[test]
    fn helpers_wake_after_sleeping() {
        let pool = Pool::new(2);
        for _ in 0..3 {
            std::thread::sleep(SPIN * 4); // the helper parks
            let hits = AtomicU64::new(0);
            pool.for_each(8, |_| {
                hits.fetch_add(1, Relaxed);
            });
            assert_eq!(hits.into_inner(), 8);
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;

    /// A job offered to a helper that may be spinning, parking or asleep, the caller and the
    /// helper claiming from either end of its three chunks: every chunk runs once, and the
    /// caller returns only after no chunk is running any more (so no helper outlives the
    /// job's borrow); nothing is left asleep (the pool's drop joins the helper).
    #[test]
    fn par_job_runs_each_chunk_once_and_the_helper_lets_go() {
        use loom::sync::atomic::AtomicUsize;
        loom::model(|| {
            let pool = Pool::new(2);
            let hits = [
                AtomicUsize::new(0),
                AtomicUsize::new(0),
                AtomicUsize::new(0),
            ];
            let inside = AtomicUsize::new(0);
            pool.for_each(3, |i| {
                inside.fetch_add(1, Relaxed);
                hits[i].fetch_add(1, Relaxed);
                inside.fetch_sub(1, Release);
            });
            assert_eq!(inside.load(Acquire), 0, "a chunk still runs after for_each");
            assert_eq!(hits[0].load(Relaxed), 1);
            assert_eq!(hits[1].load(Relaxed), 1);
            assert_eq!(hits[2].load(Relaxed), 1);
            drop(pool);
        });
    }
}
