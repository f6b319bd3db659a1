//! What produced a profile's data: each backend's one name, as `meta.json`
//! lists it and every output shows it.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, schemars::JsonSchema, Deserialize)]
#[serde(into = "&'static str", try_from = "String")]
pub enum Backend {
    /// The preloaded runtime: allocations, regions, tags, exact counts.
    Preload,
    /// `/proc/PID/status` read every interval: the resident set.
    Procfs,
    /// Instrumented builds (`memlens cc`): exact bytes, sampled accesses.
    Instrumented,
    /// Intel PEBS load latency and precise stores.
    Pebs,
    /// AMD IBS op sampling.
    Ibs,
    /// Arm Statistical Profiling Extension.
    Spe,
    /// The kernel's page-fault event with data addresses: first touches.
    PageFaults,
    /// Samples read from a `perf record` file by `memlens import`.
    PerfDataImport,
}

impl Backend {
    pub const ALL: [Backend; 8] = [
        Backend::Preload,
        Backend::Procfs,
        Backend::Instrumented,
        Backend::Pebs,
        Backend::Ibs,
        Backend::Spe,
        Backend::PageFaults,
        Backend::PerfDataImport,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Backend::Preload => "preload",
            Backend::Procfs => "procfs",
            Backend::Instrumented => "instrumented",
            Backend::Pebs => "pebs",
            Backend::Ibs => "ibs",
            Backend::Spe => "spe",
            Backend::PageFaults => "page-faults",
            Backend::PerfDataImport => "perf.data import",
        }
    }

    /// Names for prose: "pebs, spe".
    pub fn list(backends: &[Backend]) -> String {
        let names: Vec<&str> = backends.iter().map(|b| b.name()).collect();
        names.join(", ")
    }

    /// The backend of a name, or of the name profiles written before
    /// 2026-12-06 gave it ("sancov", after the clang pass the first builds used).
    pub fn from_name(name: &str) -> Option<Backend> {
        match name {
            "sancov" => Some(Backend::Instrumented),
            _ => Backend::ALL.into_iter().find(|b| b.name() == name),
        }
    }

    /// It takes samples of memory accesses (or of first touches).
    pub fn samples_accesses(self) -> bool {
        matches!(
            self,
            Backend::Instrumented
                | Backend::Pebs
                | Backend::Ibs
                | Backend::Spe
                | Backend::PageFaults
        )
    }

    /// A PMU takes its samples and measures their levels and latencies.
    pub fn is_hardware(self) -> bool {
        matches!(self, Backend::Pebs | Backend::Ibs | Backend::Spe)
    }
}

impl From<Backend> for &'static str {
    fn from(b: Backend) -> &'static str {
        b.name()
    }
}

impl TryFrom<String> for Backend {
    type Error = String;

    fn try_from(name: String) -> Result<Backend, String> {
        Backend::from_name(&name).ok_or_else(|| format!("unknown backend {name:?}"))
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl crate::Meta {
    /// The profile's backends memlens knows, in the order recorded.
    pub fn backends(&self) -> impl Iterator<Item = Backend> + '_ {
        self.backend.iter().filter_map(|b| Backend::from_name(b))
    }

    pub fn has(&self, backend: Backend) -> bool {
        self.backends().any(|b| b == backend)
    }
}

#[cfg(test)]
mod tests {
    use super::Backend;

    #[test]
    fn names_round_trip_and_match_serde() {
        for b in Backend::ALL {
            assert_eq!(Backend::from_name(b.name()), Some(b));
            let json = serde_json::to_string(&b).unwrap();
            assert_eq!(json, format!("\"{b}\""));
            assert_eq!(serde_json::from_str::<Backend>(&json).unwrap(), b);
        }
        assert_eq!(Backend::from_name("nope"), None);
        assert_eq!(Backend::from_name("sancov"), Some(Backend::Instrumented));
        assert_eq!(
            serde_json::from_str::<Backend>("\"sancov\"").unwrap(),
            Backend::Instrumented
        );
    }
}
