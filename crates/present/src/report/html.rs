//! `memlens report DIR --html FILE`: the report as one self-contained page,
//! drawn by the template `templates/report.html` from the same sections as the
//! text report. Figures are inline SVG (the plots of `memlens plot`) that a
//! few lines of inline script zoom and pan: nothing is fetched, so the file
//! opens offline and can be mailed.

use super::call_tree::call_tree;
use super::job::{job_sections, rank_page, JobReport, MOST_AT_RANK};
use super::model::{Figure, Section};
use super::sections::sections;
use super::Report;
use crate::flame::{flame_stacks, flame_title, Flame};
use crate::plot::{
    plot_bandwidth, plot_capacity, plot_fold, plot_rank_band, plot_rank_map, plot_scatter, Image,
    PlotData, RankMeasure,
};
use crate::stacks::{Measure, Slices};
use memlens_analysis::LineFigures;
use memlens_profile::Profile;
use serde::Serialize;
use std::collections::HashMap;

const TEMPLATE: &str = include_str!("../../templates/report.html");
/// uPlot 1.6.32 (MIT, its license in assets/uplot/LICENSE): the timeline's
/// zoom, cursor values and range selection, inlined so the page fetches
/// nothing.
const UPLOT_JS: &str = include_str!("../../assets/uplot/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("../../assets/uplot/uPlot.min.css");
const UPLOT_LICENSE: &str = include_str!("../../assets/uplot/LICENSE");

/// The data of the page's interactive parts, each as JSON safe inside a
/// script ([`script_json`]), when the report has it.
#[derive(Serialize, Default)]
struct Scripts {
    /// The capacity timeline.
    timeline: Option<String>,
    /// The bandwidth chart under it.
    bandwidth: Option<String>,
    /// The other counters' charts under that.
    counters: Option<String>,
    /// The source pane's files, lines and figures.
    source: Option<String>,
    /// A job's ranks and their pages.
    rank_pages: Option<String>,
}

/// Points per series the page's timeline carries, whatever the run's length.
const TIMELINE_COLUMNS: usize = 2000;

#[derive(Serialize)]
struct Page<'a> {
    command: String,
    profile: &'a str,
    version: &'a str,
    sections: Vec<PageSection>,
    #[serde(flatten)]
    scripts: Scripts,
    uplot_js: &'static str,
    uplot_css: &'static str,
    uplot_license: &'static str,
}

/// The timeline's series for the page: seconds, then the resident set, the
/// live heap and the largest objects' live bytes (all processes summed). A
/// longer run keeps, in each of [`TIMELINE_COLUMNS`] slices, each series'
/// most and the slice's first instant, so no peak is lost to the page's size.
fn timeline_json(r: &Report) -> Option<String> {
    let t = &r.timeline;
    if !r.summary.capacity_recorded() || t.time_ns.is_empty() {
        return None;
    }
    let mut series: Vec<(String, Vec<f64>)> = vec![
        (
            "resident set".into(),
            t.rss.iter().map(|&v| v as f64).collect(),
        ),
        (
            "live heap".into(),
            t.heap_live.iter().map(|&v| v as f64).collect(),
        ),
    ];
    for o in &t.objects {
        let pid = match r.summary.processes.len() {
            1 => String::new(),
            _ => format!(" [pid {}]", o.pid),
        };
        series.push((
            format!("{} ({}){pid}", o.name, o.kind.name()),
            o.bytes.clone(),
        ));
    }
    let n = t.time_ns.len();
    let per = n.div_ceil(TIMELINE_COLUMNS).max(1);
    let slices = (0..n).step_by(per).map(|i| i..(i + per).min(n));
    let seconds: Vec<f64> = (slices.clone())
        .map(|s| t.time_ns[s.start] as f64 / 1e9)
        .collect();
    let series: Vec<serde_json::Value> = (series.into_iter())
        .map(|(name, values)| {
            let most: Vec<f64> = (slices.clone())
                .map(|s| values[s].iter().copied().fold(0.0, f64::max))
                .collect();
            serde_json::json!({ "name": name, "values": most })
        })
        .collect();
    let how = if per > 1 {
        format!("each point the most of {per} ticks")
    } else {
        "every tick".to_string()
    };
    let data = serde_json::json!({
        "t": seconds,
        "series": series,
        "how": how,
        "regions": region_bands(&t.regions, t.end_ns),
    });
    Some(script_json(data))
}

