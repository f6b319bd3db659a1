//! The raw event log: the one definition of the bytes the runtime writes inside the
//! profiled process and the collector reads back.
//!
//! A log file is a [`FileHeader`] (live counters the collector polls while the target
//! runs) followed by [`BLOCK_SIZE`] blocks. Each thread appends its records to its own
//! staging block ([`STAGE_MAGIC`]), mapped `MAP_SHARED` once, publishing each with a
//! release store of [`BlockHeader::used`]; when it is full the thread copies its
//! records with `pwrite` to the block named in its header, the thread's next, which
//! then reads as a written block ([`BLOCK_MAGIC`]), and starts the staging block
//! again. The page cache holds every published record, so the log stays readable when
//! the target crashes or is killed with SIGKILL: a staging block's records belong at
//! its destination's place, unless that block was written with them already.
//!
//! A record is a [`RecordHeader`] (tag and length) followed by a fixed payload struct,
//! padded to 8 bytes. Variable-length records (strings, stacks, modules) put their
//! trailing bytes after the fixed part. `no_std`: the runtime must not allocate.
#![no_std]

mod codec;
mod hash;
mod header;
pub mod level;
pub mod procfs;
mod records;
mod settings;

pub use codec::*;
pub use hash::*;
pub use header::*;
pub use records::*;
pub use settings::*;

#[cfg(test)]
mod tests {
    extern crate std;
    use std::{vec, vec::Vec};

    #[test]
    fn stack_ids_do_not_collide() {
        // 200 000 stacks of 1 to 8 return addresses in a few code pages, as
        // real stacks are, and their one-bit and reordered variants.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut ids = std::collections::HashMap::new();
        for _ in 0..200_000 {
            let n = 1 + next() as usize % 8;
            let frames: Vec<u64> = (0..n)
                .map(|_| 0x5555_5555_0000 + next() % 0x40000)
                .collect();
            let id = hash_frames(&frames);
            assert_ne!(id, 0);
            if let Some(other) = ids.insert(id, frames.clone()) {
                assert_eq!(other, frames, "two stacks, one id");
            }
            let mut flipped = frames.clone();
            flipped[0] ^= 1;
            assert_ne!(hash_frames(&flipped), id);
            if n > 1 {
                let mut swapped = frames.clone();
                swapped.swap(0, 1);
                if swapped != frames {
                    assert_ne!(hash_frames(&swapped), id);
                }
            }
        }
    }

    use super::*;

    #[test]
    fn sizes_parse_as_sysfs_and_the_cli_write_them() {
        assert_eq!(parse_size(b"7"), Some(7));
        assert_eq!(parse_size(b"48K"), Some(48 << 10));
        assert_eq!(parse_size(b"64m"), Some(64 << 20));
        assert_eq!(parse_size(b"1G"), Some(1 << 30));
        assert_eq!(parse_size(b"12Q"), None);
        assert_eq!(parse_size(b"K"), None);
        assert_eq!(parse_size(b"99999999999999999999"), None);
    }

    /// An allocation record with every field set.
    fn an_alloc() -> Alloc {
        Alloc {
            time: 7,
            ptr: 0x1000,
            size: 100,
            usable: 104,
            stack: 9,
            kind: alloc_kind::CALLOC,
            flags: alloc_flags::EXACT,
            ..Default::default()
        }
    }

    #[test]
    fn records_round_trip_and_stop_at_garbage() {
        let mut buf = [0u8; 256];
        let a = an_alloc();
        // SAFETY: 256-byte buffer.
        let n1 = unsafe { encode(buf.as_mut_ptr(), buf.len(), tag::ALLOC, &a, &[]) }.unwrap();
        let def = StringDef {
            id: 5,
            len: 3,
            _pad: 0,
        };
        let n2 = unsafe {
            encode(
                buf.as_mut_ptr().add(n1),
                buf.len() - n1,
                tag::STRING,
                &def,
                b"abc",
            )
        }
        .unwrap();
        assert_eq!(n2 % 8, 0);
        buf[n1 + n2] = 0xff; // a torn record header after the two good ones
        buf[n1 + n2 + 2] = 3;
        let mut it = Records::new(&buf[..n1 + n2 + 8]);
        let r1 = it.next().unwrap();
        assert_eq!(r1.tag, tag::ALLOC);
        assert_eq!(r1.payload::<Alloc>().unwrap().usable, 104);
        let r2 = it.next().unwrap();
        assert_eq!(&r2.trailing::<StringDef>()[..3], b"abc");
        assert!(it.next().is_none());
        assert!(it.malformed);
        // Too small a buffer is refused, not overrun.
        assert!(unsafe { encode(buf.as_mut_ptr(), 16, tag::ALLOC, &a, &[]) }.is_none());
    }

