//! Data objects: heap allocation sites, mappings, synthetic groups, tagged ranges
//! and static variables, each with its size, peak, counts and lifetime.

mod naming;
mod peaks;

use naming::name_wrappers_by_callers;
pub(crate) use naming::{caller_suffixes, site_callers};
use peaks::{peaks_and_series, site_series, sites_points};

use crate::{Profile, Site};
use memlens_profile::Frame;
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::BTreeMap;
use std::hash::Hash;

#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ObjectKind {
    Heap,
    Mmap,
    Group,
    Tag,
    Static,
    /// A thread's stack (reserved size).
    Stack,
}

impl ObjectKind {
    /// The kind's name in reports, text and JSON alike.
    pub fn name(self) -> &'static str {
        match self {
            ObjectKind::Heap => "heap",
            ObjectKind::Mmap => "mmap",
            ObjectKind::Group => "group",
            ObjectKind::Tag => "tag",
            ObjectKind::Static => "static",
            ObjectKind::Stack => "stack",
        }
    }
}

/// How the figures of an object were obtained.
#[derive(Clone, Copy, Debug, Serialize, schemars::JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Provenance {
    /// Every allocation was recorded.
    Measured,
    /// Some allocations were byte-sampled and scaled up.
    SampledScaled,
    /// From the ELF symbol table.
    SymbolTable,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct DataObject {
    pub pid: u32,
    /// Site label, group or tag name, or symbol name.
    pub name: String,
    pub kind: ObjectKind,
    pub site: Option<Site>,
    /// The object's size: the largest number of bytes live at once.
    pub peak_bytes: f64,
    /// Set when the peak is known only to lie between `peak_bytes` and this:
    /// sites of one source line merged whose blocks peaked between the same
    /// timeline ticks (the exact peak is kept per call stack).
    pub peak_bytes_at_most: Option<f64>,
    /// Total bytes allocated over the run (for a static or tag: its size).
    pub allocated_bytes: f64,
    pub allocations: f64,
    /// Bytes still live when the process ended, and their blocks.
    pub leaked_bytes: f64,
    pub leaked_blocks: f64,
    /// Blocks freed by their thread before it allocated anything else
    /// (heaptrack's temporary allocations): heap objects recorded block by
    /// block only.
    pub temporary: Option<u64>,
    /// Bytes live when the process's heap peaked (heap objects).
    pub bytes_at_peak: Option<f64>,
    pub first_ns: u64,
    pub last_ns: u64,
    pub provenance: Provenance,
    /// Address range (for statics, tags, and single-block objects).
    pub address: Option<u64>,
    #[serde(serialize_with = "crate::id_as_string")]
    #[schemars(with = "String")]
    pub stack_id: u64,
    /// The allocation's whole call stack, innermost frame first, as
    /// `function (file:line)`: filled in for the objects a report lists.
    pub frames: Vec<String>,
}

fn key_of(a: &memlens_profile::Allocation) -> ObjectKey {
    match (&a.group, a.kind.as_str()) {
        (Some(g), _) => (a.pid, ObjectKind::Group, g.clone(), 0),
        // A mapping found in /proc (attach): one object per name.
        (None, "mmap") if a.name.is_some() => (
            a.pid,
            ObjectKind::Mmap,
            a.name.clone().unwrap_or_default(),
            0,
        ),
        (None, "mmap") => (a.pid, ObjectKind::Mmap, String::new(), a.stack_id),
        (None, "stack") => (
            a.pid,
            ObjectKind::Stack,
            format!("stack of thread {}", a.tid),
            0,
        ),
        _ => (a.pid, ObjectKind::Heap, String::new(), a.stack_id),
    }
}

/// Scaled up from its sampled blocks, a heap object's leak can exceed what
/// its process held at exit in all (its exact counter): never above it,
/// its blocks in proportion.
fn cap_sampled_leaks(objects: &mut [DataObject], at_exit: &[(u32, u64)]) {
    for o in objects.iter_mut() {
        let exact = at_exit.iter().find(|e| e.0 == o.pid).map(|e| e.1 as f64);
        if let Some(cap) =
            exact.filter(|&c| o.provenance == Provenance::SampledScaled && o.leaked_bytes > c)
        {
            o.leaked_blocks = (o.leaked_blocks * cap / o.leaked_bytes).ceil().max(1.0);
            o.leaked_bytes = cap;
        }
    }
}

