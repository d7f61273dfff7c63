//! Which CPU the calling thread runs on, and moving it off one.
//!
//! The kernel pool ([`crate::par`]) uses both: a helper woken onto the CPU of the thread that
//! offered it a job can only take turns with that thread, so it steps aside (see the pool's
//! module documentation). Elsewhere than on Linux, and under a model checker, the CPU is
//! unknown and nothing moves.

/// The CPU the calling thread runs on now, if the operating system says.
#[cfg(all(target_os = "linux", not(any(loom, shuttle))))]
pub(crate) fn current() -> Option<u32> {
    // SAFETY: `sched_getcpu` takes no argument and only reads the calling thread's state
    // (glibc answers from the thread's restartable-sequence area, without a system call).
    let c = unsafe { libc::sched_getcpu() };
    u32::try_from(c).ok()
}

/// Moves the calling thread off `cpu` at once, if its affinity allows another CPU, and then
/// gives its affinity back, so that the operating system stays free to place it later (a
/// running thread is not moved back by a wider mask). Returns whether the thread left `cpu`.
#[cfg(all(target_os = "linux", not(any(loom, shuttle))))]
pub(crate) fn leave(cpu: u32) -> bool {
    use std::mem::{size_of, zeroed};
    let cpu = cpu as usize;
    if cpu >= libc::CPU_SETSIZE as usize {
        return false;
    }
    let size = size_of::<libc::cpu_set_t>();
    // SAFETY: a `cpu_set_t` is plain bits, for which all zeros is the empty set.
    let mut allowed: libc::cpu_set_t = unsafe { zeroed() };
    // SAFETY: `allowed` is a `cpu_set_t` of `size` bytes; pid 0 names the calling thread.
    if unsafe { libc::sched_getaffinity(0, size, &mut allowed) } != 0 {
        return false;
    }
    let mut away = allowed;
    // SAFETY: `cpu` is below `CPU_SETSIZE`, checked above, so the bit lies inside the set.
    unsafe { libc::CPU_CLR(cpu, &mut away) };
    // SAFETY: counts the bits of a valid set.
    if unsafe { libc::CPU_COUNT(&away) } == 0 {
        return false;
    }
    // SAFETY: as for `sched_getaffinity`; a running thread outside its new mask is migrated
    // before the call returns.
    let moved = unsafe { libc::sched_setaffinity(0, size, &away) } == 0;
    // SAFETY: as above, with the mask the thread had.
    unsafe { libc::sched_setaffinity(0, size, &allowed) };
    moved
}

#[cfg(not(all(target_os = "linux", not(any(loom, shuttle)))))]
pub(crate) fn current() -> Option<u32> {
    None
}

#[cfg(not(all(target_os = "linux", not(any(loom, shuttle)))))]
pub(crate) fn leave(_cpu: u32) -> bool {
    false
}

#[cfg(all(test, target_os = "linux", not(any(loom, shuttle))))]
mod tests {
    use super::*;

    fn allowed_cpus() -> i32 {
        // SAFETY: as in `leave`.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: as in `leave`.
        assert_eq!(unsafe { libc::sched_getaffinity(0, size, &mut set) }, 0);
        // SAFETY: as in `leave`.
        unsafe { libc::CPU_COUNT(&set) }
    }

    #[test]
    fn a_thread_leaves_its_cpu_when_another_is_allowed_and_keeps_its_mask() {
        let cpu = current().expect("Linux names the CPU");
        let before = allowed_cpus();
        assert_eq!(leave(cpu), before > 1, "left CPU {cpu} of {before} allowed");
        assert_eq!(allowed_cpus(), before, "the mask is given back");
    }

    #[test]
    fn a_thread_pinned_to_one_cpu_stays() {
        std::thread::spawn(|| {
            let cpu = current().expect("Linux names the CPU");
            // SAFETY: as in `leave`.
            let mut one: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            // SAFETY: `cpu` came from the operating system, so it lies inside the set.
            unsafe { libc::CPU_SET(cpu as usize, &mut one) };
            let size = std::mem::size_of::<libc::cpu_set_t>();
            // SAFETY: as in `leave`, for this spawned thread only.
            assert_eq!(unsafe { libc::sched_setaffinity(0, size, &one) }, 0);
            assert!(!leave(cpu), "no other CPU is allowed");
            assert_eq!(current(), Some(cpu));
            assert_eq!(allowed_cpus(), 1);
        })
        .join()
        .unwrap();
    }
}
