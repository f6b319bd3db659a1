//! Annotate a Rust program for memlens. Without the memlens runtime loaded every
//! call is a no-op costing one atomic load: the functions are looked up once with
//! `dlsym` (Rust has no stable weak linkage) and cached.
//!
//! ```no_run
//! let _solve = memlens_api::Region::new(c"solve"); // ends when dropped
//! let grid = vec![0f64; 1 << 20];
//! memlens_api::tag(c"grid", grid.as_ptr().cast(), grid.len() * 8);
//! ```

use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};

const UNRESOLVED: usize = 1;

struct Symbol {
    name: &'static CStr,
    addr: AtomicUsize,
}

impl Symbol {
    const fn new(name: &'static CStr) -> Self {
        Symbol {
            name,
            addr: AtomicUsize::new(UNRESOLVED),
        }
    }

    /// The function's address, or 0 when memlens is not loaded.
    fn get(&self) -> usize {
        let a = self.addr.load(Ordering::Relaxed);
        if a != UNRESOLVED {
            return a;
        }
        // SAFETY: dlsym with a NUL-terminated name.
        let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, self.name.as_ptr()) } as usize;
        self.addr.store(found, Ordering::Relaxed);
        found
    }
}

static REGION_BEGIN: Symbol = Symbol::new(c"memlens_region_begin");
static REGION_END: Symbol = Symbol::new(c"memlens_region_end");
static PHASE_BEGIN: Symbol = Symbol::new(c"memlens_phase_begin");
static PHASE_END: Symbol = Symbol::new(c"memlens_phase_end");
static TAG: Symbol = Symbol::new(c"memlens_tag");
static UNTAG: Symbol = Symbol::new(c"memlens_untag");
static GROUP_BEGIN: Symbol = Symbol::new(c"memlens_group_begin");
static GROUP_END: Symbol = Symbol::new(c"memlens_group_end");

fn call_name(sym: &Symbol, name: &CStr) {
    let f = sym.get();
    if f != 0 {
        // SAFETY: the runtime exports this symbol with this signature.
        let f: extern "C" fn(*const c_char) = unsafe { std::mem::transmute(f) };
        f(name.as_ptr());
    }
}

pub fn region_begin(name: &CStr) {
    call_name(&REGION_BEGIN, name);
}

pub fn region_end(name: &CStr) {
    call_name(&REGION_END, name);
}

/// Starts a phase of the whole process: every thread's accesses count.
pub fn phase_begin(name: &CStr) {
    call_name(&PHASE_BEGIN, name);
}

pub fn phase_end(name: &CStr) {
    call_name(&PHASE_END, name);
}

/// Names [start, start + len) as a data object.
pub fn tag(name: &CStr, start: *const c_void, len: usize) {
    let f = TAG.get();
    if f != 0 {
        // SAFETY: as above.
        let f: extern "C" fn(*const c_char, *const c_void, usize) =
            unsafe { std::mem::transmute(f) };
        f(name.as_ptr(), start, len);
    }
}

pub fn untag(start: *const c_void) {
    let f = UNTAG.get();
    if f != 0 {
        // SAFETY: as above.
        let f: extern "C" fn(*const c_void) = unsafe { std::mem::transmute(f) };
        f(start);
    }
}

/// Every allocation of this thread until [`group_end`] belongs to one object `name`.
pub fn group_begin(name: &CStr) {
    call_name(&GROUP_BEGIN, name);
}

pub fn group_end() {
    let f = GROUP_END.get();
    if f != 0 {
        // SAFETY: as above.
        let f: extern "C" fn() = unsafe { std::mem::transmute(f) };
        f();
    }
}

/// A region that ends when dropped.
pub struct Region(&'static CStr);

impl Region {
    pub fn new(name: &'static CStr) -> Region {
        region_begin(name);
        Region(name)
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        region_end(self.0);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn calls_are_no_ops_without_the_runtime() {
        let _r = super::Region::new(c"test");
        super::tag(c"x", std::ptr::null(), 0);
        super::group_begin(c"g");
        super::group_end();
        assert_eq!(super::REGION_BEGIN.get(), 0);
    }
}
