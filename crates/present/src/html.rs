//! `memlens report DIR --html FILE`: the report as one self-contained page.
//! Figures are inline SVG (the same plots as `memlens plot`), tables are
//! rendered here, and a few lines of inline script zoom and pan the figures:
//! nothing is fetched, so the file opens offline and can be mailed.

use crate::plot::{plot_bandwidth, plot_capacity, plot_fold, plot_scatter, Image};
use crate::report::{exit_status, loss_rows, Report};
use crate::{human_bytes, seconds};
use memlens_analysis::{self as analysis, Profile};
use std::fmt::Write;

const STYLE: &str = "
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1280px; padding: 0 16px 48px; color: #1d2330; }
h1 { font-size: 22px; margin: 20px 0 4px; } h2 { font-size: 18px; margin: 28px 0 6px; border-bottom: 1px solid #d5d9e0; }
.how { color: #5a6270; font-size: 12.5px; margin: 2px 0 8px; }
table { border-collapse: collapse; margin: 6px 0 12px; font-size: 13px; }
th, td { padding: 3px 9px; border-bottom: 1px solid #e6e9ee; text-align: left; vertical-align: top; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 8px 0 16px; border: 1px solid #d5d9e0; overflow: hidden; }
figure svg { display: block; width: 100%; height: auto; cursor: grab; }
figcaption { font-size: 12.5px; color: #5a6270; padding: 4px 8px; border-top: 1px solid #e6e9ee; }
nav a { margin-right: 12px; }
";

/// Wheel zooms a figure around the pointer, dragging pans, double-click resets.
const SCRIPT: &str = r#"
document.querySelectorAll('figure svg').forEach(function (svg) {
  var w = svg.width.baseVal.value || 1200, h = svg.height.baseVal.value || 700;
  if (!svg.getAttribute('viewBox')) svg.setAttribute('viewBox', '0 0 ' + w + ' ' + h);
  var home = svg.getAttribute('viewBox'), drag = null;
  function box() { return svg.getAttribute('viewBox').split(' ').map(Number); }
  function at(e) { var r = svg.getBoundingClientRect(), b = box();
    return [b[0] + (e.clientX - r.left) / r.width * b[2], b[1] + (e.clientY - r.top) / r.height * b[3]]; }
  svg.addEventListener('wheel', function (e) {
    e.preventDefault();
    var b = box(), p = at(e), k = e.deltaY < 0 ? 0.8 : 1.25;
    svg.setAttribute('viewBox', [p[0] - (p[0] - b[0]) * k, p[1] - (p[1] - b[1]) * k, b[2] * k, b[3] * k].join(' '));
  }, { passive: false });
  svg.addEventListener('mousedown', function (e) { drag = [e.clientX, e.clientY, box()]; });
  window.addEventListener('mouseup', function () { drag = null; });
  svg.addEventListener('mousemove', function (e) {
    if (!drag) return;
    var r = svg.getBoundingClientRect(), b = drag[2];
    svg.setAttribute('viewBox', [b[0] - (e.clientX - drag[0]) / r.width * b[2], b[1] - (e.clientY - drag[1]) / r.height * b[3], b[2], b[3]].join(' '));
  });
  svg.addEventListener('dblclick', function () { svg.setAttribute('viewBox', home); });
});
document.body.setAttribute('data-ready', 'yes');
"#;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A table; cells that start with a digit are right-aligned numbers.
fn table(out: &mut String, headers: &[&str], rows: &[Vec<String>]) {
    let numeric = |s: &str| s.starts_with(|c: char| c.is_ascii_digit() || c == '~');
    out.push_str("<table><tr>");
    for h in headers {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr>");
    for row in rows {
        out.push_str("<tr>");
        for cell in row {
            let class = if numeric(cell) { " class=\"n\"" } else { "" };
            let _ = write!(out, "<td{class}>{}</td>", esc(cell));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
}

fn section(out: &mut String, id: &str, title: &str, how: &str) {
    let _ = write!(
        out,
        "<h2 id=\"{id}\">{}</h2><p class=\"how\">{}</p>",
        esc(title),
        esc(how)
    );
}

/// An inline figure, or nothing when the plot has nothing to draw.
fn figure(
    out: &mut String,
    caption: &str,
    draw: impl FnOnce(&mut String) -> Result<(), crate::PlotError>,
) {
    let mut svg = String::new();
    if draw(&mut svg).is_ok() && !svg.is_empty() {
        let _ = write!(
            out,
            "<figure>{svg}<figcaption>{} (wheel: zoom, drag: pan, double-click: reset)</figcaption></figure>",
            esc(caption)
        );
    }
}

/// The whole report as one HTML page.
pub fn render_html(p: &Profile, r: &Report) -> String {
    let s = &r.summary;
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>memlens: {}</title><style>{STYLE}</style></head><body>",
        esc(&s.command.join(" "))
    );
    let _ = write!(
        out,
        "<h1>memlens report</h1><p class=\"how\">{} &middot; memlens {}</p>",
        esc(&r.profile),
        esc(&r.memlens_version)
    );
    out.push_str("<nav><a href=\"#run\">run</a><a href=\"#capacity\">capacity</a><a href=\"#objects\">objects</a><a href=\"#access\">access</a><a href=\"#levels\">levels</a><a href=\"#sharing\">sharing</a><a href=\"#reuse\">reuse</a><a href=\"#folding\">folding</a><a href=\"#threads\">threads</a><a href=\"#losses\">losses</a></nav>");

    section(&mut out, "run", "Run", "from the recording's metadata");
    let mut rows = vec![
        vec!["command".into(), s.command.join(" ")],
        vec![
            "host".into(),
            format!("{} | {} | Linux {}", s.host, s.cpu, s.kernel),
        ],
        vec!["backend".into(), s.backend.join(" + ")],
        vec!["duration".into(), seconds(s.duration_ns)],
    ];
    for pr in &s.processes {
        let status = exit_status(pr);
        let cpu = pr.usage.as_ref().map_or(String::new(), |u| {
            format!(
                "; cpu {} user + {} system (kernel)",
                seconds(u.user_ns),
                seconds(u.system_ns)
            )
        });
        rows.push(vec![
            format!("process {}", pr.pid),
            format!("{} (parent {}), {status}{cpu}", pr.exe, pr.ppid),
        ]);
    }
    table(&mut out, &["", ""], &rows);
    let provenance: Vec<Vec<String>> = r
        .provenance
        .iter()
        .map(|(what, how)| vec![what.clone(), how.clone()])
        .collect();
    table(&mut out, &["figure", "how it was obtained"], &provenance);

    section(
        &mut out,
        "capacity",
        "Capacity and bandwidth over time",
        &format!(
            "peak resident {} at {} (pid {}); peak live heap {} at {}: measured",
            human_bytes(r.peak.rss_bytes as f64),
            seconds(r.peak.rss_time_ns),
            r.peak.rss_pid,
            human_bytes(r.peak.heap_bytes as f64),
            seconds(r.peak.heap_time_ns)
        ),
    );
    figure(
        &mut out,
        "resident set and live heap (measured), largest objects stacked, regions shaded",
        |svg| plot_capacity(p, Image::Svg(svg)),
    );
    figure(
        &mut out,
        "read and write bandwidth: exact bytes of instrumented code between ticks, and memory-traffic counters",
        |svg| plot_bandwidth(p, Image::Svg(svg)),
    );

    section(
        &mut out,
        "objects",
        "Data objects",
        "heap blocks by allocation site, mappings, statics, tags and groups; ~ marks sampled and scaled figures",
    );
    let rows: Vec<Vec<String>> = r
        .objects_by_peak
        .iter()
        .map(|o| {
            let est = if o.provenance == analysis::Provenance::SampledScaled {
                "~"
            } else {
                ""
            };
            vec![
                format!("{est}{}", human_bytes(o.peak_bytes)),
                format!("{est}{}", human_bytes(o.allocated_bytes)),
                format!("{est}{:.0}", o.allocations),
                o.kind.name().to_string(),
                o.name.clone(),
            ]
        })
        .collect();
    table(
        &mut out,
        &["peak", "allocated", "allocations", "kind", "object"],
        &rows,
    );

    render_access(&mut out, p, r);
    render_levels(&mut out, r);
    render_sharing(&mut out, r);
    render_reuse(&mut out, r);
    render_folding(&mut out, p, r);
    render_threads(&mut out, r);

    section(
        &mut out,
        "losses",
        "Losses",
        "everything counted as lost while recording or reading",
    );
    let rows: Vec<Vec<String>> = loss_rows(&r.losses)
        .iter()
        .map(|(what, n)| vec![n.to_string(), what.to_string()])
        .collect();
    table(&mut out, &["count", "what"], &rows);
    let _ = write!(out, "<script>{SCRIPT}</script></body></html>");
    out
}

fn render_access(out: &mut String, p: &Profile, r: &Report) {
    let a = &r.access;
    if !a.available {
        return;
    }
    section(
        out,
        "access",
        "Accesses",
        &format!(
            "{} samples, 1 per {} ({}); objects' accesses sampled and scaled; bytes per region exact for instrumented code; accuracy {}",
            a.samples,
            a.period,
            a.sources.join(", "),
            a.accuracy
                .map_or("-".to_string(), |x| format!("{:.3}% (NMO eq. 1)", 100.0 * x))
        ),
    );
    figure(
        out,
        "sampled address against time, one band per object (loads blue, stores red), regions shaded",
        |svg| plot_scatter(p, Image::Svg(svg)),
    );
    let rows: Vec<Vec<String>> = a
        .objects
        .iter()
        .map(|o| {
            vec![
                format!("~{:.0}", o.est_accesses),
                o.load_samples.to_string(),
                o.store_samples.to_string(),
                o.name.clone(),
                o.lines
                    .first()
                    .map_or(String::new(), |l| l.location.clone()),
            ]
        })
        .collect();
    table(
        out,
        &[
            "est. accesses",
            "load samples",
            "store samples",
            "object",
            "hottest line",
        ],
        &rows,
    );
    let rows: Vec<Vec<String>> = a
        .regions
        .iter()
        .map(|g| {
            vec![
                g.name.clone(),
                g.instances.to_string(),
                seconds(g.total_ns),
                human_bytes(g.bytes_read as f64),
                human_bytes(g.bytes_written as f64),
                format!("{}/s", human_bytes(g.read_bandwidth)),
                g.derived
                    .est_read_bandwidth
                    .map_or("-".into(), |b| format!("{}/s", human_bytes(b))),
                g.derived
                    .derived_latency_ns
                    .map_or("-".into(), |ns| format!("{ns:.2} ns")),
                g.exact_ns_per_load
                    .map_or("-".into(), |ns| format!("{ns:.2} ns")),
            ]
        })
        .collect();
    table(
        out,
        &[
            "region",
            "runs",
            "time",
            "read (exact)",
            "written (exact)",
            "read bw (exact)",
            "read bw (from samples)",
            "per load (from samples)",
            "per load (exact)",
        ],
        &rows,
    );
}

fn render_levels(out: &mut String, r: &Report) {
    let Some(t) = &r.levels else {
        return;
    };
    section(out, "levels", "Loads by memory level", &t.method);
    let mut headers: Vec<&str> = vec!["routine", "loads"];
    headers.extend(t.levels.iter().map(String::as_str));
    headers.push("mean cost");
    for rows in [&t.by_routine, &t.by_region] {
        let rows: Vec<Vec<String>> = rows
            .iter()
            .map(|row| {
                let mut v = vec![row.name.clone(), row.load_samples.to_string()];
                v.extend(row.percent.iter().map(|x| format!("{x:.1}%")));
                v.push(row.mean_cost.map_or("-".into(), |c| format!("{c:.1}")));
                v
            })
            .collect();
        if !rows.is_empty() {
            table(out, &headers, &rows);
        }
    }
    if !t.cost.is_empty() {
        let _ = write!(out, "<p class=\"how\">cost: {}</p>", esc(&t.cost));
    }
    let rows: Vec<Vec<String>> = t
        .latency
        .iter()
        .map(|d| {
            vec![
                d.level.clone(),
                d.samples.to_string(),
                format!("{:.1}", d.mean),
                d.min.to_string(),
                d.median.to_string(),
                d.p90.to_string(),
                d.p99.to_string(),
                d.max.to_string(),
            ]
        })
        .collect();
    if !rows.is_empty() {
        table(
            out,
            &[
                "level",
                "samples",
                "mean cycles",
                "min",
                "median",
                "p90",
                "p99",
                "max",
            ],
            &rows,
        );
    }
}

fn render_sharing(out: &mut String, r: &Report) {
    if r.sharing.is_empty() {
        return;
    }
    section(
        out,
        "sharing",
        "Shared cache lines",
        "lines two or more threads touched, one writing; sampled, ranked by sampled ownership changes",
    );
    let spans = |v: &[(u32, u32)]| {
        v.iter()
            .map(|(a, b)| format!("{a}..{b}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let rows: Vec<Vec<String>> = r
        .sharing
        .iter()
        .flat_map(|l| {
            l.threads.iter().map(move |t| {
                vec![
                    format!("{:#x}", l.address),
                    l.kind.clone(),
                    l.object.clone(),
                    t.tid.to_string(),
                    spans(&t.written),
                    spans(&t.read),
                    t.locations
                        .first()
                        .map_or(String::new(), |s| s.location.clone()),
                ]
            })
        })
        .collect();
    table(
        out,
        &[
            "line",
            "kind",
            "object",
            "thread",
            "writes bytes",
            "reads bytes",
            "code",
        ],
        &rows,
    );
}

fn render_reuse(out: &mut String, r: &Report) {
    let Some(reuse) = &r.reuse.content else {
        return;
    };
    section(out, "reuse", "Reuse distance", &reuse.method);
    let rows: Vec<Vec<String>> = reuse
        .objects
        .iter()
        .map(|o| {
            let h = &o.histogram;
            vec![
                format!("{:.0}", h.accesses),
                format!("{:.0}", h.reuses),
                h.mean_distance.map_or("-".into(), |m| format!("{m:.1}")),
                o.name.clone(),
            ]
        })
        .collect();
    table(
        out,
        &["accesses", "reuses", "mean distance (lines)", "object"],
        &rows,
    );
    let rows: Vec<Vec<String>> = reuse
        .pairs
        .iter()
        .map(|pair| {
            vec![
                format!("{:.0}", pair.histogram.reuses),
                pair.histogram
                    .mean_distance
                    .map_or("-".into(), |m| format!("{m:.1}")),
                pair.object.clone(),
                pair.use_location.clone(),
                pair.reuse_location.clone(),
            ]
        })
        .collect();
    table(
        out,
        &["reuses", "mean distance", "object", "use", "reuse"],
        &rows,
    );
}

fn render_folding(out: &mut String, p: &Profile, r: &Report) {
    let Some(f) = &r.folding.content else {
        return;
    };
    section(
        out,
        "folding",
        &format!("Folded {}", f.label()),
        &format!(
            "{}; {} of {} instances, mean {:.1} us; sampled and scaled",
            f.how,
            f.folded,
            f.instances,
            f.mean_ns / 1e3
        ),
    );
    figure(
        out,
        "sampled address against the phase of one instance, folded rates below",
        |svg| plot_fold(p, f.by(), f.bins.len(), Image::Svg(svg)),
    );
}

fn render_threads(out: &mut String, r: &Report) {
    if r.threads.len() < 2 {
        return;
    }
    section(
        out,
        "threads",
        "Threads",
        "exact counts of each thread; samples as taken",
    );
    let opt = |v: Option<u64>| v.map_or("-".to_string(), |x| x.to_string());
    let rows: Vec<Vec<String>> = r
        .threads
        .iter()
        .map(|t| {
            vec![
                t.row.pid.to_string(),
                t.row.tid.to_string(),
                opt(t.row.loads),
                opt(t.row.stores),
                t.row
                    .bytes_read
                    .map_or("-".into(), |b| human_bytes(b as f64)),
                t.row
                    .alloc_bytes
                    .map_or("-".into(), |b| human_bytes(b as f64)),
                t.samples.to_string(),
            ]
        })
        .collect();
    table(
        out,
        &[
            "pid",
            "tid",
            "loads",
            "stores",
            "read",
            "allocated",
            "samples",
        ],
        &rows,
    );
}
