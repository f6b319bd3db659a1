//! SQL over memlens profiles, and export of tables or query results to CSV,
//! JSON or Parquet.
//!
//! The profile's Parquet files are registered as tables of an embedded Apache
//! DataFusion engine: queries stream over the files (nothing is loaded whole),
//! and the same files and SQL run on a cluster engine unchanged. A run of
//! several profiles (MPI ranks) is one table per name over all their files.

mod sink;

pub use sink::{Format, Sink};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::MemTable;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::prelude::{SQLOptions, SessionConfig, SessionContext};
use futures::StreamExt;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    #[error("SQL: {0}; list the tables with 'SHOW TABLES' and a table's columns with 'DESCRIBE samples'")]
    Query(String),
    #[error("sql only reads a profile ({0}): run SELECT, SHOW TABLES or DESCRIBE, and write results with --format or `memlens export --sql`")]
    ReadOnly(String),
    #[error(transparent)]
    Profile(#[from] memlens_profile::ProfileError),
    #[error("writing the result: {0}")]
    Output(String),
    #[error("the statement has {0} operators, more than the {MAX_OPERATORS} a query may hold; compute it in several queries")]
    TooComplex(usize),
    #[error("the query needs more memory than its limit (--memory-limit, a quarter of the machine's by default): {0}; raise the limit, or select fewer rows or columns")]
    OutOfMemory(String),
}

type Result<T> = std::result::Result<T, SqlError>;

/// Every table a profile can hold, with its schema: a table a profile lacks
/// (no samples without access profiling) is queryable and empty.
pub fn table_schemas() -> Vec<(&'static str, SchemaRef)> {
    use memlens_profile::*;
    vec![
        (Allocation::NAME, Allocation::schema()),
        (HeapSite::NAME, HeapSite::schema()),
        (SiteLivePoint::NAME, SiteLivePoint::schema()),
        (Frame::NAME, Frame::schema()),
        (Region::NAME, Region::schema()),
        (AccessSample::NAME, AccessSample::schema()),
        (CodeLocation::NAME, CodeLocation::schema()),
        (TagRange::NAME, TagRange::schema()),
        (ThreadRow::NAME, ThreadRow::schema()),
        (TimelinePoint::NAME, TimelinePoint::schema()),
        (ThreadTrafficPoint::NAME, ThreadTrafficPoint::schema()),
        (CounterReading::NAME, CounterReading::schema()),
        (Module::NAME, Module::schema()),
        (StaticObject::NAME, StaticObject::schema()),
    ]
}

/// The tables of one profile, or of several read as one run, open for SQL.
pub struct Engine {
    runtime: tokio::runtime::Runtime,
    ctx: SessionContext,
    /// Tables with at least one file, in [`table_schemas`] order.
    present: Vec<&'static str>,
    /// Every table file registered, to name the damaged one if a query fails.
    files: Vec<PathBuf>,
}

/// The most binary operators one statement may hold. A chain of them
/// (`1+1+…`) nests as deep as it is long, and the query planner recurses on
/// it: in a debug build 500 plan in 0.4 s, 1 000 in 2 s, and 1 500 overflow
/// the main thread's stack.
pub const MAX_OPERATORS: usize = 500;

/// Refuses a statement with more than [`MAX_OPERATORS`] binary operators
/// (symbols, AND, OR), before the engine parses it.
fn check_size(sql: &str) -> Result<()> {
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::keywords::Keyword;
    use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
    // A statement the tokenizer refuses is left to the engine, which says why.
    let Ok(tokens) = Tokenizer::new(&GenericDialect {}, sql).tokenize() else {
        return Ok(());
    };
    let operators = tokens
        .iter()
        .filter(|t| match t {
            Token::Word(w) => matches!(w.keyword, Keyword::AND | Keyword::OR | Keyword::XOR),
            Token::Plus
            | Token::Minus
            | Token::Mul
            | Token::Div
            | Token::Mod
            | Token::DuckIntDiv
            | Token::StringConcat
            | Token::Eq
            | Token::DoubleEq
            | Token::Neq
            | Token::Lt
            | Token::Gt
            | Token::LtEq
            | Token::GtEq
            | Token::Spaceship
            | Token::Ampersand
            | Token::Pipe
            | Token::Caret
            | Token::ShiftLeft
            | Token::ShiftRight => true,
            _ => false,
        })
        .count();
    match operators > MAX_OPERATORS {
        true => Err(SqlError::TooComplex(operators)),
        false => Ok(()),
    }
}

/// The memory a query may take by default: a quarter of the machine's
/// (MemTotal), or 4 GiB where that cannot be read.
pub fn default_memory_limit() -> u64 {
    let total_kib = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
        line.split_whitespace().nth(1)?.parse::<u64>().ok()
    });
    total_kib.map_or(4 << 30, |k| k * 1024 / 4)
}

