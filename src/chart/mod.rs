//! The lab's charts, written as plain SVG by this module alone (no drawing
//! library, no fonts: the text is left to the browser), for the book and
//! for every run folder:
//!
//! - [`Chart`]: lines of points on numeric axes, linear or log, each point
//!   a median with its spread (the rounds' min to max) drawn as a band;
//! - [`bars::Bars`]: labelled rows (methods, programs, placements), each a
//!   bar or a dot with a whisker.
//!
//! Both scale with the page (a `viewBox`, `width="100%"`), sit on a card
//! with rounded corners, and name their colours by class as well as by
//! attribute (`lab-card`, `lab-ink`, `lab-grid`, `lab-guide`), so that the
//! book's dark themes restyle them (book/lab.css) while a chart opened on
//! its own stays readable. A colour means one thing in every chart: a
//! measured series or row is declared with its [`Meaning`] (a process, a
//! thread, Redis ...), which gives its colour and marker and its place in
//! the legend, and a [`Kind::form`] that tells apart two forms of one
//! meaning (dashed: a C twin, `vfork` beside `fork`); whatever is computed
//! rather than measured (a guide such as "equal", a limit such as the copy
//! limit) is a dashed grey line in every chart.

pub mod bars;
pub mod meaning;

use meaning::Shape;
pub use meaning::{Kind, Meaning};

use std::borrow::Borrow;

use crate::stats::Summary;

/// One line on a chart: points `(x, median)`, and for each point the
/// spread `(x, low, high)` drawn as a band behind the line (empty: none).
/// A `limit` is computed, not measured: dashed grey, no markers, no band.
/// The articles' figures ([`Meaning::Article`]) are marked points with no
/// line.
#[derive(Clone, Debug, Default)]
pub struct Series {
    pub kind: Kind,
    pub label: String,
    pub points: Vec<(f64, f64)>,
    pub band: Vec<(f64, f64, f64)>,
    pub limit: bool,
}

/// A dashed horizontal line across the plot, named in the legend: "equal"
/// at a ratio of 1, the edges of a tolerance band, a cap. Guides with the
/// same label share one legend entry.
#[derive(Clone, Debug)]
pub struct Guide {
    pub y: f64,
    pub label: String,
}

/// A line chart: one or more series against shared axes, the legend below
/// the plot, where it cannot cover a point.
#[derive(Clone, Debug, Default)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_x: bool,
    pub log_y: bool,
    /// Fit a linear y axis to the data instead of starting it at zero: for
    /// ratios, whose spread around 1 is the point.
    pub fit_y: bool,
    pub guides: Vec<Guide>,
    pub series: Vec<Series>,
}

/// The chart's width and the plot's height in SVG units; the legend adds
/// rows below it.
const WIDTH: f64 = 760.0;
const PLOT_HEIGHT: f64 = 440.0;
/// The plot area's edges inside the card.
const LEFT: f64 = 86.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 66.0;

impl Chart {
    pub fn new(title: &str, x_label: &str, y_label: &str) -> Chart {
        Chart {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            ..Chart::default()
        }
    }

    /// A measured series of medians, with no spread to draw (or the
    /// articles' figures, as marked points).
    pub fn series(
        mut self,
        kind: impl Into<Kind>,
        label: &str,
        points: Vec<(f64, f64)>,
    ) -> Chart {
        self.series.push(Series {
            kind: kind.into(),
            label: label.into(),
            points,
            ..Series::default()
        });
        self
    }

    /// A measured series of `(x, median, low, high)`: the line through the
    /// medians, over a band from each point's low to its high.
    pub fn spread(
        mut self,
        kind: impl Into<Kind>,
        label: &str,
        points: Vec<(f64, f64, f64, f64)>,
    ) -> Chart {
        self.series.push(Series {
            kind: kind.into(),
            label: label.into(),
            points: points.iter().map(|&(x, y, _, _)| (x, y)).collect(),
            band: points.iter().map(|&(x, _, lo, hi)| (x, lo, hi)).collect(),
            limit: false,
        });
        self
    }

    /// A measured series of medians with their spread, from each point's
    /// summary of rounds: the band runs from the rounds' min to their max.
    pub fn summaries<S: Borrow<Summary>>(
        self,
        kind: impl Into<Kind>,
        label: &str,
        points: impl IntoIterator<Item = (f64, S)>,
    ) -> Chart {
        let points = points.into_iter().map(|(x, s)| {
            let s = s.borrow();
            (x, s.median, s.min, s.max)
        });
        self.spread(kind, label, points.collect())
    }

