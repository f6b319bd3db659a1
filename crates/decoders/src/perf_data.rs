//! The perf.data container (file and pipe mode, little-endian): header, event
//! attributes with their ids, feature sections, and the record stream including
//! AUXTRACE payloads, read from a byte slice (a memory map) without copying.
//!
//! Hand-written rather than read with the linux-perf-data crate because that crate
//! allocates whatever size a damaged file states (an AUXTRACE size, a feature's
//! element count) and aborts the process; here every size and count is checked
//! against the bytes that exist before it is used, a damaged record ends the
//! stream with an error naming its offset, and what precedes it stays readable.

use crate::bytes::{u32_at, u64_at};
use crate::record::{self, Record};
use crate::sample::{Layout, Sample, Truncated};
use std::collections::HashMap;
use std::ops::Range;

/// Why a file cannot be read (from its start) as perf.data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("not a perf.data file (no PERFILE2 magic)")]
    NotPerfData,
    #[error("big-endian perf.data is not supported (convert it on the recording machine with `perf inject`)")]
    BigEndian,
    #[error("damaged header ({0})")]
    DamagedHeader(&'static str),
}

/// A record that cannot be read: the stream ends there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("damaged record at byte {offset}: {reason}")]
pub struct DamagedRecord {
    pub offset: u64,
    pub reason: &'static str,
}

/// `perf_event_attr` fields memlens reads or writes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventAttr {
    pub type_: u32,
    pub config: u64,
    /// sample_period, or sample_freq when `freq` is set.
    pub sample_period: u64,
    pub sample_type: u64,
    pub read_format: u64,
    pub flags: u64,
    pub config1: u64,
    pub config2: u64,
    pub branch_sample_type: u64,
    pub sample_regs_user: u64,
    pub sample_regs_intr: u64,
    pub wakeup_watermark: u32,
    pub aux_watermark: u32,
    /// The clock of sample times when `USE_CLOCKID` is set.
    pub clockid: i32,
}

/// `perf_event_attr.flags` bits memlens uses.
pub mod flag {
    pub const DISABLED: u64 = 1 << 0;
    pub const INHERIT: u64 = 1 << 1;
    pub const EXCLUDE_KERNEL: u64 = 1 << 5;
    pub const EXCLUDE_HV: u64 = 1 << 6;
    pub const MMAP: u64 = 1 << 8;
    pub const COMM: u64 = 1 << 9;
    pub const FREQ: u64 = 1 << 10;
    pub const ENABLE_ON_EXEC: u64 = 1 << 12;
    pub const TASK: u64 = 1 << 13;
    pub const WATERMARK: u64 = 1 << 14;
    pub const PRECISE_IP_SHIFT: u32 = 15;
    pub const MMAP_DATA: u64 = 1 << 17;
    pub const SAMPLE_ID_ALL: u64 = 1 << 18;
    pub const EXCLUDE_GUEST: u64 = 1 << 20;
    pub const MMAP2: u64 = 1 << 23;
    pub const COMM_EXEC: u64 = 1 << 24;
    pub const USE_CLOCKID: u64 = 1 << 25;
}

/// PERF_SAMPLE_BRANCH_HW_INDEX.
const BRANCH_HW_INDEX: u64 = 1 << 17;
/// The attr size this code writes (PERF_ATTR_SIZE_VER7).
pub const ATTR_SIZE: usize = 128;

