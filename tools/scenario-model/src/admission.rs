//! The one line `kwctl run` prints: admission/v1 AdmissionResponse as policy-evaluator
//! serializes it. policy-host writes it byte for byte; the runner reads it back from either.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::spec::Response;

/// Field order uid, allowed, patchType, patch, status, auditAnnotations, warnings; the first
/// optional three are omitted when absent, the last two are always written (`null` when
/// absent).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionResponse {
    #[serde(default)]
    pub uid: String,
    pub allowed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<AdmissionResponseStatus>,
    #[serde(default)]
    pub audit_annotations: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub warnings: Option<Vec<String>>,
}

/// Field order status, message, reason, details, code; each omitted when absent.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct AdmissionResponseStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<u16>,
}

impl AdmissionResponse {
    pub fn reject(uid: &str, message: String, code: u16) -> AdmissionResponse {
        AdmissionResponse {
            uid: uid.to_string(),
            allowed: false,
            status: Some(AdmissionResponseStatus {
                message: Some(message),
                code: Some(code),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    pub fn reject_internal_server_error(
        uid: &str,
        message: impl std::fmt::Display,
    ) -> AdmissionResponse {
        AdmissionResponse::reject(uid, format!("internal server error: {message}"), 500)
    }

    /// The one line kwctl prints.
    pub fn to_line(&self) -> String {
        // Serializing these plain structs cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    pub fn message(&self) -> Option<&str> {
        self.status.as_ref().and_then(|s| s.message.as_deref())
    }

    pub fn code(&self) -> Option<u16> {
        self.status.as_ref().and_then(|s| s.code)
    }

    /// The answer as scenario expectations read it.
    pub fn as_response(&self) -> Response<'_> {
        Response {
            allowed: self.allowed,
            code: self.code(),
            message: self.message(),
            warnings: self.warnings.as_deref().unwrap_or_default(),
            audit_annotations: self.audit_annotations.as_ref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_back_as_written() {
        let line = AdmissionResponse::reject_internal_server_error("u", "boom").to_line();
        assert_eq!(
            line,
            r#"{"uid":"u","allowed":false,"status":{"message":"internal server error: boom","code":500},"auditAnnotations":null,"warnings":null}"#
        );
        let read: AdmissionResponse = serde_json::from_str(&line).unwrap();
        assert_eq!(read.to_line(), line);
        let response = read.as_response();
        assert_eq!(
            (response.allowed, response.code, response.message),
            (false, Some(500), Some("internal server error: boom"))
        );
        assert!(response.warnings.is_empty() && response.audit_annotations.is_none());
    }
}
