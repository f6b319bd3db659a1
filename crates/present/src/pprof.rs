//! `memlens export --format pprof`: the profile's stacks as pprof's
//! gzipped profile.proto, read by `go tool pprof` and the viewers built on it.
//! Every measure of the family is a sample type (Go's heap profiles use
//! alloc_objects, alloc_space and inuse_space); `--weight` picks the one
//! shown first.
//!
//! The messages are written out by hand with prost's derive, from
//! github.com/google/pprof/proto/profile.proto (field numbers as there).

use crate::stacks::{Measure, Node, Stacks};
use prost::Message;
use std::collections::HashMap;
use std::io::Write;

#[derive(Clone, PartialEq, Message)]
struct Profile {
    #[prost(message, repeated, tag = "1")]
    sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    sample: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    string_table: Vec<String>,
    #[prost(int64, tag = "10")]
    duration_nanos: i64,
    #[prost(int64, repeated, tag = "13")]
    comment: Vec<i64>,
    #[prost(int64, tag = "14")]
    default_sample_type: i64,
}

#[derive(Clone, PartialEq, Message)]
struct ValueType {
    #[prost(int64, tag = "1")]
    r#type: i64,
    #[prost(int64, tag = "2")]
    unit: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Sample {
    /// Leaf first.
    #[prost(uint64, repeated, tag = "1")]
    location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    value: Vec<i64>,
}

/// A module code was found in. pprof names the profile after the first
/// (the main binary); the frames come symbolized, so the flags tell it not to
/// look for the files.
#[derive(Clone, PartialEq, Message)]
struct Mapping {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "5")]
    filename: i64,
    #[prost(bool, tag = "7")]
    has_functions: bool,
    #[prost(bool, tag = "8")]
    has_filenames: bool,
    #[prost(bool, tag = "9")]
    has_line_numbers: bool,
    #[prost(bool, tag = "10")]
    has_inline_frames: bool,
}

#[derive(Clone, PartialEq, Message)]
struct Location {
    #[prost(uint64, tag = "1")]
    id: u64,
    /// 0 for the nodes memlens adds (objects, access kinds).
    #[prost(uint64, tag = "2")]
    mapping_id: u64,
    #[prost(message, repeated, tag = "4")]
    line: Vec<Line>,
}

#[derive(Clone, PartialEq, Message)]
struct Line {
    #[prost(uint64, tag = "1")]
    function_id: u64,
    #[prost(int64, tag = "2")]
    line: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Function {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "2")]
    name: i64,
    #[prost(int64, tag = "3")]
    system_name: i64,
    #[prost(int64, tag = "4")]
    filename: i64,
}

/// Strings by index; index 0 is the empty string, as the format requires.
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Strings {
        Strings {
            table: vec![String::new()],
            index: HashMap::from([(String::new(), 0)]),
        }
    }

    fn id(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        self.table.push(s.to_string());
        let i = self.table.len() as i64 - 1;
        self.index.insert(s.to_string(), i);
        i
    }
}

/// The modules of a profile by the names its frames give them (file names),
/// the main binary first.
struct Mappings<'a> {
    list: Vec<Mapping>,
    by_name: HashMap<&'a str, u64>,
    /// Each module's path by its file name.
    paths: HashMap<&'a str, &'a str>,
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

impl<'a> Mappings<'a> {
    /// The mappings of `modules` (paths, the main binary's first), which has
    /// the first id.
    fn new(modules: &[&'a str], strings: &mut Strings) -> Mappings<'a> {
        let mut mappings = Mappings {
            list: Vec::new(),
            by_name: HashMap::new(),
            paths: (modules.iter())
                .map(|&path| (file_name(path), path))
                .collect(),
        };
        mappings.id(
            file_name(modules.first().copied().unwrap_or_default()),
            strings,
        );
        mappings
    }

    /// The mapping of the module a frame names `name` (its file name).
    fn id(&mut self, name: &'a str, strings: &mut Strings) -> u64 {
        if let Some(&id) = self.by_name.get(name) {
            return id;
        }
        let path = self.paths.get(name).copied().unwrap_or(name);
        self.list.push(Mapping {
            id: self.list.len() as u64 + 1,
            filename: strings.id(path),
            has_functions: true,
            has_filenames: true,
            has_line_numbers: true,
            has_inline_frames: true,
        });
        let id = self.list.len() as u64;
        self.by_name.insert(name, id);
        id
    }
}

/// The gzipped profile.proto of `stacks`, `measure` its default sample type;
/// `comments` say how the values were obtained. `modules` are the paths of
/// the code's modules, the profiled program's first.
pub fn pprof(
    stacks: &Stacks,
    measure: Measure,
    duration_ns: i64,
    comments: &[String],
    modules: &[&str],
) -> std::io::Result<Vec<u8>> {
    let mut strings = Strings::new();
    let mut mappings = Mappings::new(modules, &mut strings);
    let sample_type = (stacks.measures.iter())
        .map(|m| {
            let (kind, unit) = m.name_and_unit();
            ValueType {
                r#type: strings.id(kind),
                unit: strings.id(unit),
            }
        })
        .collect();
    let mut functions: HashMap<(String, String), u64> = HashMap::new();
    let mut function = Vec::new();
    let mut locations: HashMap<Node, u64> = HashMap::new();
    let mut location = Vec::new();
    let mut sample = Vec::new();
    for row in &stacks.rows {
        let location_id = (row.stack.iter().rev())
            .map(|node| {
                if let Some(&id) = locations.get(node) {
                    return id;
                }
                let key = (node.function.clone(), node.file.clone());
                let function_id = *functions.entry(key).or_insert_with(|| {
                    let name = match node.file.is_empty() && !node.module.is_empty() {
                        // Code without debug information: its module says where.
                        true => node.label(),
                        false => node.function.clone(),
                    };
                    let name = strings.id(&name);
                    function.push(Function {
                        id: function.len() as u64 + 1,
                        name,
                        system_name: name,
                        filename: strings.id(&node.file),
                    });
                    function.len() as u64
                });
                let mapping_id = match node.module.as_str() {
                    "" => 0,
                    name => mappings.id(name, &mut strings),
                };
                location.push(Location {
                    id: location.len() as u64 + 1,
                    mapping_id,
                    line: vec![Line {
                        function_id,
                        line: node.line as i64,
                    }],
                });
                let id = location.len() as u64;
                locations.insert(node.clone(), id);
                id
            })
            .collect();
        let value = row.values.iter().map(|v| v.round() as i64).collect();
        sample.push(Sample { location_id, value });
    }
    let comment = comments.iter().map(|c| strings.id(c)).collect();
    let default_sample_type = strings.id(measure.name_and_unit().0);
    let profile = Profile {
        sample_type,
        sample,
        mapping: mappings.list,
        location,
        function,
        string_table: strings.table,
        duration_nanos: duration_ns,
        comment,
        default_sample_type,
    };
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&profile.encode_to_vec())?;
    gz.finish()
}
