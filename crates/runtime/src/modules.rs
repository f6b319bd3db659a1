//! Loaded ELF objects, recorded with their load bias so that the collector can
//! symbolize addresses and read static data objects. Rescanned whenever a stack
//! holds an address outside every object already recorded (a dlopen happened).

use crate::sys::{self, SpinLock};
use core::ffi::{c_void, CStr};
use memlens_rawlog as raw;

const MAX_KNOWN: usize = 256;

pub static LOCK: SpinLock = SpinLock::new();

#[derive(Clone, Copy)]
struct Known {
    start: u64,
    end: u64,
    bias: u64,
}

static mut KNOWN: [Known; MAX_KNOWN] = [Known {
    start: 0,
    end: 0,
    bias: 0,
}; MAX_KNOWN];
static mut KNOWN_LEN: usize = 0;

/// True if every address lies in an object already recorded.
pub fn all_known(addrs: &[u64]) -> bool {
    LOCK.lock();
    // SAFETY: KNOWN is only touched under LOCK.
    let known = unsafe { &(&*core::ptr::addr_of!(KNOWN))[..KNOWN_LEN] };
    let ok = addrs
        .iter()
        .all(|&a| known.iter().any(|k| a >= k.start && a < k.end));
    LOCK.unlock();
    ok
}

/// Forgets what was recorded (a forked child starts a new log).
pub fn reset() {
    LOCK.lock();
    // SAFETY: under LOCK.
    unsafe { KNOWN_LEN = 0 };
    LOCK.unlock();
}

struct ScanCtx<'a> {
    emit: &'a mut dyn FnMut(&raw::Module, &[u8]),
    exe: &'a [u8],
}

/// Records every loaded object not yet recorded, through `emit`.
pub fn scan(emit: &mut dyn FnMut(&raw::Module, &[u8])) {
    let mut exe_buf = [0u8; 4096];
    // SAFETY: readlink into a local buffer.
    let n = unsafe {
        libc::readlink(
            c"/proc/self/exe".as_ptr(),
            exe_buf.as_mut_ptr() as *mut libc::c_char,
            exe_buf.len(),
        )
    };
    let exe = if n > 0 {
        &exe_buf[..n as usize]
    } else {
        &[][..]
    };
    let mut ctx = ScanCtx { emit, exe };
    LOCK.lock();
    // SAFETY: the callback only reads the phdr info handed to it.
    unsafe { libc::dl_iterate_phdr(Some(on_object), &mut ctx as *mut ScanCtx as *mut c_void) };
    LOCK.unlock();
}

unsafe extern "C" fn on_object(
    info: *mut libc::dl_phdr_info,
    _size: usize,
    arg: *mut c_void,
) -> i32 {
    let ctx = &mut *(arg as *mut ScanCtx);
    let info = &*info;
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    for i in 0..info.dlpi_phnum as usize {
        let ph = &*info.dlpi_phdr.add(i);
        if ph.p_type == libc::PT_LOAD {
            lo = lo.min(ph.p_vaddr);
            hi = hi.max(ph.p_vaddr + ph.p_memsz);
        }
    }
    if lo >= hi {
        return 0;
    }
    let bias = info.dlpi_addr;
    let (start, end) = (bias.wrapping_add(lo), bias.wrapping_add(hi));
    let own_code = scan as *const () as u64;
    if own_code >= start && own_code < end {
        crate::unwind::set_self_range(start, end);
    }
    let known = &mut *core::ptr::addr_of_mut!(KNOWN);
    if known[..KNOWN_LEN]
        .iter()
        .any(|k| k.start == start && k.bias == bias)
        || KNOWN_LEN == MAX_KNOWN
    {
        return 0;
    }
    known[KNOWN_LEN] = Known { start, end, bias };
    KNOWN_LEN += 1;
    let name: &[u8] = if info.dlpi_name.is_null() {
        &[]
    } else {
        CStr::from_ptr(info.dlpi_name).to_bytes()
    };
    // The main program is listed with an empty name.
    let path = if name.is_empty() { ctx.exe } else { name };
    let m = raw::Module {
        time: sys::now_ns(),
        bias,
        start,
        end,
        path_len: path.len() as u32,
        _pad: 0,
    };
    (ctx.emit)(&m, path);
    0
}

