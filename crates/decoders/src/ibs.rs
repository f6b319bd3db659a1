//! AMD Instruction-Based Sampling, op samples: the MSR values the kernel puts in
//! PERF_SAMPLE_RAW (`u32 caps` then IbsOpCtl, IbsOpRip, IbsOpData, IbsOpData2,
//! IbsOpData3, IbsDcLinAd, IbsDcPhysAd, then IbsBrTarget and IbsOpData4 when the
//! capabilities say so). Field positions from AMD's PPR and perf's amd-ibs.h,
//! checked against perf's decode of real register values (tests).

use crate::level::MemLevel;

/// IBS capability bits (the `caps` word).
pub mod caps {
    pub const BRNTRGT: u32 = 1 << 5;
    pub const OPDATA4: u32 = 1 << 10;
    pub const ZEN4: u32 = 1 << 11;
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IbsOp {
    pub caps: u32,
    pub ctl: u64,
    pub rip: u64,
    pub data: u64,
    pub data2: u64,
    pub data3: u64,
    pub dc_lin_addr: u64,
    pub dc_phys_addr: u64,
    pub br_target: Option<u64>,
    pub data4: Option<u64>,
}

#[derive(Debug, PartialEq, Eq)]
pub struct TooShort {
    pub needed: usize,
    pub got: usize,
}

impl std::fmt::Display for TooShort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "IBS raw sample of {} bytes, expected at least {}",
            self.got, self.needed
        )
    }
}

fn bits(v: u64, lo: u32, hi: u32) -> u64 {
    (v >> lo) & ((1u64 << (hi - lo + 1)) - 1)
}

fn bit(v: u64, n: u32) -> bool {
    (v >> n) & 1 != 0
}

