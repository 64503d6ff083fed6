//! `scenario.yaml` and the checks of its `expect` against an answer.
//!
//! ```yaml
//! description: one line
//! settings: {}            # optional; passed as --settings-json
//! contextAware: false     # optional; true passes --allow-context-aware
//! session: session.yml    # optional kwctl replay file in the same directory
//! expect:
//!   allowed: false
//!   code: 403                          # exact status.code
//!   messageContains: ["...", "..."]    # all must appear in status.message
//!   messageAbsent: true                # status.message absent or empty
//!   warningsContain: ["..."]           # each in at least one warning
//!   warnings: 1                        # exact number of warnings
//!   auditAnnotationsContain: {key: fragment}
//!   settingsError: "..."               # settings refused; nothing else then
//! ```
//!
//! Unknown keys are errors, so a typo cannot make a check silently vanish.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const SCENARIO_FILE: &str = "scenario.yaml";
pub const REQUEST_FILE: &str = "request.json";

/// scenario.yaml.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScenarioSpec {
    pub description: String,
    /// Passed as `--settings-json` when present.
    #[serde(default)]
    pub settings: Option<Value>,
    /// `--allow-context-aware`.
    #[serde(default)]
    pub context_aware: bool,
    /// A replay file in the scenario's directory (`--replay-host-capabilities-interactions`).
    #[serde(default)]
    pub session: Option<String>,
    pub expect: Expect,
}

impl ScenarioSpec {
    /// Parses scenario.yaml and checks that its expectations can hold together.
    pub fn parse(text: &str) -> Result<ScenarioSpec> {
        let spec: ScenarioSpec = yaml_serde::from_str(text)?;
        spec.expect.check_consistency()?;
        Ok(spec)
    }
}

/// scenario.yaml's `expect`. Serialized as it is read (the playground's examples.json carries
/// it to the page), absent values left out.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct Expect {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed: Option<bool>,
    /// Exact `status.code`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<u16>,
    /// Fragments that must all appear in `status.message`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub message_contains: Vec<String>,
    /// `status.message` must be absent or empty.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub message_absent: bool,
    /// Each fragment must appear in at least one warning.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings_contain: Vec<String>,
    /// Exact number of warnings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warnings: Option<usize>,
    /// key -> fragment of its value.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub audit_annotations_contain: BTreeMap<String, String>,
    /// Settings validation must fail (the error contains this); no response then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings_error: Option<String>,
}

/// An answer as the expectations read it: kwctl's AdmissionResponse line, or the playground's
/// verdict.
#[derive(Clone, Copy, Debug)]
pub struct Response<'a> {
    pub allowed: bool,
    pub code: Option<u16>,
    pub message: Option<&'a str>,
    pub warnings: &'a [String],
    pub audit_annotations: Option<&'a BTreeMap<String, String>>,
}

impl Expect {
    /// Expectations that cannot hold together are refused when the scenario is read.
    pub fn check_consistency(&self) -> Result<()> {
        if self.settings_error.is_some() {
            let response_expectations = self.allowed.is_some()
                || self.code.is_some()
                || !self.message_contains.is_empty()
                || self.message_absent
                || !self.warnings_contain.is_empty()
                || self.warnings.is_some()
                || !self.audit_annotations_contain.is_empty();
            if response_expectations {
                bail!("expect.settingsError means no response: drop the response expectations (allowed, code, message..., warnings..., auditAnnotationsContain)");
            }
        } else if self.allowed.is_none() {
            bail!("expect.allowed is required (or expect.settingsError)");
        }
        if self.message_absent && !self.message_contains.is_empty() {
            bail!("expect.messageAbsent contradicts expect.messageContains");
        }
        Ok(())
    }

