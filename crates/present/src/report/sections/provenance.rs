//! How each kind of figure was obtained.

use crate::report::model::{Section, Table};
use crate::report::Report;

pub fn section(r: &Report) -> Option<Section> {
    Some(Section::new("provenance", "How obtained").table(Table::key_value(r.provenance.clone())))
}

#[cfg(test)]
mod tests {
    use super::super::fixture::*;

    #[test]
    fn the_objects_row_names_the_size_threshold_recorded_exactly() {
        let mut p = two_blocks();
        p.meta.settings.min_size = 64 << 10;
        let s = section(&p, "provenance");
        let objects = rows(&s).into_iter().find(|r| r[0] == "objects").unwrap();
        assert!(
            objects[1].starts_with("measured for blocks >= 64.0 KiB and mmaps"),
            "{}",
            objects[1]
        );
    }
}
