//! The communication thread (feature `mpi`): one per process, started on first use. It
//! initialises MPI, owns the world communicator and runs every MPI call, in the order the
//! calls reach it; a process that started it finalises MPI as it exits.

use super::ReduceKind;
use crate::{DType, Error, Result, Tensor};
use mpi::collective::SystemOperation;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, CommunicatorCollectives, Equivalence};
use parking_lot::Mutex;
use std::sync::OnceLock;
use std::sync::mpsc::{Sender, channel};
use std::thread::JoinHandle;

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

/// The thread, started on first use.
#[track_caller]
fn comm() -> Result<&'static Comm> {
    match COMM.get_or_init(start) {
        Ok(c) => Ok(c),
        Err(e) => Err(unavailable(e)),
    }
}

fn start() -> std::result::Result<Comm, &'static str> {
    let (jobs, rx) = channel::<Job>();
    let (ready, ready_rx) = channel();
    let thread = std::thread::Builder::new()
        .name("eddy-comm".into())
        .spawn(move || {
            // Funneled: this thread, which initialises MPI, is the only one that calls it.
            let Some((universe, _)) = mpi::initialize_with_threading(mpi::Threading::Funneled)
            else {
                let _ = ready.send(Err("MPI was initialised already in this process"));
                return;
            };
            let w = universe.world();
            let me = (w.rank() as usize, w.size() as usize);
            let _ = ready.send(Ok(me));
            for job in rx {
                job(&w);
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
    let c = comm()?;
    let (tx, rx) = channel();
    let job: Job = Box::new(move |w| {
        let _ = tx.send(f(w));
    });
    let sent = c.jobs.lock().as_ref().map(|s| s.send(job).is_ok());
    if sent != Some(true) {
        return Err(unavailable("the communication thread has stopped"));
    }
    rx.recv()
        .map_err(|_| unavailable("the communication thread ended during a call"))
}

/// This process's rank and the number of processes.
#[track_caller]
pub(super) fn world() -> Result<(usize, usize)> {
    Ok(comm()?.world)
}

/// `DeviceUnavailable` for MPI, saying why.
#[track_caller]
fn unavailable(reason: &'static str) -> Error {
    Error::DeviceUnavailable {
        op: "world",
        device: "mpi".into(),
        reason,
        at: crate::Caller::here(),
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

/// `t`'s values, `f` of them on the communication thread, and the tensor of `shape` it gives
/// on `t`'s device.
#[track_caller]
fn host<T: crate::Elem + Equivalence + Default + Clone + Send + 'static>(
    t: &Tensor,
    shape: Vec<usize>,
    f: impl FnOnce(&SimpleCommunicator, &[T]) -> Vec<T> + Send + 'static,
) -> Result<Tensor> {
    let mine = t.to_vec::<T>()?;
    let out = run(move |w| f(w, &mine))?;
    Tensor::from_vec(out, shape)?.to_device(t.device())
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

/// [`World::all_reduce`] over MPI.
#[track_caller]
pub(super) fn all_reduce(t: &Tensor, kind: ReduceKind) -> Result<Tensor> {
    let shape = t.dims().to_vec();
    by_dtype!(t, T => host::<T>(t, shape, move |w, x| {
        let mut y = vec![T::default(); x.len()];
        w.all_reduce_into(x, &mut y[..], op(kind));
        y
    }))
}

/// [`World::all_gather`] over MPI.
#[track_caller]
pub(super) fn all_gather(t: &Tensor) -> Result<Tensor> {
    let n = comm()?.world.1;
    let mut shape = t.dims().to_vec();
    shape[0] *= n;
    by_dtype!(t, T => host::<T>(t, shape, move |w, x| {
        let mut y = vec![T::default(); x.len() * n];
        w.all_gather_into(x, &mut y[..]);
        y
    }))
}