/// All data objects of the profile, and which object each allocation row,
/// tag and static symbol belongs to.
pub struct Objects {
    pub list: Vec<DataObject>,
    pub of_allocation: Vec<usize>,
    pub of_tag: Vec<usize>,
    pub of_static: Vec<usize>,
    /// Each dynamic object's heap sites (indexes of `Profile::sites`).
    sites_of: Vec<Vec<usize>>,
    /// The live bytes at each change of the dynamic objects summed from
    /// their rows (mappings, stacks; empty for objects of sites).
    row_series: Vec<Vec<(u64, f64)>>,
    /// The samples' indexes in time order, when the table is not (threads'
    /// samples come in batches): sorted once for every attribution sweep.
    sample_order: std::sync::OnceLock<Option<Vec<u32>>>,
}

impl Objects {
    /// The samples' indexes of `p` (the profile the objects are of) in
    /// time order; `None` when the table already is.
    pub(crate) fn sample_order(&self, p: &Profile) -> Option<std::borrow::Cow<'_, [u32]>> {
        let sort = || {
            let samples = &p.samples;
            (!samples.windows(2).all(|w| w[0].time_ns <= w[1].time_ns)).then(|| {
                let mut order: Vec<u32> = (0..samples.len() as u32).collect();
                order.sort_by_key(|&i| samples[i as usize].time_ns);
                order
            })
        };
        match self.sample_order.get_or_init(sort) {
            // Samples changed since (a view restricted after): sorted anew.
            Some(order) if order.len() != p.samples.len() => sort().map(Into::into),
            order => order.as_deref().map(Into::into),
        }
    }

    /// The live bytes over time, (time, bytes) at each change, of each of
    /// `wanted` (dynamic objects of the same profile). Made on demand, not
    /// for every object: the sites' timelines hold a point per site changed
    /// in each tick (half a million on 12,000 sites), and a report plots
    /// a few objects.
    pub fn series(&self, p: &Profile, wanted: &[usize]) -> Vec<Vec<(u64, f64)>> {
        // A timeline that cannot be read was reported by the load that
        // read it (or, for a summary's profile, bounds the peaks instead).
        let mut points = sites_points(p, &self.sites_of, wanted)
            .unwrap_or_else(|_| vec![Vec::new(); wanted.len()]);
        (wanted.iter().zip(&mut points))
            .map(|(&i, points)| match self.sites_of.get(i) {
                Some(sites) if !sites.is_empty() => {
                    site_series(std::mem::take(points), sites.len()).0
                }
                _ => self.row_series.get(i).cloned().unwrap_or_default(),
            })
            .collect()
    }

    /// The name of the object an access fell in, or what stands for none.
    pub fn name_of(&self, object: Option<usize>) -> String {
        match object {
            Some(o) => self.list[o].name.clone(),
            None => "unknown (no recorded object)".to_string(),
        }
    }
}

type ObjectKey = (u32, ObjectKind, String, u64);

fn site_key(s: &memlens_profile::HeapSite) -> ObjectKey {
    match &s.group {
        Some(g) => (s.pid, ObjectKind::Group, g.clone(), 0),
        None => (s.pid, ObjectKind::Heap, String::new(), s.stack_id),
    }
}

/// The dynamic objects as they are found, with their rows' live-bytes events.
#[derive(Default)]
struct Found<'p> {
    index: FxHashMap<ObjectKey, usize>,
    objects: Vec<DataObject>,
    events: Vec<Vec<(u64, f64)>>,
    /// Each stack's first stack of the same source frames.
    canonical: FxHashMap<(u32, u64), u64>,
    by_frames: FxHashMap<(u32, Vec<SourceFrame<'p>>), u64>,
}

/// A frame as its label names it ([`crate::code_label`]): function, file
/// name without its directories, line, and the module when no file is
/// known. Compared as borrowed parts, not as labels formatted for every
/// frame of every stack.
type SourceFrame<'p> = (&'p str, &'p str, u32, &'p str);

