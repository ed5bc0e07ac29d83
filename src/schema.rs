//! What each experiment's results hold, committed as a JSON Schema, so
//! that a pointer of the book or a claim's figure is checked against the
//! code's types by a unit test, without a run and without building the
//! book.
//!
//! - `schemas/EXP.json`, one per experiment (the controls too):
//!   `{"experiment", "headline", "data"}`: the headline keys it declares
//!   ([`crate::experiments::Experiment::headline`]) and the JSON Schema of
//!   its results' `data` (the type [`crate::experiments::Experiment::data`]
//!   names).
//! - `schemas/results.json`, what every results file shares:
//!   `{"header", "figure"}`, the schemas of [`Header`] and of a headline
//!   [`Figure`].
//!
//! The schemas are generated from the types (`schemars`), descriptions
//! left out: they say what is there, the code's comments say what it
//! means. A test fails when a committed file is not what the code
//! generates; `LAB_WRITE_SCHEMAS=1 cargo test --release -p lab --lib schema::`
//! writes them ([`WRITE`]).
//!
//! A pointer is walked as the book's [`crate::book::select`] walks a
//! results file: a first step that is `schema`, `header`, `headline`,
//! `observations` or `data` starts at the file's root; one that is a
//! field of the header (`experiment`, `command`, `machine`, `settings`,
//! `load`) starts under `header`; any other starts under `data`. A step
//! follows `properties`, `items`, `$ref`s into `$defs`, the alternatives
//! of `anyOf`/`oneOf`/`allOf` (an `Option`) and `additionalProperties` (a
//! map); `name[field=value]` steps into an array whose items have those
//! fields. A headline key must be one the experiment declares, or of a
//! family it declares (`creattime_ratio_{samples}`).
//!
//! The unit test `every_pointer_and_key_of_the_book_and_the_claims_is_in_the_schemas`
//! checks every `{{#figure}}` pointer, `{{#headline}}` key and figure of a
//! `{{#rests-on}}` condition in `book/src/**/*.md`, and every claim's
//! `figure` in `claims.toml`, against the committed schemas; each problem
//! names the file, the line, the directive and the step that is not there.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use schemars::Schema;
use serde_json::{Value, json};

use crate::claims::Claim;
use crate::edition::Condition;
use crate::experiments::Experiment;
use crate::report::{Figure, Headline};
use crate::results::Header;

/// Set to `1`, `cargo test --release -p lab --lib schema::` writes `schemas/` from
/// the code instead of comparing them.
pub const WRITE: &str = "LAB_WRITE_SCHEMAS";

/// How to bring `schemas/` up to date, as a failing test says it.
pub const UPDATE: &str = "LAB_WRITE_SCHEMAS=1 cargo test --release -p lab --lib schema::, then commit schemas/";

/// The fields of a results file's header: a pointer's first step that is
/// one of these is read under `header`.
pub const HEADER_FIELDS: [&str; 5] =
    ["experiment", "command", "machine", "settings", "load"];

/// The first steps that start at a results file's root.
pub const ROOT_FIELDS: [&str; 5] =
    ["schema", "header", "headline", "observations", "data"];

/// The generator of every committed schema: JSON Schema 2020-12, as the
/// types serialise, without descriptions.
pub fn generator() -> schemars::SchemaGenerator {
    schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .with_transform(no_descriptions)
        .into_generator()
}

fn no_descriptions(schema: &mut Schema) {
    if let Some(object) = schema.as_object_mut() {
        object.remove("description");
    }
    schemars::transform::transform_subschemas(&mut no_descriptions, schema);
}

/// The lab's `schemas/` folder.
pub fn folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas")
}

/// Does headline key `key` match the declared `pattern`: the same text, or
/// a family whose `{name}` stands for one or more of `a-z`, `0-9` and `_`?
pub fn key_matches(pattern: &str, key: &str) -> bool {
    let Some((literal, rest)) = pattern.split_once('{') else {
        return pattern == key;
    };
    let (Some(key), Some((_, after))) =
        (key.strip_prefix(literal), rest.split_once('}'))
    else {
        return false;
    };
    let word = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_';
    // The placeholder takes one or more of the word characters that follow;
    // the rest of the pattern, what is left.
    let n = key.find(|c: char| !word(c)).unwrap_or(key.len());
    (1..=n).any(|k| key_matches(after, &key[k..]))
}

