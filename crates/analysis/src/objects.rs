//! Data objects: heap allocation sites, mappings, synthetic groups, tagged ranges
//! and static variables, each with its size, peak, counts and lifetime.

use crate::{Profile, Site};
use rustc_hash::FxHashMap;
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
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

impl Serialize for ObjectKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// How the figures of an object were obtained.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Provenance {
    /// Every allocation was recorded.
    Measured,
    /// Some allocations were byte-sampled and scaled up.
    SampledScaled,
    /// From the ELF symbol table.
    SymbolTable,
}

#[derive(Clone, Debug, Serialize)]
pub struct DataObject {
    pub pid: u32,
    /// Site label, group or tag name, or symbol name.
    pub name: String,
    pub kind: ObjectKind,
    pub site: Option<Site>,
    /// The object's size: the largest number of bytes live at once.
    pub peak_bytes: f64,
    /// Total bytes allocated over the run (for a static or tag: its size).
    pub allocated_bytes: f64,
    pub allocations: f64,
    /// Bytes still live when the process ended.
    pub leaked_bytes: f64,
    pub first_ns: u64,
    pub last_ns: u64,
    pub provenance: Provenance,
    /// Address range (for statics, tags, and single-block objects).
    pub address: Option<u64>,
    pub stack_id: u64,
}

/// The per-object sweep of live bytes over time.
pub struct ObjectSeries {
    pub object: usize,
    /// (time, live bytes) at each change.
    pub points: Vec<(u64, f64)>,
}

fn key_of(a: &memlens_profile::Allocation) -> (u32, ObjectKind, String, u64) {
    match (&a.group, a.kind.as_str()) {
        (Some(g), _) => (a.pid, ObjectKind::Group, g.clone(), 0),
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

/// All data objects of the profile, the live-bytes series of the dynamic ones, and
/// which object each allocation row, tag and static symbol belongs to.
pub struct Objects {
    pub list: Vec<DataObject>,
    pub series: Vec<ObjectSeries>,
    pub of_allocation: Vec<usize>,
    pub of_tag: Vec<usize>,
    pub of_static: Vec<usize>,
}

impl Objects {
    /// The name of the object an access fell in, or what stands for none.
    pub fn name_of(&self, object: Option<usize>) -> String {
        match object {
            Some(o) => self.list[o].name.clone(),
            None => "unknown (no recorded object)".to_string(),
        }
    }
}

pub fn data_objects(p: &Profile) -> Objects {
    let mut of_allocation = Vec::with_capacity(p.allocations.len());
    let mut index: FxHashMap<(u32, ObjectKind, String, u64), usize> = FxHashMap::default();
    let mut objects: Vec<DataObject> = Vec::new();
    let mut events: Vec<Vec<(u64, f64)>> = Vec::new();
    for a in &p.allocations {
        let key = key_of(a);
        let found = index.get(&key).copied();
        let i = found.unwrap_or_else(|| {
            let site = p
                .stacks
                .get(&(a.pid, a.stack_id))
                .and_then(|f| Site::from_frames(f));
            let name = match key.1 {
                ObjectKind::Group | ObjectKind::Stack => key.2.clone(),
                _ => site
                    .as_ref()
                    .map(Site::label)
                    .unwrap_or_else(|| format!("{} (no stack)", a.kind)),
            };
            objects.push(DataObject {
                pid: a.pid,
                name,
                kind: key.1,
                site,
                peak_bytes: 0.0,
                allocated_bytes: 0.0,
                allocations: 0.0,
                leaked_bytes: 0.0,
                first_ns: u64::MAX,
                last_ns: 0,
                provenance: Provenance::Measured,
                address: None,
                stack_id: a.stack_id,
            });
            events.push(Vec::new());
            index.insert(key, objects.len() - 1);
            objects.len() - 1
        });
        of_allocation.push(i);
        let o = &mut objects[i];
        // Mappings count pages; heap blocks count the bytes asked for.
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
        }
        if a.sampled {
            o.provenance = Provenance::SampledScaled;
        }
        o.address = if o.allocations <= 1.0 {
            Some(a.address)
        } else {
            None
        };
        events[i].push((a.alloc_ns, bytes));
        if let Some(t) = a.free_ns {
            events[i].push((t, -bytes));
        }
    }
    let mut series = Vec::new();
    for (i, mut ev) in events.into_iter().enumerate() {
        // Frees before allocations at the same instant: a peak is never inflated.
        ev.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
        let mut live = 0.0f64;
        let mut points = Vec::with_capacity(ev.len());
        for (t, d) in ev {
            live = (live + d).max(0.0);
            objects[i].peak_bytes = objects[i].peak_bytes.max(live);
            points.push((t, live));
        }
        series.push(ObjectSeries { object: i, points });
    }
    // Tags and statics have one fixed size for their whole life.
    let fixed = |pid, name, kind, size: u64, address, first_ns, last_ns, provenance| DataObject {
        pid,
        name,
        kind,
        site: None,
        peak_bytes: size as f64,
        allocated_bytes: size as f64,
        allocations: 1.0,
        leaked_bytes: 0.0,
        first_ns,
        last_ns,
        provenance,
        address: Some(address),
        stack_id: 0,
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
    Objects {
        list: objects,
        series,
        of_allocation,
        of_tag,
        of_static,
    }
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