fn source_frame(f: &Frame) -> SourceFrame<'_> {
    let file = f.file.rsplit('/').next().unwrap_or(&f.file);
    let module = if file.is_empty() {
        f.module.as_str()
    } else {
        ""
    };
    (f.function.as_str(), file, f.line, module)
}

/// A frame's label ([`crate::code_label`]) from its source parts.
fn source_label(&(function, file, line, module): &SourceFrame) -> String {
    crate::code_label(function, file, line, module)
}

/// Frames as numbers, one per frame as the source names it, for telling
/// callers apart: it compares and hashes every depth's prefixes of
/// thousands of chains, as strings 1.5x slower on a compiler's profile
/// (C++ names are long).
#[derive(Default)]
struct FrameIds<'p> {
    ids: FxHashMap<SourceFrame<'p>, usize>,
    frames: Vec<SourceFrame<'p>>,
}

impl<'p> FrameIds<'p> {
    fn id(&mut self, frame: SourceFrame<'p>) -> usize {
        *self.ids.entry(frame).or_insert_with(|| {
            self.frames.push(frame);
            self.frames.len() - 1
        })
    }

    fn label(&self, id: &usize) -> String {
        source_label(&self.frames[*id])
    }
}

impl<'p> Found<'p> {
    /// One object per call path as the source names it: stacks whose
    /// return addresses differ within the same lines (an unrolled loop's
    /// calls) are the same site.
    fn canonical_stack(&mut self, p: &'p Profile, pid: u32, stack_id: u64) -> u64 {
        if let Some(&c) = self.canonical.get(&(pid, stack_id)) {
            return c;
        }
        let frames: Vec<SourceFrame> = (p.stacks.get(&(pid, stack_id)).into_iter().flatten())
            .map(source_frame)
            .collect();
        let c = if frames.is_empty() {
            stack_id
        } else {
            *self.by_frames.entry((pid, frames)).or_insert(stack_id)
        };
        self.canonical.insert((pid, stack_id), c);
        c
    }

    /// A key with its stack made canonical.
    fn canonical_key(&mut self, p: &'p Profile, mut key: ObjectKey) -> ObjectKey {
        if matches!(key.1, ObjectKind::Heap | ObjectKind::Mmap) {
            key.3 = self.canonical_stack(p, key.0, key.3);
        }
        key
    }

    /// The object of a key, new if not yet found.
    fn object_of(&mut self, p: &Profile, key: ObjectKey, stack_id: u64, kind: &str) -> usize {
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        let site =
            (p.stacks.get(&(key.0, stack_id))).and_then(|f| Site::from_frames(f, &p.skip_frames));
        let name = match key.1 {
            ObjectKind::Group | ObjectKind::Stack => key.2.clone(),
            ObjectKind::Mmap if !key.2.is_empty() => key.2.clone(),
            _ => site
                .as_ref()
                .map(Site::label)
                .unwrap_or_else(|| format!("{kind} (no stack)")),
        };
        self.objects.push(DataObject {
            pid: key.0,
            name,
            kind: key.1,
            site,
            peak_bytes: 0.0,
            peak_bytes_at_most: None,
            allocated_bytes: 0.0,
            allocations: 0.0,
            leaked_bytes: 0.0,
            leaked_blocks: 0.0,
            temporary: None,
            bytes_at_peak: None,
            first_ns: u64::MAX,
            last_ns: 0,
            provenance: Provenance::Measured,
            address: None,
            stack_id,
            frames: Vec::new(),
        });
        self.events.push(Vec::new());
        self.index.insert(key, self.objects.len() - 1);
        self.objects.len() - 1
    }
}

