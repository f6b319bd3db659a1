//! The allocator underneath the hooks: each hooked function forwards to the next
//! definition of its own name (`dlsym(RTLD_NEXT)`), so a program run with jemalloc,
//! tcmalloc or mimalloc preloaded keeps using it, exactly as it would without
//! memlens. Block sizes come from that allocator's `malloc_usable_size`; only when
//! the allocator is glibc's is the size read inline from the chunk header.
//!
//! `dlsym` may itself allocate: while the resolving thread is inside it, its
//! requests are served from a small static arena whose blocks are never freed.

use core::ffi::c_void;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU8, Ordering};

extern "C" {
    fn __libc_malloc(size: usize) -> *mut c_void;
    fn __libc_calloc(n: usize, size: usize) -> *mut c_void;
    fn __libc_realloc(p: *mut c_void, size: usize) -> *mut c_void;
    fn __libc_free(p: *mut c_void);
    fn __libc_memalign(align: usize, size: usize) -> *mut c_void;
    fn __libc_valloc(size: usize) -> *mut c_void;
    fn __libc_pvalloc(size: usize) -> *mut c_void;
}

/// The functions forwarded, in the order of `NEXT`.
#[derive(Clone, Copy)]
#[repr(usize)]
enum Fn {
    Malloc,
    Calloc,
    Realloc,
    Free,
    Memalign,
    AlignedAlloc,
    PosixMemalign,
    Valloc,
    Pvalloc,
    UsableSize,
}

const NAMES: [&core::ffi::CStr; 10] = [
    c"malloc",
    c"calloc",
    c"realloc",
    c"free",
    c"memalign",
    c"aligned_alloc",
    c"posix_memalign",
    c"valloc",
    c"pvalloc",
    c"malloc_usable_size",
];

/// Defines, for each forwarded function, its slot's caller in `next`, its
/// stand-in before the lookup in `lazy`, and in `fallback` what serves it
/// while the resolving thread is inside `dlsym` (and after, if nothing
/// defines the name). A slot holds its `lazy` stand-in until [`resolve`]
/// stores the next definition: the hooks call through a slot without testing
/// it, as a PLT entry does.
macro_rules! forwarded {
    ($($slot:ident fn $name:ident($($a:ident: $t:ty),*) -> $r:ty { $($fallback:tt)* })*) => {
        static NEXT: [AtomicPtr<()>; 10] = [$(AtomicPtr::new(lazy::$name as *mut ())),*];

        /// What each slot holds when no library defines its name.
        const FALLBACK: [*mut (); 10] = [$(fallback::$name as *mut ()),*];

        /// The next definitions, called through their slots.
        pub(crate) mod next {
            use super::*;
            $(
                #[inline(always)]
                pub fn $name($($a: $t),*) -> $r {
                    let p = NEXT[Fn::$slot as usize].load(Ordering::Relaxed);
                    // SAFETY: a slot holds a function of this signature: the
                    // next definition of this C function, or its stand-in.
                    unsafe {
                        let f: unsafe extern "C" fn($($t),*) -> $r = core::mem::transmute(p);
                        f($($a),*)
                    }
                }
            )*
        }

        mod lazy {
            use super::*;
            $(
                pub(super) unsafe extern "C" fn $name($($a: $t),*) -> $r {
                    if resolving_here() {
                        return fallback::$name($($a),*);
                    }
                    resolve();
                    next::$name($($a),*)
                }
            )*
        }

        mod fallback {
            use super::*;
            $(
                #[allow(unused_variables)]
                pub(super) unsafe extern "C" fn $name($($a: $t),*) -> $r { $($fallback)* }
            )*
        }
    };
}

