//! What every rendering of a report draws: sections of notes, typed tables and
//! figures. A section builds these once from the report's data; the text and
//! HTML renderers only lay them out, so the two always show the same columns.

use serde::Serialize;

/// One part of the report ("Peak", "Accesses", ...).
#[derive(Serialize, schemars::JsonSchema)]
#[schemars(rename = "ReportSection")]
pub struct Section {
    /// Anchor in the HTML page.
    pub id: &'static str,
    pub title: String,
    /// Sentences under the title: how the figures were obtained, totals.
    pub notes: Vec<String>,
    pub tables: Vec<Table>,
    /// Plots the HTML page draws inline (`memlens plot` draws them to files).
    pub figures: Vec<Figure>,
}

impl Section {
    pub fn new(id: &'static str, title: impl Into<String>) -> Section {
        Section {
            id,
            title: title.into(),
            notes: Vec::new(),
            tables: Vec::new(),
            figures: Vec::new(),
        }
    }

    pub fn note(mut self, note: impl Into<String>) -> Section {
        self.notes.push(note.into());
        self
    }

    /// Adds a table, unless it has no rows and nothing to say about that:
    /// then it is left out whole, from every rendering.
    pub fn table(mut self, table: Table) -> Section {
        if !table.rows.is_empty() || table.empty.is_some() {
            self.tables.push(table);
        }
        self
    }

    pub fn figure(mut self, figure: Figure) -> Section {
        self.figures.push(figure);
        self
    }
}

#[derive(Clone, Copy, Serialize, schemars::JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Align {
    Left,
    Right,
}

/// What a number column's values count, each in its base unit: the cells'
/// text rounds them ("1.0 MiB", "0.250s"), the values do not.
#[derive(Clone, Copy, Debug, Serialize, schemars::JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Bytes,
    /// Seconds since the run started, or a duration in seconds.
    Seconds,
    /// Blocks, accesses, events: a plain number.
    Count,
    /// Percent, 0 to 100.
    Percent,
    BytesPerSecond,
    /// Processor cycles (latencies).
    Cycles,
    /// Nanoseconds (latencies measured by the clock).
    Nanoseconds,
    /// One figure over another (a job's most over its mean rank).
    Ratio,
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct Column {
    pub name: String,
    pub align: Align,
    /// Longest cell the text renderer prints before cutting it with `…`.
    pub max_width: Option<usize>,
    /// What the rows' `values` in this column count (none: a label, or a
    /// figure whose cells carry no value yet).
    pub unit: Option<Unit>,
}

impl Column {
    /// A label or name, left-aligned.
    pub fn text(name: impl Into<String>) -> Column {
        Column {
            name: name.into(),
            align: Align::Left,
            max_width: None,
            unit: None,
        }
    }

    /// A figure, right-aligned.
    pub fn number(name: impl Into<String>) -> Column {
        Column {
            name: name.into(),
            align: Align::Right,
            max_width: None,
            unit: None,
        }
    }

    /// A figure in `unit`, right-aligned; its cells carry their values.
    pub fn measure(name: impl Into<String>, unit: Unit) -> Column {
        Column {
            unit: Some(unit),
            ..Column::number(name)
        }
    }

    pub fn at_most(mut self, width: usize) -> Column {
        self.max_width = Some(width);
        self
    }
}

/// One cell as it is built: the text every rendering prints, and the
/// number behind it in its column's unit, where it has one.
pub struct Cell {
    pub text: String,
    pub value: Option<f64>,
}

impl Cell {
    /// A figure's text and its unrounded value.
    pub fn measured(text: String, value: f64) -> Cell {
        Cell {
            text,
            value: Some(value),
        }
    }

    /// Bytes as [`human_bytes`](crate::format::human_bytes) writes them.
    pub fn bytes(b: f64) -> Cell {
        Cell::measured(crate::format::human_bytes(b), b)
    }

    /// A duration as [`seconds`](crate::format::seconds) writes it.
    pub fn seconds(ns: u64) -> Cell {
        Cell::measured(crate::format::seconds(ns), ns as f64 / 1e9)
    }

    /// A whole number.
    pub fn count(n: impl Into<u64>) -> Cell {
        let n = n.into();
        Cell::measured(n.to_string(), n as f64)
    }

    /// A count that need not be whole (scaled from samples), as
    /// [`count`](crate::format::count) writes it.
    pub fn estimate(n: f64) -> Cell {
        Cell::measured(crate::format::count(n), n)
    }

    /// A number with `decimals` digits after the point.
    pub fn fixed(v: f64, decimals: usize) -> Cell {
        Cell::measured(format!("{v:.decimals$}"), v)
    }

    /// A percentage (0 to 100) with `decimals` digits after the point.
    pub fn percent(pct: f64, decimals: usize) -> Cell {
        Cell::measured(format!("{pct:.decimals$}%"), pct)
    }

    /// A value if there is one, else "-".
    pub fn or_dash<T>(v: Option<T>, cell: impl Fn(T) -> Cell) -> Cell {
        v.map_or_else(|| "-".to_string().into(), cell)
    }
}

