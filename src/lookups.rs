//! Lookups: what the context-aware mode asks the cluster. Behind a small trait so the rules
//! stay pure: the wasm module asks the host (the `host_lookups` module), tests pass a fake, and
//! tools can serve lookups from manifests.
//!
//! A config is **in use** when the current `configRef` of a MachinePool in its namespace names
//! it. ownerReferences alone cannot tell: CAPI never removes the reference after a rotation,
//! and sets it only once the pool has reconciled.

use serde_json::Value;

use crate::capi::config_ref::RefStrings;
use crate::capi::kinds::{group_of_api_version, GroupKind, CAPI_GROUP, MACHINE_POOL};
use crate::capi::owners::Owner;
use crate::reader::json::{read_document, serde_message, Next, Read, Reader};
use crate::reader::node::Text;
use crate::reader::object::Object;

/// The fields of a MachinePool (or MachineDeployment, MachineSet) the rules read; nothing else
/// travels.
pub const MACHINE_POOL_FIELDS: [&str; 5] = [
    "metadata.deletionTimestamp",
    "metadata.name",
    "metadata.uid",
    "spec.template.spec.bootstrap",
    "spec.template.spec.infrastructureRef",
];
/// The fields of a bootstrap config the rotation checks read.
pub const CONFIG_FIELDS: [&str; 4] = [
    "metadata.name",
    "metadata.ownerReferences",
    "spec",
    "status",
];

/// One namespaced list call: `field_selector` narrows it (`metadata.name=x`), `field_masks`
/// prunes what the host returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListRequest<'a> {
    pub api_version: String,
    pub kind: &'a str,
    pub namespace: &'a str,
    pub field_selector: Option<String>,
    pub field_masks: &'a [&'a str],
}

pub trait Lookups {
    /// The host's answer to a namespaced list, as Kubewarden's `list_resources_by_namespace`
    /// returns it (a JSON object whose `items` are the objects), or why the lookup failed. The
    /// rules read it with [`consumers_in`] and [`config`], as far as they need it.
    fn list(&self, request: &ListRequest) -> Result<Vec<u8>, String>;
}

/// For callers that never look anything up (the context-aware mode is off).
pub struct NoLookups;

impl Lookups for NoLookups {
    fn list(&self, _: &ListRequest) -> Result<Vec<u8>, String> {
        Err("lookups are not available".into())
    }
}

/// A list answer holding `items`, for lookups that serve objects they hold as values (tests,
/// tools reading manifests).
pub fn list_answer(items: &[Value]) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({ "items": items })).unwrap_or_default()
}

/// The MachinePools of a namespace, listed once per request: the host's answer, read with
/// [`consumers_in`].
pub fn machine_pools(
    lookups: &dyn Lookups,
    capi_version: &str,
    namespace: &str,
) -> Result<Vec<u8>, String> {
    consumers(lookups, capi_version, MACHINE_POOL, namespace)
}

/// The objects of a CAPI kind that name bootstrap data in `spec.template.spec.bootstrap`
/// (MachinePool, MachineDeployment, MachineSet) in a namespace; the same few fields of each.
pub(crate) fn consumers(
    lookups: &dyn Lookups,
    capi_version: &str,
    kind: &str,
    namespace: &str,
) -> Result<Vec<u8>, String> {
    lookups.list(&ListRequest {
        api_version: format!("{CAPI_GROUP}/{capi_version}"),
        kind,
        namespace,
        field_selector: None,
        field_masks: &MACHINE_POOL_FIELDS,
    })
}

/// One bootstrap config by name: the host's answer, read with [`config_in`].
pub fn config(
    lookups: &dyn Lookups,
    api_version: String,
    kind: &str,
    namespace: &str,
    name: &str,
) -> Result<Vec<u8>, String> {
    lookups.list(&ListRequest {
        api_version,
        kind,
        namespace,
        field_selector: Some(format!("metadata.name={name}")),
        field_masks: &CONFIG_FIELDS,
    })
}

/// The config of a [`config`] answer: `Ok(None)` when it does not exist.
pub(crate) fn config_in<'a>(answer: &'a [u8], kind: &str) -> Result<Option<Object<'a>>, String> {
    Ok(items_of(answer, kind, Object::read)?.pop())
}

