//! Access profiling: samples by memory level, the most accessed objects and
//! their hottest lines, and each region's exact bytes and bandwidth.

use crate::format::{context_path, counted, human_bytes, or_dash, rate, seconds};
use crate::report::model::{Cell, Column, Figure, Row, Section, Table, Unit};
use crate::report::Report;
use memlens_analysis::{self as analysis, AccessReport, RegionAccess};
use memlens_profile::Backend;

pub fn section(r: &Report) -> Option<Section> {
    let a = &r.access;
    let s = Section::new("access", "Access profile");
    if !a.available {
        return Some(s.note(
            "access sampling unavailable: the program was not built with `memlens cc`/`memlens c++` (rebuild with CC=\"memlens cc\" or CXX=\"memlens c++\"; see README, Access profiling)",
        ));
    }
    let page_faults = a.sources.contains(&Backend::PageFaults);
    let mut s = (s.note(how_sampled(a, page_faults)))
        .figure(Figure::Scatter)
        .figure(Figure::AccessFlame);
    match a.accuracy {
        Some(acc) => {
            s = s.note(format!(
                "sampling accuracy {:.3}% (NMO's accuracy: samples x period against {} counted accesses)",
                acc * 100.0,
                a.counted
            ))
        }
        None if a.counted > 0 => {
            s = s.note(format!(
                "sampling accuracy n/a: no sample of the {} counted accesses (one per {}: a lower --period samples a short run)",
                a.counted, a.period
            ))
        }
        None => {}
    }
    if !a.levels.is_empty() {
        s = s.table(levels(a));
    }
    Some(s.table(objects(a, page_faults)).table(regions(a)))
}

fn how_sampled(a: &AccessReport, page_faults: bool) -> String {
    let period = if a.period > 0 {
        a.period.to_string()
    } else {
        "? (not in the recording)".to_string()
    };
    if a.sources.contains(&Backend::Instrumented) {
        let sorts = match a.sort_calls {
            0 => "qsort's element moves".to_string(),
            n => format!(
                "the element moves of its {n} qsort calls on {} of arrays",
                human_bytes(a.sort_bytes as f64)
            ),
        };
        format!(
            "{} samples, 1 per {period} accesses of a class; {} read and {} written exactly by the instrumented code (its loads and stores as compiled, and the bytes the C library's memcpy, strlen, strcmp and the like it calls touch; not register spills, calls and returns, nor code built without memlens: {sorts}, other libraries)",
            a.samples,
            human_bytes(a.bytes_read as f64),
            human_bytes(a.bytes_written as f64)
        )
    } else if page_faults {
        format!(
            "{} samples of the kernel's page-fault event, 1 per {period} {}",
            a.samples,
            analysis::period_unit(&a.sources)
        )
    } else {
        format!(
            "{} hardware samples ({}), 1 per {period} sampled events; levels and latencies as the hardware reported them",
            a.samples,
            Backend::list(&a.sources)
        )
    }
}

fn levels(a: &AccessReport) -> Table {
    let mut t = Table::new(vec![
        Column::text("level"),
        Column::measure("samples", Unit::Count),
        Column::measure("share", Unit::Percent),
        Column::measure("loads", Unit::Count),
        Column::measure("stores", Unit::Count),
        Column::number("mean latency"),
    ])
    .titled("Memory levels")
    .note("measured by the hardware");
    for l in &a.levels {
        let share = 100.0 * l.samples as f64 / a.samples.max(1) as f64;
        t.push(Row::from(vec![
            l.level.clone().into(),
            Cell::count(l.samples),
            Cell::measured(format!("{share:.1}%"), share),
            Cell::count(l.loads),
            Cell::count(l.stores),
            or_dash(l.mean_latency, |c| format!("{c:.1} cycles")).into(),
        ]));
    }
    t
}

