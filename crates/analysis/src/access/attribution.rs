//! Every sample attributed to the data object live at its address at its
//! time, and to the region instances open on its thread, in one sweep.

use crate::{Objects, Profile};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

enum Event {
    Begin {
        addr: u64,
        end: u64,
        key: Key,
        tag: bool,
        /// The allocation's index, for a block of the allocations table.
        block: Option<u32>,
    },
    End {
        addr: u64,
        tag: bool,
    },
    RegionBegin {
        tid: u32,
        region: usize,
    },
    RegionEnd {
        tid: u32,
        region: usize,
    },
}

/// Object an address range belongs to: an object index, or a thread stack.
type Key = usize;

/// The thread key of a process's phases in the attribution sweep.
pub(crate) const ALL_THREADS: u32 = u32::MAX;

/// Where a sample landed: its object and that object's address range then.
#[derive(Clone, Copy, Debug)]
pub struct Hit {
    pub object: usize,
    pub start: u64,
    pub end: u64,
    /// The block (index in the allocations table) when the range is one:
    /// which of the blocks an address held over time.
    pub block: Option<u32>,
}

/// Per sample: the object it hit and where in the object it fell (0..1), for
/// the address scatter plots.
pub fn sample_positions(p: &Profile, objects: &Objects) -> Vec<Option<(u32, f32)>> {
    let mut placed: Vec<Option<(u32, f32)>> = vec![None; p.samples.len()];
    attribute(p, objects, |i, hit, _| {
        placed[i] = hit.map(|h| {
            let span = h.end.saturating_sub(h.start).max(1) as f64;
            let frac = p.samples[i].address.saturating_sub(h.start) as f64 / span;
            (h.object as u32, frac.clamp(0.0, 0.999) as f32)
        });
    });
    placed
}

/// Attributes every sample to the data object live at its address at its time (a
/// tag first, then a static, then a heap block, mapping or thread stack) and hands
/// it to `visit` in time order, with the region instances open on its thread. One
/// sweep; nothing per sample is kept, so memory stays with the profile itself.
pub fn attribute(
    p: &Profile,
    objects: &Objects,
    mut visit: impl FnMut(usize, Option<Hit>, &[usize]),
) {
    // One sweep in time order: live ranges (blocks, mappings, stacks, tags),
    // open region instances per thread, and samples.
    let mut events: Vec<(u64, u8, u32, Event)> = Vec::new();
    for (i, a) in p.allocations.iter().enumerate() {
        let key = objects.of_allocation[i];
        let end = a.address.saturating_add(a.usable_size.max(a.size).max(1));
        events.push((
            a.alloc_ns,
            1,
            a.pid,
            Event::Begin {
                addr: a.address,
                end,
                key,
                tag: false,
                block: u32::try_from(i).ok(),
            },
        ));
        if let Some(t) = a.free_ns {
            events.push((
                t,
                0,
                a.pid,
                Event::End {
                    addr: a.address,
                    tag: false,
                },
            ));
        }
    }
    for (i, t) in p.tags.iter().enumerate() {
        let end = t.address.saturating_add(t.size.max(1));
        let key = objects.of_tag[i];
        events.push((
            t.begin_ns,
            1,
            t.pid,
            Event::Begin {
                addr: t.address,
                end,
                key,
                tag: true,
                block: None,
            },
        ));
        if let Some(e) = t.end_ns {
            events.push((
                e,
                0,
                t.pid,
                Event::End {
                    addr: t.address,
                    tag: true,
                },
            ));
        }
    }
    for (i, r) in p.regions.iter().enumerate() {
        // A phase is open on every thread of its process.
        let tid = if r.process_wide { ALL_THREADS } else { r.tid };
        events.push((r.begin_ns, 1, r.pid, Event::RegionBegin { tid, region: i }));
        let end = r.end_ns.unwrap_or(u64::MAX);
        events.push((end, 0, r.pid, Event::RegionEnd { tid, region: i }));
    }
    // Ends before begins at one instant; samples come after both.
    events.sort_by_key(|e| (e.0, e.1));

    // Statics never move: a sorted list per process.
    // Ranges by (pid, start): (end, object, block).
    type Ranges = BTreeMap<(u32, u64), (u64, usize, Option<u32>)>;
    let mut statics = Ranges::new();
    for (i, s) in p.statics.iter().enumerate().filter(|(_, s)| s.size > 0) {
        statics.insert(
            (s.pid, s.address),
            (s.address + s.size, objects.of_static[i], None),
        );
    }
    let find = |map: &Ranges, pid: u32, addr: u64| {
        map.range(..=(pid, addr))
            .next_back()
            .filter(|(&(p2, _), &(end, ..))| p2 == pid && end > addr)
            .map(|(&(_, start), &(end, object, block))| Hit {
                object,
                start,
                end,
                block,
            })
    };
    let mut live = Ranges::new();
    let mut tags = Ranges::new();
    let mut open: FxHashMap<(u32, u32), Vec<usize>> = FxHashMap::default();
    // A thread's samples are in time order; several threads' are not.
    let sorted = objects.sample_order(p);
    let order: Box<dyn Iterator<Item = usize>> = match &sorted {
        None => Box::new(0..p.samples.len()),
        Some(order) => Box::new(order.iter().map(|&i| i as usize)),
    };
    let mut events = events.into_iter().peekable();
    let mut open_here: Vec<usize> = Vec::new();
    for i in order {
        let s = &p.samples[i];
        while let Some((_, _, pid, ev)) = events.next_if(|e| e.0 <= s.time_ns) {
            match ev {
                Event::Begin {
                    addr,
                    end,
                    key,
                    tag,
                    block,
                } => {
                    let map = if tag { &mut tags } else { &mut live };
                    map.insert((pid, addr), (end, key, block));
                }
                Event::End { addr, tag } => {
                    let map = if tag { &mut tags } else { &mut live };
                    map.remove(&(pid, addr));
                }
                Event::RegionBegin { tid, region } => {
                    open.entry((pid, tid)).or_default().push(region)
                }
                Event::RegionEnd { tid, region } => {
                    if let Some(v) = open.get_mut(&(pid, tid)) {
                        v.retain(|&r| r != region);
                    }
                }
            }
        }
        // A tag names a range inside whatever holds it: it wins; so does a
        // static variable inside the mapping that holds it (a process memlens
        // attached to has its mappings from /proc, data segments included).
        let hit = find(&tags, s.pid, s.address)
            .or_else(|| find(&statics, s.pid, s.address))
            .or_else(|| find(&live, s.pid, s.address));
        open_here.clear();
        for tid in [s.tid, ALL_THREADS] {
            open_here.extend(open.get(&(s.pid, tid)).into_iter().flatten());
        }
        visit(i, hit, &open_here);
    }
}
