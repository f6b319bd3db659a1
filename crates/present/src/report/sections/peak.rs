//! The highest resident set and live heap, with the capacity and bandwidth
//! plots in the HTML page.

use crate::format::{human_bytes, seconds};
use crate::report::model::{Figure, Section, Table};
use crate::report::{Report, IMPORT_HAS_NO_CAPACITY};

pub fn section(r: &Report) -> Option<Section> {
    if !r.summary.capacity_recorded() {
        return Some(Section::new("peak", "Peak").note(IMPORT_HAS_NO_CAPACITY));
    }
    let pk = &r.peak;
    let heap = if pk.heap_exact {
        format!(
            "{} requested ({} usable) live at {} (pid {}); exact: every block replayed",
            human_bytes(pk.heap_bytes as f64),
            human_bytes(pk.heap_usable_bytes.unwrap_or(0) as f64),
            seconds(pk.heap_time_ns),
            pk.heap_pid
        )
    } else if pk.heap_measured && pk.heap_bound_bytes == 0 {
        format!(
            "0 B: no heap block was live at any tick, nor allocated between two (usable bytes, read every {} ms)",
            r.summary.settings.interval_ms
        )
    } else if pk.heap_measured {
        let between = if pk.heap_bound_bytes > pk.heap_bytes {
            format!(
                "between ticks it can have been up to {} higher (record with --sample-rate 1 for the exact peak)",
                human_bytes((pk.heap_bound_bytes - pk.heap_bytes) as f64)
            )
        } else {
            "no allocation between ticks can have raised it".to_string()
        };
        format!(
            "{} live at {} (pid {}), the most read at a tick (usable bytes, every {} ms); {between}",
            human_bytes(pk.heap_bytes as f64),
            seconds(pk.heap_time_ns),
            pk.heap_pid,
            r.summary.settings.interval_ms,
        )
    } else if r.summary.processes.iter().any(|p| p.attached) {
        "not measured: memlens attached to a running process (it hooks the allocator only in programs it starts)".into()
    } else {
        "not measured: memlens' runtime ran in no process (static or setuid programs)".into()
    };
    let heap = if pk.heap_before_start > 0 && !pk.heap_exact {
        format!(
            "{heap}; counts {} held before memlens' runtime started (glibc's count)",
            human_bytes(pk.heap_before_start as f64)
        )
    } else {
        heap
    };
    let table = Table::key_value([
        (
            "resident".into(),
            format!(
                "{} at {} (pid {}); all processes together {}",
                human_bytes(pk.rss_bytes as f64),
                seconds(pk.rss_time_ns),
                pk.rss_pid,
                human_bytes(pk.total_rss_bytes as f64)
            ),
        ),
        ("heap".into(), heap),
    ]);
    Some(
        Section::new("peak", "Peak")
            .table(table)
            .figure(Figure::Capacity)
            .figure(Figure::Bandwidth),
    )
}

#[cfg(test)]
mod tests {
    use super::super::fixture::*;

    #[test]
    fn the_peaks_are_the_largest_readings_with_their_times() {
        let s = section(&with_timeline_and_region(), "peak");
        let rows = rows(&s);
        assert_eq!(
            rows[0],
            [
                "resident",
                "12.0 MiB at 0.060 s (pid 1); all processes together 12.0 MiB"
            ]
        );
        assert_eq!(rows[1][0], "heap");
        assert!(
            rows[1][1].starts_with("68.0 KiB live at 0.010 s (pid 1)"),
            "{}",
            rows[1][1]
        );
    }
}
