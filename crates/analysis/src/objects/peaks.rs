//! Each object's peak: its rows' events replayed, its one site's exact
//! peak, or the bounds the timelines of its several sites give.

use super::DataObject;
use crate::Profile;
use memlens_profile::SiteLivePoint;
use rustc_hash::FxHashMap;

/// A point of one of an object's sites: time, which of its sites, live
/// bytes, most since the site's previous point.
type SitePoint = (u64, usize, f64, f64);

/// The sites' timeline points of each of `wanted` (objects of sites): time,
/// which of the object's sites, live bytes, most since the site's last point.
pub(super) fn sites_points(
    p: &Profile,
    sites_of: &[Vec<usize>],
    wanted: &[usize],
) -> memlens_profile::Result<Vec<Vec<SitePoint>>> {
    let mut site_at: FxHashMap<(u32, u64, Option<&str>), (usize, usize)> = FxHashMap::default();
    for (w, &i) in wanted.iter().enumerate() {
        for (k, &site) in sites_of.get(i).into_iter().flatten().enumerate() {
            let s = &p.sites[site];
            site_at.insert((s.pid, s.stack_id, s.group.as_deref()), (w, k));
        }
    }
    let mut points = vec![Vec::new(); wanted.len()];
    if site_at.is_empty() {
        return Ok(points);
    }
    let mut take = |t: &SiteLivePoint| {
        if let Some(&(w, k)) = site_at.get(&(t.pid, t.stack_id, t.group.as_deref())) {
            points[w].push((t.time_ns, k, t.live_bytes, t.max_bytes));
        }
    };
    if p.site_timeline_unread {
        memlens_profile::read_table_by_batch::<SiteLivePoint>(&p.dir, &mut |_, batch| {
            batch.iter().for_each(&mut take)
        })?;
    } else {
        p.site_timeline.iter().for_each(take);
    }
    Ok(points)
}

/// The live bytes over time of an object made of heap sites, from its
/// sites' timeline points (time, which of its sites, live bytes, most since
/// the site's previous point), and bounds on its peak. A site without a
/// point at a tick held its bytes unchanged since its last one; one with a
/// point held at most `most` between the ticks, and when the others' most
/// fell within the same ticks is not known. So the peak is at least each
/// tick's live bytes and each changed site's most with the unchanged sites'
/// bytes, and at most every site's most together.
pub(super) fn site_series(
    mut points: Vec<SitePoint>,
    sites: usize,
) -> (Vec<(u64, f64)>, PeakBounds) {
    points.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut live = vec![0.0f64; sites];
    let mut total = 0.0f64;
    let mut peak = PeakBounds::default();
    let mut out: Vec<(u64, f64)> = Vec::with_capacity(points.len());
    for tick in points.chunk_by(|a, b| a.0 == b.0) {
        let changed: f64 = tick.iter().map(|&(_, k, _, _)| live[k]).sum();
        let unchanged = total - changed;
        for &(_, k, now, most) in tick {
            peak.at_least = peak.at_least.max(unchanged + most);
            total += now - live[k];
            live[k] = now;
        }
        let most_together: f64 = tick.iter().map(|p| p.3).sum();
        peak.at_most = peak.at_most.max(unchanged + most_together);
        peak.at_least = peak.at_least.max(total);
        out.push((tick[0].0, total));
    }
    (out, peak)
}

/// What an object's peak is known to lie between.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct PeakBounds {
    at_least: f64,
    at_most: f64,
}

/// Each object's peak: from its rows' events, its one site's exact peak, or
/// the bounds its sites' timelines give; each object's series of live
/// bytes from its rows (empty for objects of sites).
pub(super) fn peaks_and_series(
    p: &Profile,
    objects: &mut [DataObject],
    events: Vec<Vec<(u64, f64)>>,
    sites_of: &[Vec<usize>],
) -> Vec<Vec<(u64, f64)>> {
    // The timeline points of the objects of several sites, for their peaks
    // (one site's peak is its own, exact).
    let merged: Vec<usize> = (0..objects.len())
        .filter(|&i| sites_of[i].len() > 1)
        .collect();
    // Unreadable (a summary's profile reads them only here), the peaks are
    // the bounds the sites' own figures give.
    let merged_points = sites_points(p, sites_of, &merged).ok();
    let timelines_read = merged_points.is_some();
    let mut merged_points = merged_points.into_iter().flatten();
    let mut row_series = Vec::with_capacity(events.len());
    for (i, mut ev) in events.into_iter().enumerate() {
        let points = if sites_of[i].is_empty() {
            // Frees before allocations at the same instant: a peak is never inflated.
            ev.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
            let mut live = 0.0f64;
            let mut points = Vec::with_capacity(ev.len());
            for (t, d) in ev {
                live = (live + d).max(0.0);
                objects[i].peak_bytes = objects[i].peak_bytes.max(live);
                points.push((t, live));
            }
            points
        } else {
            let o = &mut objects[i];
            if let [only] = sites_of[i][..] {
                // One site: its peak, kept exactly while replaying.
                o.peak_bytes = p.sites[only].peak_bytes;
            } else {
                let points = merged_points.next().unwrap_or_default();
                let (_, bounds) = site_series(points, sites_of[i].len());
                // Sites of one source line (an unrolled loop's calls): the
                // bytes at the process's peak are live at once too.
                let at_least = bounds.at_least.max(o.bytes_at_peak.unwrap_or(0.0));
                let sites_peaks = sites_of[i].iter().map(|&k| p.sites[k].peak_bytes).sum();
                let at_most = match timelines_read {
                    true => bounds.at_most.min(sites_peaks),
                    false => sites_peaks,
                }
                .max(at_least);
                o.peak_bytes = at_least;
                // Sampled sites' scaled figures differ by rounding alone.
                o.peak_bytes_at_most = (at_most >= at_least + 1.0).then_some(at_most);
            }
            Vec::new()
        };
        row_series.push(points);
    }
    row_series
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sites' timeline points bound their object's peak: a site freed
    /// early between two ticks and one allocated late are never counted
    /// together as at least, only as at most; an unchanged site's bytes
    /// count with every changed site's most.
    #[test]
    fn a_merged_peak_lies_between_what_the_ticks_tell() {
        // Tick 10: site 0 holds 100. Tick 20: site 0 freed, site 1 peaked
        // at 100 and holds it; each's most 100. Tick 30: site 2 peaked at
        // 50 and freed it, the others unchanged.
        let points = vec![
            (10, 0, 100.0, 100.0),
            (20, 1, 100.0, 100.0),
            (20, 0, 0.0, 100.0),
            (30, 2, 0.0, 50.0),
        ];
        let (series, bounds) = site_series(points, 3);
        assert_eq!(series, vec![(10, 100.0), (20, 100.0), (30, 100.0)]);
        let expected = PeakBounds {
            at_least: 150.0,
            at_most: 200.0,
        };
        assert_eq!(bounds, expected);
    }
}
