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
mod source;
mod threads;

use super::model::Section;
use super::Report;

/// A section's builder: nothing when the profile has nothing for it.
type Build = fn(&Report) -> Option<Section>;

const SECTIONS: [Build; 16] = [
    run::section,
    peak::section,
    objects::by_peak,
    objects::by_allocated,
    leaks::section,
    regions::section,
    access::section,
    source::section,
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

/// What the sections' tests share: a report of a hand-made profile, and
/// one section's rows.
#[cfg(test)]
pub(super) mod fixture {
    use super::super::{build_report, model::Section, Report, ReportOptions};
    use memlens_profile::{testing, Process, Profile};

    /// A process (pid 1) that ran 100 ms and exited with 0.
    pub fn exited(p: &mut Profile) {
        p.meta.clock.duration_ns = 100_000_000;
        p.meta.processes = vec![Process {
            pid: 1,
            exe: "/bin/app".into(),
            end_ns: Some(100_000_000),
            exit_code: Some(0),
            ..Default::default()
        }];
    }

    /// An instrumented run of pid 1 (sampling 1 in 100) that allocated a
    /// 64 KiB block from main (a.c:2), freed at 50 ms, and 4 KiB from
    /// f (a.c:3) <- main (a.c:9), never freed.
    pub fn two_blocks() -> Profile {
        let mut p = testing::instrumented(100);
        exited(&mut p);
        p.allocations = vec![
            memlens_profile::Allocation {
                free_ns: Some(50_000_000),
                ..testing::heap_block(1, 0x100000, 64 << 10, 3, 1_000_000)
            },
            testing::heap_block(1, 0x200000, 4 << 10, 7, 2_000_000),
        ];
        testing::add_stack(&mut p, 1, 3, &[("main", 2)]);
        testing::add_stack(&mut p, 1, 7, &[("f", 3), ("main", 9)]);
        p
    }

    pub fn report_of(p: &Profile) -> Report {
        build_report(p, &ReportOptions::default())
    }

    /// Section `id` of the report of `p`, which must have it.
    pub fn section(p: &Profile, id: &str) -> Section {
        let r = report_of(p);
        super::sections(&r)
            .into_iter()
            .find(|s| s.id == id)
            .unwrap_or_else(|| panic!("no section {id}"))
    }

    /// Every row's cells, table after table.
    pub fn rows(s: &Section) -> Vec<Vec<String>> {
        (s.tables.iter())
            .flat_map(|t| &t.rows)
            .map(|r| r.cells.clone())
            .collect()
    }

    /// [`two_blocks`] with a timeline (pid 1 at 10 ms: 8 MiB resident, 68
    /// KiB of heap; at 60 ms: 12 MiB and 4 KiB) and a region "solve" of
    /// thread 1 from 10 to 30 ms that read 2 MB and wrote 1 MB exactly.
    pub fn with_timeline_and_region() -> Profile {
        let mut p = two_blocks();
        p.timeline = [(10, 8u64, 68u64), (60, 12, 4)]
            .map(|(ms, rss_mib, heap_kib)| memlens_profile::TimelinePoint {
                pid: 1,
                time_ns: ms * 1_000_000,
                rss: rss_mib << 20,
                heap_live: heap_kib << 10,
                ..Default::default()
            })
            .to_vec();
        p.regions = vec![memlens_profile::Region {
            bytes_read: Some(2_000_000),
            bytes_written: Some(1_000_000),
            loads: Some(250_000),
            stores: Some(125_000),
            ..testing::region(1, 1, "solve", 10_000_000, 30_000_000)
        }];
        p
    }

    /// [`two_blocks`] in which threads 1 and 2 take turns storing, 20
    /// samples each in the context f <- main, to bytes 0..8 and 8..16 of
    /// the 4 KiB block (2 000 stores each, exactly counted).
    pub fn shared_line() -> Profile {
        let mut p = two_blocks();
        p.samples = testing::stores_in_turn(1, 0x200000, 40, 3_000_000);
        p.threads = (1..=2)
            .map(|tid| memlens_profile::ThreadRow {
                pid: 1,
                tid,
                stores: Some(2_000),
                ..Default::default()
            })
            .collect();
        p
    }
}
