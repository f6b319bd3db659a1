//! `memlens report`: one model serialized as JSON or rendered as text, so both
//! formats always carry the same content.

use crate::{human_bytes, seconds};
use memlens_analysis::{self as analysis, DataObject, ObjectKind, Peak, Profile, RegionCapacity};
use memlens_profile::{self as profile, Losses, Process};
use serde::Serialize;
use std::fmt::Write;

#[derive(Serialize)]
pub struct Report {
    pub memlens_version: String,
    pub profile: String,
    pub summary: Summary,
    pub peak: Peak,
    /// Largest data objects by peak live bytes.
    pub objects_by_peak: Vec<DataObject>,
    /// Largest dynamic data objects by bytes allocated over the run.
    pub objects_by_allocated: Vec<DataObject>,
    pub leaks: Leaks,
    /// Thread stacks seen (their objects carry kind "stack").
    pub thread_stacks: ThreadStacks,
    pub regions: Vec<RegionCapacity>,
    /// Capacity over time: every tick, summed over processes, with the top objects.
    pub timeline: analysis::CapacitySeries,
    /// Access profiling (instrumented builds): hot objects, region traffic, accuracy.
    pub access: analysis::AccessReport,
    /// Counting perf events (CPU time, faults, instructions, memory traffic).
    pub counters: Vec<analysis::CounterSummary>,
    /// Each thread's lifetime, exact totals and samples.
    pub threads: Vec<analysis::ThreadSummary>,
    /// Cache lines two or more threads touched, one writing: false and true sharing.
    pub sharing: Vec<analysis::SharedLine>,
    /// Loads by memory level per routine and region, latency by level (when
    /// the samples carry levels).
    pub levels: Option<analysis::LevelTables>,
    /// Reuse distance histograms per object and use/reuse pairs.
    pub reuse: Section<analysis::ReuseReport>,
    /// The samples of a repeated region's instances on one normalised instance.
    pub folding: Section<analysis::Folding>,
    pub losses: Losses,
    /// How each kind of figure was obtained.
    pub provenance: Vec<(String, String)>,
}

#[derive(Serialize)]
pub struct Summary {
    /// The part of the profile shown (null: all of it).
    pub only: Option<analysis::Only>,
    pub command: Vec<String>,
    pub host: String,
    pub cpu: String,
    pub kernel: String,
    pub backend: Vec<String>,
    pub duration_ns: u64,
    pub processes: Vec<Process>,
    pub settings: memlens_profile::Settings,
}

/// An analysis that may not apply to a profile: its result, or why not.
#[derive(Serialize)]
pub struct Section<T> {
    pub available: bool,
    /// Why there is none, and how to record what it needs.
    pub why_not: Option<String>,
    #[serde(flatten)]
    pub content: Option<T>,
}

impl<T> From<Result<T, String>> for Section<T> {
    fn from(result: Result<T, String>) -> Self {
        match result {
            Ok(content) => Section {
                available: true,
                why_not: None,
                content: Some(content),
            },
            Err(why) => Section {
                available: false,
                why_not: Some(why),
                content: None,
            },
        }
    }
}

/// What a report shows beyond its defaults.
pub struct ReportOptions {
    /// Rows per top-N table.
    pub top: usize,
    /// The region to fold (default: the most repeated one).
    pub fold: Option<String>,
    /// Fold by the period found in the samples instead of a region.
    pub fold_detect: bool,
    pub fold_bins: usize,
}

impl ReportOptions {
    fn fold_by(&self) -> analysis::FoldBy<'_> {
        analysis::FoldBy::new(self.fold.as_deref(), self.fold_detect)
    }
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            top: 10,
            fold: None,
            fold_detect: false,
            fold_bins: 20,
        }
    }
}

#[derive(Serialize)]
pub struct ThreadStacks {
    pub threads: usize,
    pub reserved_bytes: f64,
}

#[derive(Serialize)]
pub struct Leaks {
    /// Exact live heap bytes each process held at its last sample.
    pub heap_live_at_exit: Vec<PidBytes>,
    /// Allocation sites with blocks never freed (large, sampled or grouped blocks).
    pub sites: Vec<DataObject>,
}

#[derive(Serialize)]
pub struct PidBytes {
    pub pid: u32,
    pub bytes: u64,
}