    /// A computed line (a limit, a prediction): dashed grey, like a guide;
    /// a second limit on one chart has a dash of its own.
    pub fn limit(mut self, label: &str, points: Vec<(f64, f64)>) -> Chart {
        self.series.push(Series {
            label: label.into(),
            points,
            limit: true,
            ..Series::default()
        });
        self
    }

    pub fn guide(mut self, y: f64, label: &str) -> Chart {
        self.guides.push(Guide { y, label: label.into() });
        self
    }

    /// Render to an SVG document.
    pub fn to_svg(&self) -> Result<String, String> {
        let xs = self.series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
        let ys = self.series.iter().flat_map(|s| {
            let band = s.band.iter().flat_map(|b| [b.1, b.2]);
            s.points.iter().map(|p| p.1).chain(band)
        });
        let ys: Vec<f64> = ys.chain(self.guides.iter().map(|g| g.y)).collect();
        let xs: Vec<f64> = xs.collect();
        if xs.is_empty() {
            return Err(format!("chart '{}' has no points", self.title));
        }
        if xs.iter().chain(&ys).any(|v| !v.is_finite()) {
            return Err(format!(
                "chart '{}' has a point that is not a number",
                self.title
            ));
        }
        if (self.log_x && xs.iter().any(|&x| x <= 0.0))
            || (self.log_y && ys.iter().any(|&y| y <= 0.0))
        {
            return Err(format!(
                "chart '{}' has a point <= 0 on a log axis",
                self.title
            ));
        }
        let span = |v: &[f64]| {
            v.iter()
                .fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)))
        };
        let (x0, x1) = span(&xs);
        let (y0, y1) = span(&ys);
        let plot_w = WIDTH - LEFT - RIGHT;
        let plot_h = PLOT_HEIGHT - TOP - BOTTOM;
        let x_axis = Axis::new(x0, x1, self.log_x, false, plot_w, ACROSS);
        let y_axis = Axis::new(y0, y1, self.log_y, !self.fit_y, plot_h, UP);
        let px = |x: f64| LEFT + plot_w * x_axis.frac(x);
        let py = |y: f64| TOP + plot_h * (1.0 - y_axis.frac(y));

        let (legend, legend_height) = self.legend();
        let height = PLOT_HEIGHT + legend_height;
        let mut out = open(WIDTH, height, &self.title);
        out += &text(WIDTH / 2.0, 30.0, 20.0, "middle", &self.title);
        // Grid, ticks and their numbers.
        let (bottom, right) = (TOP + plot_h, LEFT + plot_w);
        for t in x_axis.ticks() {
            let x = px(t);
            out += &format!(
                "<line class=\"lab-grid\" x1=\"{x:.1}\" y1=\"{TOP}\" x2=\"{x:.1}\" \
                 y2=\"{bottom}\" stroke=\"{GRID}\"/>\n"
            );
            out += &text(x, bottom + 20.0, 14.0, "middle", &tick_label(t));
        }
        for t in y_axis.ticks() {
            let y = py(t);
            out += &format!(
                "<line class=\"lab-grid\" x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{right}\" \
                 y2=\"{y:.1}\" stroke=\"{GRID}\"/>\n"
            );
            out += &text(LEFT - 8.0, y + 5.0, 14.0, "end", &tick_label(t));
        }
        out += &format!(
            "<path class=\"lab-ink\" d=\"M{LEFT} {TOP}V{bottom}H{right}\" \
             fill=\"none\" stroke=\"{INK}\"/>\n"
        );
        out +=
            &text(LEFT + plot_w / 2.0, bottom + 48.0, 15.0, "middle", &self.x_label);
        out += &format!(
            "<text class=\"lab-ink\" transform=\"translate(22 {:.1}) rotate(-90)\" \
             font-size=\"15\" text-anchor=\"middle\" fill=\"{INK}\">{}</text>\n",
            TOP + plot_h / 2.0,
            escape(&self.y_label)
        );
        for g in &self.guides {
            let y = py(g.y);
            out += &format!(
                "<line class=\"lab-guide\" x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{right}\" \
                 y2=\"{y:.1}\" stroke=\"{GUIDE}\" stroke-dasharray=\"{GUIDE_DASH}\"/>\n"
            );
        }
        // Bands first, then the lines, then the markers, so that no band
        // hides a line and every marker stays visible.
        for s in self.measured() {
            if s.band.is_empty() || s.kind.meaning == Meaning::Article {
                continue;
            }
            let upper = s.band.iter().map(|&(x, _, hi)| (px(x), py(hi)));
            let lower = s.band.iter().rev().map(|&(x, lo, _)| (px(x), py(lo)));
            out += &format!(
                "<polygon class=\"{}\" points=\"{}\" fill=\"{}\" fill-opacity=\"0.18\" \
                 stroke=\"none\"/>\n",
                s.kind.class(),
                coords(upper.chain(lower)),
                s.kind.colour()
            );
        }
        for (k, s) in self.series.iter().filter(|s| s.limit).enumerate() {
            out += &format!(
                "<polyline class=\"lab-guide\" points=\"{}\" fill=\"none\" \
                 stroke=\"{GUIDE}\" stroke-width=\"2\" stroke-dasharray=\"{}\"/>\n",
                coords(s.points.iter().map(|&(x, y)| (px(x), py(y)))),
                LIMIT_DASHES[k % LIMIT_DASHES.len()]
            );
        }
        for s in self.measured() {
            if s.kind.meaning == Meaning::Article {
                continue;
            }
            out += &format!(
                "<polyline class=\"{}\" points=\"{}\" fill=\"none\" stroke=\"{}\" \
                 stroke-width=\"2\"{}/>\n",
                s.kind.class(),
                coords(s.points.iter().map(|&(x, y)| (px(x), py(y)))),
                s.kind.colour(),
                dash(s.kind)
            );
        }
        for s in self.measured() {
            for &(x, y) in &s.points {
                out += &marker(s.kind, px(x), py(y));
            }
        }
        out += &legend;
        out += "</svg>\n";
        Ok(out)
    }

    /// The measured series, in legend order: by meaning, then form, then as
    /// they were added.
    fn measured(&self) -> impl Iterator<Item = &Series> {
        let mut measured: Vec<&Series> =
            self.series.iter().filter(|s| !s.limit).collect();
        measured.sort_by_key(|s| s.kind);
        measured.into_iter()
    }

    /// The legend below the plot: one entry per measured series, in the
    /// book's order of meanings, then one per limit and per guide label, in
    /// as many columns as the longest label allows.
    fn legend(&self) -> (String, f64) {
        enum Key {
            Measured(Kind),
            Computed(&'static str),
        }
        let mut entries: Vec<(&str, Key)> = self
            .measured()
            .map(|s| (s.label.as_str(), Key::Measured(s.kind)))
            .collect();
        let limits = self.series.iter().filter(|s| s.limit).enumerate();
        let limits = limits
            .map(|(k, s)| (s.label.as_str(), LIMIT_DASHES[k % LIMIT_DASHES.len()]));
        let guides = self.guides.iter().map(|g| (g.label.as_str(), GUIDE_DASH));
        for (label, dash) in limits.chain(guides) {
            if !entries.iter().any(|(l, _)| *l == label) {
                entries.push((label, Key::Computed(dash)));
            }
        }
        if entries.is_empty() {
            return (String::new(), 0.0);
        }
        const ROW: f64 = 22.0;
        const MARGIN: f64 = 20.0;
        let longest = entries.iter().map(|e| e.0.chars().count()).max().unwrap_or(0);
        let column = 52.0 + 7.4 * longest as f64;
        let usable = WIDTH - 2.0 * MARGIN;
        let columns = ((usable / column).floor() as usize).clamp(1, entries.len());
        let rows = entries.len().div_ceil(columns);
        // Centred under the plot.
        let left = MARGIN + (usable - column * columns as f64).max(0.0) / 2.0;
        let mut out = String::new();
        for (n, (label, key)) in entries.iter().enumerate() {
            let x = left + column * (n % columns) as f64;
            let y = PLOT_HEIGHT + ROW * (n / columns) as f64 + ROW / 2.0;
            out += &match key {
                Key::Measured(kind) => swatch(*kind, x, y),
                Key::Computed(dash) => computed_swatch(dash, x, y),
            };
            out += &text(x + 36.0, y + 4.5, 13.0, "start", label);
        }
        (out, ROW * rows as f64 + 12.0)
    }
}

