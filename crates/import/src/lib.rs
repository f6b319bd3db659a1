//! `memlens import`: a perf.data file with PEBS, IBS or Arm SPE samples becomes a
//! memlens profile, so every report works on what users recorded with `perf
//! record` / `perf mem record`; and `memlens export --csv` writes samples in
//! spe-parser's columns.
//!
//! The container, the sample bodies and the hardware formats are read with
//! memlens' own bounded decoders (`memlens_decoders::perf_data`).

mod csv;

pub use csv::export_csv;

use memlens_collector::symbols::{LoadedModule, Symbolizer};
use memlens_decoders::datasrc::DataSource;
use memlens_decoders::ibs::IbsOp;
use memlens_decoders::perf_data::{feature, u32_at, u64_at, user, Item, PerfData};
use memlens_decoders::record::{self, aux_flag, Parsed};
use memlens_decoders::sample::{self, Layout};
use memlens_decoders::spe::{self, RecordDecoder};
use memlens_profile::{self as profile, AccessSample, CodeLocation, Losses, Meta, Module, Process};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{path}: {detail}; give a perf.data written by `perf record` (file or pipe mode)")]
    NotPerfData { path: PathBuf, detail: String },
    #[error("{path}: {detail}, and no load/store samples precede it; re-record (or copy the file again if it was cut in transfer)")]
    Corrupt { path: PathBuf, detail: String },
    #[error("{path}: no load/store samples ({skipped} samples or SPE records of other operations, {damaged} damaged or cut); record with `perf mem record` or an SPE/IBS event")]
    NoMemorySamples {
        path: PathBuf,
        skipped: u64,
        damaged: u64,
    },
    #[error(transparent)]
    Profile(#[from] profile::ProfileError),
}

/// What an import found, for the command's summary.
#[derive(Debug, Default)]
pub struct ImportSummary {
    pub backends: Vec<String>,
    pub samples: u64,
    /// Samples or SPE records that were not loads or stores (branches, other ops,
    /// events without an address).
    pub skipped: u64,
    pub losses: Losses,
    pub spe: spe::StreamStats,
}

/// PERF_AUXTRACE_ARM_SPE in AUXTRACE_INFO.
const AUXTRACE_ARM_SPE: u32 = 4;

/// perf's conversion of a hardware counter (SPE timestamps) to perf time.
#[derive(Clone, Copy, Debug)]
struct TimeConv {
    shift: u16,
    mult: u32,
    zero: u64,
}

impl TimeConv {
    fn to_ns(self, cycles: u64) -> u64 {
        let quot = cycles >> self.shift;
        let rem = cycles & ((1u64 << self.shift) - 1);
        self.zero
            .wrapping_add(quot.wrapping_mul(u64::from(self.mult)))
            .wrapping_add((rem.wrapping_mul(u64::from(self.mult))) >> self.shift)
    }

    fn parse(b: &[u8]) -> Option<TimeConv> {
        Some(TimeConv {
            shift: u64_at(b, 0)? as u16,
            mult: u64_at(b, 8)? as u32,
            zero: u64_at(b, 16)?,
        })
    }
}

/// A sample before its time is made relative to the run's start.
struct Pending {
    row: AccessSample,
    absolute_ns: u64,
}

#[derive(Default)]
struct Collected {
    samples: Vec<Pending>,
    comms: BTreeMap<u32, String>,
    /// Mappings by pid, as MMAP records gave them.
    modules: Vec<(u32, LoadedModule)>,
    summary: ImportSummary,
    backends: HashSet<&'static str>,
    /// Build IDs perf noted for the files that got samples, by path.
    build_ids: HashMap<String, Vec<u8>>,
}

