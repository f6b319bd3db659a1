//! Reaping the run's processes (memlens is their subreaper): each exit's
//! status and usage, looked at before the zombie goes.

use crate::config::TargetExit;
use crate::sampler::Sampler;
use crate::Result;
use std::time::Duration;

fn sigchld_set() -> libc::sigset_t {
    // SAFETY: initialising a local signal set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        set
    }
}

pub(crate) fn block_sigchld(block: bool) {
    let set = sigchld_set();
    let how = if block {
        libc::SIG_BLOCK
    } else {
        libc::SIG_UNBLOCK
    };
    // SAFETY: changes this thread's mask only.
    unsafe { libc::pthread_sigmask(how, &set, std::ptr::null_mut()) };
}

/// Sleeps until `timeout` passes or a child changes state.
pub(crate) fn wait_for_child(timeout: Duration) {
    let set = sigchld_set();
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: valid set and timeout; the signal information is not needed.
    unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &ts) };
}

pub(crate) enum Reaped {
    Exits(Vec<(i32, TargetExit)>),
    NoChildren,
}

pub(crate) fn reap(sampler: &mut Sampler) -> Result<Reaped> {
    let mut exits = Vec::new();
    loop {
        // Looked at before it is reaped: a zombie's /proc/PID/stat still
        // holds the process's final counts.
        // SAFETY: zeroed siginfo is a valid out value; plain waitid.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
        if unsafe { libc::waitid(libc::P_ALL, 0, &mut info, flags) } < 0 {
            return Ok(if exits.is_empty() {
                Reaped::NoChildren
            } else {
                Reaped::Exits(exits)
            });
        }
        // SAFETY: waitid filled in a child's state (or left the pid 0).
        let pid = unsafe { info.si_pid() };
        if pid == 0 {
            return Ok(Reaped::Exits(exits));
        }
        sampler.counters.reaping(pid as u32);
        let mut status = 0;
        // SAFETY: zeroed rusage is a valid out value.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: plain wait4 of the child just seen ended, with valid out pointers.
        if unsafe { libc::wait4(pid, &mut status, 0, &mut usage) } != pid {
            return Ok(Reaped::Exits(exits));
        }
        let exit = if libc::WIFSIGNALED(status) {
            TargetExit::Signal(libc::WTERMSIG(status))
        } else {
            TargetExit::Code(libc::WEXITSTATUS(status))
        };
        sampler.record_usage(pid as u32, &usage);
        sampler.record_exit(pid as u32, exit);
        exits.push((pid, exit));
    }
}
