//! `capi-rollout-check settings`: the settings of Kubewarden policy manifests, validated before
//! `kubectl apply` by the policy's own `validate_settings`. Kubewarden's controller accepts any
//! settings; a PolicyServer given invalid ones restarts in a loop, its log the only place the
//! key is named. This check names it in the file instead.
//!
//! Every document of the files is read; a ClusterAdmissionPolicy or AdmissionPolicy (or a
//! member of a ClusterAdmissionPolicyGroup or AdmissionPolicyGroup) of `policies.kubewarden.io`
//! whose `spec.module` contains the module text is checked, every other document is skipped
//! and said to be.

use std::fmt::Write;
use std::path::Path;

use capi_bootstrap_rollout_policy::validate_settings_payload;
use serde_json::{json, Value};

use crate::manifests::{format_of, objects_in, InputError, Location, STDIN};
use crate::report::{escape_data, escape_property, position};

/// The policy's name in its module references, by default the text `--module` looks for.
pub const DEFAULT_MODULE: &str = "capi-bootstrap-rollout-policy";

const POLICY_GROUP: &str = "policies.kubewarden.io";
const POLICY_KINDS: [&str; 2] = ["ClusterAdmissionPolicy", "AdmissionPolicy"];
const GROUP_KINDS: [&str; 2] = ["ClusterAdmissionPolicyGroup", "AdmissionPolicyGroup"];

/// One document (or policy of a group) and what became of it.
#[derive(Debug)]
pub struct Entry {
    /// The file and document; `line` is the line shown: the document's start, or for invalid
    /// settings the first key the policy's message names.
    pub location: Location,
    /// `ClusterAdmissionPolicy NAME`, `Deployment NAME`, `ClusterAdmissionPolicyGroup NAME,
    /// policy MEMBER`.
    pub what: String,
    pub state: State,
}

#[derive(Debug)]
pub enum State {
    Valid,
    /// The policy's `validate_settings` message, whole, and the suggestions for the keys or
    /// values it does not know (`inPlaceEdit: did you mean "inPlaceEdits"?`).
    Invalid {
        message: String,
        suggestions: Vec<String>,
    },
    /// Why the document was not checked.
    Skipped(String),
}

#[derive(Debug, Default)]
pub struct Outcome {
    pub entries: Vec<Entry>,
}

impl Outcome {
    pub fn checked(&self) -> usize {
        self.entries
            .iter()
            .filter(|e| !matches!(e.state, State::Skipped(_)))
            .count()
    }

    pub fn invalid(&self) -> usize {
        self.entries
            .iter()
            .filter(|e| matches!(e.state, State::Invalid { .. }))
            .count()
    }
}

/// Reads a file (`-`: stdin) and checks every policy of it whose module contains `module`.
pub fn check_file(path: &str, module: &str, outcome: &mut Outcome) -> Result<(), InputError> {
    let fail = |file: &str, message: String| InputError {
        file: file.to_string(),
        document: None,
        line: None,
        message,
    };
    let (name, text, format) = if path == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .map_err(|e| fail(STDIN, format!("cannot read: {e}")))?;
        (STDIN.to_string(), text, None)
    } else {
        let p = Path::new(path);
        if p.is_dir() {
            return Err(fail(
                path,
                "is a directory: name the policy manifests (a shell glob does: dir/*.yaml)".into(),
            ));
        }
        let bytes = std::fs::read(p).map_err(|e| fail(path, format!("cannot read: {e}")))?;
        let text =
            String::from_utf8(bytes).map_err(|e| fail(path, format!("not UTF-8 text: {e}")))?;
        (path.to_string(), text, format_of(p))
    };
    let lines: Vec<&str> = text.lines().collect();
    let objects = objects_in(&name, &text, format)?;
    // Where each document ends: the next one's first line (documents are in order).
    let starts: Vec<usize> = objects.iter().map(|(l, _, _)| l.line).collect();
    for (i, (location, _, object)) in objects.iter().enumerate() {
        let end = starts[i..]
            .iter()
            .find(|&&s| s > location.line)
            .map_or(lines.len(), |&s| s - 1);
        let document = &lines[location.line.saturating_sub(1).min(lines.len())..end];
        check_object(object, location, document, module, outcome);
    }
    Ok(())
}