pub fn data_objects(p: &Profile) -> Objects {
    let mut found = Found::default();
    let mut sites_of = found.add_sites(p);
    let of_allocation = found.add_rows(p, &sites_of);
    let Found {
        mut objects,
        events,
        ..
    } = found;
    sites_of.resize(objects.len(), Vec::new());
    let row_series = peaks_and_series(p, &mut objects, events, &sites_of);
    cap_sampled_leaks(&mut objects, &crate::heap_at_exit(p));
    name_wrappers_by_callers(p, &mut objects);
    let (of_tag, of_static) = add_tags_and_statics(p, &mut objects);
    Objects {
        list: objects,
        of_allocation,
        of_tag,
        of_static,
        sites_of,
        row_series,
        sample_order: std::sync::OnceLock::new(),
    }
}

impl<'p> Found<'p> {
    /// Heap blocks: their sites' sums (every recorded block, with or without
    /// a row of its own); each object's sites.
    fn add_sites(&mut self, p: &'p Profile) -> Vec<Vec<usize>> {
        let mut sites_of: Vec<Vec<usize>> = Vec::new();
        for (k, s) in p.sites.iter().enumerate() {
            let key = self.canonical_key(p, site_key(s));
            let stack_id = key.3;
            let i = self.object_of(p, key, stack_id, "malloc");
            sites_of.resize(self.objects.len(), Vec::new());
            sites_of[i].push(k);
            let o = &mut self.objects[i];
            o.allocated_bytes += s.bytes;
            o.allocations += s.allocations;
            o.leaked_bytes += s.leaked_bytes;
            o.leaked_blocks += s.leaked;
            if let Some(t) = s.temporary {
                o.temporary = Some(o.temporary.unwrap_or(0) + t);
            }
            o.bytes_at_peak = Some(o.bytes_at_peak.unwrap_or(0.0) + s.bytes_at_peak);
            o.first_ns = o.first_ns.min(s.first_ns);
            let end = if s.leaked > 0.0 {
                p.process_end(s.pid)
            } else {
                s.last_ns
            };
            o.last_ns = o.last_ns.max(end);
            if s.sampled {
                o.provenance = Provenance::SampledScaled;
            }
        }
        sites_of.resize(self.objects.len(), Vec::new());
        sites_of
    }

    /// The rows (blocks, mappings, stacks) to their objects, summed where
    /// their site does not sum them; each row's object.
    fn add_rows(&mut self, p: &'p Profile, sites_of: &[Vec<usize>]) -> Vec<usize> {
        let mut of_allocation = Vec::with_capacity(p.allocations.len());
        // A heap row's object and whether its site sums it, by its stack: the
        // rows of one stack (nearly all rows) look their key up once.
        let mut of_heap_stack: FxHashMap<(u32, u64), (usize, bool)> = FxHashMap::default();
        for a in &p.allocations {
            let key = key_of(a);
            let heap = (key.1 == ObjectKind::Heap).then_some((a.pid, a.stack_id));
            let (i, summed) = match heap.and_then(|k| of_heap_stack.get(&k)) {
                Some(&known) => known,
                None => {
                    let key = self.canonical_key(p, key);
                    let summed = (self.index.get(&key))
                        .is_some_and(|&i| sites_of.get(i).is_some_and(|s| !s.is_empty()));
                    let stack_id = if key.3 != 0 { key.3 } else { a.stack_id };
                    let i = self.object_of(p, key, stack_id, &a.kind);
                    if let Some(k) = heap {
                        of_heap_stack.insert(k, (i, summed));
                    }
                    (i, summed)
                }
            };
            of_allocation.push(i);
            let o = &mut self.objects[i];
            if summed {
                // A block of a site: its figures are in the site's sums.
                o.address = (o.allocations <= 1.0).then_some(a.address);
                continue;
            }
            // Mappings and stacks (and heap rows of a profile without sites)
            // are summed here: mappings count pages, heap blocks the bytes asked for.
            let bytes = if a.kind == "mmap" {
                a.usable_size as f64
            } else {
                a.est_bytes
            };
            o.allocated_bytes += bytes;
            o.allocations += a.est_count;
            o.first_ns = o.first_ns.min(a.alloc_ns);
            let end = a.free_ns.unwrap_or_else(|| p.process_end(a.pid));
            o.last_ns = o.last_ns.max(end);
            if a.free_ns.is_none() {
                o.leaked_bytes += bytes;
                o.leaked_blocks += a.est_count;
            }
            if a.sampled {
                o.provenance = Provenance::SampledScaled;
            }
            o.address = if o.allocations <= 1.0 {
                Some(a.address)
            } else {
                None
            };
            self.events[i].push((a.alloc_ns, bytes));
            if let Some(t) = a.free_ns {
                self.events[i].push((t, -bytes));
            }
        }
        of_allocation
    }
}

