//! The process state memlens received from whoever started it, passed on
//! unchanged to the program it starts: the blocked signals, the ignored ones
//! and which of the standard descriptors were closed. A shell's `trap '' PIPE`,
//! a daemon's closed stdin and a parent's signal mask reach the program as
//! they would without memlens.
//!
//! memlens' own start changes that state before `main` (Rust's runtime
//! ignores SIGPIPE and opens /dev/null on a closed standard descriptor), and
//! `record` blocks SIGCHLD for itself, so it is read by [`capture`], which the
//! binary runs as a constructor, before any of that.

use std::os::unix::process::CommandExt;
use std::sync::OnceLock;

struct Inherited {
    blocked: libc::sigset_t,
    ignored: libc::sigset_t,
    closed: [bool; 3],
}

static INHERITED: OnceLock<Inherited> = OnceLock::new();

/// Highest signal number Linux defines (`_NSIG - 1`).
const LAST_SIGNAL: i32 = 64;

/// Reads the state memlens was started with; the first call counts. For the
/// binary's `.init_array`, so that it runs before Rust's runtime starts.
pub extern "C" fn capture() {
    INHERITED.get_or_init(read_now);
}

fn read_now() -> Inherited {
    // SAFETY: reads of this thread's mask and of dispositions into locals.
    unsafe {
        let mut blocked: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_SETMASK, std::ptr::null(), &mut blocked);
        let mut ignored: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut ignored);
        for sig in 1..=LAST_SIGNAL {
            let mut action: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut action) == 0
                && action.sa_sigaction == libc::SIG_IGN
            {
                libc::sigaddset(&mut ignored, sig);
            }
        }
        let closed = [0, 1, 2].map(|fd| libc::fcntl(fd, libc::F_GETFD) < 0);
        Inherited {
            blocked,
            ignored,
            closed,
        }
    }
}

impl Inherited {
    /// Puts the state back, in the child between fork and exec: only
    /// async-signal-safe calls. Caught signals need nothing: exec resets them
    /// to their default.
    fn restore(&self) {
        // SAFETY: plain system calls on this process's own signal state and
        // descriptors, each valid whatever the current state.
        unsafe {
            for sig in 1..=LAST_SIGNAL {
                if sig == libc::SIGKILL || sig == libc::SIGSTOP {
                    continue;
                }
                let ignore = libc::sigismember(&self.ignored, sig) == 1;
                let mut now: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, std::ptr::null(), &mut now) != 0 {
                    continue; // one the C library keeps for itself
                }
                if ignore != (now.sa_sigaction == libc::SIG_IGN) {
                    let mut action: libc::sigaction = std::mem::zeroed();
                    action.sa_sigaction = if ignore { libc::SIG_IGN } else { libc::SIG_DFL };
                    libc::sigaction(sig, &action, std::ptr::null_mut());
                }
            }
            for (fd, &closed) in self.closed.iter().enumerate() {
                if closed {
                    libc::close(fd as i32);
                }
            }
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.blocked, std::ptr::null_mut());
        }
    }
}

/// Makes `cmd` start its program with the state memlens inherited. Without
/// [`capture`] run first (a library test), the state now is taken instead.
pub fn pass_on(cmd: &mut std::process::Command) {
    let inherited: &'static Inherited = INHERITED.get_or_init(read_now);
    // SAFETY: `restore` makes only async-signal-safe calls.
    unsafe {
        cmd.pre_exec(move || {
            inherited.restore();
            Ok(())
        })
    };
}
