//! The cache model (`crates/cachemodel`) run on every instrumented access when
//! `memlens record --cache-model` asks for it, so that each sample carries the
//! level the model served it from. Each thread has its own first levels (a
//! core's L1 and L2); the last level is shared by the process's threads. The
//! geometry comes in MEMLENS_CACHE_MODEL as "size/ways/line" per level,
//! smallest first, comma-separated.

use crate::sys;
use core::sync::atomic::{AtomicPtr, Ordering};
use memlens_cachemodel::{Geometry, Level, Tag};
use memlens_rawlog::level::MemLevel;

pub const MAX_LEVELS: usize = 4;

const NO_LEVEL: Geometry = Geometry {
    size: 0,
    ways: 0,
    line: 0,
};
static mut GEOMETRY: [Geometry; MAX_LEVELS] = [NO_LEVEL; MAX_LEVELS];
static mut COUNT: usize = 0;
/// The shared last level's tags, mapped by the first thread that needs them.
static SHARED: AtomicPtr<Tag> = AtomicPtr::new(core::ptr::null_mut());

/// Reads the geometry; a malformed one leaves the model off.
///
/// # Safety
/// Called once, during initialization, before any thread reads the geometry.
pub unsafe fn configure(spec: &[u8]) {
    let mut levels = [NO_LEVEL; MAX_LEVELS];
    let mut n = 0;
    for level in spec.split(|&b| b == b',') {
        let mut parts = level.split(|&b| b == b'/').map(memlens_rawlog::parse_size);
        let (Some(Some(size)), Some(Some(ways)), Some(Some(line)), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return;
        };
        let g = Geometry {
            size,
            ways: ways.min(1 << 16) as u32,
            line: line.min(1 << 16) as u32,
        };
        if n == MAX_LEVELS || g.ways == 0 || !g.line.is_power_of_two() {
            return;
        }
        levels[n] = g;
        n += 1;
    }
    GEOMETRY = levels;
    COUNT = n;
}

pub fn enabled() -> bool {
    // SAFETY: written once during initialization.
    unsafe { COUNT > 0 }
}

fn geometry() -> &'static [Geometry] {
    // SAFETY: written once during initialization, read-only afterwards.
    unsafe { &(&*core::ptr::addr_of!(GEOMETRY))[..COUNT] }
}

/// A thread's levels: its private ones in one mapping, and the shared last.
/// Built once that mapping exists.
pub struct ThreadModel {
    levels: [Level<'static>; MAX_LEVELS],
    private: *mut u8,
    private_len: usize,
}

impl ThreadModel {
    pub const fn off() -> ThreadModel {
        ThreadModel {
            levels: [Level::EMPTY; MAX_LEVELS],
            private: core::ptr::null_mut(),
            private_len: 0,
        }
    }

    /// The level code of an access of `size` bytes at `addr`; 0 when the
    /// model is off or its memory could not be had.
    pub fn level(&mut self, addr: u64, size: u64) -> u8 {
        let n = geometry().len();
        if n == 0 || (self.private.is_null() && !self.build()) {
            return 0;
        }
        match memlens_cachemodel::access(&self.levels[..n], addr, size) {
            i if i == n => MemLevel::LocalDram,
            0 => MemLevel::L1,
            i if i + 1 == n => MemLevel::Llc,
            _ => MemLevel::L2,
        }
        .code()
    }

    fn build(&mut self) -> bool {
        let geometry = geometry();
        let (private, last) = geometry.split_at(geometry.len() - 1);
        let bytes: usize = private.iter().map(Geometry::bytes).sum();
        let len = bytes.max(8).next_multiple_of(4096);
        let Some(shared) = shared_tags(last[0]) else {
            return false;
        };
        let base = sys::alloc_pages(len);
        if base.is_null() {
            return false;
        }
        self.private = base;
        self.private_len = len;
        let mut at = base as *const Tag;
        for (i, &g) in geometry.iter().enumerate() {
            let tags = if i == private.len() {
                shared
            } else {
                // SAFETY: this level's tags lie in the fresh mapping.
                let tags = unsafe { core::slice::from_raw_parts(at, g.words()) };
                at = at.wrapping_add(g.words());
                tags
            };
            // Cannot fail: `configure` checked the geometry and the tags fit it.
            let Some(level) = Level::new(g, tags) else {
                self.release();
                return false;
            };
            self.levels[i] = level;
        }
        true
    }

    /// Unmaps the thread's private levels (at thread exit).
    pub fn release(&mut self) {
        if !self.private.is_null() {
            self.levels = [Level::EMPTY; MAX_LEVELS];
            // SAFETY: the mapping made in `build`, no longer referenced.
            unsafe { sys::munmap(self.private.cast(), self.private_len) };
            self.private = core::ptr::null_mut();
        }
    }
}

/// The shared last level's tags, mapped once per process.
fn shared_tags(g: Geometry) -> Option<&'static [Tag]> {
    let mut tags = SHARED.load(Ordering::Acquire);
    if tags.is_null() {
        let mapped = sys::alloc_pages(g.bytes()) as *mut Tag;
        if mapped.is_null() {
            return None;
        }
        tags = match SHARED.compare_exchange(
            core::ptr::null_mut(),
            mapped,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => mapped,
            Err(winner) => {
                // SAFETY: our own mapping, never published.
                unsafe { sys::munmap(mapped.cast(), g.bytes()) };
                winner
            }
        };
    }
    // SAFETY: the mapping holds `words` tags and is never unmapped.
    Some(unsafe { core::slice::from_raw_parts(tags, g.words()) })
}
