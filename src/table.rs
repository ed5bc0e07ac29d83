//! Article-style tables, rendered as Markdown so that the same text reads in
//! a terminal and in the book.

use crate::stats::Summary;

/// A table with a title, column headers, rows and footnotes.
#[derive(Clone, Debug, Default)]
pub struct Table {
    pub title: String,
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
    pub notes: Vec<String>,
}

impl Table {
    pub fn new(title: impl Into<String>, headers: &[&str]) -> Table {
        Table {
            title: title.into(),
            headers: headers.iter().map(|h| h.to_string()).collect(),
            ..Table::default()
        }
    }

    /// A table of `rows`, one line each, its cells made by `columns`:
    /// `Table::of(title, &rows, &[col("P", |r| ..), col("fork s", |r| ..)])`.
    pub fn of<'r, R: 'r>(
        title: impl Into<String>,
        rows: impl IntoIterator<Item = &'r R>,
        columns: &[Column<'_, R>],
    ) -> Table {
        let headers: Vec<&str> = columns.iter().map(|c| c.header.as_str()).collect();
        let mut t = Table::new(title, &headers);
        for r in rows {
            t.row(columns.iter().map(|c| (c.cell)(r)).collect());
        }
        t
    }

    /// The same, with a note.
    pub fn noted(mut self, note: impl Into<String>) -> Table {
        self.note(note);
        self
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    /// Markdown: a bold title, a pipe table padded to line up in a terminal
    /// (numbers right-aligned), then the notes.
    pub fn render(&self) -> String {
        let cols = self.headers.len();
        // A `|` in a cell (rounds in clusters: `864-1190 (7) | 7500-8038
        // (8)`) would end the cell: Markdown's escape keeps it.
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| r.iter().map(|cell| cell.replace('|', "\\|")).collect())
            .collect();
        // At least 3 wide: a Markdown rule needs `--:` or `:--`.
        let mut width: Vec<usize> =
            self.headers.iter().map(|h| h.chars().count().max(3)).collect();
        for row in &rows {
            for (w, cell) in width.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let numeric: Vec<bool> = (0..cols)
            .map(|c| {
                rows.iter().all(|r| {
                    r.get(c).is_none_or(|cell| {
                        cell.starts_with(|ch: char| {
                            ch.is_ascii_digit() || ch == '-' || ch == '.'
                        })
                    })
                })
            })
            .collect();
        let line = |cells: &[String]| {
            let padded: Vec<String> = (0..cols)
                .map(|c| {
                    let cell = cells.get(c).map_or("", String::as_str);
                    if numeric[c] {
                        format!("{cell:>w$}", w = width[c])
                    } else {
                        format!("{cell:<w$}", w = width[c])
                    }
                })
                .collect();
            format!("| {} |\n", padded.join(" | "))
        };
        let mut out = String::new();
        if !self.title.is_empty() {
            out.push_str(&format!("**{}**\n\n", self.title));
        }
        out.push_str(&line(&self.headers));
        let rule: Vec<String> = (0..cols)
            .map(|c| {
                let dashes = "-".repeat(width[c] - 1);
                if numeric[c] { format!("{dashes}:") } else { format!(":{dashes}") }
            })
            .collect();
        out.push_str(&format!("| {} |\n", rule.join(" | ")));
        for row in &rows {
            out.push_str(&line(row));
        }
        for note in &self.notes {
            out.push_str(&format!("\n{note}\n"));
        }
        out
    }
}

/// A column of a [`Table::of`]: its header, and how a row makes its cell.
pub struct Column<'a, R: ?Sized> {
    pub header: String,
    pub cell: Box<dyn Fn(&R) -> String + 'a>,
}

/// A column headed `header` whose cells `cell` makes.
pub fn col<'a, R: ?Sized>(
    header: impl Into<String>,
    cell: impl Fn(&R) -> String + 'a,
) -> Column<'a, R> {
    Column { header: header.into(), cell: Box::new(cell) }
}

