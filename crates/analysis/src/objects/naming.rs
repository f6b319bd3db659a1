//! Objects named by their allocation sites: a site inside a wrapper (an
//! allocator's own function, `xmalloc`) named by the callers that tell it
//! apart from the wrapper's other sites.

use super::{source_frame, source_label, DataObject, FrameIds, ObjectKind, SourceFrame};
use crate::Profile;
use memlens_profile::Frame;
use rustc_hash::FxHashMap;
use std::hash::Hash;

/// Callers looked through at most to tell apart the sites of one function.
const MAX_CALLERS: usize = 8;

/// Heap objects and mappings whose sites have the same name (a wrapper such
/// as `xmalloc` allocating for many callers) are named with the caller that
/// tells each apart, the nearest that does: "xmalloc (x.c:7) ← parse (p.c:40)",
/// or "… ←" over the callers they share. Sites whose callers are the same
/// too (a library routine allocating for one call in several places below
/// it: `setlocale`'s, or a C++ container's inlined allocator frames) are
/// named with the nearest frame below the site that tells them apart:
/// "_nl_find_locale (findlocale.c:204) ← … ← main (m.c:3)".
pub(super) fn name_wrappers_by_callers(p: &Profile, objects: &mut [DataObject]) {
    let same_names = |objects: &[DataObject]| {
        let mut by_name: FxHashMap<(u32, ObjectKind, String), Vec<usize>> = FxHashMap::default();
        for (i, o) in objects.iter().enumerate() {
            if matches!(o.kind, ObjectKind::Heap | ObjectKind::Mmap) && o.site.is_some() {
                by_name
                    .entry((o.pid, o.kind, o.name.clone()))
                    .or_default()
                    .push(i);
            }
        }
        by_name
            .into_values()
            .filter(|v| v.len() > 1)
            .collect::<Vec<_>>()
    };
    // Callers labelled only where shown: a wrapper's thousands of sites
    // are told apart by one caller each.
    let mut ids = FrameIds::default();
    for same in same_names(objects) {
        let chains: Vec<Vec<usize>> = (same.iter())
            .map(|&i| {
                (caller_frames(p, objects[i].pid, objects[i].stack_id))
                    .map(|f| ids.id(f))
                    .collect()
            })
            .collect();
        for (&i, suffix) in same
            .iter()
            .zip(caller_suffixes(&chains, |id| ids.label(id)))
        {
            objects[i].name.push_str(&suffix);
        }
    }
    for same in same_names(objects) {
        let chains: Vec<Vec<String>> = (same.iter())
            .map(|&i| site_callees(p, objects[i].pid, objects[i].stack_id))
            .collect();
        let prefixes: Vec<String> = (telling_apart(&chains).iter())
            .map(|shown| {
                shown
                    .iter()
                    .rev()
                    .map(|f| format!("{} ← ", shown_label(f, String::clone)))
                    .collect()
            })
            .collect();
        // Only a prefix no other site of the name has tells it apart.
        let mut times: FxHashMap<&str, usize> = FxHashMap::default();
        for prefix in &prefixes {
            *times.entry(prefix).or_default() += 1;
        }
        for (&i, prefix) in same.iter().zip(&prefixes) {
            if times[prefix.as_str()] == 1 {
                objects[i].name.insert_str(0, prefix);
            }
        }
    }
}

/// A stack's frames and its allocation site (the first frame not skipped).
fn frames_and_site(p: &Profile, pid: u32, stack_id: u64) -> Option<(&[Frame], &Frame)> {
    let frames = p.stacks.get(&(pid, stack_id))?;
    Some((frames, p.skip_frames.site(frames)?))
}

/// The callers of an allocation site (the stack's first frame not skipped),
/// nearest first, at most [`MAX_CALLERS`], labelled.
pub(crate) fn site_callers(p: &Profile, pid: u32, stack_id: u64) -> Vec<String> {
    caller_frames(p, pid, stack_id)
        .map(|f| source_label(&f))
        .collect()
}

/// [`site_callers`] as their source parts.
fn caller_frames(p: &Profile, pid: u32, stack_id: u64) -> impl Iterator<Item = SourceFrame<'_>> {
    let (frames, site) = frames_and_site(p, pid, stack_id).unzip();
    (frames.unwrap_or_default().iter())
        .skip_while(move |f| !site.is_some_and(|site| std::ptr::eq(*f, site)))
        .skip(1)
        .take(MAX_CALLERS)
        .map(source_frame)
}