forwarded! {
    Malloc fn malloc(size: usize) -> *mut c_void { arena::alloc(size, 16) }
    Calloc fn calloc(n: usize, size: usize) -> *mut c_void {
        match n.checked_mul(size) {
            // Arena memory is static and never reused: already zero.
            Some(total) => arena::alloc(total, 16),
            None => core::ptr::null_mut(),
        }
    }
    // Only the arena's and glibc's blocks (made before the runtime started)
    // can exist before the lookup.
    Realloc fn realloc(p: *mut c_void, size: usize) -> *mut c_void { __libc_realloc(p, size) }
    // A block of unknown origin is kept rather than risk the wrong
    // allocator's free.
    Free fn free(p: *mut c_void) -> () {}
    Memalign fn memalign(align: usize, size: usize) -> *mut c_void { arena::alloc(size, align) }
    AlignedAlloc fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
        arena::alloc(size, align)
    }
    PosixMemalign fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> i32 {
        let p = arena::alloc(size, align);
        if p.is_null() {
            return libc::ENOMEM;
        }
        *out = p;
        0
    }
    Valloc fn valloc(size: usize) -> *mut c_void { arena::alloc(size, 4096) }
    Pvalloc fn pvalloc(size: usize) -> *mut c_void {
        arena::alloc(size.next_multiple_of(4096), 4096)
    }
    UsableSize fn usable_size(p: *mut c_void) -> usize { 0 }
}

const UNRESOLVED: u8 = 0;
const RESOLVING: u8 = 1;
const RESOLVED: u8 = 2;
static STATE: AtomicU8 = AtomicU8::new(UNRESOLVED);
static RESOLVER: AtomicU32 = AtomicU32::new(0);
/// The next malloc is glibc's: usable sizes are read from chunk headers.
static GLIBC: AtomicBool = AtomicBool::new(true);
/// Sizes of the next allocator's blocks are known (glibc, or its own
/// `malloc_usable_size`); else the exact heap counters cannot be kept.
static SIZES_KNOWN: AtomicBool = AtomicBool::new(true);

/// The allocator is glibc's.
pub fn is_glibc() -> bool {
    GLIBC.load(Ordering::Relaxed)
}

/// Looks every definition up (once; other threads wait for the first).
pub fn resolve() {
    if STATE.load(Ordering::Acquire) == RESOLVED {
        return;
    }
    let me = crate::sys::gettid();
    if STATE
        .compare_exchange(UNRESOLVED, RESOLVING, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        // Someone else resolves; the resolving thread itself never gets here
        // (its nested calls see RESOLVING and use the arena).
        while STATE.load(Ordering::Acquire) != RESOLVED && RESOLVER.load(Ordering::Acquire) != me {
            core::hint::spin_loop();
        }
        return;
    }
    RESOLVER.store(me, Ordering::Release);
    let glibc = [
        __libc_malloc as *const () as usize,
        __libc_calloc as *const () as usize,
        __libc_realloc as *const () as usize,
        __libc_free as *const () as usize,
        __libc_memalign as *const () as usize,
        __libc_memalign as *const () as usize,
        0,
        __libc_valloc as *const () as usize,
        __libc_pvalloc as *const () as usize,
        0,
    ];
    let mut found = [0usize; 10];
    for (f, name) in found.iter_mut().zip(NAMES) {
        // SAFETY: dlsym with a NUL-terminated name; nested allocations use the arena.
        *f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
    }
    // Not by __libc_malloc: tcmalloc defines that name too.
    let libc_object = object_of(libc::getpid as *const () as usize);
    let malloc = found[Fn::Malloc as usize];
    let is_glibc = malloc == 0 || object_of(malloc) == libc_object;
    for (i, slot) in NEXT.iter().enumerate() {
        let f = [found[i], glibc[i]].into_iter().find(|&f| f != 0);
        slot.store(f.map_or(FALLBACK[i], |f| f as *mut ()), Ordering::Relaxed);
    }
    GLIBC.store(is_glibc, Ordering::Relaxed);
    // Another allocator without malloc_usable_size of its own would be handed
    // glibc's, which reads a chunk header that block does not have.
    let usable = found[Fn::UsableSize as usize];
    SIZES_KNOWN.store(
        is_glibc || (usable != 0 && object_of(usable) != libc_object),
        Ordering::Relaxed,
    );
    STATE.store(RESOLVED, Ordering::Release);
}