fn check_object(
    object: &Value,
    location: &Location,
    document: &[&str],
    module: &str,
    outcome: &mut Outcome,
) {
    let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
    let kind = text("/kind").unwrap_or("");
    let what = match (kind, text("/metadata/name")) {
        ("", _) => "an object without kind".to_string(),
        (kind, Some(name)) => format!("{kind} {name}"),
        (kind, None) => format!("{kind} without metadata.name"),
    };
    let api_version = text("/apiVersion").unwrap_or("");
    let is_kubewarden = api_version.starts_with(&format!("{POLICY_GROUP}/"));
    let skip = |reason: String, outcome: &mut Outcome| {
        outcome.entries.push(Entry {
            location: location.clone(),
            what: what.clone(),
            state: State::Skipped(reason),
        })
    };
    if is_kubewarden && POLICY_KINDS.contains(&kind) {
        let spec = object.get("spec").unwrap_or(&Value::Null);
        match policy_module(spec, module) {
            Err(reason) => skip(reason, outcome),
            Ok(()) => {
                outcome
                    .entries
                    .push(judge(spec.get("settings"), location, what, document, None))
            }
        }
    } else if is_kubewarden && GROUP_KINDS.contains(&kind) {
        let members = object.pointer("/spec/policies").and_then(Value::as_object);
        let mut any = false;
        for (member, spec) in members.into_iter().flatten() {
            if policy_module(spec, module).is_ok() {
                any = true;
                outcome.entries.push(judge(
                    spec.get("settings"),
                    location,
                    format!("{what}, policy {member}"),
                    document,
                    Some(member),
                ));
            }
        }
        if !any {
            skip(
                format!("no policy of its spec.policies has a spec.module containing {module:?}"),
                outcome,
            );
        }
    } else if is_kubewarden {
        skip("not a policy".into(), outcome);
    } else {
        skip("not a Kubewarden policy".into(), outcome);
    }
}

/// Whether a policy's spec (or a group member) runs this module: `Err` says why not.
fn policy_module(spec: &Value, module: &str) -> Result<(), String> {
    match spec.get("module").and_then(Value::as_str) {
        Some(m) if m.contains(module) => Ok(()),
        Some(m) => Err(format!(
            "spec.module {m} does not contain {module:?} (--module names another)"
        )),
        None => Err("no spec.module".into()),
    }
}

/// The policy's verdict on `settings`: the payload Kubewarden sends `validate_settings` is the
/// settings object itself (`{}` when the manifest has none).
fn judge(
    settings: Option<&Value>,
    location: &Location,
    what: String,
    document: &[&str],
    member: Option<&str>,
) -> Entry {
    let payload = serde_json::to_vec(settings.unwrap_or(&json!({}))).expect("plain JSON");
    let response = validate_settings_payload(&payload);
    let mut location = location.clone();
    let state = if response.valid {
        State::Valid
    } else {
        let message = response
            .message
            .unwrap_or_else(|| "the settings are invalid".into());
        if let Some(offset) = key_line(document, member, &message_path(&message)) {
            location.line += offset;
        }
        State::Invalid {
            suggestions: suggestions(&message),
            message,
        }
    };
    Entry {
        location,
        what,
        state,
    }
}

/// A step of the path a message starts with.
#[derive(Debug, PartialEq)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// The path a message starts with: `ignoredPaths.KubeadmConfig[1]: ...` names ignoredPaths,
/// KubeadmConfig, item 1; `fillOncePaths/ignoredPaths: ...` the first of the two. None when it
/// starts with no key (`settings must be an object`).
fn message_path(message: &str) -> Vec<Step<'_>> {
    let Some((head, _)) = message.split_once(": ") else {
        return Vec::new();
    };
    let head = head.split('/').next().unwrap_or(head);
    let well_formed = !head.is_empty()
        && head
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '[' | ']' | '_' | '-'));
    if !well_formed {
        return Vec::new();
    }
    let mut steps = Vec::new();
    for part in head.split('.') {
        let (key, indices) = part.split_once('[').unwrap_or((part, ""));
        if !key.is_empty() {
            steps.push(Step::Key(key));
        }
        for index in indices.split('[') {
            match index.trim_end_matches(']').parse() {
                Ok(i) => steps.push(Step::Index(i)),
                Err(_) => break,
            }
        }
    }
    steps
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

fn is_content(line: &str) -> bool {
    let t = line.trim_start();
    !t.is_empty() && !t.starts_with('#')
}

