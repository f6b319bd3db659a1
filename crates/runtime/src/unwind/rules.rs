//! DWARF unwinding with cached rules (x86_64). libgcc's `_Unwind_Backtrace` finds
//! and interprets the CIE and FDE of every frame of every stack again: recording
//! every block of a malloc-heavy program spent 80% of its time there. Here each
//! return address's rule (where the caller's frame is: CFA = rsp or rbp plus an
//! offset, the return address below it, rbp saved or not) is computed once from the
//! object's `.eh_frame` with gimli and kept in a lock-free table; an unwind is then
//! a few loads per frame, each checked against the thread's stack.
//!
//! Hand-written because the unwinder runs inside malloc: the crates that cache
//! unwind rules (framehop) allocate, and gimli alone parses without allocating.
//! A stack with a frame these rules do not describe (a CFA expression: signal
//! trampolines, PLT stubs) or that leaves the thread's stack is handed back to
//! libgcc whole, so results never get worse than before.

use crate::thread::ThreadState;
use crate::ways::Ways;
use core::ffi::c_void;
use core::mem::MaybeUninit;
use gimli::{
    BaseAddresses, CfaRule, EhFrame, EhFrameHdr, EndianSlice, NativeEndian, Pointer, Register,
    RegisterRule, UnwindContext, UnwindContextStorage, UnwindSection, UnwindTableRow, X86_64,
};

/// How to go from a frame to its caller's.
#[derive(Clone, Copy)]
enum Step {
    /// CFA = (rbp if `rbp_based` else rsp) + `cfa_offset`; the return address is
    /// at CFA - 8; the caller's rbp at CFA + `rbp_offset` if saved, else unchanged.
    Frame {
        rbp_based: bool,
        cfa_offset: i64,
        rbp_offset: Option<i64>,
    },
    /// The outermost frame (return address undefined, or no unwind information).
    End,
    /// A rule these steps cannot follow: libgcc unwinds the whole stack.
    Unsupported,
}

/// Cache entries pack the address (below 2^47: user space) and its step in one
/// word, so a reader never sees one entry's address with another's step.
const ADDRESS_BITS: u32 = 47;
/// 65,536 entries in sets of 8, 512 KiB of which a process touches the pages
/// its code addresses hash to. Direct-mapped, the 12,000 call sites of
/// `bench/sites.sh` evicted each other so often that searching the unwind
/// tables again took 40% of the program's time under `record --leaks`.
static CACHE: Ways<8192> = Ways::new();

/// Step bits: 2 bits of kind, 5 of rbp slot (offset / -8, 0 = not saved), 10 of
/// CFA offset / 8. Steps outside that (frames above 8 KiB) are not cached.
fn encode(step: Step) -> Option<u64> {
    Some(match step {
        Step::End => 2,
        Step::Unsupported => 3,
        Step::Frame {
            rbp_based,
            cfa_offset,
            rbp_offset,
        } => {
            let slot = match rbp_offset {
                None => 0,
                Some(o) if o < 0 && o % 8 == 0 && -o / 8 < 32 => -o / 8,
                Some(_) => return None,
            };
            if cfa_offset <= 0 || cfa_offset % 8 != 0 || cfa_offset / 8 >= 1024 {
                return None;
            }
            rbp_based as u64 | (slot as u64) << 2 | (cfa_offset as u64 / 8) << 7
        }
    })
}

fn decode(bits: u64) -> Step {
    match bits & 3 {
        2 => Step::End,
        3 => Step::Unsupported,
        kind => {
            let slot = (bits >> 2 & 31) as i64;
            Step::Frame {
                rbp_based: kind == 1,
                cfa_offset: (bits >> 7 & 1023) as i64 * 8,
                rbp_offset: (slot != 0).then_some(-8 * slot),
            }
        }
    }
}

/// The step for code address `pc`, from the cache or computed (and cached).
fn step_for(pc: u64) -> Step {
    let cacheable = pc != 0 && pc >> ADDRESS_BITS == 0;
    if cacheable {
        if let Some(e) = CACHE.find(pc, |e| e & ((1 << ADDRESS_BITS) - 1) == pc) {
            return decode(e >> ADDRESS_BITS);
        }
    }
    let step = compute(pc);
    if let (true, Some(bits)) = (cacheable, encode(step)) {
        CACHE.insert(pc, pc | bits << ADDRESS_BITS);
    }
    step
}