/// The runtime's file name, as a `memlens cc` build's DT_NEEDED entry names it.
const RUNTIME_NEEDED: &[u8] = b"libmemlens_runtime.so";

/// An entry of an ELF64 dynamic section (`Elf64_Dyn`) and the tags read here.
#[repr(C)]
#[derive(Clone, Copy)]
struct DynamicEntry {
    tag: i64,
    value: u64,
}
const DT_NULL: i64 = 0;
const DT_NEEDED: i64 = 1;
const DT_STRTAB: i64 = 5;

/// Calls `visit` with each loaded object's load address and program
/// headers until it returns true; whether one did. No allocation.
fn any_object(visit: &mut dyn FnMut(u64, &[libc::Elf64_Phdr]) -> bool) -> bool {
    extern "C" fn each(info: *mut libc::dl_phdr_info, _size: usize, data: *mut c_void) -> i32 {
        // SAFETY: the loader passes a valid info; `data` is the caller's closure.
        unsafe {
            let info = &*info;
            let visit = &mut *(data as *mut &mut dyn FnMut(u64, &[libc::Elf64_Phdr]) -> bool);
            let headers = core::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize);
            i32::from(visit(info.dlpi_addr, headers))
        }
    }
    let mut visit = visit;
    // SAFETY: the callback only reads the loader's data and calls `visit`.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut visit as *mut _ as *mut c_void) != 0 }
}

/// Whether an object loaded now needs the runtime by name: a `memlens cc`
/// build, whose loads and stores are sampled (every sample then needs the
/// block it landed in). Reads each object's dynamic section.
pub fn instrumented_image() -> bool {
    any_object(&mut |base, headers| {
        let Some(dynamic) = headers.iter().find(|h| h.p_type == libc::PT_DYNAMIC) else {
            return false;
        };
        // SAFETY: the loader maps each object's dynamic section, ended by DT_NULL.
        unsafe {
            let entries = (base + dynamic.p_vaddr) as *const DynamicEntry;
            let (mut strtab, mut n) = (0u64, 0);
            while (*entries.add(n)).tag != DT_NULL {
                if (*entries.add(n)).tag == DT_STRTAB {
                    strtab = (*entries.add(n)).value;
                }
                n += 1;
            }
            // The loader relocates the address in place, except in objects
            // it maps unrelocated (the vDSO).
            if strtab != 0 && strtab < base {
                strtab += base;
            }
            strtab != 0
                && (0..n).any(|k| {
                    let e = *entries.add(k);
                    e.tag == DT_NEEDED
                        && CStr::from_ptr((strtab + e.value) as *const libc::c_char).to_bytes()
                            == RUNTIME_NEEDED
                })
        }
    })
}

/// The load address of the first object loaded after the executable (the
/// vDSO aside): the first of LD_PRELOAD's.
pub fn first_after_executable() -> u64 {
    // SAFETY: getauxval reads the auxiliary vector.
    let vdso = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) };
    let (mut seen, mut found) = (0, 0);
    any_object(&mut |base, _| {
        seen += 1;
        if seen > 1 && base != vdso {
            found = base;
        }
        found != 0
    });
    found
}

/// The executable segment of the loaded object holding `addr`: [start, end),
/// or (0, 0).
pub fn code_range(addr: u64) -> (u64, u64) {
    let mut found = (0, 0);
    any_object(&mut |base, headers| {
        let code = (headers.iter())
            .filter(|h| h.p_type == libc::PT_LOAD && h.p_flags & libc::PF_X != 0)
            .map(|h| (base + h.p_vaddr, base + h.p_vaddr + h.p_memsz))
            .find(|&(start, end)| (start..end).contains(&addr));
        found = code.unwrap_or(found);
        code.is_some()
    });
    found
}
