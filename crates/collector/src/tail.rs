//! Follows a process image's raw log while the process runs: every record is
//! handed out once, as soon as the runtime has published it.
//!
//! Each thread appends to its staging block and publishes each record with a
//! release store of the block's used word, which also names the block the
//! records will be copied to when the staging block is full. A written block
//! appears whole (the runtime writes its header after its records): it is read
//! once, past the records already handed out from the staging block.

use memlens_rawlog::{self as raw, BlockState, FileHeader, RawRecord, Records};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::os::unix::fs::FileExt;

/// The log header a mapping of its first HEADER_SIZE bytes holds.
pub(crate) fn header_of(mapping: &memmap2::MmapRaw) -> &FileHeader {
    // SAFETY: the mapping is HEADER_SIZE bytes and FileHeader fits in it.
    unsafe { &*(mapping.as_ptr() as *const FileHeader) }
}

/// A staging block being followed.
struct Staging {
    /// Where its records go, as its header last said.
    dest: u64,
    /// Where the records not yet handed out begin; `None` once the written
    /// block at `dest` was read (it handed out the rest).
    consumed: Option<Resume>,
}

/// A point within a block's body: its offset, and the context of the
/// compact records after it ([`raw::Context`]).
#[derive(Clone, Copy)]
struct Resume {
    at: usize,
    context: raw::Context,
}

impl Resume {
    const START: Resume = Resume {
        at: 0,
        context: raw::Context::new(),
    };
}

/// The file is the caller's (passed to each read): a process's log is opened
/// once however many followers it has.
pub struct LogTail {
    /// Blocks looked at so far (the file grows a block at a time).
    scanned: u64,
    /// Blocks not yet initialised by the runtime, by index.
    open: BTreeSet<u64>,
    /// Staging blocks, by index.
    staging: BTreeMap<u64, Staging>,
    /// The staging block of each destination.
    staged_to: HashMap<u64, u64>,
    /// Records of a destination block already handed out from its staging
    /// block, by the destination's index, until that block is read.
    moved: HashMap<u64, Resume>,
    buf: Vec<u8>,
    /// Blocks whose records ended in one that cannot be read.
    pub malformed_blocks: u64,
}

impl LogTail {
    pub fn new() -> LogTail {
        LogTail {
            scanned: 0,
            open: BTreeSet::new(),
            staging: BTreeMap::new(),
            staged_to: HashMap::new(),
            moved: HashMap::new(),
            buf: Vec::new(),
            malformed_blocks: 0,
        }
    }

