//! `memlens import`: a perf.data file with PEBS, IBS or Arm SPE samples becomes a
//! memlens profile, so every report works on what users recorded with `perf
//! record` / `perf mem record`; and `memlens export --csv` writes samples in
//! spe-parser's columns.
//!
//! The container (header, attributes, features, record order, AUXTRACE data) is
//! read with the linux-perf-data crate; the sample bodies and the hardware formats
//! with memlens' own decoders.

mod csv;

pub use csv::export_csv;

use linux_perf_data::linux_perf_event_reader::{EventRecord, PerfEventType};
use linux_perf_data::{PerfFileReader, PerfFileRecord, UserRecord, UserRecordType};
use memlens_collector::symbols::{LoadedModule, Symbolizer};
use memlens_decoders::datasrc::DataSource;
use memlens_decoders::ibs::IbsOp;
use memlens_decoders::sample::{self, Layout};
use memlens_decoders::spe::{self, RecordDecoder};
use memlens_profile::{self as profile, AccessSample, CodeLocation, Losses, Meta, Module, Process};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{path}: {detail}; give a perf.data written by `perf record` (file or pipe mode)")]
    NotPerfData { path: PathBuf, detail: String },
    #[error("{path}: {detail}; the file is damaged after this point (re-record, or import what precedes it with a truncated copy)")]
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

/// PERF_RECORD_AUX flags.
const AUX_FLAG_TRUNCATED: u64 = 0x1;
const AUX_FLAG_PARTIAL: u64 = 0x4;
const AUX_FLAG_COLLISION: u64 = 0x8;
const PERF_RECORD_AUX: u32 = 11;
const PERF_RECORD_LOST_SAMPLES: u32 = 13;
/// PERF_AUXTRACE_ARM_SPE in AUXTRACE_INFO.
const AUXTRACE_ARM_SPE: u32 = 4;
const BRANCH_HW_INDEX: u64 = 1 << 17;

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

