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
