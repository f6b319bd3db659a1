//! The decoders against real recordings and the output Linux perf 6.1 gave for
//! them (tests/fixtures, see PROVENANCE.md there).

use memlens_decoders::datasrc::{self, DataSource};
use memlens_decoders::ibs::IbsOp;
use memlens_decoders::spe::{self, event, Op, Packets, RecordDecoder};
use memlens_decoders::MemLevel;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

fn spe_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["spe-hiperf-raw", "spe-vectors"] {
        for entry in std::fs::read_dir(fixtures().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "spe") {
                files.push(path);
            }
        }
    }
    files.sort();
    assert_eq!(files.len(), 6, "SPE fixtures: {files:?}");
    files
}

/// `perf report -D` lines: (offset, bytes, text).
fn perf_dump(path: &Path) -> Vec<(usize, String, String)> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix(".  "))
        .map(|l| {
            let (offset, rest) = l.split_once(":  ").unwrap();
            let bytes_area: String = rest.chars().take(48).collect();
            let text = rest.chars().skip(48).collect::<String>().trim().to_string();
            let bytes = bytes_area.split_whitespace().collect::<Vec<_>>().join(" ");
            (usize::from_str_radix(offset, 16).unwrap(), bytes, text)
        })
        .collect()
}

#[test]
fn spe_packets_match_perf_report_dump() {
    for spe_path in spe_files() {
        let mut bytes = std::fs::read(&spe_path).unwrap();
        // The perf.data container pads the AUX payload to 8 bytes.
        bytes.resize(bytes.len().div_ceil(8) * 8, 0);
        let dump = spe_path.with_extension("perf-report-D.txt");
        let expected = perf_dump(&dump);
        let ours: Vec<(usize, String, String)> = Packets::new(&bytes)
            .map(|step| {
                let b = bytes[step.offset..step.offset + step.len]
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<Vec<_>>()
                    .join(" ");
                (
                    step.offset,
                    b,
                    spe::PerfText(step.packet).to_string().trim().to_string(),
                )
            })
            .collect();
        assert_eq!(ours, expected, "{}", spe_path.display());
    }
}

/// The samples `perf script` synthesises from a record, as perf 6.1's default
/// itrace options do: one line per event kind, then `memory` for loads/stores.
fn perf_script_lines(r: &spe::Record) -> Vec<String> {
    let mut kinds = Vec::new();
    for (bit, name) in [
        (event::L1D_REFILL, "l1d-miss"),
        (event::L1D_ACCESS, "l1d-access"),
        (event::LLC_REFILL, "llc-miss"),
        (event::LLC_ACCESS, "llc-access"),
        (event::TLB_REFILL, "tlb-miss"),
        (event::TLB_ACCESS, "tlb-access"),
        (event::REMOTE_ACCESS, "remote-access"),
    ] {
        if r.events & bit != 0 {
            kinds.push(name);
        }
    }
    if r.op.is_memory() {
        kinds.push("memory");
    }
    let data_src = r.perf_data_src(false);
    kinds
        .iter()
        .map(|kind| {
            format!(
                "{kind}: {:x} {:x} {} {} {:x}",
                r.va.unwrap_or(0),
                data_src,
                datasrc::PerfText(DataSource::decode(data_src)),
                r.total_latency.unwrap_or(0),
                r.pc.map_or(0, |pc| pc.address)
            )
        })
        .collect()
}

#[test]
fn spe_records_match_perf_script_samples() {
    let mut checked = 0;
    for spe_path in spe_files() {
        let script = spe_path.with_extension("perf-script.txt");
        let Ok(text) = std::fs::read_to_string(&script) else {
            continue;
        };
        // "-1 [000] 1 kind: addr data_src |OP ...|BLK  N/A weight ip", compared
        // from the event kind on, whitespace-normalised.
        let expected: Vec<String> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| l.split_whitespace().skip(3).collect::<Vec<_>>().join(" "))
            .collect();
        let bytes = std::fs::read(&spe_path).unwrap();
        let mut decoder = RecordDecoder::new();
        let mut ours = Vec::new();
        decoder.feed(&bytes, |r| ours.extend(perf_script_lines(r)));
        let ours: Vec<String> = ours
            .iter()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        assert_eq!(ours, expected, "{}", spe_path.display());
        checked += expected.len();
    }
    assert_eq!(checked, 8, "perf-script lines compared");
}

