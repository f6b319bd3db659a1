//! The samples of a repeated region's instances on one normalised instance.

use crate::format::{context_path, duration, rate, shorten};
use crate::report::model::{Cell, Column, Figure, Row, Section, Table, Unit};
use crate::report::Report;

pub fn section(r: &Report) -> Option<Section> {
    let f = r.folding.content.as_ref()?;
    let mut s = Section::new("folding", "Folding")
        .note(format!(
            "{} folded (pid {}): {} instances, {}, mean {}; {} samples, 1 per {}; sampled and scaled",
            f.label(),
            f.pid,
            f.instances,
            if f.folded < f.instances {
                format!(
                    "{} folded (the rest were outliers in duration: preempted or disturbed)",
                    f.folded
                )
            } else {
                "all folded".to_string()
            },
            duration(f.mean_ns),
            f.samples,
            f.period
        ))
        .note(format!("instances: {}", f.how))
        .figure(Figure::Fold);
    if let Some(exact) = f.exact_accesses_per_instance {
        s = s.note(format!(
            "accesses per instance: exact {:.0}, folded estimate {:.0} ({:+.1}%)",
            exact,
            f.est_accesses_per_instance,
            100.0 * (f.est_accesses_per_instance / exact - 1.0)
        ));
    }
    let mut t = Table::new(vec![
        Column::text("phase"),
        Column::measure("samples", Unit::Count),
        Column::measure("stores", Unit::Count),
        Column::measure("accesses/s", Unit::Count),
        Column::measure("bytes/s", Unit::BytesPerSecond),
        Column::text("objects (samples)").at_most(60),
        Column::text("code").at_most(90),
    ]);
    for b in &f.bins {
        let objects = b
            .objects
            .iter()
            .take(2)
            .map(|o| format!("{} ({})", shorten(&o.name, 24), o.samples))
            .collect::<Vec<_>>()
            .join(", ");
        // The calling context where the samples carry one.
        let code = match (b.context.is_empty(), &b.location) {
            (false, _) => context_path(&b.context),
            (true, Some(location)) => location.clone(),
            (true, None) => "-".into(),
        };
        t.push(Row::from(vec![
            format!("{:.2}-{:.2}", b.from, b.to).into(),
            Cell::count(b.samples),
            Cell::count(b.store_samples),
            Cell::estimate(b.est_accesses_per_s),
            Cell::measured(rate(b.est_bytes_per_s), b.est_bytes_per_s),
            objects.into(),
            code.into(),
        ]));
    }
    Some(s.table(t))
}

#[cfg(test)]
mod tests {
    use super::super::fixture::*;
    use crate::report::{build_report, ReportOptions};
    use memlens_profile::{testing, Region, SampleCore};

    #[test]
    fn a_regions_instances_fold_onto_one() {
        // Ten 1 000 ns instances of "step", each with 20 samples spread
        // evenly over it: five in each quarter of the folded instance.
        let mut p = two_blocks();
        for k in 0..10u64 {
            let begin = 10_000_000 + 2_000 * k;
            p.regions.push(Region {
                process_wide: true,
                ..testing::region(1, 1, "step", begin, begin + 1_000)
            });
            p.samples.extend((0..20u64).map(|i| SampleCore {
                pid: 1,
                tid: 1,
                time_ns: begin + 50 * i,
                address: 0x200000 + 8 * i,
                size: 8,
                ..Default::default()
            }));
        }
        let options = ReportOptions {
            fold: Some("step".into()),
            fold_bins: 4,
            ..Default::default()
        };
        let r = build_report(&p, &options);
        let s = (super::super::sections(&r).into_iter())
            .find(|s| s.id == "folding")
            .expect("a folding section");
        assert!(
            s.notes[0].contains("10 instances, all folded") && s.notes[0].contains("200 samples"),
            "{:?}",
            s.notes
        );
        let samples: Vec<String> = rows(&s).iter().map(|r| r[1].clone()).collect();
        assert_eq!(samples, ["50", "50", "50", "50"], "{:?}", rows(&s));
    }
}
