//! The communication thread (feature `mpi`): one per process, started on first use. It
//! initialises MPI and runs the MPI calls handed to it, in the order they reach it; a process
//! that started it finalises MPI as it exits. Where MPI grants `MPI_THREAD_MULTIPLE`, a thread
//! that waits for a collective runs it itself instead, while the communication thread has
//! nothing queued: one thread at a time calls MPI, in the order of the engine's transport
//! dependence.
//!
//! Every collective starts with a digest of each process's *fingerprint* of it (sequence
//! number, collective, dtype, shape, layout, call site), sent to every other process and
//! compared; where they differ, the fingerprints themselves follow, so a program that
//! branches on the rank around a collective fails on every process at once, naming both call
//! sites. Then the collective itself runs, unless its values were small enough to ride with
//! the digests ([`CARRY`]). All are non-blocking MPI calls that
//! the thread polls until the world's timeout, so a process stuck in its own work (or
//! stopped) makes the others fail with their flight record instead of waiting for ever.

mod fingerprint;
mod waits;

use super::ReduceKind;
use crate::{Caller, DType, Error, Result, Tensor};
use eddy_vm::lane::Lane;
pub(super) use fingerprint::Call;
use fingerprint::{FP, fields, site};
use mpi::collective::SystemOperation;
use mpi::request::StaticScope;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, CommunicatorCollectives, Equivalence};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use waits::{timed, timed_gather_small, timed_varcount, wait};

/// What the thread runs: a closure over the world communicator.
type Job = Box<dyn FnOnce(&SimpleCommunicator) + Send>;

struct Comm {
    /// This process's rank and the number of processes.
    world: (usize, usize),
    /// `None` once the thread was told to stop (at exit).
    jobs: Mutex<Option<Sender<Job>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

static COMM: OnceLock<std::result::Result<Comm, &'static str>> = OnceLock::new();

/// The lane to MPI: the communication thread runs the jobs handed to it, and a thread that
/// waits for a collective runs it itself while nothing is queued, where MPI granted
/// `MPI_THREAD_MULTIPLE` (the lane is opened then, and closed before MPI is finalised). One
/// thread at a time calls MPI, and no call overtakes one queued before it, so every process
/// issues its collectives in one order.
static LANE: OnceLock<Lane> = OnceLock::new();

/// The lane to MPI.
fn lane() -> &'static Lane {
    LANE.get_or_init(Lane::new)
}

/// The collectives' timeout in milliseconds (`EDDY_COLLECTIVE_TIMEOUT_S`, or
/// `set_timeout`; 0 until either is read).
static TIMEOUT_MS: AtomicU64 = AtomicU64::new(0);

/// A collective timed out: its requests may still be pending, so the world takes no other,
/// and the process aborts the job at exit rather than finalise MPI (which would wait on them).
static BROKEN: AtomicBool = AtomicBool::new(false);

/// The last collectives of this process, oldest first.
static FLIGHT: Mutex<VecDeque<Flight>> = Mutex::new(VecDeque::new());

/// How many collectives the flight record keeps.
const FLIGHT_LEN: usize = 16;

/// One collective in the flight record.
struct Flight {
    seq: u64,
    op: &'static str,
    bytes: usize,
    state: &'static str,
    at: Caller,
}

/// The thread, started on first use.
#[track_caller]
fn comm() -> Result<&'static Comm> {
    match COMM.get_or_init(start) {
        Ok(c) => Ok(c),
        Err(e) => Err(unavailable(e)),
    }
}