#[test]
fn spe_branch_records_match_spe_parser_csv() {
    for name in ["armts-wperf-b1-ts0", "armts-wperf-b1-ts1"] {
        let dir = fixtures().join("spe-vectors");
        let bytes = std::fs::read(dir.join(format!("{name}.spe"))).unwrap();
        let csv = std::fs::read_to_string(dir.join(format!("{name}.csv"))).unwrap();
        let row: Vec<&str> = csv.lines().nth(1).unwrap().split(',').collect();
        let mut records = Vec::new();
        let mut decoder = RecordDecoder::new();
        decoder.feed(&bytes, |r| records.push(*r));
        assert_eq!(records.len(), 1, "{name}");
        let r = records[0];
        let pc = r.pc.unwrap();
        let target = r.branch_target.unwrap();
        let Op::Branch { subclass } = r.op else {
            panic!("{name}: not a branch: {:?}", r.op)
        };
        let ours = [
            r.op.short_name().to_string(),
            format!("{:#x}", pc.address),
            pc.el.to_string(),
            (subclass & 1 != 0).to_string(),
            (subclass & 0xfe == 0x02).to_string(),
            spe::event_names(r.events).replace(' ', ":"),
            r.issue_latency.unwrap().to_string(),
            r.total_latency.unwrap().to_string(),
            format!("{:#x}", target.address),
            target.el.to_string(),
            r.timestamp.unwrap_or(0).to_string(),
        ];
        let theirs = [
            row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8], row[9], row[10],
            row[14],
        ];
        assert_eq!(ours.to_vec(), theirs.to_vec(), "{name}");
    }
}

#[test]
fn spe_load_record_with_physical_address_and_data_source() {
    let bytes = std::fs::read(fixtures().join("spe-vectors/armts-linux-ldst-frame.spe")).unwrap();
    let mut decoder = RecordDecoder::new();
    let mut records = Vec::new();
    decoder.feed(&bytes, |r| records.push(*r));
    let stats = decoder.finish();
    // A leading timestamp closes an (empty) record; the load record that follows
    // has no END or timestamp before the frame ends.
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].timestamp, Some(13196304120239));
    assert_eq!(stats.partial_records, 1);
    let mut decoder = RecordDecoder::new();
    decoder.feed(&bytes[9..], |_| {});
    decoder.feed(&[0x01], |r| records.push(*r));
    let load = records[1];
    assert_eq!(load.pc.unwrap().address, 0xaaaae4a9b600);
    assert!(matches!(load.op, Op::Load { subclass: 0 }));
    assert_eq!(load.va, Some(0xaaaae65dda43));
    let pa = load.pa.unwrap();
    assert_eq!(
        (pa.address, pa.ns, pa.ch, pa.pat),
        (0x8032c955a43, true, false, 0)
    );
    assert_eq!(load.data_source, Some(0));
    assert_eq!(
        (
            load.issue_latency,
            load.total_latency,
            load.translation_latency
        ),
        (Some(4), Some(8), Some(1))
    );
    assert_eq!(load.level(true), MemLevel::L1, "Neoverse source 0 is L1D");
    assert_eq!(load.level(false), MemLevel::L1, "L1D-ACCESS without refill");
}

#[test]
fn spe_corrupt_stream_resynchronises_and_counts() {
    let bytes = std::fs::read(fixtures().join("spe-hiperf-raw/hiperf-112.spe")).unwrap();
    let mut decoder = RecordDecoder::new();
    let mut records = Vec::new();
    decoder.feed(&bytes, |r| records.push(*r));
    let stats = decoder.finish();
    assert_eq!(
        stats.bad_bytes, 6,
        "0x90 70 0a 6b 5a and 0x80 start no packet"
    );
    // After the bad bytes the branch record is decoded whole.
    let branch = records.iter().find(|r| r.branch_target.is_some()).unwrap();
    assert_eq!(branch.branch_target.unwrap().address, 0x5a6b0a710c);
    assert_eq!(branch.context, Some(0x5bb));
    assert_eq!(branch.total_latency, Some(3));
}

