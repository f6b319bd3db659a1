//! Records in bytes: read from a block (full and compact forms, with the
//! context the compact ones are relative to) and written into one.

use crate::records::*;
use core::mem::{offset_of, size_of};

/// A record as found in a byte buffer: its tag, fixed payload bytes and trailing bytes.
pub struct RawRecord<'a> {
    pub tag: u16,
    pub body: &'a [u8],
    /// The tag in the log: a compact form's is not `tag`.
    form: u16,
    /// The second half of the record's header (a compact form's field).
    word: u32,
    /// The block's context after this record: a compact record's time,
    /// pointer and stack, as decoded.
    context: Context,
}

impl<'a> RawRecord<'a> {
    /// The fixed payload, or `None` if the record is too short for it.
    #[inline]
    pub fn payload<P: Payload>(&self) -> Option<P> {
        if self.body.len() < size_of::<P>() {
            return None;
        }
        let mut out = P::default();
        // SAFETY: P is plain old data (trait contract) and the length was checked.
        unsafe {
            core::ptr::copy_nonoverlapping(
                self.body.as_ptr(),
                &mut out as *mut P as *mut u8,
                size_of::<P>(),
            )
        };
        Some(out)
    }

    /// An allocation record's payload, in any form (None for other tags).
    #[inline]
    pub fn alloc(&self) -> Option<Alloc> {
        match self.form {
            tag::COMPACT_ALLOC => {
                let fields = word_at(self.body, 0)?;
                let size = self.word as u64;
                Some(Alloc {
                    time: self.context.time,
                    ptr: self.context.ptr,
                    size,
                    usable: size + (fields >> 32 & 0xffff),
                    stack: self.context.stack,
                    group: 0,
                    kind: (fields >> 48) as u8,
                    flags: (fields >> 56) as u8,
                    _pad: [0; 6],
                })
            }
            tag::ALLOC => self.payload(),
            tag::SMALL_ALLOC => self.payload::<SmallAlloc>().map(Alloc::from),
            _ => None,
        }
    }

    /// A free record's payload, in either form (None for other tags).
    #[inline]
    pub fn free(&self) -> Option<Free> {
        match self.form {
            tag::COMPACT_FREE => Some(Free {
                time: self.context.time,
                // The block allocated last, unless named.
                ptr: word_at(self.body, 0).unwrap_or(self.context.ptr),
            }),
            tag::FREE => self.payload(),
            _ => None,
        }
    }

    /// The record's time; None for a definition (a string or a stack).
    #[inline]
    pub fn time(&self) -> Option<u64> {
        match self.form {
            tag::COMPACT_ALLOC | tag::COMPACT_FREE => Some(self.context.time),
            tag::STRING | tag::STACK => None,
            // Every other payload starts with its u64 time.
            _ => word_at(self.body, 0),
        }
    }

    /// Bytes after the fixed payload `P`.
    pub fn trailing<P: Payload>(&self) -> &'a [u8] {
        self.body.get(size_of::<P>()..).unwrap_or(&[])
    }
}

#[inline]
fn word_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The running values of a block's body that compact records are coded
/// against: the time of its last allocation or free, the pointer and stack
/// of its last allocation. So the common allocation takes 24 bytes (its
/// stack the last one's) instead of [`SmallAlloc`]'s 40, and the free of the
/// block allocated last 8 instead of 24: recording every block writes one
/// of each per call, and a smaller log costs the program less time in the
/// kernel writing it and the collector less reading it. Each body starts
/// from the default, so a block reads alone; a reader resuming within a
/// body carries the context it had there ([`Records::resume`]). A writer
/// writes every allocation and free through [`encode_alloc`] and
/// [`encode_free`], which keep its context as readers will.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Context {
    time: u64,
    ptr: u64,
    stack: u64,
}

impl Context {
    /// A body's start (the default, as a `const fn` for the runtime's statics).
    pub const fn new() -> Context {
        Context {
            time: 0,
            ptr: 0,
            stack: 0,
        }
    }

