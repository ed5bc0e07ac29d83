//! Horizontal bar and dot charts as SVG, for results whose rows are methods,
//! programs or placements rather than points on a numeric axis (the line
//! charts of [`super::Chart`] need a numeric x), on the same card, axis and
//! colours as those.
//!
//! On a linear axis each row is a bar from zero, whose length is the value.
//! On a log axis a bar's length means nothing (where it starts is arbitrary),
//! so each row is a dot on a dotted guide line instead.

use super::{ACROSS, Axis, GRID, INK, Kind, escape, open, text, tick_label};
use crate::engine::{Cluster, clusters};
use crate::stats::Summary;

/// One row: a label, its value (a median), and the range to draw as a
/// whisker (min, max), in its meaning's colour (a second form: the bar
/// outlined and pale, the dot hollow).
#[derive(Clone, Debug, Default)]
pub struct Row {
    pub label: String,
    pub value: f64,
    pub range: Option<(f64, f64)>,
    pub kind: Kind,
}

impl Row {
    pub fn new(kind: impl Into<Kind>, label: impl Into<String>, value: f64) -> Row {
        Row { kind: kind.into(), label: label.into(), value, ..Row::default() }
    }

    pub fn range(mut self, min: f64, max: f64) -> Row {
        self.range = Some((min, max));
        self
    }
}

// Rows made from a series' rounds, shared by the experiments' bar charts.
impl Row {
    /// A row of `s`: its median, whisker min-max.
    pub fn summary(
        kind: impl Into<Kind>,
        label: impl Into<String>,
        s: &Summary,
    ) -> Row {
        Row::new(kind, label, s.median).range(s.min, s.max)
    }

    /// The rows of `rounds`: one, [`Row::summary`] of them (none for no
    /// rounds); or, where `split` and they fall in separate clusters
    /// ([`clusters`]), one per cluster, `LABEL (cluster I: N rounds)`, since
    /// one median would describe none of them.
    pub fn rounds(kind: Kind, label: &str, rounds: &[f64], split: bool) -> Vec<Row> {
        let cs = if split { clusters(rounds) } else { Vec::new() };
        if cs.len() < 2 {
            let s = Summary::of(rounds);
            return s.map(|s| Row::summary(kind, label, &s)).into_iter().collect();
        }
        let each = |(i, c): (usize, &Cluster)| {
            let label = format!("{label} (cluster {}: {} rounds)", i + 1, c.n);
            Row::new(kind, label, c.median).range(c.min, c.max)
        };
        cs.iter().enumerate().map(each).collect()
    }
}

/// Rows under a heading: one category (a CPU placement, say). An empty name
/// draws no heading.
#[derive(Clone, Debug, Default)]
pub struct Group {
    pub name: String,
    pub rows: Vec<Row>,
}

/// A chart of labelled rows, grouped by category.
#[derive(Clone, Debug, Default)]
pub struct Bars {
    pub title: String,
    pub unit: String,
    pub log: bool,
    pub groups: Vec<Group>,
}

const W: f64 = 760.0;
const RIGHT: f64 = 76.0;
const TOP: f64 = 52.0;
const ROW: f64 = 26.0;
const BOTTOM: f64 = 52.0;

impl Bars {
    pub fn new(title: &str, unit: &str, log: bool) -> Bars {
        Bars { title: title.into(), unit: unit.into(), log, groups: Vec::new() }
    }

    pub fn group(mut self, name: &str, rows: Vec<Row>) -> Bars {
        self.groups.push(Group { name: name.into(), rows });
        self
    }

