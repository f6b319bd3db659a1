//! `memlens export --format collapsed|speedscope`: the profile's stacks in
//! the formats other tools read: collapsed stacks (Brendan Gregg's
//! flamegraph.pl, inferno) and speedscope's JSON file format.

use crate::stacks::{Measure, Stacks};
use std::collections::BTreeMap;

/// One line per distinct stack, `root;...;leaf weight` (each row's weight
/// rounded), sorted; stacks of weight 0 left out. `;` inside a frame becomes `,`.
pub fn collapsed(stacks: &Stacks, measure: Measure) -> Vec<String> {
    let at = stacks.index(measure);
    let mut weights: BTreeMap<String, u64> = BTreeMap::new();
    for row in &stacks.rows {
        let key = (row.stack.iter())
            // One line a stack, whatever the program named its frames.
            .map(|n| memlens_profile::printable(&n.label()).replace(';', ","))
            .collect::<Vec<_>>()
            .join(";");
        *weights.entry(key).or_default() += row.values[at].round() as u64;
    }
    (weights.into_iter())
        .filter(|(_, w)| *w > 0)
        .map(|(stack, w)| format!("{stack} {w}"))
        .collect()
}

/// speedscope's file format: shared frames, and one "sampled" profile
/// whose samples are the distinct stacks (root first) weighed by `measure`.
pub fn speedscope(stacks: &Stacks, measure: Measure, name: &str) -> serde_json::Value {
    let at = stacks.index(measure);
    let mut frames: Vec<serde_json::Value> = Vec::new();
    let mut frame_ids: BTreeMap<String, usize> = BTreeMap::new();
    let (mut samples, mut weights) = (Vec::new(), Vec::new());
    for row in stacks.rows.iter().filter(|r| r.values[at].round() > 0.0) {
        let sample: Vec<usize> = (row.stack.iter())
            .map(|n| {
                *frame_ids.entry(n.label()).or_insert_with(|| {
                    let mut frame = serde_json::json!({ "name": n.function });
                    if !n.file.is_empty() {
                        frame["file"] = n.file.clone().into();
                        if n.line > 0 {
                            frame["line"] = n.line.into();
                        }
                    }
                    frames.push(frame);
                    frames.len() - 1
                })
            })
            .collect();
        samples.push(sample);
        weights.push(row.values[at].round() as u64);
    }
    let (kind, unit) = measure.name_and_unit();
    let total: u64 = weights.iter().sum();
    serde_json::json!({
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "name": name,
        "exporter": concat!("memlens ", env!("CARGO_PKG_VERSION")),
        "activeProfileIndex": 0,
        "shared": { "frames": frames },
        "profiles": [{
            "type": "sampled",
            "name": format!("{kind} ({})", measure.how()),
            "unit": if unit == "bytes" { "bytes" } else { "none" },
            "startValue": 0,
            "endValue": total,
            "samples": samples,
            "weights": weights,
        }],
    })
}
