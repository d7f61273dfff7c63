//! Cache-line hints for the hand-offs between cores.
//!
//! An instruction node crosses between cores twice per instruction (see
//! [`Instruction`](crate::Instruction)'s layout), and each side reaches the other's nodes by
//! following links: every line is a miss, and a chain of them is a chain of waits. Two hints cut
//! that down: asking for the next node's lines before they are needed, so the misses overlap
//! the work on the current one, and asking for them in exclusive state where they will be
//! written, so a read miss is not followed by a second round trip to take ownership.

/// Asks for the cache line at `p` in exclusive state, ahead of a write to it. A hint only: it
/// never faults, whatever `p` is, and does nothing where the processor lacks `PREFETCHW`.
///
/// The build targets baseline x86-64, whose compiler intrinsic would lower this to a read
/// prefetch, so the instruction is written out, behind a test of its CPUID bit made once.
#[inline(always)]
pub(crate) fn for_write<T>(p: *const T) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if has_prefetchw() {
        // SAFETY: PREFETCHW is a hint: it never faults, whatever the address, writes no
        // memory, and touches neither the flags nor the stack.
        unsafe {
            std::arch::asm!(
                "prefetchw [{0}]",
                in(reg) p,
                options(nostack, preserves_flags, readonly)
            )
        };
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = p;
}

/// Whether the processor has `PREFETCHW` (CPUID 8000_0001h, ECX bit 8), asked once.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[inline(always)]
fn has_prefetchw() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
    // 0: not asked yet; 1: no; 2: yes.
    static HAS: AtomicU8 = AtomicU8::new(0);
    match HAS.load(Relaxed) {
        0 => {
            let yes = ask_prefetchw();
            HAS.store(if yes { 2 } else { 1 }, Relaxed);
            yes
        }
        v => v == 2,
    }
}

#[cfg(all(target_arch = "x86_64", not(miri)))]
#[cold]
fn ask_prefetchw() -> bool {
    use std::arch::x86_64::__cpuid;
    #[allow(unused_unsafe)] // `__cpuid` is safe on newer toolchains
    // SAFETY: CPUID exists on every x86-64 processor; leaf 8000_0000h gives the highest
    // extended leaf, which is checked before leaf 8000_0001h is asked.
    unsafe {
        __cpuid(0x8000_0000).eax >= 0x8000_0001 && __cpuid(0x8000_0001).ecx & (1 << 8) != 0
    }
}

/// [`for_write`] on the first two lines of the node at `p`: its links and header, and the
/// head of its policy.
#[inline(always)]
pub(crate) fn node_for_write(p: *const crate::Instruction) {
    for_write(p);
    for_write(p.cast::<u8>().wrapping_add(64));
}
