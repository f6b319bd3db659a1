extern crate std;

use super::*;
use std::vec::Vec;

fn storage(g: Geometry) -> Vec<Tag> {
    (0..g.words()).map(|_| Tag::new(0)).collect()
}

/// The textbook LRU: each set a list, most recent first.
struct Reference {
    sets: Vec<Vec<u64>>,
    ways: usize,
}

impl Reference {
    fn access(&mut self, set: usize, line: u64) -> bool {
        let s = &mut self.sets[set];
        let hit = s.iter().position(|&l| l == line);
        match hit {
            Some(i) => {
                s.remove(i);
            }
            None if s.len() == self.ways => {
                s.pop();
            }
            None => {}
        }
        s.insert(0, line);
        hit.is_some()
    }
}

#[test]
fn every_hit_and_miss_equals_a_textbook_lru() {
    // Power-of-two sets (address bits) and a hashed set count.
    for g in [
        Geometry {
            size: 32 << 10,
            ways: 8,
            line: 64,
        },
        Geometry {
            size: 48 << 10,
            ways: 12,
            line: 64,
        },
        Geometry {
            size: 40 << 10,
            ways: 5,
            line: 64,
        },
    ] {
        let tags = storage(g);
        let level = Level::new(g, &tags).unwrap();
        let mut reference = Reference {
            sets: (0..g.sets()).map(|_| Vec::new()).collect(),
            ways: g.ways as usize,
        };
        let mut rng = fastrand::Rng::with_seed(7);
        let footprint = 3 * g.size;
        let mut hits = 0;
        for _ in 0..200_000 {
            // Mostly near the last few lines, sometimes anywhere.
            let addr = rng.u64(..footprint);
            let line = level.line_of(addr);
            let set = (level.set_of(line).as_ptr() as usize - tags.as_ptr() as usize)
                / core::mem::size_of::<Tag>()
                / g.ways as usize;
            let want = reference.access(set, line);
            assert_eq!(level.access_line(line), want, "{g:?} line {line}");
            hits += want as u32;
        }
        // A third of the footprint fits: about a third of the accesses hit.
        assert!((55_000..80_000).contains(&hits), "{g:?}: {hits} hits");
    }
}

/// Share of a random-cycle chase over `bytes` served by each level, after a
/// warm-up pass (the calibration's pointer chase, run through the model).
fn chase(levels: &[Level<'_>], bytes: u64) -> Vec<f64> {
    let lines = (bytes / 64) as usize;
    let mut order: Vec<u64> = (0..lines as u64).collect();
    let mut rng = fastrand::Rng::with_seed(lines as u64);
    for i in (1..lines).rev() {
        order.swap(i, rng.usize(..i));
    }
    let mut served = std::vec![0u64; levels.len() + 1];
    for pass in 0..2 {
        let mut at = 0u64;
        for _ in 0..lines {
            let level = access(levels, 0x7f00_0000_0000 + at * 64, 8);
            if pass == 1 {
                served[level] += 1;
            }
            at = order[at as usize];
        }
    }
    served.iter().map(|&n| n as f64 / lines as f64).collect()
}

#[test]
fn the_pointer_chase_changes_level_where_it_crosses_each_cache_size() {
    // This VM's L1d and L2 (sysfs), and a last level of a set count that is
    // not a power of two (hashed, as slices are).
    let geometry = [
        Geometry {
            size: 48 << 10,
            ways: 12,
            line: 64,
        },
        Geometry {
            size: 2 << 20,
            ways: 16,
            line: 64,
        },
        Geometry {
            size: 36 << 20,
            ways: 12,
            line: 64,
        },
    ];
    let tags: Vec<Vec<Tag>> = geometry.iter().map(|&g| storage(g)).collect();
    for (bytes, level) in [
        (16 << 10, 0),
        (32 << 10, 0),
        (72 << 10, 1),
        (1 << 20, 1),
        (3 << 20, 2),
        (24 << 20, 2),
        (64 << 20, 3),
    ] {
        // A fresh model for each working set.
        for t in &tags {
            t.iter().for_each(|w| w.store(0, Relaxed));
        }
        let levels: Vec<Level<'_>> = geometry
            .iter()
            .zip(&tags)
            .map(|(&g, t)| Level::new(g, t).unwrap())
            .collect();
        let shares = chase(&levels, bytes);
        assert!(
            shares[level] > 0.9,
            "{} KiB: shares by level {shares:?}, expected level {level}",
            bytes >> 10
        );
    }
}

#[test]
fn an_access_across_two_lines_is_as_slow_as_the_slower() {
    let g = Geometry {
        size: 4 << 10,
        ways: 4,
        line: 64,
    };
    let tags = storage(g);
    let levels = [Level::new(g, &tags).unwrap()];
    assert_eq!(access(&levels, 60, 4), 1, "cold line");
    assert_eq!(access(&levels, 60, 4), 0);
    // Bytes 60..68: line 0 is cached, line 1 is not.
    assert_eq!(access(&levels, 60, 8), 1);
    assert_eq!(access(&levels, 60, 8), 0);
}

#[test]
fn a_level_needs_its_whole_storage_and_a_power_of_two_line() {
    let g = Geometry {
        size: 4 << 10,
        ways: 4,
        line: 64,
    };
    let tags = storage(g);
    assert!(Level::new(g, &tags[..10]).is_none());
    assert!(Level::new(Geometry { line: 48, ..g }, &tags).is_none());
    assert!(Level::new(Geometry { ways: 0, ..g }, &tags).is_none());
}
