//! A bump allocator for plugin instances, which live for a few calls: the host creates an
//! instance per call, or per ServiceSet reconcile (a session of up to four calls), and drops it
//! after, so nothing needs to be freed one block at a time. Allocating is a pointer increment;
//! freeing gives memory back only when it is the last block (the common case of a temporary),
//! and growing the last block extends it in place. Everything else is reclaimed when the
//! instance is dropped.
//!
//! On `wasm32-unknown-unknown` it starts in the initial memory above `__heap_base`, and grows
//! memory only once that is used: a plugin linked with an `--initial-memory` that one
//! ServiceSet's calls fit in never grows, and so costs the host no change of page protection on
//! each instance (docs/performance.md). Under WASI, libc's `malloc` claims that region for
//! itself, so there the allocator only uses memory it grew.
//!
//! A plugin opts in, in its `wasm32` build, with
//! `#[global_allocator] static ALLOCATOR: BumpAllocator = BumpAllocator::new();`
//! (`use ksm_plugin_sdk::bump::BumpAllocator`). Memory only grows within an instance, so a plugin that allocates a lot
//! in one session reaches its memory limit sooner than with a freeing allocator (the call then
//! fails with the host's memory-limit error).

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;

/// Bytes in a WASM page.
const PAGE: usize = 64 * 1024;
/// Pages requested at least per `memory.grow`: fewer calls to the host.
const GROW_PAGES: usize = 16;

/// The allocator: `[next, end)` is the free tail of its memory; `end == 0` before the first
/// allocation.
pub struct BumpAllocator {
    next: Cell<usize>,
    end: Cell<usize>,
}

// SAFETY: WASM plugin instances are single-threaded (no shared memory, no threads).
unsafe impl Sync for BumpAllocator {}

impl BumpAllocator {
    /// An allocator that has not grown memory yet.
    pub const fn new() -> Self {
        Self { next: Cell::new(0), end: Cell::new(0) }
    }

    /// Makes `[next, end)` hold at least `size` bytes at `align`; returns the start, or `None`
    /// when the memory cannot grow (the limit is reached). Inlined into every allocation, so
    /// the common case (the block fits) costs no call: in WASM each call also pays the
    /// engine's stack and deadline checks. Before the first allocation `end` is 0, which no
    /// block fits (`GlobalAlloc` is never asked for zero bytes).
    #[inline(always)]
    fn reserve(&self, size: usize, align: usize) -> Option<usize> {
        let start = self.next.get().checked_next_multiple_of(align)?;
        if start.checked_add(size)? <= self.end.get() {
            return Some(start);
        }
        self.reserve_more(size, align)
    }

    /// [`reserve`](Self::reserve) when the block does not fit: takes the initial heap or
    /// grows memory.
    #[cold]
    #[inline(never)]
    fn reserve_more(&self, size: usize, align: usize) -> Option<usize> {
        if self.end.get() == 0
            && let Some((base, end)) = initial_heap()
        {
            self.next.set(base);
            self.end.set(end);
        }
        let start = self.next.get().checked_next_multiple_of(align)?;
        let needed_end = start.checked_add(size)?;
        if needed_end <= self.end.get() {
            return Some(start);
        }
        let pages = (needed_end - self.end.get()).div_ceil(PAGE).max(GROW_PAGES);
        let previous = grow(pages)?;
        if previous * PAGE != self.end.get() {
            // Not contiguous with the tail (the first growth, where the initial memory is not
            // the allocator's): start over in the new pages, which must then hold the whole block.
            let pages_needed = (size + align).div_ceil(PAGE);
            let extra = pages_needed.saturating_sub(pages);
            if extra > 0 {
                grow(extra)?;
            }
            self.next.set(previous * PAGE);
            self.end.set((previous + pages + extra) * PAGE);
            return self.reserve(size, align);
        }
        self.end.set((previous + pages) * PAGE);
        Some(start)
    }
}

impl Default for BumpAllocator {
    fn default() -> Self {
        Self::new()
    }
}

/// The initial memory's free part, `[__heap_base, memory.size)`: above the data and the stack,
/// where nothing else allocates without a libc.
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
fn initial_heap() -> Option<(usize, usize)> {
    unsafe extern "C" {
        /// Where the linker placed the end of the data and the stack.
        static __heap_base: u8;
    }
    let base = &raw const __heap_base as usize;
    Some((base, core::arch::wasm32::memory_size(0) * PAGE))
}

/// Under WASI, libc's `malloc` owns the initial memory's free part.
#[cfg(all(target_arch = "wasm32", not(target_os = "unknown")))]
fn initial_heap() -> Option<(usize, usize)> {
    None
}

#[cfg(not(target_arch = "wasm32"))]
use native::initial_heap;

/// Grows linear memory by `pages`; returns the previous size in pages.
fn grow(pages: usize) -> Option<usize> {
    #[cfg(target_arch = "wasm32")]
    let previous = core::arch::wasm32::memory_grow(0, pages);
    #[cfg(not(target_arch = "wasm32"))]
    let previous = native::grow(pages);
    (previous != usize::MAX).then_some(previous)
}

