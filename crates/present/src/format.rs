//! How figures are written in every output: sizes, times, counts, rates.

/// 1536 -> "1.5 KiB".
pub fn human_bytes(b: f64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b;
    let mut u = 0;
    while v.abs() >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{v:.0} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Nanoseconds as seconds with millisecond precision.
pub fn seconds(ns: u64) -> String {
    format!("{:.3} s", ns as f64 / 1e9)
}

/// A duration in the unit that suits it.
pub fn duration(ns: f64) -> String {
    match ns {
        n if n < 1e3 => format!("{n:.0} ns"),
        n if n < 1e6 => format!("{:.1} us", n / 1e3),
        n if n < 1e9 => format!("{:.2} ms", n / 1e6),
        n => format!("{:.3} s", n / 1e9),
    }
}

/// A count as printed: plain below a million.
pub fn count(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2} M", v / 1e6)
    } else {
        format!("{v:.0}")
    }
}

/// Bytes per second.
pub fn rate(bytes_per_s: f64) -> String {
    format!("{}/s", human_bytes(bytes_per_s))
}

/// A counter's value in its unit: bytes and ns in human units, counts plain.
pub fn counter_value(v: f64, unit: &str) -> String {
    match unit {
        "bytes" => human_bytes(v),
        "ns" => seconds(v as u64),
        _ if v >= 1e9 => format!("{:.2} G", v / 1e9),
        _ if v >= 1e6 => format!("{:.2} M", v / 1e6),
        _ => format!("{v:.0}"),
    }
}

/// "1 sample", "2 samples": `n` and the noun, plural unless one.
pub fn counted(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// An optional figure, "-" when absent.
pub fn or_dash<T>(v: Option<T>, shown: impl Fn(T) -> String) -> String {
    v.map_or_else(|| "-".to_string(), shown)
}

/// At most `n` characters, the last one `…` when some were cut.
pub fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let mut cut: String = s.chars().take(n.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// A context as `access ← caller ← ...`, its first frames only.
pub fn context_path(frames: &[String]) -> String {
    const SHOWN: usize = 4;
    let mut path = frames
        .iter()
        .take(SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(" ← ");
    if frames.len() > SHOWN {
        path += " ← …";
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_bytes_picks_units() {
        assert_eq!(human_bytes(512.0), "512 B");
        assert_eq!(human_bytes(1536.0), "1.5 KiB");
        assert_eq!(human_bytes(3.0 * 1024.0 * 1024.0 * 1024.0), "3.0 GiB");
    }

    #[test]
    fn cuts_are_marked() {
        assert_eq!(truncate("main (stream.c:35)", 18), "main (stream.c:35)");
        assert_eq!(truncate("main (stream.c:35)", 16), "main (stream.c:…");
        assert_eq!(truncate("état", 3), "ét…");
    }

    #[test]
    fn units_follow_the_size() {
        assert_eq!(duration(999.0), "999 ns");
        assert_eq!(duration(1.5e6), "1.50 ms");
        assert_eq!(count(2.5e6), "2.50 M");
        assert_eq!(counter_value(3e9, "events"), "3.00 G");
        assert_eq!(counter_value(2048.0, "bytes"), "2.0 KiB");
        assert_eq!(or_dash(None::<u64>, |v| v.to_string()), "-");
        let frames: Vec<String> = ["a", "b", "c", "d", "e"].map(String::from).into();
        assert_eq!(context_path(&frames[..2]), "a ← b");
        assert_eq!(context_path(&frames), "a ← b ← c ← d ← …");
    }
}
