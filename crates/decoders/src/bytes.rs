//! Little-endian integers read from untrusted bytes: none where the bytes end.

/// The little-endian u64 at `b[i..]`, if there.
#[inline]
pub fn u64_at(b: &[u8], i: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(i..i.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// The little-endian u32 at `b[i..]`, if there.
#[inline]
pub fn u32_at(b: &[u8], i: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(i..i.checked_add(4)?)?.try_into().ok()?,
    ))
}
