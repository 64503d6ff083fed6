//! The admission objects, shaped as policy-evaluator shapes them
//! (`admission_request.rs`, `admission_response.rs`, `policy_evaluator.rs`) so the guest sees
//! the same payload and the user the same output line as with kwctl.

use std::collections::BTreeMap;

use anyhow::{anyhow, Result};
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// admission/v1 AdmissionRequest, with the fields (and the required ones) of
/// policy-evaluator's `AdmissionRequest`. Unknown fields are dropped, as there.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest {
    pub uid: String,
    pub kind: GroupVersionKind,
    pub resource: GroupVersionResource,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sub_resource: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_kind: Option<GroupVersionKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_resource: Option<GroupVersionResource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_sub_resource: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub operation: String,
    pub user_info: UserInfo,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_object: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub options: Option<Value>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct GroupVersionKind {
    pub group: String,
    pub version: String,
    pub kind: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct GroupVersionResource {
    pub group: String,
    pub version: String,
    pub resource: String,
}

/// authentication/v1 UserInfo as k8s-openapi (de)serializes it: every field optional.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct UserInfo {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<BTreeMap<String, Vec<String>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
}

/// What `validate` receives under `request`.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum ValidateRequest {
    /// A policy with `policyType: raw` (or `--raw`) gets the input as it is.
    Raw(Value),
    AdmissionRequest(Box<AdmissionRequest>),
}

impl ValidateRequest {
    /// kwctl's `build_validate_request`: an AdmissionReview is unwrapped to its `.request`,
    /// the result must deserialize into an AdmissionRequest.
    pub fn build(input: &Value, raw: bool) -> Result<ValidateRequest> {
        if raw {
            return Ok(ValidateRequest::Raw(input.clone()));
        }
        let object = input
            .as_object()
            .ok_or_else(|| anyhow!("Invalid request object"))?;
        let request = if object.get("kind").and_then(Value::as_str) == Some("AdmissionReview") {
            object
                .get("request")
                .cloned()
                .ok_or_else(|| anyhow!("invalid AdmissionReview object"))?
        } else {
            input.clone()
        };
        let request: AdmissionRequest = serde_json::from_value(request)
            .map_err(|e| anyhow!("cannot build AdmissionRequest object from given input: {e}"))?;
        Ok(ValidateRequest::AdmissionRequest(Box::new(request)))
    }

    pub fn uid(&self) -> &str {
        match self {
            ValidateRequest::Raw(raw) => raw.get("uid").and_then(Value::as_str).unwrap_or_default(),
            ValidateRequest::AdmissionRequest(request) => &request.uid,
        }
    }
}

/// The guest's answer to `validate` (kubewarden-policy-sdk's `ValidationResponse`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ValidationResponse {
    pub accepted: bool,
    pub message: Option<String>,
    pub code: Option<u16>,
    pub mutated_object: Option<Value>,
    pub audit_annotations: Option<BTreeMap<String, String>>,
    pub warnings: Option<Vec<String>>,
}

/// The guest's answer to `validate_settings`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct SettingsValidationResponse {
    pub valid: bool,
    pub message: Option<String>,
}

/// admission/v1 AdmissionResponse: kwctl's output line, declared with the scenario format
/// that reads it back.
pub use scenario_model::admission::{AdmissionResponse, AdmissionResponseStatus};

/// policy-evaluator's message for a guest call interrupted by the epoch deadline.
pub const TIMEOUT_MESSAGE: &str =
    "Policy execution interrupted because it exceeded the allowed execution time";

const MUTATION_ON_DELETE: &str = "Incoming object is null, which happens only with DELETE operations, but the policy is attempting a mutation. This is not allowed";