    /// Calls `each` with every record published since the last call and the
    /// thread that wrote it, in each thread's order (not in time order across
    /// threads).
    pub fn read_new(&mut self, file: &File, each: &mut dyn FnMut(u32, RawRecord<'_>)) {
        self.scan(file, each);
        let staging: Vec<u64> = self.staging.keys().copied().collect();
        for index in staging {
            self.follow_staging(file, index, each);
        }
    }

    /// Reads the blocks the runtime initialised since the last scan, to the
    /// file's end: written blocks are handed out past what their staging
    /// block handed out, staging blocks are followed from now on.
    fn scan(&mut self, file: &File, each: &mut dyn FnMut(u32, RawRecord<'_>)) {
        let len = file.metadata().map_or(0, |m| m.len());
        // A written block ends where its records end: the last one may be short.
        let blocks = (len.saturating_sub(raw::HEADER_SIZE as u64)).div_ceil(raw::BLOCK_SIZE as u64);
        self.open.extend(self.scanned..blocks);
        self.scanned = self.scanned.max(blocks);
        let open: Vec<u64> = self.open.iter().copied().collect();
        for index in open {
            match read_header(file, index) {
                Some(BlockState::Written { tid, used }) => {
                    self.open.remove(&index);
                    // Records the staging block handed out already.
                    let staged = (self.staged_to.remove(&index))
                        .and_then(|s| self.staging.get_mut(&s))
                        .filter(|s| s.dest == index);
                    let from = match staged {
                        Some(s) => s.consumed.take(),
                        None => self.moved.remove(&index),
                    };
                    let from = from.unwrap_or(Resume::START);
                    self.hand_out(file, index, tid, from, used as usize, each);
                }
                Some(BlockState::Staging { dest, .. }) => {
                    self.open.remove(&index);
                    let consumed = Some(Resume::START);
                    self.staging.insert(index, Staging { dest, consumed });
                    self.staged_to.insert(dest, index);
                }
                None => {} // reserved, not initialised yet
            }
        }
    }

    /// Hands out what a staging block published since the last read.
    fn follow_staging(
        &mut self,
        file: &File,
        index: u64,
        each: &mut dyn FnMut(u32, RawRecord<'_>),
    ) {
        let Some(BlockState::Staging { tid, dest, used }) = read_header(file, index) else {
            return;
        };
        let s = self.staging.get_mut(&index).expect("followed");
        if s.dest != dest {
            // Its records went to `s.dest`, not read yet: the written block
            // is read past what was handed out from here.
            if let Some(consumed) = s.consumed {
                self.moved.insert(s.dest, consumed);
            }
            self.staged_to.remove(&s.dest);
            self.staged_to.insert(dest, index);
            (s.dest, s.consumed) = (dest, Some(Resume::START));
            // The runtime wrote that block, and any it filled since, whole
            // before it named this destination: read them now, before the
            // records staged since, so that the thread's records keep their
            // order (the file may have grown since the last scan began).
            self.scan(file, each);
            // This destination itself found written was read whole by a scan
            // (this one, or one before this block was seen naming it, as the
            // runtime had copied it but not yet restarted here): none of its
            // records are left to hand out from here.
            if let Some(BlockState::Written { .. }) = read_header(file, dest) {
                if let Some(s) = self.staging.get_mut(&index) {
                    s.consumed = None;
                }
            }
        }
        let s = self.staging.get_mut(&index).expect("followed");
        let Some(consumed) = s.consumed else {
            return;
        };
        let used = (used as usize).min(raw::BLOCK_CAPACITY);
        if used <= consumed.at {
            return;
        }
        self.buf.resize(used - consumed.at, 0);
        let at = raw::block_offset(index) + (raw::BLOCK_HEADER_SIZE + consumed.at) as u64;
        if file.read_exact_at(&mut self.buf, at).is_err() {
            return;
        }
        // Read while the thread restarted the block: torn, read again next time.
        match read_header(file, index) {
            Some(BlockState::Staging { dest: now, .. }) if now == dest => {}
            _ => return,
        }
        let mut records = Records::resume(&self.buf, consumed.context);
        records.by_ref().for_each(|rec| each(tid, rec));
        let s = self.staging.get_mut(&index).expect("followed");
        if records.malformed {
            self.malformed_blocks += 1;
            // Scribbled on: nothing after it can be trusted.
            self.staging.remove(&index);
            self.staged_to.remove(&dest);
        } else {
            let context = records.context();
            s.consumed = Some(Resume { at: used, context });
        }
    }

    /// Hands out the records of a written block's body from `from` to `end`.
    fn hand_out(
        &mut self,
        file: &File,
        index: u64,
        tid: u32,
        from: Resume,
        end: usize,
        each: &mut dyn FnMut(u32, RawRecord<'_>),
    ) {
        let end = end.min(raw::BLOCK_CAPACITY);
        if end <= from.at {
            return;
        }
        self.buf.resize(end - from.at, 0);
        let at = raw::block_offset(index) + (raw::BLOCK_HEADER_SIZE + from.at) as u64;
        if file.read_exact_at(&mut self.buf, at).is_ok() {
            let mut records = Records::resume(&self.buf, from.context);
            records.by_ref().for_each(|rec| each(tid, rec));
            self.malformed_blocks += u64::from(records.malformed);
        }
    }
}

/// The state of block `index` as its header in the file says.
fn read_header(file: &File, index: u64) -> Option<BlockState> {
    let mut header = [0u8; raw::BLOCK_HEADER_SIZE];
    file.read_exact_at(&mut header, raw::block_offset(index))
        .ok()?;
    raw::BlockHeader::read(&header)
}

/// Raw logs written by hand, for the tests of what follows them.
#[cfg(test)]
pub(crate) mod test_log {
    use memlens_rawlog as raw;
    use std::fs::File;
    use std::io::{Seek, SeekFrom, Write};

    /// Appends the record `encode` writes (given where the body's free
    /// bytes begin and how many there are) to a block's body.
    fn append(body: &mut Vec<u8>, encode: impl FnOnce(*mut u8, usize) -> Option<usize>) {
        let used = body.len();
        body.resize(raw::BLOCK_CAPACITY, 0);
        // SAFETY: `used` is within the buffer.
        let n = encode(
            unsafe { body.as_mut_ptr().add(used) },
            raw::BLOCK_CAPACITY - used,
        );
        body.truncate(used + n.expect("fits"));
    }

    /// Appends one record to a block's body.
    pub(crate) fn push<P: raw::Payload>(body: &mut Vec<u8>, tag: u16, payload: &P, extra: &[u8]) {
        // SAFETY: `append` passes the writable bytes at `dst`.
        append(body, |dst, cap| unsafe {
            raw::encode(dst, cap, tag, payload, extra)
        });
    }

    /// Appends a free record to a block's body, in the runtime's compact
    /// form, coded against `context` (the body's so far).
    pub(crate) fn push_free(body: &mut Vec<u8>, context: &mut raw::Context, free: raw::Free) {
        // SAFETY: as in `push`.
        append(body, |dst, cap| unsafe {
            raw::encode_free(dst, cap, &free, context)
        });
    }

    /// A body of free records, each at the time of its pointer: a reader
    /// resuming within it must carry the times before.
    pub(crate) fn frees(ptrs: &[u64]) -> Vec<u8> {
        let (mut body, mut context) = (Vec::new(), raw::Context::new());
        for &ptr in ptrs {
            push_free(&mut body, &mut context, raw::Free { time: ptr, ptr });
        }
        body
    }

    /// Writes block `index` of thread `tid`: its header, `body` published.
    pub(crate) fn write_block(file: &mut File, index: u64, tid: u32, body: &[u8]) {
        let used = body.len() as u64;
        write_header_and_body(file, index, raw::BLOCK_MAGIC, tid, used, body);
    }

    /// Writes thread `tid`'s staging block at `index`, its records going to
    /// block `dest`: its header, `body` published.
    pub(crate) fn write_staging(file: &mut File, index: u64, tid: u32, dest: u64, body: &[u8]) {
        let word = raw::pack_staged(dest, body.len() as u64);
        write_header_and_body(file, index, raw::STAGE_MAGIC, tid, word, body);
    }

    fn write_header_and_body(
        file: &mut File,
        index: u64,
        magic: u32,
        tid: u32,
        used: u64,
        body: &[u8],
    ) {
        // The body first, then the header that publishes it, as the runtime.
        let offset = raw::block_offset(index);
        let mut whole = body.to_vec();
        whole.resize(raw::BLOCK_CAPACITY, 0);
        file.seek(SeekFrom::Start(offset + raw::BLOCK_HEADER_SIZE as u64))
            .unwrap();
        file.write_all(&whole).unwrap();
        file.seek(SeekFrom::Start(offset)).unwrap();
        file.write_all(&raw::BlockHeader::bytes(magic, tid, used))
            .unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_log::frees;

    /// A log with its header only, in `dir`: a writer and a reader of it.
    fn empty_log(dir: &std::path::Path) -> (File, File) {
        let path = dir.join("1.0.mlraw");
        let file = File::create(&path).unwrap();
        file.set_len(raw::HEADER_SIZE as u64).unwrap();
        (file, File::open(&path).unwrap())
    }

    /// The (thread, pointer) of each new record.
    fn read(tail: &mut LogTail, file: &File) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        tail.read_new(file, &mut |tid, rec| {
            let free = rec.free().expect("a free");
            assert_eq!(free.time, free.ptr, "decoded against the records before");
            out.push((tid, free.ptr))
        });
        out
    }

    #[test]
    fn each_record_is_handed_out_once_as_staging_blocks_fill_and_are_copied() {
        use test_log::{write_block, write_staging};
        let dir = tempfile::tempdir().unwrap();
        let (mut file, reader) = empty_log(dir.path());
        let mut tail = LogTail::new();
        assert!(read(&mut tail, &reader).is_empty());
        write_staging(&mut file, 0, 7, 1, &frees(&[1, 2]));
        assert_eq!(read(&mut tail, &reader), [(7, 1), (7, 2)]);
        write_staging(&mut file, 0, 7, 1, &frees(&[1, 2, 3]));
        write_staging(&mut file, 2, 8, 3, &frees(&[10]));
        assert_eq!(read(&mut tail, &reader), [(7, 3), (8, 10)]);
        // Thread 7 copies its records to block 1, then starts again for block 4.
        write_staging(&mut file, 0, 7, 1, &frees(&[1, 2, 3, 4]));
        write_block(&mut file, 1, 7, &frees(&[1, 2, 3, 4, 5]));
        assert_eq!(read(&mut tail, &reader), [(7, 4), (7, 5)]);
        write_staging(&mut file, 0, 7, 4, &frees(&[6]));
        assert_eq!(read(&mut tail, &reader), [(7, 6)]);
        // Seen restarted before its copy is read: the copy past what was
        // handed out.
        write_staging(&mut file, 0, 7, 4, &frees(&[6, 7]));
        assert_eq!(read(&mut tail, &reader), [(7, 7)]);
        write_staging(&mut file, 0, 7, 5, &frees(&[9]));
        let body = frees(&[6, 7, 8]);
        write_block(&mut file, 4, 7, &body);
        // The file ends where the last block's records end.
        let end = raw::block_offset(4) + (raw::BLOCK_HEADER_SIZE + body.len()) as u64;
        file.set_len(end).unwrap();
        assert_eq!(read(&mut tail, &reader), [(7, 8), (7, 9)]);
        assert!(read(&mut tail, &reader).is_empty());
        assert!(tail.open.contains(&3) && !tail.open.contains(&1));
    }

    /// A thread logging as the runtime does (each record published in its
    /// staging block; a full one copied to a new block at the log's end,
    /// header last, then started again for the next) while the tail reads:
    /// every record comes out once and in order, however the copies fall
    /// between the tail's look at the file's length and at the staging
    /// block (a copy in between left the copied block unread while the
    /// records staged after it came out first).
    #[test]
    fn a_thread_records_come_out_in_order_while_its_blocks_are_copied() {
        use test_log::{write_block, write_staging};
        let dir = tempfile::tempdir().unwrap();
        let (mut file, reader) = empty_log(dir.path());
        const RECORDS: u64 = 200_000;
        const PER_BLOCK: u64 = 5;
        let writer = std::thread::spawn(move || {
            use std::os::unix::fs::FileExt;
            // Only the new record's bytes, then the header that publishes
            // them (the staging block is never cleared, as the runtime's).
            let publish = |file: &File, dest: u64, used: usize| {
                let header = raw::BlockHeader::bytes(
                    raw::STAGE_MAGIC,
                    7,
                    raw::pack_staged(dest, used as u64),
                );
                file.write_all_at(&header, raw::block_offset(0)).unwrap();
            };
            let (mut dest, mut body, mut context) = (1, Vec::new(), raw::Context::new());
            write_staging(&mut file, 0, 7, dest, &body);
            for ptr in 1..=RECORDS {
                let start = body.len();
                test_log::push_free(&mut body, &mut context, raw::Free { time: ptr, ptr });
                let at = raw::block_offset(0) + (raw::BLOCK_HEADER_SIZE + start) as u64;
                file.write_all_at(&body[start..], at).unwrap();
                publish(&file, dest, body.len());
                if ptr % PER_BLOCK == 0 {
                    write_block(&mut file, dest, 7, &body);
                    (dest, body, context) = (dest + 1, Vec::new(), raw::Context::new());
                    publish(&file, dest, 0);
                }
            }
        });
        let mut tail = LogTail::new();
        let mut seen = Vec::new();
        while !writer.is_finished() {
            seen.extend(read(&mut tail, &reader).into_iter().map(|(_, ptr)| ptr));
        }
        writer.join().unwrap();
        seen.extend(read(&mut tail, &reader).into_iter().map(|(_, ptr)| ptr));
        let out_of_order = seen.windows(2).filter(|w| w[1] != w[0] + 1).count();
        assert_eq!(out_of_order, 0, "{} records", seen.len());
        assert_eq!(seen.len() as u64, RECORDS);
    }
}