/// The `items` of a list answer, each read with `item`: none when the answer has no `items`
/// (or is no object); `kind` names the list in errors.
fn items_of<'a, T>(
    answer: &'a [u8],
    kind: &str,
    mut item: impl FnMut(&mut Reader<'a>) -> Read<T>,
) -> Result<Vec<T>, String> {
    let mut items = Some(Vec::new());
    read_document(answer, |r| {
        r.read_object_or_skip(|r, key| {
            if key.is("items") {
                items = if r.peek()? == Next::Null {
                    r.read_null()?;
                    Some(Vec::new())
                } else {
                    r.read_list(&mut item)?
                };
            } else {
                r.skip()?;
            }
            Ok(())
        })
        .map(|_| ())
    })
    .map_err(|_| format!("unreadable {kind} list: {}", serde_message(answer)))?;
    items.ok_or_else(|| format!("unreadable {kind} list: items is not a list"))
}

/// A MachinePool (MachineDeployment, MachineSet) of a list, as far as the rules read it: its
/// name and uid, whether it is being deleted, its configRef and dataSecretName, and its
/// infrastructureRef (what the pool's infrastructure does with new bootstrap data). It borrows from
/// the host's answer; the rest of the item is checked and skipped, not parsed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Consumer<'a> {
    pub name: Option<Text<'a>>,
    pub uid: Option<Text<'a>>,
    /// `metadata.deletionTimestamp` is set (not null).
    pub deleting: bool,
    /// `spec.template.spec.bootstrap.configRef`: `None` when absent or null, `Some(None)` when
    /// it is not an object.
    pub config_ref: Option<Option<RefFields<'a>>>,
    pub data_secret_name: Option<Text<'a>>,
    /// `spec.template.spec.infrastructureRef`, as the configRef.
    pub infrastructure_ref: Option<Option<RefFields<'a>>>,
}

impl Consumer<'_> {
    /// The group and kind its infrastructureRef names; empty strings when it has none.
    pub fn infrastructure(&self) -> GroupKind {
        match self.infrastructure_ref.flatten() {
            Some(fields) => fields.group_kind(),
            None => GroupKind::new("", ""),
        }
    }
}

/// The string fields of a configRef.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RefFields<'a> {
    pub api_group: Option<Text<'a>>,
    pub api_version: Option<Text<'a>>,
    pub kind: Option<Text<'a>>,
    pub name: Option<Text<'a>>,
    pub namespace: Option<Text<'a>>,
}

impl RefFields<'_> {
    /// The group (`apiGroup`, else `apiVersion`'s) and kind the ref names.
    pub fn group_kind(&self) -> GroupKind {
        let text = |t: Option<Text>| t.map(|t| t.to_str().into_owned()).unwrap_or_default();
        let group = match (self.api_group, self.api_version) {
            (Some(group), _) => text(Some(group)),
            (None, Some(version)) => group_of_api_version(&version.to_str()).to_string(),
            (None, None) => String::new(),
        };
        GroupKind::new(&group, &text(self.kind))
    }

    /// Whether the ref names the config `{group, kind} namespace/name`: what
    /// [`RefStrings::names`] says of its strings, compared as they are in the answer (a pool
    /// list is read in one pass, without a string built per pool).
    pub fn names(&self, group_kind: &GroupKind, namespace: &str, name: &str) -> bool {
        fn is(text: Option<Text>, s: &str) -> bool {
            text.map_or(s.is_empty(), |t| t.is(s))
        }
        let group = match (self.api_group, self.api_version) {
            (Some(group), _) => group.is(&group_kind.group),
            (None, Some(version)) => {
                let version = version.to_str();
                RefStrings {
                    api_version: Some(&version),
                    ..RefStrings::default()
                }
                .group()
                    == group_kind.group
            }
            (None, None) => group_kind.group.is_empty(),
        };
        is(self.name, name)
            && group
            && is(self.kind, &group_kind.kind)
            && self
                .namespace
                .is_none_or(|ns| ns.is_empty() || ns.is(namespace))
    }
}

