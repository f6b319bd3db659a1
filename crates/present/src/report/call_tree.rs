//! A flame graph's stacks merged into one call tree by function, for the
//! HTML page's caller/callee (sandwich) view: pick a function, see every
//! path that leads to it (its callers, merged) and everything under it (its
//! callees, merged), as speedscope's sandwich and heaptrack_gui's
//! caller/callee views do. The page computes the views from the tree.

use crate::stacks::{Measure, Stacks};
use serde::Serialize;
use std::collections::HashMap;

/// Nodes below this share of the whole are left out: the tree, like the
/// flame graph beside it, is bounded by what can be seen, not by the run.
const MIN_SHARE: f64 = 1.0 / 4000.0;
/// And at most this many nodes, the heaviest.
const MAX_NODES: usize = 20_000;

#[derive(Serialize)]
pub struct CallTree {
    /// What the weights count: bytes, blocks, samples or accesses.
    pub unit: &'static str,
    pub total: f64,
    /// Function names, each once.
    pub names: Vec<String>,
    /// `[name, parent (-1: a root), weight]`, each node after its parent;
    /// a node's weight includes its children's.
    pub nodes: Vec<(usize, i64, f64)>,
    /// The weight of the roots left out (a deeper node left out still
    /// weighs in its parent's).
    pub left_out: f64,
}

/// The stacks' tree by function (the frames of one function at different
/// lines merged), weighed by `measure`; `None` when nothing weighs.
pub fn call_tree(stacks: &Stacks, measure: Measure) -> Option<CallTree> {
    let at = stacks.measures.iter().position(|&m| m == measure)?;
    let mut names: Vec<String> = Vec::new();
    let mut name_ids: HashMap<String, usize> = HashMap::new();
    // (name, parent, weight), children found by (parent, name).
    let mut nodes: Vec<(usize, i64, f64)> = Vec::new();
    let mut children: HashMap<(i64, usize), usize> = HashMap::new();
    for row in &stacks.rows {
        let weight = row.values[at];
        if weight <= 0.0 {
            continue;
        }
        let mut parent = -1i64;
        for frame in &row.stack {
            let name = match frame.function.is_empty() {
                true => frame.label(),
                false => frame.function.clone(),
            };
            let id = *name_ids.entry(name).or_insert_with_key(|name| {
                names.push(name.clone());
                names.len() - 1
            });
            let node = *children.entry((parent, id)).or_insert_with(|| {
                nodes.push((id, parent, 0.0));
                nodes.len() - 1
            });
            nodes[node].2 += weight;
            parent = node as i64;
        }
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
    order.sort_unstable();
    let mut new_index: HashMap<usize, i64> = HashMap::new();
    let mut kept: Vec<(usize, i64, f64)> = Vec::new();
    for i in order {
        let (name, parent, weight) = nodes[i];
        let parent = match parent {
            -1 => -1,
            p => match new_index.get(&(p as usize)) {
                Some(&p) => p,
                None => continue,
            },
        };
        new_index.insert(i, kept.len() as i64);
        kept.push((name, parent, weight));
    }
    let kept_roots: f64 = (kept.iter()).filter(|n| n.1 < 0).map(|n| n.2).sum();
    Some(CallTree {
        unit: measure.counted(),
        total,
        names,
        nodes: kept,
        left_out: total - kept_roots,
    })
}

#[cfg(test)]
mod tests {
    use super::call_tree;
    use crate::stacks::{Measure, Node, Stacks, Weighted};

    fn stack(functions: &[&str], bytes: f64) -> Weighted {
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
        }
    }

    #[test]
    fn stacks_merge_by_function_and_light_nodes_are_left_out() {
        // main -> f -> malloc twice (10 and 5 bytes), main -> g -> f ->
        // malloc (4), and a sliver (1 byte in 4 001) under h.
        let stacks = Stacks {
            measures: Measure::ALLOCATION.to_vec(),
            rows: vec![
                stack(&["main", "f", "malloc"], 10.0),
                stack(&["main", "f", "malloc"], 5.0),
                stack(&["main", "g", "f", "malloc"], 4.0),
                stack(&["main", "h"], 3982.0),
                stack(&["main", "h", "sliver"], 1.0),
            ],
        };
        let t = call_tree(&stacks, Measure::AllocSpace).unwrap();
        assert_eq!(t.total, 4002.0);
        let named: Vec<(&str, i64, f64)> = (t.nodes.iter())
            .map(|&(name, parent, w)| (t.names[name].as_str(), parent, w))
            .collect();
        assert_eq!(
            named,
            [
                ("main", -1, 4002.0),
                ("f", 0, 15.0),
                ("malloc", 1, 15.0),
                ("g", 0, 4.0),
                ("f", 3, 4.0),
                ("malloc", 4, 4.0),
                ("h", 0, 3983.0),
            ]
        );
        assert_eq!(t.left_out, 0.0, "the sliver weighs in h's own");
    }
}