/// Threads whose own bandwidth the page carries at most, those that moved
/// the most bytes.
const BANDWIDTH_THREADS: usize = 16;

/// The bandwidth chart's data: seconds, then per series its name, whether
/// it is shown at first, and its bytes/s at the end of each interval
/// (null where the series has no point): the exact bytes of instrumented
/// code (all processes summed), the memory-traffic counters, and each of
/// the [`BANDWIDTH_THREADS`] busiest threads (hidden until its legend
/// entry is clicked). Columns as the timeline's: each slice's most.
fn bandwidth_json(p: &Profile) -> Option<String> {
    let mut series: Vec<RateSeries> = Vec::new();
    let mut push = |name: String, shown: bool, points| {
        series.push((serde_json::json!({ "name": name, "shown": shown }), points))
    };
    if p.meta.has(memlens_profile::Backend::Instrumented) {
        let [read, written] = read_and_written(&memlens_analysis::bandwidth_series(p));
        push("read (exact)".into(), true, read);
        push("written (exact)".into(), true, written);
    }
    for c in memlens_analysis::traffic_rates(p) {
        push(format!("{} ({})", c.name, c.method), true, c.rates);
    }
    let several = p.meta.processes.len() > 1;
    for t in memlens_analysis::thread_bandwidth(p)
        .into_iter()
        .take(BANDWIDTH_THREADS)
    {
        let who = match several {
            true => format!("pid {} tid {}", t.pid, t.tid),
            false => format!("tid {}", t.tid),
        };
        let [read, written] = read_and_written(&t.rates);
        push(format!("{who} read (exact)"), false, read);
        push(format!("{who} written (exact)"), false, written);
    }
    in_columns(series).map(script_json)
}

/// The counters other than memory traffic (CPU time, page faults,
/// instructions...), each its own chart under the bandwidth: per counter
/// its name, how it was obtained, the unit of its rate and the factor from
/// the counter's unit per second to it, and its rate at the end of each
/// interval, in columns as the timeline's.
fn counters_json(p: &Profile) -> Option<String> {
    let series = (memlens_analysis::counter_rates(p).into_iter())
        .filter(|c| c.unit != "bytes" && !c.rates.is_empty())
        .map(|c| {
            let (scale, unit) = crate::format::counter_rate_unit(&c.unit);
            let about = serde_json::json!({ "name": c.name, "how": c.method, "unit": unit, "scale": scale });
            (about, c.rates)
        })
        .collect();
    in_columns(series).map(script_json)
}

/// A chart's series: what the page says of it, and its (seconds, rate) points.
type RateSeries = (serde_json::Value, Vec<(f64, f64)>);

/// Series of rates on one time axis, every series' instants in order, as
/// `{"t": seconds, "series": [{...its own fields, "values"}]}` (a value is
/// null where the series has no point); a longer run keeps, in each of
/// [`TIMELINE_COLUMNS`] slices, each series' most. `None` when no series
/// has a point.
fn in_columns(series: Vec<RateSeries>) -> Option<serde_json::Value> {
    if series.iter().all(|s| s.1.is_empty()) {
        return None;
    }
    let mut times: Vec<f64> = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.0))
        .collect();
    times.sort_by(f64::total_cmp);
    times.dedup();
    let per = times.len().div_ceil(TIMELINE_COLUMNS).max(1);
    let slice_of = |t: f64| times.partition_point(|&x| x < t) / per;
    let columns = times.len().div_ceil(per);
    let seconds: Vec<f64> = times.iter().step_by(per).copied().collect();
    let series: Vec<serde_json::Value> = (series.into_iter())
        .map(|(mut about, points)| {
            let mut most: Vec<Option<f64>> = vec![None; columns];
            for (t, v) in points {
                let m = &mut most[slice_of(t)];
                *m = Some(m.map_or(v, |m| m.max(v)));
            }
            about["values"] = serde_json::json!(most);
            about
        })
        .collect();
    Some(serde_json::json!({ "t": seconds, "series": series }))
}

/// (seconds, read, written) rates as two series of (seconds, rate).
fn read_and_written(rates: &[(f64, f64, f64)]) -> [Vec<(f64, f64)>; 2] {
    [
        rates.iter().map(|&(t, r, _)| (t, r)).collect(),
        rates.iter().map(|&(t, _, w)| (t, w)).collect(),
    ]
}