/// A figure to three significant digits, no exponent: `148`, `12.3`,
/// `1.86`, `0.042`. The one format of headline figures, verdicts and bar
/// labels.
pub fn sig(value: f64) -> String {
    let digits = if value == 0.0 || !value.is_finite() {
        0
    } else {
        (2 - value.abs().log10().floor() as i32).clamp(0, 3) as usize
    };
    format!("{value:.digits$}")
}

/// An axis number without noise: `500`, `2.5`, `0.125`, `1e-5`.
pub fn axis(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    if v.fract() == 0.0 && v.abs() < 1e9 {
        return format!("{v:.0}");
    }
    if v.abs() < 1e-3 {
        return format!("{v:.0e}");
    }
    let text = format!("{v:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A fraction as a whole percentage, `-` when there is none: `43%`.
pub fn percent(x: f64) -> String {
    if x.is_finite() { format!("{:.0}%", 100.0 * x) } else { "-".into() }
}

/// `digits` decimals, `-` for a figure that was not measured.
pub fn or_dash(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

/// A summary's median with its range: `0.412 (0.398-0.430)`.
pub fn range(s: &Summary, digits: usize) -> String {
    let Summary { median, min, max, .. } = s;
    format!("{median:.digits$} ({min:.digits$}-{max:.digits$})")
}

/// [`range`], `-` for a summary that was not measured.
pub fn range_or_dash(s: Option<Summary>, digits: usize) -> String {
    s.map_or("-".into(), |s| range(&s, digits))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_have_one_format_each() {
        assert_eq!(sig(148.08), "148");
        assert_eq!(sig(1.8642), "1.86");
        assert_eq!(sig(0.0421), "0.042");
        assert_eq!(sig(0.0), "0");
        assert_eq!(axis(500.0), "500");
        assert_eq!(axis(2.5), "2.5");
        assert_eq!(axis(0.1 + 0.2), "0.3");
        assert_eq!(axis(0.00001), "1e-5");
        assert_eq!(percent(0.434), "43%");
        assert_eq!(percent(f64::NAN), "-");
        assert_eq!(or_dash(Some(1.25), 1), "1.2");
        assert_eq!(or_dash(None, 1), "-");
    }

    #[test]
    fn renders_aligned_markdown() {
        let mut t = Table::new("Demo", &["setting", "seconds"]);
        t.row(vec!["P=255".into(), "0.5".into()]);
        t.row(vec!["P=1000".into(), "12.25".into()]);
        t.note("measured here");
        let text = t.render();
        assert_eq!(
            text,
            "**Demo**\n\n\
             | setting | seconds |\n\
             | :------ | ------: |\n\
             | P=255   |     0.5 |\n\
             | P=1000  |   12.25 |\n\
             \nmeasured here\n"
        );
        let s = Summary::of(&[2.0, 0.5, 1.0]).unwrap();
        assert_eq!(range(&s, 2), "1.00 (0.50-2.00)");
        let rows = [(1, 0.5), (2, 0.25)];
        let t = Table::of(
            "Of",
            &rows,
            &[
                col("n", |r: &(i32, f64)| r.0.to_string()),
                col("s", |r: &(i32, f64)| format!("{:.2}", r.1)),
            ],
        )
        .noted("a note");
        assert_eq!(t.headers, ["n", "s"]);
        assert_eq!(t.rows, [["1", "0.50"], ["2", "0.25"]]);
        assert_eq!(t.notes, ["a note"]);
        let mut split = Table::new("", &["rounds"]);
        split.row(vec!["1-2 (3) | 8-9 (3)".into()]);
        assert_eq!(split.render().lines().last(), Some("| 1-2 (3) \\| 8-9 (3) |"));
        let mut narrow = Table::new("", &["P"]);
        narrow.row(vec!["3".into()]);
        assert_eq!(narrow.render(), "|   P |\n| --: |\n|   3 |\n");
    }
}
