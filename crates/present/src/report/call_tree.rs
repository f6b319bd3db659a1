//! A flame graph's stacks merged into one call tree by frame, which the HTML
//! page draws: its flame graph (search, zoom into a frame), its caller/callee
//! (sandwich) view, where the page merges a function's frames at different
//! lines (pick a function, see every path that leads to it and everything
//! under it, as speedscope's sandwich and heaptrack_gui's caller/callee views
//! do), and, when the stacks are sliced by time, the flame graph of a time
//! range picked on the timeline (heaptrack_gui's and memray's filter).

use crate::stacks::{Measure, Stacks, Weighted};
use serde::Serialize;
use std::collections::{HashMap, HashSet};

/// Nodes below this share of the whole are left out: the tree, like a
/// picture of it, is bounded by what can be seen, not by the run.
const MIN_SHARE: f64 = 1.0 / 4000.0;
/// Unless over this share of the slice of time where they weigh most:
/// a frame a pixel wide in a graph of that slice alone.
const MIN_SLICE_SHARE: f64 = 1.0 / 1000.0;
/// And at most this many nodes, the heaviest.
const MAX_NODES: usize = 20_000;
/// And at most this many more for the slices.
const MAX_SLICE_NODES: usize = 4_000;
/// At most this many (node, slice) weights: past it, neighbouring slices
/// are merged two by two (a page of eight flame graphs stays within ~2 MB).
const MAX_SLICE_WEIGHTS: usize = 20_000;

#[derive(Serialize)]
pub struct CallTree {
    /// What the weights count: bytes, blocks, samples or accesses.
    pub unit: &'static str,
    pub total: f64,
    /// Frame labels ("f (a.c:12)"), each once, and each one's function (an
    /// index into `functions`).
    pub frames: Vec<String>,
    pub function_of: Vec<usize>,
    pub functions: Vec<String>,
    /// `[frame, parent (-1: a root), weight]`, each node after its parent;
    /// a node's weight includes its children's (in JSON one flat array of
    /// the three, a third of its size less).
    #[serde(serialize_with = "flat_nodes")]
    pub nodes: Vec<(usize, i64, f64)>,
    /// The weight of the roots left out (a deeper node left out still
    /// weighs in its parent's).
    pub left_out: f64,
    /// The weights by slice of time, when the stacks are sliced for this
    /// measure.
    pub slices: Option<TreeSlices>,
}

/// Each node's own weight (its children's not included) by slice of time,
/// as three columns; node -1 holds the roots left out.
#[derive(Serialize)]
pub struct TreeSlices {
    /// A slice's length; the first begins at the profile's time 0.
    pub seconds: f64,
    pub count: u32,
    pub node: Vec<i64>,
    pub slice: Vec<u32>,
    #[serde(serialize_with = "compact_numbers")]
    pub weight: Vec<f64>,
}

/// A number as JSON, an integer where it is one ("4096", not "4096.0").
#[derive(Serialize)]
#[serde(untagged)]
enum Number {
    Integer(i64),
    Real(f64),
}

impl Number {
    fn of(v: f64) -> Number {
        match v.fract() == 0.0 && v.abs() < 9e15 {
            true => Number::Integer(v as i64),
            false => Number::Real(v),
        }
    }
}

fn compact_numbers<S: serde::Serializer>(values: &[f64], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(values.iter().map(|&v| Number::of(v)))
}

fn flat_nodes<S: serde::Serializer>(nodes: &[(usize, i64, f64)], s: S) -> Result<S::Ok, S::Error> {
    let flat = nodes.iter().flat_map(|&(frame, parent, weight)| {
        [
            Number::Integer(frame as i64),
            Number::Integer(parent),
            Number::of(weight),
        ]
    });
    s.collect_seq(flat)
}

