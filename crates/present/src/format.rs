//! How figures are written in every output: sizes, times, counts, rates.

/// An object's peak as the report prints it: `~` before a sampled and
/// scaled figure, `≥` before one known only to be at least this.
pub fn object_peak(o: &memlens_analysis::DataObject) -> String {
    let bound = if o.peak_bytes_at_most.is_some() {
        "≥"
    } else {
        ""
    };
    format!("{}{bound}{}", estimate_mark(o), human_bytes(o.peak_bytes))
}

/// `~` for an object whose figures are sampled and scaled.
pub fn estimate_mark(o: &memlens_analysis::DataObject) -> &'static str {
    if o.provenance == memlens_analysis::Provenance::SampledScaled {
        "~"
    } else {
        ""
    }
}

/// 1536 -> "1.5 KiB".
pub fn human_bytes(b: f64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    // + 0.0: an empty sum of floats is -0.0, which would print as "-0 B".
    let mut v = b + 0.0;
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
    let v = v + 0.0; // not "-0" for an empty sum
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

/// The unit a counter's rate is drawn in and the factor from its unit per
/// second to it: CPU time per second is a number of busy CPUs, bytes per
/// second GiB/s, anything else its unit per second.
pub fn counter_rate_unit(unit: &str) -> (f64, String) {
    match unit {
        "ns" => (1e-9, "CPUs busy".to_string()),
        "bytes" => (1.0 / (1u64 << 30) as f64, "GiB/s".to_string()),
        u => (1.0, format!("{u}/s")),
    }
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

/// `s` in at most `n` characters, shortened where it says least: a name of
/// code first loses its functions' argument lists, then their template
/// arguments (each becomes `…`), then its outermost callers (`A ← B ← …`),
/// and only then characters from its middle, so that what tells names apart
/// (the functions nearest the allocation and their lines) stays.
pub fn shorten(s: &str, n: usize) -> String {
    let fits = |s: &str| s.chars().count() <= n;
    if fits(s) {
        return s.to_string();
    }
    let mut short = elide_groups(s, '(', ')');
    if !fits(&short) {
        short = elide_groups(&short, '<', '>');
    }
    // Then the outermost callers: the frames nearest the allocation or the
    // access tell sites apart (five vectors of one allocating template differ
    // by their callers' lines, not by `main`).
    let frames: Vec<String> = short.split(" ← ").map(str::to_string).collect();
    for kept in (1..frames.len()).rev() {
        if fits(&short) {
            break;
        }
        short = format!("{} ← …", frames[..kept].join(" ← "));
    }
    if fits(&short) {
        return short;
    }
    cut_in_the_middle(&short, n)
}

/// Keeps the first and last characters of `s`, `n` in all with the `…`
/// that stands for the middle.
fn cut_in_the_middle(s: &str, n: usize) -> String {
    let chars: Vec<char> = s.chars().collect();
    let keep = n.saturating_sub(1);
    let head = keep.div_ceil(2);
    let tail = keep - head;
    let mut cut: String = chars[..head].iter().collect();
    cut.push('…');
    cut.extend(&chars[chars.len() - tail..]);
    cut
}

/// Replaces what each outermost `open … close` group right after a name
/// holds by `…`: a function's argument list (`f(int, char*)` → `f(…)`) or
/// template arguments (`Alloc<double>` → `Alloc<…>`). A group after a space
/// (` (file.c:12)`) or an operator's name (`operator<`) is left, and so is
/// one that does not close.
fn elide_groups(s: &str, open: char, close: char) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let operator = format!("operator{open}");
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        out.push(c);
        let after_name = i > 0 && !chars[i - 1].is_whitespace() && chars[i - 1] != open;
        let after_operator = out.ends_with(&operator);
        if c != open || !after_name || after_operator {
            i += 1;
            continue;
        }
        let mut depth = 0;
        let mut end = None;
        for (j, &d) in chars.iter().enumerate().skip(i) {
            if d == open {
                depth += 1;
            } else if d == close {
                depth -= 1;
                if depth == 0 {
                    end = Some(j);
                    break;
                }
            }
        }
        match end {
            Some(j) if j > i + 1 => {
                out.push('…');
                out.push(close);
                i = j + 1;
            }
            _ => i += 1,
        }
    }
    out
}

/// A context as `access ← caller ← ...`, its first frames only, shortened
/// as names are (argument lists go first, lines stay).
pub fn context_path(frames: &[String]) -> String {
    const WIDTH: usize = 200;
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
    shorten(&path, WIDTH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_bytes_picks_units() {
        assert_eq!(human_bytes(512.0), "512 B");
        assert_eq!(human_bytes(std::iter::empty::<f64>().sum()), "0 B");
        assert_eq!(count(std::iter::empty::<f64>().sum()), "0");
        assert_eq!(human_bytes(1536.0), "1.5 KiB");
        assert_eq!(human_bytes(3.0 * 1024.0 * 1024.0 * 1024.0), "3.0 GiB");
    }

    #[test]
    fn cuts_are_marked_and_made_where_names_say_least() {
        assert_eq!(shorten("main (stream.c:35)", 18), "main (stream.c:35)");
        assert_eq!(shorten("main (stream.c:35)", 16), "main (st…m.c:35)");
        assert_eq!(shorten("état", 3), "é…t");
        // Five vectors allocated through one template differ by their
        // callers' lines: argument lists go first, then template arguments,
        // then the outermost callers; never a line number while one fits.
        let name = "double* Alloc<double>(unsigned long) (x.h:113) ← ComputeForces(Mesh&, double*, double*, int) (forces.cc:40) ← main (main.cc:12)";
        assert_eq!(
            shorten(name, 110),
            "double* Alloc<double>(…) (x.h:113) ← ComputeForces(…) (forces.cc:40) ← main (main.cc:12)"
        );
        assert_eq!(
            shorten(name, 70),
            "double* Alloc<…>(…) (x.h:113) ← ComputeForces(…) (forces.cc:40) ← …"
        );
        assert_eq!(shorten(name, 40), "double* Alloc<…>(…) (x.h:113) ← …");
        assert_eq!(shorten(name, 20).chars().count(), 20);
        assert_eq!(
            shorten("bool operator<(A const&, A const&) (a.h:3)", 30),
            "bool operator<(…) (a.h:3)"
        );
        assert_eq!(
            shorten("std::vector<int, std::allocator<int> >::_M_realloc_insert<int const&>(__gnu_cxx::__normal_iterator<int*, std::vector<int> >, int const&) (stl_vector.h:1287)", 80),
            "std::vector<…>::_M_realloc_insert<…>(…) (stl_vector.h:1287)"
        );
        // A group that does not close, or after a space, is left.
        assert_eq!(
            shorten("f(unclosed (a.c:1) and more text", 25)
                .chars()
                .count(),
            25
        );
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
        let long = vec!["f(double*, double*, double*, double*, double*, double*, double*, double*, double*, double*, double*, double*, double*) (x.cc:12)".to_string(); 3];
        assert_eq!(
            context_path(&long),
            "f(…) (x.cc:12) ← f(…) (x.cc:12) ← f(…) (x.cc:12)"
        );
    }
}
