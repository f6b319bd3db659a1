//! `memlens report`: the report's data, built once from a profile; its
//! sections (`sections/`) lay the data out as tables that the text, HTML and
//! JSON renderers draw, so every output carries the same content. JSON also
//! carries the data itself, and CSV one of its tables with exact numbers.

mod call_tree;
mod html;
mod job;
mod json;
pub(crate) mod model;
mod sections;
pub(crate) mod text;

pub use html::{render_html, render_job_html, SourceText};
pub use job::rank_page;
pub use job::JobReport;
pub use json::{job_value, render_json, report_schema, report_value, REPORT_SCHEMA_VERSION};
pub use text::{render_key_values, render_text};

/// A job's report as text.
pub fn render_job_text(j: &JobReport) -> String {
    text::page(&j.profile, &job::job_sections(j))
}

use crate::format::human_bytes;
use memlens_analysis::{self as analysis, DataObject, ObjectKind, Peak, RegionCapacity};
use memlens_profile::{self as profile, Backend, Losses, Process, Profile};
use serde::Serialize;

/// Source lines the HTML page's source pane carries at most: the page's
/// size stays bounded by the code, not the run.
const PANE_LINES: usize = 2000;

#[derive(Serialize, schemars::JsonSchema)]
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
    /// The most sampled source lines: samples, bytes, levels, objects.
    pub source: analysis::SourceLines,
    /// Up to [`PANE_LINES`] of them, for the HTML page's source pane.
    #[serde(skip)]
    pub source_pane: analysis::SourceLines,
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
    /// Frames of each object's stack the text shows (`--stacks`).
    #[serde(skip)]
    pub stacks_shown: usize,
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct Summary {
    /// The part of the profile shown (null: all of it).
    pub only: Option<profile::Only>,
    pub command: Vec<String>,
    pub host: String,
    pub cpu: String,
    pub kernel: String,
    pub backend: Vec<String>,
    pub duration_ns: u64,
    pub processes: Vec<Process>,
    pub settings: memlens_profile::Settings,
}

impl Summary {
    /// Whether the profile holds capacity at all: an imported perf.data holds
    /// samples only (no resident sets, blocks, mappings or regions).
    pub fn capacity_recorded(&self) -> bool {
        !(self.backend.iter()).any(|b| b == Backend::PerfDataImport.name())
    }
}

/// Why an imported profile has no capacity figures.
pub(crate) const IMPORT_HAS_NO_CAPACITY: &str =
    "not recorded: an imported perf.data holds samples, not allocations or resident sets (record the program with memlens for them)";

