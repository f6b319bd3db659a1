//! Counters read by the collector every interval: CPU time (a perf event) and
//! page faults (/proc) on any machine; instructions and cycles where there is
//! a PMU; memory traffic from the memory controllers (Intel uncore IMC CAS
//! counts), from Arm's bus-access event as NMO counts it, or, failing both,
//! from last-level-cache read misses (64 bytes each, modelled).

use super::backends::{self, Unavailable};
use super::pmu::Pmu;
use super::Event;
use memlens_decoders::perf_data::{flag, EventAttr};
use memlens_decoders::sample::read;
use memlens_rawlog::procfs;
use std::collections::HashMap;

/// A counter to open: its event, where it counts, and what its count means.
#[derive(Clone, Debug)]
pub struct Spec {
    pub name: String,
    pub attr: EventAttr,
    /// CPUs to open it on for a machine-wide (uncore) count; empty: the program.
    pub cpus: Vec<u32>,
    pub scale: f64,
    pub unit: &'static str,
    pub method: String,
}

const TYPE_HARDWARE: u32 = 0;
const TYPE_SOFTWARE: u32 = 1;
const TYPE_HW_CACHE: u32 = 3;
/// PERF_COUNT_HW_CACHE_LL | OP_READ << 8 | RESULT_MISS << 16.
const LL_READ_MISS: u64 = 2 | 1 << 16;
const LINE: f64 = 64.0;

fn counting_attr(type_: u32, config: u64) -> EventAttr {
    EventAttr {
        type_,
        config,
        read_format: read::TOTAL_TIME_ENABLED | read::TOTAL_TIME_RUNNING,
        flags: flag::DISABLED
            | flag::INHERIT
            | flag::ENABLE_ON_EXEC
            | flag::EXCLUDE_KERNEL
            | flag::EXCLUDE_HV,
        ..EventAttr::default()
    }
}

/// Starts turning on the kernel's scheduler hooks for per-task events, on a
/// thread of its own, so that the counters opened later do not wait for it.
/// The first per-task event while none exists enables them and waits for an
/// RCU grace period: 5 to 16 ms here, on the path to starting the target of
/// every `record` (measured: `perf_event_open` of task-clock 11.4 ms, then
/// 0.02 ms in the same second; the kernel keeps the hooks about a second
/// after the last event closes). The thread's event closes with it; any
/// failure (no perf events here) only means nothing was warmed.
pub fn warm_up() {
    let _ = std::thread::Builder::new()
        .name("memlens-perf-warm".into())
        .spawn(|| Event::open(&counting_attr(TYPE_SOFTWARE, 1), 0, -1));
}

fn program(name: &str, attr: EventAttr, scale: f64, unit: &'static str, method: &str) -> Spec {
    Spec {
        name: name.into(),
        attr,
        cpus: Vec::new(),
        scale,
        unit,
        method: method.into(),
    }
}

/// Every counter memlens knows, opened (disabled, on memlens or on its CPUs)
/// where this machine allows it, else why not.
pub fn probe() -> Vec<(Spec, Result<Vec<Event>, Unavailable>)> {
    let mut specs = vec![
        // task-clock counts in kernel context too: it is CPU time, not an event.
        {
            let mut a = counting_attr(TYPE_SOFTWARE, 1);
            a.flags &= !flag::EXCLUDE_KERNEL;
            program("task-clock", a, 1.0, "ns", "measured")
        },
        program(
            "instructions",
            counting_attr(TYPE_HARDWARE, 1),
            1.0,
            "instructions",
            "measured",
        ),
        program(
            "cycles",
            counting_attr(TYPE_HARDWARE, 0),
            1.0,
            "cycles",
            "measured",
        ),
    ];
    specs.extend(memory_traffic());
    specs
        .into_iter()
        .map(|mut spec| {
            let mut opened = open(&spec);
            if opened.is_err() && spec.attr.flags & flag::EXCLUDE_KERNEL == 0 {
                // Under perf_event_paranoid 2 an unprivileged user may count
                // only user space: CPU time then excludes the kernel's share.
                spec.attr.flags |= flag::EXCLUDE_KERNEL;
                if let Ok(events) = open(&spec) {
                    spec.method = "measured (user space only: perf_event_paranoid)".into();
                    opened = Ok(events);
                }
            }
            (spec, opened)
        })
        .collect()
}

