//! `perf_mem_data_src` (PERF_SAMPLE_DATA_SRC): where a sampled access was served
//! from, as the kernel encodes it for PEBS, IBS and (through perf) SPE. Every
//! field of the uapi layout is decoded; the original value is kept by callers.

use crate::level::MemLevel;
use std::fmt;

/// The fields of one data-source value (uapi `union perf_mem_data_src`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DataSource {
    pub raw: u64,
    /// PERF_MEM_OP_*: 0x01 NA, 0x02 LOAD, 0x04 STORE, 0x08 PFETCH, 0x10 EXEC.
    pub op: u8,
    /// PERF_MEM_LVL_* bitmask (legacy level description).
    pub lvl: u16,
    /// PERF_MEM_SNOOP_*: 0x01 NA, 0x02 NONE, 0x04 HIT, 0x08 MISS, 0x10 HITM.
    pub snoop: u8,
    /// PERF_MEM_LOCK_*: 0x01 NA, 0x02 LOCKED.
    pub lock: u8,
    /// PERF_MEM_TLB_*: 0x01 NA, 0x02 HIT, 0x04 MISS, 0x08 L1, 0x10 L2, 0x20 WK, 0x40 OS.
    pub dtlb: u8,
    /// PERF_MEM_LVLNUM_* (enumerated): 1-4 L1-L4, 9 CXL, 0xa IO, 0xb ANY_CACHE,
    /// 0xc LFB, 0xd RAM, 0xe PMEM, 0xf NA.
    pub lvl_num: u8,
    pub remote: bool,
    /// PERF_MEM_SNOOPX_*: 0x01 FWD, 0x02 PEER.
    pub snoopx: u8,
    /// PERF_MEM_BLK_*: 0x01 NA, 0x02 DATA, 0x04 ADDR.
    pub blk: u8,
    /// PERF_MEM_HOPS_* (enumerated): 1 core same node, 2 node same socket,
    /// 3 socket same board, 4 board.
    pub hops: u8,
}

pub mod op {
    pub const NA: u8 = 0x01;
    pub const LOAD: u8 = 0x02;
    pub const STORE: u8 = 0x04;
    pub const PFETCH: u8 = 0x08;
    pub const EXEC: u8 = 0x10;
}

pub mod lvl {
    pub const NA: u16 = 0x01;
    pub const HIT: u16 = 0x02;
    pub const MISS: u16 = 0x04;
    pub const L1: u16 = 0x08;
    pub const LFB: u16 = 0x10;
    pub const L2: u16 = 0x20;
    pub const L3: u16 = 0x40;
    pub const LOC_RAM: u16 = 0x80;
    pub const REM_RAM1: u16 = 0x100;
    pub const REM_RAM2: u16 = 0x200;
    pub const REM_CCE1: u16 = 0x400;
    pub const REM_CCE2: u16 = 0x800;
    pub const IO: u16 = 0x1000;
    pub const UNC: u16 = 0x2000;
}

pub mod lvl_num {
    pub const L1: u8 = 1;
    pub const L2: u8 = 2;
    pub const L3: u8 = 3;
    pub const L4: u8 = 4;
    pub const CXL: u8 = 9;
    pub const IO: u8 = 0xa;
    pub const ANY_CACHE: u8 = 0xb;
    pub const LFB: u8 = 0xc;
    pub const RAM: u8 = 0xd;
    pub const PMEM: u8 = 0xe;
    pub const NA: u8 = 0xf;
}

pub mod tlb {
    pub const HIT: u8 = 0x02;
    pub const MISS: u8 = 0x04;
    pub const WK: u8 = 0x20;
}

pub mod snoop {
    pub const NONE: u8 = 0x02;
    pub const HIT: u8 = 0x04;
    pub const MISS: u8 = 0x08;
    pub const HITM: u8 = 0x10;
}