fn start() -> std::result::Result<Comm, &'static str> {
    prefer_ring();
    let (jobs, rx) = channel::<Job>();
    let (ready, ready_rx) = channel();
    let thread = std::thread::Builder::new()
        .name("eddy-comm".into())
        .spawn(move || {
            // This thread initialises MPI and runs its calls; with `Multiple` granted, a
            // thread that holds the wire may too (`on_thread`).
            let Some((universe, granted)) =
                mpi::initialize_with_threading(mpi::Threading::Multiple)
            else {
                let _ = ready.send(Err("MPI was initialised already in this process"));
                return;
            };
            let w = universe.world();
            if granted == mpi::Threading::Multiple {
                lane().open();
            }
            let _ = ready.send(Ok((w.rank() as usize, w.size() as usize)));
            // Between collectives, a short spin before sleeping: the next one of a step
            // often follows within microseconds, and waking a sleeping thread costs more.
            while let Some(job) = spin_then_wait(&rx) {
                lane().serve(|| job(&w));
            }
            // No other thread calls MPI from here on.
            lane().close();
            if BROKEN.load(Ordering::Acquire) {
                // A collective is still pending: end the whole job (the others too) rather
                // than wait for it in `MPI_Finalize`.
                w.abort(70);
            }
            // Dropping the universe finalises MPI.
            drop(universe);
        })
        .map_err(|_| "the operating system refused the communication thread")?;
    let world = ready_rx
        .recv()
        .map_err(|_| "the communication thread ended while starting MPI")??;
    // SAFETY: `finish` is an `extern "C" fn()` of this program, valid until it exits; `atexit`
    // only records it.
    unsafe { libc::atexit(finish) };
    Ok(Comm {
        world,
        jobs: Mutex::new(Some(jobs)),
        thread: Mutex::new(Some(thread)),
    })
}

/// OpenMPI's variable choosing the algorithm of its non-blocking all-reduce (read as MPI
/// starts).
const IALLREDUCE: &str = "OMPI_MCA_coll_libnbc_iallreduce_algorithm";

/// Asks OpenMPI for the ring algorithm in non-blocking all-reduces, unless the user chose one:
/// it moves each process's bytes once (a reduce-scatter, then an all-gather), where the
/// default moved every byte to every process; an all-reduce of 64 MiB between two processes
/// over shared memory ran 2.2 × faster. Other MPI libraries ignore the variable.
fn prefer_ring() {
    if std::env::var_os(IALLREDUCE).is_none() {
        // SAFETY: called once, before MPI starts; the engine's threads read the environment
        // only through `std::env`, which serialises reads and writes, and no C library of the
        // process reads it outside them while a program starts its first collective.
        unsafe { std::env::set_var(IALLREDUCE, "1") };
    }
}

/// At exit: the thread finishes the calls it has, finalises MPI and ends.
extern "C" fn finish() {
    if let Some(Ok(c)) = COMM.get() {
        drop(c.jobs.lock().take());
        if let Some(t) = c.thread.lock().take() {
            let _ = t.join();
        }
    }
}

/// `f` run on the communication thread; its result.
#[track_caller]
fn run<R: Send + 'static>(f: impl FnOnce(&SimpleCommunicator) -> R + Send + 'static) -> Result<R> {
    comm()?;
    let (tx, rx) = channel();
    if !launch(move |w| {
        let _ = tx.send(f(w));
    }) {
        return Err(unavailable("the communication thread has stopped"));
    }
    spin_then_wait(&rx).ok_or_else(|| unavailable("the communication thread ended during a call"))
}

/// How long a thread waiting on the communication thread (or it, on the next job) spins
/// before it sleeps: about what a small collective between processes takes.
const SPIN: Duration = Duration::from_micros(30);

/// The next value of `rx`, polled (yielding the core between polls) for [`SPIN`], then
/// waited for; `None` once its sender is gone.
fn spin_then_wait<T>(rx: &std::sync::mpsc::Receiver<T>) -> Option<T> {
    use std::sync::mpsc::TryRecvError;
    let start = Instant::now();
    loop {
        match rx.try_recv() {
            Ok(v) => return Some(v),
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) if start.elapsed() < SPIN => std::thread::yield_now(),
            Err(TryRecvError::Empty) => return rx.recv().ok(),
        }
    }
}

/// This process's rank and the number of processes.
#[track_caller]
pub(super) fn world() -> Result<(usize, usize)> {
    Ok(comm()?.world)
}