pub fn build_report(p: &Profile, options: &ReportOptions) -> Report {
    let top = options.top;
    let all = analysis::data_objects(p);
    let objects = &all.list;
    let pick = |idx: Vec<usize>| {
        idx.into_iter()
            .map(|i| objects[i].clone())
            .collect::<Vec<_>>()
    };
    // Thread stacks are reserved address space, mostly not resident: they are
    // summarized apart instead of crowding the top list.
    let by_peak = pick(analysis::top_by(objects, top, |o| {
        if o.kind == ObjectKind::Stack {
            0.0
        } else {
            o.peak_bytes
        }
    }));
    let stacks: Vec<&DataObject> = objects
        .iter()
        .filter(|o| o.kind == ObjectKind::Stack)
        .collect();
    let thread_stacks = ThreadStacks {
        threads: stacks.len(),
        reserved_bytes: stacks.iter().map(|o| o.peak_bytes).sum(),
    };
    let by_allocated = pick(analysis::top_by(objects, top, |o| {
        if matches!(
            o.kind,
            ObjectKind::Static | ObjectKind::Tag | ObjectKind::Stack
        ) {
            0.0
        } else {
            o.allocated_bytes
        }
    }));
    let leak_sites = pick(analysis::top_by(objects, top, |o| {
        if o.kind == ObjectKind::Heap || o.kind == ObjectKind::Group {
            o.leaked_bytes
        } else {
            0.0
        }
    }));
    let m = &p.meta;
    let interval = m.settings.interval_ms;
    Report {
        memlens_version: env!("CARGO_PKG_VERSION").into(),
        profile: p.dir.display().to_string(),
        summary: Summary {
            only: p.only,
            command: m.command.clone(),
            host: m.host.clone(),
            cpu: m.cpu.clone(),
            kernel: m.kernel.clone(),
            backend: m.backend.clone(),
            duration_ns: m.clock.duration_ns,
            processes: m.processes.clone(),
            settings: m.settings.clone(),
        },
        peak: analysis::peak(p),
        objects_by_peak: by_peak,
        objects_by_allocated: by_allocated,
        thread_stacks,
        leaks: Leaks {
            heap_live_at_exit: analysis::heap_at_exit(p)
                .into_iter()
                .map(|(pid, bytes)| PidBytes { pid, bytes })
                .collect(),
            sites: leak_sites,
        },
        regions: analysis::region_capacity(p),
        timeline: analysis::capacity_series(p, top.min(10)),
        access: analysis::access_report(p, &all, top),
        counters: analysis::counters_report(p),
        threads: analysis::thread_summaries(p),
        sharing: analysis::shared_lines(p, &all, top),
        levels: analysis::level_tables(p, &all, top),
        reuse: analysis::reuse_distances(p, &all, top).into(),
        folding: analysis::fold(p, &all, options.fold_by(), options.fold_bins, false).into(),
        losses: m.losses.clone(),
        provenance: if m.backend.iter().any(|b| b == "perf.data import") {
            vec![
                ("capacity".into(), "not recorded: an imported perf.data holds samples, not allocations or RSS".into()),
                ("accesses".into(), format!("hardware samples ({}) imported from perf.data: addresses, levels and latencies measured by the PMU; counts are samples, estimates samples x period", m.backend.join(", "))),
            ]
        } else {
            vec![
            ("rss".into(), format!("measured: /proc/PID/status VmRSS/RssAnon/RssFile/RssShmem every {interval} ms")),
            ("heap_live".into(), "measured: exact per-thread counters of every malloc/free (usable sizes)".into()),
            (
                "objects".into(),
                format!(
                    "measured for blocks >= {} and mmaps; sampled and scaled (1 per {} allocated on average) below",
                    human_bytes(m.settings.min_size as f64),
                    human_bytes(m.settings.sample_rate as f64)
                ),
            ),
            ("call stacks".into(), stacks_provenance(m)),
            ("statics".into(), "ELF symbol tables of the program and its libraries, with load bias".into()),
            ("thread stacks".into(), "thread stack ranges (reserved size) from pthread_getattr_np at each thread's first event".into()),
            (
                "accesses".into(),
                match analysis::sample_sources(m).first().map(String::as_str) {
                    Some("sancov") | None => "instrumented builds (memlens cc): bytes and access counts exact per thread and region; objects' accesses sampled and scaled (samples x period)".into(),
                    Some("page-faults") => format!("sampled: the kernel's page-fault event with data addresses, 1 per {} faults (first touches, neither loads nor stores)", m.settings.access_period),
                    Some(hw) => format!("sampled by the PMU ({hw}, 1 per {} operations): addresses, levels and latencies measured", m.settings.access_period),
                },
            ),
        ]
        },
    }
}