/// One axis: its range (on a log axis, in decades), and how far apart its
/// tick labels must be.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
    /// The axis's length in SVG units, and the room one tick label takes
    /// along it: no two labels may overlap.
    length: f64,
    room: f64,
}

/// The room a tick label takes along a horizontal axis (its width, at 14
/// units of type) and along a vertical one (its line).
pub(crate) const ACROSS: (f64, f64) = (7.5, 10.0);
pub(crate) const UP: (f64, f64) = (0.0, 22.0);

/// Steps of 1, 2, 2.5 and 5 times a power of ten.
const STEPS: [f64; 5] = [1.0, 2.0, 2.5, 5.0, 10.0];

impl Axis {
    /// An axis that covers `lo..=hi` and ends on ticks: decades (or 1, 2
    /// and 5 within them) on a log axis; on a linear one, round steps from
    /// zero when `from_zero` (and the data are not negative), else from
    /// just below the data. A tick label takes `per_char` units along the
    /// axis for each character, plus `fixed` (a horizontal axis's labels
    /// are as wide as they are long; a vertical axis's are one line high,
    /// whatever their length).
    pub(crate) fn new(
        lo: f64,
        hi: f64,
        log: bool,
        from_zero: bool,
        length: f64,
        (per_char, fixed): (f64, f64),
    ) -> Axis {
        let mut axis = Axis { lo, hi, log, length, room: 0.0 };
        if log {
            let (mut a, mut b) = (round_down(lo).log10(), round_up(hi).log10());
            if b - a < 1e-9 {
                (a, b) = (round_down(lo / 1.5).log10(), round_up(hi * 1.5).log10());
            }
            (axis.lo, axis.hi) = (a, b);
        } else {
            let (mut lo, mut hi) = (lo, hi);
            if from_zero {
                (lo, hi) = (lo.min(0.0), hi.max(0.0));
            }
            if hi - lo < 1e-12 {
                let pad = hi.abs().max(1.0) * 0.1;
                (lo, hi) = (lo - pad, hi + pad);
            }
            let step = linear_step(lo, hi, 5);
            axis.lo = (lo / step + 1e-9).floor() * step;
            axis.hi = (hi / step - 1e-9).ceil() * step;
            if !from_zero && axis.lo == lo && axis.lo != 0.0 {
                axis.lo -= step; // no point on the plot's very edge
            }
        }
        let longest =
            axis.all_ticks().iter().map(|&t| tick_label(t).len()).max().unwrap_or(1);
        axis.room = per_char * longest as f64 + fixed;
        axis
    }