/// Sets the collectives' timeout.
pub(super) fn set_timeout(t: Duration) {
    TIMEOUT_MS.store((t.as_millis() as u64).max(1), Ordering::Relaxed);
}

/// The collectives' timeout: as set, else `EDDY_COLLECTIVE_TIMEOUT_S` (seconds), else 300 s.
fn timeout() -> Duration {
    let mut ms = TIMEOUT_MS.load(Ordering::Relaxed);
    if ms == 0 {
        let s: f64 = std::env::var("EDDY_COLLECTIVE_TIMEOUT_S")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|s: &f64| *s > 0.0)
            .unwrap_or(300.0);
        ms = ((s * 1e3) as u64).max(1);
        TIMEOUT_MS.store(ms, Ordering::Relaxed);
    }
    Duration::from_millis(ms)
}

/// `DeviceUnavailable` for MPI, saying why.
#[track_caller]
fn unavailable(reason: &'static str) -> Error {
    Error::DeviceUnavailable {
        op: "world",
        device: "mpi".into(),
        reason,
        at: Caller::here(),
    }
}

/// MPI's operation for `kind`.
fn op(kind: ReduceKind) -> SystemOperation {
    match kind {
        ReduceKind::Sum => SystemOperation::sum(),
        ReduceKind::Max => SystemOperation::max(),
        ReduceKind::Min => SystemOperation::min(),
    }
}

/// The bytes of values that ride with every fingerprint: an all-reduce or an all-gather of at
/// most this many from each process is that one exchange (an all-reduce's values reduced by
/// each process in process order). Every collective's first exchange keeps one size, so
/// processes that diverged still meet in it.
pub(super) const CARRY: usize = 256;

/// Why a collective did not run.
enum Failure {
    Diverged {
        field: &'static str,
        mine: String,
        theirs: String,
        other: usize,
        there: String,
    },
    TimedOut(String),
}

/// Notes `f` in the flight record.
fn record(f: Flight) {
    let mut r = FLIGHT.lock();
    if r.len() == FLIGHT_LEN {
        r.pop_front();
    }
    r.push_back(f);
}

/// Sets the state of collective `seq` in the flight record.
fn note(seq: u64, state: &'static str) {
    if let Some(f) = FLIGHT.lock().iter_mut().rev().find(|f| f.seq == seq) {
        f.state = state;
    }
}

