//! The memlens profile directory: one Parquet file per table and `meta.json`.
//!
//! Each table is declared once with [`table!`], which gives its row struct, its
//! Arrow schema and both conversions; the README's schema section lists the same
//! columns. Any Arrow tool (pandas, polars, DuckDB, DataFusion, Spark) reads them.

mod backend;
mod columns;
mod live;
mod loaded;
mod machine;
mod meta;
mod tables;
#[cfg(feature = "testing")]
pub mod testing;
mod thinning;

pub use backend::Backend;
pub use columns::ColumnType;
pub use live::{LiveSite, LiveView};
pub use loaded::{merge, Only, Profile};
pub use machine::*;
/// The memory level that served an access, as every backend and the cache
/// model code it.
pub use memlens_rawlog::level::MemLevel;
pub use meta::*;
pub use tables::*;
pub use thinning::Thinned;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use parquet::arrow::arrow_reader::{ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
use parquet::arrow::ArrowWriter;
use std::fs::File;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// (Its cause is told in words: not a `source` for a chain to repeat.)
    #[error("{path}: {}", error_words(.cause))]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
    /// A file made from a profile (a report, plot or export) not written.
    /// (Its cause is told in words: not a `source` for a chain to repeat.)
    #[error("cannot write {path}: {}; choose a path in a directory you can write", io_words(.cause))]
    Output {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{path}: cannot make this directory: {}; give -o a directory you can write", error_words(.cause))]
    CreateDir {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{path}: not a readable Parquet table ({detail}); re-run `memlens record` or restore the file")]
    Parquet { path: PathBuf, detail: String },
    #[error("{path}: {detail}")]
    Format { path: PathBuf, detail: String },
    #[error("{path}: cannot be written ({detail}); make room, then `memlens finalize` the profile directory: its raw logs are kept")]
    Write { path: PathBuf, detail: String },
    #[error("{path}: belongs to another user (uid {owner}); write the profile into a directory of yours with -o")]
    NotOwned { path: PathBuf, owner: u32 },
    #[error("{0}: another memlens is writing this profile; wait for it, or choose another directory with -o")]
    Busy(PathBuf),
    #[error(
        "{0}: missing: the profile is incomplete; restore the file, or re-run `memlens record`"
    )]
    MissingTable(PathBuf),
    #[error("{0}: no memlens profile here (no meta.json and no raw/ logs); give the directory `memlens record` printed")]
    NotAProfile(PathBuf),
    #[error("{0}: is a symbolic link; memlens does not write through links: give the directory it points to with -o")]
    Link(PathBuf),
    #[error("{0}: exists and is not a directory; choose another name with -o")]
    NotADirectory(PathBuf),
    #[error("{0}: not a regular file (a link, FIFO, device or directory stands in its place); a profile holds only regular files: restore it, or re-run `memlens record`")]
    NotARegularFile(PathBuf),
    #[error("{path}: {size} bytes, larger than any memlens writes ({limit}); restore the file, or re-run `memlens record`")]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
    },
}

pub type Result<T> = std::result::Result<T, ProfileError>;

/// The file name of memlens' runtime library: its code and variables are
/// never the program's (no frame of a stack, no static object).
pub const RUNTIME_FILE: &str = "libmemlens_runtime.so";

/// Makes the profile directory `dir`, private to its user (mode 0700) like
/// perf.data; an existing one must be the user's own, so that nobody else's
/// links or files inside can redirect what memlens writes.
pub fn create_private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let io = |cause| ProfileError::CreateDir {
        path: dir.to_path_buf(),
        cause,
    };
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_symlink() => Err(ProfileError::Link(dir.to_path_buf())),
        Ok(m) if !m.is_dir() => Err(ProfileError::NotADirectory(dir.to_path_buf())),
        Ok(m) => {
            // SAFETY: geteuid has no preconditions.
            let me = unsafe { libc::geteuid() };
            if m.uid() != me {
                return Err(ProfileError::NotOwned {
                    path: dir.to_path_buf(),
                    owner: m.uid(),
                });
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(io)?;
            }
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(dir)
                .map_err(io)
        }
        Err(e) => Err(io(e)),
    }
}

/// The file a profile directory is locked through.
pub const LOCK_FILE: &str = ".memlens.lock";

/// An exclusive lock on a profile directory, held while a run or an import
/// writes it (released when dropped).
pub struct DirLock {
    _file: File,
}

/// Locks `dir` (which must exist) for writing; if another memlens holds it,
/// waits for it when `wait`, else says so.
pub fn lock_dir(dir: &Path, wait: bool) -> Result<DirLock> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .map_err(|cause| ProfileError::Io { path, cause })?;
    let mode = if wait {
        libc::LOCK_EX
    } else {
        libc::LOCK_EX | libc::LOCK_NB
    };
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(file.as_raw_fd(), mode) } != 0 {
        return Err(ProfileError::Busy(dir.to_path_buf()));
    }
    Ok(DirLock { _file: file })
}

