//! Memory hints for the per-packet path (the calls themselves are in `capture::dpdk`,
//! with the probe's other operating-system calls).
//!
//! - Large tables on huge pages. The flow table and its index are touched at random, one
//!   entry per packet: with 4 KiB pages nearly every packet also misses the TLB (a 64k-flow
//!   table spans ~20,000 pages). Asking the kernel for transparent huge pages on them
//!   (`madvise(MADV_HUGEPAGE)`, honoured when THP is `always` or `madvise`) turns those
//!   misses into hits. Best effort: where the kernel says no, the table works as before.
//! - Prefetching the state a burst's packets will touch (see `Worker::handle_burst`).

pub use crate::capture::dpdk::prefetch;

/// Advises huge pages for the memory `v` has reserved (its whole capacity).
pub fn advise_huge<T>(v: &Vec<T>) {
    let bytes = v.capacity() * std::mem::size_of::<T>();
    crate::capture::dpdk::advise_huge_pages(v.as_ptr() as usize, bytes);
}

/// Prefetches every cache line `r` touches (a value that straddles a line boundary needs
/// both).
#[inline]
pub fn prefetch_all<T>(r: &T) {
    let size = std::mem::size_of::<T>().max(1);
    let start = r as *const T as usize;
    if size <= 64 {
        // Its first and last bytes' lines (the same one, unless it straddles two): two
        // hints, no loop.
        prefetch(start as *const u8, 1);
        prefetch((start + size - 1) as *const u8, 1);
        return;
    }
    let first = start & !63;
    let last = (start + size - 1) & !63;
    prefetch(first as *const u8, (last - first) / 64 + 1);
}
