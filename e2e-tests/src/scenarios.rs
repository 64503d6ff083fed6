//! End-to-end scenarios: a directory per scenario with the request kwctl would be given and
//! what the answer must look like. A scenario is run through an evaluator command line —
//! `policy-host run ...` or `kwctl run ...`, with the same arguments — and its output line is
//! checked against the expectations.
//!
//! ```text
//! scenarios/<name>/request.json   a raw AdmissionRequest (kwctl run --request-path)
//! scenarios/<name>/scenario.yaml  description, settings, contextAware, session, expect
//! scenarios/<name>/<session>.yml  optional kwctl replay session
//! ```

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::Deserialize;
use serde_json::Value;

use crate::admission::AdmissionResponse;

pub const SCENARIO_FILE: &str = "scenario.yaml";
pub const REQUEST_FILE: &str = "request.json";

/// A scenario's run is killed after this long (kwctl has no evaluation deadline).
pub const RUN_TIMEOUT: Duration = Duration::from_secs(120);

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

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Expect {
    #[serde(default)]
    pub allowed: Option<bool>,
    /// Exact `status.code`.
    #[serde(default)]
    pub code: Option<u16>,
    /// Fragments that must all appear in `status.message`.
    #[serde(default)]
    pub message_contains: Vec<String>,
    /// `status.message` must be absent or empty.
    #[serde(default)]
    pub message_absent: bool,
    /// Each fragment must appear in at least one warning.
    #[serde(default)]
    pub warnings_contain: Vec<String>,
    /// Exact number of warnings.
    #[serde(default)]
    pub warnings: Option<usize>,
    /// key -> fragment of its value.
    #[serde(default)]
    pub audit_annotations_contain: BTreeMap<String, String>,
    /// Settings validation must fail (non-zero exit, stderr contains this); no response then.
    #[serde(default)]
    pub settings_error: Option<String>,
}

impl Expect {
    fn check_consistency(&self) -> Result<()> {
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
}

#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub dir: PathBuf,
    pub spec: ScenarioSpec,
}

impl Scenario {
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
        let spec: ScenarioSpec = yaml_serde::from_str(&text)
            .with_context(|| format!("invalid {}", spec_path.display()))?;
        spec.expect
            .check_consistency()
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvaluatorKind {
    PolicyHost,
    Kwctl,
}

/// The program scenarios are run through. Both take the same `run` arguments.
#[derive(Clone, Debug)]
pub struct Evaluator {
    pub program: PathBuf,
    pub kind: EvaluatorKind,
}

impl Evaluator {
    pub fn policy_host(program: impl Into<PathBuf>) -> Evaluator {
        Evaluator {
            program: program.into(),
            kind: EvaluatorKind::PolicyHost,
        }
    }

    pub fn kwctl(program: impl Into<PathBuf>) -> Evaluator {
        Evaluator {
            program: program.into(),
            kind: EvaluatorKind::Kwctl,
        }
    }

    pub fn name(&self) -> &'static str {
        match self.kind {
            EvaluatorKind::PolicyHost => "policy-host",
            EvaluatorKind::Kwctl => "kwctl",
        }
    }

    /// `run [--settings-json J] [--allow-context-aware] [--replay-host-capabilities-interactions S]
    /// --request-path R MODULE`
    pub fn args(&self, scenario: &Scenario, module: &Path) -> Result<Vec<OsString>> {
        let mut args: Vec<OsString> = vec!["run".into()];
        if let Some(settings) = &scenario.spec.settings {
            args.push("--settings-json".into());
            args.push(serde_json::to_string(settings)?.into());
        }
        if scenario.spec.context_aware {
            args.push("--allow-context-aware".into());
        }
        if let Some(session) = scenario.session_path() {
            args.push("--replay-host-capabilities-interactions".into());
            args.push(session.into());
        }
        args.push("--request-path".into());
        args.push(scenario.request_path().into());
        args.push(module.into());
        Ok(args)
    }

    pub fn command_line(&self, scenario: &Scenario, module: &Path) -> Result<String> {
        let mut line = self.program.display().to_string();
        for arg in self.args(scenario, module)? {
            let arg = arg.to_string_lossy().into_owned();
            if arg
                .chars()
                .any(|c| c.is_whitespace() || "\"'{}$\\".contains(c))
            {
                line.push_str(&format!(" '{}'", arg.replace('\'', r"'\''")));
            } else {
                line.push(' ');
                line.push_str(&arg);
            }
        }
        Ok(line)
    }

