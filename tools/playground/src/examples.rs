//! The page's examples: the e2e scenarios (`e2e-tests/scenarios/<name>/`) as the page's inputs,
//! with each scenario's own expectation, checked against the playground before it is offered.
//!
//! A scenario is offered when the playground answers it as its `expect` says. Scenarios that
//! replay context-aware lookups (`session`, `contextAware`) are not: the page has no cluster.

use std::path::Path;

use scenario_model::{discover, Expect, Response, Scenario};
use serde::Serialize;
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
    let scenario = Scenario::load(dir).map_err(|e| format!("{e:#}"))?;
    let name = scenario.name.clone();
    if scenario.spec.session.is_some() || scenario.spec.context_aware {
        return Ok(None);
    }
    let request = scenario.request().map_err(|e| format!("{e:#}"))?;
    let settings = scenario
        .spec
        .settings
        .unwrap_or(Value::Object(Default::default()));
    Ok(Some(Example {
        description: scenario.spec.description,
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
        expect: scenario.spec.expect,
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

    /// Whether the playground answers as the scenario expects, checked as the e2e runner
    /// checks kwctl's answer; the differences otherwise.
    pub fn check(&self) -> Result<(), String> {
        let expect = &self.expect;
        let wrong: Vec<String> = match self.answer() {
            Answer::InputError {
                input: "settings",
                error,
            } => expect
                .refusal_mismatch(&error, &error)
                .into_iter()
                .collect(),
            Answer::InputError { input, error } => {
                vec![format!("input error in {input}: {error}")]
            }
            Answer::Verdict(outcome) => {
                let shown = serde_json::to_string(&outcome).unwrap_or_default();
                match expect.answered(&shown) {
                    Some(wrong) => vec![wrong],
                    None => expect.response_mismatches(&Response {
                        allowed: outcome.allowed,
                        code: outcome.code,
                        message: outcome.message.as_deref(),
                        warnings: &outcome.warnings,
                        audit_annotations: Some(&outcome.audit_annotations),
                    }),
                }
            }
        };
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
    let dirs = discover(dir).map_err(|e| format!("{e:#}"))?;
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