/// Whether `experiment` declares headline key `key`.
pub fn declares(experiment: &Experiment, key: &str) -> bool {
    experiment.headline.iter().any(|p| key_matches(p, key))
}

/// What [`crate::report::Report::publish`] checks before it writes:
/// experiment `name` is registered, its declared data type is `data_type`
/// (the report's), and every headline key is declared. The error says
/// where to declare what is missing.
pub fn check_report(
    name: &str,
    headline: &Headline,
    data_type: &str,
) -> Result<(), String> {
    let experiment = crate::experiments::find(name)
        .ok_or_else(|| format!("no experiment {name} is registered"))?;
    let declared = experiment.data.map(|d| (d.name)());
    if declared != Some(data_type) {
        return Err(format!(
            "{name} publishes {data_type}, but its EXPERIMENT declares {}: \
             declare `.data::<T>()` with the type it publishes",
            declared.unwrap_or("no data type")
        ));
    }
    let undeclared: Vec<&str> = headline
        .keys()
        .map(String::as_str)
        .filter(|k| !declares(experiment, k))
        .collect();
    if !undeclared.is_empty() {
        return Err(format!(
            "{name}: headline key{} {} not declared: add {} to `.headline(&[...])` \
             in its EXPERIMENT, then regenerate its schema ({UPDATE})",
            if undeclared.len() == 1 { "" } else { "s" },
            undeclared.join(", "),
            if undeclared.len() == 1 { "it" } else { "them" },
        ));
    }
    Ok(())
}

/// The schemas: each experiment's file and the shared one, as JSON.
#[derive(Clone, Debug, PartialEq)]
pub struct Schemas {
    /// `schemas/results.json`: `{"header", "figure"}`.
    pub results: Value,
    /// Experiment name -> `schemas/NAME.json`.
    pub experiments: BTreeMap<String, Value>,
}

impl Schemas {
    /// The schemas the code makes now.
    pub fn generated() -> Result<Schemas, String> {
        let schema = |s: Schema| s.to_value();
        let results = json!({
            "header": schema(generator().into_root_schema_for::<Header>()),
            "figure": schema(generator().into_root_schema_for::<Figure>()),
        });
        let mut experiments = BTreeMap::new();
        for e in crate::experiments::every() {
            let data = e.data.ok_or_else(|| {
                format!(
                    "{}: its EXPERIMENT declares no data type: add \
                     `.data::<Data>()`",
                    e.name
                )
            })?;
            let file = json!({
                "experiment": e.name,
                "headline": e.headline,
                "data": schema((data.schema)()),
            });
            experiments.insert(e.name.to_string(), file);
        }
        Ok(Schemas { results, experiments })
    }

    /// The files of these schemas: name under `schemas/` and text.
    pub fn files(&self) -> Vec<(String, String)> {
        let text = |v: &Value| {
            let mut t = serde_json::to_string_pretty(v).expect("JSON encodes");
            t.push('\n');
            t
        };
        let mut files = vec![("results.json".to_string(), text(&self.results))];
        for (name, file) in &self.experiments {
            files.push((format!("{name}.json"), text(file)));
        }
        files
    }

