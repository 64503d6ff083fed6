//! The AdmissionRequest as far as the rules read it, tolerant of every shape: the API server
//! sends well-formed requests, but kwctl users, fuzzers and future API versions may not.
//!
//! It is read from the payload's bytes ([`RequestDoc::read`]): from the request its kind,
//! operation, subresource, namespace, name and user, and the two objects as [`Object`]s
//! (`managedFields` and everything else no rule reads are checked and skipped, not built).

use std::borrow::Cow;

use crate::capi::kinds::GroupKind;
use crate::reader::json::{Read, Reader, Scalar};
use crate::reader::object::{Carried, Object};
use crate::rules::exemptions::Requester;

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
