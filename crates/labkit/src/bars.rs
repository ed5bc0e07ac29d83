//! Horizontal bar charts as SVG, for tables whose rows are methods or
//! programs rather than points on an axis (the line charts of [`crate::chart`]
//! need a numeric x). Plain SVG text, no fonts needed, like the line charts.

/// An SVG chart with one labelled bar per `(label, value)`, top to bottom.
/// With `log`, the value axis is logarithmic (for values spanning decades).
/// Values that are not positive and finite are drawn as no bar.
pub fn svg(title: &str, unit: &str, rows: &[(String, f64)], log: bool) -> String {
    const W: f64 = 760.0;
    const LEFT: f64 = 330.0;
    const RIGHT: f64 = 80.0;
    const TOP: f64 = 44.0;
    const ROW: f64 = 26.0;
    const BOTTOM: f64 = 46.0;
    let h = TOP + ROW * rows.len() as f64 + BOTTOM;
    let good: Vec<f64> =
        rows.iter().map(|r| r.1).filter(|v| v.is_finite() && *v > 0.0).collect();
    let max = good.iter().copied().fold(f64::MIN, f64::max);
    let min = good.iter().copied().fold(f64::MAX, f64::min);
    // The axis: decades on a log scale, 0..max (rounded up) otherwise.
    let (lo, hi) = if good.is_empty() {
        (0.0, 1.0)
    } else if log {
        (min.log10().floor(), max.log10().ceil().max(min.log10().floor() + 1.0))
    } else {
        (0.0, nice_ceiling(max))
    };
    let span = W - LEFT - RIGHT;
    let x = |v: f64| {
        let t = if log { v.log10() } else { v };
        LEFT + span * ((t - lo) / (hi - lo)).clamp(0.0, 1.0)
    };
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{h}\" \
         viewBox=\"0 0 {W} {h}\" font-family=\"sans-serif\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"26\" font-size=\"18\" text-anchor=\"middle\">{}</text>\n",
        W / 2.0,
        escape(title)
    );
    // Grid lines and their numbers.
    let ticks: Vec<f64> = if log {
        (lo as i32..=hi as i32).map(|e| 10f64.powi(e)).collect()
    } else {
        (0..=4).map(|i| hi * f64::from(i) / 4.0).collect()
    };
    let bottom = TOP + ROW * rows.len() as f64;
    for t in ticks {
        let tx = x(t);
        out += &format!(
            "<line x1=\"{tx:.1}\" y1=\"{TOP}\" x2=\"{tx:.1}\" y2=\"{bottom}\" \
             stroke=\"#ddd\"/>\n<text x=\"{tx:.1}\" y=\"{:.1}\" font-size=\"12\" \
             text-anchor=\"middle\">{}</text>\n",
            bottom + 16.0,
            if t >= 1.0 { format!("{t:.0}") } else { format!("{t}") }
        );
    }
    out += &format!(
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"13\" text-anchor=\"middle\">{}</text>\n",
        LEFT + span / 2.0,
        bottom + 36.0,
        escape(unit)
    );
    for (i, (label, value)) in rows.iter().enumerate() {
        let y = TOP + ROW * i as f64;
        out += &format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"end\">{}</text>\n",
            LEFT - 8.0,
            y + ROW * 0.65,
            escape(label)
        );
        if value.is_finite() && *value > 0.0 {
            let end = x(*value);
            out += &format!(
                "<rect x=\"{LEFT}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" \
                 fill=\"#4e79a7\"/>\n<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\">{}</text>\n",
                y + 4.0,
                (end - LEFT).max(1.0),
                ROW - 8.0,
                end + 4.0,
                y + ROW * 0.65,
                number(*value)
            );
        }
    }
    out += &format!(
        "<line x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{bottom}\" stroke=\"black\"/>\n</svg>\n"
    );
    out
}

/// 1, 2 or 5 times a power of ten, at or above `v`.
fn nice_ceiling(v: f64) -> f64 {
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * p).find(|c| *c >= v).unwrap_or(10.0 * p)
}

/// Three significant digits, no exponent for the sizes charts show.
fn number(v: f64) -> String {
    if v >= 100.0 || v == 0.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_bar_per_row_with_escaped_labels() {
        let rows = vec![
            ("fork & wait".to_string(), 400.0),
            ("Vec<u8>".to_string(), 0.5),
            ("failed".to_string(), f64::NAN),
        ];
        let text = svg("t", "us", &rows, true);
        assert!(text.starts_with("<svg"));
        assert!(text.contains("fork &amp; wait") && text.contains("Vec&lt;u8&gt;"));
        assert_eq!(text.matches("fill=\"#4e79a7\"").count(), 2, "NaN draws no bar");
        // Decades from 0.1 to 1000 on the log axis.
        assert!(text.contains(">0.1<") && text.contains(">1000<"));
        let linear = svg("t", "us", &rows[..1], false);
        assert!(linear.contains(">500<"), "axis rounded up to 500");
    }
}
