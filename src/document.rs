//! The results file, `DIR/NAME.json`, by version, and the one reader of
//! every version.
//!
//! The lab writes schema 3:
//!
//! ```text
//! { "schema": 3,
//!   "header":       { "experiment", "command", "machine", "settings", "load" },
//!   "headline":     { KEY: figure, ... },
//!   "observations": [ one row per run of a condition, ... ],
//!   "data":         { the experiment's own results } }
//! ```
//!
//! Files written before it have no `schema` field: the header's fields,
//! the headline and the experiment's data side by side at the top level
//! (their figures come in two generations, told apart by their fields:
//! [`crate::report::FIGURE_FIELDS`]). [`Document::read`] reads either into
//! the schema-3 shape: an older file's header fields go into `header`, its
//! headline stays, everything else goes into `data`, and it has no
//! observations. A file of any other schema is refused with one line that
//! names it and its version. Every part of the lab that reads a results
//! file reads it here.
//!
//! A pointer into a results file (the book's `{{#figure EXP /path}}`)
//! resolves by its first step ([`resolve`]): one of the five top-level
//! keys from the root, a header field under `header`, anything else under
//! `data`. So `/machine/kernel`, `/headline/fork_us/value` and
//! `/grids[axis=count]/rows[count=5000]/...` name the same values in a file
//! of either version.

use std::path::{Path, PathBuf};

use labkit::{Error, Result};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::results::Header;

/// The version of the results file this lab writes.
pub const SCHEMA: u64 = 3;

/// The top-level keys of a schema-3 file, in the order it is written.
pub const TOP: [&str; 5] = ["schema", "header", "headline", "observations", "data"];

/// The fields of [`Header`], which a file before schema 3 kept at its top
/// level beside the headline and the experiment's data.
pub const HEADER_FIELDS: [&str; 5] =
    ["experiment", "command", "machine", "settings", "load"];

/// A results file, read into the schema-3 shape.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    /// The file it was read from (empty for one made in memory).
    pub path: PathBuf,
    /// The schema it was written in: `None` for a file from before the
    /// `schema` field (the lab's results until schema 3).
    pub written: Option<u64>,
    /// The document: an object with the five keys of [`TOP`], shared by
    /// the copies of a document read once ([`Document::read`]).
    json: std::sync::Arc<Value>,
}

/// What the lab writes: [`TOP`]'s keys, the experiment's data nested.
#[derive(Serialize)]
pub struct Written<'a, T> {
    pub schema: u64,
    pub header: &'a Header,
    pub headline: &'a Map<String, Value>,
    pub observations: &'a [crate::engine::Observation],
    pub data: &'a T,
}

impl<'a, T: Serialize> Written<'a, T> {
    pub fn new(
        header: &'a Header,
        headline: &'a Map<String, Value>,
        observations: &'a [crate::engine::Observation],
        data: &'a T,
    ) -> Self {
        Written { schema: SCHEMA, header, headline, observations, data }
    }

    /// The file's text: pretty JSON and a final newline.
    pub fn to_text(&self) -> Result<String> {
        let mut json = serde_json::to_string_pretty(self)
            .map_err(|e| Error::failed(format!("cannot encode results: {e}")))?;
        json.push('\n');
        Ok(json)
    }
}

/// The results file of folder `folder` (`NAME` or `NAME/SUB`) of run
/// `run`: `RUN/NAME[/SUB]/NAME.json`.
pub fn file_of(run: &Path, folder: &str) -> PathBuf {
    let experiment = folder.split('/').next().unwrap_or(folder);
    run.join(folder).join(format!("{experiment}.json"))
}