impl Engine {
    /// Registers the tables of `parts` (profile directories, already
    /// finalized); a query may take `memory_limit` bytes of memory (joins,
    /// sorts and aggregates are refused past it).
    pub fn open(parts: &[PathBuf], memory_limit: u64) -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(std::thread::available_parallelism().map_or(2, |n| n.get()))
            // The Parquet reader panics on some damaged bytes: the panic is
            // reported by `run` as an error naming the file, not printed.
            .on_thread_start(memlens_profile::quiet_reader_thread)
            .build()
            .map_err(|e| SqlError::Output(format!("cannot start the query threads: {e}")))?;
        let pool = datafusion::execution::runtime_env::RuntimeEnvBuilder::new()
            .with_memory_limit(usize::try_from(memory_limit).unwrap_or(usize::MAX), 1.0)
            .build_arc()
            .map_err(query_error)?;
        let ctx = SessionContext::new_with_config_rt(
            SessionConfig::new().with_information_schema(true),
            pool,
        );
        let mut present = Vec::new();
        let mut all_files = Vec::new();
        for (name, schema) in table_schemas() {
            let mut files = Vec::new();
            for dir in parts {
                files.extend(memlens_profile::table_file_named(dir, name)?);
            }
            let provider: Arc<dyn datafusion::catalog::TableProvider> = if files.is_empty() {
                Arc::new(
                    MemTable::try_new(schema, vec![vec![]])
                        .map_err(|e| SqlError::Query(e.to_string()))?,
                )
            } else {
                present.push(name);
                let table = listing_table(&files, schema)?;
                all_files.extend(files);
                Arc::new(table)
            };
            ctx.register_table(name, provider)
                .map_err(|e| SqlError::Query(e.to_string()))?;
        }
        // Every part's processes, from its meta.json: rank and host by pid.
        let mut processes = Vec::new();
        // A directory of tables alone (no meta.json) has no processes.
        for dir in parts
            .iter()
            .filter(|d| d.join(memlens_profile::META_FILE).exists())
        {
            let meta = memlens_profile::Meta::read(dir)?;
            let part = dir
                .file_name()
                .map_or(String::new(), |n| n.to_string_lossy().into_owned());
            processes.extend(meta.processes.iter().map(|p| memlens_profile::ProcessRow {
                pid: p.pid,
                ppid: p.ppid,
                rank: p.rank,
                host: meta.host.clone(),
                exe: p.exe.clone(),
                start_ns: p.start_ns,
                end_ns: p.end_ns,
                exit_code: p.exit_code,
                part: part.clone(),
            }));
        }
        use memlens_profile::Table;
        let batch = memlens_profile::ProcessRow::to_batch(&processes).map_err(SqlError::Query)?;
        let table = MemTable::try_new(memlens_profile::ProcessRow::schema(), vec![vec![batch]])
            .map_err(|e| SqlError::Query(e.to_string()))?;
        ctx.register_table(memlens_profile::ProcessRow::NAME, Arc::new(table))
            .map_err(|e| SqlError::Query(e.to_string()))?;
        present.push(memlens_profile::ProcessRow::NAME);
        Ok(Engine {
            runtime,
            ctx,
            present,
            files: all_files,
        })
    }

    /// Tables that have a file in the profile (the others are empty).
    pub fn present_tables(&self) -> &[&'static str] {
        &self.present
    }

    /// Runs one SQL statement and streams its rows into the sink made for
    /// its schema; returns the number of rows.
    pub fn run(
        &self,
        sql: &str,
        make_sink: impl FnOnce(SchemaRef) -> Result<Box<dyn Sink>>,
    ) -> Result<u64> {
        check_size(sql)?;
        let query = || {
            self.runtime.block_on(async {
                // Read-only: no CREATE, INSERT, COPY ... TO or SET.
                let read_only = SQLOptions::new()
                    .with_allow_ddl(false)
                    .with_allow_dml(false)
                    .with_allow_statements(false);
                let frame =
                    self.ctx
                        .sql_with_options(sql, read_only)
                        .await
                        .map_err(|e| match e {
                            // What SQLOptions refused: the statement's kind, e.g. "DML not supported: COPY".
                            datafusion::error::DataFusionError::Plan(what)
                                if what.contains(" not supported: ") =>
                            {
                                SqlError::ReadOnly(what)
                            }
                            e => query_error(e),
                        })?;
                let mut stream = frame.execute_stream().await.map_err(query_error)?;
                let mut sink = make_sink(stream.schema())?;
                let mut rows = 0;
                while let Some(batch) = stream.next().await {
                    let batch = batch.map_err(query_error)?;
                    rows += batch.num_rows() as u64;
                    sink.write(&batch)?;
                }
                sink.finish()?;
                Ok(rows)
            })
        };
        memlens_profile::catch_reader_panic(query).unwrap_or_else(|what| {
            // The reader panicked on a file that its footer checks passed:
            // decoding each file whole finds it.
            let damaged = self
                .files
                .iter()
                .find_map(|f| memlens_profile::check_file(f).err());
            Err(damaged.map_or_else(
                || SqlError::Query(format!("the query engine failed: {what}")),
                SqlError::Profile,
            ))
        })
    }
}