/// Takes `dir` for a new run: made private if new and locked. An earlier
/// run's data there is moved to `<dir>.old` (replacing what that held, as
/// perf keeps perf.data.old), or removed when `force`; runs never mix.
/// Returns the lock, and where the earlier run went.
pub fn claim_dir(dir: &Path, force: bool) -> Result<(DirLock, Option<PathBuf>)> {
    create_private_dir(dir)?;
    let lock = lock_dir(dir, false)?;
    if !holds_run(dir) {
        return Ok((lock, None));
    }
    if force {
        clear_run(dir)?;
        return Ok((lock, None));
    }
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(".old");
    let old = dir.with_file_name(name);
    create_private_dir(&old)?;
    let _old_lock = lock_dir(&old, false)?;
    clear_run(&old)?;
    let raw = dir.join(RAW_DIR);
    let old_raw = old.join(RAW_DIR);
    let raw_logs = raw_files(dir);
    if !raw_logs.is_empty() {
        create_private_dir(&old_raw)?;
    }
    let moving = (run_files(dir).into_iter().map(|f| (old.clone(), f)))
        .chain(raw_logs.into_iter().map(|f| (old_raw.clone(), f)));
    for (to_dir, from) in moving {
        let to = to_dir.join(from.file_name().unwrap_or_default());
        std::fs::rename(&from, &to).map_err(|cause| ProfileError::Io { path: from, cause })?;
    }
    // raw/ itself stays if the user keeps files of their own in it.
    let _ = std::fs::remove_dir(&raw);
    Ok((lock, Some(old)))
}

/// The files of a run in a profile directory: its tables, meta.json and the
/// machine calibration it was priced with (its raw logs are in raw/). Only
/// files memlens wrote count, each recognised by its name and its first
/// bytes: a user's own files there are never moved or removed.
fn run_files(dir: &Path) -> Vec<PathBuf> {
    let tables = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .filter(|p| starts_with(p, b"PAR1"));
    [META_FILE, CALIBRATION_FILE]
        .into_iter()
        .map(|f| dir.join(f))
        .filter(|f| starts_with(f, b"{"))
        .chain(tables)
        .collect()
}

/// The name of the directory of raw logs inside a profile directory.
pub const RAW_DIR: &str = "raw";

/// The files in `dir`'s raw/ that memlens wrote: the runtime's logs
/// (`*.mlraw`, starting with the raw log's magic), the collector's log and a
/// perf backend's perf.data (by their names and, for perf.data, its magic).
fn raw_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir.join(RAW_DIR))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| match p.file_name().and_then(|n| n.to_str()) {
            Some(RAW_COLLECTOR_LOG) => regular(p),
            Some(RAW_PERF_DATA) => starts_with(p, b"PERFILE2"),
            Some(n) if n.ends_with(".mlraw") => {
                starts_with(p, &memlens_rawlog::MAGIC.to_le_bytes())
            }
            _ => false,
        })
        .collect()
}

/// The collector's log in raw/ (timeline, exits, untracked processes).
pub const RAW_COLLECTOR_LOG: &str = "collector.mltl";

/// A perf backend's samples in raw/, saved while the run goes on.
pub const RAW_PERF_DATA: &str = "perf.data";

fn regular(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
}

/// Whether `path` is a regular file (not a link) whose content starts with `magic`.
fn starts_with(path: &Path, magic: &[u8]) -> bool {
    use std::io::Read;
    let mut head = vec![0; magic.len()];
    open_regular(path).is_ok_and(|mut f| f.read_exact(&mut head).is_ok() && head == magic)
}

/// Whether `dir` holds data of a run: a profile, or raw logs.
fn holds_run(dir: &Path) -> bool {
    !raw_files(dir).is_empty() || !run_files(dir).is_empty()
}

/// Removes a run's data from `dir` (see [`holds_run`]), leaving other files.
fn clear_run(dir: &Path) -> Result<()> {
    remove_raw_files(dir)?;
    for f in run_files(dir) {
        std::fs::remove_file(&f).map_err(|cause| ProfileError::Io { path: f, cause })?;
    }
    Ok(())
}

/// Removes the raw logs memlens wrote in `dir`'s raw/, and raw/ itself if
/// nothing else is left in it.
pub fn remove_raw_files(dir: &Path) -> Result<()> {
    for f in raw_files(dir) {
        std::fs::remove_file(&f).map_err(|cause| ProfileError::Io { path: f, cause })?;
    }
    let raw = dir.join(RAW_DIR);
    match std::fs::remove_dir(&raw) {
        Err(e)
            if e.raw_os_error() == Some(libc::ENOTEMPTY)
                || e.kind() == std::io::ErrorKind::NotFound =>
        {
            Ok(())
        }
        r => r.map_err(|cause| ProfileError::Io { path: raw, cause }),
    }
}

