//! Pairs base and head objects, turns each difference into the AdmissionRequest the API server
//! would send when the difference is applied, and judges it with the policy's own engine.

use capi_bootstrap_rollout_policy::capi::field_rules::FieldRules;
use capi_bootstrap_rollout_policy::capi::kinds::{is_machine_pool, is_machine_template_consumer};
use capi_bootstrap_rollout_policy::diff::changed_fields_at;
use capi_bootstrap_rollout_policy::engine::evaluate_with;
use capi_bootstrap_rollout_policy::settings::Settings;
use capi_bootstrap_rollout_policy::verdict::Verdict;
use serde_json::{json, Value};

use crate::lookups::{ManifestLookups, View};
use crate::manifests::{Key, Location, ManifestSet};

/// The username of the synthetic requests: an identity no `exemptUsers` entry names, so the
/// verdicts are those a non-exempt user gets.
pub const USER: &str = "capi-rollout-check";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

/// The verdict on one changed object.
#[derive(Debug)]
pub struct Outcome {
    pub key: Key,
    pub api_version: String,
    pub operation: Operation,
    /// Where the object is defined: in head, or in base for a DELETE.
    pub location: Location,
    pub verdict: Verdict,
    /// For an UPDATE: the spec fields that changed, as the rules compare them.
    pub changed: Vec<String>,
    /// Where a GitHub annotation goes: the head file and line; for a DELETE the same path
    /// below the head directory (when both sides are directories; no line) or the base file.
    pub annotation: (String, Option<usize>),
}

#[derive(Debug, Default)]
pub struct Report {
    pub outcomes: Vec<Outcome>,
    /// Changed objects the policy accepts without a word, of kinds other than MachinePool and
    /// the bootstrap configs.
    pub unjudged: usize,
}

impl Report {
    pub fn rejected(&self) -> usize {
        self.outcomes.iter().filter(|o| !o.verdict.allowed).count()
    }

    pub fn warned(&self) -> usize {
        self.outcomes
            .iter()
            .filter(|o| o.verdict.allowed && !o.verdict.warnings.is_empty())
            .count()
    }
}

/// The kinds reported even when allowed without a word: MachinePools, MachineDeployments,
/// MachineSets, bootstrap configs and their templates. Any other change is judged too, and
/// reported only when the verdict says something.
fn reported(settings: &Settings, key: &Key) -> bool {
    let (group, kind) = (key.group.as_str(), key.kind.as_str());
    is_machine_pool(group, kind)
        || is_machine_template_consumer(group, kind)
        || settings.is_bootstrap_config(group, kind)
        || settings.is_bootstrap_template(group, kind)
}

/// At most this many changed paths are listed per object.
const MAX_CHANGED: usize = 10;

/// The spec fields an UPDATE changes, compared the way the rules compare them: a config's
/// spec without its machine-only and fill-once fields, a template's spec.template.spec, any
/// other spec as it is.
fn changed(
    settings: &Settings,
    key: &Key,
    old: Option<&Value>,
    new: Option<&Value>,
) -> Vec<String> {
    let (root, rules): (&[&str], FieldRules) =
        if settings.is_bootstrap_config(&key.group, &key.kind) {
            (&["spec"], settings.field_rules(&key.kind))
        } else if settings.is_bootstrap_template(&key.group, &key.kind) {
            (&["spec", "template", "spec"], FieldRules::default())
        } else {
            (&["spec"], FieldRules::default())
        };
    fn at<'v>(object: Option<&'v Value>, root: &[&str]) -> Option<&'v Value> {
        root.iter().try_fold(object?, |v, k| v.get(k))
    }
    let changes = changed_fields_at(root, at(old, root), at(new, root), &rules);
    let mut list: Vec<String> = changes
        .iter()
        .take(MAX_CHANGED)
        .map(|c| format!("{} ({})", c.path, c.kind.as_str()))
        .collect();
    if changes.len() > MAX_CHANGED {
        list.push(format!("and {} more", changes.len() - MAX_CHANGED));
    }
    list
}

/// The AdmissionRequest the API server sends for this change.
pub fn admission_request(
    uid: usize,
    key: &Key,
    operation: Operation,
    old: Option<&Value>,
    new: Option<&Value>,
) -> Value {
    let api_version = new
        .or(old)
        .and_then(|o| o.get("apiVersion"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let version = api_version.rsplit('/').next().unwrap_or("");
    let kind = json!({"group": key.group, "version": version, "kind": key.kind});
    let resource = json!({"group": key.group, "version": version,
                          "resource": format!("{}s", key.kind.to_lowercase())});
    json!({
        "uid": format!("00000000-0000-4000-8000-{uid:012x}"),
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "name": key.name,
        "namespace": key.namespace,
        "operation": operation.as_str(),
        "userInfo": {"username": USER, "groups": ["system:authenticated"]},
        "object": new.cloned().unwrap_or(Value::Null),
        "oldObject": old.cloned().unwrap_or(Value::Null),
        "dryRun": false,
    })
}

/// Judges every difference between `base` and `head`. `settings` should have `context_aware`
/// set: that is what lets the rules see the manifests' MachinePools.
pub fn check(settings: &Settings, base: &ManifestSet, head: &ManifestSet) -> Report {
    let mut keys: Vec<&Key> = base.objects.keys().chain(head.objects.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut report = Report::default();
    let mut uid = 0;
    for key in keys {
        let (old, new) = (base.objects.get(key), head.objects.get(key));
        let operation = match (old, new) {
            (Some(o), Some(n)) if o.object == n.object => continue,
            (Some(_), Some(_)) => Operation::Update,
            (None, Some(_)) => Operation::Create,
            (Some(_), None) => Operation::Delete,
            (None, None) => continue,
        };
        uid += 1;
        let (old_object, new_object) = (old.map(|m| &m.object), new.map(|m| &m.object));
        let request = admission_request(uid, key, operation, old_object, new_object);
        let lookups = ManifestLookups {
            base,
            head,
            view: if operation == Operation::Delete {
                View::Final
            } else {
                View::Either
            },
        };
        // The request as the API server sends it: JSON text.
        let request = serde_json::to_vec(&request).unwrap_or_default();
        let verdict = evaluate_with(settings, &request, &lookups);
        if !reported(settings, key) && verdict == Verdict::accept() {
            report.unjudged += 1;
            continue;
        }
        let changed = if operation == Operation::Update {
            changed(settings, key, old_object, new_object)
        } else {
            Vec::new()
        };
        let defined = new.or(old).expect("one side has it");
        let annotation = match new {
            Some(m) => (m.location.file.clone(), Some(m.location.line)),
            None => match base.moved_to(&defined.location.file, head) {
                Some(file) => (file, None),
                None => (defined.location.file.clone(), Some(defined.location.line)),
            },
        };
        report.outcomes.push(Outcome {
            key: key.clone(),
            api_version: defined
                .object
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            operation,
            location: defined.location.clone(),
            verdict,
            changed,
            annotation,
        });
    }
    report.outcomes.sort_by_key(|o| {
        (
            o.operation == Operation::Delete,
            o.location.clone(),
            o.key.clone(),
        )
    });
    report
}
