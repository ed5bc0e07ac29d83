//! Command-line pieces that several programs share.

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};

use clap::Args;

use crate::error::{Error, Result};

/// Every program's `main`: parse the flags ([`parse`]) on a stack that
/// survives `ulimit -s 16` ([`crate::limits::enough_stack`]), run, and turn
/// the result into the exit status, an error being one line on stderr
/// (`program: what went wrong`, [`crate::error::report`]).
///
/// ```no_run
/// # #[derive(clap::Parser)] struct Cli {}
/// # fn run(_: &Cli) -> labkit::Result<()> { Ok(()) }
/// fn main() -> std::process::ExitCode {
///     labkit::cli::main("forkcreat", run)
/// }
/// ```
pub fn main<T: clap::Parser>(
    program: &str,
    run: impl FnOnce(&T) -> Result<()> + Send,
) -> std::process::ExitCode {
    crate::limits::enough_stack(|| crate::error::report(program, run(&parse::<T>())))
}

/// Parse this program's command line like clap's `Parser::parse`, except
/// that a usage error is one line on stderr, as every error of the lab is:
/// `fork: invalid value 'x' for '--procs <PROCS>': invalid digit found in
/// string; see 'fork --help'`, exit status 2. `--help` and `--version`
/// print as clap prints them.
pub fn parse<T: clap::Parser>() -> T {
    parse_from(std::env::args_os())
}

/// A value's spelling on the command line, as clap reads it:
/// `Reap::Sigchld` is `sigchld`. A program crate's `args()` says its
/// enums' values with it.
pub fn spelling<T: clap::ValueEnum>(value: &T) -> String {
    value.to_possible_value().map_or_else(String::new, |v| v.get_name().into())
}

/// The environment variable that makes every program of the lab stop right
/// after parsing its command line: exit 0 if the flags parse, 2 with the
/// usual one line if not, and nothing run. The book's test checks each
/// command the book prints this way.
pub const PARSE_ONLY: &str = "LAB_PARSE_ONLY";

/// Whether [`PARSE_ONLY`] is set (to anything but empty or `0`).
pub fn parse_only() -> bool {
    std::env::var_os(PARSE_ONLY).is_some_and(|v| !v.is_empty() && v != "0")
}

/// [`parse`] from `args`, the first being the program's name as it should
/// appear in a message (`lab run fork-vs-thread`, say). Under
/// [`PARSE_ONLY`] a command line that parses ends the process here, with
/// exit 0.
pub fn parse_from<T, I, A>(args: I) -> T
where
    T: clap::Parser,
    I: IntoIterator<Item = A>,
    A: Into<std::ffi::OsString> + Clone,
{
    let parsed = parse_outer::<T, I, A>(args);
    if parse_only() {
        crate::cleanup::exiting();
        std::process::exit(0)
    }
    parsed
}

/// [`parse_from`] for a command line that holds another to parse (`lab
/// run NAME ARGS`, whose `ARGS` the experiment parses): never ends the
/// process under [`PARSE_ONLY`], which its caller checks once the inner
/// command line is parsed.
pub fn parse_outer<T, I, A>(args: I) -> T
where
    T: clap::Parser,
    I: IntoIterator<Item = A>,
    A: Into<std::ffi::OsString> + Clone,
{
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    let mut matches = matches_from(T::command(), args);
    match T::from_arg_matches_mut(&mut matches) {
        Ok(parsed) => parsed,
        Err(e) => fail(&T::command(), T::command().get_name(), &e),
    }
}

/// `command`'s arguments parsed from `args`, the first being the program's
/// name as it should appear in a message: what [`parse_outer`] does, for a
/// command put together at run time (`lab run NAME`'s). `--help` prints
/// and exits 0; a usage error is one line on stderr and exit 2.
pub fn matches_from(
    command: clap::Command,
    args: Vec<std::ffi::OsString>,
) -> clap::ArgMatches {
    let name = args.first().map_or_else(
        || command.get_name().to_string(),
        |a| {
            let a = std::path::Path::new(a);
            a.file_name().unwrap_or(a.as_os_str()).to_string_lossy().into_owned()
        },
    );
    match command.clone().try_get_matches_from(&args) {
        Ok(m) => m,
        Err(e) => fail(&command, &name, &e),
    }
}