impl EventAttr {
    /// Reads an attr of any version (64 bytes and up); fields the writer's
    /// version did not have stay zero.
    pub fn parse(b: &[u8]) -> Option<EventAttr> {
        if b.len() < 64 {
            return None; // shorter than the first attr version
        }
        let size = (u32_at(b, 4)? as usize).clamp(64, b.len());
        let b = &b[..size];
        Some(EventAttr {
            type_: u32_at(b, 0)?,
            config: u64_at(b, 8)?,
            sample_period: u64_at(b, 16)?,
            sample_type: u64_at(b, 24)?,
            read_format: u64_at(b, 32)?,
            flags: u64_at(b, 40)?,
            wakeup_watermark: u32_at(b, 48)?,
            config1: u64_at(b, 56)?,
            config2: u64_at(b, 64).unwrap_or(0),
            branch_sample_type: u64_at(b, 72).unwrap_or(0),
            sample_regs_user: u64_at(b, 80).unwrap_or(0),
            clockid: u32_at(b, 92).unwrap_or(0) as i32,
            sample_regs_intr: u64_at(b, 96).unwrap_or(0),
            aux_watermark: u32_at(b, 104).unwrap_or(0),
        })
    }

    /// The attr as `perf_event_open` takes it (version 7, 128 bytes), in u64
    /// words so the buffer is aligned.
    pub fn encode(&self) -> [u64; ATTR_SIZE / 8] {
        let mut w = [0u64; ATTR_SIZE / 8];
        w[0] = u64::from(self.type_) | (ATTR_SIZE as u64) << 32;
        w[1] = self.config;
        w[2] = self.sample_period;
        w[3] = self.sample_type;
        w[4] = self.read_format;
        w[5] = self.flags;
        w[6] = u64::from(self.wakeup_watermark);
        w[7] = self.config1;
        w[8] = self.config2;
        w[9] = self.branch_sample_type;
        w[10] = self.sample_regs_user;
        w[11] = u64::from(self.clockid as u32) << 32;
        w[12] = self.sample_regs_intr;
        w[13] = u64::from(self.aux_watermark);
        w
    }

    pub fn layout(&self) -> Layout {
        Layout {
            sample_type: self.sample_type,
            read_format: self.read_format,
            regs_user_mask: self.sample_regs_user,
            regs_intr_mask: self.sample_regs_intr,
            branch_hw_index: self.branch_sample_type & BRANCH_HW_INDEX != 0,
        }
    }

    /// The fixed sampling period, or `None` in frequency mode.
    pub fn period(&self) -> Option<u64> {
        (self.flags & flag::FREQ == 0).then_some(self.sample_period)
    }
}

/// An event of the recording: its attr, the ids its samples carry, its name.
#[derive(Clone, Debug, Default)]
pub struct Event {
    pub attr: EventAttr,
    pub ids: Vec<u64>,
    pub name: Option<String>,
}

/// Feature section numbers (perf's `HEADER_*` feature bits).
pub mod feature {
    pub const BUILD_ID: u32 = 2;
    pub const HOSTNAME: u32 = 3;
    pub const OSRELEASE: u32 = 4;
    pub const CPUDESC: u32 = 8;
    pub const CPUID: u32 = 9;
    pub const CMDLINE: u32 = 11;
    pub const EVENT_DESC: u32 = 12;
    pub const PMU_MAPPINGS: u32 = 16;
}

/// User record types perf writes itself (not the kernel).
pub mod user {
    pub const HEADER_ATTR: u32 = 64;
    pub const HEADER_TRACING_DATA: u32 = 66;
    pub const FINISHED_ROUND: u32 = 68;
    pub const AUXTRACE_INFO: u32 = 70;
    pub const AUXTRACE: u32 = 71;
    pub const TIME_CONV: u32 = 79;
    pub const HEADER_FEATURE: u32 = 80;
}

/// One item of the record stream.
#[derive(Clone, Copy, Debug)]
pub enum Item<'a> {
    Record(Record<'a>),
    /// PERF_RECORD_AUXTRACE: a chunk of an AUX buffer (`idx`), with its payload.
    Auxtrace {
        offset: u64,
        idx: u32,
        tid: u32,
        cpu: u32,
        data: &'a [u8],
    },
}

