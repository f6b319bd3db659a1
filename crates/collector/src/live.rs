//! `memlens record --live`: a status block on stderr while the program runs.
//! Each update is a [`LiveView`]: resident set and live heap summed over the
//! traced processes (the same per-tick readings the timeline records), the
//! exact bandwidth of instrumented code since the last update, and the sites
//! holding the most live memory, from the allocation events the runtime has
//! published so far (each log followed with [`LogTail`]). The caller's
//! renderer writes it as lines (`memlens_present::render_live`); on a terminal
//! the block is redrawn in place, otherwise each update is appended.

use crate::block_map::{block_map, BlockMap};
use crate::image::{module_def, stack_def};
use crate::mappings::Mappings;
use crate::replay::estimate;
use crate::tail::LogTail;
use memlens_convert::symbols::{LoadedModule, Symbolizer};
use memlens_profile::{code_label, site_frame, Allocation, LiveSite, LiveView};
use memlens_rawlog::{self as raw, tag, RawRecord};
use rustc_hash::FxHashMap;
use std::collections::hash_map::{Entry, HashMap};
use std::fs::File;
use std::io::{IsTerminal, Write};

/// How often the view changes.
const EVERY_NS: u64 = 500_000_000;
/// Sites listed under the status line.
const TOP_SITES: usize = 5;
/// Events read from a log are put in time order and applied in batches of
/// this many (each thread's records are in order; a free read before its
/// block's allocation waits among the early frees).
const APPLY_EVERY: usize = 1 << 16;

/// A process image being recorded, as the sampler sees it.
pub struct Image<'a> {
    pub pid: u32,
    pub seq: u32,
    pub log: &'a File,
    pub sample_rate: u64,
}

/// Writes a view as the lines of the block.
pub type RenderLive = fn(&LiveView) -> Vec<String>;

pub struct Live {
    render: RenderLive,
    start_ns: u64,
    last_ns: u64,
    /// Exact bytes read and written at the last update.
    last_bytes: (u64, u64),
    terminal: bool,
    /// Lines of the block last drawn on the terminal.
    drawn: usize,
    objects: HashMap<(u32, u32), (LogTail, LiveObjects)>,
    symbolizer: Symbolizer,
    labels: HashMap<(u32, u64), String>,
}

impl Live {
    pub fn new(start_ns: u64, render: RenderLive) -> Live {
        Live {
            render,
            start_ns,
            last_ns: start_ns,
            last_bytes: (0, 0),
            terminal: std::io::stderr().is_terminal(),
            drawn: 0,
            objects: HashMap::new(),
            symbolizer: Symbolizer::default(),
            labels: HashMap::new(),
        }
    }

    /// Whether the view changes at `time` (the sampler ticks far more often).
    pub fn due(&self, time: u64) -> bool {
        time >= self.last_ns + EVERY_NS
    }