impl DataSource {
    pub fn decode(v: u64) -> Self {
        DataSource {
            raw: v,
            op: (v & 0x1f) as u8,
            lvl: ((v >> 5) & 0x3fff) as u16,
            snoop: ((v >> 19) & 0x1f) as u8,
            lock: ((v >> 24) & 3) as u8,
            dtlb: ((v >> 26) & 0x7f) as u8,
            lvl_num: ((v >> 33) & 0xf) as u8,
            remote: (v >> 37) & 1 != 0,
            snoopx: ((v >> 38) & 3) as u8,
            blk: ((v >> 40) & 7) as u8,
            hops: ((v >> 43) & 7) as u8,
        }
    }

    pub fn encode(&self) -> u64 {
        u64::from(self.op & 0x1f)
            | u64::from(self.lvl & 0x3fff) << 5
            | u64::from(self.snoop & 0x1f) << 19
            | u64::from(self.lock & 3) << 24
            | u64::from(self.dtlb & 0x7f) << 26
            | u64::from(self.lvl_num & 0xf) << 33
            | u64::from(self.remote) << 37
            | u64::from(self.snoopx & 3) << 38
            | u64::from(self.blk & 7) << 40
            | u64::from(self.hops & 7) << 43
    }

    pub fn is_load(&self) -> bool {
        self.op & op::LOAD != 0
    }

    pub fn is_store(&self) -> bool {
        self.op & op::STORE != 0
    }

    /// A locked instruction's access (x86's `lock` prefix, `xchg`): an atomic
    /// read-modify-write. PERF_MEM_LOCK_NA wins, as in perf's own text.
    pub fn is_locked(&self) -> bool {
        self.lock & 3 == 2
    }

    /// memlens' memory level: the enumerated level when the kernel gave one,
    /// else the legacy bitmask. A miss without the level that served it is
    /// unknown, not guessed.
    pub fn level(&self) -> MemLevel {
        let snooped_peer = self.snoop & snoop::HITM != 0 || self.snoopx & 2 != 0;
        match self.lvl_num {
            lvl_num::L1 => return MemLevel::L1,
            lvl_num::LFB => return MemLevel::FillBuffer,
            lvl_num::L2 | lvl_num::L3 | lvl_num::L4 | lvl_num::ANY_CACHE
                if self.remote || self.hops > 1 =>
            {
                return MemLevel::RemoteCache;
            }
            lvl_num::L2 | lvl_num::L3 | lvl_num::L4 | lvl_num::ANY_CACHE
                if self.hops == 1 || snooped_peer =>
            {
                return MemLevel::PeerCache;
            }
            lvl_num::L2 => return MemLevel::L2,
            lvl_num::L3 | lvl_num::L4 => return MemLevel::Llc,
            lvl_num::RAM if self.remote || self.hops > 1 => return MemLevel::RemoteDram,
            lvl_num::RAM => return MemLevel::LocalDram,
            lvl_num::CXL | lvl_num::IO | lvl_num::PMEM => return MemLevel::Other,
            _ => {}
        }
        let l = self.lvl;
        if l & lvl::MISS != 0 && l & lvl::HIT == 0 {
            // "L1 miss" and the like say where it was not found.
            return MemLevel::Unknown;
        }
        if l & (lvl::REM_CCE1 | lvl::REM_CCE2) != 0 {
            MemLevel::RemoteCache
        } else if l & (lvl::REM_RAM1 | lvl::REM_RAM2) != 0 {
            MemLevel::RemoteDram
        } else if l & lvl::LOC_RAM != 0 {
            MemLevel::LocalDram
        } else if l & (lvl::IO | lvl::UNC) != 0 {
            MemLevel::Other
        } else if l & lvl::L3 != 0 {
            if snooped_peer {
                MemLevel::PeerCache
            } else {
                MemLevel::Llc
            }
        } else if l & lvl::L2 != 0 {
            MemLevel::L2
        } else if l & lvl::LFB != 0 {
            MemLevel::FillBuffer
        } else if l & lvl::L1 != 0 {
            MemLevel::L1
        } else {
            MemLevel::Unknown
        }
    }
}

/// Appends the names of the set bits of `m` (bit i named `names[i]`), joined
/// with " or ".
fn join_bits(out: &mut String, mut m: u64, names: &[&str]) {
    for name in names {
        if m == 0 {
            break;
        }
        if m & 1 != 0 {
            if !out.is_empty() {
                out.push_str(" or ");
            }
            out.push_str(name);
        }
        m >>= 1;
    }
}