fn listing_table(files: &[PathBuf], schema: SchemaRef) -> Result<ListingTable> {
    let urls = files
        .iter()
        .map(|f| {
            // A damaged file is named with its fix before a query: DataFusion's
            // own error does not say which file.
            memlens_profile::file_rows(f)?;
            let format = |detail: String| memlens_profile::ProfileError::Format {
                path: f.clone(),
                detail,
            };
            let abs =
                std::fs::canonicalize(f).map_err(|cause| memlens_profile::ProfileError::Io {
                    path: f.clone(),
                    cause,
                })?;
            // From a URL, not a path string: a path's '*' or '[' would be read as a glob.
            let url = url::Url::from_file_path(&abs)
                .map_err(|()| format("not a local file path".to_string()))?;
            Ok(ListingTableUrl::try_new(url, None).map_err(|e| format(e.to_string()))?)
        })
        .collect::<Result<Vec<_>>>()?;
    let options =
        ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
    let config = ListingTableConfig::new_with_multi_paths(urls)
        .with_listing_options(options)
        .with_schema(schema);
    ListingTable::try_new(config).map_err(|e| SqlError::Query(e.to_string()))
}

/// DataFusion's message, on one line: its errors can carry a backtrace or a
/// multi-line context, and a one-line error is what the CLI prints.
fn query_error(e: datafusion::error::DataFusionError) -> SqlError {
    let text = e
        .to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    match e.find_root() {
        // Its message lists the top consumers on several lines, then the
        // allocation that failed: that line alone is told.
        datafusion::error::DataFusionError::ResourcesExhausted(what) => SqlError::OutOfMemory(
            (what.lines().rev().find(|l| !l.trim().is_empty()))
                .map_or(what.as_str(), |l| l.trim().trim_start_matches("Error: "))
                .to_string(),
        ),
        // Its Display is the parser's Debug text (`ParserError("…")`).
        datafusion::error::DataFusionError::SQL(parse, _) => SqlError::Query(format!(
            "the statement does not parse: {}",
            parse.to_string().trim_start_matches("sql parser error: ")
        )),
        _ => SqlError::Query(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memlens_profile::{Module, Table};

    /// docs/profile.md's table of tables names every table `memlens sql`
    /// has, with its columns in order (`numa0..numa3` for a numbered run).
    #[test]
    fn the_documented_columns_are_the_tables_columns() {
        let doc = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/profile.md"),
        )
        .unwrap();
        let documented = |table: &str| -> Vec<String> {
            let row = doc
                .lines()
                .find(|l| l.starts_with(&format!("| `{table}` | `")))
                .unwrap_or_else(|| panic!("docs/profile.md has no row for {table}"));
            let list = row.split('`').nth(3).unwrap();
            (list.split(", "))
                .flat_map(|c| match c.split_once("..") {
                    Some((first, last)) => {
                        let stem = first.trim_end_matches(|d: char| d.is_ascii_digit());
                        let from: u32 = first[stem.len()..].parse().unwrap();
                        let to: u32 = last[stem.len()..].parse().unwrap();
                        (from..=to).map(|i| format!("{stem}{i}")).collect()
                    }
                    None => vec![c.to_string()],
                })
                .collect()
        };
        let tables = table_schemas().into_iter().chain([(
            memlens_profile::ProcessRow::NAME,
            memlens_profile::ProcessRow::schema(),
        )]);
        for (name, schema) in tables {
            let columns: Vec<String> = (schema.fields().iter()).map(|f| f.name().clone()).collect();
            assert_eq!(documented(name), columns, "docs/profile.md's {name}");
        }
    }

    /// Flipped bits in a table's data pages, where the footer checks do not
    /// look, must give rows or an error, never a panic (the Parquet reader
    /// asserts on some such bytes, inside the query engine's threads).
    #[test]
    fn damaged_data_pages_give_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let rows: Vec<Module> = (0..200)
            .map(|i| Module {
                path: format!("/usr/lib/lib{i}.so"),
                start: i * 4096,
                ..Default::default()
            })
            .collect();
        memlens_profile::write_table(dir.path(), &rows).unwrap();
        let file = memlens_profile::table_path::<Module>(dir.path());
        let good = std::fs::read(&file).unwrap();
        let footer = u32::from_le_bytes(good[good.len() - 8..good.len() - 4].try_into().unwrap());
        let data_end = good.len() - 8 - footer as usize;
        let (mut refused, mut seed) = (0, 0x9e37_79b9_7f4a_7c15_u64);
        for _ in 0..300 {
            let mut bad = good.clone();
            for _ in 0..3 {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let at = 4 + (seed >> 33) as usize % (data_end - 4);
                bad[at] ^= 1 << ((seed >> 20) % 8);
            }
            std::fs::write(&file, &bad).unwrap();
            let engine = Engine::open(&[dir.path().to_path_buf()], 1 << 30).unwrap();
            let sink = |schema| Format::Csv.sink(schema, Box::new(std::io::sink()));
            if let Err(e) = engine.run("SELECT * FROM modules", sink) {
                let text = e.to_string();
                assert!(!text.contains('\n'), "{text}");
                refused += 1;
            }
        }
        assert!(refused > 0, "no damage was seen");
    }
}
