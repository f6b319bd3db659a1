//! `memlens plot flame`: flame graphs (SVG, drawn by inferno) of where memory
//! was allocated, by call stack and bytes, and of where it was accessed:
//! each sample under its object's allocation stack, then the object, then the
//! calling context of the code that touched it (a data-centric view, as
//! DrCCTProf's).

use crate::export::collapsed;
use crate::stacks::{Measure, Stacks};
use crate::PlotError;
use memlens_profile::Profile;
use std::path::Path;

/// What the flame graph weighs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flame {
    /// Bytes allocated, by allocation call stack.
    Allocations,
    /// Estimated accesses (samples x period), by object and access site.
    Accesses,
    /// Estimated loads by the memory level that served them, then object
    /// and access site.
    LoadsByLevel,
}

pub fn plot_flame(p: &Profile, what: Flame, out: &Path) -> Result<(), PlotError> {
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
    let (stacks, measure, title) = flame_stacks(p, what)?;
    let svg = draw_flame(&stacks, measure, title, None)?;
    memlens_profile::write_private_file(out, &svg).map_err(|e| PlotError(e.to_string()))
}

/// The flame graph as an SVG document in memory, for the HTML report: frames
/// narrower than `min_width` pixels are left out, which bounds its size by
/// the picture's, not by the number of stacks.
pub fn flame_svg(
    (stacks, measure, title): &(Stacks, Measure, &'static str),
    min_width: f64,
) -> Result<String, PlotError> {
    let svg = draw_flame(stacks, *measure, title, Some(min_width))?;
    String::from_utf8(svg).map_err(|e| PlotError(e.to_string()))
}

/// What a flame graph of `what` weighs: its stacks, the measure, its title.
pub fn flame_stacks(
    p: &Profile,
    what: Flame,
) -> Result<(Stacks, Measure, &'static str), PlotError> {
    let (measure, title) = match what {
        Flame::Allocations => (
            Measure::AllocSpace,
            "bytes allocated by call stack (measured; sampled blocks scaled)",
        ),
        Flame::Accesses => (
            Measure::Accesses,
            "accesses by object (under its allocation stack) and code (sampled and scaled)",
        ),
        Flame::LoadsByLevel => (
            Measure::Accesses,
            "loads by the memory level that served them, then object and code (sampled and scaled)",
        ),
    };
    let stacks = match what {
        Flame::LoadsByLevel => Stacks::loads_by_level(p),
        _ => Stacks::of(p, measure),
    }
    .map_err(PlotError)?;
    Ok((stacks, measure, title))
}

/// The SVG document of the flame graph (inferno's minimum frame width
/// unless `min_width` is given).
fn draw_flame(
    stacks: &Stacks,
    measure: Measure,
    title: &str,
    min_width: Option<f64>,
) -> Result<Vec<u8>, PlotError> {
    let lines = collapsed(stacks, measure);
    if lines.is_empty() {
        return Err(PlotError(
            "nothing to draw: the profile has no recorded allocations".into(),
        ));
    }
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_string();
    options.count_name = match measure.name_and_unit().1 {
        "bytes" => "bytes",
        _ => "accesses",
    }
    .to_string();
    if let Some(width) = min_width {
        options.min_width = width;
    }
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
