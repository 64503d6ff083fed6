//! The policy as a pure function: (settings, AdmissionRequest) -> verdict. No host calls, so it
//! runs the same natively (tests, benchmarks, tools) and inside the wasm module.

use serde_json::Value;

use crate::contract::check_config_status;
use crate::in_place_edit::{self, rotation_remediation};
use crate::kinds::is_machine_pool;
use crate::ownership::{check_removal, machine_pool_controllers};
use crate::request::{kind_of, Operation, Request};
use crate::rotation;
use crate::settings::{settings_of, Settings};
use crate::topology::controller_may_patch;
use crate::verdict::{Finding, Subject, Verdict};

/// The `validate` entry point: reads `{"request": ..., "settings": ...}`.
pub fn validate_payload(payload: &[u8]) -> Verdict {
    let value: Value = match serde_json::from_slice(payload) {
        Ok(v) => v,
        Err(e) => return Verdict::bad_request(format!("cannot read the validation payload: {e}")),
    };
    let Some(map) = value.as_object() else {
        return Verdict::bad_request("the validation payload must be a JSON object");
    };
    let settings = match settings_of(map) {
        Ok(s) => s,
        Err(e) => return Verdict::bad_request(format!("invalid settings: {e}")),
    };
    match map.get("request") {
        Some(request) => evaluate(&settings, request),
        None => Verdict::bad_request("the validation payload has no request"),
    }
}

/// Judges one AdmissionRequest.
pub fn evaluate(settings: &Settings, request: &Value) -> Verdict {
    let group_kind = match kind_of(request) {
        Ok((gk, _)) => gk,
        Err(e) => return Verdict::bad_request(e),
    };
    let ours = is_machine_pool(&group_kind.group, &group_kind.kind)
        || settings.is_bootstrap_config(&group_kind.group, &group_kind.kind);
    if !ours {
        return Verdict::accept();
    }
    let request = match Request::parse(request) {
        Ok(r) => r,
        Err(e) => return Verdict::bad_request(e),
    };
    let subject = Subject {
        group_kind: request.group_kind.clone(),
        namespace: request.namespace.to_string(),
        name: request.name.to_string(),
    };
    let findings = if is_machine_pool(&group_kind.group, &group_kind.kind) {
        match machine_pool(settings, &request) {
            Ok(findings) => findings,
            Err(e) => {
                return Verdict::bad_request(format!(
                    "{} {:?}: {e}",
                    group_kind.qualified(),
                    request.name
                ))
            }
        }
    } else {
        bootstrap_config(settings, &request, &subject)
    };
    let verdict = Verdict::from_findings(&subject, &findings);
    match request.requester.exemption(settings) {
        Some(reason) => verdict.exempt(&reason),
        None => verdict,
    }
}

fn machine_pool(settings: &Settings, request: &Request) -> Result<Vec<Finding>, String> {
    match (request.operation, request.sub_resource) {
        (Operation::Create | Operation::Update, "") => rotation::check(settings, request),
        _ => Ok(Vec::new()),
    }
}

fn bootstrap_config(settings: &Settings, request: &Request, subject: &Subject) -> Vec<Finding> {
    let mut findings = Vec::new();
    match request.operation {
        Operation::Create => findings.extend(check_config_status(settings, request.object)),
        Operation::Update => {
            let (old_spec, new_spec) = (
                field(request.old_object, "spec"),
                field(request.object, "spec"),
            );
            let owners = machine_pool_controllers(request.old_object);
            if !owners.is_empty() {
                let rules = settings.field_rules(&subject.group_kind.kind);
                findings.extend(check_removal(
                    settings,
                    &request.requester,
                    request.namespace,
                    &owners,
                    request.object,
                    || rotation_remediation(subject, &owners, new_spec, &rules),
                ));
                if !controller_may_patch(settings, &request.requester, request.old_object) {
                    findings.extend(in_place_edit::check(
                        settings, subject, &owners, old_spec, new_spec,
                    ));
                }
            }
            if field(request.object, "status") != field(request.old_object, "status") {
                findings.extend(check_config_status(settings, request.object));
            }
        }
        // Protecting a config in use against DELETE needs lookups (context-aware mode).
        Operation::Delete | Operation::Connect => {}
    }
    findings
}

fn field<'a>(object: Option<&'a Value>, key: &str) -> Option<&'a Value> {
    object.and_then(|o| o.get(key))
}
