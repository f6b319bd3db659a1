//! `memlens doctor`: what this machine lets memlens do, each missing piece with
//! its reason and the exact fix. Every line comes from a real check: a file
//! found, or an event opened (disabled, on memlens itself).

use crate::compile;
use memlens_collector::perf::backends::{self, Kind, Options};
use memlens_collector::perf::counters;
use std::path::PathBuf;

/// One check's outcome: `Ok(detail)` or `Err((reason, fix))`.
type Check = Result<String, (String, String)>;

fn line(out: &mut String, name: &str, check: &Check) {
    use std::fmt::Write;
    match check {
        Ok(detail) => {
            let _ = writeln!(out, "  {name:<22} ok           {detail}");
        }
        Err((reason, fix)) => {
            let _ = writeln!(out, "  {name:<22} unavailable  {reason}");
            let _ = writeln!(out, "  {:<22}              fix: {fix}", "");
        }
    }
}

pub fn report(runtime: anyhow::Result<PathBuf>) -> String {
    let mut out = String::new();
    let kernel = memlens_collector::sysinfo::kernel();
    let paranoid = backends::paranoid();
    out.push_str("memlens doctor: what this machine can do\n\n");
    out.push_str(&format!(
        "  kernel {kernel}, {}, kernel.perf_event_paranoid = {}\n\n",
        memlens_collector::sysinfo::cpu_model(),
        paranoid.map_or("unknown".into(), |p| p.to_string())
    ));
    // The counters answer for perf events in general (task-clock) and for a
    // hardware PMU (instructions).
    let counters: Vec<(counters::Spec, Check)> = counters::probe()
        .into_iter()
        .map(|(spec, opened)| {
            let check = opened
                .map(|_| spec.method.clone())
                .map_err(|u| (u.reason, u.fix));
            (spec, check)
        })
        .collect();
    let counter = |name: &str| {
        counters
            .iter()
            .find(|(spec, _)| spec.name == name)
            .map(|(_, check)| check.clone())
            .expect("counters::probe lists task-clock and instructions")
    };
    out.push_str("PERF EVENTS\n");
    line(
        &mut out,
        "perf_event_open",
        &counter("task-clock").map(|_| "task-clock opens".to_string()),
    );
    let pmu = counter("instructions").map_err(|(reason, _)| {
        (
            format!("no hardware PMU events ({reason})"),
            "run on bare metal, or give the VM a virtual PMU (KVM: -cpu host,pmu=on; VMware: virtualize CPU performance counters; cloud: a bare-metal or PMU-enabled instance type)".into(),
        )
    });
    line(
        &mut out,
        "hardware PMU",
        &pmu.map(|_| "instructions opens".to_string()),
    );

    out.push_str("\nACCESS SAMPLING BACKENDS\n");
    let runtime = runtime.and_then(|r| match r.is_file() {
        true => Ok(r),
        false => anyhow::bail!("runtime library missing at {}", r.display()),
    });
    let sancov: Check = match (compile::find_clang(false), runtime) {
        (_, Err(e)) => Err((
            format!("{e:#}"),
            "set MEMLENS_RUNTIME to the runtime library".into(),
        )),
        (Err(e), _) => Err((e.to_string(), "apt-get install clang-16 lld-16".into())),
        (Ok(clang), Ok(_)) => Ok({
            let version = compile::llvm_major(&clang).map_or("N".to_string(), |m| m.to_string());
            let lld = match (compile::lto_linker(&clang), compile::find_lld(&clang)) {
                (Some(_), _) => "with ld.lld: `memlens cc` inlines the fast path".to_string(),
                (None, Some(_)) => "without link-time optimization (MEMLENS_LTO=0, or LLVM 14's lld): `memlens cc` works, slower".to_string(),
                (None, None) => format!("no ld.lld beside it: `memlens cc` works, slower; apt-get install lld-{version}"),
            };
            let pass = match compile::has_llvm_config(&clang) {
                true => "its llvm-config builds the pass (per-block counts, atomics)".to_string(),
                false => format!("no llvm-config: a callback per access, atomics not counted; apt-get install llvm-{version}-dev"),
            };
            format!("{} (LLVM {version}) {lld}; {pass}", clang.display())
        }),
    };
    line(&mut out, "software (memlens cc)", &sancov);
    line(
        &mut out,
        "software (memlens gcc)",
        &compile::gcc_doctor_check(),
    );
    let options = Options {
        period: 0,
        min_latency: 0,
        loads: true,
        stores: true,
        aux_kib: 0,
        aux_watermark: 0,
    };
    let mut best = None;
    for kind in Kind::HARDWARE.into_iter().chain([Kind::PageFaults]) {
        let check = backends::plan(kind, &options)
            .map(|plan| {
                let events: Vec<&str> = plan.events.iter().map(|(n, _)| n.as_str()).collect();
                format!("{} (1 in {})", events.join(" + "), plan.period)
            })
            .map_err(|u| (u.reason, u.fix));
        if check.is_ok() && best.is_none() && kind != Kind::PageFaults {
            best = Some(kind);
        }
        line(&mut out, kind.name(), &check);
    }

    out.push_str("\nCOUNTERS (read every interval by memlens record)\n");
    for (spec, check) in &counters {
        line(&mut out, &spec.name, check);
    }
    let faults = if counters::ProcFaults::available() {
        Ok(counters::ProcFaults::METHOD.to_string())
    } else {
        Err((
            "/proc/PID/stat gives no fault counts here".to_string(),
            "mount procfs at /proc".to_string(),
        ))
    };
    line(&mut out, counters::ProcFaults::NAME, &faults);

    out.push_str("\nMEMLENS RECORD WILL USE\n");
    out.push_str(&format!(
        "  instrumented programs (memlens cc): their own exact counts and samples\n  other programs: {}\n  capacity (heap, mmaps, RSS): always, through the preloaded runtime and /proc\n",
        match best {
            Some(k) => format!("{} hardware samples (--backend {})", k.name(), k.name()),
            None => "no access samples (no hardware sampler here); `--backend page-faults` gives first touches of pages".into(),
        }
    ));
    out
}