/// Imports `file` into the profile directory `out`.
pub fn import(file: &Path, out: &Path) -> Result<ImportSummary, ImportError> {
    let not_perf = |detail: String| ImportError::NotPerfData {
        path: file.to_path_buf(),
        detail,
    };
    let f = std::fs::File::open(file).map_err(|e| not_perf(e.to_string()))?;
    // SAFETY: the map is read-only and lives for this call; perf.data files are
    // not rewritten in place while being imported.
    let map = unsafe { memmap2::Mmap::map(&f) }.map_err(|e| not_perf(e.to_string()))?;
    let perf = PerfData::parse(&map).map_err(|e| not_perf(e.to_string()))?;

    let pmu_names = perf.pmu_mappings();
    let layouts: Vec<Layout> = perf.events.iter().map(|e| e.attr.layout()).collect();
    let is_ibs: Vec<bool> = perf
        .events
        .iter()
        .map(|e| {
            let by_name = e.name.as_deref().is_some_and(|n| n.contains("ibs_op"));
            let by_pmu = pmu_names.get(&e.attr.type_).is_some_and(|n| n == "ibs_op");
            by_name || by_pmu
        })
        .collect();
    let neoverse = perf
        .string_feature(feature::CPUID)
        .and_then(|id| u64::from_str_radix(id.trim().trim_start_matches("0x"), 16).ok())
        .is_some_and(spe::is_neoverse);

    let mut c = Collected {
        build_ids: perf.build_ids(),
        ..Collected::default()
    };
    let mut time_conv: Option<TimeConv> = None;
    // One decoder per AUX buffer: a record may straddle two of its chunks.
    let mut spe_decoders: HashMap<u32, RecordDecoder> = HashMap::new();
    let mut spe_seen = false;
    let mut spe_rows: Vec<(spe::Record, u32, u32)> = Vec::new();

    let mut damage = None;
    for item in perf.items() {
        let record = match item {
            Ok(Item::Record(r)) => r,
            Ok(Item::Auxtrace {
                idx,
                tid,
                cpu,
                data,
                ..
            }) => {
                if spe_seen {
                    spe_decoders
                        .entry(idx)
                        .or_default()
                        .feed(data, |r| spe_rows.push((*r, tid, cpu)));
                }
                continue;
            }
            Err(e) => {
                // What was read so far stays importable.
                c.summary.losses.decode_errors += 1;
                damage = Some(e);
                break;
            }
        };
        match record.kind {
            record::kind::SAMPLE => {
                let Some(event) = perf.event_of_sample(record.body) else {
                    c.summary.losses.decode_errors += 1;
                    continue;
                };
                match layouts[event].parse(record.body) {
                    Ok(s) => c.add_sample(&s, is_ibs[event]),
                    Err(_) => c.summary.losses.decode_errors += 1,
                }
            }
            user::AUXTRACE_INFO => spe_seen |= u32_at(record.body, 0) == Some(AUXTRACE_ARM_SPE),
            user::TIME_CONV => time_conv = TimeConv::parse(record.body),
            _ => match record.parse() {
                Some(Parsed::Comm { pid, name }) => {
                    c.comms
                        .insert(pid, String::from_utf8_lossy(name).into_owned());
                }
                Some(Parsed::Mmap {
                    pid,
                    start,
                    len,
                    pgoff,
                    path,
                }) => c.add_mapping(pid, start, len, pgoff, path),
                Some(Parsed::Lost { count } | Parsed::LostSamples { count }) => {
                    c.summary.losses.lost_samples += count
                }
                Some(Parsed::Throttle) => c.summary.losses.throttled += 1,
                Some(Parsed::Aux { flags, .. }) => {
                    let l = &mut c.summary.losses;
                    l.aux_truncated += (flags & aux_flag::TRUNCATED != 0) as u64;
                    l.aux_partial += (flags & aux_flag::PARTIAL != 0) as u64;
                    l.aux_collisions += (flags & aux_flag::COLLISION != 0) as u64;
                }
                None => {}
            },
        }
    }
    for decoder in spe_decoders.values_mut() {
        let stats = decoder.finish();
        c.summary.spe.records += stats.records;
        c.summary.spe.bad_bytes += stats.bad_bytes;
        c.summary.spe.truncated_bytes += stats.truncated_bytes;
        c.summary.spe.partial_records += stats.partial_records;
        c.summary.losses.decode_errors +=
            stats.bad_bytes + stats.truncated_bytes + stats.partial_records;
    }
    for (r, tid, cpu) in &spe_rows {
        c.add_spe(r, *tid, *cpu, neoverse, time_conv);
    }
    match damage {
        Some(e) if c.samples.is_empty() => {
            return Err(ImportError::Corrupt {
                path: file.to_path_buf(),
                detail: e.to_string(),
            })
        }
        Some(e) => eprintln!(
            "memlens import: {}: stopped at a {e}; importing what precedes it",
            file.display()
        ),
        None if c.samples.is_empty() => {
            return Err(ImportError::NoMemorySamples {
                path: file.to_path_buf(),
                skipped: c.summary.skipped,
                damaged: c.summary.losses.decode_errors,
            })
        }
        None => {}
    }

    let text = |bit| perf.string_feature(bit).unwrap_or_default();
    let (host, cpu, kernel) = (
        text(feature::HOSTNAME),
        text(feature::CPUDESC),
        text(feature::OSRELEASE),
    );
    let command = perf.cmdline();
    let periods = perf.events.iter().filter_map(|e| e.attr.period());
    let period = periods.max().unwrap_or(0);
    c.write(
        out,
        Meta {
            format_version: profile::FORMAT_VERSION,
            memlens_version: env!("CARGO_PKG_VERSION").to_string(),
            command,
            host,
            cpu,
            kernel,
            backend: Vec::new(),
            settings: profile::Settings {
                access_period: if spe_seen { 0 } else { period },
                sample_loads: true,
                sample_stores: true,
                ..Default::default()
            },
            ..Default::default()
        },
    )
}

