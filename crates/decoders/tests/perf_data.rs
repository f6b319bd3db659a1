//! The perf.data reader against files Linux perf writes on this machine, in file
//! and pipe mode: every sample it reads equals what `perf script` prints.

use memlens_decoders::perf_data::{Item, PerfData};
use memlens_decoders::record::{kind, Parsed};
use std::process::Command;

/// (tid, ip, addr) of every sample, as `perf script` prints them.
fn perf_script(file: &std::path::Path) -> Vec<(u32, u64, u64)> {
    let out = Command::new("perf")
        .args(["script", "-F", "tid,ip,addr", "-i"])
        .arg(file)
        .output()
        .expect("perf is installed by .ci/run (linux-perf)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut v: Vec<_> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let hex = |s: &str| u64::from_str_radix(s, 16).unwrap();
            (f[0].parse().unwrap(), hex(f[2]), hex(f[1]))
        })
        .collect();
    v.sort_unstable();
    v
}

fn ours(bytes: &[u8]) -> (Vec<(u32, u64, u64)>, Vec<String>) {
    let perf = PerfData::parse(bytes).unwrap();
    let mut samples = Vec::new();
    let mut comms = Vec::new();
    for item in perf.items() {
        let Item::Record(r) = item.unwrap() else {
            continue;
        };
        if r.kind == kind::SAMPLE {
            let (_, s) = perf.sample(r.body).unwrap();
            let s = s.unwrap();
            assert_eq!(perf.sample_time(r.body), s.time);
            samples.push((s.tid.unwrap(), s.ip.unwrap(), s.addr.unwrap()));
        } else if let Some(Parsed::Comm { name, .. }) = r.parse() {
            comms.push(String::from_utf8_lossy(name).into_owned());
        }
    }
    samples.sort_unstable();
    (samples, comms)
}

#[test]
fn samples_of_perf_recorded_files_equal_perf_script_in_file_and_pipe_mode() {
    let dir = tempfile::tempdir().unwrap();
    for pipe in [false, true] {
        let file = dir
            .path()
            .join(if pipe { "pipe.data" } else { "file.data" });
        // Software page faults with data addresses work without a PMU; two
        // events so samples must be told apart by their ids.
        let mut cmd = Command::new("perf");
        cmd.args([
            "record",
            "-q",
            "-e",
            "page-faults,minor-faults",
            "-c",
            "1",
            "-d",
        ]);
        if pipe {
            cmd.args(["-o", "-"])
                .stdout(std::fs::File::create(&file).unwrap());
        } else {
            cmd.arg("-o").arg(&file);
        }
        let status = cmd
            .args(["--", "sh", "-c", "echo memlens-perf-data-test > /dev/null"])
            .status()
            .unwrap();
        assert!(status.success());
        let bytes = std::fs::read(&file).unwrap();
        let (samples, comms) = ours(&bytes);
        assert!(samples.len() > 20, "{} samples", samples.len());
        assert_eq!(samples, perf_script(&file), "pipe mode {pipe}");
        assert!(comms.iter().any(|c| c == "sh"), "{comms:?}");
        let perf = PerfData::parse(&bytes).unwrap();
        assert_eq!(perf.events.len(), 2);
        // perf adds the ":u" modifier itself when perf_event_paranoid keeps
        // a non-root user out of the kernel.
        let name = perf.events[0].name.as_deref();
        assert!(
            matches!(name, Some("page-faults" | "page-faults:u")),
            "{name:?}"
        );
        assert_eq!(perf.events[0].attr.period(), Some(1));
        assert!(perf
            .cmdline()
            .iter()
            .any(|a| a == "page-faults,minor-faults"));
    }
}
