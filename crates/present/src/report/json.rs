//! The report as JSON: its data for programs (exact figures, no units to
//! parse) and, under `sections`, the tables the text and HTML renderers draw.

use super::model::Section;
use super::sections::sections;
use super::Report;
use serde::Serialize;

pub fn render_json(r: &Report) -> serde_json::Result<String> {
    serde_json::to_string_pretty(&report_value(r)?)
}

/// The JSON report as a value (the CSV tables are read from it).
pub fn report_value(r: &Report) -> serde_json::Result<serde_json::Value> {
    #[derive(Serialize)]
    struct Json<'a> {
        #[serde(flatten)]
        data: &'a Report,
        sections: Vec<Section>,
    }
    serde_json::to_value(Json {
        data: r,
        sections: sections(r),
    })
}
