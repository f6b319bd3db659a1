//! Where query results go: a text table for people, CSV, JSON or Parquet for
//! programs. Every sink but the text table streams, so a result as large as
//! the samples table is never held in memory.

use crate::{Result, SqlError};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use std::io::Write;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// A boxed text table of at most this many rows (0: all).
    Table {
        max_rows: usize,
    },
    Csv,
    /// One JSON array of objects, nulls written out.
    Json,
    Parquet,
}

impl Format {
    /// The file extension for this format.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Table { .. } => "txt",
            Format::Csv => "csv",
            Format::Json => "json",
            Format::Parquet => "parquet",
        }
    }

    /// A sink writing rows of `schema` to `out` in this format.
    pub fn sink(self, schema: SchemaRef, out: Box<dyn Write + Send>) -> Result<Box<dyn Sink>> {
        Ok(match self {
            Format::Table { max_rows } => Box::new(TextTable {
                out,
                max_rows,
                kept: Vec::new(),
                kept_rows: 0,
                total_rows: 0,
                schema,
            }),
            Format::Csv => Box::new(Csv(datafusion::arrow::csv::WriterBuilder::new()
                .with_header(true)
                .build(out))),
            Format::Json => Box::new(Json(
                datafusion::arrow::json::WriterBuilder::new()
                    .with_explicit_nulls(true)
                    .build::<_, datafusion::arrow::json::writer::JsonArray>(out),
            )),
            Format::Parquet => Box::new(Parquet(
                parquet::arrow::ArrowWriter::try_new(
                    out,
                    schema,
                    Some(memlens_profile::writer_properties()),
                )
                .map_err(output_error)?,
            )),
        })
    }
}

/// Receives a result batch by batch.
pub trait Sink {
    fn write(&mut self, batch: &RecordBatch) -> Result<()>;
    /// Writes what is buffered and any footer.
    fn finish(self: Box<Self>) -> Result<()>;
}

fn output_error(e: impl std::fmt::Display) -> SqlError {
    SqlError::Output(e.to_string())
}

struct TextTable {
    out: Box<dyn Write + Send>,
    max_rows: usize,
    kept: Vec<RecordBatch>,
    kept_rows: usize,
    total_rows: u64,
    schema: SchemaRef,
}

impl Sink for TextTable {
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.total_rows += batch.num_rows() as u64;
        let room = if self.max_rows == 0 {
            batch.num_rows()
        } else {
            self.max_rows.saturating_sub(self.kept_rows)
        };
        let take = room.min(batch.num_rows());
        if take > 0 {
            self.kept.push(batch.slice(0, take));
            self.kept_rows += take;
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Result<()> {
        let mut batches = (self.kept.iter())
            .map(printable_strings)
            .collect::<Result<Vec<_>>>()?;
        if batches.is_empty() {
            // The header alone, so an empty result still names its columns.
            batches.push(RecordBatch::new_empty(self.schema.clone()));
        }
        let table = datafusion::arrow::util::pretty::pretty_format_batches(&batches)
            .map_err(output_error)?;
        let rows = self.total_rows;
        let footer = if (self.kept_rows as u64) < rows {
            format!(
                "({rows} rows, the first {} shown: add LIMIT, or give --max-rows 0 or --format csv)",
                self.kept_rows
            )
        } else {
            format!("({rows} row{})", if rows == 1 { "" } else { "s" })
        };
        writeln!(self.out, "{table}\n{footer}")
            .and_then(|()| self.out.flush())
            .map_err(output_error)
    }
}

/// A batch whose strings (names and paths from the profiled program) are
/// shown with their control characters escaped, for a terminal.
fn printable_strings(batch: &RecordBatch) -> Result<RecordBatch> {
    use datafusion::arrow::array::{Array, ArrayRef, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;
    let is_string =
        |t: &DataType| matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
    let mut fields = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        if !is_string(field.data_type()) {
            fields.push(field.as_ref().clone());
            columns.push(column.clone());
            continue;
        }
        let strings =
            datafusion::arrow::compute::cast(column, &DataType::Utf8).map_err(output_error)?;
        let strings = (strings.as_any().downcast_ref::<StringArray>())
            .expect("a cast to Utf8 gives a StringArray");
        let shown: StringArray = (strings.iter())
            .map(|v| v.map(|v| memlens_profile::printable(v).into_owned()))
            .collect();
        fields.push(Field::new(
            field.name(),
            DataType::Utf8,
            field.is_nullable(),
        ));
        columns.push(Arc::new(shown));
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).map_err(output_error)
}

struct Csv(datafusion::arrow::csv::Writer<Box<dyn Write + Send>>);

impl Sink for Csv {
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.0.write(batch).map_err(output_error)
    }

    fn finish(self: Box<Self>) -> Result<()> {
        self.0.into_inner().flush().map_err(output_error)
    }
}

struct Json(
    datafusion::arrow::json::Writer<
        Box<dyn Write + Send>,
        datafusion::arrow::json::writer::JsonArray,
    >,
);

impl Sink for Json {
    /// Id columns (`stack_id`: 64-bit hashes) are written as strings:
    /// readers that hold numbers as doubles would change any above 2^53.
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        use datafusion::arrow::compute::cast;
        use datafusion::arrow::datatypes::{DataType, Field, Schema};
        let schema = batch.schema();
        let is_id = |f: &Field| {
            f.name().ends_with("_id") && matches!(f.data_type(), DataType::UInt64 | DataType::Int64)
        };
        if !schema.fields().iter().any(|f| is_id(f)) {
            return self.0.write(batch).map_err(output_error);
        }
        let (mut fields, mut columns) = (Vec::new(), Vec::new());
        for (f, column) in schema.fields().iter().zip(batch.columns()) {
            if is_id(f) {
                fields.push(Field::new(f.name(), DataType::Utf8, f.is_nullable()));
                columns.push(cast(column, &DataType::Utf8).map_err(output_error)?);
            } else {
                fields.push(f.as_ref().clone());
                columns.push(column.clone());
            }
        }
        let batch = RecordBatch::try_new(std::sync::Arc::new(Schema::new(fields)), columns)
            .map_err(output_error)?;
        self.0.write(&batch).map_err(output_error)
    }

    fn finish(mut self: Box<Self>) -> Result<()> {
        self.0.finish().map_err(output_error)?;
        let mut out = self.0.into_inner();
        writeln!(out)
            .and_then(|()| out.flush())
            .map_err(output_error)
    }
}

struct Parquet(parquet::arrow::ArrowWriter<Box<dyn Write + Send>>);

impl Sink for Parquet {
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.0.write(batch).map_err(output_error)
    }

    fn finish(self: Box<Self>) -> Result<()> {
        let mut out = self.0.into_inner().map_err(output_error)?;
        out.flush().map_err(output_error)
    }
}