    /// Where `v` lies along the axis, from 0 (its start) to 1 (its end).
    pub(crate) fn frac(&self, v: f64) -> f64 {
        let t = if self.log { v.log10() } else { v };
        ((t - self.lo) / (self.hi - self.lo)).clamp(0.0, 1.0)
    }

    /// Every candidate tick, before any is dropped for room.
    fn all_ticks(&self) -> Vec<f64> {
        if self.log {
            let decades = self.hi - self.lo;
            let mults: &[f64] =
                if decades <= 2.5 { &[1.0, 2.0, 5.0] } else { &[1.0] };
            let mut ticks = Vec::new();
            for e in (self.lo.floor() as i32)..=(self.hi.ceil() as i32) {
                for m in mults {
                    let v = m * 10f64.powi(e);
                    let t = v.log10();
                    if t >= self.lo - 1e-9 && t <= self.hi + 1e-9 {
                        ticks.push(v);
                    }
                }
            }
            ticks
        } else {
            let step = linear_step(self.lo, self.hi, 5);
            let n = ((self.hi - self.lo) / step).round() as i64;
            (0..=n).map(|i| clean(self.lo + step * i as f64)).collect()
        }
    }

    /// The ticks to draw: every candidate, or every second, third ...,
    /// so that no two labels overlap along the axis.
    pub(crate) fn ticks(&self) -> Vec<f64> {
        let all = self.all_ticks();
        let room = |every: usize| {
            all.iter()
                .step_by(every)
                .map(|&t| self.frac(t) * self.length)
                .collect::<Vec<_>>()
                .windows(2)
                .all(|w| w[1] - w[0] >= self.room)
        };
        let every =
            (1..all.len().max(1)).find(|&e| room(e)).unwrap_or(all.len().max(1));
        all.into_iter().step_by(every).collect()
    }
}

/// The smallest round step (1, 2, 2.5 or 5 times a power of ten) that
/// covers `lo..hi` in at most `most` steps.
fn linear_step(lo: f64, hi: f64, most: usize) -> f64 {
    let p = 10f64.powf(((hi - lo) / most as f64).log10().floor());
    STEPS
        .iter()
        .map(|m| m * p)
        .find(|step| {
            ((hi / step - 1e-9).ceil() - (lo / step + 1e-9).floor()) as usize <= most
        })
        .unwrap_or(10.0 * p)
}

/// `v` rounded down, and up, to 1, 2 or 5 times a power of ten.
fn round_down(v: f64) -> f64 {
    let p = 10f64.powf(v.log10().floor());
    [5.0, 2.0, 1.0]
        .into_iter()
        .map(|m| m * p)
        .find(|&r| r <= v * (1.0 + 1e-9))
        .unwrap_or(p)
}

