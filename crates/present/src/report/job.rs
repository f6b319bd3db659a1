//! `memlens report JOB`: the report of an MPI job, its ranks read one at a
//! time and shown across ranks (`memlens_analysis::job_view`): per object,
//! region and counter the sum, least, mean and most over the ranks, the
//! imbalance (most / mean) and the rank with the most; each rank's own value
//! with `--per-rank`; one rank's whole report with `--rank N`.

use super::model::{Cell, Column, Figure, Row, Section, Table, Unit};
use super::sections::losses_section;
use crate::format::{counter_value, human_bytes, seconds};
use memlens_analysis::{JobView, RankId, Spread};
use memlens_profile::Losses;
use serde::Serialize;

#[derive(Serialize, schemars::JsonSchema)]
pub struct JobReport {
    pub memlens_version: String,
    pub profile: String,
    pub command: Vec<String>,
    pub backend: Vec<String>,
    pub job: JobView,
    /// Every rank's losses, summed.
    pub losses: Losses,
}

/// The sections of a job's report, in the order every output shows them.
pub fn job_sections(j: &JobReport) -> Vec<Section> {
    let v = &j.job;
    let mut out = vec![run(j), capacity(v), objects(v), regions(v)];
    out.extend(counters(v));
    out.extend(losses_section(&j.losses));
    out
}

fn run(j: &JobReport) -> Section {
    let v = &j.job;
    let rows = [
        ("command".to_string(), j.command.join(" ")),
        (
            "ranks".into(),
            format!(
                "{} on {} host{} ({})",
                v.ranks.len(),
                v.hosts.len(),
                if v.hosts.len() == 1 { "" } else { "s" },
                v.hosts.join(", ")
            ),
        ),
        ("time base".into(), v.time_base.clone()),
        ("backend".into(), j.backend.join(" + ")),
    ];
    Section::new("run", "Job").table(Table::key_value(rows))
}

/// A spread's cells: sum, least, mean, most as `show` gives them (with
/// their numbers where the table's rows share a unit), imbalance, and the
/// rank with the most.
fn cells(s: &Spread, show: &dyn Fn(f64) -> Cell) -> Vec<Cell> {
    vec![
        show(s.sum),
        show(s.min),
        show(s.mean),
        show(s.max),
        Cell::measured(format!("{:.2}", s.imbalance), s.imbalance),
        Cell::from(s.max_rank.to_string()),
    ]
}

/// The columns of a table of spreads; `unit` that of its figures when every
/// row has the same (a table of counters mixes them).
fn spread_columns(first: &str, unit: Option<Unit>) -> Vec<Column> {
    let figure = |name: &str| match unit {
        Some(unit) => Column::measure(name, unit),
        None => Column::number(name),
    };
    vec![
        Column::text(first).at_most(48),
        figure("sum"),
        figure("least"),
        figure("mean"),
        figure("most"),
        Column::measure("most/mean", Unit::Ratio),
        Column::number(MOST_AT_RANK),
    ]
}

/// The column the HTML page links to each rank's own page.
pub const MOST_AT_RANK: &str = "most at rank";

/// A rank's own page in the folder beside a job's page.
pub fn rank_page(rank: u32) -> String {
    format!("rank-{rank}.html")
}

/// A row of a spread, with each rank's value under it when kept.
fn spread_row(name: String, s: &Spread, ranks: &[RankId], show: &dyn Fn(f64) -> Cell) -> Row {
    let mut row = Row::from(vec![Cell::from(name)]);
    for cell in cells(s, show) {
        row.push(cell);
    }
    if !s.per_rank.is_empty() {
        // Ranks of several hosts are named with their host.
        let hosts = ranks.iter().any(|r| r.host != ranks[0].host);
        let each: Vec<String> = (ranks.iter().zip(&s.per_rank))
            .map(|(r, v)| match hosts {
                true => format!("{}@{}: {}", r.rank, r.host, show(*v).text),
                false => format!("{}: {}", r.rank, show(*v).text),
            })
            .collect();
        // A line of a handful of ranks each: 1000 ranks stay readable.
        for chunk in each.chunks(8) {
            row = row.detail(format!("ranks {}", chunk.join(", ")));
        }
    }
    row
}

fn capacity(v: &JobView) -> Section {
    let bytes = |b: f64| Cell::from(human_bytes(b));
    let mut t = Table::new(spread_columns("measure", None));
    t.push(spread_row(
        "run time".into(),
        &v.duration_ns,
        &v.ranks,
        &|ns| seconds(ns as u64).into(),
    ));
    t.push(spread_row(
        "peak resident set".into(),
        &v.peak_rss,
        &v.ranks,
        &bytes,
    ));
    if let Some(h) = &v.heap_peak {
        t.push(spread_row("peak live heap".into(), h, &v.ranks, &bytes));
    }
    Section::new("ranks", "Across ranks")
        .note(format!(
            "each figure over the {} ranks: sum, least, mean and most of one rank, most/mean (1.00: balanced; the number of ranks: one rank has it all) and the rank with the most; every rank's own with --per-rank, one rank's report with --rank N",
            v.ranks.len()
        ))
        .table(t)
        .figure(Figure::RankBand)
        .figure(Figure::RankMap)
}

fn objects(v: &JobView) -> Section {
    let mut columns = spread_columns("object", Some(Unit::Bytes));
    columns.insert(1, Column::text("kind"));
    columns.push(Column::measure("ranks", Unit::Count));
    let mut t = Table::new(columns)
        .titled("objects by peak bytes summed over the ranks")
        .note("a rank without the object counts 0; ~ marks sampled and scaled figures (blocks under --min-size)")
        .or_else("no data objects recorded");
    for o in &v.objects {
        let est = if o.sampled { "~" } else { "" };
        let show = |b: f64| Cell::measured(format!("{est}{}", human_bytes(b)), b);
        let mut row = spread_row(o.name.clone(), &o.peak_bytes, &v.ranks, &show);
        // Its most/mean is an estimate too.
        row.cells[5].insert_str(0, est);
        row.insert(1, o.kind.name().to_string());
        row.push(Cell::count(o.peak_bytes.ranks as u64));
        t.push(row);
    }
    Section::new("rank-objects", "Objects across ranks").table(t)
}

fn regions(v: &JobView) -> Section {
    let mut columns = spread_columns("region", Some(Unit::Seconds));
    columns.push(Column::measure("waiting", Unit::Seconds));
    columns.push(Column::measure("bytes (sum)", Unit::Bytes));
    let mut t = Table::new(columns)
        .titled("time in each region")
        .note("waiting: every rank's wait for the slowest, summed, if the ranks meet after the region; bytes exact (instrumented builds)")
        .or_else(super::sections::NO_REGIONS);
    for r in &v.regions {
        let mut row = spread_row(r.name.clone(), &r.time_ns, &v.ranks, &|ns| {
            Cell::seconds(ns as u64)
        });
        row.push(Cell::seconds(r.wait_ns as u64));
        row.push(Cell::or_dash(r.bytes.as_ref(), |b| Cell::bytes(b.sum)));
        t.push(row);
    }
    Section::new("rank-regions", "Regions across ranks").table(t)
}

fn counters(v: &JobView) -> Option<Section> {
    if v.counters.is_empty() {
        return None;
    }
    let mut t = Table::new(spread_columns("counter", None));
    for c in &v.counters {
        let name = format!("{} [{}]", c.name, c.unit);
        t.push(spread_row(name, &c.total, &v.ranks, &|x| {
            counter_value(x, &c.unit).into()
        }));
    }
    Some(Section::new("rank-counters", "Counters across ranks").table(t))
}