/// The flight record, one collective per line.
fn flight() -> String {
    (FLIGHT.lock().iter())
        .map(|f| {
            format!(
                "  #{} {} of {} bytes: {} (called at {})",
                f.seq,
                f.op,
                f.bytes,
                f.state,
                site(f.at)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The next collective's sequence number in this process.
static SEQ: AtomicU64 = AtomicU64::new(0);

/// On the communication thread: `call`'s fingerprints compared with every process's, then
/// `data` run (given the world and the deadline); its result, with the sequence number.
///
/// `carry` (at most [`CARRY`] bytes) rides with the fingerprint; `data` then gets every
/// process's carried bytes, in process order (`None` where fingerprints are off).
fn checked<R>(
    w: &SimpleCommunicator,
    call: &Call,
    limit: Duration,
    carry: &[u8],
    data: impl FnOnce(&SimpleCommunicator, Instant, Option<Carried<'_>>) -> Option<R>,
) -> (u64, std::result::Result<R, Failure>) {
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    record(Flight {
        seq,
        op: call.op,
        bytes: call.bytes,
        state: "comparing fingerprints",
        at: call.at,
    });
    if BROKEN.load(Ordering::Acquire) {
        note(seq, "refused: an earlier collective timed out");
        return (seq, Err(Failure::TimedOut(flight())));
    }
    let deadline = Instant::now() + limit;
    if !fingerprints() {
        return outcome(seq, data(w, deadline, None));
    }
    debug_assert!(carry.len() <= CARRY, "{} bytes to carry", carry.len());
    // First the digests, each with this process's carried values: one exchange when the
    // processes agree, as they do unless the program branched.
    let mut send = Vec::with_capacity(HEAD + carry.len());
    send.extend_from_slice(&call.digest(seq).to_le_bytes());
    send.extend_from_slice(&[0; HEAD - 8]);
    send.extend_from_slice(carry);
    let rank = w.rank() as usize;
    let Some(all) = timed_gather_small(w, send, HEAD + CARRY, deadline) else {
        return timed_out(seq, "timed out comparing fingerprints");
    };
    let slots = || all.chunks(HEAD + CARRY);
    let digest = &all[rank * (HEAD + CARRY)..][..8];
    if slots().any(|c| c[..8] != *digest) {
        // Then, as they differ, the fingerprints themselves, to say how.
        let mut fp = vec![0u8; FP];
        call.fingerprint(seq, &mut fp);
        let Some(fps) = timed_gather_small(w, fp, FP, deadline) else {
            return timed_out(seq, "timed out comparing fingerprints");
        };
        if let Some(d) = diverged(&fps, rank) {
            note(seq, "diverged");
            return (seq, Err(d));
        }
    }
    note(seq, "running");
    let carried = slots().map(|c| &c[HEAD..]).collect();
    outcome(seq, data(w, deadline, Some(carried)))
}

/// Every process's carried bytes, in process order.
type Carried<'a> = smallvec::SmallVec<[&'a [u8]; 4]>;

/// What comes before the values in the first exchange of a collective: its digest (8 bytes),
/// then room to keep the values aligned.
const HEAD: usize = 16;

/// Collective `seq` timed out (`state`, for the flight record): the world is broken.
fn timed_out<R>(seq: u64, state: &'static str) -> (u64, std::result::Result<R, Failure>) {
    BROKEN.store(true, Ordering::Release);
    note(seq, state);
    (seq, Err(Failure::TimedOut(flight())))
}

/// How the fingerprints of every process (`all`, [`FP`] bytes each, in process order) differ
/// from this process's (`rank`'s): the first field that differs, with the first process whose
/// fingerprint does.
fn diverged(all: &[u8], rank: usize) -> Option<Failure> {
    let fp = &all[rank * FP..][..FP];
    let (other, theirs) = all.chunks(FP).enumerate().find(|(_, t)| *t != fp)?;
    let (ours, theirs) = (fields(fp), fields(theirs));
    let i = (ours.iter().zip(&theirs)).position(|(a, b)| a.1 != b.1)?;
    Some(Failure::Diverged {
        field: ours[i].0,
        mine: ours[i].1.clone(),
        theirs: theirs[i].1.clone(),
        other,
        there: theirs[5].1.clone(),
    })
}

/// Collective `seq`'s outcome: its result, or a timeout (`None`), which breaks the world.
fn outcome<R>(seq: u64, r: Option<R>) -> (u64, std::result::Result<R, Failure>) {
    match r {
        Some(v) => {
            note(seq, "done");
            (seq, Ok(v))
        }
        None => {
            BROKEN.store(true, Ordering::Release);
            note(seq, "timed out");
            (seq, Err(Failure::TimedOut(flight())))
        }
    }
}

/// Whether a collective timed out in this process (its requests may still be pending).
pub(super) fn broken() -> bool {
    BROKEN.load(Ordering::Acquire)
}

/// Whether collectives compare fingerprints first: yes, unless `EDDY_FINGERPRINTS=off` (read
/// once), which a program that trusts its ranks can set to save one small exchange per
/// collective (and the benchmarks, to measure it).
pub(super) fn fingerprints() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| !std::env::var("EDDY_FINGERPRINTS").is_ok_and(|v| v == "off"))
}

/// The typed error of collective `seq` (`op`, called at `at`) that failed with `f`; a
/// timeout prints the flight record on the process's error stream too (the error may be
/// swallowed, and the job may be about to end).
fn typed(op: &'static str, seq: u64, f: Failure, at: Caller, limit: Duration) -> Error {
    let rank = COMM
        .get()
        .and_then(|c| c.as_ref().ok())
        .map_or(0, |c| c.world.0);
    match f {
        Failure::Diverged {
            field,
            mine,
            theirs,
            other,
            there,
        } => Error::Diverged {
            op,
            seq,
            field,
            rank,
            other,
            values: Box::new(crate::Divergence {
                mine,
                theirs,
                there,
            }),
            at,
        },
        Failure::TimedOut(flight) => {
            eprintln!(
                "eddy: process {rank}: collective #{seq} ({op}) timed out after {limit:?}; its \
                 last collectives:\n{flight}"
            );
            Error::CollectiveTimeout {
                op,
                seq,
                seconds: limit.as_secs_f64(),
                flight,
                at,
            }
        }
    }
}

/// The last failures of global tensors' collectives in this process, with their text: they
/// run inside engine instructions, whose errors carry text only, and a later sync reports the
/// typed error whose text it got.
static FAILED: Mutex<VecDeque<(String, Error)>> = Mutex::new(VecDeque::new());

/// The typed error of the failed collective of a global tensor whose text is `text`.
pub(super) fn failure(text: &str) -> Option<Error> {
    (FAILED.lock().iter())
        .find(|(t, _)| t == text)
        .map(|(_, e)| e.clone())
}

/// Collective `op` of `t` on the communication thread: the fingerprints compared, then
/// `data` (given the world, `t`'s values and the deadline) run; the tensor of `shape` it
/// gives, on `t`'s device. Global tensors' collectives come first: they are engine
/// instructions, and every process issues its collectives in one order.
#[track_caller]
fn collective<T: crate::Elem + Equivalence + Default + Clone + Send + 'static>(
    op: &'static str,
    t: &Tensor,
    shape: Vec<usize>,
    data: impl FnOnce(&SimpleCommunicator, Vec<T>, Instant) -> Option<Vec<T>> + Send + 'static,
) -> Result<Tensor> {
    let at = Caller::here();
    let mine = t.to_vec::<T>()?;
    let engine = t.engine();
    engine.read_blob(engine.transport(), |_| ())?;
    let call = Call {
        op,
        layout: "world",
        dtype: t.dtype(),
        dims: t.dims().into(),
        at,
        bytes: mine.len() * std::mem::size_of::<T>(),
    };
    let limit = timeout();
    let (seq, outcome) = run(move |w| checked(w, &call, limit, &[], |w, d, _| data(w, mine, d)))?;
    match outcome {
        Ok(v) => Tensor::from_vec(v, shape)?.to_device(t.device()),
        Err(f) => Err(typed(op, seq, f, at, limit)),
    }
}

/// The world communicator, as the communication thread lends it to what runs there.
pub(super) type Wire = SimpleCommunicator;

/// `f` run with the world communicator, waited for; the error's text if the communication
/// thread is gone. Where MPI allows any thread to call it and the communication thread has
/// nothing queued, `f` runs on this thread, holding the wire: a small collective then costs
/// MPI's own time, not two hand-offs between threads (which, with a core per process, cost
/// several times more). Otherwise it runs on the communication thread, after what is queued.
#[track_caller]
pub(super) fn on_thread<R: Send + 'static>(
    f: impl FnOnce(&Wire) -> std::result::Result<R, String> + Send + 'static,
) -> std::result::Result<R, String> {
    match lane().try_run(|| f(&SimpleCommunicator::world())) {
        Ok(r) => r,
        Err(queued) => run(move |_| queued()).map_err(|e| e.to_string())?,
    }
}

