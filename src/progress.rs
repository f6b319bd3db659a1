//! What a long step is doing, on standard error, from indicatif: a spinner
//! naming the stage with its elapsed time, or a bar with the share done and
//! the time left when the step can count its work. It is drawn only on a
//! terminal (so logs, pipes and tests see nothing of it) and is cleared when
//! the step ends, leaving the command's own output as it was.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::time::Duration;

/// Runs `work` under a spinner saying `what`.
pub fn step<T>(what: &str, work: impl FnOnce() -> T) -> T {
    let bar = start(what, "{spinner} memlens: {msg} ({elapsed})");
    let out = work();
    bar.finish_and_clear();
    out
}

/// Runs `work` under a bar saying `what`; `work` reports (done, total) units.
pub fn bar<T>(what: &str, work: impl FnOnce(&dyn Fn(u64, u64)) -> T) -> T {
    let bar = start(
        what,
        "{spinner} memlens: {msg} [{bar:30}] {percent:>3}% ({elapsed}, {eta} left)",
    );
    let out = work(&|done, total| {
        bar.set_length(total);
        bar.set_position(done);
    });
    bar.finish_and_clear();
    out
}

fn start(what: &str, template: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(10));
    bar.set_style(
        ProgressStyle::with_template(template)
            .expect("a valid template")
            .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    // Drawn once now, then redrawn by indicatif's ticker while the step runs.
    // Off a terminal nothing is drawn, and no ticker thread is started: its
    // stop and join cost `memlens record` about 3 ms after the program.
    if !bar.is_hidden() {
        bar.tick();
        bar.enable_steady_tick(Duration::from_millis(100));
    }
    bar
}