/// Forgets every cached step: code was unloaded, and other code may load there.
pub fn forget() {
    CACHE.clear();
    super::memo::forget();
}

/// Fills `out` with return addresses, innermost first, skipping the runtime's own
/// frames (those inside `entry`, the frame of the runtime's entry point, are
/// not even walked; 0: walked from here); None when libgcc must unwind this
/// stack instead.
///
/// Every word of the stack its result depends on goes into `reads` (see
/// [`super::memo`]): return addresses, the frame pointers followed, and a
/// saved rbp only once a rule computes a frame from it (a caller built
/// without frame pointers keeps a variable in rbp, which changes from call
/// to call and is never used).
pub fn capture(
    st: &ThreadState,
    entry: u64,
    out: &mut [MaybeUninit<u64>],
    reads: &mut super::memo::Reads,
) -> Option<usize> {
    // Every read lies between this frame and the top of the thread's stack.
    let lo = super::frame_address();
    let hi = st.stack_hi;
    if lo < st.stack_lo || lo.saturating_add(16) > hi {
        return None;
    }
    // addr in [lo, hi - 8] as one comparison (below lo wraps to far above).
    let last = hi - 8 - lo;
    let read = |addr: u64| -> Option<u64> {
        (addr.wrapping_sub(lo) <= last && addr.is_multiple_of(8))
            // SAFETY: inside the live part of this thread's stack, aligned.
            .then(|| unsafe { *(addr as *const u64) })
    };
    // The runtime's frames keep frame pointers: walk them to the first caller
    // outside it, whose registers are then known (rsp above the return address,
    // rbp as the runtime's frame saved it); from the entry point's frame, when
    // given, that caller is the next. Walked from here, this frame returns
    // into the runtime, or the chain is not what it seems (a runtime built
    // without frame pointers): libgcc then.
    let mut fp = if entry > lo && entry < hi { entry } else { lo };
    if !super::is_self(read(fp + 8)?) && fp == lo {
        return None;
    }
    // Where the current rbp was read from, until a rule uses it.
    let (mut ip, mut sp, mut bp, mut bp_from) = loop {
        let (saved_bp, ret) = (read(fp)?, read(fp + 8)?);
        reads.push(fp + 8, ret);
        if !super::is_self(ret) {
            break (ret, fp + 16, saved_bp, Some(fp));
        }
        reads.push(fp, saved_bp);
        if saved_bp <= fp {
            return None;
        }
        fp = saved_bp;
    };
    let mut n = 0;
    while n < out.len() && ip != 0 {
        out[n].write(ip);
        n += 1;
        // A return address follows its call: look up the call's own address.
        match step_for(ip - 1) {
            Step::End => break,
            Step::Unsupported => return None,
            Step::Frame {
                rbp_based,
                cfa_offset,
                rbp_offset,
            } => {
                if rbp_based {
                    if let Some(at) = bp_from.take() {
                        reads.push(at, bp);
                    }
                }
                let cfa = (if rbp_based { bp } else { sp }).wrapping_add(cfa_offset as u64);
                if cfa <= sp {
                    return None;
                }
                ip = read(cfa - 8)?;
                reads.push(cfa - 8, ip);
                if let Some(o) = rbp_offset {
                    let at = cfa.wrapping_add(o as u64);
                    bp = read(at)?;
                    bp_from = Some(at);
                }
                sp = cfa;
            }
        }
    }
    Some(n)
}

/// Fixed-size storage for gimli's rule evaluation: no allocation.
struct Fixed;

impl UnwindContextStorage<usize> for Fixed {
    // x86_64 code saves at most the 7 callee-saved registers and rip; more
    // rules, or deeper remember_state nesting, end in an error: libgcc then.
    type Rules = [(Register, RegisterRule<usize>); 16];
    type Stack = [UnwindTableRow<usize, Self>; 2];
}

struct Lookup {
    pc: u64,
    step: Option<Step>,
}

