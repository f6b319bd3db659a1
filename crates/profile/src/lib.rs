//! The memlens profile directory: one Parquet file per table and `meta.json`.
//!
//! Each table is declared once with [`table!`], which gives its row struct, its
//! Arrow schema and both conversions; the README's schema section lists the same
//! columns. Any Arrow tool (pandas, polars, DuckDB, DataFusion, Spark) reads them.

mod columns;
mod meta;
mod tables;

pub use columns::ColumnType;
pub use meta::*;
pub use tables::*;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use std::fs::File;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a readable Parquet table ({detail}); re-run `memlens record` or restore the file")]
    Parquet { path: PathBuf, detail: String },
    #[error("{path}: {detail}")]
    Format { path: PathBuf, detail: String },
    #[error("{0}: no memlens profile here (no meta.json and no raw/ logs); give the directory `memlens record` printed")]
    NotAProfile(PathBuf),
}

pub type Result<T> = std::result::Result<T, ProfileError>;

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
/// complete. Batches are encoded on a thread of their own, so producing rows and
/// compressing Parquet overlap. Errors are returned by [`TableWriter::finish`].
pub struct TableWriter<T: Table> {
    buf: Vec<T>,
    batches: Option<std::sync::mpsc::SyncSender<Vec<T>>>,
    /// Emptied buffers coming back from the encoder: reused, their pages are
    /// already mapped.
    spare: std::sync::mpsc::Receiver<Vec<T>>,
    encoder: Option<std::thread::JoinHandle<Result<()>>>,
}

const BATCH_ROWS: usize = 1 << 16;

impl<T: Table> TableWriter<T> {
    pub fn create(dir: &Path) -> Result<Self> {
        let path = table_path::<T>(dir);
        let file = File::create(&path).map_err(|source| ProfileError::Io {
            path: path.clone(),
            source,
        })?;
        // Dictionaries pay only for repetitive columns; timestamps and addresses
        // are nearly unique, and interning them dominated the finalizer's time.
        let mut props = parquet::file::properties::WriterProperties::builder()
            .set_compression(parquet::basic::Compression::SNAPPY);
        for unique in [
            "time_ns",
            "address",
            "alloc_ns",
            "free_ns",
            "begin_ns",
            "end_ns",
            "phys_addr",
            // Samples: code addresses and latencies vary too much to pay back.
            "pc",
            "latency",
            "issue_latency",
            "translation_latency",
            "data_src",
        ] {
            props = props.set_column_dictionary_enabled(unique.into(), false);
        }
        let props = props.build();
        let parquet_error = move |detail: String| ProfileError::Parquet {
            path: path.clone(),
            detail,
        };
        let mut writer = ArrowWriter::try_new(file, T::schema(), Some(props))
            .map_err(|e| parquet_error(e.to_string()))?;
        // Two batches in flight at most: memory stays bounded when encoding lags.
        let (batches, received) = std::sync::mpsc::sync_channel::<Vec<T>>(1);
        let (give_back, spare) = std::sync::mpsc::channel::<Vec<T>>();
        let encoder = std::thread::Builder::new()
            .name(format!("memlens-{}", T::NAME))
            .spawn(move || {
                for mut rows in received {
                    let batch = T::to_batch(&rows).map_err(&parquet_error)?;
                    writer
                        .write(&batch)
                        .map_err(|e| parquet_error(e.to_string()))?;
                    rows.clear();
                    let _ = give_back.send(rows);
                }
                writer
                    .close()
                    .map(|_| ())
                    .map_err(|e| parquet_error(e.to_string()))
            })
            .map_err(|source| ProfileError::Io {
                path: table_path::<T>(dir),
                source,
            })?;
        Ok(TableWriter {
            buf: Vec::with_capacity(BATCH_ROWS),
            batches: Some(batches),
            spare,
            encoder: Some(encoder),
        })
    }

    pub fn push(&mut self, row: T) {
        self.buf.push(row);
        if self.buf.len() >= BATCH_ROWS {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let next = self
            .spare
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(BATCH_ROWS));
        let rows = std::mem::replace(&mut self.buf, next);
        // A send fails only when the encoder stopped on an error: finish reports it.
        if let Some(batches) = &self.batches {
            let _ = batches.send(rows);
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

/// Writes all rows of a table (an empty table still gets its schema).
pub fn write_table<T: Table + Clone>(dir: &Path, rows: &[T]) -> Result<()> {
    let mut w = TableWriter::<T>::create(dir)?;
    for r in rows {
        w.push(r.clone());
    }
    w.finish()
}

/// Number of rows of a table, from the Parquet footer (0 if absent).
pub fn table_rows<T: Table>(dir: &Path) -> Result<u64> {
    let path = table_path::<T>(dir);
    let Ok(file) = File::open(&path) else {
        return Ok(0);
    };
    let meta =
        ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| ProfileError::Parquet {
            path: path.clone(),
            detail: e.to_string(),
        })?;
    Ok(meta.metadata().file_metadata().num_rows().max(0) as u64)
}

/// Reads every row of a table; a missing file is an empty table.
pub fn read_table<T: Table>(dir: &Path) -> Result<Vec<T>> {
    let path = table_path::<T>(dir);
    if !path.exists() {
        return Ok(Vec::new());
    }
    let perr = |detail: String| ProfileError::Parquet {
        path: path.clone(),
        detail,
    };
    let file = File::open(&path).map_err(|source| ProfileError::Io {
        path: path.clone(),
        source,
    })?;
    // Only the row type's columns are decoded: a view with fewer columns reads less.
    let schema = T::schema();
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| {
            let wanted = parquet::arrow::ProjectionMask::columns(
                b.parquet_schema(),
                schema.fields().iter().map(|f| f.name().as_str()),
            );
            b.with_projection(wanted).with_batch_size(1 << 16).build()
        })
        .map_err(|e| perr(e.to_string()))?;
    let mut rows = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| perr(e.to_string()))?;
        rows.extend(T::from_batch(&batch).map_err(perr)?);
    }
    Ok(rows)
}

/// Declares a table: its row struct and its Arrow mapping.
#[macro_export]
macro_rules! table {
    ($(#[$doc:meta])* $name:ident = $file:literal { $($(#[$fdoc:meta])* $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
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
                    let $field: Vec<$ty> = {
                        let col = batch
                            .column_by_name(stringify!($field))
                            .ok_or_else(|| format!("missing column {}", stringify!($field)))?;
                        <$ty as $crate::ColumnType>::from_array(col.as_ref())
                            .ok_or_else(|| format!("column {} has the wrong type", stringify!($field)))?
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