impl From<String> for Cell {
    fn from(text: String) -> Cell {
        Cell { text, value: None }
    }
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct Row {
    pub cells: Vec<String>,
    /// Each cell's number in its column's unit (null for labels and for
    /// figures without one): what the HTML page sorts by.
    pub values: Vec<Option<f64>>,
    /// Lines that belong to the row (its hottest code lines, its threads).
    pub details: Vec<String>,
}

impl Row {
    pub fn detail(mut self, line: impl Into<String>) -> Row {
        self.details.push(line.into());
        self
    }

    /// Adds a cell at the end.
    pub fn push(&mut self, cell: impl Into<Cell>) {
        self.insert(self.cells.len(), cell);
    }

    /// Adds a cell before column `at`.
    pub fn insert(&mut self, at: usize, cell: impl Into<Cell>) {
        let cell = cell.into();
        self.cells.insert(at, cell.text);
        self.values.insert(at, cell.value);
    }
}

impl From<Vec<String>> for Row {
    fn from(cells: Vec<String>) -> Row {
        Row {
            values: vec![None; cells.len()],
            cells,
            details: Vec::new(),
        }
    }
}

impl From<Vec<Cell>> for Row {
    fn from(cells: Vec<Cell>) -> Row {
        let mut row = Row::from(Vec::<String>::new());
        for cell in cells {
            row.push(cell);
        }
        row
    }
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct Table {
    /// A heading of its own when a section has several tables.
    pub title: Option<String>,
    /// What the table's figures are (exact, sampled), beside the title.
    pub note: Option<String>,
    pub columns: Vec<Column>,
    /// False for key/value lists, whose first column names each row.
    pub header: bool,
    pub rows: Vec<Row>,
    /// Said instead of the table when it has no rows.
    pub empty: Option<String>,
    /// Lines under the table (totals of what it leaves out, how a column
    /// was obtained).
    pub footers: Vec<String>,
    /// The column rows' details are written under (default: the first label
    /// column).
    pub details_under: Option<usize>,
}

impl Table {
    pub fn new(columns: Vec<Column>) -> Table {
        Table {
            title: None,
            note: None,
            columns,
            header: true,
            rows: Vec::new(),
            empty: None,
            footers: Vec::new(),
            details_under: None,
        }
    }

    /// Rows of a name and a value, without a header.
    pub fn key_value(rows: impl IntoIterator<Item = (String, String)>) -> Table {
        let mut t = Table::new(vec![Column::text("what"), Column::text("value")]);
        t.header = false;
        t.rows = rows.into_iter().map(|(k, v)| vec![k, v].into()).collect();
        t
    }

    pub fn titled(mut self, title: impl Into<String>) -> Table {
        self.title = Some(title.into());
        self
    }

    pub fn note(mut self, note: impl Into<String>) -> Table {
        self.note = Some(note.into());
        self
    }

    pub fn or_else(mut self, empty: impl Into<String>) -> Table {
        self.empty = Some(empty.into());
        self
    }

    pub fn footer(mut self, footer: impl Into<String>) -> Table {
        self.footers.push(footer.into());
        self
    }

    pub fn details_under(mut self, column: usize) -> Table {
        self.details_under = Some(column);
        self
    }

    pub fn push(&mut self, row: impl Into<Row>) {
        let row = row.into();
        debug_assert_eq!(row.cells.len(), self.columns.len(), "a cell per column");
        debug_assert!(
            (self.columns.iter().zip(&row.values)).all(|(c, v)| c.unit.is_some() || v.is_none()),
            "a value only under a column with a unit"
        );
        self.rows.push(row);
    }
}

/// A plot of the profile, drawn by `memlens plot` and inline in the HTML page.
#[derive(Clone, Copy, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Figure {
    Capacity,
    Bandwidth,
    Scatter,
    Fold,
    /// A job's capacity across its ranks.
    RankBand,
    /// A job's ranks over time.
    RankMap,
    /// Bytes allocated by call stack, a flame graph (click: zoom; search).
    AllocationFlame,
    /// Sampled accesses by object and code, a flame graph.
    AccessFlame,
    /// Sampled loads by memory level, then object and code, a flame graph.
    LevelFlame,
}

impl Figure {
    pub fn caption(self) -> &'static str {
        match self {
            Figure::Capacity => "resident set and live heap (measured), largest objects stacked, regions shaded",
            Figure::Bandwidth => "read and write bandwidth: exact bytes of instrumented code between ticks, and memory-traffic counters",
            Figure::Scatter => "sampled address against time, one band per object (loads blue, stores red), regions shaded",
            Figure::Fold => "sampled address against the phase of one instance, folded rates below",
            Figure::RankBand => "resident set and live heap across the ranks: the least and most of any rank in each time bin, and the mean",
            Figure::RankMap => "resident set of each rank (rows) over time (columns)",
            Figure::AllocationFlame => "allocations by call stack",
            Figure::AccessFlame => "sampled accesses by object, under its allocation stack, then the code that touched it",
            Figure::LevelFlame => "sampled loads by the memory level that served them, then object and code",
        }
    }
}
