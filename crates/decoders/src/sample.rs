//! The body of a PERF_RECORD_SAMPLE, laid out by the event's `sample_type`, as
//! the kernel writes it into a ring buffer and perf copies it into perf.data.
//!
//! Hand-written because the perf.data crates do not parse the memory fields
//! (weight, data source); shared by `memlens import` and the live backends, so
//! the code the live page-fault test runs is the code imports run.

/// `perf_event_attr.sample_type` bits.
pub mod bits {
    pub const IP: u64 = 1 << 0;
    pub const TID: u64 = 1 << 1;
    pub const TIME: u64 = 1 << 2;
    pub const ADDR: u64 = 1 << 3;
    pub const READ: u64 = 1 << 4;
    pub const CALLCHAIN: u64 = 1 << 5;
    pub const ID: u64 = 1 << 6;
    pub const CPU: u64 = 1 << 7;
    pub const PERIOD: u64 = 1 << 8;
    pub const STREAM_ID: u64 = 1 << 9;
    pub const RAW: u64 = 1 << 10;
    pub const BRANCH_STACK: u64 = 1 << 11;
    pub const REGS_USER: u64 = 1 << 12;
    pub const STACK_USER: u64 = 1 << 13;
    pub const WEIGHT: u64 = 1 << 14;
    pub const DATA_SRC: u64 = 1 << 15;
    pub const IDENTIFIER: u64 = 1 << 16;
    pub const TRANSACTION: u64 = 1 << 17;
    pub const REGS_INTR: u64 = 1 << 18;
    pub const PHYS_ADDR: u64 = 1 << 19;
    pub const AUX: u64 = 1 << 20;
    pub const CGROUP: u64 = 1 << 21;
    pub const DATA_PAGE_SIZE: u64 = 1 << 22;
    pub const CODE_PAGE_SIZE: u64 = 1 << 23;
    pub const WEIGHT_STRUCT: u64 = 1 << 24;
}

/// `read_format` bits.
pub mod read {
    pub const TOTAL_TIME_ENABLED: u64 = 1 << 0;
    pub const TOTAL_TIME_RUNNING: u64 = 1 << 1;
    pub const ID: u64 = 1 << 2;
    pub const GROUP: u64 = 1 << 3;
    pub const LOST: u64 = 1 << 4;
}

/// What decides a sample's layout: the attr fields the kernel consults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    pub sample_type: u64,
    pub read_format: u64,
    pub regs_user_mask: u64,
    pub regs_intr_mask: u64,
    /// `branch_sample_type` has PERF_SAMPLE_BRANCH_HW_INDEX.
    pub branch_hw_index: bool,
}

/// The fields memlens uses from a sample; absent fields are `None`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sample<'a> {
    pub id: Option<u64>,
    pub ip: Option<u64>,
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub time: Option<u64>,
    pub addr: Option<u64>,
    pub cpu: Option<u32>,
    pub period: Option<u64>,
    pub callchain: Vec<u64>,
    pub raw: Option<&'a [u8]>,
    /// PERF_SAMPLE_WEIGHT, or WEIGHT_STRUCT's var1 (memory latency).
    pub weight: Option<u64>,
    /// WEIGHT_STRUCT's var2 (instruction latency on recent Intel cores).
    pub weight2: Option<u16>,
    /// WEIGHT_STRUCT's var3.
    pub weight3: Option<u16>,
    pub data_src: Option<u64>,
    pub phys_addr: Option<u64>,
    pub data_page_size: Option<u64>,
}

/// Why a sample body could not be parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Truncated {
    /// The field being read when the body ran out.
    pub field: &'static str,
}

impl std::fmt::Display for Truncated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sample record ends inside its {} field", self.field)
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn u64(&mut self, field: &'static str) -> Result<u64, Truncated> {
        let b = self.bytes(8, field)?;
        Ok(u64::from_le_bytes([
            b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
        ]))
    }

    fn u32(&mut self, field: &'static str) -> Result<u32, Truncated> {
        let b = self.bytes(4, field)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn bytes(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], Truncated> {
        let end = self.pos.checked_add(n).ok_or(Truncated { field })?;
        let b = self.buf.get(self.pos..end).ok_or(Truncated { field })?;
        self.pos = end;
        Ok(b)
    }

    /// The bytes of `n` u64 values.
    fn u64s(&mut self, n: u64, field: &'static str) -> Result<&'a [u8], Truncated> {
        let n = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_mul(8))
            .ok_or(Truncated { field })?;
        self.bytes(n, field)
    }

    fn skip_u64s(&mut self, n: u64, field: &'static str) -> Result<(), Truncated> {
        self.u64s(n, field).map(|_| ())
    }
}

