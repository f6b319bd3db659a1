//! Which sampling backends this machine offers, found by probing sysfs and by
//! opening each event for real (disabled, on memlens itself), and the attrs
//! `memlens record` opens for the chosen one.

use super::pmu::Pmu;
use super::Event;
use memlens_decoders::perf_data::{flag, EventAttr};
use memlens_decoders::sample::bits;
use memlens_profile::Backend;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Intel PEBS load latency and precise stores.
    Pebs,
    /// AMD IBS op sampling.
    Ibs,
    /// Arm Statistical Profiling Extension.
    Spe,
    /// The kernel's page-fault software event with data addresses: first
    /// touches of pages, on any machine.
    PageFaults,
}

impl Kind {
    pub const HARDWARE: [Kind; 3] = [Kind::Pebs, Kind::Ibs, Kind::Spe];

    pub fn name(self) -> &'static str {
        self.backend().name()
    }

    /// How the profile names what this sampler recorded.
    pub fn backend(self) -> Backend {
        match self {
            Kind::Pebs => Backend::Pebs,
            Kind::Ibs => Backend::Ibs,
            Kind::Spe => Backend::Spe,
            Kind::PageFaults => Backend::PageFaults,
        }
    }
}

/// Settings of a hardware or software sampling run.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// One sample per `period` operations (events, faults); 0 for the backend's default.
    pub period: u64,
    /// PEBS load-latency threshold / SPE minimum latency, in cycles.
    pub min_latency: u64,
    pub loads: bool,
    pub stores: bool,
    /// SPE AUX area per CPU, KiB (rounded up to a power-of-two number of
    /// pages); 0 for 1 MiB.
    pub aux_kib: u64,
    /// Bytes of new AUX data that wake the reader; 0 for the kernel's (half).
    pub aux_watermark: u32,
}

/// The events to open on every CPU for one backend.
#[derive(Clone, Debug)]
pub struct Plan {
    pub kind: Kind,
    /// (perf-style name, attr); the first owns the ring buffer.
    pub events: Vec<(String, EventAttr)>,
    /// Pages of AUX area per CPU (SPE), 0 without.
    pub aux_pages: usize,
    /// The PMU type, for the AUXTRACE_INFO record (SPE).
    pub pmu_type: u32,
    pub period: u64,
}

impl Plan {
    /// The same events for tasks that are already running (`record --pid`):
    /// enabled at once, not at an exec.
    pub fn for_running_tasks(mut self) -> Plan {
        for (_, attr) in &mut self.events {
            attr.flags &= !(flag::DISABLED | flag::ENABLE_ON_EXEC);
        }
        self
    }
}

/// Why a backend cannot be used, and what would change that.
#[derive(Clone, Debug)]
pub struct Unavailable {
    pub reason: String,
    pub fix: String,
}

const PAGE_FAULTS: u64 = 2;
const TYPE_SOFTWARE: u32 = 1;
const CLOCK_MONOTONIC: i32 = 1;

/// The flags every memlens event gets: opened disabled on memlens itself,
/// inherited by the target it forks, enabled at the target's exec, user space
/// only, times on CLOCK_MONOTONIC like the rest of the profile.
fn base_attr(type_: u32, config: u64, period: u64, sample_type: u64) -> EventAttr {
    EventAttr {
        type_,
        config,
        sample_period: period,
        sample_type: sample_type | bits::IP | bits::TID | bits::TIME | bits::CPU | bits::IDENTIFIER,
        flags: flag::DISABLED
            | flag::INHERIT
            | flag::ENABLE_ON_EXEC
            | flag::EXCLUDE_KERNEL
            | flag::EXCLUDE_HV
            | flag::SAMPLE_ID_ALL
            | flag::USE_CLOCKID,
        clockid: CLOCK_MONOTONIC,
        ..EventAttr::default()
    }
}