#[test]
fn spe_streams_split_anywhere_decode_the_same() {
    for spe_path in spe_files() {
        let bytes = std::fs::read(&spe_path).unwrap();
        let mut whole = Vec::new();
        let mut d = RecordDecoder::new();
        d.feed(&bytes, |r| whole.push(*r));
        let whole_stats = d.finish();
        for cut in 1..bytes.len() {
            let mut parts = Vec::new();
            let mut d = RecordDecoder::new();
            d.feed(&bytes[..cut], |r| parts.push(*r));
            d.feed(&bytes[cut..], |r| parts.push(*r));
            let stats = d.finish();
            let strip = |v: &[spe::Record]| {
                v.iter()
                    .map(|r| spe::Record { offset: 0, ..*r })
                    .collect::<Vec<_>>()
            };
            assert_eq!(
                strip(&parts),
                strip(&whole),
                "{} cut at {cut}",
                spe_path.display()
            );
            assert_eq!(stats.records, whole_stats.records);
        }
    }
}

#[test]
fn spe_address_canonicalisation_vectors() {
    // SPE-FORMAT.md section 5 and the telemetry-solution vectors.
    let pc = spe::CodeAddress::from_payload(0xc0ffc0c2868c8b5c);
    assert_eq!((pc.address, pc.el, pc.ns), (0xffffc0c2868c8b5c, 2, true));
    assert_eq!(spe::data_va(0x00fffc2007c226c0), 0xfffffc2007c226c0);
    assert_eq!(spe::data_va(0x00ff000070d840d0), 0xffff000070d840d0);
    assert_eq!(spe::data_va(0x5a812b7360), 0x5a812b7360);
    let text = |b: &[u8]| {
        let step = Packets::new(b).next().unwrap();
        spe::PerfText(step.packet).to_string()
    };
    assert_eq!(text(&[0x49, 0x16]), "LD AT AR");
    assert_eq!(text(&[0x49, 0x05]), "ST SIMD-FP");
    assert_eq!(text(&[0x49, 0x02]), "LD");
    assert_eq!(text(&[0x48, 0x01]), "OTHER COND-SELECT");
    assert_eq!(
        text(&[0x52, 0x1e, 0x03]),
        "EV RETIRED L1D-ACCESS L1D-REFILL TLB-ACCESS LLC-ACCESS LLC-REFILL"
    );
    assert_eq!(text(&[0x4a, 0x12]), "B");
    assert_eq!(
        text(&[0xb4, 0, 0, 0, 0, 0, 0, 0, 0x80]),
        "ADDR 0x8000000000000000 (4)"
    );
    assert_eq!(
        text(&[0x71, 0x6c, 0xf8, 0xa5, 0x83, 0x00, 0x0c, 0x00, 0x00]),
        "TS 13196348225644"
    );
    // Extended header: index 8 + (byte1 & 7), here an address packet of index 8.
    let step = Packets::new(&[0x21, 0xb0, 1, 0, 0, 0, 0, 0, 0, 0])
        .next()
        .unwrap();
    assert_eq!(
        step.packet,
        Some(spe::Packet::Address {
            index: 8,
            payload: 1
        })
    );
    assert_eq!(step.len, 10);
}

#[test]
fn data_source_fields_match_perf_text() {
    // Every data_src of the PEBS fixture with perf's text for it, and the
    // worked examples of DATA-SRC.md.
    let script =
        std::fs::read_to_string(fixtures().join("pebs-skx-loadlat/perf.data.perf-script.txt"))
            .unwrap();
    let mut seen = 0;
    for line in script.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let Some(pos) = fields.iter().position(|f| f.starts_with("|OP")) else {
            continue;
        };
        let value = u64::from_str_radix(fields[pos - 1], 16).unwrap();
        let text_end = fields.len() - 3;
        let theirs = fields[pos..text_end].join(" ");
        let ours = datasrc::PerfText(DataSource::decode(value))
            .to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(ours, theirs, "{value:#x}");
        assert_eq!(DataSource::decode(value).encode(), value);
        seen += 1;
    }
    assert_eq!(seen, 14);
    let d = DataSource::decode(0x10650100842);
    assert_eq!(
        (d.op, d.lvl, d.snoop, d.lock, d.dtlb, d.lvl_num, d.blk),
        (2, 0x42, 2, 0, 0x14, 3, 1)
    );
    assert_eq!(d.level(), MemLevel::Llc);
    assert_eq!(
        DataSource::decode(0x11868100242).level(),
        MemLevel::FillBuffer
    );
    assert_eq!(DataSource::decode(0x10268100142).level(), MemLevel::L1);
    assert_eq!(DataSource::decode(0x10468100442).level(), MemLevel::L2);
    let locked = DataSource::decode(0x6a100142);
    assert_eq!((locked.lock, locked.level()), (2, MemLevel::L1));
    let spe = DataSource::decode(0x88000142);
    assert_eq!((spe.dtlb, spe.snoop), (0x22, 0));
}