/// The stacks' tree by frame, weighed by `measure`; `None` when nothing
/// weighs.
pub fn call_tree(stacks: &Stacks, measure: Measure) -> Option<CallTree> {
    let at = stacks.measures.iter().position(|&m| m == measure)?;
    // The slices of time the stacks are split by for this measure, if any.
    let sliced = (stacks.slicing.as_ref())
        .filter(|(_, measures)| measures.contains(&measure))
        .map(|(slices, _)| *slices);
    let mut frames: Vec<String> = Vec::new();
    let mut function_of: Vec<usize> = Vec::new();
    let mut functions: Vec<String> = Vec::new();
    let mut frame_ids: HashMap<String, usize> = HashMap::new();
    let mut function_ids: HashMap<String, usize> = HashMap::new();
    // (frame, parent, weight), children found by (parent, frame).
    let mut nodes: Vec<(usize, i64, f64)> = Vec::new();
    let mut children: HashMap<(i64, usize), usize> = HashMap::new();
    // Each row's frames, for its slices' node below.
    let mut paths: Vec<Vec<usize>> = Vec::new();
    for row in &stacks.rows {
        let weight = row.values[at];
        let mut path = Vec::new();
        if weight > 0.0 {
            let mut parent = -1i64;
            for frame in &row.stack {
                let label = frame.label();
                let id = match frame_ids.get(&label) {
                    Some(&id) => id,
                    None => {
                        let function = match frame.function.is_empty() {
                            true => label.clone(),
                            false => frame.function.clone(),
                        };
                        let f = *function_ids.entry(function).or_insert_with_key(|f| {
                            functions.push(f.clone());
                            functions.len() - 1
                        });
                        frames.push(label.clone());
                        function_of.push(f);
                        frame_ids.insert(label, frames.len() - 1);
                        frames.len() - 1
                    }
                };
                let node = *children.entry((parent, id)).or_insert_with(|| {
                    nodes.push((id, parent, 0.0));
                    nodes.len() - 1
                });
                nodes[node].2 += weight;
                path.push(node);
                parent = node as i64;
            }
        }
        paths.push(path);
    }
    let total: f64 = (nodes.iter()).filter(|n| n.1 < 0).map(|n| n.2).sum();
    if total <= 0.0 {
        return None;
    }
    // Keep the heaviest nodes over the threshold; a node's weight is at most
    // its parent's, so a kept node's parent is kept (ties aside: parents
    // first among equals, by their earlier index).
    let mut order: Vec<usize> = (0..nodes.len())
        .filter(|&i| nodes[i].2 >= total * MIN_SHARE)
        .collect();
    order.sort_by(|&a, &b| nodes[b].2.total_cmp(&nodes[a].2).then(a.cmp(&b)));
    order.truncate(MAX_NODES);
    // Where the stacks are sliced, a frame light over the run may be a time
    // range's heaviest: also the nodes over a threshold of the slice where
    // their rows weigh most, the largest shares first (a node's share is at
    // least its children's, so their parents are kept too).
    if let Some(slices) = sliced {
        let mut slice_totals = vec![0.0; slices.count as usize];
        for &(slice, weight) in stacks.rows.iter().flat_map(|r| slices_of(r, at)) {
            slice_totals[slice as usize] += weight;
        }
        let mut share = vec![0.0f64; nodes.len()];
        for (row, path) in stacks.rows.iter().zip(&paths) {
            let most = (slices_of(row, at).iter())
                .map(|&(slice, weight)| weight / slice_totals[slice as usize])
                .fold(0.0, f64::max);
            for &node in path {
                share[node] = share[node].max(most);
            }
        }
        let kept: HashSet<usize> = order.iter().copied().collect();
        let mut more: Vec<usize> = (0..nodes.len())
            .filter(|&i| share[i] >= MIN_SLICE_SHARE && !kept.contains(&i))
            .collect();
        more.sort_by(|&a, &b| share[b].total_cmp(&share[a]).then(a.cmp(&b)));
        more.truncate(MAX_SLICE_NODES);
        order.extend(more);
    }
    order.sort_unstable();
    let mut new_index: HashMap<usize, i64> = HashMap::new();
    let mut kept: Vec<(usize, i64, f64)> = Vec::new();
    for i in order {
        let (frame, parent, weight) = nodes[i];
        let parent = match parent {
            -1 => -1,
            p => match new_index.get(&(p as usize)) {
                Some(&p) => p,
                None => continue,
            },
        };
        new_index.insert(i, kept.len() as i64);
        kept.push((frame, parent, weight));
    }
    let kept_roots: f64 = (kept.iter()).filter(|n| n.1 < 0).map(|n| n.2).sum();
    // Only the frames and functions of the nodes kept: the tree's text is
    // bounded by its nodes, not by every frame of the run.
    let (mut kept_frames, mut kept_function_of, mut kept_functions) =
        (Vec::new(), Vec::new(), Vec::new());
    let mut frame_index: HashMap<usize, usize> = HashMap::new();
    let mut function_index: HashMap<usize, usize> = HashMap::new();
    for node in &mut kept {
        node.0 = *frame_index.entry(node.0).or_insert_with(|| {
            let function = function_of[node.0];
            let f = *function_index.entry(function).or_insert_with(|| {
                kept_functions.push(std::mem::take(&mut functions[function]));
                kept_functions.len() - 1
            });
            kept_frames.push(std::mem::take(&mut frames[node.0]));
            kept_function_of.push(f);
            kept_frames.len() - 1
        });
    }
    let slices = sliced.map(|slices| {
        // A row's slices weigh in the deepest node of its path kept.
        let mut own: HashMap<(i64, u32), f64> = HashMap::new();
        for (row, path) in stacks.rows.iter().zip(&paths) {
            let node = (path.iter())
                .map_while(|n| new_index.get(n))
                .last()
                .copied()
                .unwrap_or(-1);
            for &(slice, weight) in slices_of(row, at) {
                *own.entry((node, slice)).or_default() += weight;
            }
        }
        let mut merged = 1u32;
        while own.len() > MAX_SLICE_WEIGHTS && slices.count > merged {
            merged *= 2;
            let mut wider: HashMap<(i64, u32), f64> = HashMap::new();
            for ((node, slice), weight) in own {
                *wider.entry((node, slice / 2)).or_default() += weight;
            }
            own = wider;
        }
        let mut own: Vec<((i64, u32), f64)> = own.into_iter().collect();
        own.sort_by_key(|o| o.0);
        TreeSlices {
            seconds: slices.end_ns as f64 / 1e9 / slices.count as f64 * merged as f64,
            count: slices.count.div_ceil(merged),
            node: own.iter().map(|o| o.0 .0).collect(),
            slice: own.iter().map(|o| o.0 .1).collect(),
            // Three decimals: a scaled estimate needs no more.
            weight: own.iter().map(|o| (o.1 * 1e3).round() / 1e3).collect(),
        }
    });
    Some(CallTree {
        unit: measure.counted(),
        total,
        frames: kept_frames,
        function_of: kept_function_of,
        functions: kept_functions,
        nodes: kept,
        left_out: total - kept_roots,
        slices,
    })
}

