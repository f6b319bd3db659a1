//! Ids of strings and stacks, the same in every process and in the reader.

/// FNV-1a: ids for strings and stacks, stable across processes.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A stack's id from its addresses: a word at a time (one multiply each,
/// this runs for every recorded block), with a final mix so that stacks
/// differing in one low bit still differ everywhere.
pub fn hash_frames(frames: &[u64]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ frames.len() as u64;
    for &f in frames {
        h = (h ^ f).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^= h >> 32;
    }
    h ^= h >> 29;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 32;
    h | 1 // 0 means "no stack"
}
