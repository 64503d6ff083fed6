//! The playground's engine: the policy's own rules ([`engine::evaluate`]) behind the inputs a
//! person pastes into a page: an old and a new object as YAML, an operation, the settings and
//! who asks. The AdmissionRequest is built here, so the page needs no Kubernetes knowledge.
//!
//! [`evaluate`] never panics on any input: every problem with the inputs is an
//! [`Answer::InputError`] naming the input at fault, and everything else is the policy's
//! verdict. The browser binding ([`wasm::evaluate`]) is a few lines around it.

use std::collections::BTreeMap;

use capi_bootstrap_rollout_policy::capi::field_rules::FieldRules;
use capi_bootstrap_rollout_policy::diff::changed_fields;
use capi_bootstrap_rollout_policy::engine;
use capi_bootstrap_rollout_policy::settings::parse::{settings_from_payload, type_name};
use capi_bootstrap_rollout_policy::settings::{Action, Settings};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

#[cfg(not(target_arch = "wasm32"))]
pub mod examples;

/// Who sends the request, and to which subresource: the rest of the request's context.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct Context {
    /// `userInfo.username`; empty is allowed (the policy reads it as an unknown user).
    pub username: String,
    /// `userInfo.groups`.
    pub groups: Vec<String>,
    /// `subResource`: empty for the object itself, `status` for the status subresource.
    pub sub_resource: String,
}

/// One violation of the verdict: the field, what is wrong with it, and what the rule did.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ViolationOut {
    pub path: String,
    pub detail: String,
    /// `reject` or `warn`.
    pub action: &'static str,
}

/// The policy's answer, with the data behind its message.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    pub allowed: bool,
    /// 403 for a rejection, 400 for a request the policy cannot read.
    pub code: Option<u16>,
    pub message: Option<String>,
    pub warnings: Vec<String>,
    pub audit_annotations: BTreeMap<String, String>,
    pub violations: Vec<ViolationOut>,
    /// Every changed path under `spec` (UPDATE only), including the fields the policy does not
    /// compare (the bootstrap token, the fill-once fields, ignoredPaths).
    pub changed_paths: Vec<String>,
    /// The name the rotation remediation proposes, when it proposes one.
    pub suggested_name: Option<String>,
}

/// What the page shows.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Answer {
    /// The policy judged the request.
    Verdict(Outcome),
    /// The inputs could not make a request, or the settings were refused (as Kubewarden refuses
    /// to load the policy with them): nothing was judged.
    #[serde(rename_all = "camelCase")]
    InputError {
        /// `old`, `new`, `operation`, `settings` or `context`: the input at fault.
        input: &'static str,
        error: String,
    },
}

fn input_error(input: &'static str, error: impl Into<String>) -> Answer {
    Answer::InputError {
        input,
        error: error.into(),
    }
}

/// Settings as the policy's `validate_settings` reads them, so a refusal carries the very
/// message Kubewarden shows. YAML is accepted too (policy.yaml's settings are YAML); empty
/// means the defaults.
pub fn parse_settings(text: &str) -> Result<Settings, String> {
    if text.trim().is_empty() {
        return Ok(Settings::default());
    }
    let from_json = settings_from_payload(text.as_bytes());
    if from_json.is_ok() || serde_json::from_str::<Value>(text).is_ok() {
        return from_json;
    }
    // Not JSON: YAML, or the JSON error validate_settings gives.
    match yaml_serde::from_str::<Value>(text) {
        Ok(value) => Settings::from_value(&value),
        Err(_) => from_json,
    }
}

/// One editor's object: `None` when it is empty (or only comments).
fn object(label: &str, text: &str) -> Result<Option<Value>, String> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    // Through yaml_serde's own Value first: it refuses duplicate keys (as kubectl does) where
    // a JSON map would keep the last one silently.
    let parsed = yaml_serde::from_str::<yaml_serde::Value>(text)
        .map_err(|e| e.to_string())
        .and_then(|v| serde_json::to_value(v).map_err(|e| e.to_string()));
    match parsed {
        Ok(Value::Null) => Ok(None),
        Ok(value @ Value::Object(_)) => Ok(Some(value)),
        Ok(other) => Err(format!(
            "the {label} object must be a mapping (a Kubernetes object), got {}",
            type_name(&other)
        )),
        Err(e) => Err(format!("the {label} object is not valid YAML: {e}")),
    }
}

fn text<'a>(object: &'a Value, pointer: &str) -> Option<&'a str> {
    object.pointer(pointer).and_then(Value::as_str)
}

