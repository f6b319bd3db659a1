//! A module's file read through a window (object reads names a few bytes
//! at a time), and where its debug information lies.

use object::Object;
use std::path::{Path, PathBuf};

/// A module's file, read as it is parsed: only its headers and the sections
/// asked for (reading it whole copied every byte, libc's 2 MB for one build
/// id); a file cut short while it is read is an error, not a fault.
pub(super) fn module_file(path: impl AsRef<Path>) -> Option<object::ReadCache<WindowedFile>> {
    let file = std::fs::File::open(path).ok()?;
    Some(object::ReadCache::new(WindowedFile::new(file)))
}

/// A file read through a window of [`WindowedFile::SIZE`] bytes. object's
/// `ReadCache` reads each symbol name with a seek and a read of 256 bytes:
/// 20 000 system calls for libc's symbol table, 10 to 20 ms of the
/// finalizer. The names lie together in the string table, so one read of
/// the window serves hundreds; a read as large as the window (a section's
/// data) goes to the file directly.
pub(super) struct WindowedFile {
    file: std::fs::File,
    pos: u64,
    window: Vec<u8>,
    /// The file offset of the window's first byte.
    at: u64,
}

impl WindowedFile {
    const SIZE: usize = 64 << 10;

    fn new(file: std::fs::File) -> WindowedFile {
        WindowedFile {
            file,
            pos: 0,
            window: Vec::new(),
            at: 0,
        }
    }
}

impl std::io::Read for WindowedFile {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::os::unix::fs::FileExt;
        if buf.len() >= Self::SIZE {
            let n = self.file.read_at(buf, self.pos)?;
            self.pos += n as u64;
            return Ok(n);
        }
        if !(self.at..self.at + self.window.len() as u64).contains(&self.pos) {
            self.window.resize(Self::SIZE, 0);
            let n = self.file.read_at(&mut self.window, self.pos)?;
            self.window.truncate(n);
            self.at = self.pos;
        }
        let from = (self.pos - self.at) as usize;
        let n = buf.len().min(self.window.len() - from);
        buf[..n].copy_from_slice(&self.window[from..from + n]);
        self.pos += n as u64;
        Ok(n)
    }
}

impl std::io::Seek for WindowedFile {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        use std::io::SeekFrom;
        let pos = match to {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => self.file.metadata()?.len().checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        self.pos = pos.ok_or(std::io::ErrorKind::InvalidInput)?;
        Ok(self.pos)
    }
}

/// Where a module's debug information lies: the separate debug file its
/// build id names under `/usr/lib/debug/.build-id/` (Debian's -dbg and
/// -dbgsym packages) or in a debuginfod client's cache
/// (`$DEBUGINFOD_CACHE_PATH`, else `~/.cache/debuginfod_client`), else the
/// module itself.
pub(super) fn debug_file(path: &str) -> String {
    let separate = (|| {
        let data = module_file(path)?;
        let id = object::File::parse(&data).ok()?.build_id().ok()??;
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        let (dir, rest) = hex.split_at_checked(2)?;
        let env = |var| {
            std::env::var_os(var)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let debuginfod = env("DEBUGINFOD_CACHE_PATH").or_else(|| {
            let cache = env("XDG_CACHE_HOME").or_else(|| Some(env("HOME")?.join(".cache")));
            Some(cache?.join("debuginfod_client"))
        });
        let candidates = [
            Some(PathBuf::from(format!(
                "/usr/lib/debug/.build-id/{dir}/{rest}.debug"
            ))),
            debuginfod.map(|d| d.join(&hex).join("debuginfo")),
        ];
        candidates.into_iter().flatten().find(|c| c.is_file())
    })();
    separate.map_or_else(|| path.to_string(), |p| p.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::WindowedFile;

    #[test]
    fn a_windowed_file_reads_what_the_file_holds() {
        use std::io::{Read, Seek, SeekFrom};
        let bytes: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, &bytes).unwrap();
        let mut f = WindowedFile::new(std::fs::File::open(&path).unwrap());
        // Seeks back and forth, reads within, across and past the window,
        // one as large as the window, and at the end of the file.
        for (at, len) in [
            (0, 10),
            (5, 300),
            (65_530, 20),
            (100, 65_536),
            (131_000, 1),
            (199_990, 50),
            (300_000, 4),
        ] {
            f.seek(SeekFrom::Start(at)).unwrap();
            let mut buf = vec![0; len];
            let mut got = 0;
            while got < len {
                match f.read(&mut buf[got..]).unwrap() {
                    0 => break,
                    n => got += n,
                }
            }
            let want = &bytes[(at as usize).min(bytes.len())..(at as usize + len).min(bytes.len())];
            assert_eq!(&buf[..got], want, "at {at}, {len} bytes");
        }
        assert_eq!(f.seek(SeekFrom::End(-1)).unwrap(), 199_999);
    }
}
