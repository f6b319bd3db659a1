//! A table's Parquet file: written in batches, read whole or batch by
//! batch, a damaged file an error and never a panic; [`table!`] declares a
//! table's row struct, schema and conversions.

use crate::{create_private_file, open_regular, ProfileError, Result, META_FILE};
use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use parquet::arrow::arrow_reader::{ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
use parquet::arrow::ArrowWriter;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Allocation, Region};

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