/// Memory traffic counters, best source first: the memory controllers, the
/// core's bus accesses, last-level-cache read misses.
fn memory_traffic() -> Vec<Spec> {
    let imcs = Pmu::all("uncore_imc");
    if !imcs.is_empty() {
        let mut specs = Vec::new();
        for imc in &imcs {
            for (event, dir) in [("cas_count_read", "read"), ("cas_count_write", "write")] {
                let Ok(c) = imc.resolve(event) else { continue };
                let cpus = imc.cpumask();
                let mut a = counting_attr(imc.type_, c.config);
                // Uncore events count the whole socket: no inheritance, no exclusions.
                a.flags = 0;
                specs.push(Spec {
                    name: format!("{}/{event}/", imc.name),
                    attr: a,
                    cpus,
                    scale: LINE,
                    unit: "bytes",
                    method: format!(
                        "measured by the memory controller ({dir} CAS x 64 B), whole machine"
                    ),
                });
            }
        }
        if !specs.is_empty() {
            return specs;
        }
    }
    let arm = Pmu::all("armv8_pmuv3").into_iter().next();
    if let Some(c) = arm
        .as_ref()
        .and_then(|p| Some((p, p.resolve("bus_access").ok()?)))
    {
        let (pmu, config) = c;
        return vec![program(
            &format!("{}/bus_access/", pmu.name),
            counting_attr(pmu.type_, config.config),
            LINE,
            "bytes",
            "modelled: bus accesses x 64 B (as NMO counts bandwidth)",
        )];
    }
    vec![program(
        "LLC-load-misses",
        counting_attr(TYPE_HW_CACHE, LL_READ_MISS),
        LINE,
        "bytes",
        "modelled: last-level-cache read misses x 64 B (reads only)",
    )]
}

/// A counter's events: one on memlens (the program's count), or one on each
/// of its CPUs (a machine-wide count).
fn open(spec: &Spec) -> Result<Vec<Event>, Unavailable> {
    let fail = |e| backends::open_error(&spec.name, &e);
    if spec.cpus.is_empty() {
        return Event::open(&spec.attr, 0, -1)
            .map(|e| vec![e])
            .map_err(fail);
    }
    spec.cpus
        .iter()
        .map(|&cpu| Event::open(&spec.attr, -1, cpu as i32).map_err(fail))
        .collect()
}

/// The opened counters: per spec, one event (program) or one per CPU (machine);
/// then the page faults from /proc. Their definitions and readings come in
/// that order, which is the counters' index in the log.
pub struct Counters {
    specs: Vec<Spec>,
    events: Vec<Vec<Event>>,
    faults: Option<ProcFaults>,
}

/// A counter as the log names it.
pub struct Definition {
    pub name: String,
    pub unit: &'static str,
    pub scale: f64,
    pub machine_wide: bool,
    pub method: String,
}

/// The run's page faults, minor and major, from each process's /proc/PID/stat
/// rather than perf's page-fault event: that event, inherited by the
/// program, puts each fault through perf's software-event path (STREAM,
/// which faults in 192 MiB, took 4 to 16 ms longer under record with it), while the
/// collector reads the same counts off the program's CPU.
///
/// A process's count includes its reaped children's (the kernel adds them at
/// the reaping), so each live process is read every interval, a process that
/// is gone is in its reaper's count from then on, and the processes memlens
/// reaps itself (the program, orphans) are read once more as zombies: exact
/// at exit, short-lived children included. Lost: the faults of a child whose
/// parent ignores SIGCHLD (the kernel discards them) after its last reading.
pub struct ProcFaults {
    /// Final counts of the processes memlens reaped.
    reaped: u64,
    /// Each live process's count at its last reading, and its start time.
    live: HashMap<u32, (u64, u64)>,
    /// The highest count read so far (see [`ProcFaults::reading`]).
    most: u64,
    since: std::time::Instant,
}

impl ProcFaults {
    pub const NAME: &'static str = "page-faults";
    pub const UNIT: &'static str = "faults";
    pub const METHOD: &'static str = "measured (/proc/PID/stat: minor and major faults of every process of the run, user and kernel mode, read every interval)";

    /// Whether this system's /proc gives the counts (memlens' own).
    pub fn available() -> bool {
        faults_of(std::process::id()).is_some()
    }

    /// Reads the count of each of `pids`, and again of each process read
    /// before (one that is gone leaves the count). Parents are read before
    /// their children (by start time; new processes last): a child reaped
    /// between the two readings is then missed until the next one rather
    /// than counted twice.
    fn read_all(&mut self, pids: impl Iterator<Item = u32>) {
        let mut known: Vec<(u64, u32)> = (self.live.iter())
            .map(|(&pid, &(_, start))| (start, pid))
            .collect();
        known.sort_unstable();
        let mut new: Vec<u32> = pids.filter(|pid| !self.live.contains_key(pid)).collect();
        new.sort_unstable();
        new.dedup();
        for pid in known.into_iter().map(|(_, pid)| pid).chain(new) {
            self.read(pid);
        }
    }

