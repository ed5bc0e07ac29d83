//! SVG line charts (plotters' SVG backend: no system fonts needed, the text
//! is left to the browser), for the book and for `results/`.

use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, Ranged, ValueFormatter};
use plotters::element::DashedPathElement;
use plotters::prelude::*;

/// One line on a chart.
#[derive(Clone, Debug)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// A dashed horizontal line across the plot, named in the legend: "equal"
/// at a ratio of 1, the edges of a tolerance band. Guides with the same label
/// share one legend entry.
#[derive(Clone, Debug)]
pub struct Guide {
    pub y: f64,
    pub label: String,
}

/// A line chart: one or more series against shared axes.
///
/// The SVG scales with the page (a `viewBox`, `width="100%"`), sits on a
/// light card with rounded corners so that it reads the same in light and
/// dark book themes, and has its legend below the plot, where it cannot
/// cover a point.
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

/// The plot's size in SVG units; the legend adds rows below it.
const WIDTH: u32 = 760;
const PLOT_HEIGHT: u32 = 440;

impl Chart {
    pub fn new(title: &str, x_label: &str, y_label: &str) -> Chart {
        Chart {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            ..Chart::default()
        }
    }

    pub fn series(mut self, label: &str, points: Vec<(f64, f64)>) -> Chart {
        self.series.push(Series { label: label.into(), points });
        self
    }

    pub fn guide(mut self, y: f64, label: &str) -> Chart {
        self.guides.push(Guide { y, label: label.into() });
        self
    }