fn object_table(
    out: &mut String,
    objects: &[DataObject],
    value: impl Fn(&DataObject) -> f64,
    what: &str,
) {
    let _ = writeln!(
        out,
        "  {:>11}  {:<6} {:>10} {:>9} {:>9}  object",
        what, "kind", "allocs", "first", "last"
    );
    for o in objects {
        let est = if o.provenance == analysis::Provenance::SampledScaled {
            "~"
        } else {
            " "
        };
        let _ = writeln!(
            out,
            " {est}{:>11}  {:<6} {:>10.0} {:>8.3}s {:>8.3}s  {}{}",
            human_bytes(value(o)),
            o.kind.name(),
            o.allocations,
            o.first_ns as f64 / 1e9,
            o.last_ns as f64 / 1e9,
            o.name,
            if o.pid != 0 {
                format!("  [pid {}]", o.pid)
            } else {
                String::new()
            },
        );
    }
}

/// The unwinder asked for, and how many stacks each unwinder walked.
fn stacks_provenance(m: &profile::Meta) -> String {
    let mut total = profile::StacksUnwound::default();
    for p in &m.processes {
        total.frame_pointers += p.stacks_unwound.frame_pointers;
        total.cached_rules += p.stacks_unwound.cached_rules;
        total.libgcc += p.stacks_unwound.libgcc;
    }
    let by: Vec<String> = [
        (total.frame_pointers, "frame pointers"),
        (total.cached_rules, "cached DWARF rules"),
        (total.libgcc, "libgcc's unwinder"),
    ]
    .into_iter()
    .filter(|(n, _)| *n != 0)
    .map(|(n, how)| format!("{n} by {how}"))
    .collect();
    let by = if by.is_empty() {
        "none captured".to_owned()
    } else {
        by.join(", ")
    };
    format!("unwinder {}: {by}", m.settings.unwinder)
}

