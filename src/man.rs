//! Manual pages: clap_mangen's sections, each command's examples (the
//! EXAMPLES its `--help` ends with) under EXAMPLES, where clap_mangen puts
//! them under "EXTRA" as one paragraph.

use std::io::{self, Write};
use std::path::Path;

/// The header a command's after-help starts with when it lists examples.
const EXAMPLES: &str = "EXAMPLES:";

/// Writes `cmd`'s page.
pub fn write_page(cmd: &clap::Command, out: &mut dyn Write) -> io::Result<()> {
    let mut cmd = cmd.clone();
    cmd.build();
    let version = env!("CARGO_PKG_VERSION");
    let man = clap_mangen::Man::new(cmd.clone()).source(format!("memlens {version}"));
    let mut page = Vec::new();
    let w: &mut dyn Write = &mut page;
    man.render_title(w)?;
    man.render_name_section(w)?;
    man.render_synopsis_section(w)?;
    man.render_description_section(w)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(w)?;
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        man.render_subcommands_section(w)?;
    }
    if let Some(after) = cmd.get_after_help().map(|a| a.to_string()) {
        match after.strip_prefix(EXAMPLES) {
            Some(examples) => write_examples(examples, w)?,
            None => man.render_extra_section(w)?,
        }
    }
    if cmd.get_version().is_some() {
        man.render_version_section(w)?;
    }
    // Each section rendered alone starts with the same string definitions:
    // the first one serves them all.
    let mut seen = Vec::new();
    for line in String::from_utf8_lossy(&page).lines() {
        if line.contains(".ds Aq") {
            if seen.contains(&line) {
                continue;
            }
            seen.push(line);
        }
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// The examples, one command line each, as lines to type.
fn write_examples(examples: &str, w: &mut dyn Write) -> io::Result<()> {
    writeln!(w, ".SH EXAMPLES\n.RS 4\n.nf")?;
    for line in examples.lines().map(str::trim).filter(|l| !l.is_empty()) {
        // Backslashes and hyphens as roff prints them literally (a hyphen
        // would become a dash that breaks the command when pasted).
        let line = line.replace('\\', "\\e").replace('-', "\\-");
        writeln!(w, "\\&{line}")?;
    }
    writeln!(w, ".fi\n.RE")
}

/// Writes the page of `cmd` and of each of its subcommands into `dir`
/// (memlens.1, memlens-record.1, ...).
pub fn write_pages(cmd: clap::Command, dir: &Path) -> io::Result<()> {
    fn write_tree(cmd: &clap::Command, dir: &Path) -> io::Result<()> {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            write_tree(sub, dir)?;
        }
        let name = clap_mangen::Man::new(cmd.clone()).get_filename();
        let mut file = io::BufWriter::new(std::fs::File::create(dir.join(name))?);
        write_page(cmd, &mut file)?;
        file.flush()
    }
    // Built, so that each subcommand's page is titled by its full name.
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    write_tree(&cmd, dir)
}