/// Hands `f` to the communication thread and returns at once: `false` if the thread has
/// stopped (`f` is then dropped, never run).
pub(super) fn launch(f: impl FnOnce(&Wire) + Send + 'static) -> bool {
    let Ok(c) = comm() else { return false };
    let job: Job = Box::new(f);
    lane().enqueue();
    let sent = c.jobs.lock().as_ref().is_some_and(|s| s.send(job).is_ok());
    if !sent {
        lane().unqueue();
    }
    sent
}

/// Global tensors' collective `call`'s fingerprints compared with every process's, with the
/// world `w`, before a collective that another library runs (NCCL): the error's text if they
/// differ or time out, the typed error kept for [`failure`].
#[cfg(feature = "nccl")]
pub(super) fn agree(w: &Wire, call: Call) -> std::result::Result<(), String> {
    let (op, at, limit) = (call.op, call.at, timeout());
    match checked(w, &call, limit, &[], |_, _, _| Some(())) {
        (_, Ok(())) => Ok(()),
        (seq, Err(f)) => Err(kept(typed(op, seq, f, at, limit))),
    }
}

/// On the communication thread: global tensors' collective `call` over processes, each
/// sending `send`, process `q` sending `counts[q]` bytes; every process's bytes, in process
/// order. On failure the error's text (the engine instruction that ran it fails with it),
/// and the typed error kept for [`failure`].
pub(super) fn all_gather_bytes_on(
    w: &Wire,
    call: Call,
    send: Vec<u8>,
    counts: Vec<usize>,
) -> std::result::Result<Vec<u8>, String> {
    let (op, at) = (call.op, call.at);
    if let Some(c) = counts.iter().find(|&&c| c > i32::MAX as usize) {
        return Err(format!(
            "{op}: {c} bytes from one process; MPI counts up to {} at once",
            i32::MAX
        ));
    }
    let limit = timeout();
    // Every process's bytes within [`CARRY`]: they ride with the fingerprints. (`counts`
    // follows from what the fingerprints compare, so every process decides alike.)
    let small = counts.iter().all(|&c| c <= CARRY);
    debug_assert!(!small || send.len() <= CARRY, "{} bytes sent", send.len());
    let carry = if small { send.clone() } else { Vec::new() };
    let ran = checked(
        w,
        &call,
        limit,
        &carry,
        |w, deadline, carried| match carried.filter(|_| small) {
            Some(parts) => Some(
                (parts.iter().zip(&counts))
                    .flat_map(|(p, &c)| &p[..c])
                    .copied()
                    .collect(),
            ),
            None => timed_varcount(w, send, &counts, deadline),
        },
    );
    match ran {
        (_, Ok(v)) => Ok(v),
        (seq, Err(f)) => Err(kept(typed(op, seq, f, at, limit))),
    }
}