pub fn render_text(r: &Report) -> String {
    let mut out = String::new();
    let s = &r.summary;
    let _ = writeln!(out, "memlens report: {}", r.profile);
    let _ = writeln!(out, "command   {}", s.command.join(" "));
    match s.only {
        Some(analysis::Only::Process(pid)) => {
            let _ = writeln!(out, "view      process {pid} only");
        }
        Some(analysis::Only::Thread(tid)) => {
            let _ = writeln!(
                out,
                "view      thread {tid} only: its samples, regions, tags and exact counts; resident set, heap and objects are its process's"
            );
        }
        None => {}
    }
    let _ = writeln!(out, "host      {} | {} | Linux {}", s.host, s.cpu, s.kernel);
    let _ = writeln!(
        out,
        "backend   {} | duration {}",
        s.backend.join(" + "),
        seconds(s.duration_ns)
    );
    for p in &s.processes {
        let status = exit_status(p);
        let rank = p.rank.map(|r| format!(" rank {r}")).unwrap_or_default();
        let _ = writeln!(
            out,
            "process   {} (parent {}{rank}) {} from {} to {}, {status}",
            p.pid,
            p.ppid,
            p.exe,
            seconds(p.start_ns),
            p.end_ns.map(seconds).unwrap_or_else(|| "?".into())
        );
        if let Some(u) = &p.usage {
            let _ = writeln!(
                out,
                "          cpu {} user + {} system (kernel's account at exit)",
                seconds(u.user_ns),
                seconds(u.system_ns),
            );
        }
    }
    let pk = &r.peak;
    let _ = writeln!(out, "\nPEAK");
    let _ = writeln!(
        out,
        "  resident  {} at {} (pid {}); all processes together {}",
        human_bytes(pk.rss_bytes as f64),
        seconds(pk.rss_time_ns),
        pk.rss_pid,
        human_bytes(pk.total_rss_bytes as f64)
    );
    if pk.heap_measured {
        let _ = writeln!(
            out,
            "  heap      {} live at {} (pid {})",
            human_bytes(pk.heap_bytes as f64),
            seconds(pk.heap_time_ns),
            pk.heap_pid
        );
    } else {
        let _ = writeln!(
            out,
            "  heap      not measured: memlens' runtime ran in no process (static or setuid programs)"
        );
    }
    let _ = writeln!(
        out,
        "\nTOP DATA OBJECTS BY PEAK BYTES  (~ sampled and scaled)"
    );
    object_table(&mut out, &r.objects_by_peak, |o| o.peak_bytes, "peak");
    let _ = writeln!(
        out,
        "  + {} thread stacks, {} reserved",
        r.thread_stacks.threads,
        human_bytes(r.thread_stacks.reserved_bytes)
    );
    let _ = writeln!(out, "\nTOP DATA OBJECTS BY BYTES ALLOCATED");
    object_table(
        &mut out,
        &r.objects_by_allocated,
        |o| o.allocated_bytes,
        "allocated",
    );
    let _ = writeln!(out, "\nLEAKS AT EXIT");
    for l in &r.leaks.heap_live_at_exit {
        let _ = writeln!(
            out,
            "  pid {}: {} of heap still live (exact)",
            l.pid,
            human_bytes(l.bytes as f64)
        );
    }
    if r.leaks.sites.is_empty() {
        let _ = writeln!(out, "  no recorded block was left unfreed");
    } else {
        object_table(&mut out, &r.leaks.sites, |o| o.leaked_bytes, "leaked");
    }
    let _ = writeln!(out, "\nCAPACITY BY REGION");
    if r.regions.is_empty() {
        let _ = writeln!(
            out,
            "  no annotated regions (see memlens_region_begin in include/memlens.h)"
        );
    } else {
        let _ = writeln!(
            out,
            "  {:<20} {:>5} {:>9} {:>10} {:>10} {:>10} {:>11}",
            "region", "runs", "time", "rss begin", "rss peak", "heap peak", "heap growth"
        );
        for g in &r.regions {
            let _ = writeln!(
                out,
                "  {:<20} {:>5} {:>9} {:>10} {:>10} {:>10} {:>11}",
                g.name,
                g.instances,
                seconds(g.total_ns),
                human_bytes(g.rss_begin as f64),
                human_bytes(g.rss_peak as f64),
                human_bytes(g.heap_peak as f64),
                human_bytes(g.heap_growth as f64)
            );
        }
    }
    render_access(&mut out, &r.access);
    render_threads(&mut out, &r.threads);
    render_counters(&mut out, &r.counters);
    if let Some(levels) = &r.levels {
        render_levels(&mut out, levels);
    }
    render_sharing(&mut out, &r.sharing);
    if r.access.available {
        render_reuse(&mut out, &r.reuse);
    }
    if let Some(f) = &r.folding.content {
        render_folding(&mut out, f);
    }
    let _ = writeln!(out, "\nHOW OBTAINED");
    for (what, how) in &r.provenance {
        let _ = writeln!(out, "  {what:<13} {how}");
    }
    let l = &r.losses;
    let lost = loss_rows(l);
    let _ = writeln!(out, "\nLOSSES");
    if lost.iter().all(|(_, n)| *n == 0) {
        let _ = writeln!(out, "  none");
    }
    for (what, n) in lost.iter().filter(|(_, n)| *n > 0) {
        let _ = writeln!(out, "  {n} {what}");
    }
    out
}

/// How a process ended, as the report prints it.
pub(crate) fn exit_status(p: &Process) -> String {
    match (p.exit_code, p.signal) {
        (Some(c), _) => format!("exit {c}"),
        (_, Some(sig)) => format!("killed by signal {sig}"),
        _ => "exit status unknown".into(),
    }
}