    /// Render to an SVG document. Values that are not positive and finite
    /// are drawn as no bar or dot (their label stays).
    pub fn to_svg(&self) -> String {
        let lines: usize = self
            .groups
            .iter()
            .map(|g| g.rows.len() + usize::from(!g.name.is_empty()))
            .sum();
        let h = TOP + ROW * lines as f64 + BOTTOM;
        let good = |v: f64| v.is_finite() && v > 0.0;
        let all: Vec<f64> = self
            .groups
            .iter()
            .flat_map(|g| &g.rows)
            .flat_map(|r| {
                let (lo, hi) = r.range.unwrap_or((r.value, r.value));
                [r.value, lo, hi]
            })
            .filter(|v| good(*v))
            .collect();
        let max = all.iter().copied().fold(f64::MIN, f64::max);
        let min = all.iter().copied().fold(f64::MAX, f64::min);
        let longest = self
            .groups
            .iter()
            .flat_map(|g| &g.rows)
            .map(|r| r.label.chars().count())
            .max()
            .unwrap_or(0);
        let left = (24.0 + 6.6 * longest as f64).clamp(120.0, 380.0);
        let span = W - left - RIGHT;
        // The axis: 1, 2 or 5 times powers of ten on a log scale, round
        // steps from zero otherwise.
        let axis = if all.is_empty() {
            Axis::new(0.0, 1.0, false, true, span, ACROSS)
        } else {
            Axis::new(min, max, self.log, true, span, ACROSS)
        };
        let x = |v: f64| left + span * axis.frac(v);
        let mut out = open(W, h, &self.title);
        out += &text(W / 2.0, 30.0, 18.0, "middle", &self.title);
        // Grid lines and their numbers.
        let bottom = TOP + ROW * lines as f64;
        for t in axis.ticks() {
            let tx = x(t);
            out += &format!(
                "<line class=\"lab-grid\" x1=\"{tx:.1}\" y1=\"{TOP}\" x2=\"{tx:.1}\" \
                 y2=\"{bottom}\" stroke=\"{GRID}\"/>\n"
            );
            out += &text(tx, bottom + 18.0, 13.0, "middle", &tick_label(t));
        }
        out += &text(left + span / 2.0, bottom + 40.0, 14.0, "middle", &self.unit);
        let mut y = TOP;
        for g in &self.groups {
            if !g.name.is_empty() {
                out += &format!(
                    "<text class=\"lab-ink\" x=\"16\" y=\"{:.1}\" font-size=\"14\" \
                     font-weight=\"bold\" fill=\"{INK}\">{}</text>\n",
                    y + ROW * 0.7,
                    escape(&g.name)
                );
                y += ROW;
            }
            for r in &g.rows {
                out += &self.row(r, y, left, &x);
                y += ROW;
            }
        }
        out += &format!(
            "<line class=\"lab-ink\" x1=\"{left}\" y1=\"{TOP}\" x2=\"{left}\" \
             y2=\"{bottom}\" stroke=\"{INK}\"/>\n</svg>\n"
        );
        out
    }