// SAFETY: blocks never overlap: each comes from `[next, end)` and `next` moves past it; a block
// is handed back (moving `next` down) only when it ends at `next`, i.e. nothing was allocated
// after it.
unsafe impl GlobalAlloc for BumpAllocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match self.reserve(layout.size(), layout.align()) {
            Some(start) => {
                self.next.set(start + layout.size());
                start as *mut u8
            }
            None => std::ptr::null_mut(),
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if ptr as usize + layout.size() == self.next.get() {
            self.next.set(ptr as usize);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let (start, size) = (ptr as usize, layout.size());
        if start + size != self.next.get() {
            // SAFETY: the caller guarantees `layout` and `new_size` are valid for `ptr`.
            let new = unsafe { self.alloc(Layout::from_size_align_unchecked(new_size, layout.align())) };
            if !new.is_null() {
                // SAFETY: both blocks are live and distinct; the copy is within both.
                unsafe { std::ptr::copy_nonoverlapping(ptr, new, size.min(new_size)) };
            }
            return new;
        }
        // The last block: shrinks or grows in place, unless memory had to grow elsewhere.
        self.next.set(start);
        match self.reserve(new_size, layout.align()) {
            Some(at) => {
                self.next.set(at + new_size);
                if at != start {
                    // SAFETY: the new block lies past the old one, whose bytes are intact.
                    unsafe { std::ptr::copy_nonoverlapping(ptr, at as *mut u8, size.min(new_size)) };
                }
                at as *mut u8
            }
            None => {
                self.next.set(start + size);
                std::ptr::null_mut()
            }
        }
    }
}

/// Outside WASM (the SDK's own tests): a linear memory over a leaked, page-aligned arena, which
/// starts with [`INITIAL`] pages and a heap base [`HEAP_BASE`] bytes in.
#[cfg(not(target_arch = "wasm32"))]
mod native {
    use super::PAGE;
    use std::sync::{Mutex, OnceLock};

    /// Pages the simulated memory may grow to.
    pub const LIMIT: usize = 128;
    /// Pages the simulated memory starts with.
    pub const INITIAL: usize = 2;
    /// Where the simulated heap starts, from the arena's start: not at a page.
    pub const HEAP_BASE: usize = PAGE + 123;

    /// The arena's address.
    pub fn arena() -> usize {
        static ARENA: OnceLock<usize> = OnceLock::new();
        *ARENA.get_or_init(|| {
            let layout = std::alloc::Layout::from_size_align(LIMIT * PAGE, PAGE).unwrap();
            // SAFETY: the size is not zero.
            unsafe { std::alloc::alloc(layout) as usize }
        })
    }

    /// The memory's size in pages.
    static SIZE: Mutex<usize> = Mutex::new(INITIAL);

    /// Pages the memory has.
    pub fn size() -> usize {
        *SIZE.lock().unwrap()
    }

    /// Like the wasm build's `initial_heap`.
    pub fn initial_heap() -> Option<(usize, usize)> {
        Some((arena() + HEAP_BASE, arena() + INITIAL * PAGE))
    }

    /// Like `memory.grow` on a memory of at most [`LIMIT`] pages: the previous size, counted in
    /// pages from address 0; `usize::MAX` beyond the limit.
    pub fn grow(pages: usize) -> usize {
        let arena = arena();
        let mut size = SIZE.lock().unwrap();
        if *size + pages > LIMIT {
            return usize::MAX;
        }
        *size += pages;
        arena / PAGE + *size - pages
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // One test: the simulated memory is shared by the whole process.
    #[test]
    fn the_initial_memory_is_used_first_blocks_are_aligned_the_last_is_reused_and_grown_in_place_and_the_limit_is_null()
    {
        let a = BumpAllocator::new();
        let (byte, word) = (Layout::from_size_align(3, 1).unwrap(), Layout::new::<u64>());
        // SAFETY: every pointer passed back comes from `a` with the layout it was allocated with.
        unsafe {
            let first = a.alloc(byte);
            assert_eq!(first as usize, native::arena() + native::HEAP_BASE, "the heap starts at its base");
            let rest = native::INITIAL * PAGE - native::HEAP_BASE - 3;
            let filler = Layout::from_size_align(rest, 1).unwrap();
            let fills = a.alloc(filler);
            assert_eq!(native::size(), native::INITIAL, "the initial memory is used before any is grown");
            a.dealloc(fills, filler);
            let second = a.alloc(word);
            assert_eq!(second as usize % 8, 0);
            assert!(second as usize >= first as usize + 3);
            a.dealloc(second, word);
            assert_eq!(a.alloc(word), second, "the last block is handed back");
            let third = a.alloc(word);
            a.dealloc(second, word);
            assert!(a.alloc(word) > third, "a block that is not the last stays taken");

            let last = a.alloc(byte);
            last.write_bytes(7, 3);
            let grown = a.realloc(last, byte, 3 * GROW_PAGES * PAGE);
            assert_eq!(grown, last, "the last block grows in place, memory growing under it");
            assert_eq!(*grown.add(2), 7);
            grown.add(3 * GROW_PAGES * PAGE - 1).write(1);

            third.cast::<u64>().write(42);
            let moved = a.realloc(third, word, 64);
            assert!(moved > grown, "an earlier block moves to the tail");
            assert_eq!(moved.cast::<u64>().read(), 42);

            assert!(a.alloc(Layout::from_size_align(native::LIMIT * PAGE, 1).unwrap()).is_null());
            assert!(!a.alloc(word).is_null(), "a failed allocation leaves the allocator usable");
        }
    }
}