    /// The schemas committed in `dir`.
    pub fn read(dir: &Path) -> Result<Schemas, String> {
        let read = |name: &str| -> Result<Value, String> {
            let path = dir.join(name);
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("{}: {e} ({UPDATE})", path.display()))?;
            serde_json::from_str(&text)
                .map_err(|e| format!("{}: {e} ({UPDATE})", path.display()))
        };
        let results = read("results.json")?;
        let mut experiments = BTreeMap::new();
        for e in crate::experiments::every() {
            experiments
                .insert(e.name.to_string(), read(&format!("{}.json", e.name))?);
        }
        Ok(Schemas { results, experiments })
    }

    /// The committed file of `experiment`.
    fn experiment(&self, experiment: &str) -> Result<&Value, String> {
        self.experiments.get(experiment).ok_or_else(|| {
            format!("no experiment {experiment} (no schemas/{experiment}.json)")
        })
    }

    /// Is `key` a headline key `experiment` declares?
    pub fn key(&self, experiment: &str, key: &str) -> Result<(), String> {
        let file = self.experiment(experiment)?;
        let declared = file["headline"].as_array().into_iter().flatten();
        let mut declared = declared.filter_map(Value::as_str);
        if declared.any(|p| key_matches(p, key)) {
            Ok(())
        } else {
            Err(format!(
                "headline key '{key}' is not one {experiment} declares (schemas/{experiment}.json)"
            ))
        }
    }

    /// Does `pointer` (a [`crate::book::select`] path) lead to a value in a
    /// results file of `experiment`, as its schema says?
    pub fn pointer(&self, experiment: &str, pointer: &str) -> Result<(), String> {
        let file = self.experiment(experiment)?;
        let steps = crate::book::steps(pointer)?;
        let first = &steps[0];
        if first.picks.is_some() && ROOT_FIELDS.contains(&first.key.as_str()) {
            return Err(format!("'{}': {} is no array", first.text, first.key));
        }
        let header = (&self.results["header"], "the header");
        let data = (&file["data"], "the data");
        let ((root, label), rest): (_, &[crate::book::Step]) =
            match first.key.as_str() {
                "data" => (data, &steps[1..]),
                "header" => (header, &steps[1..]),
                "headline" => {
                    let Some(key) = steps.get(1) else { return Ok(()) };
                    self.key(experiment, &key.key)?;
                    if key.picks.is_some() {
                        return Err(format!(
                            "'{}': a headline figure is no array",
                            key.text
                        ));
                    }
                    ((&self.results["figure"], "a headline figure"), &steps[2..])
                }
                "schema" | "observations" => {
                    return Err(format!(
                        "'{}': schemas/ has no schema of a results file's {}",
                        first.text, first.key
                    ));
                }
                k if HEADER_FIELDS.contains(&k) => (header, &steps[..]),
                _ => (data, &steps[..]),
            };
        walk(root, label, rest)
    }
}

/// What a walk may be at: a schema, or anything (a schema that allows
/// every value, such as a `serde_json::Value`'s, whose steps go unchecked).
enum At<'a> {
    Schemas(Vec<&'a Value>),
    Anything,
}

/// Walk `steps` through `root`, a schema with its `$defs`, of what
/// `label` names.
fn walk(
    root: &Value,
    label: &str,
    steps: &[crate::book::Step],
) -> Result<(), String> {
    let mut here = vec![root];
    let mut before = label.to_string();
    for step in steps {
        let found = match property(root, &here, &step.key)? {
            At::Anything => return Ok(()),
            At::Schemas(found) if found.is_empty() => {
                let arrays = !items(root, &here)?.is_empty();
                return Err(if arrays {
                    format!(
                        "'{}': {before} is an array: name its element by its \
                         setting, as in {}[field=value]",
                        step.text,
                        before.trim_matches('\'')
                    )
                } else {
                    format!("'{}': {before} has no field '{}'", step.text, step.key)
                });
            }
            At::Schemas(found) => found,
        };
        here = found;
        before = format!("'{}'", step.key);
        let Some(picks) = step.picks else { continue };
        let elements = items(root, &here)?;
        if elements.is_empty() {
            return Err(format!(
                "'{}': '{}' is no array, so [{picks}] picks nothing",
                step.text, step.key
            ));
        }
        let wanted = crate::book::picks(picks)
            .map_err(|e| format!("'{}': {e}", step.text))?;
        let by_round =
            matches!(wanted.as_slice(), [(field, _)] if *field == "round");
        if !by_round {
            for (field, _) in &wanted {
                let path: Vec<crate::book::Step> = field
                    .split('.')
                    .map(|f| crate::book::Step {
                        text: f,
                        key: f.to_string(),
                        picks: None,
                    })
                    .collect();
                let has =
                    elements.iter().any(|e| walk_from(root, vec![e], &path).is_ok());
                if !has {
                    return Err(format!(
                        "'{}': no element of '{}' has a field '{field}'",
                        step.text, step.key
                    ));
                }
            }
        }
        here = elements;
    }
    Ok(())
}

