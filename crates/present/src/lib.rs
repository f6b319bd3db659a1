//! Presentation: the capacity report as text or JSON, and plots.

mod calibration;
mod csv;
mod diff;
mod flame;
mod html;
mod plot;
mod report;

pub use calibration::render_calibration;
pub use csv::{report_csv, CSV_TABLES};
pub use diff::{diff, render_diff, Diff};
pub use flame::{plot_flame, Flame};
pub use html::render_html;

pub use memlens_profile::human_bytes;
pub use plot::{
    bandwidth_series, plot_bandwidth, plot_calibration, plot_capacity, plot_counters, plot_fold,
    plot_scatter, Image, PlotError,
};
pub use report::{build_report, render_text, Report, ReportOptions};

/// Nanoseconds as seconds with millisecond precision.
pub fn seconds(ns: u64) -> String {
    format!("{:.3} s", ns as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    #[test]
    fn human_bytes_picks_units() {
        assert_eq!(super::human_bytes(512.0), "512 B");
        assert_eq!(super::human_bytes(1536.0), "1.5 KiB");
        assert_eq!(
            super::human_bytes(3.0 * 1024.0 * 1024.0 * 1024.0),
            "3.0 GiB"
        );
    }
}
