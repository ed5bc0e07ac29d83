//! Helpers for the workspace's integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

use std::process::Command;

/// The directory holding every program binary of this build (`lab`'s own).
pub fn bin_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_lab")).parent().unwrap().to_path_buf()
}

/// A program binary of the workspace (`fork`, `thread`, ...), which
/// `cargo test` at the workspace root builds along with `lab`.
pub fn program(name: &str) -> Command {
    let path = bin_dir().join(name);
    assert!(
        path.is_file(),
        "{} is not built: run `cargo test --release` at the workspace root (or `cargo build --workspace`)",
        path.display()
    );
    Command::new(path)
}

/// The runner, told where the programs are so it does not call cargo.
pub fn lab() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lab"));
    cmd.env("LAB_BIN_DIR", bin_dir());
    cmd
}

/// [`lab`], by the name the tests that hand it to `labtest`'s checks use.
pub fn lab_std() -> Command {
    lab()
}

/// `lab run EXPERIMENT ARGS --out DIR`, for the caller to add to and run.
pub fn lab_run(experiment: &str, args: &[&str], dir: &std::path::Path) -> Command {
    let mut cmd = lab();
    cmd.args(["run", experiment]).args(args).arg("--out").arg(dir);
    cmd
}

/// `lab ...` (`cmd`, made by [`lab`] or [`lab_run`]), which must fail
/// ([`labtest::failed`]): exit status 1, nothing on stdout, one
/// line `lab: ...`, which is returned.
pub fn lab_fails(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    let line = labtest::failed("lab", &out);
    assert!(out.stdout.is_empty(), "stdout: {out:?}");
    line
}

/// `lab run EXPERIMENT ARGS --json --out DIR`: checks that it succeeded and
/// that the JSON it printed is the one it saved as `DIR/EXPERIMENT.json`,
/// and returns it.
pub fn run_json(
    experiment: &str,
    args: &[&str],
    dir: &std::path::Path,
) -> serde_json::Value {
    let out = lab_run(experiment, args, dir).arg("--json").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed: serde_json::Value = labtest::json(&out.stdout);
    let path = dir.join(format!("{experiment}.json"));
    let bytes =
        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let saved: serde_json::Value = labtest::json(&bytes);
    assert_eq!(printed, saved, "the printed JSON is the saved one");
    assert_eq!(saved["schema"], 3, "results of schema 3");
    view(saved)
}

/// The JSON file `path` (results, a comparison, ...), parsed; a results
/// file of schema 3 as [`view`] shows it.
pub fn read_json(path: impl AsRef<std::path::Path>) -> serde_json::Value {
    let path = path.as_ref();
    let bytes =
        std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    view(labtest::json(&bytes))
}

/// The results JSON a program printed (`--json`), as [`view`] shows it.
pub fn printed_json(stdout: &[u8]) -> serde_json::Value {
    view(labtest::json(stdout))
}

/// A results file of schema 3 (`{schema, header, headline, observations,
/// data}`) seen the way a pointer into it resolves (CONTRIBUTING.md): the
/// header's fields and the experiment's data at the top, beside `schema`,
/// `headline` and `observations`, so that `json["grids"]` is the file's
/// `data.grids` and `json["machine"]` its `header.machine`, as
/// `/grids[...]` and `/machine/...` name them. No key of the data may
/// shadow another (the pointer would not reach it). Any other JSON (an
/// older results file, a comparison) is as it is.
pub fn view(json: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    let Value::Object(top) = &json else { return json };
    if top.get("schema") != Some(&Value::from(3)) || !top.contains_key("header") {
        return json;
    }
    let keys: Vec<&str> = top.keys().map(String::as_str).collect();
    assert_eq!(keys, ["schema", "header", "headline", "observations", "data"]);
    let mut out = serde_json::Map::new();
    for key in ["schema", "headline", "observations"] {
        out.insert(key.into(), top[key].clone());
    }
    for part in ["header", "data"] {
        for (k, v) in top[part].as_object().expect("an object") {
            let shadowed = out.insert(k.clone(), v.clone());
            assert!(shadowed.is_none(), "{part}.{k} shadows another key");
        }
    }
    Value::Object(out)
}

/// The string `key` of each element of the JSON array `list`:
/// `strings(&row["programs"], "program")` is `["fork", "thread"]`.
pub fn strings<'a>(
    list: &'a serde_json::Value,
    key: impl serde_json::value::Index,
) -> Vec<&'a str> {
    let items = list.as_array().unwrap_or_else(|| panic!("not a list: {list}"));
    let string = |e: &'a serde_json::Value| {
        e[&key].as_str().unwrap_or_else(|| panic!("no string there: {e}"))
    };
    items.iter().map(string).collect()
}

/// Is there a C compiler for the `--vs-c` runs? Says why a test skips if
/// not.
pub fn have_cc() -> bool {
    let found = labtest::have_tool("cc");
    if !found {
        labtest::skipped("no C compiler (cc) for the C references");
    }
    found
}

/// The C original of `program`, `crates/PROGRAM/c/PROGRAM.c`, built as the
/// runner builds it (`lab::bins::compile_c_in`, as `PROGRAM-c` in the
/// directory `lab` itself uses under these tests, so the build cache is
/// shared), or `None` with the reason printed when there is no C compiler.
pub fn c_program(program: &str) -> Option<PathBuf> {
    if !have_cc() {
        return None;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let source = root.join(format!("crates/{program}/c/{program}.c"));
    let built = lab::bins::compile_c_in(
        &bin_dir().join("c"),
        &[&source],
        &[],
        &format!("{program}-c"),
    );
    Some(built.unwrap_or_else(|e| panic!("{e}")))
}

/// `lab run EXPERIMENT ARGS` for each of `cases`, flags it cannot parse:
/// refused as every program refuses them, in one line `lab run EXPERIMENT:
/// ...; see 'lab run EXPERIMENT --help'` ([`labtest::usage_errors`]).
pub fn bad_flags_exit_2(experiment: &str, cases: &[&[&str]]) {
    let name = format!("lab run {experiment}");
    let command = || {
        let mut cmd = lab_std();
        cmd.args(["run", experiment]);
        cmd
    };
    labtest::usage_errors_as(&name, command, cases);
}

/// `lab ARGS`, refused once parsed ([`labtest::usage_error`]): exit
/// 2, nothing on stdout, one line `lab: ...`, which is returned.
pub fn lab_refuses(args: &[&str]) -> String {
    labtest::usage_error("lab", lab_std().args(args))
}