/// A PMU event's attr: `terms` placed into its config words by the PMU's
/// sysfs format fields.
fn pmu_attr(
    pmu: &Pmu,
    terms: &str,
    period: u64,
    sample_type: u64,
) -> Result<EventAttr, Unavailable> {
    let c = pmu.resolve(terms).map_err(|reason| Unavailable {
        reason,
        fix: "report this PMU's sysfs format".into(),
    })?;
    Ok(EventAttr {
        config1: c.config1,
        config2: c.config2,
        ..base_attr(pmu.type_, c.config, period, sample_type)
    })
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

pub fn paranoid() -> Option<i32> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The first PMU among `names` that sysfs lists.
fn first_pmu(names: &[&str]) -> Option<Pmu> {
    names.iter().find_map(|n| Pmu::open(n))
}

/// The plan for `kind` on this machine, or why there is none.
pub fn plan(kind: Kind, o: &Options) -> Result<Plan, Unavailable> {
    let unavailable = |reason: &str, fix: &str| Unavailable {
        reason: reason.into(),
        fix: fix.into(),
    };
    let mut plan = match kind {
        Kind::PageFaults => Plan {
            kind,
            events: vec![(
                "page-faults:u".into(),
                // No PERF_SAMPLE_PERIOD: with it the kernel samples every
                // software event whatever the period (perf_swevent_event).
                base_attr(TYPE_SOFTWARE, PAGE_FAULTS, o.period.max(1), bits::ADDR),
            )],
            aux_pages: 0,
            pmu_type: TYPE_SOFTWARE,
            period: o.period.max(1),
        },
        Kind::Pebs => {
            let cpu = first_pmu(&["cpu_core", "cpu"]).filter(|p| p.event("mem-loads").is_some());
            let Some(cpu) = cpu else {
                return Err(unavailable(
                    "no Intel PMU with mem-loads (sysfs cpu/events/mem-loads is absent: not an Intel CPU, or a VM without a virtual PMU)",
                    "run on Intel hardware, or give the VM a PMU (KVM: -cpu host,pmu=on; VMware: virtualize CPU performance counters)",
                ));
            };
            let period = if o.period > 0 { o.period } else { 10_007 };
            let mut sample_type = bits::ADDR | bits::WEIGHT_STRUCT | bits::DATA_SRC;
            if is_root() {
                sample_type |= bits::PHYS_ADDR;
            }
            let mut events = Vec::new();
            let precise = 2u64 << flag::PRECISE_IP_SHIFT;
            if o.loads {
                let ldlat = if o.min_latency > 0 { o.min_latency } else { 30 };
                let terms = format!("mem-loads,ldlat={ldlat}");
                let mut a = pmu_attr(&cpu, &terms, period, sample_type)?;
                a.flags |= precise;
                events.push((format!("{}/{terms}/P", cpu.name), a));
            }
            if o.stores && cpu.event("mem-stores").is_some() {
                let mut a = pmu_attr(&cpu, "mem-stores", period, sample_type)?;
                a.flags |= precise;
                events.push((format!("{}/mem-stores/P", cpu.name), a));
            }
            Plan {
                kind,
                events,
                aux_pages: 0,
                pmu_type: cpu.type_,
                period,
            }
        }
        Kind::Ibs => {
            let Some(ibs) = Pmu::open("ibs_op") else {
                return Err(unavailable(
                    "no ibs_op PMU (not an AMD CPU, or a VM without IBS)",
                    "run on AMD hardware with IBS (family 10h or later), bare metal",
                ));
            };
            // The op counter ignores its low 4 bits; keep the period a multiple of 16.
            let period = if o.period > 0 {
                o.period.max(0x90) & !0xf
            } else {
                0x10000
            };
            let terms = if ibs.has_format("cnt_ctl") {
                "cnt_ctl=1"
            } else {
                ""
            };
            Plan {
                kind,
                events: vec![(
                    format!("ibs_op/{terms}/"),
                    pmu_attr(&ibs, terms, period, bits::RAW)?,
                )],
                aux_pages: 0,
                pmu_type: ibs.type_,
                period,
            }
        }
        Kind::Spe => {
            let Some(spe) = Pmu::all("arm_spe_").into_iter().next() else {
                return Err(unavailable(
                    "no arm_spe PMU (not an Arm CPU with SPE, or the arm_spe_pmu driver is not loaded)",
                    "on Armv8.2+ hardware: `modprobe arm_spe_pmu`, and boot with kpti=off if the kernel unmaps itself at EL0",
                ));
            };
            let min_interval: u64 = spe
                .cap("min_interval")
                .and_then(|v| v.parse().ok())
                .unwrap_or(1024);
            let period = if o.period > 0 {
                o.period.max(min_interval)
            } else {
                4096.max(min_interval)
            };
            let mut terms = vec!["ts_enable=1".to_string(), "jitter=1".into()];
            if is_root() {
                terms.push("pa_enable=1".into());
            }
            if o.loads {
                terms.push("load_filter=1".into());
            }
            if o.stores {
                terms.push("store_filter=1".into());
            }
            if o.min_latency > 0 {
                terms.push(format!("min_latency={}", o.min_latency));
            }
            let terms = terms.join(",");
            let mut a = pmu_attr(&spe, &terms, period, 0)?;
            a.aux_watermark = o.aux_watermark;
            let page = 4096;
            let kib = if o.aux_kib > 0 { o.aux_kib } else { 1024 };
            Plan {
                kind,
                events: vec![(format!("{}/{terms}/", spe.name), a)],
                aux_pages: (kib * 1024).div_ceil(page).next_power_of_two() as usize,
                pmu_type: spe.type_,
                period,
            }
        }
    };
    if plan.events.is_empty() {
        return Err(unavailable(
            "neither loads nor stores are sampled",
            "drop --no-loads or --no-stores",
        ));
    }
    // The real test: open each event, disabled, on memlens itself.
    for (name, attr) in &mut plan.events {
        let mut result = Event::open(attr, 0, -1);
        if result.is_err() && attr.sample_type & bits::WEIGHT_STRUCT != 0 {
            // Kernels before 5.12 know only the plain weight.
            attr.sample_type = attr.sample_type & !bits::WEIGHT_STRUCT | bits::WEIGHT;
            result = Event::open(attr, 0, -1);
        }
        if let Err(e) = result {
            return Err(open_error(name, &e));
        }
    }
    Ok(plan)
}

/// Why perf_event_open refused, and the fix.
pub fn open_error(name: &str, e: &std::io::Error) -> Unavailable {
    let level = paranoid().map_or("unknown".into(), |p| p.to_string());
    let (reason, fix) = match e.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => (
            format!("{name}: permission denied (kernel.perf_event_paranoid = {level})"),
            "run `sudo sysctl kernel.perf_event_paranoid=1`, or give memlens CAP_PERFMON".to_string(),
        ),
        Some(libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV) => (
            format!("{name}: this CPU or kernel does not support it ({e})"),
            "run on hardware with this PMU event, or enable the VM's virtual PMU (KVM: -cpu host,pmu=on)".to_string(),
        ),
        Some(libc::EMFILE) => (
            format!("{name}: too many open files"),
            "raise the limit with `ulimit -n 65536`".to_string(),
        ),
        Some(libc::ENOSYS) => (
            format!("{name}: perf_event_open is not available (seccomp or a kernel without perf events)"),
            "run outside the container's seccomp profile, or with a kernel built with CONFIG_PERF_EVENTS".to_string(),
        ),
        _ => (format!("{name}: {e}"), "check `dmesg` for the PMU driver's message".to_string()),
    };
    Unavailable { reason, fix }
}