    /// Render to an SVG document.
    pub fn to_svg(&self) -> Result<String, String> {
        let points = self.series.iter().flat_map(|s| s.points.iter());
        let (mut x0, mut x1, mut y0, mut y1) =
            (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for &(x, y) in points {
            (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
        }
        if x0 > x1 {
            return Err(format!("chart '{}' has no points", self.title));
        }
        for g in &self.guides {
            (y0, y1) = (y0.min(g.y), y1.max(g.y));
        }
        if (self.log_x && x0 <= 0.0) || (self.log_y && y0 <= 0.0) {
            return Err(format!(
                "chart '{}' has a point <= 0 on a log axis",
                self.title
            ));
        }
        let pad = |lo: f64, hi: f64, log: bool, fit: bool| {
            if log {
                (lo / 1.2, hi * 1.2)
            } else {
                let span = if hi > lo { hi - lo } else { hi.abs().max(1.0) };
                let floor = if fit || lo < 0.0 { lo - span * 0.08 } else { 0.0 };
                (floor.min(lo - span * 0.05), hi + span * 0.08)
            }
        };
        let (x0, x1) = pad(x0, x1, self.log_x, false);
        let (y0, y1) = pad(y0, y1, self.log_y, self.fit_y);
        let mut plot = String::new();
        {
            let root = SVGBackend::with_string(&mut plot, (WIDTH, PLOT_HEIGHT))
                .into_drawing_area();
            match (self.log_x, self.log_y) {
                (false, false) => self.draw(&root, x0..x1, y0..y1),
                (true, false) => self.draw(&root, (x0..x1).log_scale(), y0..y1),
                (false, true) => self.draw(&root, x0..x1, (y0..y1).log_scale()),
                (true, true) => {
                    self.draw(&root, (x0..x1).log_scale(), (y0..y1).log_scale())
                }
            }
            .map_err(|e| format!("cannot draw chart '{}': {e}", self.title))?;
        }
        // Plotters' drawing without its fixed-size <svg> wrapper, on a card
        // sized for the legend too.
        let body = plot
            .split_once('\n')
            .map(|(_, rest)| rest)
            .and_then(|rest| rest.trim_end().strip_suffix("</svg>"))
            .ok_or_else(|| format!("chart '{}': unexpected SVG", self.title))?;
        let (legend, legend_height) = self.legend();
        let height = f64::from(PLOT_HEIGHT) + legend_height;
        Ok(format!(
            "{}{body}{legend}</svg>\n",
            open(f64::from(WIDTH), height, &self.title)
        ))
    }

    /// The legend below the plot: one entry per series, then one per guide
    /// label, in as many columns as the longest label allows.
    fn legend(&self) -> (String, f64) {
        let mut entries: Vec<(&str, Option<RGBColor>)> = self
            .series
            .iter()
            .enumerate()
            .map(|(i, s)| (s.label.as_str(), Some(PALETTE[i % PALETTE.len()])))
            .collect();
        for g in &self.guides {
            if !entries.iter().any(|(label, _)| *label == g.label) {
                entries.push((g.label.as_str(), None));
            }
        }
        if entries.is_empty() {
            return (String::new(), 0.0);
        }
        const ROW: f64 = 22.0;
        const MARGIN: f64 = 20.0;
        let longest = entries.iter().map(|e| e.0.chars().count()).max().unwrap_or(0);
        let column = 52.0 + 7.4 * longest as f64;
        let usable = f64::from(WIDTH) - 2.0 * MARGIN;
        let columns = ((usable / column).floor() as usize).clamp(1, entries.len());
        let rows = entries.len().div_ceil(columns);
        // Centred under the plot.
        let left = MARGIN + (usable - column * columns as f64).max(0.0) / 2.0;
        let top = f64::from(PLOT_HEIGHT);
        let mut out = String::new();
        for (i, (label, colour)) in entries.iter().enumerate() {
            let x = left + column * (i % columns) as f64;
            let y = top + ROW * (i / columns) as f64 + ROW / 2.0;
            out += &match colour {
                Some(c) => {
                    let rgb = format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2);
                    format!(
                        "<line x1=\"{x}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" \
                         stroke=\"{rgb}\" stroke-width=\"2\"/>\
                         <circle cx=\"{}\" cy=\"{y}\" r=\"3\" fill=\"{rgb}\"/>\n",
                        x + 28.0,
                        x + 14.0
                    )
                }
                None => format!(
                    "<line x1=\"{x}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" \
                     stroke=\"{GUIDE_COLOUR}\" stroke-dasharray=\"5 4\"/>\n",
                    x + 28.0
                ),
            };
            out += &format!(
                "<text x=\"{}\" y=\"{}\" font-size=\"13\" fill=\"#222\">{}</text>\n",
                x + 36.0,
                y + 4.5,
                escape(label)
            );
        }
        (out, ROW * rows as f64 + 12.0)
    }

    fn draw<X, Y>(
        &self,
        root: &DrawingArea<SVGBackend<'_>, Shift>,
        x: X,
        y: Y,
    ) -> Result<(), Box<dyn std::error::Error + '_>>
    where
        X: AsRangedCoord<Value = f64>,
        Y: AsRangedCoord<Value = f64>,
        X::CoordDescType: Ranged + ValueFormatter<f64>,
        Y::CoordDescType: Ranged + ValueFormatter<f64>,
    {
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, ("sans-serif", 22))
            .margin(14)
            .margin_right(30)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d(x, y)?;
        chart
            .configure_mesh()
            .x_desc(&self.x_label)
            .y_desc(&self.y_label)
            .label_style(("sans-serif", 16))
            .axis_desc_style(("sans-serif", 17))
            .x_label_formatter(&|v| crate::table::axis(*v))
            .y_label_formatter(&|v| crate::table::axis(*v))
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        let x_range = chart.x_range();
        for g in &self.guides {
            let line = [(x_range.start, g.y), (x_range.end, g.y)];
            chart.draw_series(std::iter::once(DashedPathElement::new(
                line,
                5,
                4,
                GUIDE.stroke_width(1),
            )))?;
        }
        for (i, s) in self.series.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()].to_rgba();
            chart.draw_series(LineSeries::new(
                s.points.iter().copied(),
                color.stroke_width(2),
            ))?;
            chart.draw_series(
                s.points.iter().map(|&p| Circle::new(p, 3, color.filled())),
            )?;
        }
        root.present()?;
        Ok(())
    }
}

const GUIDE: RGBColor = RGBColor(110, 110, 110);
const GUIDE_COLOUR: &str = "#6e6e6e";