    #[test]
    fn small_allocations_take_40_bytes_and_read_back_whole() {
        let a = an_alloc();
        let mut buf = [0u8; 64];
        let small = a.small().unwrap();
        // SAFETY: 64-byte buffer.
        let n = unsafe { encode(buf.as_mut_ptr(), buf.len(), tag::SMALL_ALLOC, &small, &[]) };
        assert_eq!(n, Some(40));
        let back = Records::new(&buf).next().unwrap().alloc().unwrap();
        assert_eq!((back.time, back.ptr, back.stack), (7, 0x1000, 9));
        assert_eq!((back.size, back.usable, back.group), (100, 104, 0));
        assert_eq!(
            (back.kind, back.flags),
            (alloc_kind::CALLOC, alloc_flags::EXACT)
        );
        // What the short form cannot hold keeps the long one.
        for wide in [
            Alloc { group: 3, ..a },
            Alloc {
                size: 1 << 32,
                usable: 1 << 32,
                ..a
            },
            Alloc {
                usable: 100 + 65536,
                ..a
            },
        ] {
            assert!(wide.small().is_none(), "{wide:?}");
        }
    }

    /// What a thread's records are, allocations and frees in the forms
    /// the writer picks, one after the other in a block's body.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Event {
        Alloc(Alloc),
        Free(Free),
    }

    /// Writes `events` into a body as the runtime's writer does: each
    /// record's length and the body.
    fn body_of(events: &[Event]) -> (Vec<usize>, Vec<u8>) {
        let mut buf = vec![0u8; 4096];
        let (mut at, mut context, mut lens) = (0, Context::new(), Vec::new());
        for e in events {
            let (dst, cap) = (buf[at..].as_mut_ptr(), buf.len() - at);
            // SAFETY: `cap` bytes from `dst`.
            let n = unsafe {
                match e {
                    Event::Alloc(a) => encode_alloc(dst, cap, a, &mut context),
                    Event::Free(f) => encode_free(dst, cap, f, &mut context),
                }
            }
            .unwrap();
            lens.push(n);
            at += n;
        }
        buf.truncate(at);
        (lens, buf)
    }

    fn events_of(records: Records<'_>) -> Vec<Event> {
        records
            .map(|r| match r.tag {
                tag::FREE => Event::Free(r.free().unwrap()),
                _ => Event::Alloc(r.alloc().unwrap()),
            })
            .collect()
    }

    #[test]
    fn compact_records_code_against_the_last_and_read_back_whole_from_any_point() {
        let t0 = 5_000_000_000_000; // ns since boot: too far from 0 for 32 bits
        let a = |time, ptr, stack| Alloc {
            time,
            ptr,
            stack,
            ..an_alloc()
        };
        let free = |time, ptr| Event::Free(Free { time, ptr });
        let events = [
            Event::Alloc(a(t0, 0x1000, 9)),       // first of the body: full
            free(t0 + 10, 0x1000),                // the last allocated: 8 bytes
            Event::Alloc(a(t0 + 20, 0x2000, 9)),  // same stack: 24 bytes
            Event::Alloc(a(t0 + 30, 0x3000, 11)), // another: 32
            free(t0 + 40, 0x2000),                // not the last: 16
            free(t0 + 50 + (1 << 32), 0x3000),    // 4.3 s later: full
            Event::Alloc(Alloc {
                group: 3,
                ..a(t0 + 60 + (1 << 32), 0x4000, 11)
            }), // grouped: full
            Event::Alloc(a(t0 + 10, 0x5000, 11)), // earlier (another CPU's clock): full
            Event::Alloc(Alloc {
                usable: 100 + 65536,
                ..a(t0 + 20, 0x6000, 11)
            }), // slack past 16 bits: full
            free(t0 + 30, 0x6000),
        ];
        let (lens, body) = body_of(&events);
        assert_eq!(lens, [40, 8, 24, 32, 16, 24, 64, 40, 64, 8]);
        assert_eq!(events_of(Records::new(&body)), events);
        // A reader stopping anywhere and resuming with its context reads the rest.
        let mut records = Records::new(&body);
        for (i, len) in lens.iter().enumerate() {
            let at = lens[..i].iter().sum::<usize>();
            let rest = Records::resume(&body[at..], records.context());
            assert_eq!(events_of(rest), events[i..], "from record {i}");
            assert_eq!(records.next().unwrap().body.len() + 8, *len);
        }
        assert!(!records.malformed);
        // A compact record of a length the writer never gives ends the body.
        let mut torn = body.clone();
        torn[40 + 2] = 24; // the compact free after the first allocation, as 24 bytes
        let mut records = Records::new(&torn);
        assert!(records.next().is_some() && records.next().is_none() && records.malformed);
    }

    #[test]
    fn maps_lines() {
        let l = procfs::maps_line(
            b"7f1c2a000000-7f1c2a021000 r-xp 00002000 fe:00 1234      /usr/lib/a b.so",
        )
        .unwrap();
        assert_eq!(
            (l.start, l.end, &l.perms, l.offset, l.name, l.prot()),
            (
                0x7f1c2a000000,
                0x7f1c2a021000,
                b"r-xp",
                0x2000,
                &b"/usr/lib/a b.so"[..],
                5
            )
        );
        let anon = procfs::maps_line(b"55d0-55e0 rw-p 00000000 00:00 0 ").unwrap();
        assert_eq!((anon.name, anon.prot()), (&b""[..], 3));
        assert_eq!(procfs::maps_line(b"55d0-55e0 rw-p"), None);
        assert_eq!(procfs::maps_line(b"zz-55e0 rw-p 0 00:00 0"), None);
    }

    #[test]
    fn ready_blocks_pack_both_ends() {
        assert_eq!(
            unpack_ready(pack_ready(7, 4_000_000_000)),
            (7, 4_000_000_000)
        );
        assert_eq!(unpack_ready(0), (0, 0));
        assert_eq!(block_offset(2), (HEADER_SIZE + 2 * BLOCK_SIZE) as u64);
        assert_eq!(block_index(block_offset(2)), Some(2));
        assert_eq!(block_index(HEADER_SIZE as u64 - 1), None);
    }

    #[test]
    fn block_headers_say_written_or_staging() {
        let header = BlockHeader::bytes;
        assert_eq!(
            BlockHeader::read(&header(BLOCK_MAGIC, 7, 4096)),
            Some(BlockState::Written { tid: 7, used: 4096 })
        );
        let full = BLOCK_CAPACITY as u64;
        assert_eq!(
            BlockHeader::read(&header(STAGE_MAGIC, 7, pack_staged(3_000_000, full))),
            Some(BlockState::Staging {
                tid: 7,
                dest: 3_000_000,
                used: full
            })
        );
        assert_eq!(BlockHeader::read(&header(READY_MAGIC, 0, 0)), None);
        assert_eq!(BlockHeader::read(&header(BLOCK_MAGIC, 7, 1)[..12]), None);
    }

    #[test]
    fn stat_fields_after_a_command_name_with_spaces_and_parentheses() {
        let stat = b"4242 (a) b (c) S 17 4242 4242 0 -1 4194560 1536 77 2 0 12 3\n";
        assert_eq!(procfs::stat_field(stat, 1), Some(17));
        assert_eq!(procfs::stat_field(stat, 7), Some(1536));
        assert_eq!(procfs::stat_field(stat, 9), Some(2));
        assert_eq!(procfs::stat_field(stat, 40), None);
        assert_eq!(procfs::stat_field(b"4242 no name", 1), None);
    }

    #[test]
    fn procfs_parsers() {
        let status =
            b"Name:\tx\nVmRSS:\t  2048 kB\nRssAnon:\t1024 kB\nRssFile:\t 512 kB\nRssShmem:\t0 kB\n";
        let mut t = Timeline::default();
        procfs::fill_from_status(status, &mut t);
        assert_eq!(
            (t.rss, t.anon, t.file, t.shmem, t.swap),
            (2 << 20, 1 << 20, 512 << 10, 0, 0)
        );
        assert_eq!(procfs::statm(b"100 25 7 1 0 20 0\n"), Some((25, 7)));
        assert_eq!(procfs::kb_field(b"VmRSSX: 5 kB\n", b"VmRSS"), None);
    }
}
