//! Live perf_event backends: events opened with perf_event_open, their ring
//! buffers (and AUX areas for Arm SPE) read while the target runs, and what they
//! deliver written to `raw/perf.data` in perf's pipe format, which
//! `memlens_decoders::perf_data` reads back at finalize (the same path as
//! `memlens import`) and Linux perf can read too.
//!
//! Hand-written over the syscall: the perf-event crates do not map AUX areas
//! or expose the mmap page's time fields, and records are parsed by memlens'
//! own decoders anyway.

pub mod backends;
pub mod counters;
pub mod pmu;
pub(crate) mod session;

use memlens_convert::perf::{TimeConv, AUXTRACE_ARM_SPE};
use memlens_decoders::perf_data::{user, EventAttr};
use memlens_decoders::record;
use std::io::Write;
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// PERF_FLAG_FD_CLOEXEC.
const FLAG_FD_CLOEXEC: libc::c_ulong = 8;
const IOC_ENABLE: libc::c_ulong = 0x2400;
const IOC_SET_OUTPUT: libc::c_ulong = 0x2405;
const IOC_ID: libc::c_ulong = 0x8008_2407;

/// One opened event on one CPU (or thread).
pub struct Event {
    pub fd: std::os::fd::OwnedFd,
    pub id: u64,
}

