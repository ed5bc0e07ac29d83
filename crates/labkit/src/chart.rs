//! SVG line charts (plotters' SVG backend: no system fonts needed, the text
//! is left to the browser), for the book and for `results/`.

use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, Ranged, ValueFormatter};
use plotters::prelude::*;

/// One line on a chart.
#[derive(Clone, Debug)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// A line chart: one or more series against shared axes.
#[derive(Clone, Debug, Default)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_x: bool,
    pub log_y: bool,
    pub series: Vec<Series>,
}

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
        if (self.log_x && x0 <= 0.0) || (self.log_y && y0 <= 0.0) {
            return Err(format!(
                "chart '{}' has a point <= 0 on a log axis",
                self.title
            ));
        }
        let pad = |lo: f64, hi: f64, log: bool| {
            if log {
                (lo / 1.2, hi * 1.2)
            } else {
                let span = if hi > lo { hi - lo } else { hi.abs().max(1.0) };
                (
                    (lo - span * 0.05).min(if lo >= 0.0 { 0.0 } else { lo }),
                    hi + span * 0.08,
                )
            }
        };
        let (x0, x1) = pad(x0, x1, self.log_x);
        let (y0, y1) = pad(y0, y1, self.log_y);
        let mut svg = String::new();
        {
            let root =
                SVGBackend::with_string(&mut svg, (760, 440)).into_drawing_area();
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
        Ok(svg)
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
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, ("sans-serif", 20))
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(64)
            .build_cartesian_2d(x, y)?;
        chart
            .configure_mesh()
            .x_desc(&self.x_label)
            .y_desc(&self.y_label)
            .x_label_formatter(&|v| number(*v))
            .y_label_formatter(&|v| number(*v))
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        for (i, s) in self.series.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()].to_rgba();
            chart
                .draw_series(LineSeries::new(
                    s.points.iter().copied(),
                    color.stroke_width(2),
                ))?
                .label(&s.label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color)
                });
            chart.draw_series(
                s.points.iter().map(|&p| Circle::new(p, 3, color.filled())),
            )?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
        Ok(())
    }
}

/// Tableau's ten colours: distinct on white and for most colour blindness.
const PALETTE: [RGBColor; 10] = [
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

/// Axis numbers without noise: `500`, `2.5`, `0.125`, `1e-5`.
fn number(v: f64) -> String {
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
    fn axis_numbers_are_short() {
        assert_eq!(number(500.0), "500");
        assert_eq!(number(2.5), "2.5");
        assert_eq!(number(0.125), "0.125");
        assert_eq!(number(0.1 + 0.2), "0.3");
        assert_eq!(number(0.0), "0");
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
