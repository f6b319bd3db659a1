//! What a long step is doing, on standard error: a spinner naming the stage
//! with its elapsed time, from indicatif. It is drawn only on a terminal (so
//! logs, pipes and tests see nothing of it) and is cleared when the step
//! ends, leaving the command's own output as it was.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::time::Duration;

/// Runs `work` under a spinner saying `what`.
pub fn step<T>(what: &str, work: impl FnOnce() -> T) -> T {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(10));
    bar.set_style(
        ProgressStyle::with_template("{spinner} memlens: {msg} ({elapsed})")
            .expect("a valid template"),
    );
    bar.set_message(what.to_string());
    // Drawn once now, then redrawn by indicatif's ticker while the step runs.
    bar.tick();
    bar.enable_steady_tick(Duration::from_millis(100));
    let out = work();
    bar.finish_and_clear();
    out
}
