//! The page's examples: the e2e scenarios (`e2e-tests/scenarios/<name>/`) as the page's inputs,
//! with each scenario's own expectation, checked against the playground before it is offered.
//!
//! A scenario is offered when the playground answers it as its `expect` says. Scenarios that
//! replay context-aware lookups (`session`, `contextAware`) are not: the page has no cluster.

use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{evaluate, Answer, Context};

/// One example, as the page loads it.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Example {
    pub name: String,
    pub description: String,
    pub operation: String,
    /// The old object as YAML, empty for a CREATE.
    pub old: String,
    /// The new object as YAML, empty for a DELETE.
    pub new: String,
    /// The settings as indented JSON.
    pub settings: String,
    pub username: String,
    pub groups: Vec<String>,
    pub sub_resource: String,
    /// The scenario's `expect`, as the e2e runner reads it.
    pub expect: Expect,
}

/// scenario.yaml's `expect` (see e2e-tests/src/scenarios.rs).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct Expect {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<u16>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub message_contains: Vec<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub message_absent: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings_contain: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warnings: Option<usize>,
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub audit_annotations_contain: std::collections::BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings_error: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Scenario {
    description: String,
    #[serde(default)]
    settings: Option<Value>,
    #[serde(default)]
    context_aware: bool,
    #[serde(default)]
    session: Option<String>,
    expect: Expect,
}

fn yaml(object: Option<&Value>) -> Result<String, String> {
    match object {
        None | Some(Value::Null) => Ok(String::new()),
        Some(o) => yaml_serde::to_string(o).map_err(|e| e.to_string()),
    }
}

fn str_at<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// Reads one scenario directory. `Ok(None)`: a context-aware scenario, not for the page.
pub fn read(dir: &Path) -> Result<Option<Example>, String> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let read =
        |file: &str| fs::read_to_string(dir.join(file)).map_err(|e| format!("{name}/{file}: {e}"));
    let scenario: Scenario = yaml_serde::from_str(&read("scenario.yaml")?)
        .map_err(|e| format!("{name}/scenario.yaml: {e}"))?;
    if scenario.session.is_some() || scenario.context_aware {
        return Ok(None);
    }
    let request: Value = serde_json::from_str(&read("request.json")?)
        .map_err(|e| format!("{name}/request.json: {e}"))?;
    let settings = scenario
        .settings
        .unwrap_or(Value::Object(Default::default()));
    Ok(Some(Example {
        description: scenario.description,
        operation: str_at(&request, "/operation").to_string(),
        old: yaml(request.get("oldObject")).map_err(|e| format!("{name}: {e}"))?,
        new: yaml(request.get("object")).map_err(|e| format!("{name}: {e}"))?,
        settings: serde_json::to_string_pretty(&settings).map_err(|e| e.to_string())?,
        username: str_at(&request, "/userInfo/username").to_string(),
        groups: request
            .pointer("/userInfo/groups")
            .and_then(Value::as_array)
            .map(|g| {
                g.iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default(),
        sub_resource: str_at(&request, "/subResource").to_string(),
        expect: scenario.expect,
        name,
    }))
}

impl Example {
    pub fn context(&self) -> Context {
        Context {
            username: self.username.clone(),
            groups: self.groups.clone(),
            sub_resource: self.sub_resource.clone(),
        }
    }

    /// The playground's answer to this example.
    pub fn answer(&self) -> Answer {
        evaluate(
            &self.old,
            &self.new,
            &self.operation,
            &self.settings,
            &self.context(),
        )
    }

    /// Whether the playground answers as the scenario expects; the difference otherwise.
    pub fn check(&self) -> Result<(), String> {
        let expect = &self.expect;
        let outcome = match (self.answer(), &expect.settings_error) {
            (Answer::InputError { input, error }, Some(fragment)) => {
                return if input == "settings" && error.contains(fragment.as_str()) {
                    Ok(())
                } else {
                    Err(format!("{input}: {error:?} does not contain {fragment:?}"))
                };
            }
            (Answer::InputError { input, error }, None) => {
                return Err(format!("input error in {input}: {error}"))
            }
            (Answer::Verdict(_), Some(fragment)) => {
                return Err(format!("settings accepted, expected {fragment:?}"))
            }
            (Answer::Verdict(outcome), None) => outcome,
        };
        let mut wrong = Vec::new();
        if expect.allowed.is_some_and(|a| a != outcome.allowed) {
            wrong.push(format!("allowed is {}", outcome.allowed));
        }
        if expect.code.is_some() && expect.code != outcome.code {
            wrong.push(format!("code is {:?}", outcome.code));
        }
        let message = outcome.message.as_deref().unwrap_or("");
        for fragment in &expect.message_contains {
            if !message.contains(fragment.as_str()) {
                wrong.push(format!("message {message:?} lacks {fragment:?}"));
            }
        }
        if expect.message_absent && !message.is_empty() {
            wrong.push(format!("message {message:?} present"));
        }
        for fragment in &expect.warnings_contain {
            if !outcome
                .warnings
                .iter()
                .any(|w| w.contains(fragment.as_str()))
            {
                wrong.push(format!("no warning contains {fragment:?}"));
            }
        }
        if expect.warnings.is_some_and(|n| n != outcome.warnings.len()) {
            wrong.push(format!("{} warnings", outcome.warnings.len()));
        }
        for (key, fragment) in &expect.audit_annotations_contain {
            let value = outcome
                .audit_annotations
                .get(key)
                .map_or("", String::as_str);
            if !value.contains(fragment.as_str()) {
                wrong.push(format!(
                    "audit annotation {key} {value:?} lacks {fragment:?}"
                ));
            }
        }
        if wrong.is_empty() {
            Ok(())
        } else {
            Err(wrong.join("; "))
        }
    }
}

/// The scenarios of a directory, sorted by name.
#[derive(Debug, Default)]
pub struct Collected {
    /// The examples the page offers.
    pub offered: Vec<Example>,
    /// The names left out, with why.
    pub left_out: Vec<(String, String)>,
}

/// Every scenario of `dir`: offered ones, and the names left out with why.
pub fn collect(dir: &Path) -> Result<Collected, String> {
    let mut dirs: Vec<_> = fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.join("scenario.yaml").is_file())
        .collect();
    dirs.sort();
    let (mut offered, mut left_out) = (Vec::new(), Vec::new());
    for path in dirs {
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        match read(&path)? {
            None => left_out.push((name, "context-aware (replays lookups)".to_string())),
            Some(example) => match example.check() {
                Ok(()) => offered.push(example),
                Err(why) => left_out.push((name, why)),
            },
        }
    }
    Ok(Collected { offered, left_out })
}