fn objects(a: &AccessReport, page_faults: bool) -> Table {
    let (title, column) = if page_faults {
        ("Top objects by estimated page faults", "est. faults")
    } else {
        ("Top objects by estimated accesses", "est. accesses")
    };
    let share = |n: u64, of: u64| {
        if page_faults {
            "-".to_string().into() // a fault is neither a load nor a store
        } else {
            let share = 100.0 * n as f64 / of.max(1) as f64;
            Cell::measured(format!("{share:.0}%"), share)
        }
    };
    let sized = memlens_analysis::samples_are_sized(&a.sources);
    let bytes = |b: f64, error: Option<f64>| {
        if sized {
            let text = match error {
                Some(e) if e > 0.0 => format!("~{} ±{:.0}%", human_bytes(b), (100.0 * e).ceil()),
                _ => format!("~{}", human_bytes(b)),
            };
            Cell::measured(text, b)
        } else {
            "-".to_string().into()
        }
    };
    let mut t = Table::new(vec![
        Column::measure(column, Unit::Count),
        Column::measure("loads", Unit::Percent),
        Column::measure("stores", Unit::Percent),
        Column::measure("est. read", Unit::Bytes),
        Column::measure("est. written", Unit::Bytes),
        Column::text("object / hottest lines").at_most(80),
    ])
    .titled(title)
    .note(how_estimated(a));
    for o in &a.objects {
        let mut row = Row::from(vec![
            Cell::measured(format!("~{:.0}", o.est_accesses), o.est_accesses),
            share(o.load_samples, o.samples),
            share(o.store_samples, o.samples),
            bytes(o.est_bytes_read, o.read_error),
            bytes(o.est_bytes_written, o.written_error),
            o.name.clone().into(),
        ]);
        // The calling contexts where samples carry them, else the lines.
        if o.contexts.is_empty() {
            for l in o.lines.iter().take(3) {
                row = row.detail(format!(
                    "{} at {}",
                    counted(l.samples, "sample"),
                    l.location
                ));
            }
        }
        for c in o.contexts.iter().take(3) {
            row = row.detail(format!(
                "{} ({:.0}%) at {}",
                counted(c.samples, "sample"),
                100.0 * c.share,
                context_path(&c.frames)
            ));
        }
        t.push(row);
    }
    if a.unattributed > 0 {
        let what: Vec<String> = (a.unattributed_memory.iter())
            .map(|m| format!("{} in {}", m.samples, m.what))
            .collect();
        t = t.footer(format!(
            "({} hit no recorded object: {})",
            counted(a.unattributed, "sample"),
            what.join("; ")
        ));
    }
    t
}

/// What the object table's figures are made of.
fn how_estimated(a: &AccessReport) -> String {
    let mut how = "samples x period, ±: 95% bound from the samples of that kind".to_string();
    if a.bulk_samples > 0 {
        how += &format!(
            "; {} samples of memcpy, memmove and memset bytes as 8-byte accesses",
            a.bulk_samples
        );
    }
    if a.atomic_samples > 0 {
        how += &format!(
            "; {} samples of atomic read-modify-writes, each a load and a store",
            a.atomic_samples
        );
    }
    how
}

