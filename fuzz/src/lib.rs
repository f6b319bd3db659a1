//! The fuzz targets' bodies: each takes arbitrary bytes through one reader of
//! untrusted input and asserts its invariant (a value or a counted error,
//! never a panic or a silent drop). libFuzzer drives them from
//! `fuzz_targets/` (`bash fuzz/run.sh`, coverage-guided); `tests/bounded.rs`
//! drives them with a fixed number of deterministic mutations of real inputs
//! in every test run. Each returns whether the input got past the first check
//! (so a bounded run can tell it reached the deeper code).

use memlens_collector::{finalize, RunInfo};
use memlens_convert::perf::{convert, first_time};
use memlens_decoders::datasrc::{DataSource, PerfText};
use memlens_decoders::ibs::IbsOp;
use memlens_decoders::perf_data::{Item, PerfData};
use memlens_decoders::sample::Layout;
use memlens_decoders::spe::{Packets, RecordDecoder};
use memlens_present::{build_report, ReportOptions};
use memlens_profile::Profile;
use memlens_rawlog::{BLOCK_SIZE, HEADER_SIZE};

/// Arm SPE packets and records, fed in two chunks split at a point the first
/// byte chooses: every byte is a packet, a counted bad byte or a counted
/// truncated tail, and the records add up.
pub fn spe_decoder(data: &[u8]) -> bool {
    let Some((&split, stream)) = data.split_first() else {
        return false;
    };
    let mut packets = Packets::new(stream);
    let mut consumed = 0u64;
    for step in packets.by_ref() {
        assert_eq!(step.offset as u64, consumed);
        assert!(step.len >= 1);
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
    true
}

/// The first 33 bytes: a sample layout (sample type, read format, register
/// masks, branch index flag); the rest: a perf sample body, an IBS op's
/// registers. Each decodes or is refused; a data source re-encodes to itself.
pub fn sample_and_registers(data: &[u8]) -> bool {
    if data.len() < 33 {
        return false;
    }
    let word = |i: usize| u64::from_le_bytes(data[i..i + 8].try_into().unwrap());
    let layout = Layout {
        sample_type: word(0) & ((1 << 25) - 1),
        read_format: word(8) & 0x1f,
        regs_user_mask: word(16),
        regs_intr_mask: word(24),
        branch_hw_index: data[32] & 1 != 0,
    };
    let body = &data[33..];
    let _ = layout.parse(body);
    if let Ok(op) = IbsOp::from_raw(body) {
        let _ = (
            op.level(),
            op.mem_width(),
            op.dc_miss_latency(),
            op.max_count(),
        );
    }
    let d = DataSource::decode(word(0));
    let _ = (d.level(), PerfText(d).to_string());
    assert_eq!(
        DataSource::decode(d.encode()),
        DataSource {
            raw: d.encode(),
            ..d
        }
    );
    true
}

/// A whole perf.data through what `memlens import` and `record` run: the
/// container, its features, every record, and the conversion into samples.
/// A record the reader refuses ends the stream and is the conversion's
/// reported damage; every sample converted is one emitted.
pub fn perf_data(data: &[u8]) -> bool {
    let Ok(perf) = PerfData::parse(data) else {
        return false;
    };
    let _ = (perf.cmdline(), perf.pmu_mappings(), perf.build_ids());
    let _ = first_time(&perf);
    let mut damaged = false;
    for item in perf.items() {
        match item {
            Ok(Item::Record(r)) => {
                let _ = r.parse();
                let _ = perf.sample(r.body);
            }
            Ok(Item::Auxtrace { data, .. }) => RecordDecoder::new().feed(data, |_| {}),
            Err(_) => damaged = true,
        }
    }
    let mut rows = 0u64;
    let c = convert(&perf, |_| rows += 1);
    assert_eq!(c.summary.samples, rows);
    assert_eq!(c.damage.is_some(), damaged, "a damaged record is reported");
    true
}

/// A runtime's raw log is 320 KiB at least (header and one block), past what
/// libFuzzer mutates well, so [`raw_log`]'s input is packed: the first
/// `HEADER_PREFIX` bytes start the header, each next `CHUNK` bytes start one
/// block, the rest of header and blocks is zero (what an untouched mapping of
/// the log reads as).
pub const HEADER_PREFIX: usize = 1024;
pub const CHUNK: usize = 4096;

/// A real log packed as [`raw_log`] reads it.
pub fn pack(log: &[u8]) -> Vec<u8> {
    let mut packed = log[..HEADER_PREFIX.min(log.len())].to_vec();
    for block in log
        .get(HEADER_SIZE..)
        .unwrap_or_default()
        .chunks(BLOCK_SIZE)
    {
        packed.extend_from_slice(&block[..CHUNK.min(block.len())]);
    }
    packed
}

fn unpack(data: &[u8]) -> Vec<u8> {
    let (header, blocks) = data.split_at(data.len().min(HEADER_PREFIX));
    let mut log = vec![0u8; HEADER_SIZE];
    log[..header.len()].copy_from_slice(header);
    for chunk in blocks.chunks(CHUNK) {
        let start = log.len();
        log.resize(start + BLOCK_SIZE, 0);
        log[start..start + chunk.len()].copy_from_slice(chunk);
    }
    log
}

/// A packed raw log through the finalizer and the report, as `memlens report`
/// runs them on a directory a killed collector left: a profile or an error,
/// and a profile it writes always loads and reports.
pub fn raw_log(data: &[u8]) -> bool {
    let dir = tempfile::tempdir().expect("temporary directory");
    let raw = dir.path().join("raw");
    std::fs::create_dir(&raw).expect("raw directory");
    std::fs::write(raw.join("1.0.mlraw"), unpack(data)).expect("log written");
    if finalize(dir.path(), &RunInfo::default(), None, None, &|_, _| {}).is_err() {
        return false;
    }
    let profile = Profile::load(dir.path()).expect("a finalized profile loads");
    let _ = build_report(&profile, &ReportOptions::default());
    true
}