/// The base address of the loaded object defining the code at `addr`.
pub(crate) fn object_of(addr: usize) -> usize {
    // SAFETY: dladdr fills a local struct and does not allocate.
    unsafe {
        let mut info: libc::Dl_info = core::mem::zeroed();
        if libc::dladdr(addr as *const c_void, &mut info) == 0 {
            return 0;
        }
        info.dli_fbase as usize
    }
}

/// Whether the program's malloc calls reach the loaded object at `base`:
/// the global scope's first definition of malloc is its. `dlsym` gives a
/// non-PIE executable's canonical PLT entry for malloc instead (an undefined
/// symbol with an address, there for function pointers to compare equal),
/// whose calls go on to the first definition after the executable: then
/// `base` must be the first object loaded after it.
pub(crate) fn malloc_reaches(base: usize) -> bool {
    // SAFETY: dlsym with a NUL-terminated name; dladdr1 fills locals and
    // points `symbol` at the loader's symbol table entry.
    unsafe {
        let first = libc::dlsym(libc::RTLD_DEFAULT, c"malloc".as_ptr());
        if object_of(first as usize) == base {
            return true;
        }
        let mut info: libc::Dl_info = core::mem::zeroed();
        let mut symbol: *const libc::Elf64_Sym = core::ptr::null();
        const RTLD_DL_SYMENT: i32 = 1;
        let found = libc::dladdr1(
            first,
            &mut info,
            &mut symbol as *mut _ as *mut *mut c_void,
            RTLD_DL_SYMENT,
        );
        let canonical_plt = found != 0 && !symbol.is_null() && (*symbol).st_shndx == 0;
        canonical_plt && crate::modules::first_after_executable() == base as u64
    }
}

/// Whether the exact heap counters can be kept (see `SIZES_KNOWN`).
pub fn sizes_known() -> bool {
    resolve();
    SIZES_KNOWN.load(Ordering::Relaxed)
}

/// The calling thread is inside `dlsym` looking the definitions up: its
/// requests go to the arena.
fn resolving_here() -> bool {
    STATE.load(Ordering::Acquire) == RESOLVING
        && RESOLVER.load(Ordering::Acquire) == crate::sys::gettid()
}

pub use next::{aligned_alloc, calloc, malloc, memalign, posix_memalign, pvalloc, valloc};

#[inline(always)]
pub fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    if arena::owns(p) {
        return arena::realloc(p, size);
    }
    next::realloc(p, size)
}

#[inline(always)]
pub fn free(p: *mut c_void) {
    if !arena::owns(p) {
        next::free(p);
    }
}

/// [`free`] of a block the allocator made (not the arena's): the hooks' fast
/// path.
#[inline(always)]
pub fn free_heap_block(p: *mut c_void) {
    next::free(p);
}

/// The usable size of a live block of the allocator in use; 0 for the arena's
/// blocks and when that allocator cannot tell.
#[inline(always)]
pub fn usable_size(p: *mut c_void) -> usize {
    usable_size_in(is_glibc(), p)
}

/// [`usable_size`] for a hook that has read [`is_glibc`] already.
#[inline(always)]
pub fn usable_size_in(glibc: bool, p: *mut c_void) -> usize {
    if glibc {
        // SAFETY: a live block of glibc's allocator, or of the arena, whose
        // blocks read as glibc chunks of 0 usable bytes.
        return unsafe { glibc_usable_size(p) };
    }
    if arena::owns(p) || !SIZES_KNOWN.load(Ordering::Relaxed) {
        return 0;
    }
    next::usable_size(p)
}

/// A glibc chunk's size field: its size, and flags in the low bits.
const IS_MMAPPED: usize = 0x2;
const FLAG_BITS: usize = 0x7;