/// Sample id to event index, looked up for every sample. The kernel numbers
/// events as it creates them, so a recording's ids are nearly consecutive: a
/// table indexed from the smallest id serves them, else a sorted list.
enum EventIds {
    /// The event of id `first + i` (`usize::MAX`: none).
    Table { first: u64, events: Vec<usize> },
    /// (id, event), sorted by id.
    Sorted(Vec<(u64, usize)>),
}

impl EventIds {
    fn new(events: &[Event]) -> EventIds {
        let mut sorted: Vec<(u64, usize)> = events
            .iter()
            .enumerate()
            .flat_map(|(i, e)| e.ids.iter().map(move |&id| (id, i)))
            .collect();
        sorted.sort_unstable();
        match (sorted.first(), sorted.last()) {
            (Some(&(first, _)), Some(&(last, _)))
                if last - first < 4 * sorted.len() as u64 + 64 =>
            {
                let mut table = vec![usize::MAX; (last - first) as usize + 1];
                for &(id, event) in &sorted {
                    table[(id - first) as usize] = event;
                }
                EventIds::Table {
                    first,
                    events: table,
                }
            }
            _ => EventIds::Sorted(sorted),
        }
    }

    fn event_of(&self, id: u64) -> Option<usize> {
        match self {
            EventIds::Table { first, events } => {
                let at = usize::try_from(id.wrapping_sub(*first)).ok()?;
                events.get(at).copied().filter(|&e| e != usize::MAX)
            }
            EventIds::Sorted(sorted) => {
                let at = sorted.binary_search_by_key(&id, |&(id, _)| id).ok()?;
                Some(sorted[at].1)
            }
        }
    }
}

/// A perf.data file read from memory.
pub struct PerfData<'a> {
    bytes: &'a [u8],
    /// The record stream: the data section, or everything after the pipe header.
    data: Range<usize>,
    pub events: Vec<Event>,
    features: HashMap<u32, &'a [u8]>,
    /// Each sample's event, by the id it carries.
    ids: EventIds,
    layouts: Vec<Layout>,
    /// Where every event's samples keep their time, if they agree.
    time_offset: Option<usize>,
}

const FILE_HEADER_SIZE: usize = 104;
const PIPE_HEADER_SIZE: usize = 16;

