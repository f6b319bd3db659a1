//! The tables of a profile. Times are nanoseconds since the run started
//! (`meta.json` `clock.start_ns` gives the CLOCK_MONOTONIC origin).

use crate::table;

table! {
    /// One heap block or mapping that carried an event: large, sampled or
    /// grouped allocations, blocks still live at the end, and every mmap and
    /// thread stack. When every block is recorded (`--sample-rate 1`) a small
    /// freed block has a row only with `--keep-blocks` or access sampling
    /// (whose samples are attributed to blocks): `sites` sums them all.
    Allocation = "allocations" {
        pid: u32,
        tid: u32,
        /// malloc, calloc, realloc, memalign, valloc, mmap.
        kind: String,
        address: u64,
        /// Bytes requested (for mmap: length).
        size: u64,
        /// Bytes the allocator reserved (malloc_usable_size).
        usable_size: u64,
        alloc_ns: u64,
        /// Null while live at the end of the process (a leak, for heap blocks).
        free_ns: Option<u64>,
        stack_id: u64,
        /// True when chosen by byte sampling rather than recorded exactly.
        sampled: bool,
        /// How many allocations this row stands for (1 when exact).
        est_count: f64,
        /// How many bytes this row stands for (its size when exact).
        est_bytes: f64,
        /// Synthetic object from memlens_group_begin/end.
        group: Option<String>,
        prot: Option<i32>,
        map_flags: Option<i32>,
        fd: Option<i32>,
        /// A mapping no call stack names: as /proc/PID/maps of a process
        /// memlens attached to named it (a path, `[heap]`, `[stack]`;
        /// "anonymous" for none). Null otherwise.
        name: Option<String>,
    }
}

table! {
    /// One heap allocation site of a process: a whole call stack (and the
    /// group its blocks were put in, if any), with what its blocks did over
    /// the run, replayed from every recorded block: exact when every block was
    /// recorded (`--sample-rate 1`), sampled blocks scaled otherwise.
    /// heaptrack's measures, in requested bytes.
    HeapSite = "sites" {
        pid: u32,
        stack_id: u64,
        /// memlens_group_begin/end's name for the blocks, if grouped.
        group: Option<String>,
        /// Blocks allocated, and the bytes requested for them.
        allocations: f64,
        bytes: f64,
        /// Bytes the allocator reserved for them (malloc_usable_size).
        usable_bytes: f64,
        /// Blocks whose free is the process's next heap event after an
        /// allocation of their site and size (heaptrack's temporary
        /// allocations); null unless every block was recorded.
        temporary: Option<u64>,
        /// The most bytes of this site live at once.
        peak_bytes: f64,
        /// Bytes of this site live when the process's heap (requested
        /// bytes, this site and every other) was at its peak.
        bytes_at_peak: f64,
        /// Blocks, and their bytes, still live when the process ended.
        leaked: f64,
        leaked_bytes: f64,
        /// First allocation and last allocation or free.
        first_ns: u64,
        last_ns: u64,
        /// True when some of its blocks were byte-sampled and scaled.
        sampled: bool,
    }
}

table! {
    /// Each heap site's live bytes over time: at every tick of the recording
    /// interval where they changed, the bytes live at the tick and the most
    /// live since the previous point, and its running totals: blocks and
    /// bytes allocated (scaled where sampled) and temporary allocations
    /// (null unless every block was recorded), whose differences are what
    /// it allocated between two points, from its first allocation since the
    /// previous point to its last (all null in profiles written before).
    SiteLivePoint = "site_timeline" {
        pid: u32,
        stack_id: u64,
        group: Option<String>,
        time_ns: u64,
        live_bytes: f64,
        max_bytes: f64,
        allocations: Option<f64>,
        bytes: Option<f64>,
        temporary: Option<u64>,
        allocated_from_ns: Option<u64>,
        allocated_to_ns: Option<u64>,
    }
}

table! {
    /// Symbolized call stacks, one row per frame (inlined frames get their own rows).
    Frame = "stacks" {
        pid: u32,
        stack_id: u64,
        /// 0 is the innermost frame (the allocation call site).
        depth: u32,
        address: u64,
        module: String,
        function: String,
        file: String,
        line: u32,
        inlined: bool,
    }
}

