//! The architecture as docs/architecture.md describes it: every crate
//! named, crates using only the layers below them, modules within a crate
//! without import loops, every MEMLENS_* variable in the options table.

mod common;
use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

#[test]
fn the_architecture_docs_name_every_crate() {
    // README's architecture section and docs/architecture.md's table name
    // each crate of the workspace.
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let section = readme
        .split("## Architecture")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("README has an Architecture section");
    let table = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    for entry in std::fs::read_dir(root().join("crates")).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        assert!(
            section.contains(&format!("`{name}`")),
            "README's architecture omits {name}"
        );
        assert!(
            table.contains(&format!("`crates/{name}`")),
            "docs/architecture.md omits {name}"
        );
    }
}

#[test]
fn the_crates_use_only_the_layers_below_them() {
    // docs/architecture.md's "Layers" list is each crate's memlens-*
    // dependencies, exactly.
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let layers = doc.split("## Layers").nth(1).expect("a Layers section");
    let mut listed = 0;
    for line in layers.lines().filter_map(|l| l.strip_prefix("- `")) {
        let (name, uses) = line.split_once("`: ").unwrap();
        let mut documented: Vec<String> = (uses.split(", "))
            .filter(|u| *u != "none")
            .map(|u| format!("memlens-{u}"))
            .collect();
        let manifest =
            std::fs::read_to_string(root().join("crates").join(name).join("Cargo.toml")).unwrap();
        let dependencies = manifest
            .split("[dependencies]")
            .nth(1)
            .map_or("", |d| d.split("\n[").next().unwrap());
        let mut used: Vec<String> = (dependencies.lines())
            .filter_map(|l| l.split_once(['.', ' ', '=']).map(|(n, _)| n.trim()))
            .filter(|n| n.starts_with("memlens-"))
            .map(str::to_string)
            .collect();
        documented.sort();
        used.sort();
        assert_eq!(
            used, documented,
            "crates/{name} uses other crates than its layer lists"
        );
        listed += 1;
    }
    assert_eq!(
        listed,
        std::fs::read_dir(root().join("crates")).unwrap().count(),
        "every crate has its line"
    );
}

#[test]
fn every_memlens_variable_is_in_the_options_table() {
    // Each MEMLENS_* variable the code reads (named once: rawlog's `env`,
    // the compiler table, the runtime's path) has its row in
    // docs/recording.md's table of options, and the table names no other.
    fn names_in(dir: &std::path::Path, found: &mut std::collections::BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                names_in(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for quoted in text.split("\"MEMLENS_").skip(1) {
                    let name: String = (quoted.chars())
                        .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                        .collect();
                    if quoted[name.len()..].starts_with('"') {
                        found.insert(format!("MEMLENS_{name}"));
                    }
                }
            }
        }
    }
    let mut read = std::collections::BTreeSet::new();
    names_in(&root().join("src"), &mut read);
    names_in(&root().join("crates"), &mut read);
    assert!(read.len() >= 20, "{read:?}");
    let doc = std::fs::read_to_string(root().join("docs/recording.md")).unwrap();
    let table: Vec<&str> = (doc.lines())
        .skip_while(|l| !l.starts_with("| `-o DIR`"))
        .take_while(|l| l.starts_with('|'))
        .collect();
    let mut documented = std::collections::BTreeSet::new();
    for row in &table {
        for part in row.split("`MEMLENS_").skip(1) {
            let name: String = (part.chars())
                .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                .collect();
            documented.insert(format!("MEMLENS_{name}"));
        }
    }
    assert_eq!(read, documented, "docs/recording.md's options table");
}

/// The modules of a crate's source directory, by path (`replay::sites`;
/// the crate root is ""), with their files.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut found = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path.strip_prefix(src).unwrap().with_extension("");
                let mut parts: Vec<String> = (relative.iter())
                    .map(|p| p.to_string_lossy().into_owned())
                    .collect();
                if matches!(
                    parts.last().map(String::as_str),
                    Some("mod" | "lib" | "main")
                ) {
                    parts.pop();
                }
                found.insert(parts.join("::"), path);
            }
        }
    }
    found
}

/// The paths a `crate::` or `crate::{…}` reference names, each as its
/// segments (a group's members each a path of their own).
fn crate_paths(text: &str) -> Vec<Vec<String>> {
    fn group(body: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
        let mut depth = 0;
        let mut start = 0;
        let mut members = Vec::new();
        for (i, c) in body.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    members.push(&body[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        members.push(&body[start..]);
        for member in members.into_iter().map(str::trim).filter(|m| !m.is_empty()) {
            path(member, prefix, out);
        }
    }
    fn path(text: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
        let mut segments = prefix.to_vec();
        let mut rest = text;
        loop {
            if rest.starts_with('{') {
                let close = matching_brace(rest);
                return group(&rest[1..close], &segments, out);
            }
            let name: String = (rest.chars())
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            rest = &rest[name.len()..];
            if !name.is_empty() {
                segments.push(name);
            }
            match rest.strip_prefix("::") {
                Some(after) => rest = after,
                None => break,
            }
        }
        out.push(segments);
    }
    fn matching_brace(text: &str) -> usize {
        let mut depth = 0;
        for (i, c) in text.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        return i;
                    }
                }
                _ => {}
            }
        }
        text.len()
    }
    let mut out = Vec::new();
    for (at, _) in text.match_indices("crate::") {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
            continue; // `memlens_crate::`, `$crate::`
        }
        path(&text[at + "crate::".len()..], &[], &mut out);
    }
    out
}