impl Collected {
    fn add_mapping(&mut self, pid: u32, start: u64, len: u64, pgoff: u64, path: &[u8]) {
        let path = String::from_utf8_lossy(path).into_owned();
        let module = LoadedModule {
            path,
            start,
            end: start.saturating_add(len),
            bias: start.wrapping_sub(pgoff),
        };
        self.modules.push((pid, module));
    }

    fn add_sample(&mut self, s: &sample::Sample, ibs: bool) {
        let mut row = AccessSample {
            pid: s.pid.unwrap_or(0),
            tid: s.tid.unwrap_or(0),
            cpu: s.cpu.unwrap_or(0),
            pc: s.ip.unwrap_or(0),
            data_src: s.data_src.unwrap_or(0),
            phys_addr: s.phys_addr.filter(|&a| a != 0),
            ..AccessSample::default()
        };
        if ibs {
            let Some(op) = s.raw.and_then(|raw| IbsOp::from_raw(raw).ok()) else {
                self.summary.losses.decode_errors += 1;
                return;
            };
            if !(op.is_load() || op.is_store()) || !op.lin_addr_valid() {
                self.summary.skipped += 1;
                return;
            }
            self.backends.insert("ibs");
            row.pc = op.rip;
            row.address = op.dc_lin_addr;
            row.is_store = op.is_store();
            row.size = op.mem_width();
            row.level = op.level().code();
            row.latency = Some(op.dc_miss_latency() as u32).filter(|&l| l > 0);
            row.translation_latency = Some(op.tlb_refill_latency() as u32).filter(|&l| l > 0);
            row.phys_addr = op.phys_addr_valid().then_some(op.dc_phys_addr);
            row.hw_source = Some(u64::from(op.data_source()));
        } else {
            let (Some(addr), Some(data_src)) = (s.addr, s.data_src) else {
                self.summary.skipped += 1;
                return;
            };
            let d = DataSource::decode(data_src);
            self.backends.insert("pebs");
            row.address = addr;
            row.is_store = d.is_store();
            row.level = d.level().code();
            row.latency = s.weight.map(|w| w.min(u64::from(u32::MAX)) as u32);
        }
        self.samples.push(Pending {
            row,
            absolute_ns: s.time.unwrap_or(0),
        });
    }

    fn add_spe(
        &mut self,
        r: &spe::Record,
        aux_tid: u32,
        cpu: u32,
        neoverse: bool,
        time_conv: Option<TimeConv>,
    ) {
        if !r.op.is_memory() {
            self.summary.skipped += 1;
            return;
        }
        self.backends.insert("spe");
        let (spe::Op::Load { subclass } | spe::Op::Store { subclass }) = r.op else {
            return;
        };
        // CONTEXT carries the PID when the kernel writes it there; a per-thread
        // AUX buffer names its thread.
        let tid = r
            .context
            .unwrap_or(if aux_tid == u32::MAX { 0 } else { aux_tid });
        let ts = r.timestamp.unwrap_or(0);
        self.samples.push(Pending {
            row: AccessSample {
                pid: tid,
                tid,
                cpu,
                pc: r.pc.map_or(0, |p| p.address),
                address: r.va.unwrap_or(0),
                size: 0,
                is_store: matches!(r.op, spe::Op::Store { .. }),
                level: r.level(neoverse).code(),
                data_src: r.perf_data_src(neoverse),
                latency: r.total_latency.map(u32::from),
                issue_latency: r.issue_latency.map(u32::from),
                translation_latency: r.translation_latency.map(u32::from),
                phys_addr: r.pa.map(|p| p.address),
                events: r.events,
                hw_source: r.data_source,
                op_subclass: subclass,
                ..AccessSample::default()
            },
            absolute_ns: time_conv.map_or(ts, |t| t.to_ns(ts)),
        });
    }