impl IbsOp {
    /// Decodes the PERF_SAMPLE_RAW payload of an `ibs_op` sample.
    pub fn from_raw(raw: &[u8]) -> Result<IbsOp, TooShort> {
        let too_short = |needed| TooShort {
            needed,
            got: raw.len(),
        };
        let caps = raw
            .get(..4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or(too_short(60))?;
        let reg = |i: usize| -> Option<u64> {
            let start = 4 + i * 8;
            Some(u64::from_le_bytes(
                raw.get(start..start + 8)?.try_into().ok()?,
            ))
        };
        let mut op = IbsOp {
            caps,
            ctl: reg(0).ok_or(too_short(60))?,
            rip: reg(1).ok_or(too_short(60))?,
            data: reg(2).ok_or(too_short(60))?,
            data2: reg(3).ok_or(too_short(60))?,
            data3: reg(4).ok_or(too_short(60))?,
            dc_lin_addr: reg(5).ok_or(too_short(60))?,
            dc_phys_addr: reg(6).ok_or(too_short(60))?,
            br_target: None,
            data4: None,
        };
        let mut next = 7;
        if caps & caps::BRNTRGT != 0 {
            op.br_target = reg(next);
            next += 1;
        }
        if caps & caps::OPDATA4 != 0 {
            op.data4 = reg(next);
        }
        Ok(op)
    }

    /// Sampling interval in ops or cycles (IbsOpMaxCnt, with its extension bits).
    pub fn max_count(&self) -> u64 {
        ((bits(self.ctl, 20, 26) << 16) | bits(self.ctl, 0, 15)) << 4
    }
    pub fn l3_miss_only(&self) -> bool {
        bit(self.ctl, 16)
    }
    pub fn enabled(&self) -> bool {
        bit(self.ctl, 17)
    }
    pub fn valid(&self) -> bool {
        bit(self.ctl, 18)
    }
    /// Counting dispatched ops (true) or cycles (false).
    pub fn counts_ops(&self) -> bool {
        bit(self.ctl, 19)
    }
    pub fn current_count(&self) -> u64 {
        bits(self.ctl, 32, 58)
    }

    /// Cycles from completion to retirement.
    pub fn comp_to_ret(&self) -> u64 {
        bits(self.data, 0, 15)
    }
    /// Cycles from tagging to retirement: the op's latency.
    pub fn tag_to_ret(&self) -> u64 {
        bits(self.data, 16, 31)
    }
    pub fn branch_retired(&self) -> bool {
        bit(self.data, 37)
    }
    pub fn rip_invalid(&self) -> bool {
        bit(self.data, 38)
    }
    pub fn branch_fused(&self) -> bool {
        bit(self.data, 39)
    }
    pub fn microcode(&self) -> bool {
        bit(self.data, 40)
    }

    /// Northbridge data source: 3 low bits, extended by bits 7:6 on Zen 4.
    pub fn data_source(&self) -> u8 {
        ((bits(self.data2, 6, 7) << 3) | bits(self.data2, 0, 2)) as u8
    }
    pub fn remote_node(&self) -> bool {
        bit(self.data2, 4)
    }
    /// Cache hit state: false = M state, true = O state.
    pub fn cache_hit_owned(&self) -> bool {
        bit(self.data2, 5)
    }

    pub fn is_load(&self) -> bool {
        bit(self.data3, 0)
    }
    pub fn is_store(&self) -> bool {
        bit(self.data3, 1)
    }
    pub fn dc_l1_tlb_miss(&self) -> bool {
        bit(self.data3, 2)
    }
    pub fn dc_l2_tlb_miss(&self) -> bool {
        bit(self.data3, 3)
    }
    pub fn dc_l1_tlb_hit_2m(&self) -> bool {
        bit(self.data3, 4)
    }
    pub fn dc_l1_tlb_hit_1g(&self) -> bool {
        bit(self.data3, 5)
    }
    pub fn dc_l2_tlb_hit_2m(&self) -> bool {
        bit(self.data3, 6)
    }
    pub fn dc_miss(&self) -> bool {
        bit(self.data3, 7)
    }
    pub fn dc_misaligned(&self) -> bool {
        bit(self.data3, 8)
    }
    pub fn dc_wc_mem(&self) -> bool {
        bit(self.data3, 13)
    }
    pub fn dc_uc_mem(&self) -> bool {
        bit(self.data3, 14)
    }
    pub fn dc_locked(&self) -> bool {
        bit(self.data3, 15)
    }
    pub fn dc_miss_no_mab_alloc(&self) -> bool {
        bit(self.data3, 16)
    }
    pub fn lin_addr_valid(&self) -> bool {
        bit(self.data3, 17)
    }
    pub fn phys_addr_valid(&self) -> bool {
        bit(self.data3, 18)
    }
    pub fn dc_l2_tlb_hit_1g(&self) -> bool {
        bit(self.data3, 19)
    }
    pub fn l2_miss(&self) -> bool {
        bit(self.data3, 20)
    }
    pub fn software_prefetch(&self) -> bool {
        bit(self.data3, 21)
    }
    /// Access width in bytes (0 when not reported).
    pub fn mem_width(&self) -> u32 {
        match bits(self.data3, 22, 25) {
            0 => 0,
            w => 1 << (w - 1),
        }
    }
    pub fn open_mem_reqs(&self) -> u64 {
        bits(self.data3, 26, 31)
    }
    /// Data-cache miss latency in cycles.
    pub fn dc_miss_latency(&self) -> u64 {
        bits(self.data3, 32, 47)
    }
    pub fn tlb_refill_latency(&self) -> u64 {
        bits(self.data3, 48, 63)
    }

    /// memlens' level: L1 when the data cache hit, L2 when only L1 missed, else
    /// the northbridge data source.
    pub fn level(&self) -> MemLevel {
        if !(self.is_load() || self.is_store()) {
            return MemLevel::Unknown;
        }
        if !self.dc_miss() {
            return MemLevel::L1;
        }
        if !self.l2_miss() && self.data_source() == 0 {
            return MemLevel::L2;
        }
        match self.data_source() {
            1 => MemLevel::Llc,
            2 => MemLevel::PeerCache,
            3 if self.remote_node() => MemLevel::RemoteDram,
            3 => MemLevel::LocalDram,
            5 => MemLevel::RemoteCache,
            6 | 7 | 8 | 12 => MemLevel::Other,
            _ => MemLevel::Unknown,
        }
    }
}