/// Opens a file of a profile for reading, only if it is a regular file. A
/// profile someone else made may hold a link to /dev/zero or a FIFO in a
/// file's place, which would make a reader grow without end or wait forever:
/// the last component is not followed, and opening a FIFO does not wait.
pub fn open_regular(path: &Path) -> Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let not_regular = || ProfileError::NotARegularFile(path.to_path_buf());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|cause| match cause.raw_os_error() {
            Some(libc::ELOOP) => not_regular(),
            _ => ProfileError::Io {
                path: path.to_path_buf(),
                cause,
            },
        })?;
    match file.metadata() {
        Ok(m) if m.is_file() => Ok(file),
        Ok(_) => Err(not_regular()),
        Err(cause) => Err(ProfileError::Io {
            path: path.to_path_buf(),
            cause,
        }),
    }
}

/// Reads a whole text file of a profile (meta.json, a calibration): a
/// regular file of at most `limit` bytes.
pub fn read_small_text(path: &Path, limit: u64) -> Result<String> {
    use std::io::Read;
    let file = open_regular(path)?;
    let io = |cause| ProfileError::Io {
        path: path.to_path_buf(),
        cause,
    };
    let size = file.metadata().map_err(io)?.len();
    if size > limit {
        return Err(ProfileError::TooLarge {
            path: path.to_path_buf(),
            size,
            limit,
        });
    }
    let mut text = String::new();
    file.take(limit).read_to_string(&mut text).map_err(io)?;
    Ok(text)
}

/// What a user is told when [`claim_dir`] kept an earlier run aside.
pub fn kept_aside_note(dir: &Path, old: &Path) -> String {
    format!(
        "memlens: moved the earlier run in {} to {} (--force replaces it instead)",
        dir.display(),
        old.display()
    )
}

/// Writes a whole file readable by its user only (see [`create_private_file`]).
pub fn write_private_file(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    create_private_file(path)?
        .write_all(bytes)
        .map_err(|cause| ProfileError::Output {
            path: path.to_path_buf(),
            cause,
        })
}

/// What went wrong writing a file, in words (the system's message without
/// its error number).
pub fn io_words(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "its directory does not exist".into(),
        _ => error_words(e),
    }
}

/// What went wrong with a file, in words.
pub fn error_words(e: &std::io::Error) -> String {
    use std::io::ErrorKind::*;
    match e.kind() {
        NotFound => "no such file or directory".into(),
        PermissionDenied => "permission denied".into(),
        StorageFull => "the disk is full".into(),
        ReadOnlyFilesystem => "the file system is read-only".into(),
        IsADirectory => "it is a directory".into(),
        NotADirectory => "a part of its path is not a directory".into(),
        _ => {
            let text = e.to_string();
            match text.split_once(" (os error") {
                Some((words, _)) => words.to_lowercase(),
                None => text,
            }
        }
    }
}

/// Creates (or truncates) a file of the profile, readable by its user only;
/// what is made from a profile (a report, a plot, an export) is as private
/// as the profile. A file that exists keeps the mode it has.
pub fn create_private_file(path: &Path) -> Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|cause| ProfileError::Output {
            path: path.to_path_buf(),
            cause,
        })
}

/// A table of the profile: a row struct with a fixed schema.
pub trait Table: Sized + Send + 'static {
    /// File name without extension.
    const NAME: &'static str;
    fn schema() -> SchemaRef;
    fn to_batch(rows: &[Self]) -> std::result::Result<RecordBatch, String>;
    fn from_batch(batch: &RecordBatch) -> std::result::Result<Vec<Self>, String>;
}

pub fn table_path<T: Table>(dir: &Path) -> PathBuf {
    dir.join(format!("{}.parquet", T::NAME))
}

/// Writes a table batch by batch, so a finalizer can stream rows out as they are
/// complete. The producing thread turns each batch of rows into Arrow columns;
/// Parquet encoding and compression run on a thread of their own, so the two
/// overlap. Errors are returned by [`TableWriter::finish`].
pub struct TableWriter<T: Table> {
    buf: Vec<T>,
    batches: Option<std::sync::mpsc::SyncSender<std::result::Result<RecordBatch, String>>>,
    encoder: Option<std::thread::JoinHandle<Result<()>>>,
}

/// Rows per batch handed to the encoder: small enough that the buffers, reused,
/// stay in cache and the encoder starts early (64k-row batches: import 72 -> 55 ms).
const BATCH_ROWS: usize = 1 << 13;

/// Rows of table `T` into its Parquet file.
struct Encoder<T> {
    writer: ArrowWriter<File>,
    path: PathBuf,
    table: std::marker::PhantomData<T>,
}

impl<T: Table> Encoder<T> {
    fn create(dir: &Path) -> Result<Self> {
        let path = table_path::<T>(dir);
        let file = create_private_file(&path)?;
        match ArrowWriter::try_new(file, T::schema(), Some(writer_properties())) {
            Ok(writer) => Ok(Encoder {
                writer,
                path,
                table: std::marker::PhantomData,
            }),
            Err(e) => Err(write_error(&path, e.to_string())),
        }
    }

    fn write(&mut self, rows: &[T]) -> Result<()> {
        self.write_batch(T::to_batch(rows))
    }

    fn write_batch(&mut self, batch: std::result::Result<RecordBatch, String>) -> Result<()> {
        let batch = batch.map_err(|e| write_error(&self.path, e))?;
        self.writer
            .write(&batch)
            .map_err(|e| write_error(&self.path, e.to_string()))
    }