/// Module `from`'s references to other modules of the crate, not counting
/// its own submodules and ancestors (a module declares its children and
/// they may use what it holds).
fn imports(from: &str, text: &str, modules: &BTreeMap<String, PathBuf>) -> BTreeSet<String> {
    // Tests and comments are not the module's code.
    let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
    let code: String = (code.lines())
        .filter(|l| !l.trim_start().starts_with("//"))
        .map(|l| format!("{l}\n"))
        .collect();
    let mut paths = crate_paths(&code);
    // `super::x` from a/b/c.rs (module a::b::c) names a::b::x.
    let parent: Vec<String> = match from.rsplit_once("::") {
        Some((parent, _)) => parent.split("::").map(str::to_string).collect(),
        None => Vec::new(),
    };
    // Within an inline `mod x { … }`, `super::` is the file's own module.
    let mut inline_ends: Vec<String> = Vec::new();
    for line in code.lines() {
        if inline_ends.last().is_some_and(|end| line == end) {
            inline_ends.pop();
            continue;
        }
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let declared = (trimmed.strip_prefix("pub(crate) "))
            .or_else(|| trimmed.strip_prefix("pub "))
            .unwrap_or(trimmed);
        if declared.starts_with("mod ") && declared.ends_with(" {") {
            inline_ends.push(format!("{indent}}}"));
            continue;
        }
        if !inline_ends.is_empty() {
            continue;
        }
        for (at, _) in line.match_indices("super::") {
            let name: String = (line[at + "super::".len()..].chars())
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            paths.push(parent.iter().cloned().chain([name]).collect());
        }
    }
    let related = |m: &str| {
        m.is_empty()
            || m == from
            || from.starts_with(&format!("{m}::"))
            || m.starts_with(&format!("{from}::"))
    };
    paths
        .into_iter()
        .filter_map(|segments| {
            (1..=segments.len())
                .rev()
                .map(|n| segments[..n].join("::"))
                .find(|m| modules.contains_key(m))
        })
        .filter(|m| !related(m))
        .collect()
}

/// A loop of imports in `graph`, if there is one: the modules around it.
fn import_loop(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        m: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match marks.get(m) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let from = path.iter().position(|p| p == m).unwrap();
                return Some(path[from..].to_vec());
            }
            None => {}
        }
        marks.insert(m.to_string(), Mark::Open);
        path.push(m.to_string());
        for next in graph.get(m).into_iter().flatten() {
            if let Some(found) = visit(next, graph, marks, path) {
                return Some(found);
            }
        }
        path.pop();
        marks.insert(m.to_string(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    (graph.keys()).find_map(|m| visit(m, graph, &mut marks, &mut Vec::new()))
}

#[test]
fn no_two_modules_of_a_crate_import_each_other() {
    // Within each crate (and the CLI), no module reaches back to one that
    // reaches it, directly or through others: the modules form layers.
    let mut sources: Vec<(String, PathBuf)> = vec![("memlens".to_string(), root().join("src"))];
    for entry in std::fs::read_dir(root().join("crates")).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        sources.push((name, entry.path().join("src")));
    }
    let mut checked = 0;
    for (name, src) in sources {
        let modules = modules(&src);
        let graph: BTreeMap<String, BTreeSet<String>> = (modules.iter())
            .map(|(m, file)| {
                let text = std::fs::read_to_string(file).unwrap();
                (m.clone(), imports(m, &text, &modules))
            })
            .collect();
        let found = import_loop(&graph);
        assert_eq!(
            found, None,
            "crates/{name}: these modules import each other in a loop"
        );
        checked += 1;
    }
    assert!(checked >= 12, "{checked} crates checked");
}

#[test]
fn the_import_check_finds_a_loop_and_reads_groups() {
    // A loop through a `use crate::{a::x, b::{c::y}}` group and a `super::`
    // reference is found; a reference to a module's own child is not one.
    let modules: BTreeMap<String, PathBuf> = ["", "a", "b", "b::c", "d"]
        .into_iter()
        .map(|m| (m.to_string(), PathBuf::new()))
        .collect();
    let a = imports("a", "use crate::{d::x, b::{c::y, z}};", &modules);
    assert_eq!(
        a,
        BTreeSet::from(["d".to_string(), "b::c".to_string(), "b".to_string()])
    );
    let c = imports(
        "b::c",
        "use super::Thing; fn f() { super::super::a::g() }",
        &modules,
    );
    assert!(c.is_empty(), "{c:?}: its parent only");
    // In an inline module of a, `super::d` is a's own item, not module d.
    let inner = imports(
        "a",
        "mod inner {\n    use super::d;\n}\nfn f() {}",
        &modules,
    );
    assert!(inner.is_empty(), "{inner:?}");
    let d = imports(
        "d",
        "// crate::a in a comment\nfn f() { crate::a::g() }",
        &modules,
    );
    assert_eq!(d, BTreeSet::from(["a".to_string()]));
    let graph = BTreeMap::from([
        ("a".to_string(), a),
        ("b".to_string(), BTreeSet::new()),
        ("b::c".to_string(), BTreeSet::new()),
        ("d".to_string(), d),
    ]);
    let found = import_loop(&graph).expect("a -> d -> a");
    assert_eq!(found, ["a", "d"]);
}
