//! The memlens profile directory: one Parquet file per table and `meta.json`.
//!
//! Each table is declared once with [`table!`], which gives its row struct, its
//! Arrow schema and both conversions; the README's schema section lists the same
//! columns. Any Arrow tool (pandas, polars, DuckDB, DataFusion, Spark) reads them.

mod backend;
mod columns;
mod dir;
mod live;
mod loaded;
mod machine;
mod meta;
mod names;
mod table_files;
mod tables;
#[cfg(feature = "testing")]
pub mod testing;
mod thinning;

pub use backend::Backend;
pub use columns::ColumnType;
pub use dir::*;
pub use live::{LiveSite, LiveView};
pub use loaded::{merge, Only, Profile};
pub use machine::*;
/// The memory level that served an access, as every backend and the cache
/// model code it.
pub use memlens_rawlog::level::MemLevel;
pub use meta::*;
pub use names::*;
pub use table_files::*;
pub use tables::*;
pub use thinning::Thinned;

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// (Its cause is told in words: not a `source` for a chain to repeat.)
    #[error("{path}: {}", error_words(.cause))]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
    /// A file made from a profile (a report, plot or export) not written.
    /// (Its cause is told in words: not a `source` for a chain to repeat.)
    #[error("cannot write {path}: {}; choose a path in a directory you can write", io_words(.cause))]
    Output {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{path}: cannot make this directory: {}; give -o a directory you can write", error_words(.cause))]
    CreateDir {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{path}: not a readable Parquet table ({detail}); re-run `memlens record` or restore the file")]
    Parquet { path: PathBuf, detail: String },
    #[error("{path}: {detail}")]
    Format { path: PathBuf, detail: String },
    #[error("{path}: cannot be written ({detail}); make room, then `memlens finalize` the profile directory: its raw logs are kept")]
    Write { path: PathBuf, detail: String },
    #[error("{path}: belongs to another user (uid {owner}); write the profile into a directory of yours with -o")]
    NotOwned { path: PathBuf, owner: u32 },
    #[error("{0}: another memlens is writing this profile; wait for it, or choose another directory with -o")]
    Busy(PathBuf),
    #[error(
        "{0}: missing: the profile is incomplete; restore the file, or re-run `memlens record`"
    )]
    MissingTable(PathBuf),
    #[error("{0}: no memlens profile here (no meta.json and no raw/ logs); give the directory `memlens record` printed")]
    NotAProfile(PathBuf),
    #[error("{0}: is a symbolic link; memlens does not write through links: give the directory it points to with -o")]
    Link(PathBuf),
    #[error("{0}: exists and is not a directory; choose another name with -o")]
    NotADirectory(PathBuf),
    #[error("{0}: not a regular file (a link, FIFO, device or directory stands in its place); a profile holds only regular files: restore it, or re-run `memlens record`")]
    NotARegularFile(PathBuf),
    #[error("{path}: {size} bytes, larger than any memlens writes ({limit}); restore the file, or re-run `memlens record`")]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
    },
}

pub type Result<T> = std::result::Result<T, ProfileError>;

/// The file name of memlens' runtime library: its code and variables are
/// never the program's (no frame of a stack, no static object).
pub const RUNTIME_FILE: &str = "libmemlens_runtime.so";
