//! Hand-made profiles for the tests of the layers above (analysis,
//! presentation): the pieces tests build by hand, defined once. Behind the
//! `testing` feature, which only dev-dependencies turn on.

use crate::{Allocation, Backend, Frame, Profile, Region};

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
