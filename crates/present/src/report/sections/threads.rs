//! Each thread's lifetime, exact counts and samples.

use crate::format::{count, human_bytes, or_dash, seconds};
use crate::report::model::{Column, Row, Section, Table};
use crate::report::Report;

pub fn section(r: &Report) -> Option<Section> {
    // One thread says nothing a process line does not.
    if r.threads.len() < 2 {
        return None;
    }
    let mut t = Table::new(
        [
            "pid",
            "tid",
            "start",
            "end",
            "loads",
            "stores",
            "read",
            "written",
            "allocs",
            "allocated",
            "samples",
        ]
        .into_iter()
        .map(Column::number)
        .collect(),
    );
    let bytes = |v: u64| human_bytes(v as f64);
    for th in &r.threads {
        let r = &th.row;
        let mut row: Row = vec![
            r.pid.to_string(),
            r.tid.to_string(),
            or_dash(r.start_ns, seconds),
            or_dash(r.end_ns, seconds),
            or_dash(r.loads, |v| count(v as f64)),
            or_dash(r.stores, |v| count(v as f64)),
            or_dash(r.bytes_read, bytes),
            or_dash(r.bytes_written, bytes),
            or_dash(r.allocs, |v| v.to_string()),
            or_dash(r.alloc_bytes, bytes),
            th.samples.to_string(),
        ]
        .into();
        if !r.final_counts && r.start_ns.is_some() {
            row = row.detail("running at exit: counts as last published");
        }
        t.push(row);
    }
    Some(
        Section::new("threads", "Threads")
            .note("exact counts of each thread; `memlens report --thread TID` shows one")
            .table(t),
    )
}

#[cfg(test)]
mod tests {
    use super::super::fixture::*;

    #[test]
    fn each_thread_has_its_exact_counts_and_its_samples() {
        let s = section(&shared_line(), "threads");
        assert_eq!(
            rows(&s),
            [
                ["1", "1", "-", "-", "-", "2000", "-", "-", "-", "-", "20"],
                ["1", "2", "-", "-", "-", "2000", "-", "-", "-", "-", "20"],
            ]
        );
    }
}