    fn close(self) -> Result<()> {
        match self.writer.close() {
            Ok(_) => Ok(()),
            Err(e) => Err(write_error(&self.path, e.to_string())),
        }
    }
}

/// How memlens writes Parquet, its tables and its exports alike.
pub fn writer_properties() -> parquet::file::properties::WriterProperties {
    // No dictionaries: interning every value cost more than compression
    // saves over them (import of 280k PEBS samples 81 -> 72 ms, file 2.3 ->
    // 2.7 MB). Pages of 64 KiB rather than 1 MiB: the encoder's buffers are
    // not regrown and copied while a page fills.
    parquet::file::properties::WriterProperties::builder()
        // LZ4 over Snappy: import 35.5 -> 31.2 ms and a smaller file;
        // pyarrow, DuckDB, polars and DataFusion read it. Snappy stays readable.
        .set_compression(parquet::basic::Compression::LZ4_RAW)
        .set_dictionary_enabled(false)
        .set_data_page_size_limit(1 << 16)
        // Min/max per column chunk, which readers prune row groups by, not
        // per page: import of 280k PEBS samples 79 -> 74 ms (medians of 11,
        // interleaved).
        .set_statistics_enabled(parquet::file::properties::EnabledStatistics::Chunk)
        // Row groups of 64 Ki rows rather than 1 Mi: a table written while
        // the program runs (its access samples) is on disk by its end but
        // for its last group (STREAM's 119 000 samples were written whole by
        // the encoder's close, after the program: finalize 8.8 -> 7.6 ms).
        .set_max_row_group_row_count(Some(1 << 16))
        .build()
}

/// A table that could not be written (a full disk, say).
pub(crate) fn write_error(path: &Path, detail: String) -> ProfileError {
    ProfileError::Write {
        path: path.to_path_buf(),
        detail,
    }
}

fn parquet_error(path: &Path, detail: String) -> ProfileError {
    ProfileError::Parquet {
        path: path.to_path_buf(),
        detail,
    }
}

impl<T: Table> TableWriter<T> {
    pub fn create(dir: &Path) -> Result<Self> {
        let mut encoder = Encoder::<T>::create(dir)?;
        // Two batches in flight at most: memory stays bounded when encoding lags.
        let (batches, received) = std::sync::mpsc::sync_channel(1);
        let encoder = std::thread::Builder::new()
            .name(format!("memlens-{}", T::NAME))
            .spawn(move || {
                for batch in received {
                    encoder.write_batch(batch)?;
                }
                encoder.close()
            })
            .map_err(|cause| ProfileError::Io {
                path: table_path::<T>(dir),
                cause,
            })?;
        Ok(TableWriter {
            buf: Vec::with_capacity(BATCH_ROWS),
            batches: Some(batches),
            encoder: Some(encoder),
        })
    }

    #[inline]
    pub fn push(&mut self, row: T) {
        self.buf.push(row);
        if self.buf.len() >= BATCH_ROWS {
            self.flush();
        }
    }

    /// Hands the rows buffered so far to the encoder now, rather than when
    /// a batch is full or at [`TableWriter::finish`].
    pub fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let batch = T::to_batch(&self.buf);
        // The buffer is reused: its pages stay mapped and in cache.
        self.buf.clear();
        // A send fails only when the encoder stopped on an error: finish reports it.
        if let Some(batches) = &self.batches {
            let _ = batches.send(batch);
        }
    }

    pub fn finish(mut self) -> Result<()> {
        self.flush();
        drop(self.batches.take());
        match self.encoder.take().map(std::thread::JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            None => Ok(()),
        }
    }
}

/// Writes all rows of a table (an empty table still gets its schema), encoded
/// on this thread: rows already in hand gain nothing from an encoder thread,
/// which cost a profile's small tables more than their encoding.
pub fn write_table<T: Table>(dir: &Path, rows: &[T]) -> Result<()> {
    let mut encoder = Encoder::<T>::create(dir)?;
    for chunk in rows.chunks(BATCH_ROWS) {
        encoder.write(chunk)?;
    }
    encoder.close()
}

/// Number of rows of a table, from the Parquet footer (0 if absent).
pub fn table_rows<T: Table>(dir: &Path) -> Result<u64> {
    match table_file::<T>(dir)? {
        Some(path) => file_rows(&path),
        None => Ok(0),
    }
}

/// The file of table `T` in `dir`; None for a directory of tables without
/// meta.json (an export) that lacks it. A profile (with meta.json) has every
/// table: one missing is damage, named as such, never read as empty.
pub fn table_file<T: Table>(dir: &Path) -> Result<Option<PathBuf>> {
    table_file_named(dir, T::NAME)
}

/// [`table_file`] by the table's name.
pub fn table_file_named(dir: &Path, name: &str) -> Result<Option<PathBuf>> {
    let path = dir.join(format!("{name}.parquet"));
    if path.exists() {
        Ok(Some(path))
    } else if dir.join(META_FILE).exists() {
        Err(ProfileError::MissingTable(path))
    } else {
        Ok(None)
    }
}

