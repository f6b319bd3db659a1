//! Bounded mutation fuzzing of every decoder, run with the tests: the real
//! fixtures with random bit flips, insertions, deletions and cuts, and random
//! bytes, must decode to something or to a counted error, never a panic.

use memlens_decoders::datasrc::DataSource;
use memlens_decoders::ibs::IbsOp;
use memlens_decoders::perf_data::{Item, PerfData};
use memlens_decoders::sample::Layout;
use memlens_decoders::spe::{Packets, RecordDecoder};
use std::path::Path;

/// xorshift64*: deterministic, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..1 + rng.below(8) {
        match rng.below(5) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 => {
                let i = rng.below(v.len() + 1);
                v.insert(i, rng.next() as u8);
            }
            2 if !v.is_empty() => {
                let i = rng.below(v.len());
                v.remove(i);
            }
            3 => v.truncate(rng.below(v.len() + 1)),
            _ => {
                let i = rng.below(v.len() + 1);
                let n = rng.below(16);
                let junk: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                v.splice(i..i, junk);
            }
        }
    }
    v
}

fn fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

fn spe_corpus() -> Vec<Vec<u8>> {
    let root = fixtures();
    let mut corpus = Vec::new();
    for dir in ["spe-hiperf-raw", "spe-vectors"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "spe") {
                corpus.push(std::fs::read(p).unwrap());
            }
        }
    }
    corpus
}

#[test]
fn spe_decoder_survives_mutations() {
    let corpus = spe_corpus();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for i in 0..40_000 {
        let input = mutate(&mut rng, &corpus[i % corpus.len()]);
        let mut consumed = 0;
        let mut packets = Packets::new(&input);
        for step in packets.by_ref() {
            assert_eq!(step.offset, consumed);
            assert!(step.len >= 1);
            consumed += step.len;
        }
        assert_eq!(
            consumed as u64 + packets.truncated_bytes,
            input.len() as u64
        );
        let mut d = RecordDecoder::new();
        let cut = rng.below(input.len() + 1);
        let mut n = 0;
        d.feed(&input[..cut], |_| n += 1);
        d.feed(&input[cut..], |r| {
            let _ = (r.level(true), r.level(false), r.perf_data_src(true));
            n += 1
        });
        let stats = d.finish();
        assert_eq!(stats.records, n);
    }
}

#[test]
fn sample_and_register_decoders_survive_random_input() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for _ in 0..100_000 {
        let len = rng.below(200);
        let body: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        let layout = Layout {
            sample_type: rng.next() & ((1 << 25) - 1),
            read_format: rng.next() & 0x1f,
            regs_user_mask: rng.next(),
            regs_intr_mask: rng.next(),
            branch_hw_index: rng.next() & 1 == 0,
        };
        let _ = layout.parse(&body);
        if let Ok(op) = IbsOp::from_raw(&body) {
            let _ = (op.level(), op.mem_width(), op.max_count());
        }
        let v = rng.next();
        let d = DataSource::decode(v);
        let _ = (
            d.level(),
            memlens_decoders::datasrc::PerfText(d).to_string(),
        );
        assert_eq!(
            DataSource::decode(d.encode()),
            DataSource {
                raw: d.encode(),
                ..d
            }
        );
    }
}

/// Reads everything a perf.data holds the way `memlens import` does.
fn read_all(bytes: &[u8]) {
    let Ok(perf) = PerfData::parse(bytes) else {
        return;
    };
    let _ = (perf.cmdline(), perf.pmu_mappings(), perf.build_ids());
    for item in perf.items() {
        match item {
            Ok(Item::Record(r)) => {
                let _ = r.parse();
                let _ = perf.sample(r.body);
            }
            Ok(Item::Auxtrace { data, .. }) => RecordDecoder::new().feed(data, |_| {}),
            Err(_) => break,
        }
    }
}

#[test]
fn perf_data_reader_survives_mutations() {
    let small: Vec<Vec<u8>> = ["hiperf-112", "hiperf-192"]
        .map(|f| {
            std::fs::read(fixtures().join(format!("spe-hiperf-raw/{f}.wrapped.perf.data"))).unwrap()
        })
        .into();
    let mut rng = Rng(0x5eed_0f9e_7fda_7a01);
    for i in 0..20_000 {
        read_all(&mutate(&mut rng, &small[i % 2]));
    }
    // The real PEBS file: mutate its header and attributes, its feature
    // sections and its records (each region's bytes, then the whole file).
    let pebs = std::fs::read(fixtures().join("pebs-skx-loadlat/perf.data")).unwrap();
    let data_end = 2120 + 1_237_752;
    for region in [0..2120, data_end..pebs.len(), 2120..12_000] {
        for _ in 0..300 {
            let mut v = pebs.clone();
            let m = mutate(&mut rng, &pebs[region.clone()]);
            v.splice(region.clone(), m);
            read_all(&v);
        }
    }
}
