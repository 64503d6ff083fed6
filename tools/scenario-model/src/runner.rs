//! Runs scenarios through an evaluator command line — `kwctl run ...` or `policy-host run
//! ...`, with the same arguments — checks each answer against its `expect`, and prints the
//! table `make demo` shows.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};

use crate::admission::AdmissionResponse;
use crate::spec::{discover, Expect, Scenario};

/// A scenario's run is killed after this long (kwctl has no evaluation deadline).
pub const RUN_TIMEOUT: Duration = Duration::from_secs(120);

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
/// A run that exits non-zero is a refusal of the settings when one is expected, a failure
/// otherwise.
pub fn check(expect: &Expect, outcome: &Outcome) -> Vec<String> {
    if expect.settings_error.is_some() {
        let mismatch = if outcome.success {
            let shown = match &outcome.response {
                Ok(response) => response.to_line(),
                Err(_) => outcome.stdout.trim().to_string(),
            };
            expect.answered(&format!("the run succeeded: {shown}"))
        } else {
            expect.refusal_mismatch(&outcome.stderr, &outcome.error_text())
        };
        return mismatch.into_iter().collect();
    }
    if !outcome.success {
        return vec![format!(
            "the run failed (exit code {}): {}",
            outcome
                .exit_code
                .map_or("none".to_string(), |c| c.to_string()),
            outcome.error_text()
        )];
    }
    match &outcome.response {
        Ok(response) => expect.response_mismatches(&response.as_response()),
        Err(e) => vec![format!("no AdmissionResponse on stdout: {e}")],
    }
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