macro_rules! by_dtype {
    ($t:expr, $T:ident => $body:expr) => {
        match $t.dtype() {
            DType::F32 => {
                type $T = f32;
                $body
            }
            DType::F64 => {
                type $T = f64;
                $body
            }
            DType::I32 => {
                type $T = i32;
                $body
            }
            _ => {
                type $T = i64;
                $body
            }
        }
    };
}

/// [`World::all_reduce`](super::World::all_reduce) over MPI.
#[track_caller]
pub(super) fn all_reduce(t: &Tensor, kind: ReduceKind) -> Result<Tensor> {
    let shape = t.dims().to_vec();
    let name = match kind {
        ReduceKind::Sum => "all_reduce(sum)",
        ReduceKind::Max => "all_reduce(max)",
        ReduceKind::Min => "all_reduce(min)",
    };
    by_dtype!(t, T => collective::<T>(name, t, shape, move |w, x, deadline| {
        let n = x.len();
        timed(x, n, deadline, |s, r| w.immediate_all_reduce_into(StaticScope, s, r, op(kind)))
    }))
}

/// [`World::all_gather`](super::World::all_gather) over MPI.
#[track_caller]
pub(super) fn all_gather(t: &Tensor) -> Result<Tensor> {
    let n = comm()?.world.1;
    let mut shape = t.dims().to_vec();
    shape[0] *= n;
    by_dtype!(t, T => collective::<T>("all_gather", t, shape, move |w, x, deadline| {
        let len = x.len() * n;
        timed(x, len, deadline, |s, r| w.immediate_all_gather_into(StaticScope, s, r))
    }))
}

