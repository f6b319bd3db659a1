//! PMUs as sysfs describes them (/sys/bus/event_source/devices): their type
//! numbers, the format fields that place an event's terms into config, config1
//! and config2, their named events and capabilities. This is how perf turns
//! `arm_spe_0/ts_enable=1,load_filter=1/` or `cpu/mem-loads,ldlat=30/` into an
//! attr, and how memlens does it without a table of CPU models.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const SYSFS: &str = "/sys/bus/event_source/devices";

#[derive(Clone, Debug)]
pub struct Pmu {
    pub name: String,
    pub type_: u32,
    dir: PathBuf,
}

/// An event's configuration words.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Config {
    pub config: u64,
    pub config1: u64,
    pub config2: u64,
}

impl Pmu {
    pub fn open(name: &str) -> Option<Pmu> {
        Self::open_in(Path::new(SYSFS), name)
    }

    pub fn open_in(root: &Path, name: &str) -> Option<Pmu> {
        let dir = root.join(name);
        let type_ = std::fs::read_to_string(dir.join("type"))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        Some(Pmu {
            name: name.to_string(),
            type_,
            dir,
        })
    }

    /// Every PMU whose name starts with `prefix` (arm_spe_0, uncore_imc_3, ...).
    pub fn all(prefix: &str) -> Vec<Pmu> {
        let mut names: Vec<String> = std::fs::read_dir(SYSFS)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(prefix))
            .collect();
        names.sort();
        names.iter().filter_map(|n| Pmu::open(n)).collect()
    }

    /// A named event's definition (`event=0xcd,umask=0x1,ldlat=3`).
    pub fn event(&self, name: &str) -> Option<String> {
        Some(
            std::fs::read_to_string(self.dir.join("events").join(name))
                .ok()?
                .trim()
                .to_string(),
        )
    }

    /// A named event's scale and unit, when sysfs gives them (uncore CAS counts).
    pub fn event_scale(&self, name: &str) -> Option<(f64, String)> {
        let read = |ext: &str| {
            std::fs::read_to_string(self.dir.join("events").join(format!("{name}.{ext}")))
        };
        let scale = read("scale").ok()?.trim().parse().ok()?;
        Some((scale, read("unit").unwrap_or_default().trim().to_string()))
    }

    /// The CPUs an uncore PMU counts from (its `cpumask`, one per socket).
    pub fn cpumask(&self) -> Vec<u32> {
        let text = std::fs::read_to_string(self.dir.join("cpumask")).unwrap_or_default();
        crate::sysinfo::parse_cpu_list(&text)
    }

    pub fn has_format(&self, term: &str) -> bool {
        self.dir.join("format").join(term).is_file()
    }

    /// A capability file (`caps/min_interval`, `caps/pmu_name`).
    pub fn cap(&self, name: &str) -> Option<String> {
        Some(
            std::fs::read_to_string(self.dir.join("caps").join(name))
                .ok()?
                .trim()
                .to_string(),
        )
    }

    /// Places `terms` (`name=value` or a bare `name` for 1, or a named event of
    /// this PMU) into the config words using the PMU's format files.
    pub fn resolve(&self, terms: &str) -> Result<Config, String> {
        let mut out = Config::default();
        for term in terms.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (name, value) = match term.split_once('=') {
                Some((n, v)) => (n.trim(), parse_number(v.trim())?),
                None if !self.has_format(term) => {
                    let def = self.event(term).ok_or_else(|| {
                        format!("{}: no format field or event named '{term}'", self.name)
                    })?;
                    let sub = self.resolve(&def)?;
                    out.config |= sub.config;
                    out.config1 |= sub.config1;
                    out.config2 |= sub.config2;
                    continue;
                }
                None => (term, 1),
            };
            let format = std::fs::read_to_string(self.dir.join("format").join(name))
                .map_err(|_| format!("{}: no format field '{name}'", self.name))?;
            place(&mut out, format.trim(), value)
                .map_err(|e| format!("{}: format of '{name}' ({e})", self.name))?;
        }
        Ok(out)
    }
}

fn parse_number(v: &str) -> Result<u64, String> {
    match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    }
    .map_err(|_| format!("'{v}' is not a number"))
}

