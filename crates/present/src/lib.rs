//! Presentation: the report (text, HTML, JSON, CSV), diffs, flame graphs and
//! plots, and how every figure is written (`format`).

mod calibration;
mod csv;
mod diff;
mod export;
mod firefox;
mod flame;
mod format;
mod live;
mod plot;
mod pprof;
mod report;
mod stacks;

pub use calibration::render_calibration;
pub use csv::{report_csv, CSV_TABLES};
pub use diff::{diff, render_diff, Diff, DIFF_ROWS};
pub use export::{collapsed, speedscope};
pub use firefox::{firefox, FirefoxCounts};
pub use flame::{plot_flame, Flame};
pub use format::{human_bytes, object_peak, seconds};
pub use live::render_live;
pub use memlens_profile::{printable, printable_document};
pub use plot::{
    plot_bandwidth, plot_calibration, plot_capacity, plot_counters, plot_fold, plot_rank_band,
    plot_rank_map, plot_scatter, Image, PlotData, PlotError, RankMeasure,
};
pub use pprof::pprof;
pub use report::{
    build_report, job_value, rank_page, render_html, render_job_html, render_job_text, render_json,
    render_key_values, render_text, report_schema, report_value, JobReport, Report, ReportOptions,
    SourceText, REPORT_SCHEMA_VERSION,
};
pub use stacks::{Measure, Stacks};
