//! A process's live memory mappings as its mmap, mremap and munmap events replay:
//! what `finalize` turns into allocation rows and what `record --live` shows.

use memlens_profile::Allocation;
use std::collections::{BTreeMap, HashMap};

/// Live mappings: disjoint segments (start -> end, mapping id), and per mapping
/// its row and how many of its bytes are still mapped (partial unmaps cut holes).
#[derive(Default)]
pub struct Mappings {
    segments: BTreeMap<u64, (u64, u64)>,
    live: HashMap<u64, (Allocation, u64)>,
    next_id: u64,
}

impl Mappings {
    /// Adds the mapping `row` of `row.size` bytes at `row.address`; it covers
    /// whole pages, its `usable_size`. What it replaces (MAP_FIXED) is unmapped
    /// at time `t`.
    pub fn map(&mut self, mut row: Allocation, t: u64, closed: &mut dyn FnMut(Allocation)) {
        let (start, end) = (row.address, page_end(row.address, row.size));
        row.usable_size = end - start;
        self.unmap_range(start, end, t, closed);
        let id = self.next_id;
        self.next_id += 1;
        self.segments.insert(start, (end, id));
        self.live.insert(id, (row, end - start));
    }

    /// What an mremap moves away from `len` bytes at `addr`: the row of the
    /// mapping there (the new mapping's origin), the old range unmapped at `t`.
    pub fn moved(
        &mut self,
        addr: u64,
        len: u64,
        t: u64,
        closed: &mut dyn FnMut(Allocation),
    ) -> Option<Allocation> {
        let origin = self.covering(addr).cloned();
        self.unmap(addr, len, t, closed);
        origin
    }

    /// The mapping that holds `addr`.
    fn covering(&self, addr: u64) -> Option<&Allocation> {
        self.segments
            .range(..=addr)
            .next_back()
            .filter(|(_, &(end, _))| end > addr)
            .and_then(|(_, (_, id))| self.live.get(id))
            .map(|(row, _)| row)
    }

    /// Removes the pages of `len` bytes at `addr`; a mapping with no byte left
    /// is closed at time `t` and handed to `closed`.
    pub fn unmap(&mut self, addr: u64, len: u64, t: u64, closed: &mut dyn FnMut(Allocation)) {
        self.unmap_range(addr, page_end(addr, len), t, closed);
    }

    fn unmap_range(&mut self, a: u64, b: u64, t: u64, closed: &mut dyn FnMut(Allocation)) {
        // Segments are disjoint and sorted: walking down from `b`, the overlapping
        // ones come first and the first one ending at or before `a` ends the search.
        let overlapping: Vec<u64> = self
            .segments
            .range(..b)
            .rev()
            .take_while(|(_, &(end, _))| end > a)
            .map(|(&s, _)| s)
            .collect();
        for s in overlapping {
            let Some((end, id)) = self.segments.remove(&s) else {
                continue;
            };
            let (cut_lo, cut_hi) = (s.max(a), end.min(b));
            if s < cut_lo {
                self.segments.insert(s, (cut_lo, id));
            }
            if cut_hi < end {
                self.segments.insert(cut_hi, (end, id));
            }
            if let Some((_, left)) = self.live.get_mut(&id) {
                *left = left.saturating_sub(cut_hi.saturating_sub(cut_lo));
                if *left == 0 {
                    let (mut row, _) = self.live.remove(&id).expect("present");
                    row.free_ns = Some(t);
                    closed(row);
                }
            }
        }
    }

    /// The live mappings with the bytes of each still mapped.
    pub fn live(&self) -> impl Iterator<Item = (&Allocation, u64)> {
        self.live.values().map(|(row, left)| (row, *left))
    }

    /// The rows of mappings never unmapped.
    pub fn into_rows(self) -> impl Iterator<Item = Allocation> {
        self.live.into_values().map(|(row, _)| row)
    }
}

/// The end of `len` bytes at `addr` rounded up to whole pages, saturating at
/// the top of the address space (lengths come from the log).
fn page_end(addr: u64, len: u64) -> u64 {
    addr.saturating_add(len.checked_next_multiple_of(4096).unwrap_or(!4095))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapping(address: u64, size: u64) -> Allocation {
        Allocation {
            address,
            size,
            ..Default::default()
        }
    }

    #[test]
    fn partial_unmaps_end_a_mapping_only_when_all_of_it_is_gone() {
        let mut maps = Mappings::default();
        let mut closed = Vec::new();
        maps.map(mapping(0x10000, 0x10000), 0, &mut |r| closed.push(r));
        // Two pages: mappings cover whole pages.
        maps.map(mapping(0x30000, 0x1801), 0, &mut |r| closed.push(r));
        maps.unmap(0x14000, 0x4000, 10, &mut |r| closed.push(r)); // a hole
        assert!(closed.is_empty());
        assert_eq!(maps.covering(0x12000).map(|r| r.address), Some(0x10000));
        assert!(maps.covering(0x15000).is_none());
        let left: Vec<u64> = maps
            .live()
            .filter(|(r, _)| r.address == 0x10000)
            .map(|(_, l)| l)
            .collect();
        assert_eq!(left, [0xc000]);
        maps.unmap(0x0, 0x31000, 20, &mut |r| closed.push(r)); // rest of 0, half of 1
        assert_eq!(closed.len(), 1);
        assert_eq!(closed[0].free_ns, Some(20));
        maps.unmap(0x31000, 0xf000, 30, &mut |r| closed.push(r));
        assert_eq!((closed[1].address, closed[1].free_ns), (0x30000, Some(30)));
        assert_eq!(maps.live().count(), 0);
    }

    #[test]
    fn a_fixed_mapping_replaces_what_it_covers() {
        let mut maps = Mappings::default();
        let mut closed = Vec::new();
        maps.map(mapping(0x10000, 0x1000), 0, &mut |r| closed.push(r));
        maps.map(mapping(0x10000, 0x1000), 5, &mut |r| closed.push(r));
        assert_eq!(closed.len(), 1);
        assert_eq!(closed[0].free_ns, Some(5));
        assert_eq!(maps.live().count(), 1);
    }
}
