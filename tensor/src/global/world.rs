//! The processes of a job: this process's rank among those a launcher started (`mpirun`),
//! and, with the `mpi` feature, the collectives between them. Every MPI call runs on one
//! communication thread per process ([`comm`](super::comm)), which owns every MPI object:
//! MPI is initialised once per process, and OpenMPI's communicators may not move between
//! threads.

use super::ReduceKind;
use crate::{Error, Result};

/// This process's place among the processes of its job: `rank` in `0..size`. A process
/// started without a launcher is a world of one.
///
/// # Examples
///
/// ```
/// let w = eddy_tensor::global::world()?;
/// assert!(w.rank < w.size);
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct World {
    /// This process's rank.
    pub rank: usize,
    /// How many processes the job has.
    pub size: usize,
}

/// The size of the job the launcher says this process belongs to (OpenMPI's and the PMI
/// launchers' variables), if it says; read once.
pub(super) fn launched_size() -> Option<usize> {
    static SIZE: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *SIZE.get_or_init(|| {
        ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"]
            .iter()
            .find_map(|v| std::env::var(v).ok()?.parse().ok())
    })
}

/// Whether this process is one of several that a launcher started, in a build that reaches
/// them (feature `mpi`): where its host has cores to spare, its engines may want a transport
/// stream ([`VmBuilder::transport_stream`](eddy_vm::VmBuilder::transport_stream)), where
/// their collectives between processes overlap compute and pipeline. Reads the launcher's
/// variables only; starts nothing.
///
/// # Examples
///
/// ```
/// let vm = eddy_vm::Vm::builder()
///     .transport_stream(eddy_tensor::global::spans_processes())
///     .build()?;
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn spans_processes() -> bool {
    cfg!(feature = "mpi") && launched_size().is_some_and(|n| n > 1)
}

/// This process's [`World`]: a process that no launcher started (or one of a job of one) is a
/// world of one, without starting MPI; one of several processes learns its rank from MPI
/// (with the `mpi` feature, initialised on first use, on the communication thread).
///
/// # Errors
///
/// `DeviceUnavailable` when a launcher started several processes and this build has no
/// `mpi` feature (each would otherwise run alone, unaware of the others), or when MPI fails
/// to start.
///
/// # Examples
///
/// ```
/// // Without `mpirun`: a world of one.
/// let w = eddy_tensor::global::world()?;
/// if std::env::var("OMPI_COMM_WORLD_SIZE").is_err() {
///     assert_eq!(w, eddy_tensor::global::World { rank: 0, size: 1 });
/// }
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
#[track_caller]
pub fn world() -> Result<World> {
    match launched_size() {
        #[cfg(feature = "mpi")]
        Some(n) if n > 1 => super::comm::world().map(|(rank, size)| World { rank, size }),
        #[cfg(not(feature = "mpi"))]
        Some(n) if n > 1 => Err(unavailable(
            format!("mpi (a launcher started {n} processes)"),
            NO_MPI,
        )),
        _ => Ok(World { rank: 0, size: 1 }),
    }
}

/// Sets how long a collective between processes waits for the others before it fails with
/// `CollectiveTimeout` (and its flight record) instead of waiting for ever: a process stuck
/// in its own work, or stopped. Default: `EDDY_COLLECTIVE_TIMEOUT_S` seconds, else 300. Has
/// no effect without the `mpi` feature.
///
/// # Examples
///
/// ```
/// eddy_tensor::global::set_collective_timeout(std::time::Duration::from_secs(60));
/// ```
pub fn set_collective_timeout(t: std::time::Duration) {
    #[cfg(feature = "mpi")]
    super::comm::set_timeout(t);
    #[cfg(not(feature = "mpi"))]
    let _ = t;
}

/// Why a world of several processes is refused without the `mpi` feature.
#[cfg(not(feature = "mpi"))]
const NO_MPI: &str = "this build of Eddy has no `mpi` feature (rebuild with `--features mpi`)";

/// `DeviceUnavailable` for the processes' transport, `what` naming it.
#[cfg(not(feature = "mpi"))]
#[track_caller]
fn unavailable(what: String, reason: &'static str) -> Error {
    Error::DeviceUnavailable {
        op: "world",
        device: what,
        reason,
        at: crate::Caller::here(),
    }
}