impl<'a> PerfData<'a> {
    pub fn parse(bytes: &'a [u8]) -> Result<PerfData<'a>, FormatError> {
        match bytes.get(..8) {
            Some(b"PERFILE2") => {}
            Some(b"2ELIFREP") => return Err(FormatError::BigEndian),
            _ => return Err(FormatError::NotPerfData),
        }
        let header_size = u64_at(bytes, 8).ok_or(FormatError::NotPerfData)?;
        if header_size == PIPE_HEADER_SIZE as u64 {
            return Ok(Self::parse_pipe(bytes));
        }
        if header_size < FILE_HEADER_SIZE as u64 || bytes.len() < FILE_HEADER_SIZE {
            return Err(FormatError::DamagedHeader("header cut short"));
        }
        let word = |i: usize| u64_at(bytes, i).unwrap_or(0);
        let section = |at: usize| section(bytes, word(at), word(at + 8));
        let attr_size = word(16) as usize;
        let attrs = section(24).ok_or(FormatError::DamagedHeader("attributes outside the file"))?;
        let data = section(40).ok_or(FormatError::DamagedHeader("data outside the file"))?;
        if !(64 + 16..=4096).contains(&attr_size) || attrs.len() % attr_size != 0 {
            return Err(FormatError::DamagedHeader("attribute size"));
        }
        let mut events = Vec::new();
        for entry in bytes[attrs].chunks_exact(attr_size) {
            let attr = EventAttr::parse(&entry[..attr_size - 16])
                .ok_or(FormatError::DamagedHeader("an event attribute"))?;
            let ids = section_at(bytes, entry, attr_size - 16)
                .ok_or(FormatError::DamagedHeader("event ids outside the file"))?;
            let ids = bytes[ids].chunks_exact(8).map(le64).collect();
            events.push(Event {
                attr,
                ids,
                name: None,
            });
        }
        // One {offset, size} after the data section per set feature bit.
        let mut features = HashMap::new();
        let mut table = data.end;
        for bit in 0..256u32 {
            if word(72 + 8 * (bit as usize / 64)) >> (bit % 64) & 1 == 0 {
                continue;
            }
            let entry = bytes
                .get(table..table + 16)
                .ok_or(FormatError::DamagedHeader("feature table outside the file"))?;
            let range = section_at(bytes, entry, 0).ok_or(FormatError::DamagedHeader(
                "a feature section outside the file",
            ))?;
            features.insert(bit, &bytes[range]);
            table += 16;
        }
        let mut file = PerfData {
            bytes,
            data,
            events,
            features,
            ids: EventIds::Sorted(Vec::new()),
            layouts: Vec::new(),
            time_offset: None,
        };
        file.finish_events();
        Ok(file)
    }

    /// Pipe mode: attrs and features arrive as records in the stream; collect
    /// them first so samples can be read knowing every event.
    fn parse_pipe(bytes: &'a [u8]) -> PerfData<'a> {
        let mut file = PerfData {
            bytes,
            data: PIPE_HEADER_SIZE..bytes.len(),
            events: Vec::new(),
            features: HashMap::new(),
            ids: EventIds::Sorted(Vec::new()),
            layouts: Vec::new(),
            time_offset: None,
        };
        // A damaged record is met again, and reported, when the stream is read.
        for item in file.items().map_while(Result::ok) {
            match item {
                Item::Record(r) if r.kind == user::HEADER_ATTR => {
                    let Some(attr) = EventAttr::parse(r.body) else {
                        continue;
                    };
                    let size = (u32_at(r.body, 4).unwrap_or(0) as usize).min(r.body.len());
                    let ids = r.body[size..].chunks_exact(8).map(le64).collect();
                    file.events.push(Event {
                        attr,
                        ids,
                        name: None,
                    });
                }
                Item::Record(r) if r.kind == user::HEADER_FEATURE => {
                    if let Some(id) = u64_at(r.body, 0) {
                        file.features.insert(id as u32, &r.body[8..]);
                    }
                }
                _ => {}
            }
        }
        file.finish_events();
        file
    }

    fn finish_events(&mut self) {
        for (i, name) in self.event_names().into_iter().enumerate() {
            if let Some(e) = self.events.get_mut(i) {
                e.name = Some(name);
            }
        }
        self.layouts = self.events.iter().map(|e| e.attr.layout()).collect();
        let first = self.layouts.first().and_then(Layout::time_offset);
        self.time_offset = first.filter(|_| self.layouts.iter().all(|l| l.time_offset() == first));
        self.ids = EventIds::new(&self.events);
    }

    /// The record stream, in file order. After a damaged record it yields that
    /// error once and ends.
    pub fn items(&self) -> Items<'a> {
        Items {
            bytes: self.bytes,
            at: self.data.start,
            end: self.data.end,
            failed: false,
        }
    }

    /// A sample's event and fields: the event found by its id when there are
    /// several, the body parsed once when the events share a layout.
    pub fn sample<'b>(&self, body: &'b [u8]) -> Option<(usize, Result<Sample<'b>, Truncated>)> {
        let first = self.layouts.first()?;
        if self.layouts.len() == 1 {
            return Some((0, first.parse(body)));
        }
        if first.sample_type & crate::sample::bits::IDENTIFIER != 0 {
            let event = self.ids.event_of(u64_at(body, 0)?)?;
            return Some((event, self.layouts[event].parse(body)));
        }
        let parsed = first.parse(body).ok()?;
        let event = self.ids.event_of(parsed.id?)?;
        Some(if self.layouts[event] == *first {
            (event, Ok(parsed))
        } else {
            (event, self.layouts[event].parse(body))
        })
    }