fn regions(a: &AccessReport) -> Table {
    let mut t = Table::new(vec![
        Column::text("region").at_most(40),
        Column::measure("runs", Unit::Count),
        Column::measure("time", Unit::Seconds),
        Column::measure("read", Unit::Bytes),
        Column::measure("written", Unit::Bytes),
        Column::measure("read bw", Unit::BytesPerSecond),
        Column::measure("write bw", Unit::BytesPerSecond),
        Column::text("objects touched (samples)").at_most(100),
    ])
    .titled("Regions")
    .note(if a.bytes_counted {
        "bytes exact; bandwidth = bytes / time in region".to_string()
    } else {
        format!(
            "bytes not measured: {} samples count no bytes (a `memlens cc` build counts them exactly)",
            Backend::list(&a.sources)
        )
    })
    .or_else(super::regions::NO_REGIONS);
    let measured = |shown: Cell| {
        if a.bytes_counted {
            shown
        } else {
            "not measured".to_string().into()
        }
    };
    for r in &a.regions {
        let objects: Vec<String> = r
            .objects
            .iter()
            .take(3)
            .map(|(n, k)| format!("{n} ({k})"))
            .collect();
        let team = r.team_bytes > 0;
        let name = if team {
            format!("{} +team", r.name)
        } else {
            r.name.clone()
        };
        let mut row = Row::from(vec![
            name.into(),
            Cell::count(r.instances),
            Cell::seconds(r.total_ns),
            measured(Cell::bytes(r.bytes_read as f64)),
            measured(Cell::bytes(r.bytes_written as f64)),
            measured(Cell::measured(rate(r.read_bandwidth), r.read_bandwidth)),
            measured(Cell::measured(rate(r.write_bandwidth), r.write_bandwidth)),
            objects.join(", ").into(),
        ]);
        if let Some(line) = cost_and_plain_timing(r) {
            row = row.detail(line);
        }
        let derived = derived_figures(r);
        if !derived.is_empty() {
            row = row.detail(format!(
                "from {} samples alone{}: {}",
                r.derived.load_samples + r.derived.store_samples,
                if team { " of the marking thread" } else { "" },
                derived.join(", ")
            ));
        }
        t.push(row);
    }
    if a.regions.iter().any(|r| r.team_bytes > 0) {
        t = t.footer("(+team: the bytes include those of the OpenMP teams the marking thread forked inside, exact; the objects touched and the figures from samples are the marking thread's own)");
    }
    if let Some(run) = &a.plain_run {
        let mut line = if let [one] = &run.profiles[..] {
            format!("(without memlens: this run's exact bytes over the region's time in {one}, a run of the uninstrumented build")
        } else {
            format!(
                "(without memlens: this run's exact bytes over the region's median time in {} runs of the uninstrumented build: {}",
                run.profiles.len(),
                run.profiles.join(", ")
            )
        };
        if !run.unmatched.is_empty() {
            line += &format!("; not timed there: {}", run.unmatched.join(", "));
        }
        t = t.footer(line + ")");
    }
    t
}

/// What memlens' sampling cost the region (measured) and the region in the
/// run of the uninstrumented build (`--timed-by`), if either is known.
fn cost_and_plain_timing(r: &RegionAccess) -> Option<String> {
    let cost = (r.slow_path_ns)
        .filter(|&ns| ns > 0)
        .map(|ns| format!("{} of it in memlens' sampling code (measured)", seconds(ns)));
    let plain = r.plain.as_ref().map(|t| {
        format!(
            "without memlens (the plain build): {}, read {}, write {}",
            seconds(t.total_ns),
            rate(t.read_bandwidth),
            rate(t.write_bandwidth)
        )
    });
    match (cost, plain) {
        (Some(c), Some(p)) => Some(format!("{c}; {p}")),
        (c, p) => c.or(p),
    }
}

/// A region's figures derived from its samples, each with the exact one and
/// the estimate's error where the exact one exists.
fn derived_figures(r: &RegionAccess) -> Vec<String> {
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
    // A team's bytes are not in the marking thread's samples: no comparison.
    let comparable = r.team_bytes == 0;
    let exact_rate = |bytes: u64, bw: f64| (bytes > 0 && comparable).then_some(bw);
    let mut out = Vec::new();
    if let Some(ns) = d.derived_latency_ns {
        out.push(format!(
            "{} per load",
            versus(
                ns,
                r.exact_ns_per_load.filter(|_| comparable),
                &|v| format!("{v:.2} ns")
            )
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

#[cfg(test)]
mod tests {
    use super::super::fixture::*;

    #[test]
    fn a_regions_exact_bytes_give_its_bandwidth() {
        // 2 MB read and 1 MB written in 20 ms: 100 and 50 MB/s.
        let s = section(&with_timeline_and_region(), "access");
        let row = rows(&s)
            .into_iter()
            .find(|r| r[0] == "solve")
            .expect("the region's row");
        assert_eq!(
            row[..7],
            [
                "solve",
                "1",
                "0.020 s",
                "1.9 MiB",
                "976.6 KiB",
                "95.4 MiB/s",
                "47.7 MiB/s"
            ]
        );
    }
}
