//! The memory levels memlens reports, whatever the hardware called them.

/// Where an access was served from. Stored as its `u8` code in the profile's
/// `samples.level` column.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum MemLevel {
    #[default]
    Unknown = 0,
    L1 = 1,
    /// A line fill buffer / miss address buffer: the line was already on its way.
    FillBuffer = 2,
    L2 = 3,
    /// Last-level cache (L3 or a system cache).
    Llc = 4,
    LocalDram = 5,
    RemoteDram = 6,
    /// Another core's cache on the same node or socket.
    PeerCache = 7,
    /// A cache on another node or socket.
    RemoteCache = 8,
    /// I/O, uncached, persistent or CXL memory.
    Other = 9,
}

impl MemLevel {
    pub const ALL: [MemLevel; 10] = [
        MemLevel::Unknown,
        MemLevel::L1,
        MemLevel::FillBuffer,
        MemLevel::L2,
        MemLevel::Llc,
        MemLevel::LocalDram,
        MemLevel::RemoteDram,
        MemLevel::PeerCache,
        MemLevel::RemoteCache,
        MemLevel::Other,
    ];

    pub fn from_code(code: u8) -> MemLevel {
        Self::ALL
            .get(usize::from(code))
            .copied()
            .unwrap_or(MemLevel::Unknown)
    }

    pub const fn code(self) -> u8 {
        self as u8
    }

    pub fn name(self) -> &'static str {
        match self {
            MemLevel::Unknown => "unknown",
            MemLevel::L1 => "L1",
            MemLevel::FillBuffer => "fill buffer",
            MemLevel::L2 => "L2",
            MemLevel::Llc => "LLC",
            MemLevel::LocalDram => "local DRAM",
            MemLevel::RemoteDram => "remote DRAM",
            MemLevel::PeerCache => "peer cache",
            MemLevel::RemoteCache => "remote cache",
            MemLevel::Other => "other (I/O, uncached, PMEM, CXL)",
        }
    }
}
