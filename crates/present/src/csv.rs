//! `memlens report --format csv --table NAME`: one of the report's tables as
//! CSV. A data table (`objects`, `regions`, ...) has one row per entry with
//! exact numbers: nested fields become dotted columns (`site.file`), lists of
//! numbers one column per index (`percent.0` follows `levels[0]`), lists of
//! records a JSON cell. A section's table as the text and HTML reports draw it
//! (`access/memory-levels`, `peak`) has their columns and cells.

use serde_json::Value;

/// The tables, and where each lies in the JSON report.
pub const CSV_TABLES: [(&str, &str); 16] = [
    ("objects", "/objects_by_peak"),
    ("allocated", "/objects_by_allocated"),
    ("leaks", "/leaks/sites"),
    ("regions", "/regions"),
    ("access-objects", "/access/objects"),
    ("access-regions", "/access/regions"),
    ("source-lines", "/source/lines"),
    ("levels-routine", "/levels/by_routine"),
    ("levels-region", "/levels/by_region"),
    ("latency", "/levels/latency"),
    ("sharing", "/sharing"),
    ("reuse", "/reuse/all/bins"),
    ("reuse-objects", "/reuse/objects"),
    ("reuse-pairs", "/reuse/pairs"),
    ("folding", "/folding/bins"),
    ("threads", "/threads"),
];

/// The table `name` of a report (as JSON) in CSV, header first.
pub fn report_csv(report: &Value, name: &str) -> Result<String, String> {
    let drawn = section_tables(report);
    let pointer = match CSV_TABLES.iter().find(|(n, _)| *n == name) {
        Some((_, pointer)) => *pointer,
        None => {
            let Some((_, table)) = drawn.iter().find(|(n, _)| n == name) else {
                let names: Vec<&str> = (CSV_TABLES.iter().map(|(n, _)| *n))
                    .chain(drawn.iter().map(|(n, _)| n.as_str()))
                    .collect();
                return Err(format!(
                    "no table {name:?}; give one of {}",
                    names.join(", ")
                ));
            };
            return drawn_csv(table);
        }
    };
    let rows: Vec<Vec<(String, String)>> = match report.pointer(pointer) {
        Some(Value::Array(rows)) => rows
            .iter()
            .map(|row| {
                let mut cells = Vec::new();
                flatten("", row, &mut cells);
                cells
            })
            .collect(),
        // A section the profile does not have (no levels): no rows, no header.
        _ => Vec::new(),
    };
    if rows.is_empty() {
        return Ok(String::new());
    }
    let mut header: Vec<String> = Vec::new();
    for row in &rows {
        for (key, _) in row {
            if !header.contains(key) {
                header.push(key.clone());
            }
        }
    }
    // A field null in one row and a record in another: its columns only.
    let nested = |key: &String| {
        let dotted = format!("{key}.");
        header.iter().any(|k| k.starts_with(&dotted))
    };
    let header: Vec<String> = header.iter().filter(|k| !nested(k)).cloned().collect();
    let mut out = csv::Writer::from_writer(Vec::new());
    let io = |e: csv::Error| e.to_string();
    out.write_record(&header).map_err(io)?;
    for row in &rows {
        let record = header.iter().map(|key| {
            row.iter()
                .find(|(k, _)| k == key)
                .map_or("", |(_, v)| v.as_str())
        });
        out.write_record(record).map_err(io)?;
    }
    String::from_utf8(out.into_inner().map_err(|e| e.to_string())?).map_err(|e| e.to_string())
}

/// The sections' tables by name: `section-id/title`, the table's title (else
/// the section's) in lower case with dashes. The slash keeps them apart from
/// the data tables' names.
fn section_tables(report: &Value) -> Vec<(String, &Value)> {
    let mut out = Vec::new();
    for section in report["sections"].as_array().into_iter().flatten() {
        let id = section["id"].as_str().unwrap_or("");
        for table in section["tables"].as_array().into_iter().flatten() {
            let title = (table["title"].as_str())
                .or(section["title"].as_str())
                .unwrap_or("");
            out.push((format!("{id}/{}", slug(title)), table));
        }
    }
    out
}

