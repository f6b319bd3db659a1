//! The most sampled source lines: samples, loads and stores, the bytes they
//! stand for, where the loads were served, and the objects they touched.
//! The HTML page draws every sampled line beside the file's text under it.

use crate::format::{counted, human_bytes};
use crate::report::model::{Cell, Column, Row, Section, Table, Unit};
use crate::report::Report;
use memlens_analysis::{code_label, LineFigures, SourceLines};

pub fn section(r: &Report) -> Option<Section> {
    let s = &r.source;
    if s.lines.is_empty() && s.without_line.is_empty() {
        return None;
    }
    let mut section = Section::new("source", "Source lines").note(format!(
        "sampled: 1 sample per {} accesses of a class; est. bytes = sampled bytes x period",
        s.period
    ));
    if !s.levels.is_empty() {
        section = section.note(format!(
            "loads served by: share of the line's load samples per level ({})",
            s.levels.join(", ")
        ));
    }
    Some(section.table(lines_table(s)))
}

fn lines_table(s: &SourceLines) -> Table {
    let sized = s.samples_are_sized;
    let mut columns = vec![
        Column::measure("samples", Unit::Count),
        Column::measure("loads", Unit::Percent),
        Column::measure("est. read", Unit::Bytes),
        Column::measure("est. written", Unit::Bytes),
    ];
    if !s.levels.is_empty() {
        columns.push(Column::text("loads served by").at_most(40));
    }
    columns.push(Column::text("line / objects touched").at_most(80));
    let mut t = Table::new(columns)
        .titled("Most sampled source lines")
        .or_else("no sample fell in code with line information (debug information: build with -g)");
    for l in &s.lines {
        let bytes = |b: f64| match sized {
            true => Cell::measured(format!("~{}", human_bytes(b)), b),
            false => "-".to_string().into(),
        };
        let loads = match s.samples_are_accesses {
            true => {
                let share = 100.0 * l.load_samples as f64 / l.samples.max(1) as f64;
                Cell::measured(format!("{share:.0}%"), share)
            }
            false => "-".to_string().into(), // a page fault is neither
        };
        let mut row = Row::from(vec![
            Cell::count(l.samples),
            loads,
            bytes(l.est_bytes_read),
            bytes(l.est_bytes_written),
        ]);
        if !s.levels.is_empty() {
            row.push(served_by(l, &s.levels));
        }
        row.push(code_label(&l.function, &l.file, l.line, &l.module));
        for (name, n) in l.objects.iter().take(3) {
            row = row.detail(format!("{} in {name}", counted(*n, "sample")));
        }
        t.push(row);
    }
    if s.lines_left_out > 0 {
        t = t.footer(format!(
            "({} more lines, {})",
            s.lines_left_out,
            counted(s.samples_left_out, "sample")
        ));
    }
    if !s.without_line.is_empty() {
        let modules: Vec<String> = (s.without_line.iter())
            .map(|(m, n)| format!("{n} in {m}"))
            .collect();
        t = t.footer(format!(
            "(samples at code without line information: {})",
            modules.join("; ")
        ));
    }
    t
}

/// "L1 80%, DRAM 20%": the levels that served any of the line's loads.
fn served_by(l: &LineFigures, levels: &[String]) -> String {
    let loads: u64 = l.load_levels.iter().sum();
    let shares: Vec<String> = (levels.iter().zip(&l.load_levels))
        .filter(|(_, &n)| n > 0)
        .map(|(name, &n)| format!("{name} {:.0}%", 100.0 * n as f64 / loads as f64))
        .collect();
    match shares.is_empty() {
        true => "-".to_string(),
        false => shares.join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::{rows, section, shared_line};
    use memlens_profile::CodeLocation;

    #[test]
    fn a_line_lists_its_samples_and_the_object_they_touched() {
        // Forty stores to the 4 KiB block: thread 1's at a line of fill,
        // thread 2's at code without line information.
        let mut p = shared_line();
        for s in &mut p.samples {
            s.pc = if s.tid == 1 { 0x400 } else { 0x500 };
        }
        for (pc, file, line) in [(0x400, "/src/a.c", 5), (0x500, "", 0)] {
            let l = CodeLocation {
                pid: 1,
                pc,
                module: "app".into(),
                function: "fill".into(),
                file: file.into(),
                line,
            };
            p.locations.insert((1, pc), l);
        }
        let s = section(&p, "source");
        assert_eq!(
            rows(&s),
            [["20", "0%", "~0 B", "~15.6 KiB", "fill (a.c:5)"]]
        );
        let t = &s.tables[0];
        assert_eq!(t.rows[0].details, ["20 samples in f (a.c:3)"]);
        assert_eq!(
            t.footers,
            ["(samples at code without line information: 20 in app)"]
        );
    }
}
