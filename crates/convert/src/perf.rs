//! perf.data records into memlens samples: PEBS/data-source samples, IBS raw
//! samples, Arm SPE AUX data, page-fault samples with addresses, and the losses
//! the stream reports. Shared by `memlens import` and the live perf backends,
//! whose rings are saved as perf.data and read back here.

use crate::symbols::LoadedModule;
use memlens_decoders::bytes::{u32_at, u64_at};
use memlens_decoders::datasrc::DataSource;
use memlens_decoders::ibs::IbsOp;
use memlens_decoders::perf_data::{feature, user, DamagedRecord, Item, PerfData};
use memlens_decoders::record::{self, aux_flag, Parsed};
use memlens_decoders::sample;
use memlens_decoders::spe::{self, RecordDecoder};
use memlens_profile::{AccessSample, Backend, Losses};
use std::collections::{BTreeMap, HashMap, HashSet};

const TYPE_SOFTWARE: u32 = 1;
/// page-faults, minor-faults, major-faults.
const SW_PAGE_FAULTS: [u64; 3] = [2, 6, 7];

/// What a conversion found, for the command's summary.
#[derive(Debug, Default)]
pub struct Summary {
    pub backends: Vec<String>,
    /// Load/store samples converted.
    pub samples: u64,
    /// Samples or SPE records that were not loads or stores (branches, other ops,
    /// events without an address).
    pub skipped: u64,
    pub losses: Losses,
    pub spe: spe::StreamStats,
}

/// PERF_AUXTRACE_ARM_SPE in AUXTRACE_INFO.
pub const AUXTRACE_ARM_SPE: u32 = 4;

/// perf's conversion of a hardware counter (SPE timestamps) to perf time: the
/// mmap page's time_shift, time_mult and time_zero, as a TIME_CONV record holds
/// them, and for a counter narrower than 64 bits (arm64 kernels set
/// cap_user_time_short) the time_cycles and time_mask that extend it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeConv {
    pub shift: u16,
    pub mult: u32,
    pub zero: u64,
    /// (time_cycles, time_mask) when the counter is short.
    pub short: Option<(u64, u64)>,
}

/// TIME_CONV's body: shift, mult, zero; then (perf 5.10 on) time_cycles,
/// time_mask and the cap_user_time_zero and cap_user_time_short bytes.
const TIME_CONV_EXTENDED: usize = 48;

impl TimeConv {
    /// perf's tsc_to_perf_time.
    pub fn to_ns(self, cycles: u64) -> u64 {
        let cycles = match self.short {
            Some((base, mask)) => base.wrapping_add(cycles.wrapping_sub(base) & mask),
            None => cycles,
        };
        let quot = cycles >> self.shift;
        let rem = cycles & ((1u64 << self.shift) - 1);
        self.zero
            .wrapping_add(quot.wrapping_mul(u64::from(self.mult)))
            .wrapping_add((rem.wrapping_mul(u64::from(self.mult))) >> self.shift)
    }

    /// A TIME_CONV record's body, short or extended; `None` when damaged (a
    /// shift of 64 or more).
    fn parse(b: &[u8]) -> Option<TimeConv> {
        let shift = u64_at(b, 0)?;
        (shift < 64).then_some(())?;
        let short = match b.get(41) {
            Some(&cap_short) if cap_short != 0 => Some((u64_at(b, 24)?, u64_at(b, 32)?)),
            _ => None,
        };
        Some(TimeConv {
            shift: shift as u16,
            mult: u64_at(b, 8)? as u32,
            zero: u64_at(b, 16)?,
            short,
        })
    }

    /// The body of an extended TIME_CONV record, as perf writes it.
    pub fn encode(self) -> Vec<u8> {
        let (cycles, mask) = self.short.unwrap_or((0, 0));
        let mut body: Vec<u8> = [
            u64::from(self.shift),
            u64::from(self.mult),
            self.zero,
            cycles,
            mask,
        ]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
        body.extend([1, u8::from(self.short.is_some()), 0, 0, 0, 0, 0, 0]);
        debug_assert_eq!(body.len(), TIME_CONV_EXTENDED);
        body
    }