table! {
    /// One execution of an annotated region on one thread.
    Region = "regions" {
        pid: u32,
        tid: u32,
        name: String,
        begin_ns: u64,
        /// Null if the region was still open when the process ended.
        end_ns: Option<u64>,
        depth: u32,
        /// Exact accesses of instrumented code on this thread inside the region
        /// (null when the program was not instrumented).
        loads: Option<u64>,
        stores: Option<u64>,
        /// Exact bytes, intercepted memcpy/memmove/memset included.
        bytes_read: Option<u64>,
        bytes_written: Option<u64>,
        /// Of the bytes above, those the OpenMP teams this thread forked in
        /// the region read and wrote (counted through OMPT; null for a phase
        /// or a run without the counts).
        team_bytes: Option<u64>,
        /// Nanoseconds this thread spent in the runtime's access slow path
        /// (taking samples, publishing counts) inside the region, measured:
        /// part of what sampling cost the region, not all of it (null for a
        /// phase or a run without the counts).
        slow_path_ns: Option<u64>,
        /// A phase of the whole process (`memlens_phase_begin`): every
        /// thread's accesses between its marks, `tid` the thread that began it.
        process_wide: bool,
        /// The process's exact live heap (requested bytes) when the region
        /// began and ended, and the most in between, replayed from every
        /// block's events: null unless every block was recorded
        /// (`--sample-rate 1`, `--leaks`).
        heap_begin: Option<u64>,
        heap_end: Option<u64>,
        heap_peak: Option<u64>,
    }
}

table! {
    /// One sampled access of instrumented code (one per `period` accesses of its
    /// class, with jitter), or one hardware sample of a load or store (PEBS,
    /// IBS, SPE, live or imported).
    AccessSample = "samples" {
        pid: u32,
        tid: u32,
        time_ns: u64,
        cpu: u32,
        /// Code address of the access (instrumented code: the callback's call
        /// site).
        pc: u64,
        address: u64,
        /// Bytes accessed; 0 when the hardware does not say.
        size: u32,
        is_store: bool,
        /// Memory level that served it (memlens_rawlog::level::MemLevel code; 0
        /// unknown).
        level: u8,
        /// perf's data-source encoding as recorded (PEBS, IBS) or as perf
        /// synthesises it (SPE); 0 when none.
        data_src: u64,
        /// Cycles: PEBS weight, SPE total latency, IBS data-cache miss latency.
        latency: Option<u32>,
        /// SPE issue latency (cycles).
        issue_latency: Option<u32>,
        /// SPE translation latency, IBS TLB refill latency (cycles).
        translation_latency: Option<u32>,
        phys_addr: Option<u64>,
        /// SPE event bits (RETIRED, L1D-ACCESS, ... as in the SPE packet).
        events: u64,
        /// The hardware's own data-source code (SPE DATA-SOURCE packet, IBS
        /// DataSrc), before mapping to `level`.
        hw_source: Option<u64>,
        /// SPE operation subclass byte (GP-REG, SIMD-FP, atomics, ...).
        op_subclass: u8,
        /// Modelled, not measured: the calibrated latency (ns) of the level
        /// the cache model gave (`memlens record --cache-model` on a machine
        /// with `memlens calibrate` done); null otherwise.
        model_cost_ns: Option<f64>,
        /// Part of an intercepted memcpy, memmove or memset (instrumented
        /// code): its bytes sampled as 8-byte accesses, `pc` the call's site.
        bulk: bool,
        /// Half of an atomic read-modify-write (instrumented code; it counts
        /// as a load and a store of its size).
        atomic: bool,
        /// The access's calling context (`stacks`; instrumented code), 0
        /// when none was walked.
        stack_id: u64,
    }
}

table! {
    /// The columns of `samples` the analyses use, read without the others (a
    /// third of a full row in memory). Read-only: the file is written as
    /// [`AccessSample`].
    SampleCore = "samples" {
        pid: u32,
        tid: u32,
        time_ns: u64,
        pc: u64,
        address: u64,
        /// Bytes accessed; 0 when the hardware does not say.
        size: u32,
        is_store: bool,
        level: u8,
        latency: Option<u32>,
        bulk: bool,
        atomic: bool,
        stack_id: u64,
    }
}

table! {
    /// The latency columns of `samples`, read only for profiles whose samples
    /// carry SPE's latency breakdown. Read-only (written as [`AccessSample`]).
    SampleLatencies = "samples" {
        pid: u32,
        tid: u32,
        is_store: bool,
        level: u8,
        latency: Option<u32>,
        issue_latency: Option<u32>,
        translation_latency: Option<u32>,
    }
}

table! {
    /// Source location of each code address that samples refer to.
    CodeLocation = "locations" {
        pid: u32,
        pc: u64,
        module: String,
        function: String,
        file: String,
        line: u32,
    }
}

