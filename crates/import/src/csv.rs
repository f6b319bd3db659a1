//! `memlens export DIR --csv`: the samples of a profile in the columns of Arm's
//! spe-parser load/store CSV (Arm SPE methodology, figure 2.4), so existing scripts read
//! memlens profiles from any backend.

use memlens_decoders::{spe, MemLevel};
use memlens_profile::{self as profile, AccessSample, Meta};
use std::io::Write;
use std::path::Path;

pub const CSV_HEADER: &str = "cpu,op,pc,el,atomic,excl,ar,subclass,event,issue_lat,total_lat,vaddr,xlat_lat,paddr,data_source,ts";

/// The load/store subclass as spe-parser names it (empty for software samples).
fn subclass_name(s: &AccessSample) -> &'static str {
    if s.events == 0 && s.hw_source.is_none() && s.op_subclass == 0 && s.data_src == 0 {
        return "";
    }
    match s.op_subclass & 0xfe {
        0x00 => "GP-REG",
        0x04 => "SIMD-FP",
        0x10 => "UNSPEC-REG",
        0x30 => "NV-SYSREG",
        0x14 => "MTE-TAG",
        0x20 => "MEMCPY",
        0x24 => "MEMSET",
        p if p & 0x0a == 0x08 => "SVE",
        _ => "",
    }
}

fn opt(v: Option<u32>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// Writes one CSV row per sample; `ts` is the sample's perf/monotonic time in ns.
pub fn export_csv(dir: &Path, out: &mut dyn Write) -> Result<u64, profile::ProfileError> {
    let meta = Meta::read(dir)?;
    let samples: Vec<AccessSample> = profile::read_table(dir)?;
    let io = |cause| profile::ProfileError::Io {
        path: dir.to_path_buf(),
        cause,
    };
    writeln!(out, "{CSV_HEADER}").map_err(io)?;
    for s in &samples {
        let atomic = s.op_subclass & 0xe2 == 0x02;
        let flag = |bit: u8| (atomic && s.op_subclass & bit != 0).to_string();
        // Kernel-half addresses ran at EL1.
        let el = u8::from(s.pc >> 56 == 0xff);
        writeln!(
            out,
            "{},{},{:#x},{el},{},{},{},{},{},{},{},{:#x},{},{},{},{}",
            s.cpu,
            if s.is_store { "ST" } else { "LD" },
            s.pc,
            flag(0x4),
            flag(0x8),
            flag(0x10),
            subclass_name(s),
            spe::event_names(s.events).replace(' ', ":"),
            opt(s.issue_latency),
            opt(s.latency),
            s.address,
            opt(s.translation_latency),
            s.phys_addr.map(|a| format!("{a:#x}")).unwrap_or_default(),
            MemLevel::from_code(s.level).name(),
            meta.clock.start_ns + s.time_ns,
        )
        .map_err(io)?;
    }
    out.flush().map_err(io)?;
    Ok(samples.len() as u64)
}