impl Document {
    /// Read the results file `path`: `None` when there is none, an error
    /// (one line, naming the file) when it does not read, is not JSON, is
    /// of a schema this lab does not read or lacks a part of its schema.
    ///
    /// The file is read each time; its parse is kept for the process and
    /// given again while the file holds the same text. The book and an
    /// edition read the same results from many places (a chapter's figures,
    /// its claims, the run's listing): pipe-speed's 4 and 18 MB files were
    /// parsed 42 and 9 times by one `lab book`, most of its 9 s.
    pub fn read(path: &Path) -> Result<Option<Document>> {
        use std::collections::HashMap;
        use std::sync::{LazyLock, Mutex};
        // Each path's text and its document, as last read.
        type Read = HashMap<PathBuf, (String, Document)>;
        static READ: LazyLock<Mutex<Read>> = LazyLock::new(Mutex::default);
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(path.display(), e)),
        };
        let read = || READ.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((known, doc)) = read().get(path) {
            if *known == text {
                return Ok(Some(doc.clone()));
            }
        }
        // `str::parse`, not `serde_json::from_str::<Value>`: the generic
        // one is compiled into the runner, unoptimised (Cargo.toml);
        // `Value`'s own `FromStr` is compiled, optimised, in serde_json.
        // `lab book` of the reference took 3.5 s with the first, 1.2 s
        // with the second.
        let json: Value = text.parse().map_err(|e| {
            Error::failed(format!("{}: not JSON ({e})", path.display()))
        })?;
        let doc = Document::from_json(path, json)?;
        read().insert(path.to_path_buf(), (text, doc.clone()));
        Ok(Some(doc))
    }

    /// Read the results of folder `folder` of run `run` ([`file_of`]).
    pub fn read_folder(run: &Path, folder: &str) -> Result<Option<Document>> {
        Document::read(&file_of(run, folder))
    }

    /// A results file's JSON, as read from `path`, in the schema-3 shape.
    pub fn from_json(path: &Path, json: Value) -> Result<Document> {
        let fail = |why: String| Error::failed(format!("{}: {why}", path.display()));
        let Value::Object(mut top) = json else {
            return Err(fail("not a results file (it is no JSON object)".into()));
        };
        let written = match top.get("schema") {
            None => None,
            Some(v) if v.as_u64() == Some(SCHEMA) => Some(SCHEMA),
            Some(v) => {
                let version =
                    v.as_str().map_or_else(|| v.to_string(), str::to_string);
                return Err(fail(format!(
                    "results of schema {version}, which this lab (schema {SCHEMA}) \
                     does not read"
                )));
            }
        };
        let json = match written {
            Some(_) => {
                if let Some(extra) = top.keys().find(|k| !TOP.contains(&k.as_str()))
                {
                    return Err(fail(format!(
                        "'{extra}' is no part of a results file of schema {SCHEMA}"
                    )));
                }
                for key in ["header", "headline", "observations", "data"] {
                    let (ok, what) = match key {
                        "observations" => {
                            (top.get(key).is_some_and(Value::is_array), "a list")
                        }
                        "data" => (true, "a value"),
                        _ => {
                            (top.get(key).is_some_and(Value::is_object), "an object")
                        }
                    };
                    if !top.contains_key(key) {
                        return Err(fail(format!(
                            "a results file of schema {SCHEMA} without {key}"
                        )));
                    }
                    if !ok {
                        return Err(fail(format!("{key} is not {what}")));
                    }
                }
                Value::Object(top)
            }
            None => {
                let mut header = Map::new();
                for field in HEADER_FIELDS {
                    if let Some(v) = top.remove(field) {
                        header.insert(field.into(), v);
                    }
                }
                let headline = match top.remove("headline") {
                    None => Value::Object(Map::new()),
                    Some(h @ Value::Object(_)) => h,
                    Some(_) => return Err(fail("headline is not an object".into())),
                };
                let mut doc = Map::new();
                doc.insert("schema".into(), SCHEMA.into());
                doc.insert("header".into(), Value::Object(header));
                doc.insert("headline".into(), headline);
                doc.insert("observations".into(), Value::Array(Vec::new()));
                doc.insert("data".into(), Value::Object(top));
                Value::Object(doc)
            }
        };
        Ok(Document { path: path.to_path_buf(), written, json: json.into() })
    }

    /// The whole document, schema 3's five keys.
    pub fn json(&self) -> &Value {
        &self.json
    }

    /// The header as it is in the file.
    pub fn header_json(&self) -> &Value {
        &self.json["header"]
    }

    /// The header, read: an error naming the file and the field when it
    /// does not read as one.
    pub fn header(&self) -> Result<Header> {
        serde_json::from_value(self.header_json().clone()).map_err(|e| {
            Error::failed(format!("{}: header: {e}", self.path.display()))
        })
    }

    /// The headline figures, by key.
    pub fn headline(&self) -> &Map<String, Value> {
        self.json["headline"].as_object().expect("checked when read")
    }

    /// The observations: one row per run of a condition (none in a file
    /// from before schema 3).
    pub fn observations(&self) -> &[Value] {
        self.json["observations"].as_array().expect("checked when read")
    }

    /// The experiment's own data.
    pub fn data(&self) -> &Value {
        &self.json["data"]
    }

    /// The experiment's data, read as `T`: an error naming the file.
    pub fn data_as<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_value(self.data().clone()).map_err(|e| {
            Error::failed(format!("{}: data: {e}", self.path.display()))
        })
    }

    /// The value `pointer` names ([`resolve`]).
    pub fn at(&self, pointer: &str) -> std::result::Result<&Value, String> {
        resolve(&self.json, pointer)
    }

    /// The value `pointer` names, `None` when there is none.
    pub fn get(&self, pointer: &str) -> Option<&Value> {
        self.at(pointer).ok()
    }
}

