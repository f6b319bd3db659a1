//! `memlens plot flame`: flame graphs (SVG, drawn by inferno) of where memory
//! was allocated, by call stack and bytes, and of where it was accessed:
//! each sample under its object's allocation stack, then the object, then the
//! calling context of the code that touched it (a data-centric view, as
//! DrCCTProf's).

use crate::export::collapsed;
use crate::plot::PlotData;
use crate::stacks::{Measure, Slices, Stacks};
use crate::PlotError;
use std::path::Path;

/// What the flame graph weighs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flame {
    /// The stacks of one measure: allocation stacks weighed by an
    /// allocation measure (bytes or blocks allocated, bytes at the heap's
    /// peak, leaks, temporaries), or samples (or samples x period) by object
    /// and access site.
    Weighed(Measure),
    /// Estimated loads by the memory level that served them, then object
    /// and access site.
    LoadsByLevel,
}

pub fn plot_flame(d: &PlotData, what: Flame, out: &Path) -> Result<(), PlotError> {
    if !out
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("svg"))
    {
        return Err(PlotError(format!(
            "{}: a flame graph is an SVG image; use a .svg file name",
            out.display()
        )));
    }
    // Drawn before the file is made: a profile with nothing to draw leaves
    // no empty file behind.
    let (stacks, measure, title) = flame_stacks(d, what, None)?;
    let svg = draw_flame(&stacks, measure, &title)?;
    memlens_profile::write_private_file(out, &svg).map_err(|e| PlotError(e.to_string()))
}

/// What a flame graph of `what` weighs: its stacks (split by `slices` of
/// time if given), the measure, its title.
pub fn flame_stacks(
    d: &PlotData,
    what: Flame,
    slices: Option<Slices>,
) -> Result<(Stacks, Measure, String), PlotError> {
    let stacks = match what {
        Flame::LoadsByLevel => Stacks::loads_by_level(d, slices),
        Flame::Weighed(measure) => Stacks::sliced(d, measure, slices),
    }
    .map_err(PlotError)?;
    let (measure, title) = match what {
        Flame::Weighed(measure) => (measure, flame_title(measure)),
        Flame::LoadsByLevel => (
            Measure::Accesses,
            "loads by the memory level that served them, then object and code (sampled and scaled)"
                .into(),
        ),
    };
    Ok((stacks, measure, title))
}

/// The title of a flame graph weighed by `measure`.
pub fn flame_title(measure: Measure) -> String {
    let by = match Measure::ACCESS.contains(&measure) {
        true => "by object (under its allocation stack) and code",
        false => "by call stack",
    };
    format!("{} {by} ({})", measure.what(), measure.how())
}

/// The SVG document of the flame graph.
fn draw_flame(stacks: &Stacks, measure: Measure, title: &str) -> Result<Vec<u8>, PlotError> {
    let lines = collapsed(stacks, measure);
    if lines.is_empty() {
        return Err(PlotError(format!(
            "nothing to draw: the profile has no {}",
            measure.what()
        )));
    }
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_string();
    options.count_name = measure.counted().to_string();
    let mut svg = Vec::new();
    inferno::flamegraph::from_lines(
        &mut options,
        // Frames escaped by `collapsed`: the SVG stays well-formed.
        lines.iter().map(String::as_str),
        &mut svg,
    )
    .map_err(|e| PlotError(format!("drawing the flame graph failed: {e}")))?;
    Ok(svg)
}
