//! Facts about the machine for meta.json.

pub fn hostname() -> String {
    read_trimmed("/proc/sys/kernel/hostname")
}

pub fn kernel() -> String {
    read_trimmed("/proc/sys/kernel/osrelease")
}

pub fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = info
        .lines()
        .find(|l| l.starts_with("model name") || l.starts_with("CPU part"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{model} ({cpus} CPUs)")
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// NUMA nodes with memory, from sysfs (1 on most VMs).
pub fn numa_nodes() -> usize {
    std::fs::read_dir("/sys/devices/system/node")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| {
                    let n = e.file_name();
                    let n = n.to_string_lossy();
                    n.starts_with("node") && n[4..].chars().all(|c| c.is_ascii_digit())
                })
                .count()
        })
        .unwrap_or(1)
        .max(1)
}

/// The online CPUs, from /sys/devices/system/cpu/online ("0-3,8-11").
pub fn online_cpus() -> Vec<u32> {
    let cpus = parse_cpu_list(&read_trimmed("/sys/devices/system/cpu/online"));
    if cpus.is_empty() {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        (0..n as u32).collect()
    } else {
        cpus
    }
}

/// A kernel CPU list ("0-3,8-11").
pub fn parse_cpu_list(text: &str) -> Vec<u32> {
    text.trim()
        .split(',')
        .filter_map(|r| {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            Some(a.trim().parse::<u32>().ok()?..=b.trim().parse::<u32>().ok()?)
        })
        .flatten()
        .collect()
}

/// CPU 0's data and unified caches, from sysfs, smallest first.
pub fn cache_levels() -> Vec<memlens_profile::CacheLevel> {
    cache_levels_in(std::path::Path::new("/sys/devices/system/cpu/cpu0/cache"))
}

fn cache_levels_in(dir: &std::path::Path) -> Vec<memlens_profile::CacheLevel> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut levels: Vec<memlens_profile::CacheLevel> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("index"))
        .filter_map(|e| {
            let field = |name: &str| {
                std::fs::read_to_string(e.path().join(name))
                    .map(|s| s.trim().to_string())
                    .unwrap_or_default()
            };
            let kind = field("type");
            if kind == "Instruction" {
                return None;
            }
            let level: u8 = field("level").parse().ok()?;
            Some(memlens_profile::CacheLevel {
                name: format!("L{level}{}", if kind == "Data" { "d" } else { "" }),
                level,
                size: memlens_rawlog::parse_size(field("size").as_bytes())?,
                ways: field("ways_of_associativity").parse().unwrap_or(0),
                line: field("coherency_line_size").parse().unwrap_or(64),
                shared_cpus: parse_cpu_list(&field("shared_cpu_list")).len().max(1) as u32,
            })
        })
        .collect();
    levels.sort_by_key(|l| (l.level, l.size));
    levels
}

/// CLOCK_REALTIME, ns since the Unix epoch.
pub(crate) fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

pub(crate) fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caches_are_read_from_a_sysfs_tree() {
        let dir = tempfile::tempdir().unwrap();
        for (i, level, kind, size, ways, shared) in [
            (0, "1", "Data", "48K", "12", "0"),
            (1, "1", "Instruction", "32K", "8", "0"),
            (2, "2", "Unified", "2048K", "16", "0"),
            (3, "3", "Unified", "32M", "16", "0-7"),
        ] {
            let d = dir.path().join(format!("index{i}"));
            std::fs::create_dir(&d).unwrap();
            for (name, value) in [
                ("level", level),
                ("type", kind),
                ("size", size),
                ("ways_of_associativity", ways),
                ("coherency_line_size", "64"),
                ("shared_cpu_list", shared),
            ] {
                std::fs::write(d.join(name), format!("{value}\n")).unwrap();
            }
        }
        let levels = cache_levels_in(dir.path());
        let summary: Vec<(&str, u64, u32, u32)> = levels
            .iter()
            .map(|l| (l.name.as_str(), l.size, l.ways, l.shared_cpus))
            .collect();
        assert_eq!(
            summary,
            [
                ("L1d", 48 << 10, 12, 1),
                ("L2", 2 << 20, 16, 1),
                ("L3", 32 << 20, 16, 8)
            ]
        );
    }
}