impl World {
    /// The element-wise reduction by `kind` of `t` over every process (each passes its own
    /// `t`, of the same shape and dtype), in rank order, so every process gets the same bits:
    /// PyTorch's `dist.all_reduce`. Waits for `t`; the result is on `t`'s device. Float and
    /// 32/64-bit integer dtypes.
    ///
    /// # Errors
    ///
    /// `UnsupportedDType`; `InvalidArgument` for a global `t`; `DeviceUnavailable` in a world
    /// of several processes without the `mpi` feature; `Diverged` when the processes called
    /// different collectives here; `CollectiveTimeout` when one did not come in time; an error
    /// of the ops `t` depends on.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, global::{world, ReduceKind}};
    /// let w = world()?;
    /// let x = Tensor::from_vec(vec![1f32, 2.0], [2])?;
    /// let s = w.all_reduce(&x, ReduceKind::Sum)?;
    /// assert_eq!(s.to_vec::<f32>()?, [w.size as f32, 2.0 * w.size as f32]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn all_reduce(&self, t: &crate::Tensor, kind: ReduceKind) -> Result<crate::Tensor> {
        check_dtype("all_reduce", t)?;
        if self.size == 1 {
            return t.detach().to_dtype(t.dtype());
        }
        #[cfg(feature = "mpi")]
        {
            super::comm::all_reduce(t, kind)
        }
        #[cfg(not(feature = "mpi"))]
        {
            let _ = kind;
            Err(unavailable("mpi".into(), NO_MPI))
        }
    }

    /// Every process's `t` (each of the same shape and dtype) concatenated along dim 0 in rank
    /// order: PyTorch's `dist.all_gather_into_tensor`. Waits for `t`; the result is on `t`'s
    /// device.
    ///
    /// # Errors
    ///
    /// As [`all_reduce`](Self::all_reduce); `InvalidDim` for a 0-d `t`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, global::world};
    /// let w = world()?;
    /// let x = Tensor::from_vec(vec![w.rank as i64; 3], [1, 3])?;
    /// let all = w.all_gather(&x)?;
    /// assert_eq!(all.dims(), [w.size, 3]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn all_gather(&self, t: &crate::Tensor) -> Result<crate::Tensor> {
        check_dtype("all_gather", t)?;
        if t.rank() == 0 {
            return Err(Error::InvalidDim {
                op: "all_gather",
                dim: 0,
                rank: 0,
                at: crate::Caller::here(),
            });
        }
        if self.size == 1 {
            return t.detach().to_dtype(t.dtype());
        }
        #[cfg(feature = "mpi")]
        {
            super::comm::all_gather(t)
        }
        #[cfg(not(feature = "mpi"))]
        Err(unavailable("mpi".into(), NO_MPI))
    }
}

/// Seconds that `times` all-reduces (sums) of `elems` f32 take when MPI is called directly,
/// without Eddy: no fingerprint, no tensor, no engine, blocking calls one after another on
/// the communication thread, after a barrier. The floor the boxing benchmarks are held to.
///
/// # Errors
///
/// `DeviceUnavailable` in a world of one (there is no MPI to call) or without the `mpi`
/// feature.
///
/// # Examples
///
/// ```
/// use eddy_tensor::global::{raw_all_reduce_seconds, world};
/// if world()?.size > 1 {
///     assert!(raw_all_reduce_seconds(16, 10)? > 0.0);
/// } else {
///     assert!(raw_all_reduce_seconds(16, 10).is_err());
/// }
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
#[track_caller]
pub fn raw_all_reduce_seconds(elems: usize, times: usize) -> Result<f64> {
    let size = world()?.size;
    #[cfg(feature = "mpi")]
    if size > 1 {
        return super::comm::raw_all_reduce_seconds(elems, times);
    }
    let _ = (elems, times, size);
    Err(Error::DeviceUnavailable {
        op: "raw_all_reduce_seconds",
        device: "mpi".into(),
        reason: "a world of one process has no MPI to time",
        at: crate::Caller::here(),
    })
}

/// The error a sync reports for `e`: where a global tensor's collective between processes
/// failed (an engine instruction, whose error is text), the typed error it failed with
/// (`Diverged`, `CollectiveTimeout`); `e` otherwise.
#[cold]
pub(crate) fn surfaced(e: eddy_vm::Error) -> Error {
    #[cfg(feature = "mpi")]
    if let eddy_vm::Error::KernelFailed { op, message, .. } = &e
        && op == "exchange"
        && let Some(typed) = super::comm::failure(message)
    {
        return typed;
    }
    Error::Vm(e)
}

/// The tensors the processes' collectives carry: local ones of these dtypes.
#[track_caller]
fn check_dtype(op: &'static str, t: &crate::Tensor) -> Result<()> {
    use crate::DType::*;
    if t.is_global() {
        return Err(Error::invalid(
            op,
            "takes this process's local tensor; a global tensor's collectives follow from its SBPs",
        ));
    }
    match t.dtype() {
        F32 | F64 | I32 | I64 => Ok(()),
        dtype => Err(Error::UnsupportedDType {
            op,
            dtype,
            at: crate::Caller::here(),
        }),
    }
}