/// Tags and statics, each an object of one fixed size for its whole life;
/// each tag's and each static's object.
fn add_tags_and_statics(p: &Profile, objects: &mut Vec<DataObject>) -> (Vec<usize>, Vec<usize>) {
    let fixed = |pid, name, kind, size: u64, address, first_ns, last_ns, provenance| DataObject {
        pid,
        name,
        kind,
        site: None,
        peak_bytes: size as f64,
        peak_bytes_at_most: None,
        allocated_bytes: size as f64,
        allocations: 1.0,
        leaked_bytes: 0.0,
        leaked_blocks: 0.0,
        temporary: None,
        bytes_at_peak: None,
        first_ns,
        last_ns,
        provenance,
        address: Some(address),
        stack_id: 0,
        frames: Vec::new(),
    };
    let mut of_tag = Vec::with_capacity(p.tags.len());
    for t in &p.tags {
        of_tag.push(objects.len());
        let last = t.end_ns.unwrap_or_else(|| p.process_end(t.pid));
        objects.push(fixed(
            t.pid,
            t.name.clone(),
            ObjectKind::Tag,
            t.size,
            t.address,
            t.begin_ns,
            last,
            Provenance::Measured,
        ));
    }
    let mut of_static = Vec::with_capacity(p.statics.len());
    for s in &p.statics {
        of_static.push(objects.len());
        let name = format!("{} [{}]", s.name, s.module);
        let (first, last) = (p.process_start(s.pid), p.process_end(s.pid));
        objects.push(fixed(
            s.pid,
            name,
            ObjectKind::Static,
            s.size,
            s.address,
            first,
            last,
            Provenance::SymbolTable,
        ));
    }
    (of_tag, of_static)
}

/// Whether an ELF object is a system library, installed in a distribution's
/// library directory: libc's, ld.so's, MPI's own variables are not the
/// program's data.
pub fn is_system_library(path: &str) -> bool {
    ["/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/"]
        .iter()
        .any(|dir| path.starts_with(dir))
}

/// Variables the C toolchain's startup files (crt1.o, crti.o, crtbegin.o)
/// put in every program: not the program's data.
const C_STARTUP_VARIABLES: [&str; 4] =
    ["_IO_stdin_used", "__abi_tag", "completed.0", "__dso_handle"];

/// The objects as reports list them.
pub struct Listed {
    /// The program's own objects (heap, mappings, its own and its own
    /// libraries' variables, tags, groups, stacks).
    pub own: Vec<DataObject>,
    /// Each system library's variables as one object ("statics of
    /// libc.so.6 (143 variables)", their sizes summed).
    pub libraries: Vec<DataObject>,
}

/// The objects as reports list them: each system library's variables are
/// one object, apart from the program's own. Every object keeps its own
/// name for attribution; only lists group them.
pub fn listed_objects(p: &Profile, all: &Objects) -> Listed {
    let system: std::collections::HashSet<(u32, String)> = (p.modules.iter())
        .filter(|m| is_system_library(&m.path))
        .map(|m| {
            let name = m.path.rsplit('/').next().unwrap_or(&m.path).to_string();
            (m.pid, name)
        })
        .collect();
    let mut library_of = vec![None; all.list.len()];
    for (s, &o) in p.statics.iter().zip(&all.of_static) {
        if system.contains(&(s.pid, s.module.clone())) {
            library_of[o] = Some(s.module.as_str());
        } else if C_STARTUP_VARIABLES.contains(&s.name.as_str()) {
            library_of[o] = Some("the C startup files");
        }
    }
    let mut own = Vec::with_capacity(all.list.len());
    let mut groups: BTreeMap<(u32, &str), (DataObject, usize)> = BTreeMap::new();
    for (o, library) in all.list.iter().zip(library_of) {
        let Some(library) = library else {
            own.push(o.clone());
            continue;
        };
        let (group, n) = groups.entry((o.pid, library)).or_insert_with(|| {
            let mut g = o.clone();
            (g.peak_bytes, g.allocated_bytes, g.address) = (0.0, 0.0, None);
            (g, 0)
        });
        group.peak_bytes += o.peak_bytes;
        group.allocated_bytes += o.allocated_bytes;
        group.first_ns = group.first_ns.min(o.first_ns);
        group.last_ns = group.last_ns.max(o.last_ns);
        *n += 1;
    }
    let libraries = groups
        .into_iter()
        .map(|((_, library), (mut g, n))| {
            let variables = if n == 1 { "variable" } else { "variables" };
            g.name = format!("statics of {library} ({n} {variables})");
            g.allocations = n as f64;
            g
        })
        .collect();
    Listed { own, libraries }
}