/// How every table file is opened: the Arrow schema a writer embeds in the
/// footer is not decoded (the table's own schema is known; a damaged embedded
/// one made the decoder panic, so it is decoded once under [`guarded`] to
/// tell a damaged file from a sound one, as other readers of the file, such
/// as DataFusion, decode it), and every column chunk must lie inside the file
/// (the reader asserts it).
fn reader_builder(file: File) -> parquet::errors::Result<ParquetRecordBatchReaderBuilder<File>> {
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let b = ParquetRecordBatchReaderBuilder::try_new_with_options(
        file,
        ArrowReaderOptions::new().with_skip_arrow_metadata(true),
    )?;
    let footer = b.metadata().file_metadata();
    parquet::arrow::parquet_to_arrow_schema(footer.schema_descr(), footer.key_value_metadata())?;
    for group in b.metadata().row_groups() {
        for col in group.columns() {
            let start = col
                .dictionary_page_offset()
                .unwrap_or(col.data_page_offset());
            let size = col.compressed_size();
            let inside = start >= 0
                && size >= 0
                && (start as u64)
                    .checked_add(size as u64)
                    .is_some_and(|end| end <= len);
            if !inside {
                return Err(parquet::errors::ParquetError::General(format!(
                    "column {} claims bytes {start}..+{size} of a {len}-byte file",
                    col.column_path()
                )));
            }
        }
    }
    Ok(b)
}

thread_local! {
    /// Set while this thread runs a read whose panics are caught: the panic
    /// hook then keeps quiet, the caller reports the panic as an error.
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Installs, once, the panic hook that keeps quiet on a [`QUIET`] thread.
fn install_quiet_hook() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(|q| q.get()) {
                previous(info);
            }
        }));
    });
}

/// Marks the calling thread, for its whole life, as a reader of table files
/// whose panics are caught where they are joined (a query engine's worker
/// thread): the panic's own message is not printed.
pub fn quiet_reader_thread() {
    install_quiet_hook();
    QUIET.with(|q| q.set(true));
}

/// Runs `read`, turning a panic of the Parquet reader on damaged bytes (it
/// asserts where it should fail) into `Err` with the panic's message, which
/// is not printed.
pub fn catch_reader_panic<R>(read: impl FnOnce() -> R) -> std::result::Result<R, String> {
    install_quiet_hook();
    let was_quiet = QUIET.with(|q| q.replace(true));
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(read));
    QUIET.with(|q| q.set(was_quiet));
    outcome.map_err(|panic| {
        (panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default()
    })
}

/// Runs a read of the table file at `path`, a panic of the reader being an
/// error naming the file.
fn guarded<R>(path: &Path, read: impl FnOnce() -> Result<R>) -> Result<R> {
    catch_reader_panic(read).unwrap_or_else(|what| {
        Err(parquet_error(
            path,
            format!("the reader failed on it: {what}"),
        ))
    })
}

/// Decodes every column of every row of the table file at `path`: an error
/// names a file that is missing, not readable Parquet or damaged inside.
pub fn check_file(path: &Path) -> Result<()> {
    let file = open_regular(path)?;
    let perr = |e: String| parquet_error(path, e);
    guarded(path, || {
        let reader = reader_builder(file)
            .and_then(|b| b.with_batch_size(1 << 16).build())
            .map_err(|e| perr(e.to_string()))?;
        for batch in reader {
            batch.map_err(|e| perr(e.to_string()))?;
        }
        Ok(())
    })
}

/// Number of rows of a table file, from its footer: an error names a file
/// that is missing or not readable Parquet.
pub fn file_rows(path: &Path) -> Result<u64> {
    let file = open_regular(path)?;
    guarded(path, || {
        let meta = reader_builder(file).map_err(|e| parquet_error(path, e.to_string()))?;
        Ok(meta.metadata().file_metadata().num_rows().max(0) as u64)
    })
}

/// Reads every row of a table (see [`table_file`] for a missing one).
pub fn read_table<T: Table>(dir: &Path) -> Result<Vec<T>> {
    let mut rows = Vec::new();
    read_table_by_batch::<T>(dir, &mut |expected, batch| {
        if rows.is_empty() {
            // Sized once from the footer: growing by doubling copies the rows
            // and, for a moment, holds them twice. Tried, not required: a
            // damaged footer may claim any count.
            let _ = rows.try_reserve(expected);
        }
        rows.extend(batch);
    })?;
    Ok(rows)
}

/// Hands a table's rows over in batches of up to 65 536, with the row count
/// its footer claims: a reader that keeps less than every row (a thinned
/// timeline) never holds the whole table.
pub fn read_table_by_batch<T: Table>(
    dir: &Path,
    take: &mut dyn FnMut(usize, Vec<T>),
) -> Result<()> {
    let Some(path) = table_file::<T>(dir)? else {
        return Ok(());
    };
    guarded(&path, || read_file_by_batch::<T>(&path, take))
}