/// The frames below an allocation site (those skipped, the allocation's
/// own first), nearest the site first, at most [`MAX_CALLERS`], labelled;
/// a language runtime's allocator frames by function alone (which of its
/// lines made a block tells the user nothing).
fn site_callees(p: &Profile, pid: u32, stack_id: u64) -> Vec<String> {
    let Some((frames, site)) = frames_and_site(p, pid, stack_id) else {
        return Vec::new();
    };
    let below: Vec<&Frame> = frames
        .iter()
        .take_while(|f| !std::ptr::eq(*f, site))
        .collect();
    (below.into_iter().rev().take(MAX_CALLERS))
        .map(
            |f| match memlens_profile::SkipFrames::is_allocation_layer(f) {
                true => crate::code_label(&f.function, "", 0, &f.module),
                false => label(f),
            },
        )
        .collect()
}

fn label(f: &Frame) -> String {
    crate::code_label(&f.function, &f.file, f.line, &f.module)
}

/// For sites of one name with these caller chains, the suffix that tells
/// each apart (" ← parse (p.c:40)", or " ← … ← main (m.c:3)").
pub(crate) fn caller_suffixes<T: Eq + Hash + Clone>(
    chains: &[Vec<T>],
    label: impl Fn(&T) -> String,
) -> Vec<String> {
    (telling_apart(chains).iter())
        .map(|shown| {
            (shown.iter())
                .map(|f| format!(" ← {}", shown_label(f, &label)))
                .collect()
        })
        .collect()
}

/// A frame [`telling_apart`] shows, labelled; None: "…" over frames shared.
fn shown_label<T>(frame: &Option<T>, label: impl Fn(&T) -> String) -> String {
    frame.as_ref().map_or_else(|| "…".to_string(), label)
}

/// For chains of frames (nearest first), the frames that tell each apart:
/// the nearest one no other chain shares at that depth, after "…" (None)
/// over those they share; every frame up to it where two chains would end
/// at the same one (the whole chain where none tells it apart).
fn telling_apart<T: Eq + Hash + Clone>(chains: &[Vec<T>]) -> Vec<Vec<Option<T>>> {
    // The fewest frames no other chain shares, each depth's prefixes
    // counted once: a wrapper can have thousands of sites.
    let mut depth: Vec<Option<usize>> = chains.iter().map(|c| c.is_empty().then_some(0)).collect();
    fn prefix<T>(c: &[T], d: usize) -> &[T] {
        &c[..d.min(c.len())]
    }
    for d in 1..=chains.iter().map(Vec::len).max().unwrap_or(0) {
        if depth.iter().all(Option::is_some) {
            break;
        }
        let mut counts: FxHashMap<&[T], usize> = FxHashMap::default();
        for c in chains {
            *counts.entry(prefix(c, d)).or_default() += 1;
        }
        for (c, found) in chains.iter().zip(&mut depth) {
            if found.is_none() && d <= c.len() && counts[prefix(c, d)] == 1 {
                *found = Some(d);
            }
        }
    }
    let shown: Vec<Vec<Option<&T>>> = (chains.iter().zip(depth))
        .map(|(chain, d)| match d.unwrap_or(chain.len()) {
            0 => Vec::new(),
            1 => vec![Some(&chain[0])],
            d => vec![None, Some(&chain[d - 1])],
        })
        .collect();
    let mut times: FxHashMap<&[Option<&T>], usize> = FxHashMap::default();
    for s in &shown {
        *times.entry(s).or_default() += 1;
    }
    (chains.iter().zip(&shown))
        .map(|(chain, mine)| {
            // Two chains told apart at different depths can end at the
            // same frame: they show every frame up to it.
            if times[mine.as_slice()] > 1 {
                chain.iter().cloned().map(Some).collect()
            } else {
                mine.iter().map(|f| f.cloned()).collect()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The frames that tell chains apart: the nearest no other chain
    /// shares, "…" over those shared, whole chains where they collide.
    #[test]
    fn chains_are_told_apart_by_their_nearest_own_frame() {
        let chain = |c: &[&str]| c.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let apart = |chains: &[&[&str]]| {
            let chains: Vec<Vec<String>> = chains.iter().map(|c| chain(c)).collect();
            (telling_apart(&chains).iter())
                .map(|shown| {
                    (shown.iter())
                        .map(|f| shown_label(f, String::clone))
                        .collect()
                })
                .collect::<Vec<Vec<String>>>()
        };
        assert_eq!(apart(&[&["x"], &["y"]]), [chain(&["x"]), chain(&["y"])]);
        assert_eq!(
            apart(&[&["a", "b"], &["a", "c"]]),
            [chain(&["…", "b"]), chain(&["…", "c"])]
        );
        assert_eq!(
            apart(&[&["a"], &["a", "b"]]),
            [chain(&["a"]), chain(&["…", "b"])]
        );
        // Told apart at depths 2 and 3, both ending at "z": every frame.
        assert_eq!(
            apart(&[&["a", "z"], &["a", "b", "z"], &["a", "b", "y"]]),
            [
                chain(&["a", "z"]),
                chain(&["a", "b", "z"]),
                chain(&["…", "y"])
            ]
        );
        assert_eq!(apart(&[&["a"], &["a"]]), [chain(&["a"]), chain(&["a"])]);
    }
}