/// Finds the object holding `pc` and evaluates its unwind rule there, under the
/// loader's lock (the object cannot be unloaded meanwhile). Rare: once per
/// return address while it stays cached.
#[cold]
fn compute(pc: u64) -> Step {
    let mut lookup = Lookup { pc, step: None };
    // SAFETY: the callback only reads the program headers handed to it and the
    // sections they point to.
    unsafe { libc::dl_iterate_phdr(Some(on_object), &mut lookup as *mut Lookup as *mut c_void) };
    lookup.step.unwrap_or(Step::End)
}

unsafe extern "C" fn on_object(info: *mut libc::dl_phdr_info, _: usize, arg: *mut c_void) -> i32 {
    let lookup = &mut *(arg as *mut Lookup);
    let info = &*info;
    let phdrs = core::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize);
    let bias = info.dlpi_addr;
    let segment_end = |addr: u64| {
        phdrs
            .iter()
            .filter(|p| p.p_type == libc::PT_LOAD)
            .map(|p| (bias.wrapping_add(p.p_vaddr), p.p_memsz))
            .find(|&(start, len)| addr >= start && addr - start < len)
            .map(|(start, len)| start + len)
    };
    if segment_end(lookup.pc).is_none() {
        return 0;
    }
    let step = phdrs
        .iter()
        .find(|p| p.p_type == libc::PT_GNU_EH_FRAME)
        .map_or(Step::End, |hdr| {
            let hdr_addr = bias.wrapping_add(hdr.p_vaddr);
            let hdr_bytes =
                core::slice::from_raw_parts(hdr_addr as *const u8, hdr.p_memsz as usize);
            rule_at(lookup.pc, hdr_addr, hdr_bytes, segment_end)
        });
    lookup.step = Some(step);
    1
}

/// The step at `pc` from an object's `.eh_frame_hdr` (at `hdr_addr`) and the
/// `.eh_frame` it points to, read up to the end of its segment.
unsafe fn rule_at(
    pc: u64,
    hdr_addr: u64,
    hdr_bytes: &[u8],
    segment_end: impl Fn(u64) -> Option<u64>,
) -> Step {
    let bases = BaseAddresses::default().set_eh_frame_hdr(hdr_addr);
    let Ok(hdr) = EhFrameHdr::new(hdr_bytes, NativeEndian).parse(&bases, 8) else {
        return Step::Unsupported;
    };
    let Pointer::Direct(eh_frame_addr) = hdr.eh_frame_ptr() else {
        return Step::Unsupported;
    };
    let (Some(table), Some(end)) = (hdr.table(), segment_end(eh_frame_addr)) else {
        return Step::Unsupported;
    };
    let eh_frame_bytes =
        core::slice::from_raw_parts(eh_frame_addr as *const u8, (end - eh_frame_addr) as usize);
    let eh_frame = EhFrame::from(EndianSlice::new(eh_frame_bytes, NativeEndian));
    let bases = bases.set_eh_frame(eh_frame_addr);
    let mut ctx = UnwindContext::<usize, Fixed>::new_in();
    match table.unwind_info_for_address(&eh_frame, &bases, &mut ctx, pc, EhFrame::cie_from_offset) {
        Ok(row) => step_from(row),
        Err(gimli::Error::NoUnwindInfoForAddress) => Step::End,
        Err(_) => Step::Unsupported,
    }
}

fn step_from(row: &UnwindTableRow<usize, Fixed>) -> Step {
    let CfaRule::RegisterAndOffset { register, offset } = *row.cfa() else {
        return Step::Unsupported;
    };
    let rbp_based = match register {
        X86_64::RSP => false,
        X86_64::RBP => true,
        _ => return Step::Unsupported,
    };
    match row.register(X86_64::RA) {
        RegisterRule::Undefined => return Step::End,
        RegisterRule::Offset(-8) => {}
        _ => return Step::Unsupported,
    }
    let rbp_offset = match row.register(X86_64::RBP) {
        RegisterRule::Undefined | RegisterRule::SameValue => None,
        RegisterRule::Offset(o) => Some(o),
        _ => return Step::Unsupported,
    };
    Step::Frame {
        rbp_based,
        cfa_offset: offset,
        rbp_offset,
    }
}
