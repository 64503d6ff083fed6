//! A Kubernetes object as far as the rules read it: from `metadata` its name, namespace, uid,
//! label keys, ownerReferences and the three annotations the rules read; `spec` and `status`.
//! Everything else (`managedFields`, the other annotations, ...) is checked and skipped, not
//! built.
//! Read straight from the request or from a lookup's answer, its strings borrowed from them.

use std::borrow::Cow;

use crate::reader::json::{Next, Read, Reader};
use crate::reader::node::{Node, Text};

/// clusterctl's annotation on an object it is about to delete from the source cluster of a
/// `clusterctl move` (clusterctl_move.rs).
pub const DELETE_FOR_MOVE: &str = "clusterctl.cluster.x-k8s.io/delete-for-move";
/// CAPI's annotation on an object converted down from the stored version (the hub), holding
/// the hub's data ([`crate::capi::conversion`]).
pub const CONVERSION_DATA: &str = "cluster.x-k8s.io/conversion-data";
/// The manifest of kubectl's last client-side apply.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Object<'a> {
    pub name: Option<Cow<'a, str>>,
    pub namespace: Option<Cow<'a, str>>,
    pub uid: Option<Cow<'a, str>>,
    /// The keys of `metadata.labels` (`None`: no labels object).
    pub label_keys: Option<Vec<Text<'a>>>,
    /// `metadata.annotations` has [`DELETE_FOR_MOVE`].
    pub delete_for_move: bool,
    /// The value of [`CONVERSION_DATA`], when it is a string: borrowed, escaped, as
    /// [`Self::last_applied`].
    pub conversion_data: Option<Text<'a>>,
    /// The value of [`LAST_APPLIED`] (a JSON manifest), when it is a string: borrowed as sent,
    /// escaped, so that the many requests that never read it pay nothing for its size.
    pub last_applied: Option<Text<'a>>,
    /// `metadata.ownerReferences` (`None`: not a list); an entry that is no object reads as a
    /// reference without fields.
    pub owner_references: Option<Vec<OwnerRef<'a>>>,
    /// `spec` and `status` as given (`Some(Node::Null)` for an explicit null), borrowed.
    pub spec: Option<Node<'a>>,
    pub status: Option<Node<'a>>,
}

/// The fields of an ownerReference the rules read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OwnerRef<'a> {
    pub api_version: Option<Cow<'a, str>>,
    pub kind: Option<Cow<'a, str>>,
    pub name: Option<Cow<'a, str>>,
    pub uid: Option<Cow<'a, str>>,
    pub controller: Option<bool>,
}

fn string<'a>(r: &mut Reader<'a>) -> Read<Option<Cow<'a, str>>> {
    Ok(r.read_scalar()?.str())
}

fn read_owner_ref<'a>(r: &mut Reader<'a>) -> Read<OwnerRef<'a>> {
    let mut owner = OwnerRef::default();
    r.read_object_or_skip(|r, key| {
        if key.is("apiVersion") {
            owner.api_version = string(r)?;
        } else if key.is("kind") {
            owner.kind = string(r)?;
        } else if key.is("name") {
            owner.name = string(r)?;
        } else if key.is("uid") {
            owner.uid = string(r)?;
        } else if key.is("controller") {
            owner.controller = r.read_scalar()?.as_bool();
        } else {
            r.skip()?;
        }
        Ok(())
    })?;
    Ok(owner)
}

