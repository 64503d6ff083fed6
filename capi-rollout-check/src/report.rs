//! The three report forms: text for people, JSON for tools, GitHub Actions workflow commands
//! for annotations on the pull request.

use std::fmt::Write;

use serde_json::{json, Value};

use crate::check::{Outcome, Report};
use crate::manifests::STDIN;

/// What the engine's remediations start with, inside a rejection message: a config's rotation,
/// a template's copy.
const REMEDIATIONS: [&str; 2] = [". To rotate, ", ". To roll a change out, "];

/// A rejection message split into its reason and its remediation (starting `To ...`).
fn reason_and_fix(message: &str) -> Option<(&str, &str)> {
    REMEDIATIONS.iter().find_map(|marker| {
        let at = message.find(marker)?;
        Some((&message[..at], &message[at + 2..]))
    })
}

fn label(outcome: &Outcome) -> &'static str {
    if !outcome.verdict.allowed {
        "REJECTED"
    } else if !outcome.verdict.warnings.is_empty() {
        "WARNING"
    } else {
        "allowed"
    }
}

fn summary(report: &Report) -> String {
    let judged = report.outcomes.len();
    let rejected = report.rejected();
    let warned = report.warned();
    let mut line = format!(
        "{judged} change{} judged: {rejected} rejected, {warned} allowed with warnings, {} allowed",
        if judged == 1 { "" } else { "s" },
        judged - rejected - warned
    );
    if report.unjudged > 0 {
        let _ = write!(
            line,
            "; {} changed object{} of other kinds accepted",
            report.unjudged,
            if report.unjudged == 1 { "" } else { "s" }
        );
    }
    line
}

pub fn text(report: &Report, base: &str, head: &str) -> String {
    let mut out = format!("capi-rollout-check: base {base}, head {head}\n\n");
    for outcome in &report.outcomes {
        let _ = writeln!(
            out,
            "{:<9} {} {}",
            label(outcome),
            outcome.operation.as_str(),
            outcome.key
        );
        let _ = writeln!(out, "  at:      {}", outcome.location);
        if !outcome.changed.is_empty() {
            let _ = writeln!(out, "  changed: {}", outcome.changed.join(", "));
        }
        if let Some(message) = &outcome.verdict.message {
            match reason_and_fix(message) {
                Some((reason, fix)) => {
                    let _ = writeln!(out, "  reason:  {reason}.");
                    let _ = writeln!(out, "  fix:     {fix}");
                }
                None => {
                    let _ = writeln!(out, "  reason:  {message}");
                }
            }
        }
        for warning in &outcome.verdict.warnings {
            let _ = writeln!(out, "  warning: {warning}");
        }
        out.push('\n');
    }
    if report.outcomes.is_empty() {
        out.push_str("No MachinePool or bootstrap config changed.\n");
    }
    let _ = writeln!(out, "{}", summary(report));
    out
}

pub fn json(report: &Report) -> String {
    let list: Vec<Value> = report
        .outcomes
        .iter()
        .map(|o| {
            json!({
                "object": {
                    "apiVersion": o.api_version,
                    "kind": o.key.kind,
                    "namespace": o.key.namespace,
                    "name": o.key.name,
                },
                "operation": o.operation.as_str(),
                "allowed": o.verdict.allowed,
                "message": o.verdict.message,
                "warnings": o.verdict.warnings,
                "changed": o.changed,
                "file": o.location.file,
                "line": o.location.line,
                "document": o.location.document,
            })
        })
        .collect();
    let mut text = serde_json::to_string_pretty(&Value::Array(list)).expect("plain JSON");
    text.push('\n');
    text
}

/// Escapes a workflow command's message.
pub fn escape_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a workflow command's property value.
pub fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

/// `file=...,line=...,` for a location (nothing for stdin: no file to annotate).
pub fn position(file: &str, line: Option<usize>) -> String {
    match (file, line) {
        (STDIN, _) => String::new(),
        (file, Some(line)) => format!("file={},line={line},", escape_property(file)),
        (file, None) => format!("file={},", escape_property(file)),
    }
}

pub fn github(report: &Report) -> String {
    let mut out = String::new();
    for o in &report.outcomes {
        let at = position(&o.annotation.0, o.annotation.1);
        let title = escape_property(&format!(
            "capi-rollout-check: {} {}",
            o.operation.as_str(),
            o.key
        ));
        if let Some(message) = o.verdict.message.as_deref().filter(|_| !o.verdict.allowed) {
            let _ = writeln!(out, "::error {at}title={title}::{}", escape_data(message));
        }
        for warning in &o.verdict.warnings {
            let _ = writeln!(out, "::warning {at}title={title}::{}", escape_data(warning));
        }
    }
    let _ = writeln!(out, "capi-rollout-check: {}", summary(report));
    out
}