    /// Reads `pid`'s count now.
    fn read(&mut self, pid: u32) {
        match faults_of(pid) {
            Some(reading) => {
                self.live.insert(pid, reading);
            }
            // Reaped by its parent, which counts it now.
            None => {
                self.live.remove(&pid);
            }
        }
    }

    /// Reads `pid`, a zombie memlens is about to reap, a last time.
    fn reaping(&mut self, pid: u32) {
        self.read(pid);
        self.reaped += self.live.remove(&pid).map_or(0, |(n, _)| n);
    }

    /// Faults of the run so far, and the ns since counting began (the
    /// enabled and running time of a counter never multiplexed). A child
    /// reaped between its parent's reading and its own leaves the sum until
    /// the parent's next reading counts it: the count stays at its highest
    /// meanwhile, so that it never goes back (CI saw 1336 then 1238).
    fn reading(&mut self) -> (u64, u64) {
        let total = self.reaped + self.live.values().map(|(n, _)| n).sum::<u64>();
        self.most = self.most.max(total);
        (self.most, self.since.elapsed().as_nanos() as u64)
    }
}

/// Minor and major faults of the whole process `pid` (its ended threads
/// included) and of its reaped children (fields minflt, cminflt, majflt,
/// cmajflt), and its start time (clock ticks since boot).
fn faults_of(pid: u32) -> Option<(u64, u64)> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let faults = (7..=10)
        .map(|field| procfs::stat_field(&stat, field))
        .sum::<Option<u64>>()?;
    Some((faults, procfs::stat_field(&stat, 19)?))
}

impl Counters {
    /// No counters (a process memlens attaches to runs already: counters
    /// inherited at an exec would never start).
    pub fn none() -> Counters {
        Counters {
            specs: Vec::new(),
            events: Vec::new(),
            faults: None,
        }
    }

    /// Opens every counter this machine has, disabled on memlens itself: the
    /// target inherits them at fork and they start at its exec; and the page
    /// faults from /proc.
    pub fn open_available() -> Counters {
        let mut specs = Vec::new();
        let mut events = Vec::new();
        for (spec, opened) in probe() {
            let Ok(opened) = opened else { continue };
            if !spec.cpus.is_empty() {
                // Machine-wide counts start now, not at an exec.
                opened.iter().for_each(Event::enable);
            }
            specs.push(spec);
            events.push(opened);
        }
        Counters {
            specs,
            events,
            faults: ProcFaults::available().then(|| ProcFaults {
                reaped: 0,
                live: HashMap::new(),
                most: 0,
                since: std::time::Instant::now(),
            }),
        }
    }

    /// Every counter, in the order of [`Counters::read`].
    pub fn definitions(&self) -> Vec<Definition> {
        let perf = self.specs.iter().map(|s| Definition {
            name: s.name.clone(),
            unit: s.unit,
            scale: s.scale,
            machine_wide: !s.cpus.is_empty(),
            method: s.method.clone(),
        });
        let faults = self.faults.as_ref().map(|_| Definition {
            name: ProcFaults::NAME.into(),
            unit: ProcFaults::UNIT,
            scale: 1.0,
            machine_wide: false,
            method: ProcFaults::METHOD.into(),
        });
        perf.chain(faults).collect()
    }

    /// Each counter's (value, enabled ns, running ns), summed over its CPUs;
    /// the page faults of `pids`, the run's processes, and of those read
    /// before.
    pub fn read(&mut self, pids: impl Iterator<Item = u32>) -> Vec<[u64; 3]> {
        let perf = self.events.iter().map(|events| {
            events.iter().fold([0u64; 3], |mut sum, e| {
                if let Some(v) = e.read_values() {
                    for i in 0..3 {
                        sum[i] += v[i];
                    }
                }
                sum
            })
        });
        let faults = self.faults.as_mut().map(|faults| {
            faults.read_all(pids);
            let (value, since) = faults.reading();
            [value, since, since]
        });
        perf.chain(faults).collect()
    }

    /// `pid`, a zombie memlens is about to reap, read a last time.
    pub fn reaping(&mut self, pid: u32) {
        if let Some(faults) = &mut self.faults {
            faults.reaping(pid);
        }
    }
}
