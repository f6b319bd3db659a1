//! The C library's string and memory routines that read or write the
//! program's data: libc is not instrumented, so `memlens cc` links
//! instrumented code with `--wrap` for each (`WRAPPED_ROUTINES`) and their
//! calls land here. Each counts, exactly, the bytes the routine read and wrote as
//! its result defines them (a strcmp reads both strings up to the first
//! difference or terminator), as bulk traffic sampled onto the objects like
//! memcpy's. Routines whose traffic the result does not determine are not
//! counted: qsort's element moves (its comparator's reads are the program's
//! and counted) are named instead, by their calls and the bytes sorted;
//! strstr's scans are not wrapped.

use crate::access::{bulk_begin, bulk_end};
use crate::unwind::return_address;
use core::ffi::{c_char, c_int, c_void};

extern "C" {
    fn memcpy(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void;
    fn memmove(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void;
    fn memset(d: *mut c_void, c: c_int, n: usize) -> *mut c_void;
    fn strlen(s: *const c_char) -> usize;
    fn strnlen(s: *const c_char, max: usize) -> usize;
    fn strcmp(a: *const c_char, b: *const c_char) -> c_int;
    fn strncmp(a: *const c_char, b: *const c_char, n: usize) -> c_int;
    fn memcmp(a: *const c_void, b: *const c_void, n: usize) -> c_int;
    fn bcmp(a: *const c_void, b: *const c_void, n: usize) -> c_int;
    fn strcpy(d: *mut c_char, s: *const c_char) -> *mut c_char;
    fn stpcpy(d: *mut c_char, s: *const c_char) -> *mut c_char;
    fn strncpy(d: *mut c_char, s: *const c_char, n: usize) -> *mut c_char;
    fn strcat(d: *mut c_char, s: *const c_char) -> *mut c_char;
    fn strchr(s: *const c_char, c: c_int) -> *mut c_char;
    fn strrchr(s: *const c_char, c: c_int) -> *mut c_char;
    fn memchr(s: *const c_void, c: c_int, n: usize) -> *mut c_void;
    fn strdup(s: *const c_char) -> *mut c_char;
    fn qsort(base: *mut c_void, n: usize, size: usize, cmp: Compare);
    fn qsort_r(base: *mut c_void, n: usize, size: usize, cmp: CompareWith, arg: *mut c_void);
}

type Compare = Option<unsafe extern "C" fn(*const c_void, *const c_void) -> c_int>;
type CompareWith = Option<unsafe extern "C" fn(*const c_void, *const c_void, *mut c_void) -> c_int>;

/// Counts a sort of `n` elements of `size` bytes on the thread: libc moves
/// them, which no counter sees; the report names these calls.
fn count_sort(n: usize, size: usize) {
    if let Some(st) = crate::guard::enter() {
        st.sorts[0] += 1;
        st.sorts[1] += (n as u64).saturating_mul(size as u64);
        crate::guard::leave(st);
    }
}

/// # Safety
/// qsort's contract.
#[no_mangle]
pub unsafe extern "C" fn __wrap_qsort(base: *mut c_void, n: usize, size: usize, cmp: Compare) {
    count_sort(n, size);
    qsort(base, n, size, cmp);
}

/// # Safety
/// qsort_r's contract.
#[no_mangle]
pub unsafe extern "C" fn __wrap_qsort_r(
    base: *mut c_void,
    n: usize,
    size: usize,
    cmp: CompareWith,
    arg: *mut c_void,
) {
    count_sort(n, size);
    qsort_r(base, n, size, cmp, arg);
}

/// Bytes a comparison of `a` and `b` read in each: up to and including the
/// first difference (or, for strings, terminator), at most `limit`.
///
/// # Safety
/// Both are readable for what the compared routine read.
unsafe fn compared(a: *const u8, b: *const u8, limit: usize, strings: bool) -> u64 {
    for i in 0..limit {
        let x = *a.add(i);
        if x != *b.add(i) || (strings && x == 0) {
            return i as u64 + 1;
        }
    }
    limit as u64
}

/// Bytes from `s` to the byte at `found` (included), or `otherwise` when
/// the routine found nothing.
fn through(s: *const c_void, found: *const c_void, otherwise: u64) -> u64 {
    if found.is_null() {
        otherwise
    } else {
        found as u64 - s as u64 + 1
    }
}

/// Declares `__wrap_NAME`: calls the routine, then, when the thread
/// records, counts what `traffic` says it read and wrote.
macro_rules! wrapped {
    ($(#[$doc:meta])* fn $wrap:ident = $real:ident($($arg:ident: $ty:ty),*) -> $ret:ty,
     |$r:ident| $traffic:expr) => {
        $(#[$doc])*
        /// # Safety
        /// The C library routine's contract.
        #[no_mangle]
        pub unsafe extern "C" fn $wrap($($arg: $ty),*) -> $ret {
            let pc = return_address();
            let begin = bulk_begin();
            let $r = $real($($arg),*);
            if let Some(begin) = begin {
                let (read, written): (&[(u64, u64)], Option<(u64, u64)>) = $traffic;
                bulk_end(begin, pc, read, written);
            }
            $r
        }
    };
}

wrapped!(fn __wrap_memcpy = memcpy(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void,
    |_r| (&[(s as u64, n as u64)], Some((d as u64, n as u64))));

wrapped!(fn __wrap_memmove = memmove(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void,
    |_r| (&[(s as u64, n as u64)], Some((d as u64, n as u64))));

wrapped!(fn __wrap_memset = memset(d: *mut c_void, c: c_int, n: usize) -> *mut c_void,
    |_r| (&[], Some((d as u64, n as u64))));

wrapped!(fn __wrap_strlen = strlen(s: *const c_char) -> usize,
    |n| (&[(s as u64, n as u64 + 1)], None));

wrapped!(fn __wrap_strnlen = strnlen(s: *const c_char, max: usize) -> usize,
    |n| (&[(s as u64, (n as u64 + 1).min(max as u64))], None));

wrapped!(fn __wrap_strcmp = strcmp(a: *const c_char, b: *const c_char) -> c_int,
|_r| {
    let n = compared(a.cast(), b.cast(), usize::MAX, true);
    (&[(a as u64, n), (b as u64, n)], None)
});

wrapped!(fn __wrap_strncmp = strncmp(a: *const c_char, b: *const c_char, limit: usize) -> c_int,
|_r| {
    let n = compared(a.cast(), b.cast(), limit, true);
    (&[(a as u64, n), (b as u64, n)], None)
});

wrapped!(fn __wrap_memcmp = memcmp(a: *const c_void, b: *const c_void, limit: usize) -> c_int,
|_r| {
    let n = compared(a.cast(), b.cast(), limit, false);
    (&[(a as u64, n), (b as u64, n)], None)
});

wrapped!(
/// What clang calls for a memcmp whose result is only tested for zero.
fn __wrap_bcmp = bcmp(a: *const c_void, b: *const c_void, limit: usize) -> c_int,
|_r| {
    let n = compared(a.cast(), b.cast(), limit, false);
    (&[(a as u64, n), (b as u64, n)], None)
});

wrapped!(fn __wrap_strcpy = strcpy(d: *mut c_char, s: *const c_char) -> *mut c_char,
|_r| {
    let n = strlen(d) as u64 + 1;
    (&[(s as u64, n)], Some((d as u64, n)))
});

wrapped!(fn __wrap_stpcpy = stpcpy(d: *mut c_char, s: *const c_char) -> *mut c_char,
|end| {
    let n = end as u64 - d as u64 + 1;
    (&[(s as u64, n)], Some((d as u64, n)))
});

wrapped!(fn __wrap_strncpy = strncpy(d: *mut c_char, s: *const c_char, limit: usize) -> *mut c_char,
|_r| {
    // The source up to its terminator (the destination holds it now),
    // the destination padded to `limit`.
    let n = (strnlen(d, limit) as u64 + 1).min(limit as u64);
    (&[(s as u64, n)], Some((d as u64, limit as u64)))
});

wrapped!(fn __wrap_strchr = strchr(s: *const c_char, c: c_int) -> *mut c_char,
    |found| (&[(s as u64, through(s.cast(), found.cast(), strlen(s) as u64 + 1))], None));

wrapped!(fn __wrap_strrchr = strrchr(s: *const c_char, c: c_int) -> *mut c_char,
    |_r| (&[(s as u64, strlen(s) as u64 + 1)], None));

wrapped!(fn __wrap_memchr = memchr(s: *const c_void, c: c_int, limit: usize) -> *mut c_void,
    |found| (&[(s as u64, through(s, found, limit as u64))], None));

wrapped!(fn __wrap_strdup = strdup(s: *const c_char) -> *mut c_char,
|copy| {
    let n = strlen(s) as u64 + 1;
    (&[(s as u64, n)], (!copy.is_null()).then_some((copy as u64, n)))
});

/// strcat reads the destination's string to its end and the source, and
/// writes the source after it: both lengths are taken before the call.
///
/// # Safety
/// strcat's contract.
#[no_mangle]
pub unsafe extern "C" fn __wrap_strcat(d: *mut c_char, s: *const c_char) -> *mut c_char {
    let pc = return_address();
    let begin = bulk_begin();
    let lengths = begin.map(|_| (strlen(d) as u64, strlen(s) as u64 + 1));
    let r = strcat(d, s);
    if let (Some(begin), Some((had, added))) = (begin, lengths) {
        bulk_end(
            begin,
            pc,
            &[(d as u64, had + 1), (s as u64, added)],
            Some((d as u64 + had, added)),
        );
    }
    r
}
