//! `memlens record --live`: a status line while the program runs, from the
//! same per-tick readings the timeline records: resident set and live heap
//! summed over the traced processes, and the exact bandwidth of instrumented
//! code since the last line. On a terminal the line is redrawn in place;
//! otherwise one line per update is written (logs, pipes).

use memlens_profile::human_bytes;
use memlens_rawlog as raw;
use std::io::{IsTerminal, Write};

/// How often the line changes.
const EVERY_NS: u64 = 500_000_000;

pub struct Live {
    start_ns: u64,
    last_ns: u64,
    /// Exact bytes read and written at the last line.
    last_bytes: (u64, u64),
    terminal: bool,
    drawn: bool,
}

impl Live {
    pub fn new(start_ns: u64) -> Live {
        Live {
            start_ns,
            last_ns: start_ns,
            last_bytes: (0, 0),
            terminal: std::io::stderr().is_terminal(),
            drawn: false,
        }
    }

    /// One tick's readings (a timeline record per traced process).
    pub fn update(&mut self, time: u64, records: &[raw::Timeline]) {
        if time < self.last_ns + EVERY_NS {
            return;
        }
        let sum = |f: fn(&raw::Timeline) -> u64| records.iter().map(f).sum::<u64>();
        let (read, written) = (sum(|t| t.bytes_read), sum(|t| t.bytes_written));
        let heap = sum(raw::Timeline::heap_live);
        let secs = (time - self.last_ns) as f64 / 1e9;
        let rate = |now: u64, then: u64| {
            format!("{}/s", human_bytes(now.saturating_sub(then) as f64 / secs))
        };
        let mut line = format!(
            "memlens: {:7.1} s  resident {:>10}  heap {:>10}",
            (time - self.start_ns) as f64 / 1e9,
            human_bytes(sum(|t| t.rss) as f64),
            human_bytes(heap as f64),
        );
        if read + written > 0 {
            line += &format!(
                "  read {:>11}  written {:>11} (exact)",
                rate(read, self.last_bytes.0),
                rate(written, self.last_bytes.1)
            );
        }
        line += &format!(
            "  {} process{}",
            records.len(),
            if records.len() == 1 { "" } else { "es" }
        );
        let mut err = std::io::stderr().lock();
        let _ = if self.terminal {
            write!(err, "\r\x1b[2K{line}")
        } else {
            writeln!(err, "{line}")
        };
        let _ = err.flush();
        self.drawn = true;
        self.last_ns = time;
        self.last_bytes = (read, written);
    }

    /// Ends the redrawn line so the summary starts on its own.
    pub fn finish(&mut self) {
        if self.terminal && self.drawn {
            eprintln!();
        }
    }
}
