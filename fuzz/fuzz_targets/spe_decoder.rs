//! Arm SPE packets and records from arbitrary bytes, fed in two chunks split at
//! a point the input chooses: every byte is a packet, a counted bad byte or a
//! counted truncated tail, and records add up.
#![no_main]
use libfuzzer_sys::fuzz_target;
use memlens_decoders::spe::{Packets, RecordDecoder};

fuzz_target!(|data: &[u8]| {
    let Some((&split, stream)) = data.split_first() else {
        return;
    };
    let mut packets = Packets::new(stream);
    let mut consumed = 0u64;
    for step in packets.by_ref() {
        assert_eq!(step.offset as u64, consumed);
        consumed += step.len as u64;
    }
    assert_eq!(consumed + packets.truncated_bytes, stream.len() as u64);
    let cut = usize::from(split) * stream.len() / 255;
    let mut decoder = RecordDecoder::new();
    let mut records = 0;
    decoder.feed(&stream[..cut], |_| records += 1);
    decoder.feed(&stream[cut..], |r| {
        let _ = (r.level(true), r.level(false), r.perf_data_src(true));
        records += 1;
    });
    assert_eq!(decoder.finish().records, records);
});