impl Layout {
    /// Where TIME lies in a sample body: only fixed-size fields (IDENTIFIER,
    /// IP, TID) come before it. `None` without TIME.
    pub fn time_offset(&self) -> Option<usize> {
        use bits::*;
        (self.sample_type & TIME != 0).then(|| {
            [IDENTIFIER, IP, TID]
                .iter()
                .filter(|&&b| self.sample_type & b != 0)
                .count()
                * 8
        })
    }

    /// Parses a little-endian sample body (the record without its 8-byte header).
    pub fn parse<'a>(&self, body: &'a [u8]) -> Result<Sample<'a>, Truncated> {
        use bits::*;
        let t = self.sample_type;
        let mut r = Reader { buf: body, pos: 0 };
        let mut s = Sample::default();
        if t & IDENTIFIER != 0 {
            s.id = Some(r.u64("identifier")?);
        }
        if t & IP != 0 {
            s.ip = Some(r.u64("ip")?);
        }
        if t & TID != 0 {
            s.pid = Some(r.u32("pid")?);
            s.tid = Some(r.u32("tid")?);
        }
        if t & TIME != 0 {
            s.time = Some(r.u64("time")?);
        }
        if t & ADDR != 0 {
            s.addr = Some(r.u64("addr")?);
        }
        if t & ID != 0 {
            s.id = Some(r.u64("id")?);
        }
        if t & STREAM_ID != 0 {
            r.u64("stream_id")?;
        }
        if t & CPU != 0 {
            s.cpu = Some(r.u32("cpu")?);
            r.u32("cpu")?;
        }
        if t & PERIOD != 0 {
            s.period = Some(r.u64("period")?);
        }
        if t & READ != 0 {
            self.skip_read(&mut r)?;
        }
        if t & CALLCHAIN != 0 {
            let nr = r.u64("callchain")?;
            let ips = r.u64s(nr, "callchain")?;
            s.callchain = ips
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect();
        }
        if t & RAW != 0 {
            let size = r.u32("raw")? as usize;
            s.raw = Some(r.bytes(size, "raw")?);
        }
        if t & BRANCH_STACK != 0 {
            let nr = r.u64("branch_stack")?;
            if self.branch_hw_index {
                r.u64("branch_stack")?;
            }
            r.skip_u64s(nr.saturating_mul(3), "branch_stack")?;
        }
        if t & REGS_USER != 0 {
            let abi = r.u64("regs_user")?;
            if abi != 0 {
                r.skip_u64s(u64::from(self.regs_user_mask.count_ones()), "regs_user")?;
            }
        }
        if t & STACK_USER != 0 {
            let size = r.u64("stack_user")?;
            if size != 0 {
                r.bytes(
                    usize::try_from(size).map_err(|_| Truncated {
                        field: "stack_user",
                    })?,
                    "stack_user",
                )?;
                r.u64("stack_user")?;
            }
        }
        if t & (WEIGHT | WEIGHT_STRUCT) != 0 {
            let w = r.u64("weight")?;
            if t & WEIGHT_STRUCT != 0 {
                s.weight = Some(w & 0xffff_ffff);
                s.weight2 = Some((w >> 32) as u16);
                s.weight3 = Some((w >> 48) as u16);
            } else {
                s.weight = Some(w);
            }
        }
        if t & DATA_SRC != 0 {
            s.data_src = Some(r.u64("data_src")?);
        }
        if t & TRANSACTION != 0 {
            r.u64("transaction")?;
        }
        if t & REGS_INTR != 0 {
            let abi = r.u64("regs_intr")?;
            if abi != 0 {
                r.skip_u64s(u64::from(self.regs_intr_mask.count_ones()), "regs_intr")?;
            }
        }
        if t & PHYS_ADDR != 0 {
            s.phys_addr = Some(r.u64("phys_addr")?);
        }
        if t & CGROUP != 0 {
            r.u64("cgroup")?;
        }
        if t & DATA_PAGE_SIZE != 0 {
            s.data_page_size = Some(r.u64("data_page_size")?);
        }
        if t & CODE_PAGE_SIZE != 0 {
            r.u64("code_page_size")?;
        }
        Ok(s)
    }

    fn skip_read(&self, r: &mut Reader) -> Result<(), Truncated> {
        let f = self.read_format;
        let per_value = 1 + u64::from(f & read::ID != 0) + u64::from(f & read::LOST != 0);
        let times = u64::from(f & read::TOTAL_TIME_ENABLED != 0)
            + u64::from(f & read::TOTAL_TIME_RUNNING != 0);
        if f & read::GROUP != 0 {
            let nr = r.u64("read")?;
            r.skip_u64s(times, "read")?;
            r.skip_u64s(nr.saturating_mul(per_value), "read")
        } else {
            r.skip_u64s(per_value + times, "read")
        }
    }
}