    /// The same conversion landing on another clock: `counter` was read at
    /// `clock_ns` of that clock.
    pub fn rebased(self, counter: u64, clock_ns: u64) -> TimeConv {
        TimeConv {
            zero: self
                .zero
                .wrapping_add(clock_ns.wrapping_sub(self.to_ns(counter))),
            ..self
        }
    }
}

#[derive(Default)]
pub struct Converted {
    pub comms: BTreeMap<u32, String>,
    /// Mappings by pid, as MMAP records gave them.
    pub modules: Vec<(u32, Mapping)>,
    pub summary: Summary,
    /// A bit of [`SAMPLERS`] for each backend that gave samples (a bit, not
    /// a set: it is marked for every sample).
    backends: u8,
    /// Build IDs perf noted for the files that got samples, by path.
    pub build_ids: HashMap<String, Vec<u8>>,
    /// The stream carries Arm SPE AUX data.
    pub spe_seen: bool,
    /// The damaged record that ended the stream early, if any.
    pub damage: Option<DamagedRecord>,
}

/// The earliest sample time of the stream, in perf time: sample times are read
/// where they lie, and each AUX buffer is decoded only until one of its chunks
/// yields a timestamp (SPE writes a buffer in time order).
pub fn first_time(perf: &PerfData<'_>) -> Option<u64> {
    let mut first: Option<u64> = None;
    let mut time_conv = None;
    let mut buffers_done = HashSet::new();
    for item in perf.items().map_while(Result::ok) {
        let t = match item {
            Item::Record(r) if r.kind == record::kind::SAMPLE => perf.sample_time(r.body),
            Item::Record(r) if r.kind == user::TIME_CONV => {
                time_conv = TimeConv::parse(r.body);
                None
            }
            Item::Auxtrace { idx, data, .. } if !buffers_done.contains(&idx) => {
                let mut t = None;
                RecordDecoder::new().feed(data, |r| {
                    t = t.or(r.timestamp);
                });
                let t = t.map(|ts| time_conv.map_or(ts, |c: TimeConv| c.to_ns(ts)));
                if t.is_some() {
                    buffers_done.insert(idx);
                }
                t
            }
            _ => None,
        };
        if let Some(t) = t {
            first = Some(first.map_or(t, |f| f.min(t)));
        }
    }
    first
}

/// The sampling backends a stream can hold, sorted by name, each a bit of
/// [`Converted`]'s mark.
const IBS: u8 = 1 << 0;
const PAGE_FAULTS: u8 = 1 << 1;
const PEBS: u8 = 1 << 2;
const SPE: u8 = 1 << 3;
const SAMPLERS: [(u8, Backend); 4] = [
    (IBS, Backend::Ibs),
    (PAGE_FAULTS, Backend::PageFaults),
    (PEBS, Backend::Pebs),
    (SPE, Backend::Spe),
];

/// A perf.data's samples streamed into a samples table.
pub struct Streamed {
    pub converted: Converted,
    /// The last sample's time, relative to the start given.
    pub last_ns: u64,
    /// Every (pid, pc) the samples hit, for symbolization.
    pub code: rustc_hash::FxHashSet<(u32, u64)>,
    /// The largest fixed sampling period of the recording's events (0: none).
    pub period: u64,
}

/// Converts `perf` straight into `sink`, times made relative to `start_ns`.
pub fn convert_into(
    perf: &PerfData<'_>,
    start_ns: u64,
    mut sink: impl FnMut(AccessSample),
) -> Streamed {
    let mut last_ns = 0;
    // Per-sample lookups: a fast hash (keys are our own pids and PCs).
    let mut code = rustc_hash::FxHashSet::default();
    let converted = convert(perf, |mut row| {
        row.time_ns = row.time_ns.saturating_sub(start_ns);
        last_ns = last_ns.max(row.time_ns);
        code.insert((row.pid, row.pc));
        sink(row);
    });
    let period = perf.events.iter().filter_map(|e| e.attr.period()).max();
    Streamed {
        converted,
        last_ns,
        code,
        period: period.unwrap_or(0),
    }
}