/// End the process for clap's error `e`: help and version printed, exit 0;
/// anything else one line, exit 2. The runner's guard, if it has one, is
/// reaped first, so nothing outlives it.
fn fail(command: &clap::Command, name: &str, e: &clap::Error) -> ! {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = e.print();
        let _ = std::io::Write::flush(&mut std::io::stdout());
        crate::cleanup::exiting();
        std::process::exit(0)
    }
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        // clap would print the whole help; one line names the choices
        // instead.
        let subcommands: Vec<&str> = command
            .get_subcommands()
            .map(clap::Command::get_name)
            .filter(|n| *n != "help")
            .collect();
        eprintln!(
            "{name}: a subcommand is required ({}); see '{name} --help'",
            subcommands.join(", ")
        );
    } else {
        eprintln!("{}", usage_line(name, &e.render().to_string()));
    }
    crate::cleanup::exiting();
    std::process::exit(crate::ExitCode::Usage as i32)
}

/// clap's several lines ("error: ...", a tip, the usage, "For more
/// information") as one.
fn usage_line(name: &str, rendered: &str) -> String {
    // The first paragraph: the error and, for a bad value, the values
    // that are possible.
    let first: Vec<&str> =
        rendered.lines().map(str::trim).take_while(|l| !l.is_empty()).collect();
    let first = first.join(" ");
    let first = first.strip_prefix("error: ").unwrap_or(&first);
    format!("{name}: {first}; see '{name} --help'")
}

/// A clap value parser for a number of seconds within `lo..=hi`, such as
/// `--duration 2.5`: `'x' is not a number of seconds from 0 to 3600`.
pub fn seconds_in(lo: f64, hi: f64) -> impl Fn(&str) -> Result<f64, String> + Clone {
    move |text| match text.parse::<f64>() {
        Ok(s) if (lo..=hi).contains(&s) => Ok(s),
        _ => Err(format!("'{text}' is not a number of seconds from {lo} to {hi}")),
    }
}

/// The work each fork/thread worker does: print `count` lines to stdout and
/// to a shared log, as the articles' `fork.c` and `thread.c` do.
#[derive(Args, Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    /// Lines each worker prints (the articles' COUNT)
    #[arg(short, long, default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub count: u64,

    /// Log file every worker appends its lines to (created if missing)
    #[arg(long, default_value = "logFile.log")]
    pub log: PathBuf,

    /// Print a string of this many bytes instead of "hello linux"
    /// (the article's third test uses 256)
    #[arg(long, value_name = "BYTES",
          value_parser = clap::value_parser!(u64).range(1..=4000))]
    pub line: Option<u64>,

    /// Print a JSON summary instead of the final "Okay"
    #[arg(long)]
    pub json: bool,
}

impl Workload {
    /// The text each line carries.
    pub fn text(&self) -> Vec<u8> {
        crate::lines::payload(self.line.map(|n| n as usize))
    }

    /// These flags as the programs read them, after their own workers'
    /// flag: `--count C --log PATH`, then `--line N` and `--json` if set.
    pub fn args(&self) -> Vec<OsString> {
        let mut args = vec!["--count".into(), self.count.to_string().into()];
        args.extend(["--log".into(), self.log.clone().into_os_string()]);
        if let Some(n) = self.line {
            args.extend(["--line".into(), n.to_string().into()]);
        }
        if self.json {
            args.push("--json".into());
        }
        args
    }