/// perf 6.1's text for a data source, as `perf script -F data_src` prints it
/// (`|OP LOAD|LVL L1 hit|SNP None|TLB L1 or L2 hit|LCK No|BLK  N/A`).
pub struct PerfText(pub DataSource);

impl fmt::Display for PerfText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        let op = if d.op & op::NA != 0 {
            "N/A"
        } else if d.op & op::LOAD != 0 {
            "LOAD"
        } else if d.op & op::STORE != 0 {
            "STORE"
        } else if d.op & op::PFETCH != 0 {
            "PFETCH"
        } else if d.op & op::EXEC != 0 {
            "EXEC"
        } else {
            "No"
        };

        // "Remote " and the hops come first; " or " joins only the level names.
        let mut prefix = String::new();
        if d.remote {
            prefix.push_str("Remote ");
        }
        const HOPS: [&str; 5] = [
            "N/A",
            "core, same node",
            "node, same socket",
            "socket, same board",
            "board",
        ];
        if d.hops != 0 {
            prefix.push_str(HOPS.get(usize::from(d.hops)).unwrap_or(&"N/A"));
            prefix.push(' ');
        }
        let mut names = String::new();
        join_bits(
            &mut names,
            u64::from(d.lvl & !(lvl::HIT | lvl::MISS)),
            &[
                "N/A",
                "HIT",
                "MISS",
                "L1",
                "LFB/MAB",
                "L2",
                "L3",
                "Local RAM",
                "Remote RAM (1 hop)",
                "Remote RAM (2 hops)",
                "Remote Cache (1 hop)",
                "Remote Cache (2 hops)",
                "I/O",
                "Uncached",
            ],
        );
        if d.lvl_num != 0 {
            if !names.is_empty() {
                names.push_str(" or ");
            }
            let num = match d.lvl_num {
                lvl_num::CXL => "CXL".to_string(),
                lvl_num::IO => "I/O".to_string(),
                lvl_num::ANY_CACHE => "Any cache".to_string(),
                lvl_num::LFB => "LFB/MAB".to_string(),
                lvl_num::RAM => "RAM".to_string(),
                lvl_num::PMEM => "PMEM".to_string(),
                lvl_num::NA => "N/A".to_string(),
                n => format!("L{n}"),
            };
            names.push_str(&num);
        }
        let mut level = prefix + &names;
        if level.is_empty() {
            level.push_str("N/A");
        }
        if d.lvl & lvl::HIT != 0 {
            level.push_str(" hit");
        }
        if d.lvl & lvl::MISS != 0 {
            level.push_str(" miss");
        }

        let mut snoop = String::new();
        join_bits(
            &mut snoop,
            u64::from(d.snoop),
            &["N/A", "None", "Hit", "Miss", "HitM"],
        );
        join_bits(&mut snoop, u64::from(d.snoopx), &["Fwd", "Peer"]);
        if snoop.is_empty() {
            snoop.push_str("N/A");
        }

        let mut tlb = String::new();
        join_bits(
            &mut tlb,
            u64::from(d.dtlb & !(tlb::HIT | tlb::MISS)),
            &["N/A", "HIT", "MISS", "L1", "L2", "Walker", "Fault"],
        );
        if tlb.is_empty() {
            tlb.push_str("N/A");
        }
        if d.dtlb & tlb::HIT != 0 {
            tlb.push_str(" hit");
        }
        if d.dtlb & tlb::MISS != 0 {
            tlb.push_str(" miss");
        }

        let lock = if d.lock & 1 != 0 {
            "N/A"
        } else if d.lock & 2 != 0 {
            "Yes"
        } else {
            "No"
        };
        let blk = if d.blk == 0 || d.blk & 1 != 0 {
            " N/A".to_string()
        } else {
            let mut s = String::new();
            if d.blk & 2 != 0 {
                s.push_str(" Data");
            }
            if d.blk & 4 != 0 {
                s.push_str(" Addr");
            }
            s
        };
        write!(
            f,
            "|OP {op}|LVL {level}|SNP {snoop}|TLB {tlb}|LCK {lock}|BLK {blk}"
        )
    }
}