/// Every kind of loss with its count, as the reports list them.
pub(crate) fn loss_rows(l: &Losses) -> [(&'static str, u64); 16] {
    [
        ("events dropped (log full)", l.dropped_events),
        ("tracked blocks not followed", l.untracked_allocs),
        ("log blocks cut short (process killed)", l.truncated_blocks),
        ("frees of blocks from before the process", l.unmatched_frees),
        ("timeline ticks missed", l.missed_ticks),
        ("hardware samples lost by the kernel", l.lost_samples),
        ("times the kernel throttled sampling", l.throttled),
        ("AUX chunks truncated", l.aux_truncated),
        ("AUX chunks partial", l.aux_partial),
        ("AUX chunks with collisions", l.aux_collisions),
        ("undecodable bytes or records", l.decode_errors),
        (
            "processes whose heap was not seen (put memlens' runtime first in LD_PRELOAD)",
            l.heap_not_hooked,
        ),
        (
            "processes whose allocator cannot tell block sizes (live heap not counted)",
            l.heap_sizes_unknown,
        ),
        (
            "processes that closed the log's descriptor (later events lost)",
            l.log_lost,
        ),
        (
            "processes whose log met a full disk (later events lost)",
            l.disk_full,
        ),
        (
            "static or setuid processes seen from /proc only (no heap, objects or sites)",
            l.untracked_processes,
        ),
    ]
}

/// A counter's value in its unit: bytes and ns in human units, counts plain.
fn counter_value(v: f64, unit: &str) -> String {
    match unit {
        "bytes" => human_bytes(v),
        "ns" => seconds(v as u64),
        _ if v >= 1e9 => format!("{:.2} G", v / 1e9),
        _ if v >= 1e6 => format!("{:.2} M", v / 1e6),
        _ => format!("{v:.0}"),
    }
}

fn render_levels(out: &mut String, t: &analysis::LevelTables) {
    let _ = writeln!(out, "\nLOADS BY MEMORY LEVEL ({})", t.method);
    if !t.cost.is_empty() {
        let _ = writeln!(out, "  cost: {}", t.cost);
    }
    for (title, rows) in [("routine", &t.by_routine), ("region", &t.by_region)] {
        if rows.is_empty() {
            continue;
        }
        let mut header = format!("  {title:<34} {:>8}", "loads");
        for l in &t.levels {
            let _ = write!(header, " {:>9}", truncate(l, 9));
        }
        let unit = t
            .cost
            .split(':')
            .next()
            .unwrap_or("")
            .split(',')
            .next()
            .unwrap_or("");
        let _ = writeln!(
            out,
            "{header} {:>9}",
            if unit.is_empty() { "cost" } else { unit }
        );
        for r in rows.iter() {
            let mut line = format!("  {:<34} {:>8}", truncate(&r.name, 34), r.load_samples);
            for pct in &r.percent {
                let _ = write!(line, " {:>8.1}%", pct);
            }
            let mean = r.mean_cost.map_or("-".to_string(), |m| format!("{m:.1}"));
            let _ = writeln!(out, "{line} {mean:>9}");
        }
    }
    if !t.spe_latency.is_empty() {
        let _ = writeln!(
            out,
            "  SPE latency by level (mean cycles)  samples    total    issue  translation  execution (total - issue - translation)"
        );
        for r in &t.spe_latency {
            let _ = writeln!(
                out,
                "  {:<33} {:>8} {:>8.1} {:>8.1} {:>12.1} {:>10.1}",
                r.level, r.samples, r.total, r.issue, r.translation, r.execution
            );
        }
    }
    if t.latency.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "  latency by level (cycles)   samples     mean   min  median    p90    p99     max"
    );
    for d in &t.latency {
        let _ = writeln!(
            out,
            "  {:<26} {:>9} {:>8.1} {:>5} {:>7} {:>6} {:>6} {:>7}",
            d.level, d.samples, d.mean, d.min, d.median, d.p90, d.p99, d.max
        );
    }
}

fn render_threads(out: &mut String, threads: &[analysis::ThreadSummary]) {
    // One thread says nothing a process line does not.
    if threads.len() < 2 {
        return;
    }
    let _ = writeln!(
        out,
        "\nTHREADS (exact counts of each thread; `memlens report --thread TID` shows one)"
    );
    let _ = writeln!(
        out,
        "  {:>8} {:>8} {:>9} {:>9} {:>10} {:>10} {:>11} {:>11} {:>8} {:>11} {:>8}",
        "pid",
        "tid",
        "start",
        "end",
        "loads",
        "stores",
        "read",
        "written",
        "allocs",
        "allocated",
        "samples"
    );
    let opt = |v: Option<u64>, f: &dyn Fn(u64) -> String| v.map_or("-".to_string(), f);
    for t in threads {
        let r = &t.row;
        let _ = writeln!(
            out,
            "  {:>8} {:>8} {:>9} {:>9} {:>10} {:>10} {:>11} {:>11} {:>8} {:>11} {:>8}{}",
            r.pid,
            r.tid,
            opt(r.start_ns, &seconds),
            opt(r.end_ns, &seconds),
            opt(r.loads, &|v| count(v as f64)),
            opt(r.stores, &|v| count(v as f64)),
            opt(r.bytes_read, &|v| human_bytes(v as f64)),
            opt(r.bytes_written, &|v| human_bytes(v as f64)),
            opt(r.allocs, &|v| v.to_string()),
            opt(r.alloc_bytes, &|v| human_bytes(v as f64)),
            t.samples,
            if r.final_counts || r.start_ns.is_none() {
                ""
            } else {
                "  (running at exit: as last published)"
            }
        );
    }
}

