//! perf sample bodies under an arbitrary layout, IBS op registers and perf
//! data-source values: decoded or refused, never a panic; data sources
//! re-encode to themselves.
#![no_main]
use libfuzzer_sys::fuzz_target;
use memlens_decoders::datasrc::{DataSource, PerfText};
use memlens_decoders::ibs::IbsOp;
use memlens_decoders::sample::Layout;

fuzz_target!(|data: &[u8]| {
    if data.len() < 33 {
        return;
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
        let _ = (op.level(), op.mem_width(), op.dc_miss_latency());
    }
    let d = DataSource::decode(word(0));
    let _ = (d.level(), PerfText(d).to_string());
    assert_eq!(DataSource::decode(d.encode()).encode(), d.encode());
});
