//! `memlens calibrate`'s text: the latency curve, each level's plateau next to
//! the cache sizes sysfs gives, and the streaming bandwidth, as report
//! sections drawn by the text renderer.

use crate::human_bytes;
use crate::report::model::{Cell, Column, Row, Section, Table, Unit};
use memlens_profile::{BandwidthPoint, Calibration};

/// `refused`: bandwidth figures measured but not saved, their runs spread
/// beyond `max_spread`.
pub fn render_calibration(c: &Calibration, refused: &[BandwidthPoint], max_spread: f64) -> String {
    crate::report::text::sections_text(&calibration_sections(c, refused, max_spread))
}

fn calibration_sections(
    c: &Calibration,
    refused: &[BandwidthPoint],
    max_spread: f64,
) -> Vec<Section> {
    let machine = Section::new("calibration", "Calibration").table(Table::key_value([
        ("cpu".to_string(), c.cpu.clone()),
        ("host".to_string(), c.host.clone()),
        ("method".to_string(), c.method.clone()),
    ]));
    let mut curve = Table::new(vec![
        Column::measure("working set", Unit::Bytes),
        Column::measure("ns/load", Unit::Nanoseconds),
    ]);
    for p in &c.latency {
        curve.push(Row::from(vec![
            Cell::bytes(p.bytes as f64),
            Cell::fixed(p.ns, 2),
        ]));
    }
    let curve = Section::new("latency", "Latency curve")
        .note("measured")
        .table(curve);
    Vec::from([machine, curve, levels(c), bandwidth(c, refused, max_spread)])
}

/// Each level's plateau beside its size and geometry in sysfs.
fn levels(c: &Calibration) -> Section {
    let mut t = Table::new(vec![
        Column::text("level"),
        Column::measure("size (sysfs)", Unit::Bytes),
        Column::measure("ns", Unit::Nanoseconds),
        Column::text("from sizes"),
        Column::text("geometry (sysfs)"),
    ]);
    for l in &c.levels {
        let cache = c.caches.iter().find(|k| k.name == l.name);
        let geometry = cache.map_or(String::new(), |k| {
            format!(
                "{}-way, {} B lines, {} CPU(s)",
                k.ways, k.line, k.shared_cpus
            )
        });
        let span = format!(
            "{} .. {} ({} points)",
            human_bytes(l.from_bytes as f64),
            human_bytes(l.to_bytes as f64),
            l.points
        );
        t.push(Row::from(vec![
            l.name.clone().into(),
            Cell::or_dash(cache, |k| Cell::bytes(k.size as f64)),
            Cell::fixed(l.ns, 2),
            span.into(),
            geometry.into(),
        ]));
    }
    for k in &c.caches {
        if !c.levels.iter().any(|l| l.name == k.name) {
            t.push(Row::from(vec![
                k.name.clone().into(),
                Cell::bytes(k.size as f64),
                "-".to_string().into(),
                "no size on the curve fits it alone".to_string().into(),
                String::new().into(),
            ]));
        }
    }
    if !c.levels.iter().any(|l| l.name == "DRAM") {
        t = t.footer("DRAM not reached: give --max-size at least twice the last cache");
    }
    let knees: Vec<String> = c.knees.iter().map(|&b| human_bytes(b as f64)).collect();
    t = t.footer(format!(
        "the curve rises by half or more after: {}",
        if knees.is_empty() {
            "-".to_string()
        } else {
            knees.join(", ")
        }
    ));
    Section::new("levels", "Levels")
        .note("plateau: median latency of the sizes the level holds")
        .table(t)
}

/// The streaming bandwidth figures, and those refused for their spread.
fn bandwidth(c: &Calibration, refused: &[BandwidthPoint], max_spread: f64) -> Section {
    let mut t = Table::new(vec![
        Column::text("kind"),
        Column::measure("threads", Unit::Count),
        Column::measure("over", Unit::Bytes),
        Column::measure("median", Unit::BytesPerSecond),
        Column::text("runs"),
    ]);
    let row = |b: &BandwidthPoint, status: &str| {
        let runs = match (b.runs_gib_per_s.first(), b.runs_gib_per_s.last()) {
            (Some(lo), Some(hi)) => format!(
                "{} runs {lo:.2} .. {hi:.2}, spread {:.1}%{status}",
                b.runs_gib_per_s.len(),
                b.spread() * 100.0
            ),
            _ => status.trim_start().to_string(),
        };
        Row::from(vec![
            b.kind.clone().into(),
            Cell::count(b.threads),
            Cell::bytes(b.bytes as f64),
            Cell::measured(
                format!("{:.2} GiB/s", b.gib_per_s),
                b.gib_per_s * (1u64 << 30) as f64,
            ),
            runs.into(),
        ])
    };
    for b in &c.bandwidth {
        t.push(row(b, ""));
    }
    let busy = format!(
        "  REFUSED, not saved: over {:.0}%, the machine was busy; run again when it is quiet",
        max_spread * 100.0
    );
    for b in refused {
        t.push(row(b, &busy));
    }
    Section::new("bandwidth", "Bandwidth")
        .note("measured, bytes the program moved; median of the runs, and their range")
        .table(t)
}