fn render_reuse(out: &mut String, section: &Section<analysis::ReuseReport>) {
    let Some(r) = &section.content else {
        let why = section.why_not.as_deref().unwrap_or("");
        let _ = writeln!(out, "\nREUSE DISTANCE: none ({why})");
        return;
    };
    let _ = writeln!(out, "\nREUSE DISTANCE ({})", r.method);
    let counts = |h: &analysis::Histogram| {
        format!(
            "{} accesses, {} first touches, {} reuses",
            count(h.accesses),
            count(h.cold),
            count(h.reuses)
        )
    };
    let _ = writeln!(out, "  all threads: {}", counts(&r.all));
    let _ = writeln!(out, "  distance (lines)      reuses   share  cumulative");
    let mut cumulative = 0.0;
    for b in &r.all.bins {
        cumulative += b.reuses;
        let _ = writeln!(
            out,
            "  {:<16} {:>11} {:>6.1}% {:>10.1}%",
            bin_label(b),
            count(b.reuses),
            100.0 * b.reuses / r.all.reuses,
            100.0 * cumulative / r.all.reuses
        );
    }
    let _ = writeln!(
        out,
        "  {:<40} {:>10} {:>10} {:>10}  {:<14} {:<14}",
        "object", "accesses", "reuses", "mean dist", "median", "p90"
    );
    for o in &r.objects {
        let h = &o.histogram;
        let _ = writeln!(
            out,
            "  {:<40} {:>10} {:>10} {:>10}  {:<14} {:<14}",
            truncate(&format!("{} [pid {}]", o.name, o.pid), 40),
            count(h.accesses),
            count(h.reuses),
            h.mean_distance.map_or("-".into(), |m| format!("{m:.1}")),
            quantile_bin(h, 0.5),
            quantile_bin(h, 0.9)
        );
    }
    if r.pairs.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "  top use -> reuse pairs (distance in lines: mean [min..max], median bin)"
    );
    for pair in &r.pairs {
        let h = &pair.histogram;
        let _ = writeln!(
            out,
            "  {:>10} reuses  {:>10.1} [{:.0}..{:.0}] {:<12} {}\n      use   {}\n      reuse {}",
            count(h.reuses),
            h.mean_distance.unwrap_or(0.0),
            pair.min_distance,
            pair.max_distance,
            quantile_bin(h, 0.5),
            pair.object,
            pair.use_location,
            pair.reuse_location
        );
    }
}

fn render_folding(out: &mut String, f: &analysis::Folding) {
    let _ = writeln!(
        out,
        "\nFOLDED {} (pid {}): {} instances, {} folded (the rest were outliers in duration: preempted or disturbed), mean {}; {} samples, 1 per {}; sampled and scaled",
        f.label(),
        f.pid,
        f.instances,
        f.folded,
        duration(f.mean_ns),
        f.samples,
        f.period
    );
    let _ = writeln!(out, "  instances: {}", f.how);
    if let Some(exact) = f.exact_accesses_per_instance {
        let _ = writeln!(
            out,
            "  accesses per instance: exact {:.0}, folded estimate {:.0} ({:+.1}%)",
            exact,
            f.est_accesses_per_instance,
            100.0 * (f.est_accesses_per_instance / exact - 1.0)
        );
    }
    let _ = writeln!(
        out,
        "  {:<11} {:>8} {:>7} {:>12} {:>11}  {:<40} code",
        "phase", "samples", "stores", "accesses/s", "bytes/s", "objects (samples)"
    );
    for b in &f.bins {
        let objects = b
            .objects
            .iter()
            .take(2)
            .map(|o| format!("{} ({})", truncate(&o.name, 16), o.samples))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            out,
            "  {:.2}-{:.2}   {:>8} {:>7} {:>12} {:>11}  {:<40} {}",
            b.from,
            b.to,
            b.samples,
            b.store_samples,
            count(b.est_accesses_per_s),
            format!("{}/s", human_bytes(b.est_bytes_per_s)),
            truncate(&objects, 40),
            b.location.as_deref().unwrap_or("-")
        );
    }
}

/// A duration in the unit that suits it.
fn duration(ns: f64) -> String {
    match ns {
        n if n < 1e3 => format!("{n:.0} ns"),
        n if n < 1e6 => format!("{:.1} us", n / 1e3),
        n if n < 1e9 => format!("{:.2} ms", n / 1e6),
        n => format!("{:.3} s", n / 1e9),
    }
}

/// A count as printed: plain below a million.
fn count(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2} M", v / 1e6)
    } else {
        format!("{v:.0}")
    }
}

fn bin_label(b: &analysis::Bin) -> String {
    if b.to == b.from + 1 {
        b.from.to_string()
    } else {
        format!("{}..{}", b.from, b.to - 1)
    }
}