    /// The C originals' positional command line for `workers` workers:
    /// `P COUNT LOG [LINE_BYTES] [--json]` (`fork.c`, `thread.c`).
    pub fn c_args(&self, workers: u32) -> Vec<OsString> {
        let mut args: Vec<OsString> =
            vec![workers.to_string().into(), self.count.to_string().into()];
        args.push(self.log.clone().into_os_string());
        args.extend(self.line.map(|n| n.to_string().into()));
        if self.json {
            args.push("--json".into());
        }
        args
    }
}

/// Print a server's address as its first line, flushed, so that whoever
/// started it (the runner, a test) can connect: the lab's servers (the
/// broker, `server`) all start this way.
pub fn announce(addr: &std::net::SocketAddr) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{addr}").and_then(|()| out.flush()).map_err(|e| {
        Error::failed(format!("stdout: {}", crate::error::describe_io(&e)))
    })
}

/// Open the shared log for appending, as `fopen(path, "a+")` does: every
/// write goes to the end, whoever else is writing.
pub fn open_log(path: &Path) -> Result<File> {
    File::options().append(true).create(true).open(path).map_err(|e| {
        Error::failed(format!(
            "cannot open log {}: {}; no worker was started",
            path.display(),
            crate::error::describe_io(&e)
        ))
    })
}

/// What one fork/thread run did (`fork --json`, `thread --json`, and the
/// C originals with `--json`).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Report {
    pub workers: u32,
    pub count: u64,
    pub lines: u64,
    pub elapsed_s: f64,
}

/// How a create+destroy loop ended: the last three keys of `forkcreat
/// --json` and `pthreadcreat --json` (flattened into their reports; their C
/// references print the same with `print_loop_end`, in
/// `crates/labkit/c/labkit.h`).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct LoopEnd {
    pub elapsed_s: f64,
    /// Wall time per successful create+destroy, in microseconds.
    pub us_per_create: Option<f64>,
    /// The first failed create's error, e.g. "Resource temporarily
    /// unavailable (EAGAIN)".
    pub first_error: Option<String>,
}

impl LoopEnd {
    /// Stop the clock of a loop that began at `start` and created
    /// `created`.
    pub fn finish(&mut self, start: std::time::Instant, created: u64) {
        self.elapsed_s = start.elapsed().as_secs_f64();
        self.us_per_create =
            (created > 0).then(|| self.elapsed_s * 1e6 / created as f64);
    }

    /// The two lines the loop prints, as `forkcreat.c` and `pthreadcreat.c`
    /// do: its counts (`created: 5, failed: 0, reaped: 5`), then `5
    /// create+destroy in 0.001 s: 200.00 us each`, or `no process created
    /// in ...` when none was.
    pub fn text(&self, counts: &[(&str, u64)], created: u64, unit: &str) -> String {
        let counts: Vec<String> =
            counts.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        let elapsed_s = self.elapsed_s;
        let last = match self.us_per_create {
            Some(us) => format!(
                "{created} create+destroy in {elapsed_s:.3} s: {us:.2} us each"
            ),
            None => format!("no {unit} created in {elapsed_s:.3} s"),
        };
        format!("{}\n{last}\n", counts.join(", "))
    }
}

/// Print a program's report: one JSON object with `--json`, else `text`.
pub fn emit<T: serde::Serialize>(
    json: bool,
    report: &T,
    text: impl FnOnce(&T) -> String,
) -> Result<()> {
    let out = if json {
        let encoded = serde_json::to_string(report)
            .map_err(|e| Error::failed(format!("cannot encode report: {e}")))?;
        encoded + "\n"
    } else {
        text(report)
    };
    crate::error::print(&out)
}

