//! What ran, where, with which backends, and how each process ended.

use crate::format::seconds;
use crate::report::model::{Section, Table};
use crate::report::Report;
use memlens_profile::Only;
use memlens_profile::Process;

pub fn section(r: &Report) -> Option<Section> {
    let s = &r.summary;
    let mut rows = vec![("command".to_string(), s.command.join(" "))];
    match s.only {
        Some(Only::Process(pid)) => rows.push(("view".into(), format!("process {pid} only"))),
        Some(Only::Thread(tid)) => rows.push((
            "view".into(),
            format!("thread {tid} only: its samples, regions, tags and exact counts; resident set, heap and objects are its process's"),
        )),
        None => {}
    }
    rows.push((
        "host".into(),
        format!("{} | {} | Linux {}", s.host, s.cpu, s.kernel),
    ));
    rows.push((
        "backend".into(),
        format!(
            "{} | duration {}",
            s.backend.join(" + "),
            seconds(s.duration_ns)
        ),
    ));
    let mut table = Table::key_value(rows);
    for p in &s.processes {
        let rank = p.rank.map(|r| format!(" rank {r}")).unwrap_or_default();
        let life = match (p.attached, p.end_ns) {
            (true, Some(end)) => format!(
                "attached at {}, ended at {} (its exit status went to its parent)",
                seconds(p.start_ns),
                seconds(end)
            ),
            (true, None) => format!(
                "attached at {}, still running when recording stopped",
                seconds(p.start_ns)
            ),
            (false, end) => format!(
                "from {} to {}, {}",
                seconds(p.start_ns),
                end.map(seconds).unwrap_or_else(|| "?".into()),
                exit_status(p)
            ),
        };
        let mut row: crate::report::model::Row = vec![
            format!("process {}", p.pid),
            format!("{} (parent {}{rank}) {life}", p.exe, p.ppid),
        ]
        .into();
        if let Some(u) = &p.usage {
            row = row.detail(format!(
                "cpu {} user + {} system (kernel's account at exit)",
                seconds(u.user_ns),
                seconds(u.system_ns),
            ));
        }
        table.push(row);
    }
    Some(Section::new("run", "Run").table(table))
}

/// How a process ended, as every output writes it.
pub(crate) fn exit_status(p: &Process) -> String {
    match (p.exit_code, p.signal) {
        (Some(c), _) => format!("exit {c}"),
        (_, Some(sig)) => format!("killed by signal {sig}"),
        _ => "exit status unknown".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::*;

    #[test]
    fn each_process_says_how_it_ended() {
        let mut p = two_blocks();
        let process = |p: &memlens_profile::Profile| {
            let s = section(p, "run");
            rows(&s).into_iter().find(|r| r[0] == "process 1").unwrap()[1].clone()
        };
        assert_eq!(
            process(&p),
            "/bin/app (parent 0) from 0.000 s to 0.100 s, exit 0"
        );
        (p.meta.processes[0].exit_code, p.meta.processes[0].signal) = (None, Some(9));
        assert_eq!(
            process(&p),
            "/bin/app (parent 0) from 0.000 s to 0.100 s, killed by signal 9"
        );
    }
}
