//! Memory probes: a counting global allocator (live heap and its peak, without the
//! allocator's fragmentation that RSS includes, and the allocations made), the process's
//! RSS, and heap trimming so that RSS growth counts what is live.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Defers to the system allocator and counts the bytes of live heap.
struct Counting;

static LIVE_HEAP: AtomicUsize = AtomicUsize::new(0);
/// The most `LIVE_HEAP` reached since it was last reset.
static PEAK_HEAP: AtomicUsize = AtomicUsize::new(0);
/// Allocations made (a reallocation counts as one).
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

/// Allocations made so far by the process (a reallocation counts as one).
pub fn allocations() -> usize {
    ALLOCATIONS.load(Ordering::Relaxed)
}

// SAFETY: defers to the system allocator and only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grown(layout.size());
        System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_HEAP.fetch_sub(layout.size(), Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }

    /// The system's own `realloc` (which may grow in place), as a program without this
    /// allocator gets; the default would allocate, copy and free every time.
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE_HEAP.fetch_sub(layout.size(), Ordering::Relaxed);
        grown(new_size);
        System.realloc(ptr, layout, new_size)
    }
}

/// Counts an allocation of `size` bytes.
fn grown(size: usize) {
    ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    let live = LIVE_HEAP.fetch_add(size, Ordering::Relaxed) + size;
    PEAK_HEAP.fetch_max(live, Ordering::Relaxed);
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn vm_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Returns freed heap to the OS so that RSS growth counts what is live.
fn trim_heap() {
    // SAFETY: malloc_trim only releases free memory of glibc's arenas.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Growth since a [`Baseline`], per item (waiter or task).
#[derive(Debug)]
pub struct Growth {
    pub rss_kib: f64,
    pub heap_bytes: f64,
    /// The peak of the live heap since the baseline, over the baseline.
    pub peak_heap_bytes: f64,
}

/// RSS and live heap before the items under test exist.
pub struct Baseline {
    rss_kib: u64,
    heap_bytes: usize,
}

impl Baseline {
    /// Trims the heap, notes RSS and live heap, and restarts the peak from here.
    pub fn take() -> Baseline {
        trim_heap();
        let rss_kib = vm_rss_kib();
        let heap_bytes = LIVE_HEAP.load(Ordering::Relaxed);
        PEAK_HEAP.store(heap_bytes, Ordering::Relaxed);
        Baseline {
            rss_kib,
            heap_bytes,
        }
    }

    /// Trims the heap again and divides the growth by `items`.
    pub fn growth_per(&self, items: usize) -> Growth {
        trim_heap();
        let n = items.max(1) as f64;
        let over = |bytes: &AtomicUsize| {
            bytes
                .load(Ordering::Relaxed)
                .saturating_sub(self.heap_bytes) as f64
                / n
        };
        Growth {
            rss_kib: vm_rss_kib().saturating_sub(self.rss_kib) as f64 / n,
            heap_bytes: over(&LIVE_HEAP),
            peak_heap_bytes: over(&PEAK_HEAP),
        }
    }
}
