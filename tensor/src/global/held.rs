//! Which ranks of a placement this process holds. In one process, every rank: rank `r` is
//! local device `r` of the placement's kind. In a job of several processes (`mpirun`), each
//! holds as many consecutive ranks as its engine has devices of that kind: process `p` of an
//! engine with `n` such devices holds ranks `p·n .. p·n + n`, rank `r` on its local device
//! `r mod n`. Every process computes the same table.

use super::{DeviceKind, Placement};
use crate::{Device, Error, Result};
use std::sync::{Arc, OnceLock};

/// The positions of a placement this process holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Held(Option<Arc<Spread>>);

/// A placement spread over several processes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Spread {
    /// The positions this process holds, in order.
    positions: Vec<usize>,
    /// Each process's devices of the placement's kind.
    per_process: u32,
}

impl Held {
    /// Every position (one process holds every rank).
    pub(crate) const ALL: Held = Held(None);

    /// The positions of `placement` this process holds: every one in a world of one.
    ///
    /// # Errors
    ///
    /// `DeviceUnavailable` for a rank past the job's devices, or CUDA ranks of several
    /// processes where NCCL is not built in (feature `nccl`) or not found, or where a process
    /// holds more than one; `InvalidArgument` for a placement that leaves this process no rank
    /// (each process holds at least one rank of every placement it uses); as
    /// [`world`](super::world).
    #[track_caller]
    pub(crate) fn of(op: &'static str, placement: &Placement) -> Result<Held> {
        if !several_processes() {
            return Ok(Held::ALL);
        }
        let w = super::world()?;
        let place = crate::engine::current(op)?;
        let kind = placement.kind();
        let per = (place.vm.devices().iter())
            .filter(|d| DeviceKind::of(**d) == Some(kind))
            .count() as u32;
        #[cfg(feature = "nccl")]
        if kind == DeviceKind::Cuda {
            super::nccl::usable(op, per)?;
        }
        #[cfg(not(feature = "nccl"))]
        if kind == DeviceKind::Cuda {
            // The exchanges read and write host memory; CUDA ranks need NCCL's.
            return Err(Error::DeviceUnavailable {
                op,
                device: "nccl".into(),
                reason: "global tensors over the CUDA devices of several processes need NCCL: \
                         build with the `nccl` feature, or place them on CPU ranks",
                at: crate::Caller::here(),
            });
        }
        let total = per as usize * w.size;
        if let Some(&r) = placement.ranks().iter().find(|&&r| r as usize >= total) {
            return Err(Error::DeviceUnavailable {
                op,
                device: format!("{kind} rank {r}"),
                reason: "the job has fewer devices of this kind: each process's engine holds \
                         as many ranks as it has devices",
                at: crate::Caller::here(),
            });
        }
        // The same answer in every process: a placement without a rank of some process.
        if let Some(p) =
            (0..w.size as u32).find(|&p| placement.ranks().iter().all(|r| r / per != p))
        {
            return Err(Error::invalid(
                op,
                format!(
                    "{placement} holds no rank of process {p} ({per} {kind} devices each): \
                     every process of the job takes part in every placement it uses",
                ),
            ));
        }
        let positions = placement.local_positions(w.rank as u32, per);
        Ok(Held(Some(Arc::new(Spread {
            positions,
            per_process: per,
        }))))
    }

    /// How many positions this process holds of a placement of `n`.
    pub(crate) fn count(&self, n: usize) -> usize {
        match &self.0 {
            None => n,
            Some(s) => s.positions.len(),
        }
    }

    /// The position of the `k`-th component this process holds.
    #[inline]
    pub(crate) fn position(&self, k: usize) -> usize {
        match &self.0 {
            None => k,
            Some(s) => s.positions[k],
        }
    }

    /// The index among this process's components of position `i`, if it holds it.
    pub(crate) fn slot(&self, i: usize) -> Option<usize> {
        match &self.0 {
            None => Some(i),
            Some(s) => s.positions.iter().position(|&p| p == i),
        }
    }

    /// The process that holds position `i` of `placement`.
    pub(crate) fn process(&self, placement: &Placement, i: usize) -> usize {
        match &self.0 {
            None => 0,
            Some(s) => (placement.ranks()[i] / s.per_process) as usize,
        }
    }

    /// The local device of position `i` of `placement`, in the process that holds it.
    pub(crate) fn device(&self, placement: &Placement, i: usize) -> Device {
        match &self.0 {
            None => placement.device(i),
            Some(s) => placement
                .kind()
                .device(placement.ranks()[i] % s.per_process),
        }
    }

    /// Whether some positions live in other processes.
    pub(crate) fn is_spread(&self) -> bool {
        self.0.is_some()
    }
}

/// Whether a launcher started several processes of this job (read once).
pub(crate) fn several_processes() -> bool {
    static SEVERAL: OnceLock<bool> = OnceLock::new();
    *SEVERAL.get_or_init(|| super::world::launched_size().is_some_and(|n| n > 1))
}
