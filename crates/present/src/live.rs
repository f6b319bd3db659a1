//! `memlens record --live`: the lines of the status block the collector
//! redraws while the program runs. Fixed widths, not the report's fitted
//! tables: a block redrawn every interval must not shift its columns each
//! time a figure gains a digit.

use crate::format::{human_bytes, rate};
use memlens_profile::LiveView;

/// The status line (time, resident set, live heap, exact bandwidth, processes),
/// then the sites holding the most live memory.
pub fn render_live(view: &LiveView) -> Vec<String> {
    let mut line = format!(
        "memlens: {:7.1} s  resident {:>10}  heap {:>10}",
        view.elapsed_ns as f64 / 1e9,
        human_bytes(view.resident_bytes as f64),
        human_bytes(view.heap_bytes as f64),
    );
    if let Some((read, written)) = view.bandwidth {
        line += &format!(
            "  read {:>11}  written {:>11} (exact)",
            rate(read),
            rate(written)
        );
    }
    let n = view.processes;
    line += &format!("  {n} process{}", if n == 1 { "" } else { "es" });
    let mut lines = vec![line];
    if !view.sites.is_empty() {
        let how = if view.sites.iter().any(|s| s.estimated) {
            "~: byte-sampled allocations scaled by 1/p"
        } else {
            "exact sizes"
        };
        lines.push(format!("  live memory by allocation site ({how}):"));
    }
    for site in &view.sites {
        let approx = if site.estimated { "~" } else { " " };
        lines.push(format!(
            "  {approx}{:>10} {approx}{:>8.0} {:<5} {}",
            human_bytes(site.bytes),
            site.blocks,
            site.kind,
            memlens_profile::printable(&site.label)
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::render_live;
    use memlens_profile::{LiveSite, LiveView};

    #[test]
    fn a_view_is_a_status_line_and_its_sites() {
        let view = LiveView {
            elapsed_ns: 1_500_000_000,
            resident_bytes: 3 << 20,
            heap_bytes: 1 << 20,
            bandwidth: Some((2.0 * (1 << 30) as f64, 0.0)),
            processes: 1,
            sites: vec![LiveSite {
                kind: "heap",
                label: "main (a.c:3)".into(),
                bytes: 1048576.0,
                blocks: 2.0,
                estimated: true,
            }],
        };
        assert_eq!(
            render_live(&view),
            [
                "memlens:     1.5 s  resident    3.0 MiB  heap    1.0 MiB  read   2.0 GiB/s  written       0 B/s (exact)  1 process",
                "  live memory by allocation site (~: byte-sampled allocations scaled by 1/p):",
                "  ~   1.0 MiB ~       2 heap  main (a.c:3)",
            ]
        );
        let quiet = LiveView {
            processes: 2,
            ..LiveView::default()
        };
        assert_eq!(
            render_live(&quiet),
            ["memlens:     0.0 s  resident        0 B  heap        0 B  2 processes"]
        );
    }
}