/// Converts every record of `perf`, handing each load/store sample to `emit`
/// with its perf time in `time_ns`; a damaged record ends the stream and is
/// kept in `damage`, with what precedes it converted.
pub fn convert(perf: &PerfData<'_>, mut emit: impl FnMut(AccessSample)) -> Converted {
    let pmu_names = perf.pmu_mappings();
    let is_page_fault: Vec<bool> = perf
        .events
        .iter()
        .map(|e| e.attr.type_ == TYPE_SOFTWARE && SW_PAGE_FAULTS.contains(&e.attr.config))
        .collect();
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

    let mut c = Converted {
        build_ids: perf.build_ids(),
        ..Converted::default()
    };
    let mut time_conv: Option<TimeConv> = None;
    // One decoder per AUX buffer: a record may straddle two of its chunks.
    // Records convert as they complete: perf writes TIME_CONV before AUX data.
    let mut spe_decoders: HashMap<u32, RecordDecoder> = HashMap::new();

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
                if c.spe_seen {
                    spe_decoders.entry(idx).or_default().feed(data, |r| {
                        if let Some(row) = c.spe_row(r, tid, cpu, neoverse, time_conv) {
                            emit(row);
                        }
                    });
                }
                continue;
            }
            Err(e) => {
                // What was read so far stays importable.
                c.summary.losses.decode_errors += 1;
                c.damage = Some(e);
                break;
            }
        };
        match record.kind {
            record::kind::SAMPLE => match perf.sample(record.body) {
                Some((event, Ok(s))) => {
                    if let Some(row) = c.sample_row(&s, is_ibs[event], is_page_fault[event]) {
                        emit(row);
                    }
                }
                _ => c.summary.losses.decode_errors += 1,
            },
            user::AUXTRACE_INFO => c.spe_seen |= u32_at(record.body, 0) == Some(AUXTRACE_ARM_SPE),
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
                    // Saturating: a damaged record may claim any count.
                    c.summary.losses.lost_samples =
                        c.summary.losses.lost_samples.saturating_add(count)
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
    c
}

/// A file mapping as an MMAP record gave it. Its file is not read here: a
/// system-wide recording maps thousands, and only the ones a sample's code
/// lies in, whose build ID matches, are worth opening.
#[derive(Clone, Debug)]
pub struct Mapping {
    pub path: String,
    pub start: u64,
    pub end: u64,
    pub offset: u64,
}

impl Mapping {
    /// The module with the load bias its ELF file gives (for symbolizing).
    pub fn read_module(&self) -> LoadedModule {
        LoadedModule::from_mapping(&self.path, self.start, self.end, self.offset)
    }

    /// The module without reading its file: bias `start - offset`, so that
    /// an address minus it is the file offset.
    pub fn unread_module(&self) -> LoadedModule {
        LoadedModule {
            path: self.path.clone(),
            start: self.start,
            end: self.end,
            bias: self.start.wrapping_sub(self.offset),
        }
    }
}

impl Converted {
    /// The sampling backends found, sorted by name.
    pub fn backends(&self) -> Vec<Backend> {
        SAMPLERS
            .iter()
            .filter(|(bit, _)| self.backends & bit != 0)
            .map(|&(_, backend)| backend)
            .collect()
    }

    fn add_mapping(&mut self, pid: u32, start: u64, len: u64, pgoff: u64, path: &[u8]) {
        let mapping = Mapping {
            path: String::from_utf8_lossy(path).into_owned(),
            start,
            end: start.saturating_add(len),
            offset: pgoff,
        };
        self.modules.push((pid, mapping));
    }