/// Whether a line (an item's `- key:` too) is `key:`.
fn is_key(line: &str, key: &str) -> bool {
    let t = line.trim_start();
    let t = t.strip_prefix("- ").map_or(t, str::trim_start);
    t.strip_prefix(key)
        .or_else(|| t.strip_prefix(&format!("\"{key}\"")))
        .is_some_and(|rest| rest.starts_with(':'))
}

/// The lines below line `at` that are nested in it (indented deeper), with their offsets.
fn nested<'a>(document: &'a [&'a str], at: usize) -> impl Iterator<Item = (usize, &'a str)> {
    let depth = indent(document[at]);
    document
        .iter()
        .enumerate()
        .skip(at + 1)
        .filter(|(_, l)| is_content(l))
        .take_while(move |(_, l)| indent(l) > depth)
        .map(|(i, l)| (i, *l))
}

/// The offset, in the document's lines, of what `path` names inside the `settings:` block (of
/// the group member `member`): as deep as the text shows it, else the `settings:` line itself.
/// A textual search: JSON documents keep the document's first line, flow mappings (`{...}`,
/// `[...]`) the line that opens them.
fn key_line(document: &[&str], member: Option<&str>, path: &[Step]) -> Option<usize> {
    let from = match member {
        Some(m) => document.iter().position(|l| is_key(l, m))?,
        None => 0,
    };
    let mut at = from
        + document[from..]
            .iter()
            .position(|l| is_key(l, "settings"))?;
    for step in path {
        let found = match step {
            Step::Key(key) => nested(document, at).find(|(_, l)| is_key(l, key)),
            Step::Index(i) => {
                let items = nested(document, at);
                let mut items = items.peekable();
                let level = items.peek().map(|(_, l)| indent(l));
                items
                    .filter(|(_, l)| Some(indent(l)) == level && l.trim_start().starts_with('-'))
                    .nth(*i)
            }
        };
        match found {
            Some((line, _)) => at = line,
            None => break,
        }
    }
    Some(at)
}

/// For each key (or value) the message calls unknown, the nearest one it lists as known:
/// `inPlaceEdit: did you mean "inPlaceEdits"?`. The candidates are the policy's own list, in
/// its message.
pub fn suggestions(message: &str) -> Vec<String> {
    let mut out = Vec::new();
    for problem in message.split("; ") {
        if let Some((key, rest)) = problem.split_once(": unknown setting (known: ") {
            let known = rest.strip_suffix(')').unwrap_or(rest).split(", ");
            if let Some(best) = nearest(key, known) {
                out.push(format!("{key}: did you mean \"{best}\"?"));
            }
        } else if let Some((key, rest)) = problem.split_once(": unknown value \"") {
            let Some((value, rest)) = rest.split_once("\" (expected one of ") else {
                continue;
            };
            let known = rest.strip_suffix(')').unwrap_or(rest).split(", ");
            if let Some(best) = nearest(value, known) {
                out.push(format!("{key}: did you mean \"{best}\"?"));
            }
        }
    }
    out
}

/// The candidate closest to `word` (case-insensitive edit distance), if close enough to be the
/// one meant: at most a third of its length, at most 3.
fn nearest<'a>(word: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let word = word.to_lowercase();
    let limit = (word.chars().count() / 3).clamp(1, 3);
    candidates
        .map(|c| (distance(&word, &c.to_lowercase()), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Levenshtein distance.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(previous + 1);
        }
    }
    row[b.len()]
}

fn summary(outcome: &Outcome) -> String {
    let checked = outcome.checked();
    let invalid = outcome.invalid();
    let skipped = outcome.entries.len() - checked;
    format!(
        "{checked} polic{} checked: {invalid} with invalid settings, {} valid; {skipped} document{} skipped",
        if checked == 1 { "y" } else { "ies" },
        checked - invalid,
        if skipped == 1 { "" } else { "s" }
    )
}

/// One line per document: `FILE:LINE (document N, KIND NAME): ...`, the suggestions indented
/// below an invalid one's message, then the summary.
pub fn text(outcome: &Outcome) -> String {
    let mut out = String::new();
    for entry in &outcome.entries {
        let Location {
            file,
            document,
            line,
        } = &entry.location;
        let at = format!("{file}:{line} (document {document}, {})", entry.what);
        match &entry.state {
            State::Valid => {
                let _ = writeln!(out, "{at}: settings valid");
            }
            State::Skipped(reason) => {
                let _ = writeln!(out, "{at}: skipped, {reason}");
            }
            State::Invalid {
                message,
                suggestions,
            } => {
                let _ = writeln!(out, "{at}: {message}");
                for suggestion in suggestions {
                    let _ = writeln!(out, "  {suggestion}");
                }
            }
        }
    }
    let _ = writeln!(out, "capi-rollout-check settings: {}", summary(outcome));
    out
}