/// [`raw_all_reduce_seconds`](super::raw_all_reduce_seconds) over MPI.
#[track_caller]
pub(super) fn raw_all_reduce_seconds(elems: usize, times: usize) -> Result<f64> {
    use mpi::collective::CommunicatorCollectives as _;
    run(move |w| {
        let (send, mut recv) = (vec![1f32; elems], vec![0f32; elems]);
        w.barrier();
        let t = Instant::now();
        for _ in 0..times {
            w.all_reduce_into(&send[..], &mut recv[..], SystemOperation::sum());
        }
        t.elapsed().as_secs_f64()
    })
}

/// On the communication thread: a global tensor's all-reduce by `kind` over every process
/// (one rank each) of `n` elements of `T`, from `send` into `recv` (raw addresses of engine
/// blobs, `n` elements each): the fingerprints compared, then MPI's all-reduce; or, for at
/// most [`CARRY`] bytes, the values carried with the fingerprints and reduced here in process
/// order (the order of the collectives between devices of one process, so the bits are
/// theirs). The caller keeps both alive until this returns; on a timeout MPI may write `recv`
/// later, so the caller keeps its storage for ever. On failure the error's text, the typed
/// error kept for [`failure`].
pub(super) fn all_reduce_on<T: Equivalence + crate::Elem>(
    w: &Wire,
    call: Call,
    kind: ReduceKind,
    send: usize,
    recv: usize,
    n: usize,
) -> std::result::Result<(), String> {
    let (op, at) = (call.op, call.at);
    let limit = timeout();
    let size = std::mem::size_of::<T>();
    let carry: &[u8] = if n * size <= CARRY {
        // SAFETY: the caller keeps `send`, `n` elements of `T` of a live blob (`n > 0`),
        // alive until this returns.
        unsafe { std::slice::from_raw_parts(send as *const u8, n * size) }
    } else {
        &[]
    };
    let ran = checked(w, &call, limit, carry, |w, deadline, carried| {
        // SAFETY: the caller keeps both buffers of `n` elements alive and unaliased until
        // this returns, and for ever after a timeout (when the request is forgotten).
        let (s, r) = unsafe {
            (
                std::slice::from_raw_parts(send as *const T, n),
                std::slice::from_raw_parts_mut(recv as *mut T, n),
            )
        };
        if let Some(parts) = carried.filter(|_| n * size <= CARRY) {
            // SAFETY: each part is `CARRY` bytes, the first `n · size` of them a process's
            // `n` values of `T` (the same `T` and `n` everywhere: the fingerprints agreed),
            // written there from a blob of `T`s; `i < n`, so the read ends within them.
            let get = |p: &[u8], i: usize| unsafe {
                std::ptr::read_unaligned(p.as_ptr().add(i * size) as *const T)
            };
            for (i, d) in r.iter_mut().enumerate() {
                *d = (parts[1..].iter()).fold(get(parts[0], i), |a, p| combine(kind, a, get(p, i)));
            }
            return Some(());
        }
        let req = w.immediate_all_reduce_into(StaticScope, s, r, self::op(kind));
        wait(req, deadline).then_some(())
    });
    match ran {
        (_, Ok(())) => Ok(()),
        (seq, Err(f)) => Err(kept(typed(op, seq, f, at, limit))),
    }
}

/// `a` and `b` reduced by `kind`, as the collectives between devices of one process reduce
/// them (NaN wins a maximum or a minimum).
#[allow(clippy::eq_op)] // `a != a`: NaN
fn combine<T: crate::Elem>(kind: ReduceKind, a: T, b: T) -> T {
    match kind {
        ReduceKind::Sum => a.acc_add(b),
        ReduceKind::Max if a != a || a >= b => a,
        ReduceKind::Min if a != a || a <= b => a,
        _ => b,
    }
}

/// `e`'s text, `e` kept for [`failure`].
fn kept(e: Error) -> String {
    let text = e.to_string();
    let mut kept = FAILED.lock();
    if kept.len() == FLIGHT_LEN {
        kept.pop_front();
    }
    kept.push_back((text.clone(), e));
    text
}