    /// The context after a full-form record, read from its body as the
    /// writer's [`encode_alloc`] and [`encode_free`] set it.
    fn see_full(&mut self, tag: u16, body: &[u8]) {
        let stack_at = match tag {
            tag::ALLOC => offset_of!(Alloc, stack),
            tag::SMALL_ALLOC => offset_of!(SmallAlloc, stack),
            tag::FREE => {
                self.time = word_at(body, 0).unwrap_or(self.time);
                return;
            }
            _ => return,
        };
        if let (Some(time), Some(ptr), Some(stack)) =
            (word_at(body, 0), word_at(body, 8), word_at(body, stack_at))
        {
            (self.time, self.ptr, self.stack) = (time, ptr, stack);
        }
    }

    /// Moves past a compact record (`word`: its header's second half): its
    /// time, and an allocation's pointer and stack, become the context's;
    /// false if its length is not one the writer gives it.
    #[inline]
    fn decode(&mut self, tag: u16, word: u32, body: &[u8]) -> bool {
        match (tag, body.len()) {
            (tag::COMPACT_ALLOC, 16 | 24) => {
                let (Some(fields), Some(ptr)) = (word_at(body, 0), word_at(body, 8)) else {
                    return false;
                };
                self.time = self.time.wrapping_add(fields & 0xffff_ffff);
                self.ptr = ptr;
                self.stack = word_at(body, 16).unwrap_or(self.stack);
                true
            }
            (tag::COMPACT_FREE, 0 | 8) => {
                self.time = self.time.wrapping_add(word as u64);
                true
            }
            _ => false,
        }
    }
}

/// Iterates over the records in `buf`; stops at the first malformed header and
/// reports it through [`Records::malformed`].
pub struct Records<'a> {
    buf: &'a [u8],
    pos: usize,
    context: Context,
    pub malformed: bool,
}

impl<'a> Records<'a> {
    /// The records of a block's body from its start.
    pub fn new(buf: &'a [u8]) -> Self {
        Records::resume(buf, Context::new())
    }

    /// The records of a block's body from within it, where a reader that
    /// stopped there had `context` ([`Records::context`]).
    pub fn resume(buf: &'a [u8], context: Context) -> Self {
        Records {
            buf,
            pos: 0,
            context,
            malformed: false,
        }
    }

    /// The context after the records read so far.
    pub fn context(&self) -> Context {
        self.context
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = RawRecord<'a>;

    #[inline]
    fn next(&mut self) -> Option<RawRecord<'a>> {
        let rest = self.buf.get(self.pos..)?;
        if rest.len() < RECORD_HEADER_SIZE {
            self.malformed |= !rest.is_empty();
            return None;
        }
        let tag = u16::from_le_bytes([rest[0], rest[1]]);
        let len = u16::from_le_bytes([rest[2], rest[3]]) as usize;
        if tag == 0 || len < RECORD_HEADER_SIZE || !len.is_multiple_of(8) || len > rest.len() {
            self.malformed = true;
            return None;
        }
        let body = &rest[RECORD_HEADER_SIZE..len];
        let (form, word) = (
            tag,
            u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]),
        );
        let tag = match form {
            tag::COMPACT_ALLOC | tag::COMPACT_FREE => {
                if !self.context.decode(form, word, body) {
                    self.malformed = true;
                    return None;
                }
                if form == tag::COMPACT_ALLOC {
                    tag::ALLOC
                } else {
                    tag::FREE
                }
            }
            _ => {
                self.context.see_full(form, body);
                form
            }
        };
        self.pos += len;
        Some(RawRecord {
            tag,
            body,
            form,
            word,
            context: self.context,
        })
    }
}

