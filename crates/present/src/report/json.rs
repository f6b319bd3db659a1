//! The report as JSON: its data for programs (exact figures, no units to
//! parse) and, under `sections`, the tables the text and HTML renderers draw.

use super::job::{job_sections, JobReport};
use super::model::Section;
use super::sections::sections;
use super::Report;
use serde::Serialize;

pub fn render_json(r: &Report) -> serde_json::Result<String> {
    serde_json::to_string_pretty(&report_value(r)?)
}

/// The report file's format version: raised when a field is removed, renamed
/// or changes type (`docs/report.schema.json` is its schema).
pub const REPORT_SCHEMA_VERSION: u32 = 1;

/// The JSON report: of one profile, or of a job across its ranks (`kind`),
/// with the tables of its sections.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
#[schemars(
    title = "memlens report",
    description = "`memlens report --format json`: every figure exact (bytes, counts, nanoseconds), each section's tables as drawn, and how each figure was obtained."
)]
enum ReportFile<'a> {
    /// One profile (one run, or the runs of a directory read together).
    Profile {
        /// The format's version: raised when a field is removed, renamed or
        /// changes type.
        schema_version: u32,
        #[serde(flatten)]
        data: &'a Report,
        sections: Vec<Section>,
    },
    /// A job of ranks, each reduced to its spread over the ranks.
    Job {
        schema_version: u32,
        #[serde(flatten)]
        data: &'a JobReport,
        sections: Vec<Section>,
    },
}

/// The JSON report as a value (the CSV tables are read from it).
pub fn report_value(r: &Report) -> serde_json::Result<serde_json::Value> {
    serde_json::to_value(ReportFile::Profile {
        schema_version: REPORT_SCHEMA_VERSION,
        data: r,
        sections: sections(r),
    })
}

/// A job's JSON report as a value.
pub fn job_value(j: &JobReport) -> serde_json::Result<serde_json::Value> {
    serde_json::to_value(ReportFile::Job {
        schema_version: REPORT_SCHEMA_VERSION,
        data: j,
        sections: job_sections(j),
    })
}

/// The JSON Schema (draft 2020-12) of the JSON report. Objects admit no
/// other properties, so a reader learns of every field from here.
pub fn report_schema() -> serde_json::Value {
    let mut schema = schemars::schema_for!(ReportFile).to_value();
    schema["$id"] = format!("urn:memlens:report:{REPORT_SCHEMA_VERSION}").into();
    close_objects(&mut schema);
    schema
}

/// Sets `additionalProperties: false` on every object schema with properties.
fn close_objects(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            if map.contains_key("properties") && !map.contains_key("additionalProperties") {
                map.insert("additionalProperties".into(), false.into());
            }
            map.values_mut().for_each(close_objects);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(close_objects),
        _ => {}
    }
}
