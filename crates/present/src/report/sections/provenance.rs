//! How each kind of figure was obtained.

use crate::report::model::{Section, Table};
use crate::report::Report;

pub fn section(r: &Report) -> Option<Section> {
    Some(Section::new("provenance", "How obtained").table(Table::key_value(r.provenance.clone())))
}