    /// A sample's time, read at its fixed offset when every event puts it at
    /// the same place (the usual case), else from a full parse.
    pub fn sample_time(&self, body: &[u8]) -> Option<u64> {
        match self.time_offset {
            Some(at) => u64_at(body, at),
            None => self.sample(body)?.1.ok()?.time,
        }
    }

    pub fn feature(&self, bit: u32) -> Option<&'a [u8]> {
        self.features.get(&bit).copied()
    }

    /// A feature holding one perf header string.
    pub fn string_feature(&self, bit: u32) -> Option<String> {
        header_string(self.feature(bit)?, &mut 0)
    }

    /// CMDLINE: the perf command line.
    pub fn cmdline(&self) -> Vec<String> {
        let Some(b) = self.feature(feature::CMDLINE) else {
            return Vec::new();
        };
        let mut at = 4;
        let n = u32_at(b, 0).unwrap_or(0);
        (0..n).map_while(|_| header_string(b, &mut at)).collect()
    }

    /// PMU_MAPPINGS: dynamic PMU type numbers and their names.
    pub fn pmu_mappings(&self) -> HashMap<u32, String> {
        let Some(b) = self.feature(feature::PMU_MAPPINGS) else {
            return HashMap::new();
        };
        let mut at = 4;
        let n = u32_at(b, 0).unwrap_or(0);
        (0..n)
            .map_while(|_| {
                let ty = u32_at(b, at)?;
                at += 4;
                Some((ty, header_string(b, &mut at)?))
            })
            .collect()
    }

    /// EVENT_DESC: each event's name, in attr order.
    fn event_names(&self) -> Vec<String> {
        let Some(b) = self.feature(feature::EVENT_DESC) else {
            return Vec::new();
        };
        let (Some(n), Some(attr_size)) = (u32_at(b, 0), u32_at(b, 4)) else {
            return Vec::new();
        };
        let mut at = 8usize;
        let mut out = Vec::new();
        // Each: its attr, the number of its ids, its name, its ids (which the
        // attrs section gave already).
        for _ in 0..n {
            at = at.saturating_add(attr_size as usize);
            let Some(nr_ids) = u32_at(b, at) else { break };
            at += 4;
            let Some(name) = header_string(b, &mut at) else {
                break;
            };
            at = at.saturating_add(nr_ids as usize * 8);
            if at > b.len() {
                break;
            }
            out.push(name);
        }
        out
    }

    /// BUILD_ID: the build id perf noted for each file, by path.
    pub fn build_ids(&self) -> HashMap<String, Vec<u8>> {
        let mut out = HashMap::new();
        let Some(b) = self.feature(feature::BUILD_ID) else {
            return out;
        };
        let mut at = 0;
        while let Some(r) = record::header(b, at) {
            let Some(body) = b.get(at + 8..at + r.size as usize) else {
                break;
            };
            at += r.size as usize;
            // pid, then 24 bytes of id (its length in byte 20 when misc says so).
            let Some(id) = body.get(4..28) else { continue };
            let len = if r.misc & (1 << 15) != 0 {
                usize::from(id[20]).min(20)
            } else {
                20
            };
            let path = &body[28..];
            let path = &path[..path.iter().position(|&c| c == 0).unwrap_or(path.len())];
            out.insert(
                String::from_utf8_lossy(path).into_owned(),
                id[..len].to_vec(),
            );
        }
        out
    }
}

/// Iterator over the record stream.
pub struct Items<'a> {
    bytes: &'a [u8],
    at: usize,
    end: usize,
    failed: bool,
}

impl<'a> Iterator for Items<'a> {
    type Item = Result<Item<'a>, DamagedRecord>;

