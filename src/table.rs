//! Article-style tables, rendered as Markdown so that the same text reads in
//! a terminal and in the book.

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
        // At least 3 wide: a Markdown rule needs `--:` or `:--`.
        let mut width: Vec<usize> =
            self.headers.iter().map(|h| h.chars().count().max(3)).collect();
        for row in &self.rows {
            for (w, cell) in width.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let numeric: Vec<bool> = (0..cols)
            .map(|c| {
                self.rows.iter().all(|r| {
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
        for row in &self.rows {
            out.push_str(&line(row));
        }
        for note in &self.notes {
            out.push_str(&format!("\n{note}\n"));
        }
        out
    }
}

/// Seconds with three significant decimals, like `time` prints them.
pub fn secs(s: f64) -> String {
    format!("{s:.3}")
}

/// A median with its range: `0.412 (0.398-0.430)`.
pub fn with_range(median: f64, min: f64, max: f64, digits: usize) -> String {
    format!("{median:.digits$} ({min:.digits$}-{max:.digits$})")
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(with_range(1.0, 0.5, 2.0, 2), "1.00 (0.50-2.00)");
        let mut narrow = Table::new("", &["P"]);
        narrow.row(vec!["3".into()]);
        assert_eq!(narrow.render(), "|   P |\n| --: |\n|   3 |\n");
        assert_eq!(secs(0.12345), "0.123");
    }
}
