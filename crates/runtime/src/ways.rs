//! A lock-free set-associative table of nonzero words: the runtime's caches
//! of unwind steps and of stacks already defined in the log. Direct-mapped
//! tables lost whole workloads to collisions: two keys in one slot, used in
//! turn, evict each other at every use: 12,000 stacks in 16,384 slots share
//! a slot with another at 1 - e^(-12,000/16,384), about half of them, each
//! defined again at every allocation (`bench/sites.sh`). Here a key may sit
//! in any of the 8 slots of its set, one cache line; a set overflows only
//! when more than 8 keys hash to it.
//!
//! Each slot is one word written whole: a reader sees a key's word or
//! another's, never a mix; a lost race costs a repeated computation.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Slots per set: eight words, one 64-byte cache line.
const WAYS: usize = 8;

#[repr(C, align(64))]
struct Set([AtomicU64; WAYS]);

/// `SETS` sets of [`WAYS`] slots, 0 being an empty slot.
pub struct Ways<const SETS: usize> {
    sets: [Set; SETS],
}

/// Which slot a full set gives up next: rotated on every eviction (rare), so
/// that keys taking turns in one set do not evict each other at every use.
static VICTIM: AtomicU32 = AtomicU32::new(0);

impl<const SETS: usize> Ways<SETS> {
    pub const fn new() -> Self {
        assert!(SETS.is_power_of_two());
        Ways {
            sets: [const { Set([const { AtomicU64::new(0) }; WAYS]) }; SETS],
        }
    }

    /// The set a key picks: the top bits of splitmix64's finalizer. (A
    /// multiplicative hash put the 12,000 return addresses of
    /// `bench/sites.sh`, spaced by a few code sizes, in 1,842 of 8,192 sets,
    /// up to 13 in one; this spreads them over 6,298, at most 7 in one.)
    fn set(&self, key: u64) -> &[AtomicU64; WAYS] {
        let mut x = key;
        x = (x ^ x >> 30).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ x >> 27).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^= x >> 31;
        &self.sets[(x >> (64 - SETS.trailing_zeros())) as usize].0
    }

    /// The word of `key` (the word `is_key` accepts), if kept.
    #[inline(always)]
    pub fn find(&self, key: u64, is_key: impl Fn(u64) -> bool) -> Option<u64> {
        self.set(key)
            .iter()
            .map(|slot| slot.load(Ordering::Relaxed))
            .find(|&word| word != 0 && is_key(word))
    }

    /// Keeps `word` (nonzero), the word of `key`, in its set: in an empty
    /// slot, else in place of another key's.
    pub fn insert(&self, key: u64, word: u64) {
        let set = self.set(key);
        let slot = match set.iter().find(|s| s.load(Ordering::Relaxed) == 0) {
            Some(empty) => empty,
            None => &set[VICTIM.fetch_add(1, Ordering::Relaxed) as usize % WAYS],
        };
        slot.store(word, Ordering::Relaxed);
    }

    /// Empties every slot.
    pub fn clear(&self) {
        for slot in self.sets.iter().flat_map(|s| &s.0) {
            slot.store(0, Ordering::Relaxed);
        }
    }
}