    fn write(mut self, out: &Path, mut meta: Meta) -> Result<ImportSummary, ImportError> {
        std::fs::create_dir_all(out).map_err(|source| profile::ProfileError::Io {
            path: out.to_path_buf(),
            source,
        })?;
        self.samples.sort_by_key(|p| p.absolute_ns);
        let start = self.samples.first().map_or(0, |p| p.absolute_ns);
        let end = self.samples.last().map_or(0, |p| p.absolute_ns);

        // Symbolize only against files that are the ones recorded: a library of
        // the same path on this machine is usually another build. Each path is
        // checked once, however many processes mapped it.
        let paths: HashSet<&str> = self.modules.iter().map(|(_, m)| m.path.as_str()).collect();
        let usable: HashSet<&str> = paths
            .into_iter()
            .filter(|p| {
                self.build_ids
                    .get(*p)
                    .is_some_and(|id| local_build_id_matches(p, id))
            })
            .collect();
        let mut modules_by_pid: HashMap<u32, Vec<LoadedModule>> = HashMap::new();
        let mut symbolizable_by_pid: HashMap<u32, Vec<LoadedModule>> = HashMap::new();
        for (pid, m) in &self.modules {
            modules_by_pid.entry(*pid).or_default().push(m.clone());
            if usable.contains(m.path.as_str()) {
                symbolizable_by_pid.entry(*pid).or_default().push(m.clone());
            }
        }
        let mut symbolizer = Symbolizer::default();
        let mut locations = Vec::new();
        let mut seen = HashSet::new();
        let mut pids = HashSet::new();
        let mut writer = profile::TableWriter::<AccessSample>::create(out)?;
        for p in &self.samples {
            let mut row = p.row.clone();
            row.time_ns = p.absolute_ns.saturating_sub(start);
            pids.insert(row.pid);
            if seen.insert((row.pid, row.pc)) {
                let mods = symbolizable_by_pid
                    .get(&row.pid)
                    .map_or(&[][..], |v| v.as_slice());
                let mut loc = symbolizer.location(row.pid, row.pc, mods, false);
                if loc.module == "?" || loc.module.is_empty() {
                    // Not symbolizable here: name the mapping it fell in, at least.
                    if let Some(m) = modules_by_pid
                        .get(&row.pid)
                        .and_then(|v| v.iter().rev().find(|m| row.pc >= m.start && row.pc < m.end))
                    {
                        loc.module = memlens_collector::symbols::short_name(&m.path);
                        loc.function = format!("{}+{:#x}", loc.module, row.pc.wrapping_sub(m.bias));
                    }
                }
                locations.push(loc);
            }
            writer.push(row);
        }
        writer.finish()?;
        profile::write_table::<CodeLocation>(out, &locations)?;
        let module_rows: Vec<Module> = self
            .modules
            .iter()
            .filter(|(pid, _)| pids.contains(pid))
            .map(|(pid, m)| Module {
                pid: *pid,
                path: m.path.clone(),
                start: m.start,
                end: m.end,
                bias: m.bias,
                load_ns: 0,
            })
            .collect();
        profile::write_table(out, &module_rows)?;
        profile::write_table::<profile::Allocation>(out, &[])?;
        profile::write_table::<profile::Frame>(out, &[])?;
        profile::write_table::<profile::Region>(out, &[])?;
        profile::write_table::<profile::TagRange>(out, &[])?;
        profile::write_table::<profile::TimelinePoint>(out, &[])?;
        profile::write_table::<profile::StaticObject>(out, &[])?;

        let mut backends: Vec<String> = self.backends.iter().map(|b| b.to_string()).collect();
        backends.sort();
        backends.push("perf.data import".into());
        meta.backend = backends.clone();
        meta.clock = profile::Clock {
            source: "perf timestamps of the imported file".into(),
            start_ns: start,
            duration_ns: end - start,
        };
        let mut pid_list: Vec<u32> = pids.into_iter().collect();
        pid_list.sort_unstable();
        meta.processes = pid_list
            .into_iter()
            .map(|pid| Process {
                pid,
                exe: self.comms.get(&pid).cloned().unwrap_or_default(),
                start_ns: 0,
                end_ns: Some(end - start),
                ..Default::default()
            })
            .collect();
        meta.losses = self.summary.losses.clone();
        meta.write(out)?;
        self.summary.backends = backends;
        self.summary.samples = self.samples.len() as u64;
        Ok(self.summary)
    }
}

/// Whether the local file at `path` has the build ID the recording noted for it.
fn local_build_id_matches(path: &str, recorded: &[u8]) -> bool {
    let Ok(bytes) = std::fs::read(path) else {
        return false;
    };
    use object::Object;
    object::File::parse(&*bytes)
        .ok()
        .and_then(|f| f.build_id().ok().flatten().map(|id| id.to_vec()))
        .is_some_and(|id| !id.is_empty() && recorded.starts_with(&id))
}
