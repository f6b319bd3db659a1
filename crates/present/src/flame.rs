//! `memlens plot flame`: flame graphs (SVG, drawn by inferno) of where memory
//! was allocated, by call stack and bytes, and of where it was accessed:
//! each sample under its object's allocation stack, then the object, then the
//! calling context of the code that touched it (a data-centric view, as
//! DrCCTProf's).

use crate::PlotError;
use memlens_analysis::{self as analysis, Profile};
use memlens_profile::Frame;
use std::collections::HashMap;
use std::path::Path;

/// What the flame graph weighs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flame {
    /// Bytes allocated, by allocation call stack.
    Allocations,
    /// Estimated accesses (samples x period), by object and access site.
    Accesses,
}

/// A stack root first, frames as `function (file:line)`; `;` would split them.
fn folded(frames: &[Frame]) -> Vec<String> {
    frames
        .iter()
        .rev()
        .map(|f| analysis::code_label(&f.function, &f.file, f.line, &f.module).replace(';', ","))
        .collect()
}

pub fn plot_flame(p: &Profile, what: Flame, out: &Path) -> Result<(), PlotError> {
    let mut weights: HashMap<String, u64> = HashMap::new();
    let stack_of = |pid: u32, id: u64| {
        p.stacks
            .get(&(pid, id))
            .map_or_else(Vec::new, |f| folded(f))
    };
    let (title, unit) = match what {
        Flame::Allocations => {
            // Heap blocks by their sites' sums, mappings by their rows.
            let heap = (p.sites.iter()).map(|s| (s.pid, s.stack_id, "heap block", s.bytes));
            let mapped = (p.allocations.iter())
                .filter(|a| a.kind == "mmap")
                .map(|a| (a.pid, a.stack_id, "mapping", a.est_bytes));
            for (pid, stack_id, what, bytes) in heap.chain(mapped) {
                let mut frames = stack_of(pid, stack_id);
                if frames.is_empty() {
                    frames.push(format!("[{what} without a recorded stack]"));
                }
                *weights.entry(frames.join(";")).or_default() += bytes.round() as u64;
            }
            (
                "bytes allocated by call stack (measured; sampled blocks scaled)",
                "bytes",
            )
        }
        Flame::Accesses => {
            if p.samples.is_empty() {
                return Err(PlotError(
                    "this profile has no access samples: build the program with `memlens cc` and record it again".into(),
                ));
            }
            let objects = analysis::data_objects(p);
            let period = p.meta.settings.access_period.max(1);
            analysis::attribute(p, &objects, |i, hit, _| {
                let s = &p.samples[i];
                let mut frames = match hit {
                    Some(h) => {
                        let o = &objects.list[h.object];
                        let mut f = stack_of(o.pid, o.stack_id);
                        f.push(format!("[{}]", o.name.replace(';', ",")));
                        f
                    }
                    None => vec!["[unknown object]".to_string()],
                };
                // The access's calling context, root first, its last frame
                // the access itself (DrCCTProf's data-centric tree); the
                // access site alone where samples carry no context.
                let mut context = stack_of(s.pid, s.stack_id);
                let site = context
                    .pop()
                    .unwrap_or_else(|| analysis::location_label(p, s.pid, s.pc).replace(';', ","));
                frames.extend(context);
                let kind = if s.is_store { "store at" } else { "load at" };
                frames.push(format!("{kind} {site}"));
                *weights.entry(frames.join(";")).or_default() += period;
            });
            (
                "accesses by object (under its allocation stack) and code (sampled and scaled)",
                "accesses",
            )
        }
    };
    let mut lines: Vec<String> = weights
        .into_iter()
        .filter(|(_, w)| *w > 0)
        .map(|(stack, w)| format!("{stack} {w}"))
        .collect();
    lines.sort();
    if lines.is_empty() {
        return Err(PlotError(
            "nothing to draw: the profile has no recorded allocations".into(),
        ));
    }
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_string();
    options.count_name = unit.to_string();
    let file =
        std::fs::File::create(out).map_err(|e| PlotError(format!("{}: {e}", out.display())))?;
    inferno::flamegraph::from_lines(
        &mut options,
        lines.iter().map(String::as_str),
        std::io::BufWriter::new(file),
    )
    .map_err(|e| PlotError(format!("drawing the flame graph failed: {e}")))
}