fn slug(title: &str) -> String {
    title
        .to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

/// A drawn table: its columns and cells as the text report shows them.
fn drawn_csv(table: &Value) -> Result<String, String> {
    let mut out = csv::Writer::from_writer(Vec::new());
    let io = |e: csv::Error| e.to_string();
    let header = (table["columns"].as_array().into_iter().flatten())
        .map(|c| c["name"].as_str().unwrap_or(""));
    out.write_record(header).map_err(io)?;
    for row in table["rows"].as_array().into_iter().flatten() {
        let cells =
            (row["cells"].as_array().into_iter().flatten()).map(|c| c.as_str().unwrap_or(""));
        out.write_record(cells).map_err(io)?;
    }
    String::from_utf8(out.into_inner().map_err(|e| e.to_string())?).map_err(|e| e.to_string())
}

fn flatten(prefix: &str, value: &Value, out: &mut Vec<(String, String)>) {
    let key = |k: &str| {
        if prefix.is_empty() {
            k.to_string()
        } else {
            format!("{prefix}.{k}")
        }
    };
    match value {
        Value::Object(fields) => {
            for (k, v) in fields {
                flatten(&key(k), v, out);
            }
        }
        Value::Array(items) if items.iter().all(|v| !v.is_object() && !v.is_array()) => {
            for (i, v) in items.iter().enumerate() {
                flatten(&key(&i.to_string()), v, out);
            }
        }
        Value::Array(_) => out.push((prefix.to_string(), value.to_string())),
        Value::Null => out.push((prefix.to_string(), String::new())),
        Value::String(s) => out.push((prefix.to_string(), s.clone())),
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn nested_fields_flatten_into_columns() {
        let report = json!({"regions": [
            {"name": "solve, part 1", "site": {"file": "a.c", "line": 3}, "percent": [50.0, 50.0], "threads": [{"tid": 1}], "cost": null},
            {"name": "io", "site": null, "percent": [], "threads": [], "cost": 2.5}
        ]});
        let csv = super::report_csv(&report, "regions").unwrap();
        assert_eq!(
            csv,
            "name,site.file,site.line,percent.0,percent.1,threads,cost\n\
             \"solve, part 1\",a.c,3,50.0,50.0,\"[{\"\"tid\"\":1}]\",\n\
             io,,,,,,2.5\n"
        );
        let err = super::report_csv(&report, "nope").unwrap_err();
        assert!(err.contains("give one of objects, allocated"), "{err}");
        assert_eq!(super::report_csv(&report, "sharing").unwrap(), "");
    }

    #[test]
    fn drawn_tables_are_named_by_section_and_title() {
        let table = |title: Option<&str>, cell: &str| {
            json!({"title": title, "columns": [{"name": "level"}, {"name": "share"}],
                   "rows": [{"cells": [cell, "50%"], "details": []}]})
        };
        let report = json!({"sections": [
            {"id": "peak", "title": "Peak", "tables": [table(None, "a")]},
            {"id": "access", "title": "Access profile", "tables": [table(Some("Memory levels"), "L1"), table(Some("Top objects, by accesses"), "b")]}
        ]});
        assert_eq!(
            super::report_csv(&report, "peak/peak").unwrap(),
            "level,share\na,50%\n"
        );
        assert_eq!(
            super::report_csv(&report, "access/memory-levels").unwrap(),
            "level,share\nL1,50%\n"
        );
        let err = super::report_csv(&report, "access").unwrap_err();
        assert!(
            err.ends_with(
                "threads, peak/peak, access/memory-levels, access/top-objects-by-accesses"
            ),
            "{err}"
        );
    }
}
