//! Hand-made profiles for the tests of the layers above (analysis,
//! presentation): the pieces tests build by hand, defined once. Behind the
//! `testing` feature, which only dev-dependencies turn on.

use crate::{Allocation, Backend, Frame, Profile, Region, SampleCore};

/// A profile of an instrumented run sampling 1 access in `period`.
pub fn instrumented(period: u64) -> Profile {
    let mut p = Profile::default();
    p.meta.backend = vec![Backend::Instrumented.name().into()];
    p.meta.settings.access_period = period;
    p
}

/// One heap block of process `pid`, allocated at `alloc_ns` from stack
/// `stack_id` and never freed, recorded exactly.
pub fn heap_block(pid: u32, address: u64, size: u64, stack_id: u64, alloc_ns: u64) -> Allocation {
    Allocation {
        pid,
        kind: "malloc".into(),
        address,
        size,
        usable_size: size,
        stack_id,
        alloc_ns,
        est_count: 1.0,
        est_bytes: size as f64,
        ..Default::default()
    }
}

/// Puts stack `stack_id` of process `pid` in `p`: its frames, innermost
/// first, as (function, line) in /src/a.c.
pub fn add_stack(p: &mut Profile, pid: u32, stack_id: u64, frames: &[(&str, u32)]) {
    let frames = (frames.iter().zip(0..))
        .map(|(&(function, line), depth)| Frame {
            pid,
            stack_id,
            depth,
            function: function.into(),
            file: "/src/a.c".into(),
            line,
            ..Default::default()
        })
        .collect();
    p.stacks.insert((pid, stack_id), frames);
}

/// An annotated region of thread `tid` of process `pid`, from `begin_ns`
/// to `end_ns`.
pub fn region(pid: u32, tid: u32, name: &str, begin_ns: u64, end_ns: u64) -> Region {
    Region {
        pid,
        tid,
        name: name.into(),
        begin_ns,
        end_ns: Some(end_ns),
        ..Default::default()
    }
}

/// `n` samples of 8-byte stores of process `pid`, one every 1 000 ns from
/// `from_ns`, in stack 7: threads 1 and 2 in turn, thread 1's at `address`,
/// thread 2's at the next 8 bytes (two fields of one cache line).
pub fn stores_in_turn(pid: u32, address: u64, n: u64, from_ns: u64) -> Vec<SampleCore> {
    (0..n)
        .map(|i| SampleCore {
            pid,
            tid: 1 + (i % 2) as u32,
            time_ns: from_ns + 1_000 * i,
            address: address + 8 * (i % 2),
            size: 8,
            is_store: true,
            stack_id: 7,
            ..Default::default()
        })
        .collect()
}
