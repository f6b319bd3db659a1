//! Decodes every Arm SPE record of a perf.data and prints how many there were
//! of each operation: the decoder's throughput, for bench/import.sh.
//! Usage: cargo run --release -p memlens-decoders --example spe_decode FILE

use memlens_decoders::perf_data::{Item, PerfData};
use memlens_decoders::spe::{Op, RecordDecoder};
use std::collections::HashMap;

fn main() {
    let path = std::env::args().nth(1).expect("usage: spe_decode FILE");
    let file = std::fs::File::open(&path).expect("readable file");
    // Mapped, as `memlens import` reads it: copying 200 MB first took half
    // the time.
    // SAFETY: read-only map of a file nothing rewrites while it is decoded.
    let bytes = unsafe { memmap2::Mmap::map(&file) }.expect("mappable file");
    let perf = PerfData::parse(&bytes).expect("a perf.data file");
    let mut decoders: HashMap<u32, RecordDecoder> = HashMap::new();
    let (mut loads, mut stores, mut other) = (0u64, 0u64, 0u64);
    for item in perf.items().map_while(Result::ok) {
        if let Item::Auxtrace { idx, data, .. } = item {
            decoders.entry(idx).or_default().feed(data, |r| match r.op {
                Op::Load { .. } => loads += 1,
                Op::Store { .. } => stores += 1,
                _ => other += 1,
            });
        }
    }
    println!("{loads} loads, {stores} stores, {other} other records");
}
