//! What each experiment's results hold: the headline keys it declares
//! ([`crate::experiments::Experiment::headline`]), which
//! [`crate::report::Report::publish`] holds it to, and the type of its
//! data ([`crate::experiments::Experiment::data`]), whose JSON Schema is
//! made from the type (`schemars`), descriptions left out: it says what is
//! there, the code's comments say what it means.

use schemars::Schema;

use crate::experiments::Experiment;
use crate::report::Headline;

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
             in its EXPERIMENT",
            if undeclared.len() == 1 { "" } else { "s" },
            undeclared.join(", "),
            if undeclared.len() == 1 { "it" } else { "them" },
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(err.contains(".headline(&[...])"), "{err}");
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
