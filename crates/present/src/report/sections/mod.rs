//! The report's sections in the order every output shows them. Each builds its
//! notes and tables from the report's data once; a new section is a file here
//! and a line in `SECTIONS`.

mod access;
mod counters;
mod folding;
mod leaks;
mod levels;
mod losses;
mod objects;
mod peak;
mod provenance;
mod regions;
mod reuse;
mod run;
mod sharing;
mod threads;

use super::model::Section;
use super::Report;

/// A section's builder: nothing when the profile has nothing for it.
type Build = fn(&Report) -> Option<Section>;

const SECTIONS: [Build; 15] = [
    run::section,
    peak::section,
    objects::by_peak,
    objects::by_allocated,
    leaks::section,
    regions::section,
    access::section,
    threads::section,
    counters::section,
    levels::section,
    sharing::section,
    reuse::section,
    folding::section,
    provenance::section,
    losses::section,
];

pub(crate) use losses::for_losses as losses_section;
pub(crate) use regions::NO_REGIONS;

/// The sections a report has.
pub fn sections(r: &Report) -> Vec<Section> {
    SECTIONS.iter().filter_map(|build| build(r)).collect()
}

/// The tag telling an object's process apart, `  [pid N, what]`: only
/// where the report covers several processes (pid 0: objects of the whole
/// job), and then `what` alone when there is something to say.
fn process_tag(r: &Report, pid: u32, what: Option<&str>) -> String {
    let several = r.summary.processes.len() > 1 && pid != 0;
    match (several, what) {
        (true, Some(what)) => format!("  [pid {pid}, {what}]"),
        (true, None) => format!("  [pid {pid}]"),
        (false, Some(what)) => format!("  [{what}]"),
        (false, None) => String::new(),
    }
}