table! {
    /// An address range named with memlens_tag.
    TagRange = "tags" {
        pid: u32,
        tid: u32,
        name: String,
        address: u64,
        size: u64,
        begin_ns: u64,
        end_ns: Option<u64>,
    }
}

table! {
    /// One thread of a traced process: its lifetime and its own exact totals.
    ThreadRow = "threads" {
        pid: u32,
        tid: u32,
        start_ns: Option<u64>,
        end_ns: Option<u64>,
        /// Exact accesses of instrumented code (null when none ran), with
        /// intercepted memcpy/memmove/memset bytes.
        loads: Option<u64>,
        stores: Option<u64>,
        bytes_read: Option<u64>,
        bytes_written: Option<u64>,
        /// Exact heap calls and bytes of the thread (null when it shared its
        /// counters with others: more threads than header slots).
        allocs: Option<u64>,
        alloc_bytes: Option<u64>,
        frees: Option<u64>,
        free_bytes: Option<u64>,
        /// Calls of qsort/qsort_r from instrumented code and the bytes of the
        /// arrays they sorted: libc moves their elements, which the counts
        /// above do not hold (null unless the thread exited, instrumented).
        sort_calls: Option<u64>,
        sort_bytes: Option<u64>,
        /// False: the thread still ran when its process ended, and its counts
        /// are as it last published them (up to 65536 accesses a class short).
        final_counts: bool,
    }
}

table! {
    /// One thread's exact traffic so far, at a timeline tick where it
    /// changed (instrumented code; as the thread last published its counts,
    /// at most 65536 accesses of a class behind): differences over time give
    /// the thread's bandwidth.
    ThreadTrafficPoint = "thread_timeline" {
        pid: u32,
        tid: u32,
        time_ns: u64,
        bytes_read: u64,
        bytes_written: u64,
        loads: u64,
        stores: u64,
    }
}

table! {
    /// Capacity of one process at one instant.
    TimelinePoint = "timeline" {
        pid: u32,
        time_ns: u64,
        /// Resident set (VmRSS) and its parts, bytes, from /proc/PID/status.
        rss: u64,
        anon: u64,
        file: u64,
        shmem: u64,
        swap: u64,
        /// Live heap bytes (usable sizes) from the runtime's exact counters,
        /// plus `heap_before_start`.
        heap_live: u64,
        /// What glibc's allocator held when the runtime started (its own
        /// count: blocks of the loader and of constructors that ran first).
        heap_before_start: u64,
        heap_alloc_bytes: u64,
        heap_free_bytes: u64,
        heap_allocs: u64,
        heap_frees: u64,
        /// Exact bytes read/written and accesses of instrumented code so far
        /// (cumulative; differences over time give bandwidth).
        bytes_read: u64,
        bytes_written: u64,
        loads: u64,
        stores: u64,
        numa0: Option<u64>,
        numa1: Option<u64>,
        numa2: Option<u64>,
        numa3: Option<u64>,
    }
}

table! {
    /// One reading of a counting perf event, taken by the collector every
    /// interval: cumulative since the program started.
    CounterReading = "counters" {
        name: String,
        /// Unit of `value`: "ns", "faults", "instructions", "bytes", ...
        unit: String,
        /// "program" (its processes, inherited) or "machine" (uncore, all CPUs).
        scope: String,
        /// How `value` is obtained: "measured", or "modelled: ..." for bytes
        /// derived from event counts.
        method: String,
        time_ns: u64,
        /// Scaled cumulative value, multiplexing compensated.
        value: f64,
        /// Raw cumulative count and the kernel's enabled/running times.
        count: u64,
        enabled_ns: u64,
        running_ns: u64,
    }
}

table! {
    /// An ELF object loaded in a process.
    Module = "modules" {
        pid: u32,
        path: String,
        start: u64,
        end: u64,
        bias: u64,
        load_ns: u64,
    }
}

table! {
    /// A static data object (ELF symbol of type OBJECT), at its runtime address.
    StaticObject = "statics" {
        pid: u32,
        module: String,
        name: String,
        address: u64,
        size: u64,
    }
}

table! {
    /// A process of the run (`meta.json`'s `processes` as a table, for SQL:
    /// not a file of the profile). Joined on `pid`, it gives every table the
    /// MPI rank and host of its rows.
    ProcessRow = "processes" {
        pid: u32,
        ppid: u32,
        rank: Option<u32>,
        host: String,
        exe: String,
        start_ns: u64,
        end_ns: Option<u64>,
        exit_code: Option<i32>,
        /// The profile directory it was recorded in (a job's `rank=N`).
        part: String,
    }
}