/// Writes records into a caller-provided byte buffer (a mapped block, or a `Vec`'s
/// spare space); returns the bytes written or `None` if it does not fit.
///
/// # Safety
/// `dst` must be valid for `cap` bytes of writes.
pub unsafe fn encode<P: Payload>(
    dst: *mut u8,
    cap: usize,
    tag: u16,
    payload: &P,
    extra: &[u8],
) -> Option<usize> {
    let len = record_len(size_of::<P>(), extra.len());
    if len > cap || len > u16::MAX as usize {
        return None;
    }
    let header = RecordHeader {
        tag,
        len: len as u16,
        _pad: 0,
    };
    // SAFETY: the caller guarantees `cap` writable bytes and len <= cap.
    unsafe {
        core::ptr::copy_nonoverlapping(&header as *const _ as *const u8, dst, RECORD_HEADER_SIZE);
        let body = dst.add(RECORD_HEADER_SIZE);
        core::ptr::copy_nonoverlapping(payload as *const P as *const u8, body, size_of::<P>());
        let tail = body.add(size_of::<P>());
        let pad = len - RECORD_HEADER_SIZE - size_of::<P>() - extra.len();
        // Most records have neither: no call to memcpy or memset for them.
        if !extra.is_empty() {
            core::ptr::copy_nonoverlapping(extra.as_ptr(), tail, extra.len());
        }
        if pad > 0 {
            core::ptr::write_bytes(tail.add(extra.len()), 0, pad);
        }
    }
    Some(len)
}

/// Writes an allocation's record in the shortest form that holds it (see
/// [`Context`]), moving the block's context past it; as [`encode`].
///
/// # Safety
/// As [`encode`].
#[inline]
pub unsafe fn encode_alloc(
    dst: *mut u8,
    cap: usize,
    a: &Alloc,
    context: &mut Context,
) -> Option<usize> {
    let delta = a.time.wrapping_sub(context.time);
    let slack = a.usable.wrapping_sub(a.size);
    let compact = a.group == 0
        && delta <= u32::MAX as u64
        && a.size <= u32::MAX as u64
        && slack <= u16::MAX as u64;
    let len = if !compact {
        // SAFETY: as the caller's.
        unsafe {
            match a.small() {
                Some(small) => encode(dst, cap, tag::SMALL_ALLOC, &small, &[]),
                None => encode(dst, cap, tag::ALLOC, a, &[]),
            }
        }?
    } else {
        let same_stack = a.stack == context.stack;
        let len = if same_stack { 24 } else { 32 };
        if len > cap {
            return None;
        }
        let fields = delta | slack << 32 | (a.kind as u64) << 48 | (a.flags as u64) << 56;
        let header = tag::COMPACT_ALLOC as u64 | (len as u64) << 16 | a.size << 32;
        // SAFETY: `len` <= `cap` writable bytes.
        unsafe {
            let words = dst as *mut [u8; 8];
            words.write(header.to_le_bytes());
            words.add(1).write(fields.to_le_bytes());
            words.add(2).write(a.ptr.to_le_bytes());
            if !same_stack {
                words.add(3).write(a.stack.to_le_bytes());
            }
        }
        len
    };
    (context.time, context.ptr, context.stack) = (a.time, a.ptr, a.stack);
    Some(len)
}

/// Writes a free's record in the shortest form that holds it (see
/// [`Context`]), moving the block's context past it; as [`encode`].
///
/// # Safety
/// As [`encode`].
#[inline]
pub unsafe fn encode_free(
    dst: *mut u8,
    cap: usize,
    f: &Free,
    context: &mut Context,
) -> Option<usize> {
    let delta = f.time.wrapping_sub(context.time);
    let len = if delta > u32::MAX as u64 {
        // SAFETY: as the caller's.
        unsafe { encode(dst, cap, tag::FREE, f, &[]) }?
    } else {
        let last_allocated = f.ptr == context.ptr;
        let len = if last_allocated { 8 } else { 16 };
        if len > cap {
            return None;
        }
        let header = tag::COMPACT_FREE as u64 | (len as u64) << 16 | delta << 32;
        // SAFETY: `len` <= `cap` writable bytes.
        unsafe {
            let words = dst as *mut [u8; 8];
            words.write(header.to_le_bytes());
            if !last_allocated {
                words.add(1).write(f.ptr.to_le_bytes());
            }
        }
        len
    };
    context.time = f.time;
    Some(len)
}
