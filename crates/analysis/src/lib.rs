//! Analyses over a loaded profile. Pure functions of the tables: no I/O beyond
//! [`Profile::load`], so every report (text, JSON, plots) reads the same answers.

mod access;
mod capacity;
mod counters;
mod folding;
mod levels;
mod objects;
mod ranks;
mod reuse;
mod sharing;
mod source;

pub use access::*;
pub use capacity::*;
pub use counters::*;
pub use folding::*;
pub use levels::*;
pub use memlens_profile::code_label;

/// A region's name in every output; a process-wide phase is marked, so it
/// never merges with a per-thread region of the same name.
pub fn region_label(r: &memlens_profile::Region) -> String {
    if r.process_wide {
        format!("{} [process]", r.name)
    } else {
        r.name.clone()
    }
}

use memlens_profile::{self as profile, Frame, Profile};
pub use objects::*;
pub use ranks::*;
pub use reuse::*;
pub use sharing::*;
pub use source::*;

/// A 64-bit id (a stack's hash) as a JSON string: readers that hold numbers
/// as doubles (JavaScript, jq) would change any id above 2^53.
pub fn id_as_string<S: serde::Serializer>(id: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(id)
}

/// Where an object was allocated (see [`memlens_profile::SkipFrames::site`]).
#[derive(Clone, Debug, Default, serde::Serialize, schemars::JsonSchema, PartialEq)]
pub struct Site {
    pub function: String,
    pub file: String,
    pub line: u32,
    pub module: String,
}

impl Site {
    pub fn from_frames(frames: &[Frame], skip: &profile::SkipFrames) -> Option<Site> {
        let f = skip.site(frames)?;
        Some(Site {
            function: f.function.clone(),
            file: f.file.clone(),
            line: f.line,
            module: f.module.clone(),
        })
    }

    pub fn label(&self) -> String {
        code_label(&self.function, &self.file, self.line, &self.module)
    }
}