/// The bin holding the q-quantile of an object's reuses.
fn quantile_bin(h: &analysis::Histogram, q: f64) -> String {
    let mut cumulative = 0.0;
    for b in &h.bins {
        cumulative += b.reuses;
        if cumulative >= q * h.reuses {
            return bin_label(b);
        }
    }
    "-".into()
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

fn render_sharing(out: &mut String, lines: &[analysis::SharedLine]) {
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nSHARED CACHE LINES ({}-byte lines touched by two or more threads, one writing; sampled: ranked by sampled ownership changes)",
        analysis::LINE
    );
    let spans = |r: &[(u32, u32)]| {
        r.iter()
            .map(|(a, b)| format!("{a}..{b}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    for l in lines {
        let offset = l
            .offset_in_object
            .map_or(String::new(), |o| format!(" +{o}"));
        let _ = writeln!(
            out,
            "  {:#x}  {}  {}{}  (pid {}): {} samples (~{:.0} accesses), {} stores, {} ownership changes",
            l.address,
            l.kind.to_uppercase(),
            l.object,
            offset,
            l.pid,
            l.samples,
            l.est_accesses,
            l.store_samples,
            l.thread_switches
        );
        for t in &l.threads {
            let loc = t.locations.first().map_or("", |s| s.location.as_str());
            let _ = writeln!(
                out,
                "    tid {:<8} writes bytes {:<12} reads {:<12} {:>6} stores {:>6} loads  at {loc}",
                t.tid,
                spans(&t.written),
                spans(&t.read),
                t.stores,
                t.loads
            );
        }
    }
}

fn render_counters(out: &mut String, counters: &[analysis::CounterSummary]) {
    if counters.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nCOUNTERS (perf events read every interval; per region: interpolated between readings)"
    );
    let _ = writeln!(
        out,
        "  {:<28} {:>12} {:>14} {:>14}  how",
        "counter", "total", "mean /s", "peak /s"
    );
    for c in counters {
        let per_s = |v: f64| match c.unit.as_str() {
            // CPU time per second of run: CPUs busy.
            "ns" => format!("{:.2} CPUs", v / 1e9),
            unit => counter_value(v, unit),
        };
        let _ = writeln!(
            out,
            "  {:<28} {:>12} {:>14} {:>14}  {} ({}, {} readings)",
            format!("{} [{}]", c.name, c.unit),
            counter_value(c.total, &c.unit),
            per_s(c.mean_rate),
            per_s(c.peak_rate),
            c.method,
            c.scope,
            c.readings
        );
        for r in &c.regions {
            let _ = writeln!(
                out,
                "    in {:<23} {:>12} {:>14}",
                r.region,
                counter_value(r.value, &c.unit),
                per_s(r.rate)
            );
        }
    }
}

fn rate(bytes_per_s: f64) -> String {
    format!("{}/s", human_bytes(bytes_per_s))
}

fn render_access(out: &mut String, a: &analysis::AccessReport) {
    let _ = writeln!(out, "\nACCESS PROFILE");
    if !a.available {
        let _ = writeln!(
            out,
            "  access sampling unavailable: the program was not built with `memlens cc`/`memlens c++`\n  (rebuild with CC=\"memlens cc\" or CXX=\"memlens c++\"; see README, Access profiling)"
        );
        return;
    }
    let period = if a.period > 0 {
        a.period.to_string()
    } else {
        "? (not in the recording)".to_string()
    };
    let page_faults = a.sources.iter().any(|s| s == "page-faults");
    if a.sources.iter().any(|s| s == "sancov") {
        let _ = writeln!(
            out,
            "  {} samples, 1 per {period} accesses of a class; {} read and {} written exactly",
            a.samples,
            human_bytes(a.bytes_read as f64),
            human_bytes(a.bytes_written as f64)
        );
    } else if page_faults {
        let _ = writeln!(
            out,
            "  {} samples of the kernel's page-fault event, 1 per {period} {}",
            a.samples,
            analysis::period_unit(&a.sources)
        );
    } else {
        let _ = writeln!(
            out,
            "  {} hardware samples ({}), 1 per {period} sampled events; levels and latencies as the hardware reported them",
            a.samples,
            a.sources.join(", ")
        );
    }
    if !a.levels.is_empty() {
        let _ = writeln!(out, "\n  MEMORY LEVELS (measured by the hardware)");
        let _ = writeln!(
            out,
            "  {:<34} {:>9} {:>7} {:>9} {:>9} {:>13}",
            "level", "samples", "share", "loads", "stores", "mean latency"
        );
        for l in &a.levels {
            let _ = writeln!(
                out,
                "  {:<34} {:>9} {:>6.1}% {:>9} {:>9} {:>13}",
                l.level,
                l.samples,
                100.0 * l.samples as f64 / a.samples.max(1) as f64,
                l.loads,
                l.stores,
                l.mean_latency
                    .map_or("-".to_string(), |c| format!("{c:.1} cycles"))
            );
        }
    }
    if let Some(acc) = a.accuracy {
        let _ = writeln!(
            out,
            "  sampling accuracy {:.3}% (NMO eq. 1: samples x period against {} counted accesses)",
            acc * 100.0,
            a.counted
        );
    }
    let (title, column) = if page_faults {
        ("PAGE FAULTS", "est. faults")
    } else {
        ("ACCESSES", "est. access")
    };
    let _ = writeln!(
        out,
        "\n  TOP OBJECTS BY ESTIMATED {title} (samples x period)"
    );
    let _ = writeln!(
        out,
        "  {:>12} {:>9} {:>9}  object / hottest lines",
        column, "loads", "stores"
    );
    let share = |n: u64, of: u64| {
        if page_faults {
            "-".to_string() // a fault is neither a load nor a store
        } else {
            format!("{:.0}%", 100.0 * n as f64 / of.max(1) as f64)
        }
    };
    for o in &a.objects {
        let _ = writeln!(
            out,
            "  {:>12.0} {:>9} {:>9}  {}",
            o.est_accesses,
            share(o.load_samples, o.samples),
            share(o.store_samples, o.samples),
            o.name
        );
        for l in o.lines.iter().take(3) {
            let _ = writeln!(out, "  {:>34}  {} samples at {}", "", l.samples, l.location);
        }
    }
    if a.unattributed > 0 {
        let _ = writeln!(out, "  ({} samples hit no recorded object: small unsampled heap blocks, or code outside memlens' view)", a.unattributed);
    }
    let _ = writeln!(
        out,
        "\n  REGIONS (bytes exact; bandwidth = bytes / time in region)"
    );
    let _ = writeln!(
        out,
        "  {:<16} {:>5} {:>9} {:>11} {:>11} {:>12} {:>12}  objects touched (samples)",
        "region", "runs", "time", "read", "written", "read bw", "write bw"
    );
    for r in &a.regions {
        let objs: Vec<String> = r
            .objects
            .iter()
            .take(3)
            .map(|(n, k)| format!("{n} ({k})"))
            .collect();
        let _ = writeln!(
            out,
            "  {:<16} {:>5} {:>9} {:>11} {:>11} {:>12} {:>12}  {}",
            r.name,
            r.instances,
            seconds(r.total_ns),
            human_bytes(r.bytes_read as f64),
            human_bytes(r.bytes_written as f64),
            rate(r.read_bandwidth),
            rate(r.write_bandwidth),
            objs.join(", ")
        );
        let derived = derived_figures(r);
        if !derived.is_empty() {
            let _ = writeln!(
                out,
                "    from {} samples alone: {}",
                r.derived.load_samples + r.derived.store_samples,
                derived.join(", ")
            );
        }
    }
}

/// A region's figures derived from its samples, each with the exact one and
/// the estimate's error where the exact one exists.
fn derived_figures(r: &analysis::RegionAccess) -> Vec<String> {
    let d = &r.derived;
    let versus = |estimate: f64, exact: Option<f64>, shown: &dyn Fn(f64) -> String| match exact {
        Some(x) if x > 0.0 => format!(
            "{} (exact {}, {:+.1}%)",
            shown(estimate),
            shown(x),
            100.0 * (estimate / x - 1.0)
        ),
        _ => shown(estimate),
    };
    let exact_rate = |bytes: u64, bw: f64| (bytes > 0).then_some(bw);
    let mut out = Vec::new();
    if let Some(ns) = d.derived_latency_ns {
        out.push(format!(
            "{} per load",
            versus(ns, r.exact_ns_per_load, &|v| format!("{v:.2} ns"))
        ));
    }
    if let Some(bw) = d.est_read_bandwidth {
        out.push(format!(
            "read {}",
            versus(bw, exact_rate(r.bytes_read, r.read_bandwidth), &rate)
        ));
    }
    if let Some(bw) = d.est_write_bandwidth {
        out.push(format!(
            "write {}",
            versus(bw, exact_rate(r.bytes_written, r.write_bandwidth), &rate)
        ));
    }
    out
}