impl Event {
    /// `perf_event_open(attr, pid, cpu, -1, CLOEXEC)`.
    pub fn open(attr: &EventAttr, pid: i32, cpu: i32) -> std::io::Result<Event> {
        let words = attr.encode();
        // SAFETY: the attr buffer is 128 bytes, as its size field says.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                words.as_ptr(),
                pid,
                cpu,
                -1,
                FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a new descriptor we own.
        let fd =
            unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd as i32) };
        let mut id = 0u64;
        // SAFETY: IOC_ID writes one u64.
        unsafe { libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(&fd), IOC_ID, &mut id) };
        Ok(Event { fd, id })
    }

    fn raw(&self) -> i32 {
        std::os::fd::AsRawFd::as_raw_fd(&self.fd)
    }

    pub fn enable(&self) {
        // SAFETY: plain ioctl on our descriptor.
        unsafe { libc::ioctl(self.raw(), IOC_ENABLE, 0) };
    }

    /// Sends this event's records to `ring`'s buffer (same CPU).
    pub fn output_to(&self, ring: &Ring) -> std::io::Result<()> {
        // SAFETY: plain ioctl on our descriptors.
        if unsafe { libc::ioctl(self.raw(), IOC_SET_OUTPUT, ring.event.raw()) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// A counting event's value, enabled and running times (its read_format
    /// has TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING); inherited copies included.
    pub fn read_values(&self) -> Option<[u64; 3]> {
        let mut v = [0u64; 3];
        // SAFETY: reads at most 24 bytes into v.
        let n = unsafe { libc::read(self.raw(), v.as_mut_ptr().cast(), 24) };
        (n == 24).then_some(v)
    }
}

/// The generic timer's virtual count, which SPE timestamps use.
#[cfg(target_arch = "aarch64")]
pub fn timer_count() -> Option<u64> {
    let count: u64;
    // SAFETY: CNTVCT_EL0 is readable at EL0 on Linux; isb orders the read.
    unsafe { std::arch::asm!("isb", "mrs {}, cntvct_el0", out(reg) count) };
    Some(count)
}

/// No generic timer (and no SPE) off aarch64.
#[cfg(not(target_arch = "aarch64"))]
pub fn timer_count() -> Option<u64> {
    None
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// A memory mapping released on drop.
struct Map {
    ptr: *mut u8,
    len: usize,
}

impl Map {
    fn new(fd: i32, len: usize, offset: usize, writable: bool) -> std::io::Result<Map> {
        let prot = libc::PROT_READ | if writable { libc::PROT_WRITE } else { 0 };
        // SAFETY: a fresh shared mapping of a perf descriptor.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                fd,
                offset as libc::off_t,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Map {
            ptr: ptr.cast(),
            len,
        })
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: unmapping what `new` mapped.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

// Offsets in struct perf_event_mmap_page.
const PAGE_TIME_ZERO: usize = 64;
const PAGE_CAPABILITIES: usize = 40;
const PAGE_DATA_HEAD: usize = 1024;
const PAGE_DATA_TAIL: usize = 1032;
const PAGE_AUX_TAIL: usize = 1064;
const PAGE_AUX_OFFSET: usize = 1072;
const PAGE_AUX_SIZE: usize = 1080;
const PAGE_TIME_CYCLES: usize = 80;
const PAGE_TIME_MASK: usize = 88;
/// cap_user_time_zero and cap_user_time_short in the capabilities word.
const CAP_USER_TIME_ZERO: u64 = 1 << 4;
const CAP_USER_TIME_SHORT: u64 = 1 << 5;

/// An event's ring buffer (and AUX area), read by the collector.
pub struct Ring {
    event: Event,
    cpu: u32,
    /// The control page and `data_size` bytes of records.
    map: Map,
    data_size: usize,
    aux: Option<Map>,
    /// A record that wraps around the end of the buffer is copied here.
    scratch: Vec<u8>,
}

impl Ring {
    /// Maps `pages` (a power of two) of records, and `aux_pages` of AUX area
    /// if non-zero.
    pub fn map(event: Event, cpu: u32, pages: usize, aux_pages: usize) -> std::io::Result<Ring> {
        let page = page_size();
        let data_size = pages * page;
        let map = Map::new(event.raw(), page + data_size, 0, true)?;
        let aux = if aux_pages > 0 {
            let (offset, size) = (page + data_size, aux_pages * page);
            // SAFETY: the control page is mapped; the kernel reads these two
            // fields when the AUX area is mapped.
            unsafe {
                map.ptr
                    .add(PAGE_AUX_OFFSET)
                    .cast::<u64>()
                    .write_volatile(offset as u64);
                map.ptr
                    .add(PAGE_AUX_SIZE)
                    .cast::<u64>()
                    .write_volatile(size as u64);
            }
            // Writable: the kernel stops (and flags truncation) instead of
            // overwriting data not yet read.
            Some(Map::new(event.raw(), size, offset, true)?)
        } else {
            None
        };
        Ok(Ring {
            event,
            cpu,
            map,
            data_size,
            aux,
            scratch: Vec::new(),
        })
    }

    pub fn event(&self) -> &Event {
        &self.event
    }

    fn word(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: offset is one of the control page's aligned u64 fields.
        unsafe { &*self.map.ptr.add(offset).cast::<AtomicU64>() }
    }

    /// perf's TIME_CONV fields from the control page, when the kernel offers
    /// them (to convert AUX timestamps to perf time).
    pub fn time_conv(&self) -> Option<TimeConv> {
        let field = |offset: usize| {
            // SAFETY: reading a field of the mapped control page.
            unsafe { self.map.ptr.add(offset).cast::<u64>().read_volatile() }
        };
        let shift = (field(48) >> 16) as u16;
        let caps = field(PAGE_CAPABILITIES);
        (caps & CAP_USER_TIME_ZERO != 0 && shift < 64).then(|| TimeConv {
            // time_shift (u16) and time_mult (u32) share the word at 48 with pmc_width.
            shift,
            mult: (field(48) >> 32) as u32,
            zero: field(PAGE_TIME_ZERO),
            short: (caps & CAP_USER_TIME_SHORT != 0)
                .then(|| (field(PAGE_TIME_CYCLES), field(PAGE_TIME_MASK))),
        })
    }

    /// Writes every record written since the last call to `out` (and, for
    /// PERF_RECORD_AUX, the AUX bytes it announces as an AUXTRACE record), then
    /// frees their space.
    pub fn drain(&mut self, out: &mut PipeWriter) -> std::io::Result<()> {
        let head = self.word(PAGE_DATA_HEAD).load(Ordering::Acquire);
        let mut tail = self.word(PAGE_DATA_TAIL).load(Ordering::Relaxed);
        let data = self.map.ptr.wrapping_add(page_size());
        while tail < head {
            let at = (tail % self.data_size as u64) as usize;
            let mut header = [0u8; 8];
            // SAFETY: the data area is `data_size` mapped bytes.
            unsafe { copy_wrapped(data, self.data_size, at, &mut header) };
            let Some(h) = record::header(&header, 0).filter(|h| h.size >= 8) else {
                break; // cannot happen with a kernel-written buffer; stop rather than spin
            };
            let mut rec = std::mem::take(&mut self.scratch);
            rec.resize(h.size as usize, 0);
            // SAFETY: as above.
            unsafe { copy_wrapped(data, self.data_size, at, &mut rec) };
            out.write_raw(&rec)?;
            let parsed = record::Record {
                kind: h.kind,
                misc: h.misc,
                body: &rec[8..],
            }
            .parse();
            if let Some(record::Parsed::Aux { offset, size, .. }) = parsed {
                self.forward_aux(offset, size, out)?;
            }
            self.scratch = rec;
            tail += u64::from(h.size);
        }
        fence(Ordering::Release);
        self.word(PAGE_DATA_TAIL).store(tail, Ordering::Release);
        Ok(())
    }

    /// Copies the AUX bytes a PERF_RECORD_AUX announces into an AUXTRACE record.
    fn forward_aux(&mut self, offset: u64, size: u64, out: &mut PipeWriter) -> std::io::Result<()> {
        let Some(aux) = &self.aux else {
            return Ok(());
        };
        let size = size.min(aux.len as u64);
        if size > 0 {
            let mut bytes = vec![0u8; size as usize];
            // SAFETY: the AUX area is `aux.len` mapped bytes.
            unsafe {
                copy_wrapped(
                    aux.ptr,
                    aux.len,
                    (offset % aux.len as u64) as usize,
                    &mut bytes,
                )
            };
            out.write_auxtrace(offset, self.cpu, &bytes)?;
        }
        fence(Ordering::Release);
        self.word(PAGE_AUX_TAIL)
            .store(offset + size, Ordering::Release);
        Ok(())
    }
}

/// Copies `dst.len()` bytes from a ring of `len` bytes starting at `at`,
/// wrapping to its start.
///
/// # Safety
/// `ring` must point to `len` readable bytes, `at < len` and `dst.len() <= len`.
unsafe fn copy_wrapped(ring: *const u8, len: usize, at: usize, dst: &mut [u8]) {
    let first = dst.len().min(len - at);
    std::ptr::copy_nonoverlapping(ring.add(at), dst.as_mut_ptr(), first);
    std::ptr::copy_nonoverlapping(ring, dst[first..].as_mut_ptr(), dst.len() - first);
}

/// perf.data in pipe mode, appended to as records arrive: every prefix of it is
/// a readable file, so a run that is killed keeps what was collected.
pub struct PipeWriter {
    out: std::io::BufWriter<std::fs::File>,
}

impl PipeWriter {
    /// The file written to.
    pub fn file(&self) -> &std::fs::File {
        self.out.get_ref()
    }

    pub fn create(
        path: &std::path::Path,
        events: &[(EventAttr, Vec<u64>)],
    ) -> std::io::Result<PipeWriter> {
        let file = memlens_profile::create_private_file(path).map_err(std::io::Error::other)?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
        out.write_all(b"PERFILE2")?;
        out.write_all(&16u64.to_le_bytes())?;
        let mut w = PipeWriter { out };
        for (attr, ids) in events {
            let mut body: Vec<u8> = attr.encode().iter().flat_map(|x| x.to_le_bytes()).collect();
            body.extend(ids.iter().flat_map(|x| x.to_le_bytes()));
            w.write_user(user::HEADER_ATTR, &body)?;
        }
        Ok(w)
    }

    /// AUXTRACE_INFO for Arm SPE: its PMU type, one AUX buffer per CPU.
    pub fn write_spe_info(&mut self, pmu_type: u32) -> std::io::Result<()> {
        let mut info = Vec::new();
        info.extend(AUXTRACE_ARM_SPE.to_le_bytes());
        info.extend(0u32.to_le_bytes());
        info.extend(u64::from(pmu_type).to_le_bytes());
        info.extend(1u64.to_le_bytes());
        self.write_user(user::AUXTRACE_INFO, &info)
    }

    /// A record perf writes itself (attrs, AUXTRACE_INFO, TIME_CONV).
    pub fn write_user(&mut self, kind: u32, body: &[u8]) -> std::io::Result<()> {
        let size = 8 + body.len();
        self.out.write_all(&kind.to_le_bytes())?;
        self.out.write_all(&((size as u32) << 16).to_le_bytes())?;
        self.out.write_all(body)
    }

    fn write_raw(&mut self, record: &[u8]) -> std::io::Result<()> {
        self.out.write_all(record)
    }

    fn write_auxtrace(&mut self, offset: u64, cpu: u32, bytes: &[u8]) -> std::io::Result<()> {
        let padded = bytes.len().next_multiple_of(8);
        let mut body = Vec::with_capacity(40);
        body.extend((padded as u64).to_le_bytes());
        body.extend(offset.to_le_bytes());
        body.extend(0u64.to_le_bytes()); // reference
        body.extend(cpu.to_le_bytes()); // idx: one AUX buffer per CPU
        body.extend(u32::MAX.to_le_bytes()); // tid: per-CPU buffer
        body.extend(cpu.to_le_bytes());
        body.extend(0u32.to_le_bytes());
        self.write_user(user::AUXTRACE, &body)?;
        self.out.write_all(bytes)?;
        self.out.write_all(&[0u8; 8][..padded - bytes.len()])
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memlens_convert::perf::convert;
    use memlens_decoders::perf_data::PerfData;
    use memlens_decoders::sample::bits;

    /// What the live SPE path writes (AUXTRACE_INFO, AUX chunks as AUXTRACE
    /// records, a PERF_RECORD_AUX flagged truncated), fed with the real hiperf
    /// SPE bytes cut inside a record, reads back as the samples perf reported.
    #[test]
    fn aux_chunks_written_live_decode_as_perf_reported() {
        let spe = std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../tests/fixtures/spe-hiperf-raw/hiperf-192.spe"),
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("perf.data");
        let attr = EventAttr {
            type_: 8,
            sample_period: 4096,
            sample_type: bits::IP | bits::TID | bits::TIME | bits::CPU | bits::IDENTIFIER,
            ..EventAttr::default()
        };
        let mut out = PipeWriter::create(&path, &[(attr, vec![42])]).unwrap();
        out.write_spe_info(8).unwrap();
        // A PERF_RECORD_AUX as the kernel writes it: offset, size, flags.
        let mut aux = Vec::new();
        aux.extend(record::kind::AUX.to_le_bytes());
        aux.extend((32u32 << 16).to_le_bytes());
        aux.extend(
            [0u64, 192, record::aux_flag::TRUNCATED]
                .iter()
                .flat_map(|w| w.to_le_bytes()),
        );
        out.write_raw(&aux).unwrap();
        out.write_auxtrace(0, 3, &spe[..100]).unwrap();
        out.write_auxtrace(100, 3, &spe[100..]).unwrap();
        out.flush().unwrap();
        drop(out);

        let bytes = std::fs::read(&path).unwrap();
        let perf = PerfData::parse(&bytes).unwrap();
        let mut rows = Vec::new();
        let c = convert(&perf, |r| rows.push(r));
        assert_eq!(c.summary.losses.aux_truncated, 1);
        assert_eq!(c.summary.spe.records, 4);
        let got: Vec<_> = rows
            .iter()
            .map(|s| (s.is_store, s.address, s.pc, s.latency, s.cpu))
            .collect();
        assert_eq!(
            got,
            vec![
                (false, 0xffffffe5aead80b0, 0xffffffc08420e068, Some(8), 3),
                (true, 0x5a812b7360, 0x59f2b9270c, Some(10), 3),
            ]
        );
    }
}