    /// The row of a sample record, or `None` (counted) when it is not a memory access.
    fn sample_row(
        &mut self,
        s: &sample::Sample,
        ibs: bool,
        page_fault: bool,
    ) -> Option<AccessSample> {
        let mut row = AccessSample {
            pid: s.pid.unwrap_or(0),
            tid: s.tid.unwrap_or(0),
            cpu: s.cpu.unwrap_or(0),
            pc: s.ip.unwrap_or(0),
            time_ns: s.time.unwrap_or(0),
            data_src: s.data_src.unwrap_or(0),
            phys_addr: s.phys_addr.filter(|&a| a != 0),
            ..AccessSample::default()
        };
        if ibs {
            let Some(op) = s.raw.and_then(|raw| IbsOp::from_raw(raw).ok()) else {
                self.summary.losses.decode_errors += 1;
                return None;
            };
            if !(op.is_load() || op.is_store()) || !op.lin_addr_valid() {
                self.summary.skipped += 1;
                return None;
            }
            self.backends |= IBS;
            row.pc = op.rip;
            row.address = op.dc_lin_addr;
            row.is_store = op.is_store();
            row.size = op.mem_width();
            row.level = op.level().code();
            row.latency = Some(op.dc_miss_latency() as u32).filter(|&l| l > 0);
            row.translation_latency = Some(op.tlb_refill_latency() as u32).filter(|&l| l > 0);
            row.atomic = op.dc_locked();
            row.phys_addr = op.phys_addr_valid().then_some(op.dc_phys_addr);
            row.hw_source = Some(u64::from(op.data_source()));
        } else if page_fault {
            let Some(addr) = s.addr else {
                self.summary.skipped += 1;
                return None;
            };
            // A first touch of a page: neither a load nor a store is known.
            self.backends |= PAGE_FAULTS;
            row.address = addr;
        } else {
            let (Some(addr), Some(data_src)) = (s.addr, s.data_src) else {
                self.summary.skipped += 1;
                return None;
            };
            let d = DataSource::decode(data_src);
            self.backends |= PEBS;
            row.address = addr;
            row.is_store = d.is_store();
            row.atomic = d.is_locked();
            row.level = d.level().code();
            row.latency = s.weight.map(|w| w.min(u64::from(u32::MAX)) as u32);
        }
        self.summary.samples += 1;
        Some(row)
    }

    /// The row of an SPE record, or `None` (counted) when it is not a load or store.
    fn spe_row(
        &mut self,
        r: &spe::Record,
        aux_tid: u32,
        cpu: u32,
        neoverse: bool,
        time_conv: Option<TimeConv>,
    ) -> Option<AccessSample> {
        if !r.op.is_memory() {
            self.summary.skipped += 1;
            return None;
        }
        self.backends |= SPE;
        let (spe::Op::Load { subclass } | spe::Op::Store { subclass }) = r.op else {
            return None;
        };
        // CONTEXT carries the PID when the kernel writes it there; a per-thread
        // AUX buffer names its thread.
        let tid = r
            .context
            .unwrap_or(if aux_tid == u32::MAX { 0 } else { aux_tid });
        let ts = r.timestamp.unwrap_or(0);
        self.summary.samples += 1;
        Some(AccessSample {
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
            time_ns: time_conv.map_or(ts, |t| t.to_ns(ts)),
            model_cost_ns: None,
            bulk: false,
            atomic: r.op.is_atomic(),
            stack_id: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::TimeConv;

    #[test]
    fn a_rebased_conversion_keeps_rates_and_lands_on_the_new_clock() {
        // A 25 MHz generic timer as Neoverse kernels describe it: 40 ns a tick.
        let conv = TimeConv {
            shift: 22,
            mult: 40 << 22,
            zero: 123_456_789,
            short: None,
        };
        assert_eq!(conv.to_ns(1000) - conv.to_ns(0), 40_000);
        let on_monotonic = conv.rebased(5_000_000, 9_000_000_000);
        assert_eq!(on_monotonic.to_ns(5_000_000), 9_000_000_000);
        assert_eq!(on_monotonic.to_ns(5_000_025), 9_000_001_000);
        assert_eq!(TimeConv::parse(&on_monotonic.encode()), Some(on_monotonic));
        // Found by fuzzing: a damaged record's shift overflowed the conversion.
        let damaged = TimeConv {
            shift: 0xff01,
            ..conv
        };
        assert_eq!(TimeConv::parse(&damaged.encode()), None);
    }

    #[test]
    fn a_short_counter_is_extended_from_time_cycles() {
        // A 56-bit counter that wrapped after the kernel noted time_cycles.
        let mask = (1u64 << 56) - 1;
        let conv = TimeConv {
            shift: 0,
            mult: 1,
            zero: 0,
            short: Some((mask - 10, mask)),
        };
        // 5 ticks past the wrap read as 4: 15 ticks after time_cycles.
        assert_eq!(conv.to_ns(4), mask + 5);
        assert_eq!(conv.to_ns(mask - 10), mask - 10);
        assert_eq!(TimeConv::parse(&conv.encode()), Some(conv));
        // perf before 5.10 wrote only shift, mult and zero.
        let old = TimeConv {
            short: None,
            ..conv
        };
        assert_eq!(TimeConv::parse(&old.encode()[..24]), Some(old));
    }
}