fn read_ref<'a>(r: &mut Reader<'a>) -> Read<Option<Option<RefFields<'a>>>> {
    match r.peek()? {
        Next::Null => r.read_null().map(|_| None),
        Next::Object => {
            let mut fields = RefFields::default();
            r.read_object(|r, key| {
                let slot = if key.is("apiGroup") {
                    &mut fields.api_group
                } else if key.is("apiVersion") {
                    &mut fields.api_version
                } else if key.is("kind") {
                    &mut fields.kind
                } else if key.is("name") {
                    &mut fields.name
                } else if key.is("namespace") {
                    &mut fields.namespace
                } else {
                    return r.skip();
                };
                *slot = r.read_scalar()?.text();
                Ok(())
            })?;
            Ok(Some(Some(fields)))
        }
        _ => r.skip().map(|_| Some(None)),
    }
}

/// Reads the value at `keys` below an object into `state` with `read`. A key given twice
/// counts with its last value, as in a `serde_json::Value`: each one resets `state` first.
fn read_at<'a, S: Default>(
    r: &mut Reader<'a>,
    keys: &[&str],
    state: &mut S,
    read: fn(&mut Reader<'a>, &mut S) -> Read<()>,
) -> Read<()> {
    let Some((first, rest)) = keys.split_first() else {
        return read(r, state);
    };
    r.read_object_or_skip(|r, key| {
        if key.is(first) {
            *state = S::default();
            read_at(r, rest, state, read)
        } else {
            r.skip()
        }
    })
    .map(|_| ())
}

/// `configRef` and `dataSecretName` of `spec.template.spec.bootstrap`.
type Bootstrap<'a> = (Option<Option<RefFields<'a>>>, Option<Text<'a>>);

/// `spec.template.spec`: its bootstrap and its `infrastructureRef`.
type TemplateSpec<'a> = (Bootstrap<'a>, Option<Option<RefFields<'a>>>);

fn read_template_spec<'a>(r: &mut Reader<'a>, spec: &mut TemplateSpec<'a>) -> Read<()> {
    r.read_object_or_skip(|r, key| {
        if key.is("bootstrap") {
            // A key given twice counts with its last value.
            spec.0 = Bootstrap::default();
            read_bootstrap(r, &mut spec.0)
        } else if key.is("infrastructureRef") {
            spec.1 = read_ref(r)?;
            Ok(())
        } else {
            r.skip()
        }
    })
    .map(|_| ())
}

fn read_bootstrap<'a>(r: &mut Reader<'a>, bootstrap: &mut Bootstrap<'a>) -> Read<()> {
    r.read_object_or_skip(|r, key| {
        if key.is("configRef") {
            bootstrap.0 = read_ref(r)?;
        } else if key.is("dataSecretName") {
            bootstrap.1 = r.read_scalar()?.text();
        } else {
            r.skip()?;
        }
        Ok(())
    })
    .map(|_| ())
}

fn read_consumer<'a>(r: &mut Reader<'a>) -> Read<Consumer<'a>> {
    let mut pool = Consumer::default();
    r.read_object_or_skip(|r, key| {
        if key.is("metadata") {
            (pool.name, pool.uid, pool.deleting) = (None, None, false);
            r.read_object_or_skip(|r, key| {
                if key.is("name") {
                    pool.name = r.read_scalar()?.text();
                } else if key.is("uid") {
                    pool.uid = r.read_scalar()?.text();
                } else if key.is("deletionTimestamp") {
                    pool.deleting = !r.read_scalar()?.is_null();
                } else {
                    r.skip()?;
                }
                Ok(())
            })?;
            Ok(())
        } else if key.is("spec") {
            // spec.template.spec.bootstrap and .infrastructureRef
            let mut template_spec = TemplateSpec::default();
            read_at(
                r,
                &["template", "spec"],
                &mut template_spec,
                read_template_spec,
            )?;
            (
                (pool.config_ref, pool.data_secret_name),
                pool.infrastructure_ref,
            ) = template_spec;
            Ok(())
        } else {
            r.skip()
        }
    })?;
    Ok(pool)
}

/// The consumers of a list answer (`kind` names the list in errors).
pub(crate) fn consumers_in<'a>(answer: &'a [u8], kind: &str) -> Result<Vec<Consumer<'a>>, String> {
    items_of(answer, kind, read_consumer)
}

fn owner_of(pool: &Consumer) -> Owner {
    let text = |t: Option<Text>| t.map(|t| t.to_str().into_owned()).unwrap_or_default();
    Owner {
        name: text(pool.name),
        uid: text(pool.uid),
    }
}