pub fn json(outcome: &Outcome) -> String {
    let list: Vec<Value> = outcome
        .entries
        .iter()
        .map(|e| {
            let (state, message, suggestions) = match &e.state {
                State::Valid => ("valid", None, &[][..]),
                State::Skipped(reason) => ("skipped", Some(reason), &[][..]),
                State::Invalid {
                    message,
                    suggestions,
                } => ("invalid", Some(message), &suggestions[..]),
            };
            json!({
                "file": e.location.file,
                "line": e.location.line,
                "document": e.location.document,
                "object": e.what,
                "state": state,
                "message": message,
                "suggestions": suggestions,
            })
        })
        .collect();
    let mut text = serde_json::to_string_pretty(&Value::Array(list)).expect("plain JSON");
    text.push('\n');
    text
}

/// `::error` annotations on the invalid settings, then the summary.
pub fn github(outcome: &Outcome) -> String {
    let mut out = String::new();
    for entry in &outcome.entries {
        if let State::Invalid {
            message,
            suggestions,
        } = &entry.state
        {
            let at = position(&entry.location.file, Some(entry.location.line));
            let title = escape_property(&format!(
                "capi-rollout-check settings: {} (document {})",
                entry.what, entry.location.document
            ));
            let mut text = message.clone();
            for suggestion in suggestions {
                text.push('\n');
                text.push_str(suggestion);
            }
            let _ = writeln!(out, "::error {at}title={title}::{}", escape_data(&text));
        }
    }
    let _ = writeln!(out, "capi-rollout-check settings: {}", summary(outcome));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_known_key_is_suggested_and_a_far_one_is_not() {
        let known = "inPlaceEdits, templateEdits, exemptUsers";
        let message = format!(
            "inPlaceEdit: unknown setting (known: {known}); InPlaceEdits: unknown setting \
             (known: {known}); colour: unknown setting (known: {known}); \
             contractViolations: unknown value \"rejct\" (expected one of reject, warn, ignore)"
        );
        assert_eq!(
            suggestions(&message),
            [
                "inPlaceEdit: did you mean \"inPlaceEdits\"?",
                "InPlaceEdits: did you mean \"inPlaceEdits\"?",
                "contractViolations: did you mean \"reject\"?",
            ]
        );
    }

    #[test]
    fn the_path_a_message_starts_with() {
        use Step::{Index, Key};
        assert_eq!(message_path("inPlaceEdit: unknown"), [Key("inPlaceEdit")]);
        assert_eq!(
            message_path("ignoredPaths.KubeadmConfig[1]: \"x\""),
            [Key("ignoredPaths"), Key("KubeadmConfig"), Index(1)]
        );
        assert_eq!(
            message_path("bootstrapConfigKinds[0].version: x"),
            [Key("bootstrapConfigKinds"), Index(0), Key("version")]
        );
        assert_eq!(
            message_path("fillOncePaths/ignoredPaths: x"),
            [Key("fillOncePaths")]
        );
        assert_eq!(message_path("settings must be an object, got a list"), []);
    }

    #[test]
    fn the_line_of_a_path_in_the_settings() {
        let document = [
            "kind: ClusterAdmissionPolicy",
            "spec:",
            "  settings:",
            "    bootstrapConfigKinds:",
            "      - apiGroup: bootstrap.cluster.x-k8s.io",
            "        kind: KubeadmConfig",
            "      # a comment",
            "      - apiGroup: bootstrap.cluster.x-k8s.io",
            "        kind: EKSConfig",
            "        version: beta",
            "    ignoredPaths: {KubeadmConfig: [\"spec.files[\"]}",
        ];
        let at = |message: &str| key_line(&document, None, &message_path(message));
        assert_eq!(at("bootstrapConfigKinds[1].version: x"), Some(9));
        assert_eq!(at("bootstrapConfigKinds[1]: x"), Some(7));
        assert_eq!(at("ignoredPaths.KubeadmConfig[0]: x"), Some(10));
        assert_eq!(at("settings must be an object"), Some(2));
    }
}