/// [`walk`] from `here`, schemas within `root`.
fn walk_from(
    root: &Value,
    here: Vec<&Value>,
    steps: &[crate::book::Step],
) -> Result<(), String> {
    let mut here = here;
    for step in steps {
        here = match property(root, &here, &step.key)? {
            At::Anything => return Ok(()),
            At::Schemas(found) if found.is_empty() => {
                return Err(format!("no field '{}'", step.key));
            }
            At::Schemas(found) => found,
        };
    }
    Ok(())
}

/// The schemas `schema` stands for: itself, through `$ref`, and each
/// alternative of `anyOf`, `oneOf` and `allOf`; `None` when one allows
/// any value.
fn alternatives<'a>(
    root: &'a Value,
    schema: &'a Value,
) -> Result<Option<Vec<&'a Value>>, String> {
    let mut out = Vec::new();
    let mut todo = vec![schema];
    let mut seen = 0;
    while let Some(s) = todo.pop() {
        seen += 1;
        if seen > 10_000 {
            return Err("a schema that refers to itself without end".into());
        }
        let Value::Object(map) = s else {
            if s == &Value::Bool(true) {
                return Ok(None);
            }
            continue;
        };
        if let Some(r) = map.get("$ref").and_then(Value::as_str) {
            let target =
                r.strip_prefix('#').and_then(|p| root.pointer(p)).ok_or_else(
                    || format!("the schema refers to {r}, which it does not hold"),
                )?;
            todo.push(target);
        }
        for union in ["anyOf", "oneOf", "allOf"] {
            todo.extend(
                map.get(union).and_then(Value::as_array).into_iter().flatten(),
            );
        }
        const SHAPE: [&str; 10] = [
            "$ref",
            "anyOf",
            "oneOf",
            "allOf",
            "type",
            "properties",
            "items",
            "additionalProperties",
            "enum",
            "const",
        ];
        if !SHAPE.iter().any(|k| map.contains_key(*k)) {
            return Ok(None);
        }
        out.push(s);
    }
    Ok(Some(out))
}

/// The schemas of field `key` of a value that has one of the schemas
/// `here`.
fn property<'a>(
    root: &'a Value,
    here: &[&'a Value],
    key: &str,
) -> Result<At<'a>, String> {
    let mut found = Vec::new();
    for s in here {
        let Some(all) = alternatives(root, s)? else { return Ok(At::Anything) };
        for alt in all {
            if let Some(p) = alt.get("properties").and_then(|p| p.get(key)) {
                found.push(p);
            } else if let Some(map) = alt.get("additionalProperties")
                && map != &Value::Bool(false)
            {
                found.push(map);
            }
        }
    }
    Ok(At::Schemas(found))
}

