//! The AdmissionRequest as far as the rules read it, tolerant of every shape: the API server
//! sends well-formed requests, but kwctl users, fuzzers and future API versions may not.
//!
//! It is read from the payload's bytes ([`RequestDoc::read`]): from the request its kind,
//! operation, subresource, namespace, name and user, and the two objects as [`Object`]s
//! (`managedFields` and everything else no rule reads are checked and skipped, not built).

use std::borrow::Cow;

use crate::reader::group_kind::GroupKind;
use crate::reader::json::{Read, Reader};
use crate::reader::node::Scalar;
use crate::reader::object::{Carried, Object};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

/// `request.kind` as given.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KindDoc<'a> {
    pub group: Scalar<'a>,
    pub version: Scalar<'a>,
    pub kind: Scalar<'a>,
}

/// The request as read, before any shape is judged. A key given twice counts with its last
/// value, as in a `serde_json::Value`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RequestDoc<'a> {
    /// `None`: no `kind`; a `kind` that is no object reads as one without fields.
    pub kind: Option<KindDoc<'a>>,
    pub operation: Scalar<'a>,
    pub sub_resource: Option<Cow<'a, str>>,
    pub namespace: Option<Cow<'a, str>>,
    pub name: Option<Cow<'a, str>>,
    pub username: Option<Cow<'a, str>>,
    pub groups: Vec<Cow<'a, str>>,
    /// `None`: absent.
    pub object: Option<Carried<'a>>,
    pub old_object: Option<Carried<'a>>,
}

fn string<'a>(r: &mut Reader<'a>) -> Read<Option<Cow<'a, str>>> {
    Ok(r.read_scalar()?.str())
}

impl<'a> RequestDoc<'a> {
    /// Reads `request` (a value that is not an object reads as a request without fields).
    pub fn read(r: &mut Reader<'a>) -> Read<RequestDoc<'a>> {
        let mut doc = RequestDoc::default();
        r.read_object_or_skip(|r, key| {
            if key.is("kind") {
                let mut kind = KindDoc::default();
                r.read_object_or_skip(|r, key| {
                    if key.is("group") {
                        kind.group = r.read_scalar()?;
                    } else if key.is("version") {
                        kind.version = r.read_scalar()?;
                    } else if key.is("kind") {
                        kind.kind = r.read_scalar()?;
                    } else {
                        r.skip()?;
                    }
                    Ok(())
                })?;
                doc.kind = Some(kind);
            } else if key.is("operation") {
                doc.operation = r.read_scalar()?;
            } else if key.is("subResource") {
                doc.sub_resource = string(r)?;
            } else if key.is("namespace") {
                doc.namespace = string(r)?;
            } else if key.is("name") {
                doc.name = string(r)?;
            } else if key.is("userInfo") {
                (doc.username, doc.groups) = (None, Vec::new());
                r.read_object_or_skip(|r, key| {
                    if key.is("username") {
                        doc.username = string(r)?;
                    } else if key.is("groups") {
                        doc.groups = r
                            .read_list(|r| r.read_scalar())?
                            .unwrap_or_default()
                            .into_iter()
                            .filter_map(|g| g.str())
                            .collect();
                    } else {
                        r.skip()?;
                    }
                    Ok(())
                })?;
            } else if key.is("object") {
                doc.object = Some(Carried::read(r)?);
            } else if key.is("oldObject") {
                doc.old_object = Some(Carried::read(r)?);
            } else {
                r.skip()?;
            }
            Ok(())
        })?;
        Ok(doc)
    }

    /// `request.kind`, read first: requests for kinds the policy does not judge are accepted
    /// without looking any further.
    pub fn kind_of(&self) -> Result<(GroupKind, Cow<'a, str>), String> {
        let kind = self
            .kind
            .as_ref()
            .ok_or("malformed AdmissionRequest: request.kind is missing")?;
        let name = kind
            .kind
            .str()
            .ok_or("malformed AdmissionRequest: request.kind.kind must be a string")?;
        let group = match kind.group {
            Scalar::Null => Cow::Borrowed(""),
            Scalar::Str(g) => g.to_str(),
            _ => {
                return Err(
                    "malformed AdmissionRequest: request.kind.group must be a string".into(),
                )
            }
        };
        Ok((
            GroupKind::new(&group, &name),
            kind.version.str().unwrap_or_default(),
        ))
    }
}

/// Who is asking: `request.userInfo` (a missing or malformed one is an anonymous requester).
/// Identities match exactly; no prefixes, no case folding.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Requester<'a> {
    pub username: &'a str,
    pub groups: Vec<&'a str>,
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
    pub object: Option<&'a Object<'a>>,
    pub old_object: Option<&'a Object<'a>>,
}