/// A row's weights by slice for its measure numbered `at` (none when not
/// sliced).
fn slices_of(row: &Weighted, at: usize) -> &[(u32, f64)] {
    row.by_slice.get(at).map_or(&[], Vec::as_slice)
}

#[cfg(test)]
mod tests {
    use super::call_tree;
    use crate::stacks::{Measure, Node, Slices, Stacks, Weighted};

    fn stack(functions: &[&str], bytes: f64, at: u32) -> Weighted {
        Weighted {
            stack: (functions.iter())
                .map(|f| Node {
                    function: f.to_string(),
                    file: "a.c".into(),
                    line: f.len() as u32,
                    module: "app".into(),
                })
                .collect(),
            values: vec![0.0, bytes, 0.0, 0.0, 0.0],
            by_slice: vec![vec![], vec![(at, bytes)], vec![], vec![], vec![]],
        }
    }

    #[test]
    fn stacks_merge_by_frame_and_light_nodes_weigh_in_their_parent() {
        // main -> f -> malloc twice (10 and 5 bytes, in slices 0 and 3),
        // main -> g -> f -> malloc (4), a sliver (1 byte in 4 020, and in
        // the 4 005 of its slice) under h, and main -> k's 1 byte, alone in
        // its slice.
        let slices = Slices {
            end_ns: 4_000_000_000,
            count: 4,
        };
        let stacks = Stacks {
            measures: Measure::ALLOCATION.to_vec(),
            rows: vec![
                stack(&["main", "f", "malloc"], 10.0, 0),
                stack(&["main", "f", "malloc"], 5.0, 3),
                stack(&["main", "g", "f", "malloc"], 4.0, 1),
                stack(&["main", "h"], 4000.0, 1),
                stack(&["main", "h", "sliver"], 1.0, 1),
                stack(&["main", "k"], 1.0, 2),
            ],
            slicing: Some((slices, vec![Measure::AllocSpace])),
        };
        let t = call_tree(&stacks, Measure::AllocSpace).unwrap();
        assert_eq!(t.total, 4021.0);
        let named: Vec<(&str, i64, f64)> = (t.nodes.iter())
            .map(|&(frame, parent, w)| (t.functions[t.function_of[frame]].as_str(), parent, w))
            .collect();
        assert_eq!(
            named,
            [
                ("main", -1, 4021.0),
                ("f", 0, 15.0),
                ("malloc", 1, 15.0),
                ("g", 0, 4.0),
                ("f", 3, 4.0),
                ("malloc", 4, 4.0),
                ("h", 0, 4001.0),
                ("k", 0, 1.0),
            ]
        );
        assert_eq!(t.frames[t.nodes[1].0], "f (a.c:1)");
        assert_eq!(t.left_out, 0.0, "the sliver weighs in h's own");
        assert_eq!(t.frames.len(), 6, "the sliver's frame left out too");
        // Own weights by slice: the sliver's in h's.
        let s = t.slices.expect("sliced");
        assert_eq!((s.seconds, s.count), (1.0, 4));
        let own: Vec<(i64, u32, f64)> = (0..s.node.len())
            .map(|i| (s.node[i], s.slice[i], s.weight[i]))
            .collect();
        assert_eq!(
            own,
            [
                (2, 0, 10.0),
                (2, 3, 5.0),
                (5, 1, 4.0),
                (6, 1, 4001.0),
                (7, 2, 1.0)
            ]
        );
        // A measure the stacks are not sliced by has no slices, and k, light
        // over the whole run, is left out.
        let stacks = Stacks {
            slicing: Some((slices, vec![])),
            ..stacks
        };
        let t = call_tree(&stacks, Measure::AllocSpace).unwrap();
        assert!(t.slices.is_none());
        assert_eq!(t.nodes.len(), 7);
    }
}