/// End a run as the C programs do, with `Okay` (or the report as JSON).
pub fn finish(result: Result<Report>, work: &Workload) -> Result<()> {
    emit(work.json, &result?, |_| "Okay\n".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A program with nothing but the workload's flags.
    #[derive(clap::Parser, Debug, PartialEq)]
    struct Program {
        #[command(flatten)]
        work: Workload,
    }

    /// Command-line words, as text.
    fn words(args: Vec<OsString>) -> Vec<String> {
        args.into_iter().map(|a| a.into_string().unwrap()).collect()
    }

    #[test]
    fn a_workload_says_itself_as_the_programs_flags() {
        use clap::Parser;
        let w = Workload {
            count: 1000,
            log: "/tmp/x/logFile.log".into(),
            line: None,
            json: false,
        };
        assert_eq!(
            words(w.args()),
            ["--count", "1000", "--log", "/tmp/x/logFile.log"]
        );
        assert_eq!(words(w.c_args(255)), ["255", "1000", "/tmp/x/logFile.log"]);
        let long = Workload { line: Some(256), ..w.clone() };
        assert_eq!(words(long.args())[4..], ["--line", "256"]);
        assert_eq!(words(long.c_args(5))[3..], ["256"]);
        let json = Workload { json: true, ..long.clone() };
        assert_eq!(words(json.args())[6..], ["--json"]);
        assert_eq!(words(json.c_args(5))[3..], ["256", "--json"]);
        let default = Program::try_parse_from(["prog"]).unwrap().work;
        for work in [default, w, long, json] {
            let args = std::iter::once(OsString::from("prog")).chain(work.args());
            assert_eq!(Program::try_parse_from(args).unwrap(), Program { work });
        }
    }

    #[test]
    fn a_loop_says_its_counts_then_its_cost() {
        let counts = [("created", 4), ("failed", 1), ("joined", 4)];
        let mut end = LoopEnd::default();
        end.finish(std::time::Instant::now(), 4);
        assert!(end.us_per_create.is_some());
        let end = LoopEnd { elapsed_s: 0.0012, us_per_create: Some(300.0), ..end };
        assert_eq!(
            end.text(&counts, 4, "thread"),
            "created: 4, failed: 1, joined: 4\n\
             4 create+destroy in 0.001 s: 300.00 us each\n"
        );
        let mut none = LoopEnd::default();
        none.finish(std::time::Instant::now(), 0);
        assert_eq!(none.us_per_create, None);
        let none = LoopEnd { elapsed_s: 0.5, ..none };
        assert_eq!(
            none.text(&counts[..2], 0, "process"),
            "created: 4, failed: 1\nno process created in 0.500 s\n"
        );
    }

    #[test]
    fn seconds_are_checked_against_their_range() {
        let server = seconds_in(0.001, 3600.0);
        assert_eq!(server("2.5"), Ok(2.5));
        assert_eq!(server("0.001"), Ok(0.001));
        assert_eq!(
            server("0"),
            Err("'0' is not a number of seconds from 0.001 to 3600".to_string())
        );
        let load = seconds_in(0.0, 86_400.0);
        assert_eq!(load("86400"), Ok(86_400.0));
        for bad in ["86401", "-1", "NaN", "2s", ""] {
            assert_eq!(
                load(bad),
                Err(format!("'{bad}' is not a number of seconds from 0 to 86400"))
            );
        }
    }

    #[test]
    fn usage_errors_are_one_line() {
        let rendered = "error: unexpected argument '--foo' found\n\n  tip: to pass \
                        '--foo' as a value, use '-- --foo'\n\nUsage: fork \
                        [OPTIONS]\n\nFor more information, try '--help'.\n";
        assert_eq!(
            usage_line("fork", rendered),
            "fork: unexpected argument '--foo' found; see 'fork --help'"
        );
        let rendered = "error: invalid value 'x' for '--mode <MODE>'\n  [possible \
                        values: threads, processes]\n\nFor more information, try \
                        '--help'.\n";
        assert_eq!(
            usage_line("ctxswitch", rendered),
            "ctxswitch: invalid value 'x' for '--mode <MODE>' [possible values: \
             threads, processes]; see 'ctxswitch --help'"
        );
    }
}