    // Inlined: the item is otherwise returned through memory and read back in
    // wider loads than it was written with (store-forwarding stalls that made
    // a pass over the records 1.6x slower).
    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.at >= self.end {
            return None;
        }
        let offset = self.at as u64;
        let fail = |s: &mut Self, reason| {
            s.failed = true;
            Some(Err(DamagedRecord { offset, reason }))
        };
        let Some(h) = record::header(&self.bytes[..self.end], self.at) else {
            return fail(self, "record header cut short");
        };
        if (h.size as usize) < 8 {
            return fail(self, "record size below its header");
        }
        let Some(body) = self.bytes[..self.end].get(self.at + 8..self.at + h.size as usize) else {
            return fail(self, "record runs past the end of the data");
        };
        self.at += h.size as usize;
        // Two record types carry a payload after their stated size.
        let payload = match h.kind {
            user::AUXTRACE => u64_at(body, 0),
            user::HEADER_TRACING_DATA => u32_at(body, 0).map(|n| u64::from(n).next_multiple_of(8)),
            _ => Some(0),
        };
        let Some(payload) = payload else {
            return fail(self, "payload size missing");
        };
        let data_at = self.at;
        let Some(data) = usize::try_from(payload)
            .ok()
            .and_then(|n| self.bytes[..self.end].get(data_at..data_at.checked_add(n)?))
        else {
            return fail(self, "payload runs past the end of the data");
        };
        self.at += data.len();
        if h.kind == user::AUXTRACE {
            // size, offset, reference, idx, tid, cpu
            let (Some(idx), Some(tid), Some(cpu)) =
                (u32_at(body, 24), u32_at(body, 28), u32_at(body, 32))
            else {
                return fail(self, "AUXTRACE record cut short");
            };
            return Some(Ok(Item::Auxtrace {
                offset,
                idx,
                tid,
                cpu,
                data,
            }));
        }
        Some(Ok(Item::Record(Record {
            kind: h.kind,
            misc: h.misc,
            body,
        })))
    }
}

/// A perf header string: u32 length (padding included), then NUL-padded bytes.
fn header_string(b: &[u8], at: &mut usize) -> Option<String> {
    let len = u32_at(b, *at)? as usize;
    let s = b.get(*at + 4..(*at + 4).checked_add(len)?)?;
    *at += 4 + len;
    let s = &s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())];
    Some(String::from_utf8_lossy(s).into_owned())
}

/// The {offset, size} pair at `entry[at..]`, as a range checked against `bytes`.
fn section_at(bytes: &[u8], entry: &[u8], at: usize) -> Option<Range<usize>> {
    section(bytes, u64_at(entry, at)?, u64_at(entry, at + 8)?)
}

fn section(bytes: &[u8], offset: u64, size: u64) -> Option<Range<usize>> {
    let start = usize::try_from(offset).ok()?;
    let end = start.checked_add(usize::try_from(size).ok()?)?;
    (end <= bytes.len()).then_some(start..end)
}

fn le64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b.try_into().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(ids: &[&[u64]]) -> Vec<Event> {
        ids.iter()
            .map(|ids| Event {
                ids: ids.to_vec(),
                ..Event::default()
            })
            .collect()
    }

    #[test]
    fn sample_ids_find_their_event_dense_or_sparse() {
        let dense = EventIds::new(&events(&[&[7, 9, 11], &[8, 10, 12]]));
        assert!(matches!(dense, EventIds::Table { .. }));
        let sparse = EventIds::new(&events(&[&[7, 1 << 40], &[u64::MAX]]));
        assert!(matches!(sparse, EventIds::Sorted(_)));
        for (ids, id, event) in [
            (&dense, 7, Some(0)),
            (&dense, 12, Some(1)),
            (&dense, 6, None),
            (&dense, 13, None),
            (&dense, 0, None),
            (&sparse, 1 << 40, Some(0)),
            (&sparse, u64::MAX, Some(1)),
            (&sparse, 8, None),
        ] {
            assert_eq!(ids.event_of(id), event, "id {id}");
        }
    }
}