/// The schemas of the elements of an array that has one of the schemas
/// `here` (none when it is no array).
fn items<'a>(root: &'a Value, here: &[&'a Value]) -> Result<Vec<&'a Value>, String> {
    let mut found = Vec::new();
    for s in here {
        let Some(all) = alternatives(root, s)? else { continue };
        for alt in all {
            match alt.get("items") {
                Some(Value::Bool(false)) | None => {}
                Some(items) => found.push(items),
            }
            found.extend(
                alt.get("prefixItems")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten(),
            );
        }
    }
    Ok(found)
}

/// The headline keys and pointers a `{{#rests-on}}` condition reads.
fn figures(condition: &Condition) -> Vec<&crate::edition::Figure> {
    match condition {
        Condition::Verdict { .. } => Vec::new(),
        Condition::Figure { figure, .. } => vec![figure],
        Condition::Ratio { over, under, .. } => vec![over, under],
        Condition::All(parts) => parts.iter().flat_map(figures).collect(),
    }
}

/// Check a figure of a results folder `EXP[/SUB]`: a `/pointer` or a
/// headline key.
fn check_figure(schemas: &Schemas, folder: &str, what: &str) -> Result<(), String> {
    let experiment = folder.split('/').next().unwrap_or(folder);
    if what.starts_with('/') {
        schemas.pointer(experiment, what)
    } else {
        schemas.key(experiment, what)
    }
}

/// Every `{{#figure}}` pointer, `{{#headline}}` key and figure of a
/// `{{#rests-on}}` condition in `text` (the book's page `file`) that the
/// schemas do not have, as `FILE:LINE: {{#DIRECTIVE}}: what is wrong`.
pub fn check_page(schemas: &Schemas, file: &str, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for (at, inner) in crate::book::directives(text) {
        let words: Vec<&str> = inner.split_whitespace().collect();
        let checked = match words.as_slice() {
            ["figure", folder, pointer, ..] => {
                check_figure(schemas, folder, pointer)
            }
            ["headline", folder, key, ..] => check_figure(schemas, folder, key),
            ["figure" | "headline", ..] => Err("malformed directive".into()),
            ["rests-on", ..] => {
                let condition = inner["rests-on".len()..].trim();
                Condition::parse(condition).and_then(|c| {
                    figures(&c)
                        .into_iter()
                        .try_for_each(|f| check_figure(schemas, &f.folder, &f.what))
                })
            }
            _ => Ok(()),
        };
        if let Err(e) = checked {
            let line = text[..at].matches('\n').count() + 1;
            problems.push(format!("{file}:{line}: {{{{#{inner}}}}}: {e}"));
        }
    }
    problems
}

/// Every claim whose `figure = "EXP/KEY"` names a key its experiment does
/// not declare, as `claims.toml:LINE: claim ID: what is wrong` (`toml` is
/// the file's text, for the line).
pub fn check_claims(schemas: &Schemas, claims: &[Claim], toml: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for claim in claims {
        let Some(figure) = &claim.figure else { continue };
        let checked = match claim.figure_ref() {
            Some((experiment, key)) => schemas.key(experiment, key),
            None => Err(format!("figure \"{figure}\" is not EXPERIMENT/KEY")),
        };
        if let Err(e) = checked {
            let quoted = format!("\"{figure}\"");
            let line = toml
                .lines()
                .position(|l| {
                    l.trim_start().starts_with("figure") && l.contains(&quoted)
                })
                .map_or(0, |n| n + 1);
            problems.push(format!(
                "claims.toml:{line}: claim {}: figure = {quoted}: {e}",
                claim.id
            ));
        }
        // A figure shown beside it is a key of the same experiment.
        if let (Some(key), Some((experiment, _))) =
            (&claim.beside, claim.figure_ref())
            && let Err(e) = schemas.key(experiment, key)
        {
            problems.push(format!(
                "claims.toml: claim {}: beside = \"{key}\": {e}",
                claim.id
            ));
        }
    }
    problems
}

/// The book's pages, `book/src/**/*.md`, by their path under the checkout.
fn pages(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            pages(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
    Ok(())
}

/// Check every page of the book in `book_src` and every claim against
/// `schemas`: the problems, each naming file and line.
pub fn check_book(
    schemas: &Schemas,
    book_src: &Path,
) -> Result<Vec<String>, String> {
    let root = book_src.parent().and_then(Path::parent).unwrap_or(book_src);
    let mut files = Vec::new();
    pages(book_src, &mut files)
        .map_err(|e| format!("{}: {e}", book_src.display()))?;
    files.sort();
    let mut problems = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let name = path.strip_prefix(root).unwrap_or(&path).display().to_string();
        problems.extend(check_page(schemas, &name, &text));
    }
    let toml = include_str!("../claims.toml");
    problems.extend(check_claims(schemas, &crate::claims::all(), toml));
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether this test run writes the schemas ([`WRITE`]).
    fn writing() -> bool {
        std::env::var_os(WRITE).is_some_and(|v| v == "1")
    }

    #[test]
    fn the_committed_schemas_are_what_the_code_generates() {
        let dir = folder();
        let files = Schemas::generated().unwrap().files();
        let committed = |dir: &Path| -> Vec<String> {
            let mut names: Vec<String> = std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.ends_with(".json"))
                .collect();
            names.sort();
            names
        };
        if writing() {
            for (name, text) in &files {
                crate::results::write_file(&dir.join(name), text).unwrap();
            }
            for stale in committed(&dir) {
                if !files.iter().any(|(name, _)| *name == stale) {
                    std::fs::remove_file(dir.join(stale)).unwrap();
                }
            }
            return;
        }
        let mut wrong = Vec::new();
        for (name, text) in &files {
            match std::fs::read_to_string(dir.join(name)) {
                Ok(old) if old == *text => {}
                Ok(old) => {
                    let line = old
                        .lines()
                        .zip(text.lines())
                        .position(|(a, b)| a != b)
                        .unwrap_or(old.lines().count().min(text.lines().count()));
                    wrong.push(format!(
                        "schemas/{name} is not what the code generates (from line {})",
                        line + 1
                    ));
                }
                Err(e) => wrong.push(format!("schemas/{name}: {e}")),
            }
        }
        for name in committed(&dir) {
            if !files.iter().any(|(n, _)| *n == name) {
                wrong.push(format!("schemas/{name}: no experiment makes it now"));
            }
        }
        assert!(wrong.is_empty(), "{}\nTo update them: {UPDATE}", wrong.join("\n"));
    }

    #[test]
    fn every_pointer_and_key_of_the_book_and_the_claims_is_in_the_schemas() {
        // While they are being written, the schemas they will hold.
        let schemas =
            if writing() { Schemas::generated() } else { Schemas::read(&folder()) };
        let schemas = schemas.unwrap_or_else(|e| panic!("{e}"));
        let book = Path::new(env!("CARGO_MANIFEST_DIR")).join("book/src");
        let problems = check_book(&schemas, &book).unwrap();
        assert!(
            problems.is_empty(),
            "{} pointer(s) or key(s) the committed schemas do not have:\n{}\n\
             (a renamed field: change the book, or the field back; a new \
             headline key: declare it in the experiment's `.headline(&[...])`, \
             then {UPDATE})",
            problems.len(),
            problems.join("\n")
        );
    }

    /// A small schema as schemars writes one: a struct, an `Option` of a
    /// struct, a map, arrays of structs, a `serde_json::Value`.
    fn demo() -> Schemas {
        let data = json!({
            "type": "object",
            "properties": {
                "points": {"type": "array", "items": {"$ref": "#/$defs/Point"}},
                "best": {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}]},
                "by_name": {"type": "object", "additionalProperties": {"type": "number"}},
                "raw": true,
                "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "string"}]}
            },
            "$defs": {
                "Point": {
                    "type": "object",
                    "properties": {
                        "block_bytes": {"type": "integer"},
                        "placement": {"type": "object", "properties": {"name": {"type": "string"}}},
                        "mb_per_s": {"$ref": "#/$defs/Summary"},
                        "runs": {"type": "array", "items": {"type": "number"}}
                    }
                },
                "Summary": {"type": "object", "properties": {"median": {"type": "number"}}}
            }
        });
        let mut schemas = Schemas::generated().unwrap();
        schemas.experiments.insert(
            "demo".into(),
            json!({"experiment": "demo", "headline": ["fork_us", "ratio_{n}_x"], "data": data}),
        );
        schemas
    }

    #[test]
    fn a_pointer_walks_properties_refs_options_maps_and_named_elements() {
        let s = demo();
        for ok in [
            "/points[block_bytes=4096]/mb_per_s/median",
            "/points[placement.name=same-cpu,block_bytes=1]/runs[round=2]",
            "/best/mb_per_s/median",
            "/by_name/anything",
            "/raw/whatever/below",
            "/data/points[block_bytes=1]/block_bytes",
            "/headline/fork_us/interval",
            "/headline/ratio_16_x/value",
            "/machine/cpu_model",
            "/header/settings/rounds",
            "/settings/used/quick",
            "/load/busy",
        ] {
            assert_eq!(s.pointer("demo", ok), Ok(()), "{ok}");
        }
        let refused = [
            (
                "/points/mb_per_s",
                "'mb_per_s': 'points' is an array: name its element",
            ),
            ("/points[block_bytes=1]/mbps", "'mbps': 'points' has no field 'mbps'"),
            (
                "/points[blocks=1]/runs",
                "no element of 'points' has a field 'blocks'",
            ),
            ("/points[placement.nom=x]/runs", "has a field 'placement.nom'"),
            ("/best[block_bytes=1]", "'best' is no array"),
            ("/best/median", "'best' has no field 'median'"),
            ("/nothing", "'nothing': the data has no field 'nothing'"),
            ("/data/nothing", "the data has no field 'nothing'"),
            ("/header/nothing", "the header has no field 'nothing'"),
            (
                "/headline/fork_us/nothing",
                "a headline figure has no field 'nothing'",
            ),
            ("/headline[x=1]", "headline is no array"),
            (
                "/headline/fork_ms/value",
                "headline key 'fork_ms' is not one demo declares",
            ),
            ("/headline/ratio__x/value", "'ratio__x'"),
            ("/headline/fork_us/valeur", "has no field 'valeur'"),
            ("/machine/cpu", "'machine' has no field 'cpu'"),
            ("/observations/x", "no schema of a results file's observations"),
            ("points", "a path starts with /"),
            ("/points[block_bytes=1/v", "has no closing ]"),
        ];
        for (pointer, says) in refused {
            let err = s.pointer("demo", pointer).unwrap_err();
            assert!(err.contains(says), "{pointer}: {err}");
        }
        assert!(s.pointer("nope", "/x").unwrap_err().contains("no experiment nope"));
    }

    #[test]
    fn a_headline_family_stands_for_one_or_more_word_characters() {
        assert!(key_matches("fork_us", "fork_us"));
        assert!(!key_matches("fork_us", "fork_us_2"));
        assert!(key_matches("creattime_ratio_{samples}", "creattime_ratio_128"));
        assert!(key_matches("creattime_ratio_{samples}", "creattime_ratio_spread"));
        assert!(!key_matches("creattime_ratio_{samples}", "creattime_ratio_"));
        assert!(key_matches("{method}_us", "fork_exit_waitpid_us"));
        assert!(!key_matches("{method}_us", "_us"));
        assert!(!key_matches("{method}_us", "fork_ms"));
        assert!(key_matches("best_pool_p{n}", "best_pool_p16"));
        assert!(!key_matches("best_pool_p{n}", "best_pool_P16"));
        assert!(key_matches("{a}_{b}_us", "threads_same_net_us"));
    }

    #[test]
    fn a_renamed_field_fails_the_books_own_pointers_naming_file_line_and_step() {
        let mut schemas = Schemas::generated().unwrap();
        // As if the code renamed fork-vs-thread's `series`.
        let data =
            &mut schemas.experiments.get_mut("fork-vs-thread").unwrap()["data"];
        let props = data["properties"].as_object_mut().unwrap();
        let series =
            props.remove("series").expect("fork-vs-thread's data has series");
        props.insert("series_renamed".into(), series);
        let page =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("book/src/fork-vs-thread.md");
        let text = std::fs::read_to_string(&page).unwrap();
        let problems = check_page(&schemas, "book/src/fork-vs-thread.md", &text);
        let uses = text.matches("{{#figure fork-vs-thread /series").count()
            + text.matches("{{#figure fork-vs-thread/cpu0 /series").count();
        assert!(uses > 0, "the chapter quotes no series");
        assert!(problems.len() >= uses, "{problems:#?}");
        for problem in &problems {
            assert!(problem.starts_with("book/src/fork-vs-thread.md:"), "{problem}");
            assert!(problem.contains(": {{#"), "names the directive: {problem}");
            assert!(problem.contains("has no field 'series'"), "{problem}");
            let line: usize = problem.split(':').nth(1).unwrap().parse().unwrap();
            let at = text.lines().nth(line - 1).unwrap();
            assert!(at.contains("/series"), "line {line} is {at}");
        }
    }

    #[test]
    fn an_undeclared_key_fails_in_every_directive_and_in_a_claim() {
        let s = demo();
        let page = "Intro.\n\n\
                    It took {{#headline demo fork_us 1}}, {{#figure demo /headline/fork_us/value}}.\n\
                    {{#rests-on demo fork_ms above 1}}More.{{/rests-on}}\n\
                    {{#headline demo/cpu0 ratio_x 2}} and {{#figure demo /points[block_bytes=1]/mb_per_s/mean}}\n\
                    {{#rests-on demo fork_us over demo /by_name/x below 2 and demo /pointz above 1}}x{{/rests-on}}\n\
                    {{#rests-on demo fork_us sideways 1}}y{{/rests-on}}\n\
                    {{#headline demo}}\n";
        let problems = check_page(&s, "demo.md", page);
        let want = [
            (
                "demo.md:4: {{#rests-on demo fork_ms above 1}}",
                "'fork_ms' is not one demo declares",
            ),
            (
                "demo.md:5: {{#headline demo/cpu0 ratio_x 2}}",
                "'ratio_x' is not one demo declares",
            ),
            (
                "demo.md:5: {{#figure demo /points[block_bytes=1]/mb_per_s/mean}}",
                "'mean': 'mb_per_s' has no field 'mean'",
            ),
            (
                "demo.md:6: {{#rests-on demo fork_us over",
                "'pointz': the data has no field 'pointz'",
            ),
            (
                "demo.md:7: {{#rests-on demo fork_us sideways 1}}",
                "give above, below or contains",
            ),
            ("demo.md:8: {{#headline demo}}", "malformed"),
        ];
        assert_eq!(problems.len(), want.len(), "{problems:#?}");
        for ((start, says), got) in want.iter().zip(&problems) {
            assert!(
                got.starts_with(start) && got.contains(says),
                "{got}\nwanted {start} ... {says}"
            );
        }
        let claim = |id: &str, figure: &str| Claim {
            id: id.into(),
            source: "s".into(),
            claim: "c".into(),
            then: "t".into(),
            setting: "s".into(),
            cannot: None,
            figure: Some(figure.into()),
            one_cpu: false,
            holds: Some([1.0, f64::INFINITY]),
            why: None,
            depends: None,
            depends_on: None,
            depends_why: None,
            beside: None,
        };
        let toml = "[[claim]]\nid = \"a\"\nfigure = \"demo/fork_us\"\n\n[[claim]]\nid = \"b\"\nfigure = \"demo/fork_ms\"\n";
        let problems = check_claims(
            &s,
            &[claim("a", "demo/fork_us"), claim("b", "demo/fork_ms")],
            toml,
        );
        assert_eq!(problems.len(), 1, "{problems:#?}");
        assert!(
            problems[0].starts_with("claims.toml:7: claim b: figure = \"demo/fork_ms\": headline key 'fork_ms'"),
            "{}",
            problems[0]
        );
    }

    #[test]
    fn publishing_refuses_a_key_or_a_data_type_its_experiment_does_not_declare() {
        let fig = |key: &str| -> Headline {
            crate::report::headline().exact(key, "a count", 1.0, "").build()
        };
        let data = crate::experiments::find("create-destroy").unwrap().data.unwrap();
        let data = (data.name)();
        assert_eq!(check_report("create-destroy", &fig("fork_us"), data), Ok(()));
        assert_eq!(
            check_report("create-destroy", &fig("creattime_ratio_64"), data),
            Ok(())
        );
        let err = check_report("create-destroy", &fig("fork_ms"), data).unwrap_err();
        assert!(err.contains("headline key fork_ms not declared"), "{err}");
        assert!(err.contains(".headline(&[...])") && err.contains(WRITE), "{err}");
        let err = check_report("create-destroy", &fig("fork_us"), "lab::Other")
            .unwrap_err();
        assert!(err.contains("publishes lab::Other"), "{err}");
        assert!(check_report("no-such", &fig("x"), data).is_err());
    }

    #[test]
    fn every_experiment_declares_its_data_and_headline_keys() {
        for e in crate::experiments::every() {
            assert!(e.data.is_some(), "{}: no `.data::<Data>()`", e.name);
            assert!(!e.headline.is_empty(), "{}: no `.headline(&[...])`", e.name);
            for key in e.headline {
                let word = |c: char| {
                    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'
                };
                let plain: String = key.split(['{', '}']).step_by(2).collect();
                assert!(plain.chars().all(word), "{}: '{key}' is no key", e.name);
            }
        }
    }
}