/// The opening of a chart's SVG: it scales to the width of the page (the
/// `viewBox` keeps its proportions) and draws its own light card with
/// rounded corners, so that the dark text reads on every book theme.
pub(crate) fn open(width: f64, height: f64, title: &str) -> String {
    let title = escape(title);
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {width} {height}\" \
         width=\"100%\" role=\"img\" aria-label=\"{title}\" \
         font-family=\"sans-serif\" \
         style=\"max-width:{width}px;height:auto;display:block;margin:1em auto\">\n\
         <title>{title}</title>\n\
         <rect x=\"0.5\" y=\"0.5\" width=\"{}\" height=\"{}\" rx=\"10\" \
         fill=\"#ffffff\" stroke=\"#c8c8c8\"/>\n",
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

/// Tableau's ten colours: distinct on white and for most colour blindness.
pub(crate) const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_linear_and_log_charts() {
        let chart = Chart::new("t", "workers", "seconds")
            .series("fork", vec![(1.0, 0.5), (10.0, 2.0)])
            .series("thread", vec![(1.0, 0.4), (10.0, 1.5)]);
        let svg = chart.to_svg().unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..40]);
        assert!(
            svg.contains("fork")
                && svg.contains("thread")
                && svg.contains("workers")
        );
        let log = Chart { log_x: true, log_y: true, ..chart };
        assert!(log.to_svg().unwrap().contains("<polyline"));
    }

    #[test]
    fn scales_with_the_page_on_a_card() {
        let svg = Chart::new("t", "x", "y")
            .series("a", vec![(1.0, 1.0), (2.0, 3.0)])
            .to_svg()
            .unwrap();
        let open = svg.lines().next().unwrap();
        assert!(
            open.contains("width=\"100%\"") && open.contains("viewBox=\"0 0 760 ")
        );
        assert!(!open.contains("width=\"760\""), "no fixed width: {open}");
        assert!(svg.contains("rx=\"10\" fill=\"#ffffff\""), "a light card");
        assert_eq!(svg.matches("<svg").count(), 1, "one document");
        assert!(
            !svg.contains("\n\n"),
            "a blank line would end Markdown's HTML block"
        );
    }

    #[test]
    fn legend_sits_below_the_plot() {
        let svg = Chart::new("t", "x", "y")
            .series("first & only", vec![(1.0, 1.0), (2.0, 3.0)])
            .guide(2.0, "equal")
            .to_svg()
            .unwrap();
        // The legend's texts are below the plot's 440 units.
        let y_of = |label: &str| {
            let at = svg.find(&format!(">{label}</text>")).unwrap();
            let tag = &svg[svg[..at].rfind("<text").unwrap()..at];
            let y = tag.split("y=\"").nth(1).unwrap().split('"').next().unwrap();
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
        // A log x axis, so that the only zero could be on the y axis.
        let ratio = |fit_y| Chart {
            fit_y,
            log_x: true,
            ..Chart::new("r", "x", "ratio")
                .series("r", vec![(10.0, 0.9), (100.0, 1.1)])
        };
        // Axis numbers drawn by plotters, as text.
        let ticks = |svg: &str| -> Vec<f64> {
            svg.split("</text>")
                .filter_map(|t| t.rsplit('>').next())
                .filter_map(|t| t.trim().parse::<f64>().ok())
                .collect()
        };
        let fitted = ticks(&ratio(true).to_svg().unwrap());
        assert!(!fitted.contains(&0.0), "no zero on a fitted axis: {fitted:?}");
        assert!(fitted.iter().any(|&t| t > 0.8 && t < 1.2));
        let from_zero = ticks(&ratio(false).to_svg().unwrap());
        assert!(from_zero.contains(&0.0), "{from_zero:?}");
    }

    #[test]
    fn refuses_what_it_cannot_draw() {
        assert!(Chart::new("e", "x", "y").to_svg().is_err());
        let bad = Chart {
            log_x: true,
            ..Chart::new("b", "x", "y").series("s", vec![(0.0, 1.0)])
        };
        assert!(bad.to_svg().unwrap_err().contains("log axis"));
    }
}
