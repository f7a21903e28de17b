//! Software prefetch: a hint that a cache line will be read soon, so independent misses overlap.

/// Starts loading the cache line holding `p`; a no-op where the target has no prefetch instruction.
#[inline(always)]
pub fn line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching never faults, whatever the address; SSE is part of the x86_64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Starts loading the cache line holding `p` for writing (x86 `PREFETCHW`): the line arrives owned,
/// so the load, compare-and-swap and stores that follow on it need no second coherence round trip
/// (read the line shared, then upgrade it). For a contended record about to be locked.
#[inline(always)]
pub fn line_for_write(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching never faults and writes nothing; CPUs without PREFETCHW decode it as a NOP.
    unsafe {
        std::arch::asm!("prefetchw [{0}]", in(reg) p, options(nostack, preserves_flags, readonly));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