fn object_field<'d, 'a>(
    carried: &'d Option<Carried<'a>>,
    key: &str,
) -> Result<Option<&'d Object<'a>>, String> {
    match carried {
        None | Some(Carried::Null) => Ok(None),
        Some(Carried::Object(object)) => Ok(Some(object)),
        Some(Carried::Other) => Err(format!(
            "malformed AdmissionRequest: request.{key} must be an object"
        )),
    }
}

impl<'a> Request<'a> {
    /// Judges the shape of a request read by [`RequestDoc::read`], of the kind and version
    /// [`RequestDoc::kind_of`] gave.
    pub fn parse(
        doc: &'a RequestDoc<'a>,
        group_kind: GroupKind,
        version: &'a str,
    ) -> Result<Self, String> {
        let operation = match doc.operation.str().as_deref() {
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
        let object = object_field(&doc.object, "object")?;
        let old_object = object_field(&doc.old_object, "oldObject")?;
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
        let meta = |given: &'a Option<Cow<'a, str>>,
                    of: fn(&'a Object<'a>) -> &'a Option<Cow<'a, str>>| {
            given
                .as_deref()
                .or_else(|| object.or(old_object).and_then(|o| of(o).as_deref()))
                .unwrap_or("")
        };
        Ok(Request {
            group_kind,
            version,
            sub_resource: doc.sub_resource.as_deref().unwrap_or(""),
            operation,
            namespace: meta(&doc.namespace, |o| &o.namespace),
            name: meta(&doc.name, |o| &o.name),
            requester: Requester {
                username: doc.username.as_deref().unwrap_or(""),
                groups: doc.groups.iter().map(|g| g.as_ref()).collect(),
            },
            object,
            old_object,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::json::read_document;
    use rstest::rstest;
    use serde_json::{json, Value};

    /// `check` on the request read from `request` (with a KubeadmConfig kind when it has none).
    fn parsed<T>(request: Value, check: impl FnOnce(Result<Request, String>) -> T) -> T {
        let json = serde_json::to_vec(&request).unwrap();
        let doc = read_document(&json, RequestDoc::read).unwrap();
        let (group_kind, version) = doc.kind_of().unwrap();
        check(Request::parse(&doc, group_kind, &version))
    }

    const KIND: &str =
        r#"{"group": "bootstrap.cluster.x-k8s.io", "version": "v1beta2", "kind": "KubeadmConfig"}"#;

    fn kind() -> Value {
        serde_json::from_str(KIND).unwrap()
    }

    #[rstest]
    #[case::kind(json!({"kind": kind()}), Ok(("KubeadmConfig.bootstrap.cluster.x-k8s.io", "v1beta2")))]
    #[case::core_group_null(json!({"kind": {"group": null, "kind": "Pod"}}), Ok(("Pod", "")))]
    #[case::core_group_empty(json!({"kind": {"group": "", "version": "v1", "kind": "Pod"}}), Ok(("Pod", "v1")))]
    #[case::version_not_a_string(json!({"kind": {"group": "g.io", "version": 1, "kind": "K"}}), Ok(("K.g.io", "")))]
    #[case::no_kind(json!({"operation": "CREATE"}), Err("malformed AdmissionRequest: request.kind is missing"))]
    #[case::kind_not_an_object(json!({"kind": "KubeadmConfig"}), Err("malformed AdmissionRequest: request.kind.kind must be a string"))]
    #[case::kind_a_number(json!({"kind": {"kind": 5}}), Err("malformed AdmissionRequest: request.kind.kind must be a string"))]
    #[case::group_a_number(json!({"kind": {"group": 5, "kind": "K"}}), Err("malformed AdmissionRequest: request.kind.group must be a string"))]
    fn the_kind_is_read_first(
        #[case] request: Value,
        #[case] expected: Result<(&str, &str), &str>,
    ) {
        let json = serde_json::to_vec(&request).unwrap();
        let doc = read_document(&json, RequestDoc::read).unwrap();
        let found = doc.kind_of();
        let found = found
            .as_ref()
            .map(|(gk, version)| (gk.qualified(), version.to_string()))
            .map_err(String::as_str);
        assert_eq!(
            found,
            expected.map(|(gk, version)| (gk.to_string(), version.to_string()))
        );
    }

    #[rstest]
    #[case::create(json!("CREATE"), json!({}), json!(null), Ok(Operation::Create))]
    #[case::update(json!("UPDATE"), json!({}), json!({}), Ok(Operation::Update))]
    #[case::delete_without_objects(json!("DELETE"), json!(null), json!(null), Ok(Operation::Delete))]
    #[case::connect(json!("CONNECT"), json!(null), json!(null), Ok(Operation::Connect))]
    #[case::lower_case(json!("update"), json!({}), json!({}), Err("malformed AdmissionRequest: unknown request.operation \"update\""))]
    #[case::no_operation(json!(null), json!({}), json!({}), Err("malformed AdmissionRequest: request.operation is missing or not a string"))]
    #[case::create_without_object(json!("CREATE"), json!(null), json!(null), Err("malformed AdmissionRequest: request.object is required for Create"))]
    #[case::update_without_old_object(json!("UPDATE"), json!({}), json!(null), Err("malformed AdmissionRequest: request.oldObject is required for Update"))]
    #[case::object_a_list(json!("DELETE"), json!([]), json!(null), Err("malformed AdmissionRequest: request.object must be an object"))]
    #[case::old_object_a_string(json!("DELETE"), json!(null), json!("x"), Err("malformed AdmissionRequest: request.oldObject must be an object"))]
    fn the_operation_needs_its_objects(
        #[case] operation: Value,
        #[case] object: Value,
        #[case] old_object: Value,
        #[case] expected: Result<Operation, &str>,
    ) {
        let request = json!({"kind": kind(), "operation": operation, "object": object, "oldObject": old_object});
        parsed(request, |r| {
            assert_eq!(
                r.map(|r| r.operation).map_err(|e| e.to_string()),
                expected.map_err(str::to_string)
            );
        });
    }

    #[rstest]
    #[case::given(json!({"namespace": "fleet", "name": "kc"}), json!({"metadata": {"namespace": "other", "name": "x"}}), ("fleet", "kc"))]
    #[case::from_the_object(json!({}), json!({"metadata": {"namespace": "fleet", "name": "kc"}}), ("fleet", "kc"))]
    #[case::nowhere(json!({}), json!({"metadata": {}}), ("", ""))]
    #[case::not_strings(json!({"namespace": 1, "name": ["kc"]}), json!({"metadata": {"namespace": "fleet", "name": "kc"}}), ("fleet", "kc"))]
    fn namespace_and_name_fall_back_to_the_object(
        #[case] given: Value,
        #[case] object: Value,
        #[case] expected: (&str, &str),
    ) {
        let mut request = json!({"kind": kind(), "operation": "CREATE", "object": object});
        request
            .as_object_mut()
            .unwrap()
            .extend(given.as_object().unwrap().clone());
        parsed(request, |r| {
            let r = r.unwrap();
            assert_eq!((r.namespace, r.name), expected);
        });
    }

    #[rstest]
    #[case::user_and_groups(json!({"username": "alice", "groups": ["a", "b"]}), "alice", &["a", "b"])]
    #[case::escaped(json!({"username": "al\u{e9}ce\n"}), "al\u{e9}ce\n", &[])]
    #[case::groups_not_strings(json!({"username": "bob", "groups": ["a", 1, null, "b"]}), "bob", &["a", "b"])]
    #[case::groups_not_a_list(json!({"username": "bob", "groups": "a"}), "bob", &[])]
    #[case::no_user_info(json!(null), "", &[])]
    #[case::user_info_a_string(json!("alice"), "", &[])]
    fn the_requester_is_read_from_user_info(
        #[case] user_info: Value,
        #[case] username: &str,
        #[case] groups: &[&str],
    ) {
        let request = json!({"kind": kind(), "operation": "DELETE", "userInfo": user_info, "subResource": "status"});
        parsed(request, |r| {
            let r = r.unwrap();
            assert_eq!(
                r.requester,
                Requester {
                    username,
                    groups: groups.to_vec()
                }
            );
            assert_eq!(r.sub_resource, "status");
        });
    }

    #[test]
    fn a_key_given_twice_counts_with_its_last_value() {
        let json = format!(
            r#"{{"kind": {KIND}, "operation": "CREATE", "operation": "DELETE", "name": "a", "name": "b",
                 "userInfo": {{"username": "x", "groups": ["g"]}}, "userInfo": {{"username": "y"}}}}"#
        );
        let doc = read_document(json.as_bytes(), RequestDoc::read).unwrap();
        let (group_kind, version) = doc.kind_of().unwrap();
        let request = Request::parse(&doc, group_kind, &version).unwrap();
        assert_eq!((request.operation, request.name), (Operation::Delete, "b"));
        assert_eq!(
            request.requester,
            Requester {
                username: "y",
                groups: vec![]
            }
        );
    }
}