/// Indices of the `n` largest objects by a key.
pub fn top_by(objects: &[DataObject], n: usize, key: impl Fn(&DataObject) -> f64) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..objects.len())
        .filter(|&i| key(&objects[i]) > 0.0)
        .collect();
    idx.sort_by(|&a, &b| {
        key(&objects[b])
            .total_cmp(&key(&objects[a]))
            .then(a.cmp(&b))
    });
    idx.truncate(n);
    idx
}

/// Listed objects carry their whole stacks.
pub fn with_frames(p: &Profile, list: &[DataObject], idx: Vec<usize>) -> Vec<DataObject> {
    idx.into_iter()
        .map(|i| {
            let mut o = list[i].clone();
            o.frames = (p.stacks.get(&(o.pid, o.stack_id)).into_iter().flatten())
                .map(|f| crate::code_label(&f.function, &f.file, f.line, &f.module))
                .collect();
            o
        })
        .collect()
}

/// The `top` objects by peak size. Thread stacks are reserved address space,
/// mostly not resident: they are summarized apart instead of crowding the
/// top list. System libraries' own variables (libc's, ld.so's) come after
/// the program's objects, one row per library.
pub fn objects_by_peak(p: &Profile, all: &Objects, top: usize) -> Vec<DataObject> {
    let listed = listed_objects(p, all);
    let peak_of = |o: &DataObject| {
        if o.kind == ObjectKind::Stack {
            0.0
        } else {
            o.peak_bytes
        }
    };
    let mut by_peak = with_frames(p, &listed.own, top_by(&listed.own, top, peak_of));
    let room = top.saturating_sub(by_peak.len());
    by_peak.extend(with_frames(
        p,
        &listed.libraries,
        top_by(&listed.libraries, room, peak_of),
    ));
    by_peak
}

#[cfg(test)]
mod tests {
    use crate::Profile;
    use memlens_profile::{HeapSite, TimelinePoint};

    /// A sampled site whose 40 live sampled blocks scale to 500 000 leaked
    /// bytes in a process that held 13 736 at exit: its leak is shown as
    /// 13 736 bytes and its blocks in proportion; an exact site is as it is.
    #[test]
    fn a_sampled_leak_is_never_above_the_exact_live_heap() {
        let mut p = Profile::default();
        let site = |stack_id, leaked, leaked_bytes, sampled| HeapSite {
            pid: 1,
            stack_id,
            allocations: leaked,
            bytes: leaked_bytes,
            leaked,
            leaked_bytes,
            sampled,
            ..Default::default()
        };
        p.sites = vec![site(1, 400.0, 500_000.0, true), site(2, 2.0, 200.0, false)];
        p.timeline = vec![TimelinePoint {
            pid: 1,
            heap_live: 13_736,
            ..Default::default()
        }];
        let objects = crate::data_objects(&p).list;
        let leak = |bytes: f64| {
            let o = objects.iter().find(|o| o.allocated_bytes == bytes).unwrap();
            (o.leaked_bytes, o.leaked_blocks)
        };
        assert_eq!(leak(500_000.0), (13_736.0, 11.0));
        assert_eq!(leak(200.0), (200.0, 2.0));
    }
}