/// The AdmissionRequest the API server would send for these inputs.
pub fn admission_request(
    old: Option<&Value>,
    new: Option<&Value>,
    operation: &str,
    context: &Context,
) -> Result<Value, (&'static str, String)> {
    let (subject, label, input) = match operation {
        "CREATE" | "UPDATE" => (new, "new", "new"),
        "DELETE" => (old, "old", "old"),
        other => {
            return Err((
                "operation",
                format!("the operation must be CREATE, UPDATE or DELETE, got {other:?}"),
            ))
        }
    };
    let subject = subject.ok_or_else(|| {
        (
            input,
            format!(
                "the {label} object is empty: {} request needs it",
                if operation == "UPDATE" {
                    "an UPDATE"
                } else if operation == "CREATE" {
                    "a CREATE"
                } else {
                    "a DELETE"
                }
            ),
        )
    })?;
    if operation == "UPDATE" && old.is_none() {
        return Err((
            "old",
            "the old object is empty: an UPDATE request needs it".to_string(),
        ));
    }
    let api_version = text(subject, "/apiVersion")
        .filter(|v| !v.is_empty())
        .ok_or_else(|| (input, format!("the {label} object has no apiVersion")))?;
    let kind = text(subject, "/kind")
        .filter(|k| !k.is_empty())
        .ok_or_else(|| (input, format!("the {label} object has no kind")))?;
    if let (Some(old), "UPDATE") = (old, operation) {
        let old_kind = text(old, "/kind").unwrap_or("");
        if old_kind != kind {
            return Err((
                "old",
                format!("the old object is a {old_kind:?} and the new one a {kind:?}: an UPDATE keeps the kind"),
            ));
        }
    }
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = json!({"group": group, "version": version, "kind": kind});
    let resource = json!({"group": group, "version": version,
                          "resource": format!("{}s", kind.to_lowercase())});
    let (object, old_object) = match operation {
        "CREATE" => (new, None),
        "UPDATE" => (new, old),
        _ => (None, old),
    };
    let mut request = json!({
        "uid": "playground",
        "kind": gvk, "requestKind": gvk,
        "resource": resource, "requestResource": resource,
        "name": text(subject, "/metadata/name").unwrap_or(""),
        "namespace": text(subject, "/metadata/namespace").unwrap_or(""),
        "operation": operation,
        "userInfo": {"username": context.username, "groups": context.groups},
        "object": object, "oldObject": old_object,
        "dryRun": false,
    });
    if !context.sub_resource.is_empty() {
        request["subResource"] = json!(context.sub_resource);
        request["requestSubResource"] = json!(context.sub_resource);
    }
    Ok(request)
}

fn action_name(action: Action) -> &'static str {
    match action {
        Action::Reject => "reject",
        Action::Warn => "warn",
        // Never reported: a rule drops the findings its setting allows.
        Action::Allow => "allow",
    }
}

/// The playground's one function: the inputs as the page has them, the policy's answer.
pub fn evaluate(
    old_yaml: &str,
    new_yaml: &str,
    operation: &str,
    settings: &str,
    context: &Context,
) -> Answer {
    let operation = operation.trim().to_ascii_uppercase();
    let settings = match parse_settings(settings) {
        Ok(s) => s,
        Err(e) => return input_error("settings", e),
    };
    // The editor an operation does not send is not read: a CREATE has no old object, a DELETE
    // no new one.
    let old = match object("old", if operation == "CREATE" { "" } else { old_yaml }) {
        Ok(o) => o,
        Err(e) => return input_error("old", e),
    };
    let new = match object("new", if operation == "DELETE" { "" } else { new_yaml }) {
        Ok(o) => o,
        Err(e) => return input_error("new", e),
    };
    let request = match admission_request(old.as_ref(), new.as_ref(), &operation, context) {
        Ok(r) => r,
        Err((input, e)) => return input_error(input, e),
    };
    // The request as the API server sends it: JSON text.
    let request = serde_json::to_vec(&request).unwrap_or_default();
    let verdict = engine::evaluate(&settings, &request);
    let changed_paths = if operation == "UPDATE" {
        let spec = |o: &Option<Value>| o.as_ref().and_then(|o| o.get("spec")).cloned();
        changed_fields(
            "spec",
            spec(&old).as_ref(),
            spec(&new).as_ref(),
            &FieldRules::default(),
        )
        .into_iter()
        .map(|c| c.path.to_string())
        .collect()
    } else {
        Vec::new()
    };
    Answer::Verdict(Outcome {
        allowed: verdict.allowed,
        code: verdict.code,
        message: verdict.message,
        warnings: verdict.warnings,
        audit_annotations: verdict.audit_annotations,
        violations: verdict
            .violations
            .into_iter()
            .map(|v| ViolationOut {
                path: v.field,
                detail: v.detail,
                action: action_name(v.action),
            })
            .collect(),
        changed_paths,
        suggested_name: verdict.suggested_name,
    })
}

/// [`evaluate`] with the context as the page sends it: a JSON object, or empty.
pub fn evaluate_json(
    old_yaml: &str,
    new_yaml: &str,
    operation: &str,
    settings: &str,
    context_json: &str,
) -> String {
    let context = if context_json.trim().is_empty() {
        Ok(Context::default())
    } else {
        serde_json::from_str::<Context>(context_json)
            .map_err(|e| format!("the request context is not valid: {e}"))
    };
    let answer = match context {
        Ok(context) => evaluate(old_yaml, new_yaml, operation, settings, &context),
        Err(e) => input_error("context", e),
    };
    serde_json::to_string(&answer).unwrap_or_else(|e| {
        json!({"kind": "inputError", "input": "context", "error": format!("cannot write the answer: {e}")})
            .to_string()
    })
}

/// The browser binding: `evaluate(oldYaml, newYaml, operation, settings[, contextJson])` returns
/// the [`Answer`] as a JSON string; `contextJson` is `{"username", "groups", "subResource"}`.
#[cfg(target_arch = "wasm32")]
pub mod wasm {
    use wasm_bindgen::prelude::*;

    /// A panic is a bug: it reaches the page as a JS exception carrying the panic's message
    /// instead of a bare `unreachable` trap.
    #[wasm_bindgen(start)]
    pub fn start() {
        std::panic::set_hook(Box::new(|info| {
            wasm_bindgen::throw_str(&format!("the policy engine panicked: {info}"))
        }));
    }

    #[wasm_bindgen]
    pub fn evaluate(
        old_yaml: &str,
        new_yaml: &str,
        operation: &str,
        settings: &str,
        context_json: Option<String>,
    ) -> String {
        let context_json = context_json.unwrap_or_default();
        super::evaluate_json(old_yaml, new_yaml, operation, settings, &context_json)
    }
}
