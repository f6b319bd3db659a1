//! Cache lines shared between threads (Arm SPE methodology, section 5; perf c2c): lines
//! that two or more threads of a process touched, at least one of them
//! writing. False sharing when no thread writes a byte another thread touches
//! (the threads only share the line), true sharing otherwise. Found from the
//! sampled accesses' addresses, sizes and threads alone: no HITM bit, so it
//! works for SPE, IBS, PEBS and software samples alike.

use crate::access::attribute;
use crate::{Objects, Profile};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// Coherence granularity of x86 and most Arm cores.
pub const LINE: u64 = 64;

/// Sampled ownership changes a line needs to be reported: the line must go
/// from one thread to another and back, so the threads' use of it overlaps in
/// time. One change is a hand-off (main initialises a buffer that workers
/// read later), which costs one transfer and is no contention.
pub const MIN_OWNERSHIP_CHANGES: u64 = 2;

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct SharedLine {
    pub pid: u32,
    pub address: u64,
    /// "false sharing" or "true sharing".
    pub kind: String,
    /// The data object holding the line's first sampled byte, and the line's
    /// offset in it.
    pub object: String,
    pub offset_in_object: Option<u64>,
    pub samples: u64,
    pub store_samples: u64,
    /// samples x period: sampled and scaled.
    pub est_accesses: f64,
    /// Consecutive samples of the line (in time) from different threads, one
    /// of them a store: sampled ownership changes, the ranking key.
    pub thread_switches: u64,
    pub threads: Vec<ThreadOnLine>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct ThreadOnLine {
    pub tid: u32,
    pub loads: u64,
    pub stores: u64,
    /// Samples of atomic read-modify-writes, among the loads and stores.
    pub atomic: u64,
    /// Byte ranges of the line (start, end) it wrote, and those it only read.
    pub written: Vec<(u32, u32)>,
    pub read: Vec<(u32, u32)>,
    /// Code that touched the line, most sampled first.
    pub locations: Vec<crate::access::SourceLine>,
    /// Its most sampled calling contexts on the line (instrumented code).
    pub contexts: Vec<crate::access::AccessContext>,
}

#[derive(Default)]
struct ThreadTally {
    loads: u64,
    stores: u64,
    atomic: u64,
    /// Bit i: byte i of the line.
    read_mask: u64,
    write_mask: u64,
    pcs: HashMap<u64, u64>,
    contexts: rustc_hash::FxHashMap<(u32, u64), u64>,
}

#[derive(Default)]
struct LineTally {
    object: Option<crate::access::Hit>,
    threads: BTreeMap<u32, ThreadTally>,
    /// Bytes read and written per (block, thread): threads share bytes only
    /// of one block, not of two that held the address in turn.
    bytes: rustc_hash::FxHashMap<(Option<u32>, u32), (u64, u64)>,
    /// The last sample's thread, whether it stored, and until when the
    /// block it touched was live.
    last: Option<(u32, bool, u64)>,
    switches: u64,
}

/// Shared lines, most sampled ownership changes first.
pub fn shared_lines(p: &Profile, objects: &Objects, top: usize) -> Vec<SharedLine> {
    // Nothing to share unless some process has two sampled threads (the
    // check costs one pass and no memory per line).
    let mut first_tid: HashMap<u32, u32> = HashMap::new();
    let threaded = p
        .samples
        .iter()
        .any(|s| *first_tid.entry(s.pid).or_insert(s.tid) != s.tid);
    if !threaded {
        return Vec::new();
    }
    // First pass: only lines with two threads and a store are tallied in full.
    // Both maps are looked up per sample: a fast hash (our own pids and lines).
    let mut seen: rustc_hash::FxHashMap<(u32, u64), (u32, bool, bool)> =
        rustc_hash::FxHashMap::default();
    for s in &p.samples {
        let e = seen
            .entry((s.pid, s.address / LINE))
            .or_insert((s.tid, false, false));
        e.1 |= e.0 != s.tid;
        e.2 |= s.is_store;
    }
    let mut lines: rustc_hash::FxHashMap<(u32, u64), LineTally> = seen
        .into_iter()
        .filter(|(_, (_, several, stored))| *several && *stored)
        .map(|(key, _)| (key, LineTally::default()))
        .collect();
    if lines.is_empty() {
        return Vec::new();
    }
    attribute(p, objects, |i, hit, _| {
        let s = &p.samples[i];
        let Some(line) = lines.get_mut(&(s.pid, s.address / LINE)) else {
            return;
        };
        line.object = line.object.or(hit);
        let t = line.threads.entry(s.tid).or_default();
        let offset = s.address % LINE;
        let len = u64::from(s.size.max(1)).min(LINE - offset);
        let mask = (u64::MAX >> (64 - len)) << offset;
        let block = hit.and_then(|h| h.block);
        let bytes = line.bytes.entry((block, s.tid)).or_default();
        if s.is_store {
            t.stores += 1;
            t.write_mask |= mask;
            bytes.1 |= mask;
        } else {
            t.loads += 1;
            t.read_mask |= mask;
            bytes.0 |= mask;
        }
        t.atomic += s.atomic as u64;
        *t.pcs.entry(s.pc).or_default() += 1;
        if s.stack_id != 0 {
            *t.contexts.entry((s.pid, s.stack_id)).or_default() += 1;
        }
        // The line changes owner only while the block the last access
        // touched is live: after its free, the address is another block's.
        if let Some((tid, was_store, live_until)) = line.last {
            line.switches +=
                (tid != s.tid && (was_store || s.is_store) && s.time_ns < live_until) as u64;
        }
        let live_until = block
            .and_then(|b| p.allocations[b as usize].free_ns)
            .unwrap_or(u64::MAX);
        line.last = Some((s.tid, s.is_store, live_until));
    });
    let period = p.meta.settings.access_period.max(1) as f64;
    let mut out: Vec<SharedLine> = lines
        .into_iter()
        .filter(|(_, tally)| tally.switches >= MIN_OWNERSHIP_CHANGES)
        .map(|((pid, line), tally)| {
            let address = line * LINE;
            let true_sharing = tally.bytes.iter().any(|(a, (_, written))| {
                tally.bytes.iter().any(|(b, (read, wrote))| {
                    a.0 == b.0 && a.1 != b.1 && written & (read | wrote) != 0
                })
            });
            let object = objects.name_of(tally.object.map(|hit| hit.object));
            let offset_in_object = tally.object.map(|hit| address.saturating_sub(hit.start));
            let threads: Vec<ThreadOnLine> = tally
                .threads
                .into_iter()
                .map(|(tid, t)| {
                    let mut pcs: Vec<(u64, u64)> = t.pcs.into_iter().collect();
                    pcs.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                    pcs.truncate(3);
                    let contexts = crate::access::top_contexts(
                        p,
                        t.contexts,
                        t.loads + t.stores,
                        period as u64,
                    );
                    ThreadOnLine {
                        tid,
                        loads: t.loads,
                        stores: t.stores,
                        atomic: t.atomic,
                        written: ranges(t.write_mask),
                        read: ranges(t.read_mask & !t.write_mask),
                        locations: pcs
                            .into_iter()
                            .map(|(pc, samples)| crate::access::SourceLine {
                                location: crate::access::location_label(p, pid, pc),
                                samples,
                            })
                            .collect(),
                        contexts,
                    }
                })
                .collect();
            let samples: u64 = threads.iter().map(|t| t.loads + t.stores).sum();
            SharedLine {
                pid,
                address,
                kind: if true_sharing {
                    "true sharing"
                } else {
                    "false sharing"
                }
                .into(),
                object,
                offset_in_object,
                samples,
                store_samples: threads.iter().map(|t| t.stores).sum(),
                est_accesses: samples as f64 * period,
                thread_switches: tally.switches,
                threads,
            }
        })
        .collect();
    out.sort_by(|a, b| {
        (b.thread_switches, b.samples, a.address).cmp(&(a.thread_switches, a.samples, b.address))
    });
    out.truncate(top);
    out
}

/// The runs of set bits of a line's byte mask, as [start, end) ranges.
fn ranges(mask: u64) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut rest = mask;
    while rest != 0 {
        let start = rest.trailing_zeros();
        let len = (rest >> start).trailing_ones();
        out.push((start, start + len));
        rest &= !((u64::MAX >> (64 - len)) << start);
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::Profile;
    use memlens_profile::{testing, SampleCore, StaticObject};

    /// Two threads of pid 1 take turns on the 64-byte static `counters` at
    /// 0x1000: the first stores to bytes 0..8, the second to `second_at`..+8,
    /// 50 times each, one sample per 100 accesses.
    fn two_threads_on_one_line(second_at: u64) -> Profile {
        let mut p = testing::instrumented(100);
        p.statics = vec![StaticObject {
            pid: 1,
            module: "/bin/app".into(),
            name: "counters".into(),
            address: 0x1000,
            size: 64,
        }];
        p.samples = (0..100u64)
            .map(|i| SampleCore {
                pid: 1,
                tid: 10 + (i % 2) as u32,
                time_ns: 1_000 * (i + 1),
                pc: 0x400_000 + i % 2,
                address: 0x1000 + if i % 2 == 0 { 0 } else { second_at },
                size: 8,
                is_store: true,
                ..Default::default()
            })
            .collect();
        p
    }

    #[test]
    fn adjacent_fields_are_false_sharing_and_one_field_true_sharing() {
        let p = two_threads_on_one_line(8);
        let objects = crate::data_objects(&p);
        let lines = super::shared_lines(&p, &objects, 10);
        assert_eq!(lines.len(), 1);
        let line = &lines[0];
        assert_eq!((line.pid, line.address), (1, 0x1000));
        assert_eq!(line.kind, "false sharing");
        assert!(line.object.starts_with("counters"), "{}", line.object);
        assert_eq!(line.offset_in_object, Some(0));
        assert_eq!((line.samples, line.store_samples), (100, 100));
        assert_eq!(line.est_accesses, 100.0 * 100.0);
        // Every sample changes hands: 99 ownership changes.
        assert_eq!(line.thread_switches, 99);
        let written: Vec<_> = line
            .threads
            .iter()
            .map(|t| (t.tid, t.written.clone()))
            .collect();
        assert_eq!(written, [(10, vec![(0, 8)]), (11, vec![(8, 16)])]);

        // Main initialises the line, a worker reads it afterwards: one
        // hand-off, no sharing; nor when main reads it back at the end.
        let mut init_then_read = two_threads_on_one_line(8);
        for (i, s) in init_then_read.samples.iter_mut().enumerate() {
            s.tid = if (50..98).contains(&i) { 11 } else { 10 };
            s.is_store = i < 50;
        }
        let objects = crate::data_objects(&init_then_read);
        assert!(super::shared_lines(&init_then_read, &objects, 10).is_empty());

        let same_field = two_threads_on_one_line(0);
        let lines = super::shared_lines(&same_field, &crate::data_objects(&same_field), 10);
        assert_eq!(lines[0].kind, "true sharing");
        // A line 64 bytes away is another line: nothing shared.
        let apart = two_threads_on_one_line(64);
        assert!(super::shared_lines(&apart, &crate::data_objects(&apart), 10).is_empty());
    }

    /// Threads 10 and 11 take turns on 64-byte heap blocks at 0x2000: the
    /// n-th block is thread (10 + n % 2)'s, which stores 5 times to its first
    /// 8 bytes; the block lives `lifetime` ns from its allocation, and a new
    /// one is allocated every 1 000 ns.
    fn blocks_in_turn(lifetime: u64, size: u64) -> Profile {
        let mut p = testing::instrumented(100);
        for n in 0..20u64 {
            let (alloc_ns, tid) = (1_000 * (n + 1), 10 + (n % 2) as u32);
            // Blocks live together sit side by side; one after the other
            // they reuse the address.
            let address = 0x2000 + if lifetime > 1_000 { (n % 2) * size } else { 0 };
            p.allocations.push(memlens_profile::Allocation {
                free_ns: Some(alloc_ns + lifetime),
                ..testing::heap_block(1, address, size, 0, alloc_ns)
            });
            p.samples.extend((0..5).map(|k| SampleCore {
                pid: 1,
                tid,
                time_ns: alloc_ns + 10 + 100 * k,
                address,
                size: 8,
                is_store: true,
                ..Default::default()
            }));
        }
        p.samples.sort_by_key(|s| s.time_ns);
        p
    }

    #[test]
    fn blocks_that_held_an_address_in_turn_share_nothing() {
        // Each block freed before the next thread's is allocated there
        // (what an allocator does with per-iteration temporaries): no line
        // is shared, though the two threads alternate on one address.
        let p = blocks_in_turn(900, 64);
        assert!(super::shared_lines(&p, &crate::data_objects(&p), 10).is_empty());
        // Two 32-byte blocks live together on one line, one per thread:
        // false sharing across blocks, though each thread writes offset 0 of
        // its own block.
        let p = blocks_in_turn(1_900, 32);
        let lines = super::shared_lines(&p, &crate::data_objects(&p), 10);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].kind, "false sharing");
        assert!(
            lines[0].thread_switches >= 2,
            "{}",
            lines[0].thread_switches
        );
    }

    #[test]
    fn byte_masks_become_ranges() {
        assert_eq!(super::ranges(0), []);
        assert_eq!(super::ranges(0xff), [(0, 8)]);
        assert_eq!(super::ranges(0xff00_0000_0000_00f0), [(4, 8), (56, 64)]);
        assert_eq!(super::ranges(u64::MAX), [(0, 64)]);
    }
}