/// The value `pointer` names in the schema-3 document `doc`
/// ([`Document::json`]): its first step decides where it starts. One of
/// the five top-level keys ([`TOP`]) starts at the root, a header field
/// ([`HEADER_FIELDS`]) under `header`, anything else under `data`; the
/// rest walks as [`select`] does. So the pointers written for files before
/// schema 3 (`/machine/kernel`, `/headline/KEY/value`, `/grids[...]/...`)
/// name the same values in either, and `/data/grids` names what `/grids`
/// does.
pub fn resolve<'a>(
    doc: &'a Value,
    pointer: &str,
) -> std::result::Result<&'a Value, String> {
    let Some(steps) = pointer.strip_prefix('/') else {
        return Err(format!("{pointer}: a path starts with /"));
    };
    let first = steps.split('/').next().unwrap_or("");
    let key = first.split('[').next().unwrap_or(first);
    let key = key.replace("~1", "/").replace("~0", "~");
    let base = if TOP.contains(&key.as_str()) {
        doc
    } else if HEADER_FIELDS.contains(&key.as_str()) {
        &doc["header"]
    } else {
        &doc["data"]
    };
    select(base, pointer)
}

/// A word of free text, as a headline key or a pointer compares it:
/// `fork + _exit` -> `fork_exit`.
pub fn slug(text: &str) -> String {
    let words: Vec<String> = text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    words.join("_")
}

/// The value at `path` in `json`: a JSON pointer (`/a/b`, with `~1` for
/// `/` and `~0` for `~` in a key) in which a step into an array names one
/// element by its settings, `name[field=value,field=value]`: the one
/// element whose fields have those values, compared as words
/// ([`slug`]: `[method=fork-exit-waitpid]` names "fork +
/// _exit + waitpid"; `placement.name` is a field of a field). For the rounds of a setting, which have no setting of
/// their own, `runs[round=1]` is the first. A position (`/points/3`) is
/// refused: a new point would shift it silently. Into a results file,
/// [`resolve`] (or [`Document::at`]) finds where a pointer starts.
pub fn select<'a>(
    json: &'a Value,
    path: &str,
) -> std::result::Result<&'a Value, String> {
    let mut here = json;
    for Step { text: step, key, picks } in steps(path)? {
        here = match here {
            Value::Object(map) => map.get(&key),
            Value::Array(_) => {
                return Err(format!(
                    "{path}: '{step}' is a position in an array; name the \
                     element by its setting, as in points[block_bytes=4096]"
                ));
            }
            _ => None,
        }
        .ok_or_else(|| format!("no value at {path} (no '{key}')"))?;
        if let Some(picks) = picks {
            here = pick(here, picks).map_err(|e| format!("{path}: {e}"))?;
        }
    }
    Ok(here)
}

/// One step of a [`select`] path: its text, the key it takes (`~1` and
/// `~0` decoded) and, for a step into an array, the `field=value,...`
/// that names the element.
#[derive(Debug, PartialEq)]
pub struct Step<'a> {
    pub text: &'a str,
    pub key: String,
    pub picks: Option<&'a str>,
}

/// The steps of a [`select`] path, as select takes them
/// ([`crate::schema`] walks them through a results schema).
pub fn steps(path: &str) -> std::result::Result<Vec<Step<'_>>, String> {
    let Some(steps) = path.strip_prefix('/') else {
        return Err(format!("{path}: a path starts with /"));
    };
    let mut out = Vec::new();
    for step in steps.split('/') {
        let (key, picks) = match step.split_once('[') {
            Some((key, rest)) => {
                let picks = rest
                    .strip_suffix(']')
                    .ok_or_else(|| format!("{path}: '{step}' has no closing ]"))?;
                (key, Some(picks))
            }
            None => (step, None),
        };
        let key = key.replace("~1", "/").replace("~0", "~");
        out.push(Step { text: step, key, picks });
    }
    Ok(out)
}