/// Places `value` into the bits a format string names: `config:0-7`,
/// `config1:0-15`, or several ranges `config:0-7,32-35` filled low bits first.
fn place(out: &mut Config, format: &str, mut value: u64) -> Result<(), String> {
    let (word, ranges) = format.split_once(':').ok_or("no ':'")?;
    let target = match word {
        "config" => &mut out.config,
        "config1" => &mut out.config1,
        "config2" => &mut out.config2,
        other => return Err(format!("unknown word {other}")),
    };
    for range in ranges.split(',') {
        let (lo, hi) = match range.split_once('-') {
            Some((a, b)) => (a.parse::<u32>(), b.parse::<u32>()),
            None => (range.parse::<u32>(), range.parse::<u32>()),
        };
        let (Ok(lo), Ok(hi)) = (lo, hi) else {
            return Err(format!("bad range {range}"));
        };
        if lo > hi || hi > 63 {
            return Err(format!("bad range {range}"));
        }
        let width = hi - lo + 1;
        let mask = if width == 64 {
            u64::MAX
        } else {
            (1u64 << width) - 1
        };
        *target |= (value & mask) << lo;
        value = value.checked_shr(width).unwrap_or(0);
    }
    Ok(())
}

/// All format fields of a PMU, for `memlens doctor`.
pub fn formats(pmu: &Pmu) -> BTreeMap<String, String> {
    std::fs::read_dir(pmu.dir.join("format"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = std::fs::read_to_string(e.path()).ok()?;
            Some((
                e.file_name().to_string_lossy().into_owned(),
                v.trim().to_string(),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PMU directory as the kernel's arm_spe driver lays it out (format
    /// strings from drivers/perf/arm_spe_pmu.c).
    fn spe_like(root: &Path) -> Pmu {
        let dir = root.join("arm_spe_0");
        std::fs::create_dir_all(dir.join("format")).unwrap();
        std::fs::write(dir.join("type"), "8\n").unwrap();
        for (name, f) in [
            ("ts_enable", "config:0"),
            ("pa_enable", "config:1"),
            ("pct_enable", "config:2"),
            ("jitter", "config:16"),
            ("branch_filter", "config:32"),
            ("load_filter", "config:33"),
            ("store_filter", "config:34"),
            ("event_filter", "config1:0-63"),
            ("min_latency", "config2:0-11"),
        ] {
            std::fs::write(dir.join("format").join(name), format!("{f}\n")).unwrap();
        }
        Pmu::open_in(root, "arm_spe_0").unwrap()
    }

    #[test]
    fn terms_land_in_the_bits_their_format_names() {
        let root = tempfile::tempdir().unwrap();
        let spe = spe_like(root.path());
        assert_eq!(spe.type_, 8);
        let c = spe
            .resolve("ts_enable=1,pa_enable,load_filter=1,store_filter=1,jitter=1,min_latency=0x40")
            .unwrap();
        assert_eq!(c.config, 1 | 2 | 1 << 16 | 1 << 33 | 1 << 34);
        assert_eq!(c.config2, 0x40);
        // Values wider than the field are cut to it, as perf does.
        assert_eq!(spe.resolve("min_latency=0x1fff").unwrap().config2, 0xfff);
        assert!(spe
            .resolve("no_such_term=1")
            .unwrap_err()
            .contains("no_such_term"));
        assert!(spe.resolve("ts_enable=x").is_err());
    }

    #[test]
    fn split_fields_fill_low_bits_first() {
        let mut c = Config::default();
        place(&mut c, "config:0-7,32-35", 0xabc).unwrap();
        assert_eq!(c.config, 0xbc | 0xa << 32);
        assert!(place(&mut c, "config:9-3", 1).is_err());
        assert!(place(&mut c, "config3:0", 1).is_err());
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn named_events_of_this_machine_resolve() {
        // The msr PMU exists on x86 machines, VMs included; which of its
        // events a kernel lists varies (this VM has only tsc), so each listed
        // event must resolve to the value its own file gives.
        let msr = Pmu::open("msr").expect("an msr PMU in sysfs");
        let events = std::fs::read_dir(msr.dir.join("events")).unwrap();
        let mut seen = 0;
        for name in events
            .flatten()
            .map(|e| e.file_name().into_string().unwrap())
        {
            let def = msr.event(&name).unwrap();
            let value = def.strip_prefix("event=").expect(&def);
            let value = u64::from_str_radix(value.trim_start_matches("0x"), 16).unwrap();
            assert_eq!(msr.resolve(&name).unwrap().config, value, "{name}: {def}");
            seen += 1;
        }
        assert!(seen > 0, "the msr PMU lists no events");
        // Its one format field is the whole config word.
        assert_eq!(msr.resolve("event=0x4").unwrap().config, 0x4);
    }
}
