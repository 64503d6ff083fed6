//! A read-only view of the AdmissionRequest, tolerant of every shape: the API server sends
//! well-formed requests, but kwctl users, fuzzers and future API versions may not.

use serde_json::Value;

use crate::identity::Requester;
use crate::kinds::{at, str_field, GroupKind};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

#[derive(Clone, Debug)]
pub struct Request<'a> {
    pub group_kind: GroupKind,
    pub version: &'a str,
    pub sub_resource: &'a str,
    pub operation: Operation,
    pub namespace: &'a str,
    pub name: &'a str,
    pub requester: Requester<'a>,
    pub object: Option<&'a Value>,
    pub old_object: Option<&'a Value>,
}

/// `request.kind`, read first: requests for kinds the policy does not judge are accepted
/// without looking any further.
pub fn kind_of(request: &Value) -> Result<(GroupKind, &str), String> {
    let kind = request
        .get("kind")
        .ok_or("malformed AdmissionRequest: request.kind is missing")?;
    let name = str_field(kind, "kind")
        .ok_or("malformed AdmissionRequest: request.kind.kind must be a string")?;
    let group = match kind.get("group") {
        None | Some(Value::Null) => "",
        Some(Value::String(g)) => g,
        Some(_) => {
            return Err("malformed AdmissionRequest: request.kind.group must be a string".into())
        }
    };
    Ok((
        GroupKind::new(group, name),
        str_field(kind, "version").unwrap_or(""),
    ))
}

fn object_field<'a>(request: &'a Value, key: &str) -> Result<Option<&'a Value>, String> {
    match request.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v @ Value::Object(_)) => Ok(Some(v)),
        Some(_) => Err(format!(
            "malformed AdmissionRequest: request.{key} must be an object"
        )),
    }
}

impl<'a> Request<'a> {
    pub fn parse(request: &'a Value) -> Result<Self, String> {
        if !request.is_object() {
            return Err("malformed AdmissionRequest: the request must be a JSON object".into());
        }
        let (group_kind, version) = kind_of(request)?;
        let operation = match request.get("operation").and_then(Value::as_str) {
            Some("CREATE") => Operation::Create,
            Some("UPDATE") => Operation::Update,
            Some("DELETE") => Operation::Delete,
            Some("CONNECT") => Operation::Connect,
            Some(other) => {
                return Err(format!(
                    "malformed AdmissionRequest: unknown request.operation {other:?}"
                ))
            }
            None => {
                return Err(
                    "malformed AdmissionRequest: request.operation is missing or not a string"
                        .into(),
                )
            }
        };
        let object = object_field(request, "object")?;
        let old_object = object_field(request, "oldObject")?;
        let required = match operation {
            Operation::Create => [(object, "object")].to_vec(),
            Operation::Update => [(object, "object"), (old_object, "oldObject")].to_vec(),
            Operation::Delete | Operation::Connect => Vec::new(),
        };
        if let Some((_, key)) = required.iter().find(|(v, _)| v.is_none()) {
            return Err(format!(
                "malformed AdmissionRequest: request.{key} is required for {operation:?}"
            ));
        }
        let meta = |key: &str| {
            str_field(request, key)
                .or_else(|| {
                    object
                        .or(old_object)
                        .and_then(|o| at(o, &["metadata", key])?.as_str())
                })
                .unwrap_or("")
        };
        Ok(Request {
            group_kind,
            version,
            sub_resource: str_field(request, "subResource").unwrap_or(""),
            operation,
            namespace: meta("namespace"),
            name: meta("name"),
            requester: Requester::from_user_info(request.get("userInfo")),
            object,
            old_object,
        })
    }
}
