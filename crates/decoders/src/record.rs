//! perf event records as the kernel writes them into a ring buffer and perf
//! copies them into perf.data: the 8-byte header and the bodies memlens reads.
//! Shared by the perf.data reader and the live ring-buffer reader.

use crate::bytes::{u32_at, u64_at};

/// PERF_RECORD_* types the kernel writes.
pub mod kind {
    pub const MMAP: u32 = 1;
    pub const LOST: u32 = 2;
    pub const COMM: u32 = 3;
    pub const THROTTLE: u32 = 5;
    pub const SAMPLE: u32 = 9;
    pub const MMAP2: u32 = 10;
    pub const AUX: u32 = 11;
    pub const LOST_SAMPLES: u32 = 13;
}

/// PERF_RECORD_AUX flags.
pub mod aux_flag {
    pub const TRUNCATED: u64 = 0x1;
    pub const OVERWRITE: u64 = 0x2;
    pub const PARTIAL: u64 = 0x4;
    pub const COLLISION: u64 = 0x8;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub kind: u32,
    pub misc: u16,
    pub size: u16,
}

/// The record header at `b[at..]`.
#[inline]
pub fn header(b: &[u8], at: usize) -> Option<Header> {
    let kind = u32_at(b, at)?;
    let rest = u32_at(b, at + 4)?;
    Some(Header {
        kind,
        misc: rest as u16,
        size: (rest >> 16) as u16,
    })
}

/// A record: its type, misc bits and the bytes after the header.
#[derive(Clone, Copy, Debug)]
pub struct Record<'a> {
    pub kind: u32,
    pub misc: u16,
    pub body: &'a [u8],
}

/// The fields of the records memlens reads, other than samples.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed<'a> {
    Mmap {
        pid: u32,
        start: u64,
        len: u64,
        pgoff: u64,
        path: &'a [u8],
    },
    Comm {
        pid: u32,
        name: &'a [u8],
    },
    Lost {
        count: u64,
    },
    Throttle,
    Aux {
        offset: u64,
        size: u64,
        flags: u64,
    },
    LostSamples {
        count: u64,
    },
}

impl<'a> Record<'a> {
    /// The body's fields, for the types memlens uses; `None` for other types or
    /// a body too short for its type.
    pub fn parse(&self) -> Option<Parsed<'a>> {
        let b = self.body;
        Some(match self.kind {
            kind::MMAP | kind::MMAP2 => Parsed::Mmap {
                pid: u32_at(b, 0)?,
                start: u64_at(b, 8)?,
                len: u64_at(b, 16)?,
                pgoff: u64_at(b, 24)?,
                // MMAP2 has device/inode (or build id), prot and flags before it.
                path: c_str(b.get(if self.kind == kind::MMAP { 32 } else { 64 }..)?),
            },
            kind::COMM => Parsed::Comm {
                pid: u32_at(b, 0)?,
                name: c_str(b.get(8..)?),
            },
            kind::LOST => Parsed::Lost {
                count: u64_at(b, 8)?,
            },
            kind::THROTTLE => Parsed::Throttle,
            kind::AUX => Parsed::Aux {
                offset: u64_at(b, 0)?,
                size: u64_at(b, 8)?,
                flags: u64_at(b, 16)?,
            },
            kind::LOST_SAMPLES => Parsed::LostSamples {
                count: u64_at(b, 0)?,
            },
            _ => return None,
        })
    }
}

fn c_str(b: &[u8]) -> &[u8] {
    &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())]
}