    /// The response expectations an answer does not meet, one readable line each. With
    /// `settingsError` the answer itself is the mismatch: see [`Expect::answered`].
    pub fn response_mismatches(&self, response: &Response) -> Vec<String> {
        let mut failures = Vec::new();
        let message = response.message;
        if let Some(allowed) = self.allowed {
            if allowed != response.allowed {
                let message = message
                    .map(|m| format!(" (message: {m:?})"))
                    .unwrap_or_default();
                failures.push(format!(
                    "expected allowed: {allowed}, got allowed: {}{message}",
                    response.allowed
                ));
            }
        }
        if let Some(expected) = self.code {
            if response.code != Some(expected) {
                let got = response
                    .code
                    .map_or("no code".to_string(), |c| c.to_string());
                failures.push(format!("expected status.code {expected}, got {got}"));
            }
        }
        for fragment in &self.message_contains {
            match message {
                Some(m) if m.contains(fragment.as_str()) => {}
                Some(m) => failures.push(format!(
                    "status.message does not contain {fragment:?}; message: {m:?}"
                )),
                None => failures.push(format!(
                    "status.message does not contain {fragment:?}: there is no message"
                )),
            }
        }
        if self.message_absent {
            if let Some(m) = message.filter(|m| !m.is_empty()) {
                failures.push(format!("expected no status.message, got {m:?}"));
            }
        }
        let warnings = response.warnings;
        for fragment in &self.warnings_contain {
            if !warnings.iter().any(|w| w.contains(fragment.as_str())) {
                failures.push(format!(
                    "no warning contains {fragment:?}; warnings: {warnings:?}"
                ));
            }
        }
        if let Some(count) = self.warnings {
            if warnings.len() != count {
                failures.push(format!(
                    "expected {count} warning(s), got {}: {warnings:?}",
                    warnings.len()
                ));
            }
        }
        let empty = BTreeMap::new();
        let annotations = response.audit_annotations.unwrap_or(&empty);
        for (key, fragment) in &self.audit_annotations_contain {
            match annotations.get(key) {
                Some(value) if value.contains(fragment.as_str()) => {}
                Some(value) => failures.push(format!(
                    "auditAnnotations[{key:?}] does not contain {fragment:?}; value: {value:?}"
                )),
                None => failures.push(format!(
                    "auditAnnotations has no key {key:?}; keys: {:?}",
                    annotations.keys().collect::<Vec<_>>()
                )),
            }
        }
        failures
    }

    /// What is wrong with an answer (`shown`: how to show it) when the settings were to be
    /// refused; `None` when no refusal is expected.
    pub fn answered(&self, shown: &str) -> Option<String> {
        self.settings_error.as_ref().map(|_| {
            format!("expected the settings to be refused, but they were accepted: {shown}")
        })
    }

    /// What is wrong with a refusal of the settings: `output` is searched for the expected
    /// fragment, `error` is how to show the refusal.
    pub fn refusal_mismatch(&self, output: &str, error: &str) -> Option<String> {
        match &self.settings_error {
            Some(fragment) if output.contains(fragment.as_str()) => None,
            Some(fragment) => Some(format!(
                "settings refused? the error does not contain {fragment:?}; the error was: {error}"
            )),
            None => Some(format!("the settings were refused: {error}")),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub dir: PathBuf,
    pub spec: ScenarioSpec,
}

impl Scenario {
    /// Reads a scenario directory: its scenario.yaml, and that the files it names are there.
    pub fn load(dir: &Path) -> Result<Scenario> {
        let dir = dir
            .canonicalize()
            .with_context(|| format!("cannot open scenario directory {}", dir.display()))?;
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| dir.display().to_string());
        let spec_path = dir.join(SCENARIO_FILE);
        let text = std::fs::read_to_string(&spec_path)
            .with_context(|| format!("cannot read {}", spec_path.display()))?;
        let spec = ScenarioSpec::parse(&text)
            .with_context(|| format!("invalid {}", spec_path.display()))?;
        let request = dir.join(REQUEST_FILE);
        if !request.is_file() {
            bail!("{} is missing", request.display());
        }
        if let Some(session) = &spec.session {
            let path = dir.join(session);
            if !path.is_file() {
                bail!("session file {} is missing", path.display());
            }
        }
        Ok(Scenario { name, dir, spec })
    }

    pub fn request_path(&self) -> PathBuf {
        self.dir.join(REQUEST_FILE)
    }

    /// The AdmissionRequest, parsed.
    pub fn request(&self) -> Result<Value> {
        let path = self.request_path();
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("invalid {}", path.display()))
    }

    pub fn session_path(&self) -> Option<PathBuf> {
        self.spec.session.as_ref().map(|s| self.dir.join(s))
    }
}