pub(crate) fn is_being_deleted(pool: &Consumer) -> bool {
    pool.deleting
}

/// The pools whose current configRef names `{group, kind} namespace/name`.
pub(crate) fn referencing<'p, 'a>(
    pools: &'p [Consumer<'a>],
    group_kind: &GroupKind,
    namespace: &str,
    name: &str,
) -> Vec<(Owner, &'p Consumer<'a>)> {
    pools
        .iter()
        .filter(|pool| {
            pool.config_ref
                .flatten()
                .is_some_and(|r| r.names(group_kind, namespace, name))
        })
        .map(|pool| (owner_of(pool), pool))
        .collect()
}

/// The pools whose `dataSecretName` is `name`: they consumed a data secret of that name.
pub(crate) fn consuming_data_secret(pools: &[Consumer], name: &str) -> Vec<Owner> {
    pools
        .iter()
        .filter(|pool| pool.data_secret_name.is_some_and(|t| t.is(name)))
        .map(owner_of)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn group_kind() -> GroupKind {
        GroupKind::new("bootstrap.cluster.x-k8s.io", "KubeadmConfig")
    }

    fn pool(name: &str, config_ref: Value) -> Value {
        json!({"metadata": {"name": name, "uid": format!("uid-{name}")},
               "spec": {"template": {"spec": {"bootstrap": {"configRef": config_ref, "dataSecretName": "kc-1"}}}}})
    }

    fn names(pools: &[Consumer]) -> Vec<String> {
        referencing(pools, &group_kind(), "ns", "kc-1")
            .into_iter()
            .map(|(owner, _)| owner.name)
            .collect()
    }

    #[test]
    fn a_list_is_read_as_far_as_the_rules_read_it() {
        let answer = list_answer(&[
            pool(
                "v1beta2",
                json!({"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": "kc-1"}),
            ),
            pool(
                "v1beta1",
                json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1", "kind": "KubeadmConfig", "name": "kc-1", "namespace": "ns"}),
            ),
            pool(
                "other-namespace",
                json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1", "kind": "KubeadmConfig", "name": "kc-1", "namespace": "x"}),
            ),
            pool("a-string-ref", json!("kc-1")),
            pool("no-ref", json!(null)),
            json!("not an object"),
            json!({"metadata": {"name": "esc\u{e9}aped\n", "deletionTimestamp": null},
                   "spec": {"template": 7}}),
        ]);
        let pools = consumers_in(&answer, "MachinePool").unwrap();
        assert_eq!(pools.len(), 7);
        assert_eq!(names(&pools), ["v1beta2", "v1beta1"]);
        assert_eq!(pools[6].name.unwrap().to_str(), "esc\u{e9}aped\n");
        assert!(!pools[6].deleting);
        assert_eq!(consuming_data_secret(&pools, "kc-1").len(), 5);
    }

    #[test]
    fn deletion_and_duplicate_keys_as_a_json_value_reads_them() {
        let answer = br#"{"items": [{"metadata": {"name": "a", "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"template": {"spec": {"bootstrap": {"configRef": {"kind": "KubeadmConfig", "name": "kc-1", "apiGroup": "bootstrap.cluster.x-k8s.io"}}}}},
            "spec": {"template": {"spec": {"bootstrap": {"dataSecretName": "x"}}}}}]}"#;
        let pools = consumers_in(answer, "MachinePool").unwrap();
        assert!(is_being_deleted(&pools[0]));
        // The second spec replaces the first whole: no configRef left.
        assert_eq!(pools[0].config_ref, None);
        assert!(pools[0].data_secret_name.unwrap().is("x"));
    }

    #[test]
    fn unreadable_answers_are_failed_lookups() {
        assert_eq!(
            consumers_in(br#"{"items": null}"#, "MachinePool").unwrap(),
            []
        );
        assert_eq!(
            consumers_in(br#"{"kind": "List"}"#, "MachinePool").unwrap(),
            []
        );
        assert_eq!(
            consumers_in(br#"{"items": {}}"#, "MachinePool").unwrap_err(),
            "unreadable MachinePool list: items is not a list"
        );
        assert!(consumers_in(br#"{"items": [}"#, "MachinePool")
            .unwrap_err()
            .starts_with("unreadable MachinePool list: "));
    }
}
