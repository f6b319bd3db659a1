//! A perf backend's events opened on every CPU for the run, their rings
//! drained into `raw/perf.data`.

use crate::perf::backends::{self, Plan};
use crate::perf::{Event, PipeWriter, Ring};
use crate::sysinfo::now_ns;
use crate::{Error, Result};
use memlens_profile::RAW_PERF_DATA;
use std::path::Path;

/// The events of a perf backend on every CPU, and the perf.data they go to.
pub(crate) struct PerfSession {
    rings: Vec<Ring>,
    pub(crate) out: PipeWriter,
    /// Kept open until the end: closing them would stop their output.
    _members: Vec<Event>,
}

impl PerfSession {
    /// Opens the plan's events for `tasks` (0: memlens itself, inherited by
    /// the target it starts; else thread ids of a running process, inherited
    /// by the threads they create) on every CPU.
    pub(crate) fn open(plan: &Plan, raw_dir: &Path, tasks: &[i32]) -> Result<PerfSession> {
        let fail = |name: &str, e: std::io::Error| {
            let u = backends::open_error(name, &e);
            Error::Usage(format!("{}; {}", u.reason, u.fix))
        };
        let mut rings = Vec::new();
        let mut members = Vec::new();
        let mut ids = vec![Vec::new(); plan.events.len()];
        // Events are per CPU: the kernel refuses a ring for an inherited per-thread event.
        for cpu in crate::sysinfo::online_cpus() {
            let mut ring: Option<Ring> = None;
            for (i, (name, attr)) in plan.events.iter().enumerate() {
                for &task in tasks {
                    let event = Event::open(attr, task, cpu as i32).map_err(|e| fail(name, e))?;
                    ids[i].push(event.id);
                    match &ring {
                        None => {
                            ring = Some(
                                Ring::map(event, cpu, 512, plan.aux_pages)
                                    .map_err(|e| fail(name, e))?,
                            )
                        }
                        Some(r) => {
                            event.output_to(r).map_err(|e| fail(name, e))?;
                            members.push(event);
                        }
                    }
                }
            }
            rings.extend(ring);
        }
        let path = raw_dir.join(RAW_PERF_DATA);
        let attrs: Vec<_> = plan
            .events
            .iter()
            .zip(ids)
            .map(|((_, attr), ids)| (attr.clone(), ids))
            .collect();
        let mut out = PipeWriter::create(&path, &attrs).map_err(|e| Error::io(&path, e))?;
        if plan.aux_pages > 0 {
            out.write_spe_info(plan.pmu_type)
                .map_err(|e| Error::io(&path, e))?;
            if let Some(conv) = rings.first().and_then(Ring::time_conv) {
                // SPE stamps the generic timer; converted, it gives perf's clock.
                // Rebased on a reading of both, it gives CLOCK_MONOTONIC, the
                // clock of every other time in the profile.
                let conv = match crate::perf::timer_count() {
                    Some(count) => conv.rebased(count, now_ns()),
                    None => conv,
                };
                out.write_user(memlens_decoders::perf_data::user::TIME_CONV, &conv.encode())
                    .map_err(|e| Error::io(&path, e))?;
            }
        }
        eprintln!(
            "memlens: access samples from {} ({}, 1 in {})",
            plan.kind.name(),
            plan.events
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(" + "),
            plan.period
        );
        Ok(PerfSession {
            rings,
            out,
            _members: members,
        })
    }

    /// Saves what the rings hold, flushed each time: if memlens is killed, the
    /// samples up to the last interval stay readable. A write error surfaces at
    /// the final flush.
    pub(crate) fn drain(&mut self) {
        for ring in &mut self.rings {
            let _ = ring.drain(&mut self.out);
        }
        let _ = self.out.flush();
    }

    /// Saves the rest, and says whether all of it reached the disk.
    pub(crate) fn finish(mut self, raw_dir: &Path) -> Result<()> {
        self.drain();
        (self.out.flush()).map_err(|e| Error::io(&raw_dir.join(RAW_PERF_DATA), e))
    }
}