/// The scenario directories under `root` (those holding a scenario.yaml, plus any other
/// non-hidden directory, so a misnamed file is reported rather than skipped), sorted.
pub fn discover(root: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(root)
        .with_context(|| format!("cannot list scenarios in {}", root.display()))?;
    let mut dirs = Vec::new();
    for entry in entries {
        let entry = entry?;
        let hidden = entry.file_name().to_string_lossy().starts_with('.');
        if entry.file_type()?.is_dir() && !hidden {
            dirs.push(entry.path());
        }
    }
    dirs.sort();
    Ok(dirs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expect(yaml: &str) -> Expect {
        yaml_serde::from_str(yaml).unwrap()
    }

    #[test]
    fn specs_are_strict() {
        let typo =
            ScenarioSpec::parse("description: x\nexpect: {allowed: true, mesageContains: [a]}\n");
        assert!(format!("{:#}", typo.unwrap_err()).contains("mesageContains"));
        let err = ScenarioSpec::parse("description: x\nexpect: {}\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "expect.allowed is required (or expect.settingsError)"
        );
        assert!(ScenarioSpec::parse(
            "description: x\nexpect: {settingsError: a, allowed: false}\n"
        )
        .is_err());
        assert!(ScenarioSpec::parse(
            "description: x\nexpect: {allowed: false, messageAbsent: true, messageContains: [a]}\n"
        )
        .is_err());
        let dup = ScenarioSpec::parse("description: x\ndescription: y\nexpect: {allowed: true}\n");
        assert!(format!("{:#}", dup.unwrap_err()).contains("duplicate field"));
    }

    #[test]
    fn expect_serializes_as_it_reads() {
        let e = expect("allowed: false\ncode: 403\nmessageContains: [a]\n");
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"allowed":false,"code":403,"messageContains":["a"]}"#
        );
    }

    #[test]
    fn every_response_mismatch_is_named() {
        let e = expect(
            r#"
allowed: true
code: 400
messageContains: ["rotation"]
warningsContain: ["nothing"]
warnings: 0
auditAnnotationsContain: {capi/finding: rotation, other: x}
"#,
        );
        let warnings = vec!["spec drift noticed".to_string()];
        let annotations = BTreeMap::from([("capi/finding".to_string(), "in-place".to_string())]);
        let response = Response {
            allowed: false,
            code: Some(403),
            message: Some("configRef edited in place"),
            warnings: &warnings,
            audit_annotations: Some(&annotations),
        };
        let failures = e.response_mismatches(&response);
        assert_eq!(
            failures,
            vec![
                r#"expected allowed: true, got allowed: false (message: "configRef edited in place")"#,
                "expected status.code 400, got 403",
                r#"status.message does not contain "rotation"; message: "configRef edited in place""#,
                r#"no warning contains "nothing"; warnings: ["spec drift noticed"]"#,
                r#"expected 0 warning(s), got 1: ["spec drift noticed"]"#,
                r#"auditAnnotations["capi/finding"] does not contain "rotation"; value: "in-place""#,
                r#"auditAnnotations has no key "other"; keys: ["capi/finding"]"#,
            ]
        );
        let absent = expect("allowed: false\nmessageAbsent: true\n");
        assert_eq!(
            absent.response_mismatches(&response),
            vec![r#"expected no status.message, got "configRef edited in place""#.to_string()]
        );
    }

    #[test]
    fn settings_refusals() {
        let e = expect("settingsError: inPlaceEdits\n");
        assert_eq!(
            e.refusal_mismatch("inPlaceEdits: unknown action", "x"),
            None
        );
        assert_eq!(
            e.refusal_mismatch("exemptUsers: not a list", "exemptUsers: not a list"),
            Some(r#"settings refused? the error does not contain "inPlaceEdits"; the error was: exemptUsers: not a list"#.to_string())
        );
        assert!(e.answered("{}").unwrap().contains("accepted: {}"));
        let allowed = expect("allowed: true\n");
        assert_eq!(allowed.answered("{}"), None);
        assert_eq!(
            allowed.refusal_mismatch("a", "a"),
            Some("the settings were refused: a".to_string())
        );
    }
}