impl<'a> Object<'a> {
    /// Reads an object (a value that is not one reads as an object without fields). A key
    /// given twice counts with its last value, as in a `serde_json::Value`.
    pub fn read(r: &mut Reader<'a>) -> Read<Object<'a>> {
        let mut object = Object::default();
        r.read_object_or_skip(|r, key| {
            if key.is("metadata") {
                object.read_metadata(r)
            } else if key.is("spec") {
                object.spec = Some(r.read_node()?);
                Ok(())
            } else if key.is("status") {
                object.status = Some(r.read_node()?);
                Ok(())
            } else {
                r.skip()
            }
        })?;
        Ok(object)
    }

    fn read_metadata(&mut self, r: &mut Reader<'a>) -> Read<()> {
        (self.name, self.namespace, self.uid) = (None, None, None);
        (self.label_keys, self.owner_references) = (None, None);
        (
            self.delete_for_move,
            self.conversion_data,
            self.last_applied,
        ) = (false, None, None);
        r.read_object_or_skip(|r, key| {
            if key.is("name") {
                self.name = string(r)?;
            } else if key.is("namespace") {
                self.namespace = string(r)?;
            } else if key.is("uid") {
                self.uid = string(r)?;
            } else if key.is("labels") {
                let mut keys = Vec::new();
                let labels = r.read_object_or_skip(|r, key| {
                    // A label given twice is still one key.
                    if !keys.contains(&key) {
                        keys.push(key);
                    }
                    r.skip()
                })?;
                self.label_keys = labels.then_some(keys);
            } else if key.is("annotations") {
                let (mut delete_for_move, mut conversion_data, mut last_applied) =
                    (false, None, None);
                r.read_object_or_skip(|r, key| {
                    if key.is(LAST_APPLIED) {
                        last_applied = r.read_scalar()?.text();
                    } else if key.is(CONVERSION_DATA) {
                        conversion_data = r.read_scalar()?.text();
                    } else {
                        delete_for_move |= key.is(DELETE_FOR_MOVE);
                        r.skip()?;
                    }
                    Ok(())
                })?;
                self.delete_for_move = delete_for_move;
                (self.conversion_data, self.last_applied) = (conversion_data, last_applied);
            } else if key.is("ownerReferences") {
                self.owner_references = r.read_list(read_owner_ref)?;
            } else {
                r.skip()?;
            }
            Ok(())
        })?;
        Ok(())
    }

    /// One object document (the tests' objects, written as JSON).
    #[cfg(test)]
    pub fn from_json(json: &'a [u8]) -> Result<Object<'a>, String> {
        use crate::reader::json::{read_document, serde_message};
        read_document(json, Object::read).map_err(|_| serde_message(json))
    }

    pub fn has_label(&self, key: &str) -> bool {
        self.label_keys
            .as_ref()
            .is_some_and(|keys| keys.iter().any(|k| k.is(key)))
    }

    pub fn owner_references(&self) -> &[OwnerRef<'a>] {
        self.owner_references.as_deref().unwrap_or_default()
    }
}

/// How a request carries an object: `null`, an object, or something else.
#[derive(Clone, Debug, PartialEq)]
// An object is large beside `Null` and `Other`, but a request carries two of them, read once and
// unwrapped at once: boxing would add two allocations per request for nothing.
#[allow(clippy::large_enum_variant)]
pub enum Carried<'a> {
    Null,
    Object(Object<'a>),
    Other,
}

impl<'a> Carried<'a> {
    pub fn read(r: &mut Reader<'a>) -> Read<Carried<'a>> {
        Ok(match r.peek()? {
            Next::Null => {
                r.read_null()?;
                Carried::Null
            }
            Next::Object => Carried::Object(Object::read(r)?),
            _ => {
                r.skip()?;
                Carried::Other
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_what_the_rules_read_and_skips_the_rest() {
        let json = serde_json::to_vec(&json!({
            "apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
            "metadata": {"name": "kc", "namespace": "ns", "uid": "u", "generation": 3,
                         "labels": {"a": "1", "topology.cluster.x-k8s.io/owned": ""},
                         "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
                         "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
                         "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
                                              "name": "mp", "uid": "p", "controller": true}, 7]},
            "spec": {"files": []},
            "status": null,
        }))
        .unwrap();
        let object = Object::from_json(&json).unwrap();
        assert_eq!(object.name.as_deref(), Some("kc"));
        assert!(object.has_label("topology.cluster.x-k8s.io/owned"));
        assert!(!object.has_label("b"));
        assert_eq!(object.owner_references().len(), 2);
        assert_eq!(object.owner_references()[0].controller, Some(true));
        assert_eq!(object.owner_references()[1], OwnerRef::default());
        let spec = json!({"files": []});
        assert_eq!(object.spec, Some(Node::from_value(&spec)));
        assert_eq!(object.status, Some(Node::Null));
        assert_eq!(
            object.last_applied.map(|t| t.to_str()).as_deref(),
            Some("{}")
        );
        assert!(object.conversion_data.is_none() && !object.delete_for_move);
    }

    #[test]
    fn reads_the_conversion_annotation_and_an_escaped_manifest() {
        let json = serde_json::to_vec(&json!({"metadata": {"annotations": {
            CONVERSION_DATA: "{\"spec\":{}}",
            LAST_APPLIED: "{\"spec\":{\"useExperimentalRetryJoin\":true}}\n",
        }}}))
        .unwrap();
        let object = Object::from_json(&json).unwrap();
        assert_eq!(
            object.conversion_data.map(|t| t.to_str()).as_deref(),
            Some("{\"spec\":{}}")
        );
        assert_eq!(
            object.last_applied.map(|t| t.to_str()).as_deref(),
            Some("{\"spec\":{\"useExperimentalRetryJoin\":true}}\n")
        );
        // Not a string: no manifest.
        let json = br#"{"metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": 7}}}"#;
        assert_eq!(Object::from_json(json).unwrap().last_applied, None);
    }

    #[test]
    fn odd_shapes_read_as_absent() {
        let json = br#"{"metadata": {"name": 5, "labels": [], "ownerReferences": {}}, "metadata": {"uid": "x", "labels": "a"}}"#;
        let object = Object::from_json(json).unwrap();
        // The second metadata replaces the first whole.
        assert_eq!(object.name, None);
        assert_eq!(object.uid.as_deref(), Some("x"));
        assert_eq!(object.label_keys, None);
        assert_eq!(object.owner_references, None);
        assert_eq!(Object::from_json(b"[1]").unwrap(), Object::default());
        assert!(Object::from_json(b"{").is_err());
    }
}