fn u64_at(b: &[u8], i: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(i..i + 8)?.try_into().ok()?))
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
    check_header(&f).map_err(&not_perf)?;
    let reader = std::io::BufReader::with_capacity(1 << 20, f);
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = PerfFileReader::parse_file(reader)
        .map_err(|e| not_perf(format!("not a perf.data file ({e})")))?;

    let attrs = perf_file.event_attributes().to_vec();
    let pmu_names: HashMap<u32, String> = perf_file
        .pmu_mappings()
        .ok()
        .flatten()
        .map(|m| m.0.iter().map(|(k, v)| (*k, v.clone())).collect())
        .unwrap_or_default();
    let layouts: Vec<Layout> = attrs
        .iter()
        .map(|a| Layout {
            sample_type: a.attr.sample_format.bits(),
            read_format: a.attr.read_format.bits(),
            regs_user_mask: a.attr.sample_regs_user,
            regs_intr_mask: a.attr.sample_regs_intr,
            branch_hw_index: a.attr.branch_sample_format.bits() & BRANCH_HW_INDEX != 0,
        })
        .collect();
    let is_ibs: Vec<bool> = attrs
        .iter()
        .map(|a| {
            let by_name = a.name.as_deref().is_some_and(|n| n.contains("ibs_op"));
            let by_pmu = match a.attr.type_ {
                PerfEventType::DynamicPmu(t, ..) => {
                    pmu_names.get(&t).is_some_and(|n| n.as_str() == "ibs_op")
                }
                _ => false,
            };
            by_name || by_pmu
        })
        .collect();
    let periods: Vec<u64> = attrs
        .iter()
        .map(|a| match a.attr.sampling_policy {
            linux_perf_data::linux_perf_event_reader::SamplingPolicy::Period(p) => p.get(),
            _ => 0,
        })
        .collect();
    let neoverse = perf_file
        .cpu_id()
        .ok()
        .flatten()
        .and_then(|id| u64::from_str_radix(id.trim().trim_start_matches("0x"), 16).ok())
        .is_some_and(spe::is_neoverse);

    let mut c = Collected {
        build_ids: perf_file
            .build_ids()
            .map(|ids| {
                ids.into_values()
                    .map(|info| {
                        (
                            String::from_utf8_lossy(&info.path).into_owned(),
                            info.build_id,
                        )
                    })
                    .collect()
            })
            .unwrap_or_default(),
        ..Collected::default()
    };
    let mut time_conv: Option<TimeConv> = None;
    // One decoder per AUX buffer: a record may straddle two of its chunks.
    let mut spe_decoders: HashMap<u32, RecordDecoder> = HashMap::new();
    let mut spe_seen = false;
    let mut spe_rows: Vec<(spe::Record, u32, u32)> = Vec::new();

    loop {
        let record = match record_iter.next_record(&mut perf_file) {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                // What was read so far stays importable: stop here and say so.
                c.summary.losses.decode_errors += 1;
                if c.samples.is_empty() && spe_rows.is_empty() && !spe_seen {
                    return Err(ImportError::Corrupt {
                        path: file.to_path_buf(),
                        detail: format!("unreadable record ({e})"),
                    });
                }
                eprintln!(
                    "memlens import: {}: stopped at an unreadable record ({e}); importing what precedes it",
                    file.display()
                );
                break;
            }
        };
        match record {
            PerfFileRecord::EventRecord { attr_index, record } => {
                let body = record.data.as_slice();
                match record.record_type.0 {
                    9 => {
                        let Some(layout) = layouts.get(attr_index) else {
                            continue;
                        };
                        match layout.parse(&body) {
                            Ok(s) => c.add_sample(&s, is_ibs[attr_index]),
                            Err(_) => c.summary.losses.decode_errors += 1,
                        }
                    }
                    PERF_RECORD_AUX => {
                        let flags = u64_at(&body, 16).unwrap_or(0);
                        let l = &mut c.summary.losses;
                        l.aux_truncated += (flags & AUX_FLAG_TRUNCATED != 0) as u64;
                        l.aux_partial += (flags & AUX_FLAG_PARTIAL != 0) as u64;
                        l.aux_collisions += (flags & AUX_FLAG_COLLISION != 0) as u64;
                    }
                    PERF_RECORD_LOST_SAMPLES => {
                        c.summary.losses.lost_samples += u64_at(&body, 0).unwrap_or(0);
                    }
                    _ => match record.parse() {
                        Ok(EventRecord::Comm(comm)) => {
                            c.comms.insert(
                                comm.pid as u32,
                                String::from_utf8_lossy(&comm.name.as_slice()).into_owned(),
                            );
                        }
                        Ok(EventRecord::Mmap(m)) => c.add_mapping(
                            m.pid,
                            m.address,
                            m.length,
                            m.page_offset,
                            &m.path.as_slice(),
                        ),
                        Ok(EventRecord::Mmap2(m)) => c.add_mapping(
                            m.pid,
                            m.address,
                            m.length,
                            m.page_offset,
                            &m.path.as_slice(),
                        ),
                        Ok(EventRecord::Lost(l)) => c.summary.losses.lost_samples += l.count,
                        Ok(EventRecord::Throttle(_)) => c.summary.losses.throttled += 1,
                        _ => {}
                    },
                }
            }
            PerfFileRecord::UserRecord(user) => {
                if user.record_type == UserRecordType::PERF_AUXTRACE_INFO {
                    let body = user.data.as_slice();
                    let kind = body
                        .get(..4)
                        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                    spe_seen |= kind == Some(AUXTRACE_ARM_SPE);
                } else if user.record_type == UserRecordType::PERF_TIME_CONV {
                    time_conv = TimeConv::parse(&user.data.as_slice());
                } else if user.record_type == UserRecordType::PERF_AUXTRACE {
                    let Ok(UserRecord::Auxtrace(aux)) = user.parse() else {
                        c.summary.losses.decode_errors += 1;
                        continue;
                    };
                    if !spe_seen {
                        continue;
                    }
                    let data = aux.aux_data.as_slice();
                    let (tid, cpu) = (aux.tid, aux.cpu);
                    spe_decoders
                        .entry(aux.index)
                        .or_default()
                        .feed(&data, |r| spe_rows.push((*r, tid, cpu)));
                }
            }
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
    if c.samples.is_empty() {
        return Err(ImportError::NoMemorySamples {
            path: file.to_path_buf(),
            skipped: c.summary.skipped,
            damaged: c.summary.losses.decode_errors,
        });
    }

    let host = perf_file
        .hostname()
        .ok()
        .flatten()
        .unwrap_or("")
        .to_string();
    let cpu = perf_file
        .cpu_desc()
        .ok()
        .flatten()
        .unwrap_or("")
        .to_string();
    let kernel = perf_file
        .os_release()
        .ok()
        .flatten()
        .unwrap_or("")
        .to_string();
    let command: Vec<String> = perf_file
        .cmdline()
        .ok()
        .flatten()
        .map(|v| v.iter().map(|s| s.to_string()).collect())
        .unwrap_or_default();
    let period = periods.iter().copied().max().unwrap_or(0);
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
    fn add_mapping(&mut self, pid: i32, start: u64, len: u64, pgoff: u64, path: &[u8]) {
        let path = String::from_utf8_lossy(path).into_owned();
        let module = LoadedModule {
            path,
            start,
            end: start.saturating_add(len),
            bias: start.wrapping_sub(pgoff),
        };
        self.modules.push((pid as u32, module));
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

/// Checks the sizes and offsets of a file-mode perf.data header before the
/// container parser sees them: it trusts them and would try to allocate
/// whatever a damaged size field says.
fn check_header(f: &std::fs::File) -> Result<(), String> {
    use std::io::{Read, Seek, SeekFrom};
    let len = f.metadata().map_err(|e| e.to_string())?.len();
    let mut r = f;
    let mut head = [0u8; 104];
    let n = r.read(&mut head).map_err(|e| e.to_string())?;
    let word = |i: usize| u64::from_le_bytes(head[i..i + 8].try_into().unwrap_or_default());
    if n < 16 || &head[..8] != b"PERFILE2" {
        return Err("not a perf.data file (no PERFILE2 magic)".into());
    }
    if word(8) == 16 {
        return Ok(()); // pipe mode: records carry their own sizes
    }
    if n < 104 || word(8) < 104 {
        return Err("not a perf.data file (header cut short)".into());
    }
    let within = |offset: u64, size: u64| offset.checked_add(size).is_some_and(|end| end <= len);
    let attr_size = word(16);
    let (attrs_at, attrs_size) = (word(24), word(32));
    if !(64..=4096).contains(&attr_size) || attrs_size % attr_size != 0 {
        return Err(format!("damaged header (attribute size {attr_size})"));
    }
    for (what, at) in [("attributes", 24), ("data", 40), ("event types", 56)] {
        if !within(word(at), word(at + 8)) {
            return Err(format!("damaged header ({what} section outside the file)"));
        }
    }
    let mut attrs = vec![0u8; attrs_size as usize];
    r.seek(SeekFrom::Start(attrs_at))
        .map_err(|e| e.to_string())?;
    r.read_exact(&mut attrs).map_err(|e| e.to_string())?;
    for entry in attrs.chunks_exact(attr_size as usize) {
        let own_size = u32::from_le_bytes(entry[4..8].try_into().unwrap_or_default());
        let ids_at = u64_at(entry, attr_size as usize - 16).unwrap_or(u64::MAX);
        let ids_size = u64_at(entry, attr_size as usize - 8).unwrap_or(u64::MAX);
        if u64::from(own_size) > attr_size - 16 || !within(ids_at, ids_size) {
            return Err("damaged header (an event attribute is malformed)".into());
        }
    }
    // Feature sections follow the data: one {offset, size} per set feature bit.
    let features: u32 = (0..4).map(|i| word(72 + 8 * i).count_ones()).sum();
    let table_at = word(40).saturating_add(word(48));
    let mut table = vec![0u8; features as usize * 16];
    if !within(table_at, table.len() as u64) {
        return Err("damaged header (feature table outside the file)".into());
    }
    r.seek(SeekFrom::Start(table_at))
        .map_err(|e| e.to_string())?;
    r.read_exact(&mut table).map_err(|e| e.to_string())?;
    for entry in table.chunks_exact(16) {
        if !within(
            u64_at(entry, 0).unwrap_or(u64::MAX),
            u64_at(entry, 8).unwrap_or(u64::MAX),
        ) {
            return Err("damaged header (a feature section lies outside the file)".into());
        }
    }
    r.seek(SeekFrom::Start(0)).map_err(|e| e.to_string())?;
    Ok(())
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
