//! Access samples written to the profile while the program runs. The
//! collector follows every image's log for the debug information's read-ahead
//! anyway; turning its samples into rows there, on a core the program
//! leaves idle, takes them off the finalizer, which otherwise replays them
//! after the program ended (STREAM's 119 000 samples: half of a 20 ms
//! finalize). An image counts as written only once its log was followed to
//! the end after its process ended or exec'd; the finalizer replays the
//! samples of any other image itself.

use crate::image::TimeWindow;
use crate::replay::sample_row;
use crate::Result;
use memlens_profile::{AccessSample, TableWriter};
use memlens_rawlog::{self as raw, tag, RawRecord};
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// The run's samples table, open while it runs.
pub struct LiveSamples {
    writer: TableWriter<AccessSample>,
    /// The run's start, which row times count from.
    t0: u64,
    images: HashMap<PathBuf, ImageSamples>,
}

/// An image's samples written so far.
#[derive(Default)]
pub(crate) struct ImageSamples {
    /// The code addresses and call stacks they name, for the finalizer to
    /// symbolize.
    pub(crate) pcs: BTreeSet<u64>,
    pub(crate) stacks: BTreeSet<u64>,
    /// Every sample of the image is written.
    complete: bool,
}

/// One image's log being followed: its samples go to the table.
pub(crate) struct ImageWriter<'a> {
    writer: &'a mut TableWriter<AccessSample>,
    image: &'a mut ImageSamples,
    pid: u32,
    t0: u64,
    window: TimeWindow,
}

impl LiveSamples {
    /// Opens the samples table of the profile in `dir`; rows count time from
    /// `t0`.
    pub(crate) fn create(dir: &Path, t0: u64) -> Result<LiveSamples> {
        Ok(LiveSamples {
            writer: TableWriter::create(dir)?,
            t0,
            images: HashMap::new(),
        })
    }

    /// The writer of the image logged to `log` by process `pid`, whose
    /// runtime started at `start_ns`.
    pub(crate) fn image(&mut self, log: &Path, pid: u32, start_ns: u64) -> ImageWriter<'_> {
        ImageWriter {
            writer: &mut self.writer,
            image: self.images.entry(key(log)).or_default(),
            pid,
            t0: self.t0,
            window: TimeWindow::from_start(start_ns),
        }
    }

    /// Whether some of the image's samples are written (its log must then be
    /// followed to its end).
    pub(crate) fn has_rows(&self, log: &Path) -> bool {
        // Every row names its code address.
        self.images
            .get(&key(log))
            .is_some_and(|i| !i.pcs.is_empty())
    }

    /// Every sample of the image logged to `log` is written.
    pub(crate) fn complete(&mut self, log: &Path) {
        self.images.entry(key(log)).or_default().complete = true;
    }

    /// Hands the rows written so far to the encoder: the program ended, and
    /// they are encoded while the finalizer replays the logs (the last
    /// batch, encoded at the finalizer's end, took 2.5 ms of STREAM's 12 ms).
    pub(crate) fn flush(&mut self) {
        self.writer.flush();
    }

    /// The table, for the finalizer to finish, and the images whose samples
    /// it holds whole, by their logs' file names.
    pub(crate) fn into_parts(self) -> (TableWriter<AccessSample>, HashMap<PathBuf, ImageSamples>) {
        let complete = (self.images.into_iter())
            .filter(|(_, i)| i.complete)
            .collect();
        (self.writer, complete)
    }
}

/// An image's key: its log's file name (pid and exec sequence number).
pub(crate) fn key(log: &Path) -> PathBuf {
    log.file_name().map(PathBuf::from).unwrap_or_default()
}

impl ImageWriter<'_> {
    /// A record of the image's thread `tid`: a sample becomes a row, as the
    /// finalizer's replay makes it (a time outside the image's window is a
    /// damaged record, which the finalizer counts).
    pub(crate) fn add(&mut self, tid: u32, rec: &RawRecord<'_>) {
        if rec.tag != tag::SAMPLE {
            return;
        }
        let Some(x) = rec.payload::<raw::Sample>() else {
            return;
        };
        if !self.window.contains(x.time) {
            return;
        }
        self.image.pcs.insert(x.pc);
        if x.stack != 0 {
            self.image.stacks.insert(x.stack);
        }
        self.writer
            .push(sample_row(self.pid, tid, &x, self.t0, None));
    }
}