    /// Runs one scenario. `Err` only when the program cannot be started.
    pub fn run(&self, scenario: &Scenario, module: &Path) -> Result<Outcome> {
        let mut child = Command::new(&self.program)
            .args(self.args(scenario, module)?)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {}", self.program.display()))?;
        let stdout = read_in_background(child.stdout.take());
        let stderr = read_in_background(child.stderr.take());
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break Some(status);
            }
            if started.elapsed() > RUN_TIMEOUT {
                // The child is ours; ignore a kill that races with its exit.
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let stdout = stdout.join().unwrap_or_default();
        let mut stderr = stderr.join().unwrap_or_default();
        if status.is_none() {
            stderr.push_str(&format!("\n(killed after {} s)", RUN_TIMEOUT.as_secs()));
        }
        Ok(Outcome::new(
            status.and_then(|s| s.code()),
            status.is_some_and(|s| s.success()),
            stdout,
            stderr,
        ))
    }
}

fn read_in_background(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// What a run printed, and the AdmissionResponse line if there is one.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub exit_code: Option<i32>,
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
    pub response: std::result::Result<AdmissionResponse, String>,
}

impl Outcome {
    pub fn new(exit_code: Option<i32>, success: bool, stdout: String, stderr: String) -> Outcome {
        let response = stdout
            .lines()
            .rev()
            .map(str::trim)
            .find(|line| line.starts_with('{'))
            .ok_or_else(|| "no JSON line on stdout".to_string())
            .and_then(|line| {
                serde_json::from_str::<AdmissionResponse>(line).map_err(|e| format!("{e}: {line}"))
            });
        Outcome {
            exit_code,
            success,
            stdout,
            stderr,
            response,
        }
    }

    /// The error kwctl/policy-host reported (`Error: ...` on stderr), else stderr's last line.
    pub fn error_text(&self) -> String {
        let lines: Vec<&str> = self
            .stderr
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        lines
            .iter()
            .find_map(|line| line.strip_prefix("Error: "))
            .or_else(|| lines.last().copied())
            .unwrap_or("(no output on stderr)")
            .to_string()
    }