fn round_up(v: f64) -> f64 {
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|&r| r >= v * (1.0 - 1e-9))
        .unwrap_or(10.0 * p)
}

/// A tick's value without the float noise of adding steps (0.30000000004).
fn clean(v: f64) -> f64 {
    (v * 1e9).round() / 1e9
}

/// A tick's label: whole numbers as they are up to 9999, then in k or M
/// (64k, 1M), fractions with at most three decimals.
pub(crate) fn tick_label(v: f64) -> String {
    let whole = |x: f64| x.fract() == 0.0;
    if v.abs() >= 1e6 && whole(v / 1e5) {
        return format!("{}M", crate::table::axis(v / 1e6));
    }
    if v.abs() >= 1e4 && whole(v / 100.0) {
        return format!("{}k", crate::table::axis(v / 1e3));
    }
    crate::table::axis(v)
}

const INK: &str = "#222222";
const GRID: &str = "#dddddd";
const GUIDE: &str = "#6e6e6e";
/// The dash of a guide, and of the first, second and third limit.
const GUIDE_DASH: &str = "5 4";
const LIMIT_DASHES: [&str; 3] = ["9 4", "2 3", "9 3 2 3"];

/// A line of text in the chart's ink.
pub(crate) fn text(x: f64, y: f64, size: f64, anchor: &str, body: &str) -> String {
    format!(
        "<text class=\"lab-ink\" x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{size}\" \
         text-anchor=\"{anchor}\" fill=\"{INK}\">{}</text>\n",
        escape(body)
    )
}

/// Points as an SVG `points` list.
fn coords(points: impl Iterator<Item = (f64, f64)>) -> String {
    points.map(|(x, y)| format!("{x:.1},{y:.1}")).collect::<Vec<_>>().join(" ")
}

/// The book's key to the charts (`{{#chart-key}}`): every meaning in
/// legend order with its colour and marker, then what a second and third
/// form, a computed line and a band look like; drawn by the same code as
/// the charts, so that the key cannot disagree with them.
pub fn key_svg() -> String {
    const ROW: f64 = 24.0;
    const TOP: f64 = 48.0;
    let rows: Vec<(Option<Kind>, &str)> = Meaning::ALL
        .iter()
        .map(|m| (Some(Kind::from(*m)), m.name()))
        .chain([
            (
                Some(Meaning::Thread.form(1)),
                "second form: a C twin, vfork, std::thread ...",
            ),
            (
                Some(Meaning::Thread.form(2)),
                "third form: a new program, a pooled thread ...",
            ),
            (None, "computed, not measured: a limit, a guide such as equal"),
        ])
        .collect();
    let height = TOP + ROW * rows.len() as f64 + 16.0;
    let mut out = open(WIDTH, height, "Key to the charts: one colour per meaning");
    out += &text(
        WIDTH / 2.0,
        30.0,
        18.0,
        "middle",
        "Key to the charts: one colour per meaning",
    );
    for (n, (kind, label)) in rows.iter().enumerate() {
        let (x, y) = (24.0, TOP + ROW * n as f64 + ROW / 2.0);
        out += &match kind {
            Some(k) => swatch(*k, x, y),
            None => computed_swatch(LIMIT_DASHES[0], x, y),
        };
        out += &text(x + 40.0, y + 4.5, 14.0, "start", label);
    }
    out += "</svg>\n";
    out
}

/// A legend's or the key's sample of a measured series at `(x, y)`: a
/// short line in its colour and dash with its marker on it (the
/// articles' figures: the marker alone, as they are drawn).
fn swatch(kind: Kind, x: f64, y: f64) -> String {
    let marker = marker(kind, x + 14.0, y);
    if kind.meaning == Meaning::Article {
        return marker;
    }
    format!(
        "<line class=\"{}\" x1=\"{x}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" \
         stroke=\"{}\" stroke-width=\"2\"{}/>\n{marker}",
        kind.class(),
        x + 28.0,
        kind.colour(),
        dash(kind),
    )
}

/// The sample of a computed line (a limit, a guide): dashed grey.
fn computed_swatch(dash: &str, x: f64, y: f64) -> String {
    format!(
        "<line class=\"lab-guide\" x1=\"{x}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" \
         stroke=\"{GUIDE}\" stroke-width=\"2\" stroke-dasharray=\"{dash}\"/>\n",
        x + 28.0
    )
}

