//! A model of the machine's cache hierarchy: set-associative levels with LRU
//! replacement, looked up in order; an access is served by the first level
//! holding its line (memory when none does) and fills every level it missed.
//! Non-inclusive: a line evicted from one level stays in the others.
//!
//! Hand-written: the preload runtime runs it inside the profiled program,
//! where the heap is the one it hooks, so the model allocates nothing and keeps
//! its state in memory the caller maps. Tags are atomics so that one last-level
//! model can be shared by every thread: concurrent updates of one set may lose
//! or repeat a line (a racy LRU, as the hardware's own is approximate) but never
//! touch memory outside it.
//!
//! A tag is a 32-bit fingerprint of the line, not the line: a 16-way set is one
//! 64-byte cache line of the real machine, so a lookup in a large last level
//! costs one real miss, not two. Two lines of one set share a fingerprint with
//! probability 2^-31 per pair; such a pair would count a miss as a hit.

#![no_std]

use core::sync::atomic::{AtomicU32, Ordering::Relaxed};

/// One way of a set: 0 when empty, else the fingerprint of the line it holds.
pub type Tag = AtomicU32;

/// One cache level's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub size: u64,
    pub ways: u32,
    pub line: u32,
}

impl Geometry {
    pub fn sets(&self) -> u64 {
        (self.size / (u64::from(self.ways.max(1)) * u64::from(self.line.max(1)))).max(1)
    }

    /// Tags the level keeps: one per line it holds.
    pub fn words(&self) -> usize {
        (self.sets() * u64::from(self.ways.max(1))) as usize
    }

    /// Bytes of its tags.
    pub fn bytes(&self) -> usize {
        self.words() * core::mem::size_of::<Tag>()
    }
}

/// One level over `words()` tags the caller provides.
pub struct Level<'a> {
    tags: &'a [Tag],
    ways: usize,
    sets: u64,
    line_shift: u32,
    /// `sets - 1` when the set count is a power of two (indexed by address bits,
    /// as L1 and L2 are); else sets are chosen by a hash of the line, as
    /// last-level caches spread lines over their slices.
    set_mask: Option<u64>,
}

impl Level<'static> {
    /// A level that holds nothing: a placeholder for the unused slots of a
    /// fixed array of levels. Never look a line up in it.
    pub const EMPTY: Level<'static> = Level {
        tags: &[],
        ways: 0,
        sets: 0,
        line_shift: 6,
        set_mask: None,
    };
}

impl<'a> Level<'a> {
    /// `None` when `tags` is shorter than the geometry needs or the line size
    /// is not a power of two.
    pub fn new(geometry: Geometry, tags: &'a [Tag]) -> Option<Level<'a>> {
        let line = geometry.line;
        if !line.is_power_of_two() || geometry.ways == 0 || tags.len() < geometry.words() {
            return None;
        }
        let sets = geometry.sets();
        Some(Level {
            tags: &tags[..geometry.words()],
            ways: geometry.ways as usize,
            sets,
            line_shift: line.trailing_zeros(),
            set_mask: sets.is_power_of_two().then_some(sets - 1),
        })
    }

    fn set_of(&self, line: u64) -> &'a [Tag] {
        let set = match self.set_mask {
            Some(mask) => line & mask,
            // Multiply-shift onto [0, sets) of a mixed line number.
            None => {
                let mixed = line.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                ((u128::from(mixed) * u128::from(self.sets)) >> 64) as u64
            }
        } as usize;
        &self.tags[set * self.ways..(set + 1) * self.ways]
    }

    /// Looks `line` up; on a hit it becomes the most recent of its set, on a
    /// miss it replaces the least recent. Returns whether it hit.
    pub fn access_line(&self, line: u64) -> bool {
        let tag = fingerprint(line);
        let set = self.set_of(line);
        let hit = set.iter().position(|t| t.load(Relaxed) == tag);
        // Most recent first: shift the ways before the hit (or all, evicting
        // the last) down by one and put the line in front.
        let end = hit.unwrap_or(self.ways - 1);
        for i in (1..=end).rev() {
            set[i].store(set[i - 1].load(Relaxed), Relaxed);
        }
        set[0].store(tag, Relaxed);
        hit.is_some()
    }

    pub fn line_of(&self, addr: u64) -> u64 {
        addr >> self.line_shift
    }
}

/// A line's tag: splitmix64's finaliser (independent of the set hash), top
/// bits, never 0 (the empty way).
fn fingerprint(line: u64) -> u32 {
    let mut h = line;
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    (h >> 32) as u32 | 1
}

/// The level of `levels` (smallest first) that served an access of `size`
/// bytes at `addr`: its index, or `levels.len()` for memory. Every level
/// before it missed and now holds the line. An access spanning two lines is as
/// slow as its slower line.
pub fn access(levels: &[Level<'_>], addr: u64, size: u64) -> usize {
    let last_byte = addr.wrapping_add(size.max(1) - 1);
    let served = access_line(levels, addr);
    match levels.first() {
        Some(l) if l.line_of(last_byte) != l.line_of(addr) => {
            served.max(access_line(levels, last_byte))
        }
        _ => served,
    }
}

fn access_line(levels: &[Level<'_>], addr: u64) -> usize {
    levels
        .iter()
        .position(|level| level.access_line(level.line_of(addr)))
        .unwrap_or(levels.len())
}

#[cfg(test)]
mod tests;