    /// What the guest sent with console_log (policy-host's and kwctl's log formats).
    pub fn guest_logs(&self) -> Vec<String> {
        self.stderr
            .lines()
            .filter_map(|line| {
                if let Some((_, message)) = line.split_once("policy console_log: ") {
                    return Some(message.to_string());
                }
                let (_, rest) = line.split_once("Guest module ")?;
                rest.split_once(": ")
                    .map(|(_, message)| message.to_string())
            })
            .collect()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Reject,
    /// The run failed (non-zero exit, no response) or the host answered 500 for the policy.
    Error,
}

impl Verdict {
    pub fn of(outcome: &Outcome) -> Verdict {
        match &outcome.response {
            Ok(response) if outcome.success => {
                if response.allowed {
                    Verdict::Allow
                } else if response.status.as_ref().and_then(|s| s.code) == Some(500) {
                    Verdict::Error
                } else {
                    Verdict::Reject
                }
            }
            _ => Verdict::Error,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Verdict::Allow => "ALLOW",
            Verdict::Reject => "REJECT",
            Verdict::Error => "ERROR",
        }
    }
}

/// The expectations a run does not meet, one readable line each (empty: the scenario passes).
pub fn check(expect: &Expect, outcome: &Outcome) -> Vec<String> {
    let mut failures = Vec::new();
    if let Some(fragment) = &expect.settings_error {
        if outcome.success {
            let got = match &outcome.response {
                Ok(response) => response.to_line(),
                Err(_) => outcome.stdout.trim().to_string(),
            };
            failures.push(format!(
                "expected the settings to be refused (non-zero exit), but the run succeeded: {got}"
            ));
        } else if !outcome.stderr.contains(fragment.as_str()) {
            failures.push(format!(
                "settings refused? stderr does not contain {fragment:?}; the error was: {}",
                outcome.error_text()
            ));
        }
        return failures;
    }
    if !outcome.success {
        failures.push(format!(
            "the run failed (exit code {}): {}",
            outcome
                .exit_code
                .map_or("none".to_string(), |c| c.to_string()),
            outcome.error_text()
        ));
        return failures;
    }
    let response = match &outcome.response {
        Ok(response) => response,
        Err(e) => {
            failures.push(format!("no AdmissionResponse on stdout: {e}"));
            return failures;
        }
    };
    let message = response.status.as_ref().and_then(|s| s.message.as_deref());
    let code = response.status.as_ref().and_then(|s| s.code);
    if let Some(allowed) = expect.allowed {
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
    if let Some(expected) = expect.code {
        if code != Some(expected) {
            let got = code.map_or("no code".to_string(), |c| c.to_string());
            failures.push(format!("expected status.code {expected}, got {got}"));
        }
    }
    for fragment in &expect.message_contains {
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
    if expect.message_absent {
        if let Some(m) = message.filter(|m| !m.is_empty()) {
            failures.push(format!("expected no status.message, got {m:?}"));
        }
    }
    let warnings: &[String] = response.warnings.as_deref().unwrap_or_default();
    for fragment in &expect.warnings_contain {
        if !warnings.iter().any(|w| w.contains(fragment.as_str())) {
            failures.push(format!(
                "no warning contains {fragment:?}; warnings: {warnings:?}"
            ));
        }
    }
    if let Some(count) = expect.warnings {
        if warnings.len() != count {
            failures.push(format!(
                "expected {count} warning(s), got {}: {warnings:?}",
                warnings.len()
            ));
        }
    }
    let annotations = response.audit_annotations.clone().unwrap_or_default();
    for (key, fragment) in &expect.audit_annotations_contain {
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

#[derive(Clone, Debug)]
pub struct ScenarioResult {
    pub name: String,
    pub description: String,
    pub command_line: Option<String>,
    pub verdict: Verdict,
    /// The message (or first warning) to show in a table.
    pub summary: String,
    pub failures: Vec<String>,
}

impl ScenarioResult {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// Loads, runs and checks one scenario directory.
pub fn run_scenario(evaluator: &Evaluator, dir: &Path, module: &Path) -> ScenarioResult {
    let fallback_name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let scenario = match Scenario::load(dir) {
        Ok(scenario) => scenario,
        Err(e) => {
            return ScenarioResult {
                name: fallback_name,
                description: String::new(),
                command_line: None,
                verdict: Verdict::Error,
                summary: "cannot load the scenario".to_string(),
                failures: vec![format!("{e:#}")],
            }
        }
    };
    let command_line = evaluator.command_line(&scenario, module).ok();
    match evaluator.run(&scenario, module) {
        Ok(outcome) => ScenarioResult {
            name: scenario.name.clone(),
            description: scenario.spec.description.clone(),
            command_line,
            verdict: Verdict::of(&outcome),
            summary: summary(&outcome),
            failures: check(&scenario.spec.expect, &outcome),
        },
        Err(e) => ScenarioResult {
            name: scenario.name.clone(),
            description: scenario.spec.description.clone(),
            command_line,
            verdict: Verdict::Error,
            summary: format!("cannot run {}", evaluator.name()),
            failures: vec![format!("{e:#}")],
        },
    }
}

/// What the table shows for a run: the rejection message, else the first warning, else the
/// message; for errors, what the policy logged before failing or the host's error.
pub fn summary(outcome: &Outcome) -> String {
    let verdict = Verdict::of(outcome);
    let response = match (&outcome.response, outcome.success) {
        (Ok(response), true) => response,
        _ => return outcome.error_text(),
    };
    let message = response
        .status
        .as_ref()
        .and_then(|s| s.message.clone())
        .filter(|m| !m.is_empty());
    let first_warning = response.warnings.as_ref().and_then(|w| w.first().cloned());
    match verdict {
        Verdict::Error => outcome
            .guest_logs()
            .last()
            .cloned()
            .or(message)
            .unwrap_or_default(),
        // `Kind.group "name" is invalid: [fields...]. Why...`: the field list is what differs
        // from one rejection to the next, so a narrow table shows it first.
        Verdict::Reject => message
            .map(|m| match m.split_once(" is invalid: ") {
                Some((_, fields)) => fields.to_string(),
                None => m,
            })
            .or(first_warning.map(|w| format!("warning: {w}")))
            .unwrap_or_default(),
        Verdict::Allow => first_warning
            .map(|w| format!("warning: {w}"))
            .or(message)
            .unwrap_or_default(),
    }
}

/// The annotated module the end-to-end tests evaluate: env ANNOTATED_POLICY, else
/// `<workspace>/annotated-policy.wasm`. Panics, naming the make target, when it is missing.
pub fn annotated_policy() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("e2e-tests lives in the workspace");
    let module = std::env::var_os("ANNOTATED_POLICY")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("annotated-policy.wasm"));
    assert!(
        module.is_file(),
        "{} not found: build it with `make annotated-policy.wasm` or point ANNOTATED_POLICY at an annotated module",
        module.display()
    );
    module
}

/// Runs every scenario directory under `root` with `jobs` runs at a time; results in order.
pub fn run_all(
    evaluator: &Evaluator,
    root: &Path,
    module: &Path,
    jobs: usize,
) -> Result<Vec<ScenarioResult>> {
    let module = module
        .canonicalize()
        .map_err(|e| anyhow!("policy module {}: {e}", module.display()))?;
    let dirs = discover(root)?;
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<ScenarioResult>>> = Mutex::new(vec![None; dirs.len()]);
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1).min(dirs.len().max(1)) {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::SeqCst);
                let Some(dir) = dirs.get(index) else { return };
                let result = run_scenario(evaluator, dir, &module);
                results.lock().unwrap_or_else(|p| p.into_inner())[index] = Some(result);
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    Ok(results.into_iter().flatten().collect())
}

/// A table for a terminal `width` columns wide: mark, scenario, verdict, message; the
/// failures of a failing scenario on the lines below it; a closing `N passed, M failed` line.
pub fn render_table(results: &[ScenarioResult], width: usize) -> String {
    const VERDICT_WIDTH: usize = 6;
    let name_width = results
        .iter()
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(8)
        .clamp(8, 40);
    let message_width = width
        .saturating_sub(2 + name_width + 2 + VERDICT_WIDTH + 2)
        .max(20);
    let mut out = String::new();
    out.push_str(&format!(
        "  {:<name_width$}  {:<VERDICT_WIDTH$}  {}\n",
        "SCENARIO", "VERDICT", "MESSAGE / FIRST WARNING"
    ));
    for result in results {
        let mark = if result.passed() { '✓' } else { '✗' };
        out.push_str(&format!(
            "{mark} {:<name_width$}  {:<VERDICT_WIDTH$}  {}\n",
            truncate(&result.name, name_width),
            result.verdict.label(),
            truncate(&one_line(&result.summary), message_width)
        ));
        if !result.passed() {
            if !result.description.is_empty() {
                out.push_str(&format!("    scenario: {}\n", result.description));
            }
            for failure in &result.failures {
                out.push_str(&format!("    - {}\n", one_line(failure)));
            }
            if let Some(command) = &result.command_line {
                out.push_str(&format!("    rerun: {command}\n"));
            }
        }
    }
    let passed = results.iter().filter(|r| r.passed()).count();
    out.push_str(&format!(
        "\n{passed} passed, {} failed\n",
        results.len() - passed
    ));
    out
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn truncate(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        text.to_string()
    } else {
        let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(line: &str) -> Outcome {
        Outcome::new(Some(0), true, format!("{line}\n"), String::new())
    }

    fn expect(yaml: &str) -> Expect {
        yaml_serde::from_str(yaml).unwrap()
    }

    const REJECTED: &str = r#"{"uid":"u","allowed":false,"status":{"message":"configRef edited in place","code":403},"auditAnnotations":{"capi/finding":"in-place-edit"},"warnings":["spec drift noticed"]}"#;

    #[test]
    fn matching_expectations_pass() {
        let e = expect(
            r#"
allowed: false
code: 403
messageContains: ["edited", "in place"]
warningsContain: ["drift"]
warnings: 1
auditAnnotationsContain: {capi/finding: in-place}
"#,
        );
        assert_eq!(check(&e, &outcome(REJECTED)), Vec::<String>::new());
        assert_eq!(Verdict::of(&outcome(REJECTED)), Verdict::Reject);
        assert_eq!(summary(&outcome(REJECTED)), "configRef edited in place");
        let capi_style = r#"{"uid":"u","allowed":false,"status":{"message":"KubeadmConfig.bootstrap.cluster.x-k8s.io \"a\" is invalid: [spec.files[0].content: Forbidden: changed]. Why.","code":403},"auditAnnotations":null,"warnings":null}"#;
        assert_eq!(
            summary(&outcome(capi_style)),
            "[spec.files[0].content: Forbidden: changed]. Why."
        );
    }

    #[test]
    fn every_mismatch_is_listed() {
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
        let failures = check(&e, &outcome(REJECTED));
        assert_eq!(failures.len(), 7, "{failures:#?}");
        assert!(failures[0].starts_with("expected allowed: true, got allowed: false"));
        assert_eq!(failures[1], "expected status.code 400, got 403");
        let absent = expect("allowed: false\nmessageAbsent: true\n");
        assert_eq!(
            check(&absent, &outcome(REJECTED)),
            vec![r#"expected no status.message, got "configRef edited in place""#.to_string()]
        );
    }

    #[test]
    fn settings_errors() {
        let e = expect("settingsError: inPlaceEdits\n");
        let refused = Outcome::new(
            Some(1),
            false,
            String::new(),
            "Error: Provided settings are not valid: inPlaceEdits: unknown action\n".into(),
        );
        assert!(check(&e, &refused).is_empty());
        assert_eq!(Verdict::of(&refused), Verdict::Error);
        assert_eq!(
            summary(&refused),
            "Provided settings are not valid: inPlaceEdits: unknown action"
        );
        assert_eq!(check(&e, &outcome(REJECTED)).len(), 1);
        let other = expect("settingsError: exemptUsers\n");
        assert!(check(&other, &refused)[0].contains("does not contain \"exemptUsers\""));
        // A response expectation on a failed run names the failure.
        let e = expect("allowed: true\n");
        assert!(
            check(&e, &refused)[0].starts_with("the run failed (exit code 1): Provided settings")
        );
    }

    #[test]
    fn guest_errors_show_the_policy_log() {
        let line = r#"{"uid":"u","allowed":false,"status":{"message":"internal server error: Guest call failure: error while executing at wasm backtrace:\n 0: x","code":500},"auditAnnotations":null,"warnings":null}"#;
        let failed = Outcome::new(
            Some(0),
            true,
            format!("{line}\n"),
            " INFO policy console_log: policy panicked at src/engine.rs:1:1: boom\n".into(),
        );
        assert_eq!(Verdict::of(&failed), Verdict::Error);
        assert_eq!(
            summary(&failed),
            "policy panicked at src/engine.rs:1:1: boom"
        );
        let kwctl = Outcome::new(
            Some(0),
            true,
            format!("{line}\n"),
            "2025-01-01T00:00:00Z  INFO wapc::wapchost::modulestate: Guest module 1: it broke\n"
                .into(),
        );
        assert_eq!(kwctl.guest_logs(), vec!["it broke".to_string()]);
    }

    #[test]
    fn specs_are_strict() {
        assert!(yaml_serde::from_str::<ScenarioSpec>(
            "description: x\nexpect: {allowed: true, mesageContains: [a]}\n"
        )
        .is_err());
        let spec: ScenarioSpec = yaml_serde::from_str("description: x\nexpect: {}\n").unwrap();
        assert!(spec.expect.check_consistency().is_err());
        let spec: ScenarioSpec =
            yaml_serde::from_str("description: x\nexpect: {settingsError: a, allowed: false}\n")
                .unwrap();
        assert!(spec.expect.check_consistency().is_err());
    }

    #[test]
    fn table_fits_the_width() {
        let results = vec![
            ScenarioResult {
                name: "a-rather-long-scenario-name-that-keeps-going-and-going".into(),
                description: "d".into(),
                command_line: None,
                verdict: Verdict::Reject,
                summary: "x".repeat(300),
                failures: vec![],
            },
            ScenarioResult {
                name: "short".into(),
                description: "what it checks".into(),
                command_line: Some("policy-host run ...".into()),
                verdict: Verdict::Allow,
                summary: "warning: w".into(),
                failures: vec!["expected allowed: false, got allowed: true".into()],
            },
        ];
        let table = render_table(&results, 120);
        let rows: Vec<&str> = table.lines().take(3).collect();
        for row in &rows {
            assert!(row.chars().count() <= 120, "{row}");
        }
        assert!(rows[1].starts_with("✓ a-rather-long-scenario-name-that-keeps-…  REJECT  xxx"));
        assert!(table.contains("✗ short"));
        assert!(table.contains("    - expected allowed: false, got allowed: true\n"));
        assert!(table.ends_with("\n1 passed, 1 failed\n"));
    }
}