/// A series' dash, as an attribute (empty for the plain form).
fn dash(kind: Kind) -> String {
    kind.dash().map(|d| format!(" stroke-dasharray=\"{d}\"")).unwrap_or_default()
}

/// A series' marker at `(x, y)`: its meaning's shape (a circle, a square,
/// a triangle, a diamond, or the articles' cross), filled for the plain
/// form and hollow for the others, so that two series that lie on one
/// another (vfork and a thread, say) are both seen, and a chart printed in
/// grey still tells them apart.
pub(crate) fn marker(kind: Kind, x: f64, y: f64) -> String {
    let (c, class) = (kind.colour(), kind.class());
    let paint = if kind.filled() {
        format!("fill=\"{c}\"")
    } else {
        format!("fill=\"none\" stroke=\"{c}\" stroke-width=\"1.8\"")
    };
    match kind.meaning.shape() {
        Shape::Circle => {
            format!(
                "<circle class=\"{class}\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3.5\" {paint}/>\n"
            )
        }
        Shape::Square => format!(
            "<rect class=\"{class}\" x=\"{:.1}\" y=\"{:.1}\" width=\"7\" height=\"7\" {paint}/>\n",
            x - 3.5,
            y - 3.5
        ),
        Shape::Triangle => format!(
            "<path class=\"{class}\" d=\"M{x:.1} {:.1}L{:.1} {:.1}L{:.1} {:.1}Z\" {paint}/>\n",
            y - 5.0,
            x + 4.5,
            y + 3.5,
            x - 4.5,
            y + 3.5
        ),
        Shape::Diamond => format!(
            "<path class=\"{class}\" d=\"M{x:.1} {:.1}L{:.1} {y:.1}L{x:.1} {:.1}L{:.1} {y:.1}Z\" \
             {paint}/>\n",
            y - 5.0,
            x + 5.0,
            y + 5.0,
            x - 5.0
        ),
        // The articles' figures: a cross in the ink, larger than a series'
        // marker, since it stands alone.
        Shape::Cross => format!(
            "<path class=\"{class}\" d=\"M{:.1} {:.1}L{:.1} {:.1}M{:.1} {:.1}L{:.1} {:.1}\" \
             fill=\"none\" stroke=\"{c}\" stroke-width=\"2.2\"/>\n",
            x - 5.0,
            y - 5.0,
            x + 5.0,
            y + 5.0,
            x - 5.0,
            y + 5.0,
            x + 5.0,
            y - 5.0
        ),
    }
}

/// The opening of a chart's SVG: it scales to the width of the page (the
/// `viewBox` keeps its proportions) and draws its own light card with
/// rounded corners (restyled by the book's dark themes).
pub(crate) fn open(width: f64, height: f64, title: &str) -> String {
    let title = escape(title);
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {width} {height}\" \
         width=\"100%\" role=\"img\" aria-label=\"{title}\" class=\"lab-chart\" \
         font-family=\"sans-serif\" \
         style=\"max-width:{width}px;height:auto;display:block;margin:1em auto\">\n\
         <title>{title}</title>\n\
         <rect class=\"lab-card\" x=\"0.5\" y=\"0.5\" width=\"{}\" height=\"{}\" \
         rx=\"10\" fill=\"#ffffff\" stroke=\"#c8c8c8\"/>\n",
        width - 1.0,
        height - 1.0
    )
}

pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The numbers drawn as tick labels, in order.
    fn ticks(svg: &str) -> Vec<String> {
        svg.split("</text>")
            .filter_map(|t| t.rsplit('>').next())
            .filter(|t| {
                t.chars().next().is_some_and(|c| c.is_ascii_digit() || c == '-')
            })
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn draws_linear_and_log_charts() {
        let chart = Chart::new("t", "workers", "seconds")
            .series(Meaning::Process, "fork", vec![(1.0, 0.5), (10.0, 2.0)])
            .series(Meaning::Thread, "thread", vec![(1.0, 0.4), (10.0, 1.5)]);
        let svg = chart.to_svg().unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..40]);
        assert!(
            svg.contains(">fork<")
                && svg.contains(">thread<")
                && svg.contains(">workers<")
        );
        assert_eq!(svg.matches("<polyline").count(), 2);
        let log = Chart { log_x: true, log_y: true, ..chart };
        let svg = log.to_svg().unwrap();
        assert!(svg.contains("<polyline"));
        let t = ticks(&svg);
        assert!(
            t.contains(&"1".to_string()) && t.contains(&"10".to_string()),
            "{t:?}"
        );
    }

    #[test]
    fn scales_with_the_page_on_a_card() {
        let svg = Chart::new("t", "x", "y")
            .series(Meaning::Thread, "a", vec![(1.0, 1.0), (2.0, 3.0)])
            .to_svg()
            .unwrap();
        let open = svg.lines().next().unwrap();
        assert!(
            open.contains("width=\"100%\"") && open.contains("viewBox=\"0 0 760 ")
        );
        assert!(!open.contains("width=\"760\""), "no fixed width: {open}");
        assert!(
            svg.contains("class=\"lab-card\""),
            "a card the dark themes restyle"
        );
        assert_eq!(svg.matches("<svg").count(), 1, "one document");
        assert!(
            !svg.contains("\n\n"),
            "a blank line would end Markdown's HTML block"
        );
    }

    #[test]
    fn legend_sits_below_the_plot() {
        let svg = Chart::new("t", "x", "y")
            .series(Meaning::Thread, "first & only", vec![(1.0, 1.0), (2.0, 3.0)])
            .guide(2.0, "equal")
            .to_svg()
            .unwrap();
        // The legend's texts are below the plot's 440 units.
        let y_of = |label: &str| {
            let at = svg.find(&format!(">{label}</text>")).unwrap();
            let tag = &svg[svg[..at].rfind("<text").unwrap()..at];
            let y = tag.split(" y=\"").nth(1).unwrap().split('"').next().unwrap();
            y.parse::<f64>().unwrap()
        };
        assert!(y_of("first &amp; only") > 440.0);
        assert!(y_of("equal") > 440.0);
        assert!(
            svg.contains("stroke-dasharray"),
            "the guide's legend entry is dashed"
        );
    }

    #[test]
    fn ratio_axis_fits_the_data() {
        let ratio = |fit_y| Chart {
            fit_y,
            log_x: true,
            ..Chart::new("r", "x", "ratio").series(
                Meaning::Thread,
                "r",
                vec![(10.0, 0.9), (100.0, 1.1)],
            )
        };
        let fitted = ticks(&ratio(true).to_svg().unwrap());
        assert!(
            !fitted.contains(&"0".to_string()),
            "no zero on a fitted axis: {fitted:?}"
        );
        assert!(fitted.contains(&"1".to_string()), "{fitted:?}");
        let from_zero = ticks(&ratio(false).to_svg().unwrap());
        assert!(from_zero.contains(&"0".to_string()), "{from_zero:?}");
    }

    #[test]
    fn a_spread_is_a_band_behind_its_line() {
        let svg = Chart::new("t", "x", "y")
            .spread(
                Meaning::Process,
                "fork",
                vec![(1.0, 2.0, 1.5, 2.5), (2.0, 3.0, 2.0, 4.5)],
            )
            .to_svg()
            .unwrap();
        let band = svg.find("<polygon").expect("a band");
        assert!(band < svg.find("<polyline").unwrap(), "drawn before the line");
        // The axis reaches the band's top, not only the medians'.
        assert!(ticks(&svg).contains(&"5".to_string()), "{:?}", ticks(&svg));
    }

    /// The stroke of every polyline, in the order drawn.
    fn line_colours(svg: &str) -> Vec<String> {
        svg.split("<polyline")
            .skip(1)
            .filter_map(|p| {
                p.split("stroke=\"").nth(1)?.split('"').next().map(String::from)
            })
            .collect()
    }

    #[test]
    fn limits_and_guides_are_grey_and_dashed_and_series_keep_their_colours() {
        let with_limit = Chart::new("t", "x", "y")
            .series(Meaning::Thread, "pipe", vec![(1.0, 1.0), (2.0, 2.0)])
            .limit("copy limit", vec![(1.0, 3.0), (2.0, 3.0)])
            .series(Meaning::NamedPipe, "FIFO", vec![(1.0, 1.5), (2.0, 2.5)])
            .to_svg()
            .unwrap();
        let (thread, fifo) = (Meaning::Thread.colour(), Meaning::NamedPipe.colour());
        assert_eq!(line_colours(&with_limit), [GUIDE, thread, fifo]);
        let without = Chart::new("t", "x", "y")
            .series(Meaning::Thread, "pipe", vec![(1.0, 1.0), (2.0, 2.0)])
            .series(Meaning::NamedPipe, "FIFO", vec![(1.0, 1.5), (2.0, 2.5)])
            .to_svg()
            .unwrap();
        assert_eq!(
            line_colours(&without),
            [thread, fifo],
            "a limit takes no colour"
        );
    }

    #[test]
    fn a_meaning_has_one_colour_whatever_else_is_on_the_chart() {
        // A thread is orange whether or not a process comes first.
        let alone = Chart::new("t", "x", "y")
            .series(Meaning::Thread, "thread", vec![(1.0, 1.0), (2.0, 2.0)])
            .to_svg()
            .unwrap();
        let second = Chart::new("t", "x", "y")
            .series(Meaning::Thread, "threads", vec![(1.0, 1.0), (2.0, 2.0)])
            .series(Meaning::Process, "processes", vec![(1.0, 2.0), (2.0, 3.0)])
            .to_svg()
            .unwrap();
        assert_eq!(line_colours(&alone), [Meaning::Thread.colour()]);
        // Drawn, and listed, in the book's order: the process first.
        assert_eq!(
            line_colours(&second),
            [Meaning::Process.colour(), Meaning::Thread.colour()]
        );
        assert!(
            second.find(">processes<").unwrap() < second.find(">threads<").unwrap()
        );
    }

    #[test]
    fn a_second_form_is_dashed_and_hollow_and_the_articles_are_crosses() {
        let svg = Chart::new("t", "x", "y")
            .series(Meaning::Process, "fork", vec![(1.0, 1.0), (2.0, 2.0)])
            .series(Meaning::Process.form(1), "fork.c", vec![(1.0, 1.2), (2.0, 2.2)])
            .series(Meaning::Article, "article", vec![(1.0, 3.0), (2.0, 4.0)])
            .to_svg()
            .unwrap();
        let lines: Vec<&str> = svg.split("<polyline").skip(1).collect();
        assert_eq!(lines.len(), 2, "the articles' figures have no line");
        assert!(!lines[0].split("/>").next().unwrap().contains("dasharray"));
        assert!(lines[1].split("/>").next().unwrap().contains("stroke-dasharray"));
        assert!(svg.contains("<circle class=\"lab-m-process\""));
        assert!(svg.contains("fill=\"none\" stroke=\"#1f77b4\""), "hollow");
        // Two crosses on the plot and one in the legend, in the ink.
        assert_eq!(svg.matches("class=\"lab-m-article lab-ink\"").count(), 3);
    }

    #[test]
    fn series_have_markers_of_different_shapes() {
        let svg = Chart::new("t", "x", "y")
            .series(Meaning::Process, "fork", vec![(1.0, 1.0)])
            .series(Meaning::Thread, "thread", vec![(1.0, 1.0)])
            .to_svg()
            .unwrap();
        assert!(svg.contains("<circle") && svg.contains("<rect class="), "{svg}");
    }

    #[test]
    fn tick_labels_never_overlap() {
        // Block sizes from 1 B to 1 MiB on a log axis: seven decades whose
        // labels fit; on a short axis every other one is dropped.
        let wide = Axis::new(1.0, 1048576.0, true, false, 644.0, ACROSS);
        assert_eq!(wide.ticks().len(), 7, "{:?}", wide.ticks());
        let narrow = Axis::new(1.0, 1048576.0, true, false, 200.0, ACROSS);
        let t = narrow.ticks();
        assert!(t.len() < 7 && t.len() >= 2, "{t:?}");
        for w in t.windows(2) {
            let gap = (narrow.frac(w[1]) - narrow.frac(w[0])) * 200.0;
            assert!(gap >= narrow.room, "{t:?}");
        }
        assert_eq!(tick_label(65536.0), "65536");
        assert_eq!(tick_label(1_000_000.0), "1M");
        assert_eq!(tick_label(20000.0), "20k");
        assert_eq!(tick_label(0.25), "0.25");
    }

    #[test]
    fn linear_axes_end_on_round_steps() {
        let a = Axis::new(0.0, 377.0, false, true, 400.0, UP);
        assert_eq!((a.lo, a.hi), (0.0, 400.0));
        let r = Axis::new(0.93, 1.08, false, false, 400.0, UP);
        assert!(r.lo < 0.93 && r.lo > 0.8 && r.hi >= 1.08 && r.hi < 1.2, "{r:?}");
    }

    #[test]
    fn refuses_what_it_cannot_draw() {
        assert!(Chart::new("e", "x", "y").to_svg().is_err());
        let bad = Chart {
            log_x: true,
            ..Chart::new("b", "x", "y").series(
                Meaning::Thread,
                "s",
                vec![(0.0, 1.0)],
            )
        };
        assert!(bad.to_svg().unwrap_err().contains("log axis"));
        let nan = Chart::new("n", "x", "y").series(
            Meaning::Thread,
            "s",
            vec![(1.0, f64::NAN)],
        );
        assert!(nan.to_svg().unwrap_err().contains("not a number"));
    }
}
