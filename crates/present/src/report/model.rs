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

#[derive(Serialize, schemars::JsonSchema)]
pub struct Column {
    pub name: String,
    pub align: Align,
    /// Longest cell the text renderer prints before cutting it with `…`.
    pub max_width: Option<usize>,
}

impl Column {
    /// A label or name, left-aligned.
    pub fn text(name: impl Into<String>) -> Column {
        Column {
            name: name.into(),
            align: Align::Left,
            max_width: None,
        }
    }

    /// A figure, right-aligned.
    pub fn number(name: impl Into<String>) -> Column {
        Column {
            name: name.into(),
            align: Align::Right,
            max_width: None,
        }
    }

    pub fn at_most(mut self, width: usize) -> Column {
        self.max_width = Some(width);
        self
    }
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct Row {
    pub cells: Vec<String>,
    /// Lines that belong to the row (its hottest code lines, its threads).
    pub details: Vec<String>,
}

impl Row {
    pub fn detail(mut self, line: impl Into<String>) -> Row {
        self.details.push(line.into());
        self
    }
}

impl From<Vec<String>> for Row {
    fn from(cells: Vec<String>) -> Row {
        Row {
            cells,
            details: Vec::new(),
        }
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
        }
    }
}
