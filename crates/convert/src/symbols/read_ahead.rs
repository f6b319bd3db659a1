//! Symbolizing while the target runs. Reading a module's DWARF is the
//! finalizer's largest fixed cost (libc's separate debug file, libc6-dbg,
//! takes 35 to 190 ms to decompress and index), and resolving the code
//! addresses of many distinct stacks its largest variable one (12,000 call
//! sites behind one wrapper, a compiler's 38,000 deep stacks). A background
//! thread at the lowest priority does both on the core the program leaves,
//! as the collector sees modules mapped and stacks defined, into a
//! [`Symbolizer`] the finalizer then takes over whole: what was done is not
//! done again, what was not is done by the finalizer as before.

use super::{debug_file, LoadedModule, Symbolizer};
use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

#[derive(Clone, Default)]
pub struct ReadAhead(Arc<Shared>);

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    /// Set when the finalizer takes over: a batch of addresses under way
    /// ends at the next one (a module's DWARF being read is read whole).
    stopping: AtomicBool,
}

impl std::fmt::Debug for ReadAhead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReadAhead")
    }
}

/// What the thread is asked to do.
enum Work {
    /// A module's DWARF read (the code a process maps, from /proc).
    Debug(String),
    /// Code addresses of a module resolved to their frames (return addresses
    /// of the stacks a log defines, instrumented accesses' PCs), reading its
    /// DWARF if they need it.
    Resolve(LoadedModule, Vec<u64>),
}

#[derive(Default)]
struct State {
    /// Modules whose DWARF was asked for: each is read at most once.
    seen: HashSet<String>,
    queue: VecDeque<Work>,
    /// What the thread found; out of its place while the thread works on it.
    found: Option<Box<Symbolizer>>,
    busy: bool,
    /// Debug bytes read so far (see [`ReadAhead::BUDGET`]).
    read_bytes: u64,
    worker: bool,
    stopped: bool,
}

impl ReadAhead {
    /// Debug files read ahead in all, bytes on disk: a program that maps many
    /// large libraries but has frames in few would otherwise hold all their
    /// DWARF; past the budget a module is read when its frames need it.
    const BUDGET: u64 = 256 << 20;

    /// Queues the reading of a module's DWARF (each path once).
    pub fn request_debug(&self, path: &str) {
        self.queue(|st| {
            st.seen
                .insert(path.to_string())
                .then(|| Work::Debug(path.to_string()))
        });
    }

    /// Queues the resolving of code addresses (return addresses) of module `m`.
    pub fn resolve(&self, m: &LoadedModule, addresses: Vec<u64>) {
        self.queue(|_| (!addresses.is_empty()).then(|| Work::Resolve(m.clone(), addresses)));
    }

    fn queue(&self, work: impl FnOnce(&mut State) -> Option<Work>) {
        let (lock, wake) = (&self.0.state, &self.0.wake);
        let mut st = lock.lock().unwrap_or_else(|e| e.into_inner());
        if st.stopped {
            return;
        }
        let Some(work) = work(&mut st) else {
            return;
        };
        st.queue.push_back(work);
        if !st.worker {
            st.worker = true;
            let this = self.clone();
            let spawned = std::thread::Builder::new()
                .name("memlens-symbols".into())
                .spawn(move || this.work());
            st.worker = spawned.is_ok();
        }
        wake.notify_all();
    }

    fn work(&self) {
        // SAFETY: lowers this thread's own priority (a tid names one thread).
        unsafe {
            libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19);
        }
        let (lock, wake) = (&self.0.state, &self.0.wake);
        let mut st = lock.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if st.stopped {
                return;
            }
            let Some(work) = st.queue.pop_front() else {
                st = wake.wait(st).unwrap_or_else(|e| e.into_inner());
                continue;
            };
            let mut found = st.found.take().unwrap_or_default();
            st.busy = true;
            let mut budget = Self::BUDGET.saturating_sub(st.read_bytes);
            let before = budget;
            drop(st);
            match work {
                Work::Debug(path) => {
                    read_debug_within(&mut found, &path, &mut budget);
                }
                Work::Resolve(m, addresses) => {
                    for addr in addresses {
                        if self.0.stopping.load(Ordering::Relaxed) {
                            break;
                        }
                        resolve_within(&mut found, &m, addr, &mut budget);
                    }
                }
            }
            st = lock.lock().unwrap_or_else(|e| e.into_inner());
            st.busy = false;
            st.found = Some(found);
            st.read_bytes += before - budget;
            wake.notify_all();
        }
    }

    /// What the thread found, once it is done with the work under way; it
    /// does nothing more.
    pub(super) fn take(&self) -> Symbolizer {
        let mut st = self.halt();
        while st.busy {
            st = self.0.wake.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st.found.take().map_or_else(Symbolizer::default, |s| *s)
    }

    /// Whether work is queued or under way.
    #[cfg(test)]
    pub(super) fn pending(&self) -> bool {
        let st = self.0.state.lock().unwrap_or_else(|e| e.into_inner());
        st.busy || !st.queue.is_empty()
    }

    /// Ends the thread after the work under way; drops what it found.
    pub fn stop(&self) {
        self.halt().found = None;
    }

    /// Stops the thread taking work (a batch under way ends at its next
    /// address; an idle thread wakes and ends); the state, locked.
    fn halt(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.stopping.store(true, Ordering::Relaxed);
        let mut st = self.0.state.lock().unwrap_or_else(|e| e.into_inner());
        st.stopped = true;
        st.queue.clear();
        self.0.wake.notify_all();
        st
    }
}

/// Reads a module's DWARF if its file fits in `budget` (taken from it).
fn read_debug_within(found: &mut Symbolizer, path: &str, budget: &mut u64) -> bool {
    if found.has_loader(path) {
        return true;
    }
    let bytes = std::fs::metadata(debug_file(path)).map_or(0, |m| m.len());
    if bytes > *budget {
        return false;
    }
    *budget -= bytes;
    found.loader(path);
    true
}

/// Resolves one return address of `m`, unless it needs DWARF past `budget`
/// (the C library's entry functions need its symbol table alone).
fn resolve_within(found: &mut Symbolizer, m: &LoadedModule, addr: u64, budget: &mut u64) {
    let module = std::slice::from_ref(m);
    if found.is_entry_function(m, addr) || read_debug_within(found, &m.path, budget) {
        found.frames(module, addr, true);
    }
}
