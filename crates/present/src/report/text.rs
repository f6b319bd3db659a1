//! The report as text for a terminal: a section title in capitals, its notes,
//! and its tables with columns fitted to their content. Every string is
//! written through [`printable`]: names from the program cannot drive the
//! terminal.

use super::model::{Align, Section, Table};
use super::sections::sections;
use super::Report;
use crate::format::shorten;
use memlens_profile::printable;
use std::fmt::Write;

pub fn render_text(r: &Report) -> String {
    page(&r.profile, &sections(r))
}

/// The text of a report's sections, under a line naming its profile.
pub(super) fn page(profile: &str, sections: &[Section]) -> String {
    let mut out = format!("memlens report: {}\n", printable(profile));
    out += &sections_text(sections);
    out
}

/// Sections as text, each under its title.
pub(crate) fn sections_text(sections: &[Section]) -> String {
    let mut out = String::new();
    for s in sections {
        section(&mut out, s);
    }
    out
}

/// Lines of a name and a value, names aligned, as a section's key/value
/// table prints them (`memlens record`'s summary).
pub fn render_key_values(rows: Vec<(String, String)>) -> String {
    let mut out = String::new();
    table(&mut out, &Table::key_value(rows));
    out
}

fn section(out: &mut String, s: &Section) {
    let _ = writeln!(out, "\n{}", printable(&s.title.to_uppercase()));
    for note in &s.notes {
        let _ = writeln!(out, "  {}", printable(note));
    }
    for t in &s.tables {
        table(out, t);
    }
}

/// The most characters a cell shows (the rest cut with `…`): a command line
/// of 10^5 arguments or a name of any length stays one readable cell.
const MAX_CELL: usize = 512;

fn table(out: &mut String, t: &Table) {
    if let Some(title) = &t.title {
        let note = t.note.as_ref().map_or(String::new(), |n| format!(" ({n})"));
        let _ = writeln!(
            out,
            "\n  {}",
            printable(&format!("{}{note}", title.to_uppercase()))
        );
    }
    match (t.rows.is_empty(), &t.empty) {
        (true, Some(empty)) => {
            let _ = writeln!(out, "  {}", printable(empty));
        }
        _ => rows(out, t),
    }
    for footer in &t.footers {
        let _ = writeln!(out, "  {}", printable(footer));
    }
}

/// A table's header, rows and their detail lines, in aligned columns.
fn rows(out: &mut String, t: &Table) {
    let cells: Vec<Vec<String>> = t
        .rows
        .iter()
        .map(|row| {
            row.cells
                .iter()
                .zip(&t.columns)
                .map(|(cell, c)| {
                    shorten(
                        &printable(cell),
                        c.max_width.unwrap_or(MAX_CELL).min(MAX_CELL),
                    )
                })
                .collect()
        })
        .collect();
    let width = |i: usize| {
        let header = if t.header {
            t.columns[i].name.chars().count()
        } else {
            0
        };
        cells
            .iter()
            .map(|row| row[i].chars().count())
            .max()
            .unwrap_or(0)
            .max(header)
    };
    let widths: Vec<usize> = (0..t.columns.len()).map(width).collect();
    let line = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
        let mut text = String::from(" ");
        for ((cell, c), &w) in cells.zip(&t.columns).zip(&widths) {
            // Padded by hand: a width in a format string panics past 65535.
            let pad = " ".repeat(w.saturating_sub(cell.chars().count()));
            let _ = match c.align {
                Align::Left => write!(text, " {cell}{pad}"),
                Align::Right => write!(text, " {pad}{cell}"),
            };
            text.push(' ');
        }
        let _ = writeln!(out, "{}", text.trim_end());
    };
    if t.header {
        // The column names are memlens' own.
        line(out, &mut t.columns.iter().map(|c| c.name.as_str()));
    }
    // A row's details go under its first label, indented: under the object
    // of a row of figures, under the name of a row that starts with one.
    let label = t
        .details_under
        .or_else(|| t.columns.iter().position(|c| c.align == Align::Left));
    let indent = match label {
        Some(i) if i > 0 => 4 + widths[..i].iter().map(|w| w + 2).sum::<usize>(),
        _ => 6,
    };
    for (row, cells) in t.rows.iter().zip(&cells) {
        line(out, &mut cells.iter().map(String::as_str));
        for detail in &row.details {
            let _ = writeln!(out, "{}{}", " ".repeat(indent), printable(detail));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::table;
    use crate::report::model::{Column, Table};

    #[test]
    fn columns_fit_their_content_and_cuts_are_marked() {
        let mut t = Table::new(vec![
            Column::number("bytes"),
            Column::text("object").at_most(12),
        ])
        .titled("Objects")
        .note("exact");
        t.push(vec![
            "1.0 MiB".to_string(),
            "main (stream.c:35)".to_string(),
        ]);
        t.push(
            crate::report::model::Row::from(vec!["12 B".to_string(), "x".to_string()])
                .detail("at main (stream.c:48)"),
        );
        let mut out = String::new();
        table(&mut out, &t);
        assert_eq!(
            out,
            "\n  OBJECTS (exact)\n    bytes  object\n  1.0 MiB  main (…c:35)\n     12 B  x\n             at main (stream.c:48)\n"
        );
    }

    #[test]
    fn an_empty_table_says_so_or_nothing() {
        let mut out = String::new();
        table(
            &mut out,
            &Table::new(vec![Column::text("region")]).or_else("none"),
        );
        assert_eq!(out, "  none\n");
        let s = crate::report::model::Section::new("regions", "Regions")
            .table(Table::new(vec![Column::text("region")]));
        assert!(
            s.tables.is_empty(),
            "a table with nothing to say is left out"
        );
    }
}
