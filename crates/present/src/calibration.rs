//! `memlens calibrate`'s text: the latency curve, each level's plateau next to
//! the cache sizes sysfs gives, and the streaming bandwidth.

use crate::human_bytes;
use memlens_profile::{BandwidthPoint, Calibration};
use std::fmt::Write;

/// `refused`: bandwidth figures measured but not saved, their runs spread
/// beyond `max_spread`.
pub fn render_calibration(c: &Calibration, refused: &[BandwidthPoint], max_spread: f64) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "CALIBRATION  {}  ({})", c.cpu, c.host);
    let _ = writeln!(out, "  method     {}", c.method);
    let _ = writeln!(
        out,
        "\nLATENCY CURVE (measured)\n  {:>12}  {:>9}",
        "working set", "ns/load"
    );
    for p in &c.latency {
        let _ = writeln!(out, "  {:>12}  {:>9.2}", human_bytes(p.bytes as f64), p.ns);
    }
    let _ = writeln!(
        out,
        "\nLEVELS (plateau: median latency of the sizes the level holds)\n  {:<6} {:>12} {:>9}  {:<28} geometry (sysfs)",
        "level", "size (sysfs)", "ns", "from sizes"
    );
    for l in &c.levels {
        let cache = c.caches.iter().find(|k| k.name == l.name);
        let size = cache.map_or("-".into(), |k| human_bytes(k.size as f64));
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
        let _ = writeln!(
            out,
            "  {:<6} {:>12} {:>9.2}  {:<28} {}",
            l.name, size, l.ns, span, geometry
        );
    }
    for k in &c.caches {
        if !c.levels.iter().any(|l| l.name == k.name) {
            let _ = writeln!(
                out,
                "  {:<6} {:>12}  no size on the curve fits it alone",
                k.name,
                human_bytes(k.size as f64)
            );
        }
    }
    if !c.levels.iter().any(|l| l.name == "DRAM") {
        let _ = writeln!(
            out,
            "  DRAM   not reached: give --max-size at least twice the last cache"
        );
    }
    let knees: Vec<String> = c.knees.iter().map(|&b| human_bytes(b as f64)).collect();
    let _ = writeln!(
        out,
        "  the curve rises by half or more after: {}",
        if knees.is_empty() {
            "-".to_string()
        } else {
            knees.join(", ")
        }
    );
    let _ = writeln!(
        out,
        "\nBANDWIDTH (measured, bytes the program moved; median of the runs, and their range)"
    );
    for b in &c.bandwidth {
        let _ = writeln!(out, "  {}", bandwidth_line(b));
    }
    for b in refused {
        let _ = writeln!(
            out,
            "  {}  REFUSED, not saved: over {:.0}%, the machine was busy; run again when it is quiet",
            bandwidth_line(b),
            max_spread * 100.0
        );
    }
    out
}

fn bandwidth_line(b: &BandwidthPoint) -> String {
    let range = match (b.runs_gib_per_s.first(), b.runs_gib_per_s.last()) {
        (Some(lo), Some(hi)) => format!(
            "  {} runs {lo:.2} .. {hi:.2}, spread {:.1}%",
            b.runs_gib_per_s.len(),
            b.spread() * 100.0
        ),
        _ => String::new(),
    };
    format!(
        "{:<6} {:>2} thread(s) over {:>10}  {:>7.2} GiB/s{range}",
        b.kind,
        b.threads,
        human_bytes(b.bytes as f64),
        b.gib_per_s
    )
}