/// A source file's text the page embeds at most, and all files' together:
/// beyond these the pane shows the sampled lines' numbers and figures only.
const SOURCE_FILE_MAX: u64 = 512 << 10;
const SOURCE_TEXT_MAX: u64 = 2 << 20;

/// Whether the page embeds the text of the sampled source files.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum SourceText {
    /// Each file read when it is readable text within the size limits.
    Embedded,
    /// Line numbers and figures only (a page sent where the code may not go).
    Left,
}

/// The source pane's data: the objects' and regions' names once, then per
/// file (most sampled first) its text or why there is none, and per sampled
/// line `[line, samples, loads, stores, est. read, est. written, [load
/// samples per level], [[object, samples]], [[region, samples]], function]`.
fn source_json(r: &Report, text: SourceText) -> Option<String> {
    let s = &r.source_pane;
    if s.lines.is_empty() {
        return None;
    }
    let (mut objects, mut regions) = (Names::default(), Names::default());
    let mut files: Vec<(&str, u64, Vec<&LineFigures>)> = Vec::new();
    let mut by_file: HashMap<&str, usize> = HashMap::new();
    for l in &s.lines {
        let i = *by_file.entry(&l.file).or_insert_with(|| {
            files.push((&l.file, 0, Vec::new()));
            files.len() - 1
        });
        files[i].1 += l.samples;
        files[i].2.push(l);
    }
    files.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let mut budget = SOURCE_TEXT_MAX;
    let files: Vec<serde_json::Value> = (files.into_iter())
        .map(|(path, samples, mut lines)| {
            lines.sort_by_key(|l| l.line);
            let (source, why) = match text {
                SourceText::Left => (None, Some("left out (--html-without-source)".to_string())),
                SourceText::Embedded => match read_source(path, &mut budget) {
                    Ok(t) => (Some(t), None),
                    Err(why) => (None, Some(why)),
                },
            };
            let lines: Vec<serde_json::Value> = (lines.into_iter())
                .map(|l| {
                    let objects: Vec<(usize, u64)> =
                        (l.objects.iter()).map(|(n, k)| (objects.id(n), *k)).collect();
                    let regions: Vec<(usize, u64)> =
                        (l.regions.iter()).map(|(n, k)| (regions.id(n), *k)).collect();
                    serde_json::json!([
                        l.line,
                        l.samples,
                        l.load_samples,
                        l.store_samples,
                        l.est_bytes_read,
                        l.est_bytes_written,
                        l.load_levels,
                        objects,
                        regions,
                        l.function,
                        l.first_ns as f64 / 1e9,
                        l.last_ns as f64 / 1e9
                    ])
                })
                .collect();
            serde_json::json!({ "path": path, "samples": samples, "text": source, "why": why, "lines": lines })
        })
        .collect();
    let data = serde_json::json!({
        "levels": s.levels,
        "accesses": s.samples_are_accesses,
        "sized": s.samples_are_sized,
        "period": s.period,
        "left_out": s.lines_left_out,
        "objects": objects.list,
        "regions": regions.list,
        "files": files,
    });
    Some(script_json(data))
}

/// Names listed once, referred to by their place in the list.
#[derive(Default)]
struct Names<'r> {
    list: Vec<&'r str>,
    ids: HashMap<&'r str, usize>,
}

impl<'r> Names<'r> {
    fn id(&mut self, name: &'r str) -> usize {
        *self.ids.entry(name).or_insert_with(|| {
            self.list.push(name);
            self.list.len() - 1
        })
    }
}