/// An analysis that may not apply to a profile: its result, or why not.
#[derive(Serialize, schemars::JsonSchema)]
#[schemars(rename = "Optional{T}")]
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
    /// Frames of each listed object's call stack the text shows under it.
    pub stacks: usize,
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
            stacks: 0,
        }
    }
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct ThreadStacks {
    pub threads: usize,
    pub reserved_bytes: f64,
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct Leaks {
    /// Exact live heap bytes each process held at its last sample.
    pub heap_live_at_exit: Vec<PidBytes>,
    /// Allocation sites with blocks never freed (every block when all were
    /// recorded; else large, sampled or grouped ones).
    pub sites: Vec<DataObject>,
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct PidBytes {
    pub pid: u32,
    pub bytes: u64,
}

pub fn build_report(p: &Profile, options: &ReportOptions) -> Report {
    let top = options.top;
    let all = analysis::data_objects(p);
    let objects = &all.list;
    let pick = |idx: Vec<usize>| analysis::with_frames(p, objects, idx);
    let by_peak = analysis::objects_by_peak(p, &all, top);
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
    let source_pane = analysis::source_lines(p, &all, PANE_LINES);
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
        timeline: analysis::capacity_series(p, &all),
        access: analysis::access_report(p, &all, top),
        counters: analysis::counters_report(p),
        threads: analysis::thread_summaries(p),
        sharing: analysis::shared_lines(p, &all, top),
        levels: analysis::level_tables(p, &all, top),
        source: source_pane.most(top),
        source_pane,
        reuse: analysis::reuse_distances(p, &all, top).into(),
        folding: analysis::fold(p, &all, options.fold_by(), options.fold_bins, false).into(),
        losses: m.losses.clone(),
        stacks_shown: options.stacks,
        provenance: if m.has(Backend::PerfDataImport) {
            vec![
                ("capacity".into(), IMPORT_HAS_NO_CAPACITY.into()),
                ("accesses".into(), format!("hardware samples ({}) imported from perf.data: addresses, levels and latencies measured by the PMU; counts are samples, estimates samples x period", m.backend.join(", "))),
            ]
        } else if m.processes.iter().all(|p| p.attached) {
            vec![
                ("rss".into(), format!("measured: /proc/PID/status VmRSS/RssAnon/RssFile/RssShmem every {interval} ms from the attach")),
                ("heap_live".into(), "not measured: memlens attached to a running process (it hooks the allocator only in programs it starts)".into()),
                ("objects".into(), format!("mappings as /proc/PID/maps listed them every {} ms (a mapping is counted from the look before the one that found it; one made and removed between two looks is missed); no heap blocks", interval * 10)),
                ("statics".into(), "ELF symbol tables of the code the process maps, with load bias".into()),
                ("accesses".into(), access_provenance(m)),
            ]
        } else {
            vec![
            ("rss".into(), format!("measured: /proc/PID/status VmRSS/RssAnon/RssFile/RssShmem every {interval} ms{}", thinned_note(&p.timeline_thinned, interval))),
            ("heap_live".into(), "measured: exact per-thread counters of every malloc/free (usable sizes)".into()),
            (
                "objects".into(),
                if m.settings.sample_rate == 1 {
                    "measured: every block recorded with its call stack, summed by site as the events replay (requested bytes; temporary allocations, bytes at the peak and leaks exact)".into()
                } else {
                    format!(
                        "measured for blocks >= {} and mmaps; sampled and scaled (1 per {} allocated on average) below (record with --leaks for every block)",
                        human_bytes(m.settings.min_size as f64),
                        human_bytes(m.settings.sample_rate as f64)
                    )
                },
            ),
            ("call stacks".into(), stacks_provenance(m)),
            ("statics".into(), "ELF symbol tables of the program and its libraries, with load bias".into()),
            ("thread stacks".into(), "thread stack ranges (reserved size) from pthread_getattr_np at each thread's first event".into()),
            ("accesses".into(), access_provenance(m)),
        ]
        },
    }
}

/// What the report merged of long timelines (see `profile::Thinned`).
fn thinned_note(thinned: &[profile::Thinned], interval_ms: u64) -> String {
    thinned
        .iter()
        .map(|t| {
            format!(
                "; pid {}'s {} readings merged {} at a time into {} for this report (each keeps the largest resident set and heap of its span: peaks exact, their times up to {} ms late)",
                t.pid,
                t.readings,
                t.merged,
                t.kept,
                (t.merged - 1) * interval_ms
            )
        })
        .collect()
}

/// How the profile's access samples were taken.
fn access_provenance(m: &profile::Meta) -> String {
    match analysis::sample_sources(m).first() {
        Some(Backend::Instrumented) | None => "instrumented builds (memlens cc): bytes and access counts exact per thread and region; objects' accesses sampled and scaled (samples x period)".into(),
        Some(Backend::PageFaults) => format!("sampled: the kernel's page-fault event with data addresses, 1 per {} faults (first touches, neither loads nor stores)", m.settings.access_period),
        Some(hw) => format!("sampled by the PMU ({hw}, 1 per {} operations): addresses, levels and latencies measured", m.settings.access_period),
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

#[cfg(test)]
mod tests {
    use super::*;
    use memlens_profile::{testing, Region, ThreadRow, TimelinePoint};

    /// Two threads take turns storing to adjacent 8-byte fields of a 64-byte
    /// block, in the context f <- main, inside a phase of the process.
    fn two_threads_sharing_a_line() -> Profile {
        let mut p = testing::instrumented(100);
        p.allocations = vec![testing::heap_block(1, 0x10000, 64, 3, 1_000)];
        testing::add_stack(&mut p, 1, 3, &[("main", 2)]);
        testing::add_stack(&mut p, 1, 7, &[("f", 3), ("main", 9)]);
        p.samples = testing::stores_in_turn(1, 0x10000, 40, 2_000);
        p.timeline = vec![TimelinePoint {
            pid: 1,
            time_ns: 50_000,
            stores: 4_000,
            bytes_written: 32_000,
            ..Default::default()
        }];
        p.threads = (1..=2)
            .map(|tid| ThreadRow {
                pid: 1,
                tid,
                stores: Some(2_000),
                ..Default::default()
            })
            .collect();
        p.regions = vec![Region {
            stores: Some(4_000),
            bytes_written: Some(32_000),
            process_wide: true,
            ..testing::region(1, 1, "work", 1_500, 45_000)
        }];
        p
    }

    /// Each section a profile has data for draws it, in text, JSON and CSV.
    #[test]
    fn a_profile_with_shared_accesses_renders_its_sections() {
        let p = two_threads_sharing_a_line();
        let r = build_report(&p, &ReportOptions::default());
        let text = render_text(&r);
        for needle in [
            "ACCESS PROFILE",
            "40 samples (100%) at f (a.c:3) ← main (a.c:9)",
            "work [process]",
            "THREADS",
            "SHARED CACHE LINES",
            "FALSE SHARING",
            "tid 1: writes bytes 0..8",
            "tid 2: writes bytes 8..16",
        ] {
            assert!(text.contains(needle), "{needle}: {text}");
        }
        let json = report_value(&r).unwrap();
        let ids: Vec<&str> = (json["sections"].as_array().unwrap().iter())
            .map(|s| s["id"].as_str().unwrap())
            .collect();
        for id in ["access", "threads", "sharing"] {
            assert!(ids.contains(&id), "{id}: {ids:?}");
        }
        let csv = crate::report_csv(&json, "sharing/shared-cache-lines").unwrap();
        assert_eq!(csv.lines().count(), 2, "{csv}");
        assert!(csv.contains("FALSE SHARING"), "{csv}");
    }

    /// A profile with nothing in it still gets every section that always
    /// applies, each saying what is missing, in both renderings.
    #[test]
    fn an_empty_profile_renders_every_section_that_applies() {
        let p = Profile::default();
        let r = build_report(&p, &ReportOptions::default());
        let text = render_text(&r);
        for title in [
            "RUN",
            "PEAK",
            "TOP DATA OBJECTS BY PEAK BYTES",
            "LEAKS AT EXIT",
            "no recorded block was left unfreed",
            "CAPACITY BY REGION",
            "no annotated regions",
            "access sampling unavailable",
            "HOW OBTAINED",
            "LOSSES\n  none",
        ] {
            assert!(text.contains(title), "{title}: {text}");
        }
        for absent in [
            "THREADS",
            "COUNTERS",
            "SHARED CACHE LINES",
            "REUSE",
            "FOLDING",
        ] {
            assert!(!text.contains(absent), "{absent}: {text}");
        }
        let page = render_html(&p, &r, SourceText::Embedded);
        let nav = page
            .split_once("<nav>")
            .unwrap()
            .1
            .split_once("</nav>")
            .unwrap()
            .0;
        assert!(
            nav.contains("href=\"#access\"") && !nav.contains("#threads"),
            "{nav}"
        );
    }
}