/// The usable size of a glibc heap block, read from its chunk header as glibc's
/// own `malloc_usable_size` does, minus that function's call and its check of the
/// next chunk (a second cache line): this runs on every malloc and free.
///
/// # Safety
/// `p` is a live block returned by glibc's allocator or the arena.
#[inline(always)]
pub(crate) unsafe fn glibc_usable_size(p: *mut c_void) -> usize {
    let size_field = *(p as *const usize).sub(1);
    let chunk = size_field & !FLAG_BITS;
    // Header overhead: one size word for heap chunks, two for mmapped ones
    // (IS_MMAPPED, bit 1, shifted to 8 bytes).
    let mmapped_word = (size_field & IS_MMAPPED) << 2;
    chunk.wrapping_sub(core::mem::size_of::<usize>() + mmapped_word)
}

/// [`glibc_usable_size`] of a block in one of glibc's heaps, `None` for an
/// mmapped chunk and for the arena's blocks (which read as one): the free
/// hook's fast path, which leaves both to the generic one.
///
/// # Safety
/// As [`glibc_usable_size`].
#[inline(always)]
pub(crate) unsafe fn glibc_heap_usable_size(p: *mut c_void) -> Option<usize> {
    let size_field = *(p as *const usize).sub(1);
    if size_field & IS_MMAPPED != 0 {
        return None;
    }
    Some((size_field & !FLAG_BITS) - core::mem::size_of::<usize>())
}

/// Static memory for the allocations `dlsym` makes while the definitions are
/// looked up. Blocks are never reused, so they start zeroed.
mod arena {
    use core::ffi::c_void;
    use core::sync::atomic::{AtomicUsize, Ordering};

    const SIZE: usize = 64 * 1024;
    /// A glibc chunk size field of an mmapped chunk of 16 bytes: 0 usable
    /// bytes, and not a heap block.
    const EMPTY_CHUNK: usize = 16 | super::IS_MMAPPED;
    #[repr(C, align(4096))]
    struct Memory(core::cell::UnsafeCell<[u8; SIZE]>);
    // SAFETY: disjoint ranges are handed out by an atomic bump.
    unsafe impl Sync for Memory {}
    static MEMORY: Memory = Memory(core::cell::UnsafeCell::new([0; SIZE]));
    static USED: AtomicUsize = AtomicUsize::new(0);

    fn base() -> usize {
        MEMORY.0.get() as usize
    }

    #[inline(always)]
    pub fn owns(p: *mut c_void) -> bool {
        (p as usize).wrapping_sub(base()) < SIZE
    }

    /// A block whose two words before it hold its size and what a glibc
    /// chunk of 0 usable bytes has as its size field: the hooks read usable
    /// sizes from there without asking first whose block it is.
    pub fn alloc(size: usize, align: usize) -> *mut c_void {
        let align = align.clamp(16, 4096);
        let mut cur = USED.load(Ordering::Relaxed);
        loop {
            let start = (base() + cur + 16).next_multiple_of(align);
            let end = start - base() + size;
            if end > SIZE {
                return core::ptr::null_mut();
            }
            match USED.compare_exchange_weak(cur, end, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => {
                    // SAFETY: `start - 16 .. start` lies in the range just reserved.
                    unsafe {
                        *((start - 16) as *mut usize) = size;
                        *((start - 8) as *mut usize) = EMPTY_CHUNK;
                    }
                    return start as *mut c_void;
                }
                Err(now) => cur = now,
            }
        }
    }

    pub fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
        let q = super::malloc(size);
        if !q.is_null() {
            // SAFETY: `p` is an arena block, its size stored before it.
            unsafe {
                let old = *((p as usize - 16) as *const usize);
                core::ptr::copy_nonoverlapping(p as *const u8, q as *mut u8, old.min(size));
            }
        }
        q
    }
}

/// Says in the log when the heap cannot be followed: another allocator comes
/// before the runtime in symbol lookup (its malloc is not ours), or the one in
/// use cannot tell block sizes.
pub(crate) fn record_faults() {
    if !malloc_reaches(object_of(record_faults as *const () as usize)) {
        crate::log::set_fault(memlens_rawlog::fault::HEAP_NOT_HOOKED);
    }
    if !sizes_known() {
        crate::log::set_fault(memlens_rawlog::fault::HEAP_SIZES_UNKNOWN);
    }
}