/// A sampled file's text, when it is a readable regular file of text no
/// larger than [`SOURCE_FILE_MAX`] and the page's [`SOURCE_TEXT_MAX`]
/// still has room; else why not.
fn read_source(path: &str, budget: &mut u64) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("not readable here: {e}"))?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > SOURCE_FILE_MAX || meta.len() > *budget {
        return Err(format!(
            "{} KiB: over the page's limit for source text",
            meta.len() >> 10
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("not readable here: {e}"))?;
    let text = String::from_utf8(bytes).map_err(|_| "not text (UTF-8)".to_string())?;
    *budget -= text.len() as u64;
    Ok(text)
}

/// JSON to put inside a `<script>`: no name from the program, nor a source
/// file's text, may close the element.
fn script_json(data: serde_json::Value) -> String {
    data.to_string().replace('<', "\\u003c")
}

/// Top-level regions as bands (name, begin and end in seconds): instances
/// of one region less than a [`TIMELINE_COLUMNS`]th of the run apart are
/// one band, as the capacity plot shades them.
fn region_bands(regions: &[(String, u64, u64)], end_ns: u64) -> Vec<(String, f64, f64)> {
    let gap = end_ns / TIMELINE_COLUMNS as u64;
    let mut sorted: Vec<&(String, u64, u64)> = regions.iter().collect();
    sorted.sort_by_key(|r| r.1);
    let mut bands: Vec<(String, u64, u64)> = Vec::new();
    for (name, begin, end) in sorted {
        match bands.last_mut() {
            Some(last) if last.0 == *name && *begin <= last.2 + gap => last.2 = last.2.max(*end),
            _ => bands.push((name.clone(), *begin, *end)),
        }
    }
    (bands.into_iter())
        .map(|(name, begin, end)| (name, begin as f64 / 1e9, end as f64 / 1e9))
        .collect()
}

#[derive(Serialize)]
struct PageSection {
    #[serde(flatten)]
    section: Section,
    figures: Vec<DrawnFigure>,
}

#[derive(Serialize)]
struct DrawnFigure {
    /// The picture, or nothing for a flame graph (its `flames`).
    svg: String,
    caption: &'static str,
    /// A flame graph by each measure the page offers for it, the first shown.
    flames: Vec<FlameView>,
}

/// One flame graph, drawn by the page from its call tree.
#[derive(Serialize)]
struct FlameView {
    /// What it weighs ("bytes allocated"), and its title.
    measure: &'static str,
    title: String,
    /// Its call tree ([`call_tree`]), as JSON for a script.
    tree: String,
}

/// The allocation flame graph's measures on the page, each offered when the
/// profile has some of it: heaptrack_gui's flame graph choices.
const PAGE_ALLOCATION_MEASURES: [Measure; 5] = [
    Measure::AllocSpace,
    Measure::AllocObjects,
    Measure::InuseSpace,
    Measure::LeakedSpace,
    Measure::TemporaryObjects,
];

/// The slices of time a flame graph's weights are kept by, for a range
/// picked on the timeline (fewer when its weights would be too many: see
/// [`call_tree`]).
const FLAME_SLICES: u32 = 128;

/// The whole report as one HTML page.
pub fn render_html(p: &Profile, r: &Report, text: SourceText) -> String {
    let plots = PlotData::new(p);
    page(
        r.summary.command.join(" "),
        &r.profile,
        &r.memlens_version,
        sections(r),
        Scripts {
            timeline: timeline_json(r),
            bandwidth: bandwidth_json(p),
            counters: counters_json(p),
            source: source_json(r, text),
            rank_pages: None,
        },
        |f| draw(&plots, r, f),
    )
}

/// A job's report as one HTML page; `rank_folder`: the folder, relative to
/// the page, of each rank's own page ([`rank_page`]), which the page links.
pub fn render_job_html(j: &JobReport, rank_folder: Option<&str>) -> String {
    let rank_pages = rank_folder.map(|folder| {
        let several_hosts = (j.job.ranks.iter()).any(|r| r.host != j.job.ranks[0].host);
        let ranks: Vec<(u32, String, String)> = (j.job.ranks.iter())
            .map(|r| {
                let pids: Vec<String> = r.pids.iter().map(u32::to_string).collect();
                let label = match several_hosts {
                    true => format!("rank {} on {} (pid {})", r.rank, r.host, pids.join(", ")),
                    false => format!("rank {} (pid {})", r.rank, pids.join(", ")),
                };
                (r.rank, label, format!("{folder}/{}", rank_page(r.rank)))
            })
            .collect();
        let data = serde_json::json!({ "ranks": ranks, "column": MOST_AT_RANK });
        script_json(data)
    });
    page(
        j.command.join(" "),
        &j.profile,
        &j.memlens_version,
        job_sections(j),
        Scripts {
            rank_pages,
            ..Scripts::default()
        },
        |figure| {
            let mut svg = String::new();
            let drawn = match figure {
                Figure::RankBand => plot_rank_band(&j.job, Image::Svg(&mut svg)),
                Figure::RankMap => plot_rank_map(&j.job, RankMeasure::Rss, Image::Svg(&mut svg)),
                _ => return None,
            };
            drawn_figure(figure, drawn, svg)
        },
    )
}

/// A page of sections, each with the figures `draw` gives it.
fn page(
    command: String,
    profile: &str,
    version: &str,
    sections: Vec<Section>,
    scripts: Scripts,
    draw: impl Fn(Figure) -> Option<DrawnFigure>,
) -> String {
    let sections = sections
        .into_iter()
        .map(|section| PageSection {
            figures: section.figures.iter().filter_map(|&f| draw(f)).collect(),
            section,
        })
        .collect();
    let page = Page {
        command,
        profile,
        version,
        sections,
        scripts,
        uplot_js: UPLOT_JS,
        uplot_css: UPLOT_CSS,
        uplot_license: UPLOT_LICENSE,
    };
    let mut env = minijinja::Environment::new();
    env.add_template("report.html", TEMPLATE)
        .and_then(|()| {
            env.get_template("report.html")?
                .render(minijinja::value::Serde(&page))
        })
        .expect("the report template renders any report (tested)")
}

/// A figure as SVG, or nothing when the plot has nothing to draw.
fn draw(d: &PlotData, r: &Report, figure: Figure) -> Option<DrawnFigure> {
    let mut svg = String::new();
    let drawn = match figure {
        Figure::Capacity => plot_capacity(d, Image::Svg(&mut svg)),
        Figure::Bandwidth => plot_bandwidth(d.p, Image::Svg(&mut svg)),
        Figure::Scatter => plot_scatter(d, Image::Svg(&mut svg)),
        Figure::Fold => {
            let f = r.folding.content.as_ref()?;
            plot_fold(d, f.by(), f.bins.len(), Image::Svg(&mut svg))
        }
        Figure::AllocationFlame | Figure::AccessFlame | Figure::LevelFlame => {
            let what = match figure {
                Figure::AllocationFlame => Flame::Weighed(Measure::AllocSpace),
                Figure::AccessFlame => Flame::Weighed(Measure::Accesses),
                _ => Flame::LoadsByLevel,
            };
            let slices = (r.timeline.end_ns > 0).then_some(Slices {
                end_ns: r.timeline.end_ns,
                count: FLAME_SLICES,
            });
            let (stacks, measure, title) = flame_stacks(d, what, slices).ok()?;
            let views = match figure {
                Figure::AllocationFlame => (PAGE_ALLOCATION_MEASURES.iter())
                    .filter(|m| stacks.measures.contains(m))
                    .map(|&m| (m, flame_title(m)))
                    .collect(),
                _ => vec![(measure, title)],
            };
            let flames: Vec<FlameView> = (views.into_iter())
                .filter_map(|(measure, title)| {
                    let tree = serde_json::to_value(call_tree(&stacks, measure)?).ok()?;
                    Some(FlameView {
                        measure: measure.what(),
                        title,
                        tree: script_json(tree),
                    })
                })
                .collect();
            return (!flames.is_empty()).then(|| DrawnFigure {
                svg: String::new(),
                caption: figure.caption(),
                flames,
            });
        }
        Figure::RankBand | Figure::RankMap => return None,
    };
    drawn_figure(figure, drawn, svg)
}

fn drawn_figure(
    figure: Figure,
    drawn: Result<(), crate::PlotError>,
    svg: String,
) -> Option<DrawnFigure> {
    (drawn.is_ok() && !svg.is_empty()).then(|| DrawnFigure {
        svg,
        caption: figure.caption(),
        flames: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::region_bands;

    #[test]
    fn instances_closer_than_a_column_are_one_band() {
        // A 2 s run: instances of "step" 0.5 ms apart (under 1 ms, a
        // 2,000th) are one band; "io" between them and a later "step" not.
        let ms = 1_000_000;
        let regions = [
            ("step", 0, 10 * ms),
            ("step", 10 * ms + ms / 2, 20 * ms),
            ("io", 30 * ms, 40 * ms),
            ("step", 50 * ms, 60 * ms),
        ]
        .map(|(n, b, e)| (n.to_string(), b, e));
        let bands = region_bands(&regions, 2_000 * ms);
        let named: Vec<(&str, f64, f64)> = (bands.iter())
            .map(|(n, b, e)| (n.as_str(), *b, *e))
            .collect();
        assert_eq!(
            named,
            [
                ("step", 0.0, 0.02),
                ("io", 0.03, 0.04),
                ("step", 0.05, 0.06)
            ]
        );
    }
}
