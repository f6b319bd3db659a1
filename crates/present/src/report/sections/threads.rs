//! Each thread's lifetime, exact counts and samples.

use crate::report::model::{Cell, Column, Row, Section, Table, Unit};
use crate::report::Report;

pub fn section(r: &Report) -> Option<Section> {
    // One thread says nothing a process line does not.
    if r.threads.len() < 2 {
        return None;
    }
    let mut t = Table::new(vec![
        Column::number("pid"),
        Column::number("tid"),
        Column::measure("start", Unit::Seconds),
        Column::measure("end", Unit::Seconds),
        Column::measure("loads", Unit::Count),
        Column::measure("stores", Unit::Count),
        Column::measure("read", Unit::Bytes),
        Column::measure("written", Unit::Bytes),
        Column::measure("allocs", Unit::Count),
        Column::measure("allocated", Unit::Bytes),
        Column::measure("samples", Unit::Count),
    ]);
    let bytes = |v: u64| Cell::bytes(v as f64);
    let number = |v: u64| Cell::estimate(v as f64);
    for th in &r.threads {
        let r = &th.row;
        let mut row = Row::from(vec![
            r.pid.to_string().into(),
            r.tid.to_string().into(),
            Cell::or_dash(r.start_ns, Cell::seconds),
            Cell::or_dash(r.end_ns, Cell::seconds),
            Cell::or_dash(r.loads, number),
            Cell::or_dash(r.stores, number),
            Cell::or_dash(r.bytes_read, bytes),
            Cell::or_dash(r.bytes_written, bytes),
            Cell::or_dash(r.allocs, Cell::count),
            Cell::or_dash(r.alloc_bytes, bytes),
            Cell::count(th.samples),
        ]);
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
