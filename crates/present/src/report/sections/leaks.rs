//! Heap still live when each process ended, and the sites that left it.

use crate::format::human_bytes;
use crate::report::model::Section;
use crate::report::Report;

pub fn section(r: &Report) -> Option<Section> {
    let mut s = Section::new("leaks", "Leaks at exit");
    for l in &r.leaks.heap_live_at_exit {
        s = s.note(format!(
            "pid {}: {} of heap still live (exact)",
            l.pid,
            human_bytes(l.bytes as f64)
        ));
    }
    let table = super::objects::table(&r.leaks.sites, |o| o.leaked_bytes, "leaked")
        .or_else("no recorded block was left unfreed");
    Some(s.table(table))
}