    /// Redraws the view from one tick's readings (a timeline record per traced
    /// process) and the images being recorded.
    pub fn update(&mut self, time: u64, records: &[raw::Timeline], images: &[Image<'_>]) {
        let mut view = self.status(time, records);
        self.follow(images);
        // Only processes with a reading now: an ended one has no memory left.
        let alive: Vec<u32> = records.iter().map(|t| t.pid as u32).collect();
        view.sites = self.top_sites(&alive);
        let mut lines = (self.render)(&view);
        if self.terminal {
            // A wrapped line would throw off the redraw's count of lines.
            let width = terminal_width().saturating_sub(1);
            for line in &mut lines {
                if let Some((cut, _)) = line.char_indices().nth(width) {
                    line.truncate(cut);
                }
            }
        }
        let mut err = std::io::stderr().lock();
        let text = lines.join("\n");
        let _ = if self.terminal {
            // Back to the block's first line, clear to the end, draw anew.
            let up = match self.drawn {
                0 | 1 => String::new(),
                n => format!("\x1b[{}F", n - 1),
            };
            write!(err, "{up}\r\x1b[J{text}")
        } else {
            writeln!(err, "{text}")
        };
        let _ = err.flush();
        self.drawn = lines.len();
        self.last_ns = time;
    }

    fn status(&mut self, time: u64, records: &[raw::Timeline]) -> LiveView {
        let sum = |f: fn(&raw::Timeline) -> u64| records.iter().map(f).sum::<u64>();
        let (read, written) = (sum(|t| t.bytes_read), sum(|t| t.bytes_written));
        let secs = (time - self.last_ns) as f64 / 1e9;
        let rate = |now: u64, then: u64| now.saturating_sub(then) as f64 / secs;
        let bandwidth = (read + written > 0).then(|| {
            (
                rate(read, self.last_bytes.0),
                rate(written, self.last_bytes.1),
            )
        });
        self.last_bytes = (read, written);
        LiveView {
            elapsed_ns: time - self.start_ns,
            resident_bytes: sum(|t| t.rss),
            heap_bytes: sum(raw::Timeline::heap_live),
            bandwidth,
            processes: records.len(),
            sites: Vec::new(),
        }
    }

    /// Reads what each image published since the last update; forgets the
    /// images that ended (their memory went with them).
    fn follow(&mut self, images: &[Image<'_>]) {
        self.objects
            .retain(|key, _| images.iter().any(|i| (i.pid, i.seq) == *key));
        for image in images {
            let entry = match self.objects.entry((image.pid, image.seq)) {
                Entry::Occupied(entry) => entry.into_mut(),
                Entry::Vacant(entry) => {
                    entry.insert((LogTail::new(), LiveObjects::new(image.sample_rate)))
                }
            };
            let (tail, objects) = entry;
            objects.age_early_frees();
            // One buffer for every update: a fresh one each time would cost
            // its pages again. Applied every APPLY_EVERY events, so that its
            // size is bounded, not by the events of a tick (millions when
            // every block is recorded: 3 GB for bench/malloc.sh's program).
            let mut events = std::mem::take(&mut objects.queued);
            tail.read_new(image.log, &mut |_, rec| {
                objects.take(rec, &mut events);
                if events.len() >= APPLY_EVERY {
                    objects.apply(&mut events);
                }
            });
            objects.apply(&mut events);
            objects.queued = events;
        }
    }

    /// The sites holding the most live memory in processes `pids`.
    fn top_sites(&mut self, pids: &[u32]) -> Vec<LiveSite> {
        let mut by_site: HashMap<(&'static str, String), Held> = HashMap::new();
        for (&(pid, _), (_, objects)) in &self.objects {
            if !pids.contains(&pid) {
                continue;
            }
            for ((kind, stack), held) in objects.by_stack() {
                let label = match self.labels.get(&(pid, stack)) {
                    Some(label) => label.clone(),
                    None => {
                        let label = objects.site(pid, stack, &mut self.symbolizer);
                        if objects.stacks.contains_key(&stack) {
                            self.labels.insert((pid, stack), label.clone());
                        }
                        label
                    }
                };
                by_site.entry((kind, label)).or_default().add(&held);
            }
        }
        let mut top: Vec<_> = by_site
            .into_iter()
            .filter(|(_, h)| h.bytes >= 1.0)
            .collect();
        top.sort_by(|a, b| b.1.bytes.total_cmp(&a.1.bytes).then_with(|| a.0.cmp(&b.0)));
        top.into_iter()
            .take(TOP_SITES)
            .map(|((kind, label), held)| LiveSite {
                kind,
                label,
                bytes: held.bytes,
                blocks: held.blocks,
                estimated: held.estimated,
            })
            .collect()
    }

    /// Ends the redrawn block so the summary starts on its own line.
    pub fn finish(&mut self) {
        if self.terminal && self.drawn > 0 {
            eprintln!();
        }
    }
}

/// Columns of the terminal on stderr (80 if it does not say).
fn terminal_width() -> usize {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ fills the winsize it is given.
    let ok = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    if ok && size.ws_col > 0 {
        size.ws_col as usize
    } else {
        80
    }
}

/// A mapping of `size` bytes at `address` made by `stack`.
fn mapping(address: u64, size: u64, stack_id: u64) -> Allocation {
    Allocation {
        address,
        size,
        stack_id,
        ..Default::default()
    }
}

/// An event that changes what is live, kept to be applied in time order.
enum Event {
    Alloc(raw::Alloc),
    Free(raw::Free),
    Mmap(raw::Mmap),
    Munmap(raw::Munmap),
    Mremap(raw::Mremap),
}

impl Event {
    fn time(&self) -> u64 {
        match self {
            Event::Alloc(e) => e.time,
            Event::Free(e) => e.time,
            Event::Mmap(e) => e.time,
            Event::Munmap(e) => e.time,
            Event::Mremap(e) => e.time,
        }
    }
}

/// Live memory of a stack or a site: bytes and blocks (estimated when some
/// of them stand for byte-sampled allocations).
#[derive(Clone, Default)]
struct Held {
    bytes: f64,
    blocks: f64,
    estimated: bool,
}

impl Held {
    fn add(&mut self, other: &Held) {
        self.bytes += other.bytes;
        self.blocks += other.blocks;
        self.estimated |= other.estimated;
    }
}

/// What one process image holds now, by allocating stack.
struct LiveObjects {
    sample_rate: u64,
    /// Live heap blocks: address -> (stack, estimated bytes, estimated count).
    heap: BlockMap<(u64, f64, f64)>,
    heap_by_stack: FxHashMap<u64, Held>,
    maps: Mappings,
    /// Frees seen before their block's allocation (another thread's log was
    /// read first): address -> time, kept for one more update.
    early_frees: BlockMap<(u64, bool)>,
    /// The events of an update, in time order (emptied by each).
    queued: Vec<Event>,
    stacks: HashMap<u64, Vec<u64>>,
    modules: Vec<LoadedModule>,
}

impl LiveObjects {
    fn new(sample_rate: u64) -> LiveObjects {
        LiveObjects {
            sample_rate,
            heap: block_map(0),
            heap_by_stack: FxHashMap::default(),
            maps: Mappings::default(),
            early_frees: block_map(0),
            queued: Vec::new(),
            stacks: HashMap::new(),
            modules: Vec::new(),
        }
    }

    /// Keeps definitions; queues the events that change what is live.
    fn take(&mut self, rec: RawRecord<'_>, events: &mut Vec<Event>) {
        match rec.tag {
            tag::STACK => {
                if let Some((id, frames)) = stack_def(&rec) {
                    self.stacks.insert(id, frames);
                }
            }
            tag::MODULE => {
                if let Some((_, module)) = module_def(&rec) {
                    self.modules.push(module);
                }
            }
            tag::ALLOC | tag::SMALL_ALLOC => events.extend(rec.alloc().map(Event::Alloc)),
            tag::FREE => events.extend(rec.free().map(Event::Free)),
            tag::MMAP => events.extend(rec.payload().map(Event::Mmap)),
            tag::MUNMAP => events.extend(rec.payload().map(Event::Munmap)),
            tag::MREMAP => events.extend(rec.payload().map(Event::Mremap)),
            _ => {}
        }
    }

    /// Frees left over from the update before had their chance.
    fn age_early_frees(&mut self) {
        self.early_frees
            .retain(|_, (_, fresh)| std::mem::take(fresh));
    }

    fn apply(&mut self, events: &mut Vec<Event>) {
        events.sort_by_key(Event::time);
        for event in events.drain(..) {
            match event {
                Event::Alloc(a) => {
                    if self.early_frees.get(&a.ptr).is_some_and(|f| f.0 >= a.time) {
                        self.early_frees.remove(&a.ptr);
                        continue;
                    }
                    let (estimated, count, bytes) = estimate(a.size, a.flags, self.sample_rate);
                    if let Some(old) = self.heap.insert(a.ptr, (a.stack, bytes, count)) {
                        self.release(old); // its free was not seen
                    }
                    let block = Held {
                        bytes,
                        blocks: count,
                        estimated,
                    };
                    self.heap_by_stack.entry(a.stack).or_default().add(&block);
                }
                Event::Free(f) => match self.heap.remove(&f.ptr) {
                    Some(block) => self.release(block),
                    None => {
                        self.early_frees.insert(f.ptr, (f.time, true));
                    }
                },
                Event::Mmap(m) => {
                    let row = mapping(m.addr, m.len, m.stack);
                    self.maps.map(row, m.time, &mut drop);
                }
                Event::Munmap(m) => self.maps.unmap(m.addr, m.len, m.time, &mut drop),
                Event::Mremap(m) => {
                    let origin = self.maps.moved(m.old_addr, m.old_len, m.time, &mut drop);
                    let stack = origin.map_or(0, |r| r.stack_id);
                    let row = mapping(m.new_addr, m.new_len, stack);
                    self.maps.map(row, m.time, &mut drop);
                }
            }
        }
    }

    fn release(&mut self, (stack, bytes, count): (u64, f64, f64)) {
        if let Some(held) = self.heap_by_stack.get_mut(&stack) {
            held.bytes -= bytes;
            held.blocks -= count;
            if held.blocks < 0.5 {
                self.heap_by_stack.remove(&stack);
            }
        }
    }

    /// Live bytes per (kind, stack): heap blocks and mappings.
    fn by_stack(&self) -> Vec<((&'static str, u64), Held)> {
        let mut out: Vec<_> = self
            .heap_by_stack
            .iter()
            .map(|(&stack, held)| (("heap", stack), held.clone()))
            .collect();
        let mut maps: HashMap<u64, Held> = HashMap::new();
        for (row, left) in self.maps.live() {
            let held = maps.entry(row.stack_id).or_default();
            held.bytes += left as f64;
            held.blocks += 1.0;
        }
        out.extend(
            maps.into_iter()
                .map(|(stack, held)| (("mmap", stack), held)),
        );
        out
    }

    /// Names the site of a stack the way the report does.
    fn site(&self, pid: u32, stack: u64, symbolizer: &mut Symbolizer) -> String {
        let Some(addrs) = self.stacks.get(&stack) else {
            return if stack == 0 {
                "(no call stack)".into()
            } else {
                format!("stack {stack:#x}")
            };
        };
        let frames = symbolizer.stack_rows(pid, stack, addrs, &self.modules);
        site_frame(&frames).map_or_else(
            || "(empty call stack)".into(),
            |f| code_label(&f.function, &f.file, f.line, &f.module),
        )
    }
}