fn read_file_by_batch<T: Table>(path: &Path, take: &mut dyn FnMut(usize, Vec<T>)) -> Result<()> {
    let perr = |detail: String| parquet_error(path, detail);
    let file = open_regular(path)?;
    // Only the row type's columns are decoded: a view with fewer columns reads less.
    let schema = T::schema();
    let mut expected = 0;
    let reader = reader_builder(file)
        .and_then(|b| {
            expected = usize::try_from(b.metadata().file_metadata().num_rows()).unwrap_or(0);
            let wanted = parquet::arrow::ProjectionMask::columns(
                b.parquet_schema(),
                schema.fields().iter().map(|f| f.name().as_str()),
            );
            b.with_projection(wanted).with_batch_size(1 << 16).build()
        })
        .map_err(|e| perr(e.to_string()))?;
    for batch in reader {
        let batch = batch.map_err(|e| perr(e.to_string()))?;
        take(expected, T::from_batch(&batch).map_err(perr)?);
    }
    Ok(())
}

/// Declares a table: its row struct and its Arrow mapping.
#[macro_export]
macro_rules! table {
    ($(#[$doc:meta])* $name:ident = $file:literal { $($(#[$fdoc:meta])* $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default, PartialEq, serde::Serialize, schemars::JsonSchema)]
        pub struct $name { $($(#[$fdoc])* pub $field: $ty),* }

        impl $crate::Table for $name {
            const NAME: &'static str = $file;

            fn schema() -> arrow::datatypes::SchemaRef {
                std::sync::Arc::new(arrow::datatypes::Schema::new(vec![
                    $(arrow::datatypes::Field::new(
                        stringify!($field),
                        <$ty as $crate::ColumnType>::data_type(),
                        <$ty as $crate::ColumnType>::NULLABLE,
                    )),*
                ]))
            }

            fn to_batch(rows: &[Self]) -> std::result::Result<arrow::array::RecordBatch, String> {
                let columns: Vec<arrow::array::ArrayRef> = vec![
                    $(<$ty as $crate::ColumnType>::to_array(rows.iter().map(|r| &r.$field))),*
                ];
                arrow::array::RecordBatch::try_new(Self::schema(), columns).map_err(|e| e.to_string())
            }

            fn from_batch(batch: &arrow::array::RecordBatch) -> std::result::Result<Vec<Self>, String> {
                $(
                    let $field: Vec<$ty> = match batch.column_by_name(stringify!($field)) {
                        Some(col) => <$ty as $crate::ColumnType>::from_array(col.as_ref())
                            .ok_or_else(|| format!("column {} has the wrong type", stringify!($field)))?,
                        None => <$ty as $crate::ColumnType>::absent(batch.num_rows())
                            .ok_or_else(|| format!("missing column {}", stringify!($field)))?,
                    };
                )*
                let n = batch.num_rows();
                let mut iters = ($($field.into_iter(),)*);
                let _ = &mut iters;
                let ($(mut $field,)*) = iters;
                let mut out = Vec::with_capacity(n);
                for _ in 0..n {
                    out.push($name { $($field: $field.next().ok_or("short column")?),* });
                }
                Ok(out)
            }
        }
    };
}

/// A string from the profiled program (a name given through the annotation
/// API, a symbol, a path, a command line) as it may be shown: control
/// characters (C0, DEL, C1) and the bidirectional controls that reorder a
/// line written escaped (`\e`, `\a`, `\n`, `\x7f`, `\u{202e}`), so that it
/// can neither drive a terminal nor break a line, a table or an XML file.
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    escape_unsafe(s, false)
}

/// A whole document written for a viewer (an SVG image) through
/// [`printable`], its line breaks kept: the program's strings in it cannot
/// make it ill-formed XML or reorder its text.
pub fn printable_document(s: &str) -> std::borrow::Cow<'_, str> {
    escape_unsafe(s, true)
}

fn escape_unsafe(s: &str, keep_lines: bool) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| {
        (c.is_control() && !(keep_lines && c == '\n'))
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !s.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            c if !unsafe_char(c) => out.push(c),
            '\x1b' => out.push_str("\\e"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            c if c.is_ascii_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `function (file:line)`, or `function [module]` without line information:
/// how every site and code location is named. Line 0 is an instruction the
/// compiler made from several source lines (a load sunk out of the branches
/// of a switch): it is named by its function and file only.
pub fn code_label(function: &str, file: &str, line: u32, module: &str) -> String {
    let file = file.rsplit('/').next().unwrap_or(file);
    match (file, line) {
        // Code no symbol covers is named module+offset already.
        ("", _) if function.starts_with(module) => function.to_string(),
        ("", _) => format!("{function} [{module}]"),
        (file, 0) => format!("{function} ({file}, lines merged)"),
        (file, line) => format!("{function} ({file}:{line})"),
    }
}

/// Functions that allocate on behalf of their callers in the runtimes
/// programs are built on, as (module name part, function name prefix): a
/// site is never named after them. CPython's object and memory allocators
/// and its arenas (in the interpreter or libpython), and Rust's global
/// allocator entry points and standard library (its collections grow where
/// the program calls them, as libstdc++'s do for C++).
const ALLOCATION_LAYERS: [(&str, &str); 14] = [
    ("python", "_PyObject_Malloc"),
    ("python", "PyObject_Malloc"),
    ("python", "_PyObject_Calloc"),
    ("python", "_PyObject_Realloc"),
    ("python", "PyMem_"),
    ("python", "_PyMem_"),
    ("python", "pymalloc_"),
    ("python", "_PyObject_Arena"),
    ("python", "new_arena"),
    ("python", "allocate_from_new_pool"),
    ("", "__rust_"),
    ("", "__rdl_"),
    ("", "alloc::"),
    ("", "std::"),
];

/// A function's qualified name without its return type, template arguments
/// or argument list: `Alloc` for `double* Alloc<double>(unsigned long)`,
/// `std::vector::_M_realloc_insert` for its instantiation, a C function's
/// name as it is.
pub fn base_name(function: &str) -> std::borrow::Cow<'_, str> {
    let mut depth = 0i32;
    let (mut start, mut end) = (0, function.len());
    for (i, c) in function.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            ' ' if depth == 0 => start = i + 1,
            '(' if depth == 0 && i > start => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    let name = function.get(start..end).unwrap_or(function);
    if !name.contains('<') {
        return std::borrow::Cow::Borrowed(name);
    }
    let mut depth = 0;
    let bare: String = (name.chars())
        .filter(|&c| {
            let outside = depth == 0 && c != '<';
            match c {
                '<' => depth += 1,
                '>' => depth -= 1,
                _ => {}
            }
            outside
        })
        .collect();
    std::borrow::Cow::Owned(bare)
}

/// Which frames of a stack are not its allocation site: the C and C++
/// runtime libraries, code inlined from system headers, the allocation
/// layers of CPython and Rust, and the user's own (`--skip-frames`: globs
/// matched against a function's whole name or its base name, see
/// [`base_name`]).
#[derive(Clone, Debug, Default)]
pub struct SkipFrames {
    patterns: Vec<glob::Pattern>,
}

impl SkipFrames {
    /// The user's patterns (`*` any characters, `?` one, `[...]` a class);
    /// an error names a pattern that is no glob.
    pub fn new(patterns: &[String]) -> std::result::Result<SkipFrames, String> {
        let patterns = (patterns.iter())
            .map(|p| glob::Pattern::new(p).map_err(|e| format!("--skip-frames {p:?}: {e}")))
            .collect::<std::result::Result<_, _>>()?;
        Ok(SkipFrames { patterns })
    }

    fn is_runtime(f: &Frame) -> bool {
        [
            "libc.so",
            "libstdc++.so",
            "libgcc_s.so",
            "ld-linux",
            "libc++.so",
            "libm.so",
        ]
        .iter()
        .any(|m| f.module.starts_with(m))
    }

    /// The frame allocates for its caller: not a site.
    pub fn skips(&self, f: &Frame) -> bool {
        Self::is_runtime(f)
            // Code inlined from system headers (std::vector internals).
            || f.file.starts_with("/usr/include")
            || f.file.starts_with("/usr/lib")
            || Self::is_allocation_layer(f)
            || (self.patterns.iter())
                .any(|p| p.matches(&f.function) || p.matches(&base_name(&f.function)))
    }

    /// A frame of a language runtime's allocator (CPython's pymalloc,
    /// Rust's alloc): where within it a block was made is its own business.
    pub fn is_allocation_layer(f: &Frame) -> bool {
        let function = f.function.trim_start_matches('<');
        (ALLOCATION_LAYERS.iter())
            .any(|(module, prefix)| f.module.contains(module) && function.starts_with(prefix))
    }

    /// Where a stack (innermost frame first) allocated: the first frame not
    /// skipped, so `operator new`, `strdup` and `PyObject_Malloc` show their
    /// caller; failing that the first outside the runtime libraries. A
    /// stripped library's internal function, named only by its module and
    /// offset, allocates for the library's function its caller entered (an
    /// OpenMP runtime's team and thread data for `omp_get_max_threads` or
    /// `__kmpc_fork_call`): that function, the first named frame of the
    /// same module, is the site.
    pub fn site<'a>(&self, frames: &'a [Frame]) -> Option<&'a Frame> {
        let first = frames
            .iter()
            .position(|f| !self.skips(f))
            .or_else(|| frames.iter().position(|f| !Self::is_runtime(f)))
            .unwrap_or(0);
        let f = frames.get(first)?;
        if !is_unnamed(f) {
            return Some(f);
        }
        let mut same_module = frames[first..].iter().take_while(|g| g.module == f.module);
        Some(same_module.find(|g| !is_unnamed(g)).unwrap_or(f))
    }
}

/// A frame the symbolizer could only name by its module and offset
/// (`libomp.so.5+0xae21f`: no symbol, no debug information).
fn is_unnamed(f: &Frame) -> bool {
    f.file.is_empty()
        && (f.function.strip_prefix(f.module.as_str())).is_some_and(|rest| rest.starts_with("+0x"))
}

/// The allocation site of a stack with the default frames skipped.
pub fn site_frame(frames: &[Frame]) -> Option<&Frame> {
    SkipFrames::default().site(frames)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_strings_are_shown_with_their_controls_escaped() {
        use super::{printable, printable_document};
        assert!(matches!(
            printable("main (a.c:3)"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(
            printable("a\x1b[2J\x07\r\n\t\0\x7f"),
            r"a\e[2J\a\r\n\t\0\x7f"
        );
        assert_eq!(
            printable("\u{9b}1m \u{202e}cba \u{2066}"),
            r"\u{9b}1m \u{202e}cba \u{2066}"
        );
        assert_eq!(printable("naïve → ok"), "naïve → ok");
        assert_eq!(printable_document("<a>\x1b</a>\n"), "<a>\\e</a>\n");
    }

    #[test]
    fn skip_patterns_match_whole_names_not_substrings() {
        assert_eq!(base_name("double* Alloc<double>(unsigned long)"), "Alloc");
        assert_eq!(
            base_name("std::vector<int, std::allocator<int> >::_M_realloc_insert<int const&>(int*, int const&)"),
            "std::vector::_M_realloc_insert"
        );
        assert_eq!(base_name("make_matrix"), "make_matrix");
        let frame = |function: &str| Frame {
            function: function.into(),
            module: "app".into(),
            ..Default::default()
        };
        let skip = SkipFrames::new(&["Alloc".into(), "pool_*".into()]).unwrap();
        // Before, "Alloc" skipped AllocNodeData too (a substring).
        assert!(skip.skips(&frame("double* Alloc<double>(unsigned long)")));
        assert!(!skip.skips(&frame("AllocNodeData(Mesh&)")));
        assert!(skip.skips(&frame("pool_get")));
        assert!(!skip.skips(&frame("mempool_get")));
        assert!(SkipFrames::new(&["[".into()])
            .unwrap_err()
            .contains("--skip-frames \"[\""));
    }

    #[test]
    fn a_stripped_librarys_internal_frames_leave_the_site_to_its_entry_point() {
        let frame = |module: &str, function: &str, file: &str| Frame {
            module: module.into(),
            function: function.into(),
            file: file.into(),
            ..Default::default()
        };
        let omp = |function: &str| frame("libomp.so.5", function, "");
        let main = frame("lulesh2.0", "main", "lulesh.cc");
        let skip = SkipFrames::default();
        // LULESH's largest block at the defaults: libomp's, made for the
        // program's first omp_get_max_threads.
        let stack = [
            omp("libomp.so.5+0xae21f"),
            omp("libomp.so.5+0x4adbe"),
            omp("omp_get_max_threads"),
            main.clone(),
        ];
        assert_eq!(skip.site(&stack).unwrap().function, "omp_get_max_threads");
        // No named frame in the module: the offset names the site still,
        // not the program's frame beyond it.
        let stack = [omp("libomp.so.5+0xae21f"), main.clone()];
        assert_eq!(skip.site(&stack).unwrap().function, "libomp.so.5+0xae21f");
        // A named site is the site, whatever follows.
        let stack = [frame("lulesh2.0", "Allocate", "lulesh.h"), main];
        assert_eq!(skip.site(&stack).unwrap().function, "Allocate");
        // A module whose name is a prefix of the function's is not an offset.
        assert!(!is_unnamed(&frame("libfoo.so", "libfoo.so_init", "")));
    }

    crate::table! { Written = "grown" { pid: u32 } }
    crate::table! { GrownOptional = "grown" { pid: u32, note: Option<String>, count: Option<u64> } }
    crate::table! { GrownRequired = "grown" { pid: u32, count: u64 } }

    #[test]
    fn a_column_added_later_reads_as_null_when_optional() {
        let dir = std::env::temp_dir().join(format!("memlens-grown-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        write_table(&dir, &[Written { pid: 7 }]).unwrap();
        let read = read_table::<GrownOptional>(&dir).unwrap();
        assert_eq!(
            read,
            vec![GrownOptional {
                pid: 7,
                note: None,
                count: None
            }]
        );
        let err = read_table::<GrownRequired>(&dir).unwrap_err().to_string();
        assert!(err.contains("missing column count"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn tables_round_trip_with_nulls() {
        let dir = std::env::temp_dir().join(format!("memlens-profile-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let rows = vec![
            Allocation {
                pid: 1,
                kind: "malloc".into(),
                size: 10,
                free_ns: Some(5),
                group: Some("g".into()),
                est_count: 1.5,
                ..Default::default()
            },
            Allocation {
                kind: "mmap".into(),
                prot: Some(3),
                sampled: true,
                ..Default::default()
            },
        ];
        write_table(&dir, &rows).unwrap();
        assert_eq!(read_table::<Allocation>(&dir).unwrap(), rows);
        assert!(
            read_table::<Region>(&dir).unwrap().is_empty(),
            "a missing table is empty"
        );
        std::fs::write(table_path::<Region>(&dir), b"not parquet").unwrap();
        let err = read_table::<Region>(&dir).unwrap_err().to_string();
        assert!(
            err.contains("regions.parquet: not a readable Parquet table"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