/// policy-evaluator's `from_policy_validation_response`: a mutated object becomes a
/// base64 JSONPatch against the request's object.
pub fn from_validation_response(
    uid: &str,
    request_object: Option<&Value>,
    response: &ValidationResponse,
) -> std::result::Result<AdmissionResponse, String> {
    let patch = match (&response.mutated_object, request_object) {
        (Some(_), None) => {
            return Ok(AdmissionResponse {
                uid: uid.to_string(),
                allowed: false,
                status: Some(AdmissionResponseStatus {
                    message: Some(MUTATION_ON_DELETE.to_string()),
                    ..Default::default()
                }),
                ..Default::default()
            })
        }
        (Some(mutated), Some(original)) => {
            let diff = json_patch::diff(original, mutated);
            if diff.0.is_empty() {
                None
            } else {
                let json = serde_json::to_string(&diff)
                    .map_err(|e| format!("cannot deserialize JSONPatch: {e}"))?;
                Some(base64::engine::general_purpose::STANDARD.encode(json))
            }
        }
        (None, _) => None,
    };
    let status =
        (response.message.is_some() || response.code.is_some()).then(|| AdmissionResponseStatus {
            message: response.message.clone(),
            code: response.code,
            ..Default::default()
        });
    Ok(AdmissionResponse {
        uid: uid.to_string(),
        allowed: response.accepted,
        patch_type: patch.as_ref().map(|_| "JSONPatch".to_string()),
        patch,
        status,
        audit_annotations: response.audit_annotations.clone(),
        warnings: response.warnings.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request() -> Value {
        json!({
            "uid": "u-1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE",
            "userInfo": {"username": "alice", "groups": ["g"]},
            "object": {"a": 1},
            "oldObject": null,
            "unknownField": true
        })
    }

    #[test]
    fn raw_request_and_review_give_the_same_request() {
        let raw = ValidateRequest::build(&request(), false).unwrap();
        let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request()});
        let from_review = ValidateRequest::build(&review, false).unwrap();
        let raw_json = serde_json::to_string(&raw).unwrap();
        assert_eq!(raw_json, serde_json::to_string(&from_review).unwrap());
        assert_eq!(raw.uid(), "u-1");
        // Re-serialized as policy-evaluator does: unknown fields and nulls dropped.
        assert_eq!(
            raw_json,
            r#"{"uid":"u-1","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"operation":"CREATE","userInfo":{"groups":["g"],"username":"alice"},"object":{"a":1}}"#
        );
    }

    #[test]
    fn required_fields_are_named() {
        for field in ["uid", "kind", "resource", "operation", "userInfo"] {
            let mut input = request();
            input.as_object_mut().unwrap().remove(field);
            let error = ValidateRequest::build(&input, false)
                .unwrap_err()
                .to_string();
            assert_eq!(
                error,
                format!("cannot build AdmissionRequest object from given input: missing field `{field}`")
            );
        }
        let error = ValidateRequest::build(&json!({"kind": "AdmissionReview"}), false).unwrap_err();
        assert_eq!(error.to_string(), "invalid AdmissionReview object");
        let error = ValidateRequest::build(&json!([1]), false).unwrap_err();
        assert_eq!(error.to_string(), "Invalid request object");
    }

    #[test]
    fn response_lines() {
        let accepted = ValidationResponse {
            accepted: true,
            message: None,
            code: None,
            mutated_object: None,
            audit_annotations: None,
            warnings: None,
        };
        let line = from_validation_response("u", None, &accepted)
            .unwrap()
            .to_line();
        assert_eq!(
            line,
            r#"{"uid":"u","allowed":true,"auditAnnotations":null,"warnings":null}"#
        );

        let rejected = ValidationResponse {
            accepted: false,
            message: Some("no".into()),
            code: Some(403),
            warnings: Some(vec!["w".into()]),
            audit_annotations: Some(BTreeMap::from([("k".into(), "v".into())])),
            ..accepted.clone()
        };
        let line = from_validation_response("u", None, &rejected)
            .unwrap()
            .to_line();
        assert_eq!(
            line,
            r#"{"uid":"u","allowed":false,"status":{"message":"no","code":403},"auditAnnotations":{"k":"v"},"warnings":["w"]}"#
        );

        let line = AdmissionResponse::reject_internal_server_error("u", "boom").to_line();
        assert_eq!(
            line,
            r#"{"uid":"u","allowed":false,"status":{"message":"internal server error: boom","code":500},"auditAnnotations":null,"warnings":null}"#
        );
    }

    #[test]
    fn mutation_becomes_a_patch() {
        let mutated = ValidationResponse {
            accepted: true,
            message: None,
            code: None,
            mutated_object: Some(json!({"a": 2})),
            audit_annotations: None,
            warnings: None,
        };
        let response = from_validation_response("u", Some(&json!({"a": 1})), &mutated).unwrap();
        assert_eq!(response.patch_type.as_deref(), Some("JSONPatch"));
        let patch = base64::engine::general_purpose::STANDARD
            .decode(response.patch.unwrap())
            .unwrap();
        assert_eq!(
            String::from_utf8(patch).unwrap(),
            r#"[{"op":"replace","path":"/a","value":2}]"#
        );
        let same = ValidationResponse {
            mutated_object: Some(json!({"a": 1})),
            ..mutated.clone()
        };
        let response = from_validation_response("u", Some(&json!({"a": 1})), &same).unwrap();
        assert!(response.patch.is_none() && response.patch_type.is_none());
        let on_delete = from_validation_response("u", None, &mutated).unwrap();
        assert!(!on_delete.allowed);
        assert_eq!(on_delete.status.unwrap().code, None);
    }
}
