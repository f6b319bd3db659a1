//! Tables keyed by heap block addresses (the replay's live blocks, the live
//! view's), hashed so that neighbouring blocks stay neighbours.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

/// A table keyed by block address.
pub(crate) type BlockMap<V> = HashMap<u64, V, BlockAddresses>;

/// Most blocks a [`BlockMap`] is made room for ahead: the hint comes from
/// counting a log's blocks live in an order that can overcount them (one
/// thread's records after another's), so past this the table grows as
/// blocks come.
const MOST_BLOCKS_AHEAD: u64 = 1 << 23;

/// A new, empty [`BlockMap`] with room for about `hint` blocks (fewer if
/// the hint is very large or the memory is not there).
pub(crate) fn block_map<V>(hint: u64) -> BlockMap<V> {
    let mut map = HashMap::with_hasher(BlockAddresses);
    let _ = map.try_reserve(hint.min(MOST_BLOCKS_AHEAD) as usize);
    map
}

/// Hashes block addresses keeping neighbours together: the table's index bits
/// are the address's 16-byte granule offset by its MiB number scrambled, and
/// the tag bits the table compares first (its top seven) a mix of the whole
/// address. Blocks allocated or freed one after another within a MiB then land
/// in neighbouring buckets: a list of 2 M blocks is inserted and freed with few
/// cache misses, where a scrambling hash missed the cache on nearly every one
/// (`memlens finalize` of bench/malloc.sh's every-block log, with the table
/// made its final size at once: user time 1.65 -> 1.0 s when it was introduced).
#[derive(Clone, Copy, Default)]
pub(crate) struct BlockAddresses;

impl BuildHasher for BlockAddresses {
    type Hasher = BlockAddressHasher;
    fn build_hasher(&self) -> BlockAddressHasher {
        BlockAddressHasher(0)
    }
}

#[derive(Default)]
pub(crate) struct BlockAddressHasher(u64);

const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;
const TAG_BITS: u64 = 0x7f << 57;

impl Hasher for BlockAddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    /// Only addresses (u64) are keys; other input is folded in byte by byte.
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(self.0 ^ u64::from(b));
        }
    }

    fn write_u64(&mut self, address: u64) {
        let granule = address >> 4;
        let mib = (granule >> 16).wrapping_mul(GOLDEN);
        self.0 =
            (granule.wrapping_add(mib) & !TAG_BITS) | (granule.wrapping_mul(GOLDEN) & TAG_BITS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(address: u64) -> u64 {
        BlockAddresses.hash_one(address)
    }

    #[test]
    fn neighbouring_blocks_get_neighbouring_buckets_and_distinct_tags() {
        let base = 0x5555_5560_0000u64;
        let mask = (1 << 20) - 1;
        for i in 0..1000u64 {
            let (a, b) = (hash(base + 32 * i), hash(base + 32 * (i + 1)));
            assert_eq!((b & mask).wrapping_sub(a & mask) & mask, 2, "block {i}");
        }
        let tags: std::collections::HashSet<u64> =
            (0..1000u64).map(|i| hash(base + 16 * i) >> 57).collect();
        assert!(tags.len() > 100, "{} tags", tags.len());
    }

    #[test]
    fn an_overcounted_hint_reserves_a_bounded_table() {
        let map: BlockMap<[u64; 5]> = block_map(u64::MAX);
        assert!(map.capacity() >= MOST_BLOCKS_AHEAD as usize / 2);
        assert!(map.capacity() <= 2 * MOST_BLOCKS_AHEAD as usize);
    }

    #[test]
    fn blocks_a_mib_apart_spread_over_the_table() {
        let mask = (1 << 16) - 1;
        let buckets: std::collections::HashSet<u64> = (0..1000u64)
            .map(|i| hash(0x7f00_0000_0000 + (i << 20)) & mask)
            .collect();
        assert!(buckets.len() > 950, "{} buckets", buckets.len());
    }
}