    fn row(&self, r: &Row, y: f64, left: f64, x: &dyn Fn(f64) -> f64) -> String {
        let mid = y + ROW / 2.0;
        let (colour, class) = (r.kind.colour(), r.kind.class());
        let paint = if r.kind.filled() {
            format!("fill=\"{colour}\"")
        } else {
            format!(
                "fill=\"{colour}\" fill-opacity=\"0.3\" stroke=\"{colour}\" \
                 stroke-width=\"1.8\""
            )
        };
        let mut out = text(left - 8.0, mid + 4.5, 13.0, "end", &r.label);
        if !(r.value.is_finite() && r.value > 0.0) {
            return out;
        }
        let end = x(r.value);
        if self.log {
            out += &format!(
                "<line x1=\"{left}\" y1=\"{mid:.1}\" x2=\"{:.1}\" y2=\"{mid:.1}\" \
                 stroke=\"#bbbbbb\" class=\"lab-grid\" stroke-dasharray=\"1 3\"/>\n",
                W - RIGHT
            );
        } else {
            out += &format!(
                "<rect class=\"{class}\" x=\"{left}\" y=\"{:.1}\" width=\"{:.1}\" \
                 height=\"{:.1}\" {paint}/>\n",
                y + 5.0,
                (end - left).max(1.0),
                ROW - 10.0
            );
        }
        let mut text_at = end;
        if let Some((lo, hi)) =
            r.range.filter(|(lo, hi)| lo.is_finite() && hi.is_finite())
        {
            let (a, b) = (x(lo.max(f64::MIN_POSITIVE)), x(hi));
            out += &format!(
                "<path class=\"lab-ink\" d=\"M{a:.1} {:.1}V{:.1}M{a:.1} {mid:.1}H{b:.1}\
                 M{b:.1} {:.1}V{:.1}\" stroke=\"{INK}\" fill=\"none\"/>\n",
                mid - 5.0,
                mid + 5.0,
                mid - 5.0,
                mid + 5.0
            );
            text_at = text_at.max(b);
        }
        if self.log {
            let paint = if r.kind.filled() {
                format!("fill=\"{colour}\"")
            } else {
                format!("fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"")
            };
            out += &format!(
                "<circle class=\"{class}\" cx=\"{end:.1}\" cy=\"{mid:.1}\" r=\"5\" {paint}/>\n"
            );
        }
        out += &text(
            text_at + 7.0,
            mid + 4.0,
            12.0,
            "start",
            &crate::table::sig(r.value),
        );
        out
    }
}

/// An SVG chart with one labelled row per `(label, value)`, top to bottom:
/// bars on a linear axis, dots on a log axis (for values spanning decades).
pub fn svg(
    title: &str,
    unit: &str,
    rows: &[(Kind, String, f64)],
    log: bool,
) -> String {
    let rows = rows
        .iter()
        .map(|(kind, label, value)| Row::new(*kind, label, *value))
        .collect();
    Bars::new(title, unit, log).group("", rows).to_svg()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chart::Meaning;

    #[test]
    fn rows_of_rounds_split_into_clusters_only_when_asked() {
        let (k, r) = (Kind::from(Meaning::Thread), [10.0, 11.0, 200.0, 210.0]);
        let one = Row::rounds(k, "a", &r, false);
        assert_eq!(
            (one.len(), one[0].value, one[0].range),
            (1, 105.5, Some((10.0, 210.0)))
        );
        let labels: Vec<String> =
            Row::rounds(k, "a", &r, true).into_iter().map(|r| r.label).collect();
        assert_eq!(labels, ["a (cluster 1: 2 rounds)", "a (cluster 2: 2 rounds)"]);
        assert!(Row::rounds(k, "a", &[], true).is_empty());
    }

    #[test]
    fn one_bar_per_row_with_escaped_labels() {
        let rows = vec![
            (Meaning::Process.into(), "fork & wait".to_string(), 400.0),
            (Meaning::Thread.into(), "Vec<u8>".to_string(), 0.5),
            (Meaning::Task.into(), "failed".to_string(), f64::NAN),
        ];
        let linear = svg("t", "us", &rows, false);
        assert!(linear.starts_with("<svg") && linear.contains("width=\"100%\""));
        assert!(
            linear.contains("fork &amp; wait") && linear.contains("Vec&lt;u8&gt;")
        );
        assert_eq!(
            linear.matches("<rect class=\"lab-m-").count(),
            2,
            "NaN draws no bar"
        );
        assert!(linear.contains(&format!("fill=\"{}\"", Meaning::Process.colour())));
        assert!(linear.contains(&format!("fill=\"{}\"", Meaning::Thread.colour())));
        assert!(linear.contains(">400<"), "axis rounded up to 400");
        assert!(!linear.contains(">500<"), "and no further");
        assert!(!linear.contains("<circle"));
    }

    #[test]
    fn log_axis_draws_dots_not_bars() {
        let rows = vec![
            (Meaning::Thread.into(), "fast".to_string(), 0.5),
            (Meaning::Process.into(), "slow".to_string(), 400.0),
        ];
        let log = svg("t", "us", &rows, true);
        assert_eq!(log.matches("<circle").count(), 2);
        // Only the card: no bar whose length would mean nothing.
        assert_eq!(log.matches("<rect").count(), 1);
        // Decades on the log axis, which runs from 0.5 to 500.
        assert!(
            log.contains(">1<") && log.contains(">10<") && log.contains(">100<")
        );
        assert!(!log.contains(">1000<"), "no further than the data need");
    }

    #[test]
    fn groups_have_headings_and_whiskers() {
        let chart = Bars::new("by placement", "us", false)
            .group(
                "same CPU",
                vec![Row::new(Meaning::Thread, "threads", 6.6).range(6.4, 7.0)],
            )
            .group(
                "two CPUs",
                vec![Row::new(Meaning::Thread, "threads", 92.9).range(69.5, 96.8)],
            );
        let text = chart.to_svg();
        assert!(text.contains(">same CPU<") && text.contains(">two CPUs<"));
        assert_eq!(text.matches("<path").count(), 2, "one whisker per row");
        assert!(text.contains(">100<"), "axis covers the range's top: {text}");
        assert!(!text.contains("\n\n"));
    }
}
