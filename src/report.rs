//! What every experiment shares: the common flags and the way results are
//! published (tables on stdout, a results directory with JSON, Markdown and
//! SVG).

use std::path::PathBuf;

use clap::Args;
use labkit::chart::Chart;
use labkit::results::{Header, check_writable, write_file, write_json};
use labkit::table::Table;
use labkit::{Error, Result};
use serde::Serialize;

/// Flags every experiment takes.
#[derive(Args, Clone, Debug)]
pub struct Common {
    /// Rounds per setting (the articles ran five)
    #[arg(long, default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub rounds: u32,

    /// Run the articles' complete grid instead of the quick one
    #[arg(long)]
    pub full: bool,

    /// Directory for the results [default: results/<experiment> in the lab's
    /// checkout]
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Print the results JSON on stdout instead of the tables
    #[arg(long)]
    pub json: bool,
}

impl Common {
    /// The results directory, checked to be writable before any work.
    pub fn out_dir(&self, experiment: &str) -> Result<PathBuf> {
        let dir = self.out.clone().unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("results")
                .join(experiment)
        });
        check_writable(&dir)?;
        Ok(dir)
    }
}

/// A finished experiment, ready to be shown and saved.
pub struct Report<T> {
    pub header: Header,
    pub tables: Vec<Table>,
    /// File stem and chart.
    pub charts: Vec<(String, Chart)>,
    pub data: T,
}

#[derive(Serialize)]
struct Document<'a, T> {
    #[serde(flatten)]
    header: &'a Header,
    #[serde(flatten)]
    data: &'a T,
}

impl<T: Serialize> Report<T> {
    /// Print the tables (or the JSON) and write `<out>/<experiment>.json`,
    /// `<out>/tables.md` and one SVG per chart.
    pub fn publish(&self, common: &Common, out: &std::path::Path) -> Result<()> {
        let name = &self.header.experiment;
        let doc = Document { header: &self.header, data: &self.data };
        write_json(&out.join(format!("{name}.json")), &doc)?;
        let mut md = format!(
            "Measured with `{}` on {} ({}), commit {}.\n",
            self.header.command,
            self.header.machine.summary(),
            self.header.machine.date,
            self.header.machine.commit
        );
        for table in &self.tables {
            md.push('\n');
            md.push_str(&table.render());
        }
        write_file(&out.join("tables.md"), &md)?;
        for (stem, chart) in &self.charts {
            let svg = chart.to_svg().map_err(Error::failed)?;
            write_file(&out.join(format!("{stem}.svg")), &svg)?;
        }
        if common.json {
            let json = serde_json::to_string_pretty(&doc)
                .map_err(|e| Error::failed(format!("cannot encode results: {e}")))?;
            labkit::error::print(&format!("{json}\n"))?;
        } else {
            labkit::error::print(&md)?;
        }
        eprintln!("lab: results written to {}", out.display());
        Ok(())
    }
}
