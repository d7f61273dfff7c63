//! The plans promotion compiled, kept for their windows' kinds: a cache of the engine's like
//! the allocators', whose arenas the out-of-memory path and `Vm::empty_cache` give back.

use crate::plan::Plan;
use crate::shared::DeviceCache;
use crate::stream::Device;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The compiled plan of each remembered kind of window, by the kind's id. Its lock is taken
/// last, by a thread holding the promotion state or the scheduler, and never held while a
/// plan is dropped.
#[derive(Default)]
pub(crate) struct Shelf {
    plans: Mutex<Vec<(u64, Device, Plan)>>,
    /// Plans let go to give their memory back.
    shed: AtomicU64,
}

impl Shelf {
    /// The plan of kind `id`, if it has one.
    pub(super) fn get(&self, id: u64) -> Option<Plan> {
        let plans = self.plans.lock();
        plans.iter().find(|p| p.0 == id).map(|p| p.2.clone())
    }

    /// Keeps `plan`, whose memory is on `device`, for kind `id`.
    pub(super) fn put(&self, id: u64, device: Device, plan: &Plan) {
        let old = {
            let mut plans = self.plans.lock();
            let old = plans
                .iter()
                .position(|p| p.0 == id)
                .map(|k| plans.swap_remove(k));
            plans.push((id, device, plan.clone()));
            old
        };
        drop(old);
    }

    /// Lets go of the plan of kind `id` (a kind no longer remembered).
    pub(super) fn remove(&self, id: u64) {
        let old = {
            let mut plans = self.plans.lock();
            plans
                .iter()
                .position(|p| p.0 == id)
                .map(|k| plans.swap_remove(k))
        };
        drop(old);
    }

    /// How many plans were let go to give their memory back.
    pub(super) fn shed_count(&self) -> u64 {
        self.shed.load(Relaxed)
    }
}

impl DeviceCache for Shelf {
    /// Lets go of every plan on `device`: a plan run still queued keeps its plan's arena until
    /// it is released, and the kind compiles a plan again when its window comes back.
    fn shed(&self, device: Device) -> usize {
        let gone: Vec<(u64, Device, Plan)> = {
            let mut plans = self.plans.lock();
            let (gone, kept) = std::mem::take(&mut *plans)
                .into_iter()
                .partition(|p| p.1 == device);
            *plans = kept;
            gone
        };
        self.shed.fetch_add(gone.len() as u64, Relaxed);
        gone.len()
    }
}