#[test]
fn ibs_registers_match_perf_decode() {
    // IBS-VECTORS.md vector B (a store that missed to DRAM on a remote node).
    let mut raw = Vec::new();
    raw.extend_from_slice(&0u32.to_le_bytes());
    for reg in [
        0x000002c30006186au64,
        0xffffffff8204aea7,
        0x0000010002550001,
        0x0000000000000013,
        0x0000000031960092,
        0xff110008a5398920,
        0x00000008a5398920,
    ] {
        raw.extend_from_slice(&reg.to_le_bytes());
    }
    let op = IbsOp::from_raw(&raw).unwrap();
    assert_eq!(op.max_count(), 100000);
    assert_eq!(op.current_count(), 707);
    assert!(op.enabled() && op.valid() && !op.l3_miss_only() && !op.counts_ops());
    assert_eq!(
        (op.comp_to_ret(), op.tag_to_ret(), op.microcode()),
        (1, 597, true)
    );
    assert_eq!((op.data_source(), op.remote_node()), (3, true));
    assert!(!op.is_load() && op.is_store() && op.dc_l1_tlb_hit_2m() && op.dc_miss());
    assert!(op.lin_addr_valid() && op.phys_addr_valid() && op.l2_miss());
    assert_eq!((op.mem_width(), op.open_mem_reqs()), (32, 12));
    assert_eq!((op.dc_miss_latency(), op.tlb_refill_latency()), (0, 0));
    assert_eq!(op.dc_lin_addr, 0xff110008a5398920);
    assert_eq!(op.level(), MemLevel::RemoteDram);

    // Vector A (Zen 4, a load served by a peer cache in a near CCX).
    let a = IbsOp {
        ctl: 0x0000004500070008,
        data: 0x0000000000710002,
        data2: 0x2,
        data3: 0x000000681d1700a1,
        ..IbsOp::default()
    };
    assert_eq!(
        (a.max_count(), a.current_count(), a.l3_miss_only()),
        (128, 69, true)
    );
    assert_eq!((a.comp_to_ret(), a.tag_to_ret()), (2, 113));
    assert!(a.is_load() && a.dc_l1_tlb_hit_1g() && a.dc_miss() && a.dc_miss_no_mab_alloc());
    assert!(a.lin_addr_valid() && a.phys_addr_valid() && !a.dc_l2_tlb_hit_1g() && a.l2_miss());
    assert_eq!(
        (a.mem_width(), a.open_mem_reqs(), a.dc_miss_latency()),
        (8, 7, 104)
    );
    assert_eq!((a.data_source(), a.cache_hit_owned()), (2, false));
    assert_eq!(a.level(), MemLevel::PeerCache);

    assert!(IbsOp::from_raw(&raw[..40]).is_err());
}

/// An atomic load or store is what perf's text marks " AT", for every
/// subclass byte.
#[test]
fn spe_atomic_operations_are_the_ones_perf_marks_at() {
    for subclass in 0..=255u8 {
        let text = spe::PerfText(Some(spe::Packet::OpType { class: 1, subclass })).to_string();
        let op = if subclass & 1 != 0 {
            Op::Store { subclass }
        } else {
            Op::Load { subclass }
        };
        assert_eq!(
            op.is_atomic(),
            text.contains(" AT"),
            "{subclass:#x}: {text}"
        );
    }
}

/// The locked loads are the ones perf script prints "LCK Yes".
#[test]
fn pebs_locked_loads_are_the_ones_perf_script_marks() {
    let script =
        std::fs::read_to_string(fixtures().join("pebs-skx-loadlat/perf.data.perf-script.txt"))
            .unwrap();
    let mut checked = 0;
    for line in script.lines().filter(|l| l.contains("|OP ")) {
        // perf script prints the raw data_src, in hex, before its text.
        let before = line.split("|OP ").next().unwrap();
        let raw = u64::from_str_radix(before.split_whitespace().last().unwrap(), 16).unwrap();
        let d = DataSource::decode(raw);
        assert_eq!(d.is_locked(), line.contains("|LCK Yes|"), "{line}");
        checked += 1;
    }
    assert_eq!(checked, 14);
}
