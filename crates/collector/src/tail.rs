//! Follows a process image's raw log while the process runs: every record is
//! handed out once, as soon as the runtime has published it.
//!
//! The runtime appends to one block per thread and publishes each record with a
//! release store of the block's `used`; a thread takes a new block only after
//! its last one is full. So a block can grow only while it is its thread's
//! newest; once a newer one of the same thread was seen, one more read of the
//! old block gets the rest of it and it is done.

use memlens_rawlog::{self as raw, RawRecord, Records};
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::os::unix::fs::FileExt;

#[derive(Default)]
struct OpenBlock {
    /// Known once the runtime has initialised the block.
    tid: Option<u32>,
    /// Bytes of records already handed out.
    consumed: usize,
}

/// The file is the caller's (passed to each read): a process's log is opened
/// once however many followers it has.
pub struct LogTail {
    /// Blocks looked at so far (the file grows a block at a time).
    scanned: u64,
    /// Blocks that may still grow, by index.
    open: BTreeMap<u64, OpenBlock>,
    /// Each thread's newest block.
    newest: HashMap<u32, u64>,
    buf: Vec<u8>,
}

impl LogTail {
    pub fn new() -> LogTail {
        LogTail {
            scanned: 0,
            open: BTreeMap::new(),
            newest: HashMap::new(),
            buf: Vec::new(),
        }
    }

    /// Calls `each` with every record published since the last call and the
    /// thread that wrote it, in each thread's order (not in time order across
    /// threads).
    pub fn read_new(&mut self, file: &File, each: &mut dyn FnMut(u32, RawRecord<'_>)) {
        let len = file.metadata().map_or(0, |m| m.len());
        let blocks = len.saturating_sub(raw::HEADER_SIZE as u64) / raw::BLOCK_SIZE as u64;
        for index in self.scanned..blocks {
            self.open.insert(index, OpenBlock::default());
        }
        self.scanned = self.scanned.max(blocks);
        let mut done = Vec::new();
        for (&index, block) in &mut self.open {
            // Decided before reading: a newer block of this thread was seen in an
            // earlier pass, so everything of this one was published before now.
            let finished = block
                .tid
                .is_some_and(|tid| self.newest.get(&tid).is_some_and(|&n| n > index));
            let offset = raw::block_offset(index);
            let mut header = [0u8; raw::BLOCK_HEADER_SIZE];
            if file.read_exact_at(&mut header, offset).is_err() {
                continue;
            }
            let Some((tid, used)) = raw::BlockHeader::read(&header) else {
                continue; // reserved, not initialised yet
            };
            block.tid = Some(tid);
            let newest = self.newest.entry(tid).or_insert(index);
            *newest = (*newest).max(index);
            let used = (used as usize).min(raw::BLOCK_CAPACITY);
            if used > block.consumed {
                self.buf.resize(used - block.consumed, 0);
                let at = offset + (raw::BLOCK_HEADER_SIZE + block.consumed) as u64;
                if file.read_exact_at(&mut self.buf, at).is_err() {
                    continue;
                }
                let mut records = Records::new(&self.buf);
                records.by_ref().for_each(|rec| each(tid, rec));
                if records.malformed {
                    done.push(index); // scribbled on: nothing after it can be trusted
                    continue;
                }
                block.consumed = used;
            }
            if finished || used == raw::BLOCK_CAPACITY {
                done.push(index);
            }
        }
        for index in done {
            self.open.remove(&index);
        }
    }
}

/// Raw logs written by hand, for the tests of what follows them.
#[cfg(test)]
pub(crate) mod test_log {
    use memlens_rawlog as raw;
    use std::fs::File;
    use std::io::{Seek, SeekFrom, Write};

    /// Appends one record to a block's body.
    pub(crate) fn push<P: raw::Payload>(body: &mut Vec<u8>, tag: u16, payload: &P, extra: &[u8]) {
        let used = body.len();
        body.resize(raw::BLOCK_CAPACITY, 0);
        // SAFETY: the buffer has BLOCK_CAPACITY - used bytes after `used`.
        let n = unsafe {
            raw::encode(
                body.as_mut_ptr().add(used),
                raw::BLOCK_CAPACITY - used,
                tag,
                payload,
                extra,
            )
        }
        .expect("fits");
        body.truncate(used + n);
    }

    /// Writes block `index` of thread `tid`: its header, `body` published.
    pub(crate) fn write_block(file: &mut File, index: u64, tid: u32, body: &[u8]) {
        let offset = raw::block_offset(index);
        file.seek(SeekFrom::Start(offset)).unwrap();
        file.write_all(&raw::BLOCK_MAGIC.to_le_bytes()).unwrap();
        file.write_all(&tid.to_le_bytes()).unwrap();
        file.write_all(&(body.len() as u64).to_le_bytes()).unwrap();
        let mut whole = body.to_vec();
        whole.resize(raw::BLOCK_CAPACITY, 0);
        file.write_all(&whole).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memlens_rawlog::tag;

    /// Writes a block of `Free` records.
    fn write_block(file: &mut File, index: u64, tid: u32, frees: &[u64]) {
        let mut body = Vec::new();
        for &ptr in frees {
            test_log::push(&mut body, tag::FREE, &raw::Free { time: 1, ptr }, &[]);
        }
        test_log::write_block(file, index, tid, &body);
    }

    /// The (thread, pointer) of each new record.
    fn read(tail: &mut LogTail, file: &File) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        tail.read_new(file, &mut |tid, rec| {
            out.extend(rec.payload::<raw::Free>().map(|f| (tid, f.ptr)))
        });
        out
    }

    #[test]
    fn each_record_is_handed_out_once_as_blocks_grow() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.0.mlraw");
        let mut file = File::create(&path).unwrap();
        file.set_len(raw::HEADER_SIZE as u64).unwrap();
        let reader = File::open(&path).unwrap();
        let mut tail = LogTail::new();
        assert!(read(&mut tail, &reader).is_empty());
        write_block(&mut file, 0, 7, &[1, 2]);
        assert_eq!(read(&mut tail, &reader), [(7, 1), (7, 2)]);
        write_block(&mut file, 0, 7, &[1, 2, 3]);
        write_block(&mut file, 1, 8, &[10]);
        assert_eq!(read(&mut tail, &reader), [(7, 3), (8, 10)]);
        // Thread 7 moves on: its old block is read once more, then left alone.
        write_block(&mut file, 0, 7, &[1, 2, 3, 4]);
        write_block(&mut file, 2, 7, &[5]);
        assert_eq!(read(&mut tail, &reader), [(7, 4), (7, 5)]);
        assert!(read(&mut tail, &reader).is_empty());
        assert!(!tail.open.contains_key(&0));
        assert!(tail.open.contains_key(&1) && tail.open.contains_key(&2));
    }
}
