//! Anonymous memory mappings: zero-filled by the kernel, optionally touched ahead of need so that the
//! page faults that zero them are paid by whoever touches them (the background thread, see
//! [`crate::prefault`]) rather than by the thread that first writes to them.

/// Size of a page, the unit the kernel maps and zeroes.
pub(crate) const PAGE: usize = 4096;
/// Size of a transparent huge page; mappings of at least this size are aligned to it and advised to
/// use huge pages.
pub(crate) const HUGE_PAGE: usize = 2 << 20;

/// A zero-filled, read-write anonymous mapping, unmapped on drop.
pub(crate) struct Mapping {
    addr: usize,
    len: usize,
}

impl Mapping {
    /// Maps `len` bytes (rounded up to pages) of zeros.
    pub(crate) fn new(len: usize) -> Mapping {
        let len = len.max(1).next_multiple_of(PAGE);
        let align = if len >= HUGE_PAGE { HUGE_PAGE } else { PAGE };
        let span = len + align - PAGE;
        // SAFETY: an anonymous private mapping with no address hint; the result is checked.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                span,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert!(raw != libc::MAP_FAILED, "mmap of {span} bytes failed");
        let raw = raw as usize;
        let addr = raw.next_multiple_of(align);
        // SAFETY: the head and tail lie inside the mapping just made and nothing uses them.
        unsafe {
            if addr > raw {
                libc::munmap(raw as *mut libc::c_void, addr - raw);
            }
            let tail = raw + span - (addr + len);
            if tail > 0 {
                libc::munmap((addr + len) as *mut libc::c_void, tail);
            }
            if len >= HUGE_PAGE {
                libc::madvise(addr as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
            }
        }
        Mapping { addr, len }
    }

    /// Maps `len` bytes of zeros and touches every page, so that later writes fault no more.
    pub(crate) fn touched(len: usize) -> Mapping {
        let m = Mapping::new(len);
        for page in (m.addr..m.addr + m.len).step_by(PAGE) {
            // SAFETY: the page lies in this mapping, which nobody else uses yet; it holds a zero.
            unsafe { (page as *mut u8).write_volatile(0) };
        }
        m
    }

    /// First byte of the mapping (page aligned, never null).
    pub(crate) fn addr(&self) -> usize {
        self.addr
    }

    /// Bytes mapped.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping is owned by this value and nobody uses it any more.
        unsafe { libc::munmap(self.addr as *mut libc::c_void, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mappings_are_zeroed_and_huge_ones_aligned() {
        let m = Mapping::touched(3 * PAGE + 1);
        assert_eq!(m.len(), 4 * PAGE);
        // SAFETY: the mapping is `len` bytes long and initialised (zeros).
        let bytes = unsafe { std::slice::from_raw_parts(m.addr() as *const u8, m.len()) };
        assert!(bytes.iter().all(|&b| b == 0));
        let h = Mapping::new(HUGE_PAGE);
        assert_eq!(h.addr() % HUGE_PAGE, 0);
    }
}