/// The fields and values of a step's `field=value,...`, each value as a
/// word ([`slug`]), as [`select`] compares them.
pub fn picks(picks: &str) -> std::result::Result<Vec<(&str, String)>, String> {
    let mut wanted = Vec::new();
    for pair in picks.split(',') {
        let (field, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("[{picks}]: '{pair}' is not field=value"))?;
        wanted.push((field.trim(), slug(value)));
    }
    Ok(wanted)
}

/// The one element of the array `list` that `picks` (`field=value,...`)
/// names.
fn pick<'a>(list: &'a Value, picks: &str) -> std::result::Result<&'a Value, String> {
    let Value::Array(items) = list else {
        return Err(format!("[{picks}] picks from an array, and this is none"));
    };
    let wanted = self::picks(picks)?;
    if let [(field, n)] = wanted.as_slice()
        && *field == "round"
    {
        let round: usize =
            n.parse().map_err(|_| format!("[round={n}]: not a round"))?;
        return round.checked_sub(1).and_then(|i| items.get(i)).ok_or_else(|| {
            format!("[round={n}]: there are {} rounds", items.len())
        });
    }
    let word = |v: &Value| match v {
        Value::String(s) => Some(slug(s)),
        Value::Number(_) | Value::Bool(_) => Some(slug(&v.to_string())),
        _ => None,
    };
    // `placement.name`: a field of a field.
    let field_of = |item: &'a Value, field: &str| {
        field.split('.').try_fold(item, |v, f| v.get(f))
    };
    let matches = |item: &&'a Value| {
        wanted.iter().all(|(field, value)| {
            field_of(item, field).and_then(word).is_some_and(|w| w == *value)
        })
    };
    let mut found = items.iter().filter(matches);
    match (found.next(), found.next()) {
        (Some(one), None) => Ok(one),
        (None, _) => Err(format!("no element has {picks}")),
        (Some(_), Some(_)) => {
            Err(format!("more than one element has {picks}: name it by more fields"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A file as the lab wrote it before schema 3: the header's fields,
    /// the headline and the data side by side.
    fn flat() -> Value {
        json!({
            "experiment": "demo",
            "command": "lab run demo",
            "machine": {"kernel": "6.1"},
            "settings": {"rounds": 6, "cpu_count": 2},
            "load": {"busy": false},
            "headline": {"x": {"value": 1.5, "interval": [1.0, 2.0]}},
            "rounds": 6,
            "grids": [{"axis": "count", "rows": [
                {"count": 5000, "ratio": 2.5}, {"count": 10, "ratio": 1.0}
            ]}]
        })
    }

    /// The same results as schema 3 writes them.
    fn nested() -> Value {
        let f = flat();
        json!({
            "schema": 3,
            "header": {
                "experiment": f["experiment"], "command": f["command"],
                "machine": f["machine"], "settings": f["settings"], "load": f["load"]
            },
            "headline": f["headline"],
            "observations": [],
            "data": {"rounds": f["rounds"], "grids": f["grids"]}
        })
    }

    fn read(json: Value) -> Result<Document> {
        Document::from_json(Path::new("r/demo/demo.json"), json)
    }

    #[test]
    fn a_file_before_schema_3_is_read_into_its_shape() {
        let old = read(flat()).unwrap();
        let new = read(nested()).unwrap();
        assert_eq!((old.written, new.written), (None, Some(3)));
        assert_eq!(old.json(), new.json(), "the same document either way");
        let keys: Vec<&String> = old.json().as_object().unwrap().keys().collect();
        assert_eq!(keys, TOP);
        assert_eq!(old.data()["rounds"], 6);
        assert!(old.observations().is_empty());
        assert_eq!(old.header_json()["experiment"], "demo");
        // A file with no header (the book's tests write such) reads too.
        let bare = read(json!({"headline": {}, "n": 7})).unwrap();
        assert_eq!(bare.header_json(), &json!({}));
        assert_eq!(bare.get("/n"), Some(&json!(7)));
    }

    #[test]
    fn pointers_resolve_by_their_first_step_in_either_version() {
        let old = read(flat()).unwrap();
        let new = read(nested()).unwrap();
        let cases = [
            // A header field, under header.
            ("/machine/kernel", json!("6.1")),
            ("/settings/rounds", json!(6)),
            ("/experiment", json!("demo")),
            // A top-level key, from the root.
            ("/headline/x/value", json!(1.5)),
            ("/schema", json!(3)),
            ("/header/machine/kernel", json!("6.1")),
            ("/observations", json!([])),
            // Anything else, under data; and data by name.
            ("/grids[axis=count]/rows[count=5000]/ratio", json!(2.5)),
            ("/data/grids[axis=count]/rows[count=5000]/ratio", json!(2.5)),
            ("/rounds", json!(6)),
        ];
        for (pointer, want) in cases {
            for doc in [&old, &new] {
                assert_eq!(doc.at(pointer), Ok(&want), "{pointer}");
            }
        }
        // The three forms of one value name the same value.
        for doc in [&old, &new] {
            let three = ["/grids", "/data/grids"].map(|p| doc.at(p).unwrap());
            assert_eq!(three[0], three[1]);
            let header = ["/machine", "/header/machine"].map(|p| doc.at(p).unwrap());
            assert_eq!(header[0], header[1]);
            assert_eq!(doc.at("/headline/x"), resolve(doc.json(), "/headline/x"));
        }
        let err = new.at("/nope").unwrap_err();
        assert!(err.contains("no value at /nope"), "{err}");
        assert!(new.at("nope").unwrap_err().contains("starts with /"));
    }

    #[test]
    fn another_schema_is_refused_in_one_line_naming_file_and_version() {
        let mut doc = nested();
        doc["schema"] = json!(7);
        let err = read(doc).unwrap_err();
        assert_eq!(
            err.message,
            "r/demo/demo.json: results of schema 7, which this lab (schema 3) does \
             not read"
        );
        for (broken, says) in [
            (
                json!({"schema": 3, "header": {}, "headline": {}, "data": {}}),
                "without observations",
            ),
            (
                json!({"schema": 3, "header": [], "headline": {}, "observations": [], "data": {}}),
                "header is not an object",
            ),
            (
                json!({"schema": 3, "header": {}, "headline": {}, "observations": [], "data": {}, "grids": []}),
                "'grids' is no part",
            ),
            (json!({"headline": 5}), "headline is not an object"),
            (json!([1, 2]), "no JSON object"),
            (json!({"schema": "two"}), "results of schema two,"),
        ] {
            let err = read(broken).unwrap_err().message;
            assert!(
                err.starts_with("r/demo/demo.json: ") && err.contains(says),
                "{err}"
            );
            assert!(!err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn what_the_lab_writes_reads_back_as_written() {
        let header = Header::new("demo");
        let headline = flat()["headline"].as_object().unwrap().clone();
        let data = json!({"grids": []});
        let at = crate::engine::setting([("n", json!(1))]);
        let run = vec![("wall_s", 0.5)];
        let obs = [crate::engine::Observation::of(&at, "fork", Some(1), 0, &run)];
        let text = Written::new(&header, &headline, &obs, &data).to_text().unwrap();
        assert!(text.ends_with("}\n"));
        let json: Value = serde_json::from_str(&text).unwrap();
        let keys: Vec<&String> = json.as_object().unwrap().keys().collect();
        assert_eq!(keys, TOP, "schema 3's keys, in order");
        let doc = read(json).unwrap();
        assert_eq!(doc.written, Some(SCHEMA));
        assert_eq!(doc.header().unwrap().experiment, "demo");
        assert_eq!(doc.observations(), &[serde_json::to_value(&obs[0]).unwrap()]);
        assert_eq!(doc.data(), &data);
    }

    #[test]
    fn the_header_fields_are_the_headers() {
        let mut header = Header::new("demo");
        header.load = Some(crate::machine::LoadMark::now().until_now());
        let json = serde_json::to_value(&header).unwrap();
        let keys: Vec<&String> = json.as_object().unwrap().keys().collect();
        assert_eq!(keys, HEADER_FIELDS);
    }

    #[test]
    fn a_missing_file_is_none_and_a_broken_one_an_error_naming_it() {
        let dir = labtest::tempdir();
        assert_eq!(Document::read_folder(dir.path(), "demo/cpu0").unwrap(), None);
        assert_eq!(
            file_of(dir.path(), "demo/cpu0"),
            dir.path().join("demo/cpu0/demo.json")
        );
        std::fs::create_dir_all(dir.path().join("demo")).unwrap();
        std::fs::write(dir.path().join("demo/demo.json"), "{\"head").unwrap();
        let err = Document::read_folder(dir.path(), "demo").unwrap_err();
        assert!(err.message.contains("demo/demo.json: "), "{err}");
    }
}
