//! Lookups: what the context-aware mode asks the cluster. Behind a small trait so the rules
//! stay pure: the wasm module asks the host (the `host_lookups` module), tests pass a fake, and
//! tools can serve lookups from manifests.
//!
//! A config is **in use** when the current `configRef` of a MachinePool in its namespace names
//! it. ownerReferences alone cannot tell: CAPI never removes the reference after a rotation,
//! and sets it only once the pool has reconciled.

use serde_json::Value;

use crate::config_ref::{config_ref, RefIdentity};
use crate::kinds::{at, GroupKind, CAPI_GROUP, MACHINE_POOL};
use crate::ownership::Owner;

/// The fields of a MachinePool (or MachineDeployment, MachineSet) the rules read; nothing else
/// travels.
pub const MACHINE_POOL_FIELDS: [&str; 4] = [
    "metadata.deletionTimestamp",
    "metadata.name",
    "metadata.uid",
    "spec.template.spec.bootstrap",
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
    /// The items of a namespaced list, or why the lookup failed.
    fn list(&self, request: &ListRequest) -> Result<Vec<Value>, String>;
}

/// For callers that never look anything up (the context-aware mode is off).
pub struct NoLookups;

impl Lookups for NoLookups {
    fn list(&self, _: &ListRequest) -> Result<Vec<Value>, String> {
        Err("lookups are not available".into())
    }
}

/// The MachinePools of a namespace, listed once per request.
pub fn machine_pools(
    lookups: &dyn Lookups,
    capi_version: &str,
    namespace: &str,
) -> Result<Vec<Value>, String> {
    consumers(lookups, capi_version, MACHINE_POOL, namespace)
}

/// The objects of a CAPI kind that name bootstrap data in `spec.template.spec.bootstrap`
/// (MachinePool, MachineDeployment, MachineSet) in a namespace; the same few fields of each.
pub fn consumers(
    lookups: &dyn Lookups,
    capi_version: &str,
    kind: &str,
    namespace: &str,
) -> Result<Vec<Value>, String> {
    lookups.list(&ListRequest {
        api_version: format!("{CAPI_GROUP}/{capi_version}"),
        kind,
        namespace,
        field_selector: None,
        field_masks: &MACHINE_POOL_FIELDS,
    })
}

/// One bootstrap config by name: `Ok(None)` when it does not exist.
pub fn config(
    lookups: &dyn Lookups,
    api_version: String,
    kind: &str,
    namespace: &str,
    name: &str,
) -> Result<Option<Value>, String> {
    let mut items = lookups.list(&ListRequest {
        api_version,
        kind,
        namespace,
        field_selector: Some(format!("metadata.name={name}")),
        field_masks: &CONFIG_FIELDS,
    })?;
    Ok(items.pop())
}

fn owner_of(pool: &Value) -> Owner {
    let field = |key| {
        at(pool, &["metadata", key])
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    Owner {
        name: field("name"),
        uid: field("uid"),
    }
}

pub fn is_being_deleted(pool: &Value) -> bool {
    at(pool, &["metadata", "deletionTimestamp"]).is_some_and(|t| !t.is_null())
}

/// The pools whose current configRef names `{group, kind} namespace/name`.
pub fn referencing<'a>(
    pools: &'a [Value],
    group_kind: &GroupKind,
    namespace: &str,
    name: &str,
) -> Vec<(Owner, &'a Value)> {
    pools
        .iter()
        .filter(|pool| {
            let Ok(Some(r)) = config_ref(Some(pool)) else {
                return false;
            };
            let id = RefIdentity::of(r);
            id.group == group_kind.group
                && id.kind == group_kind.kind
                && id.name == name
                && (id.namespace.is_empty() || id.namespace == namespace)
        })
        .map(|pool| (owner_of(pool), pool))
        .collect()
}

/// The pools whose `dataSecretName` is `name`: they consumed a data secret of that name.
pub fn consuming_data_secret(pools: &[Value], name: &str) -> Vec<Owner> {
    pools
        .iter()
        .filter(|pool| {
            at(
                pool,
                &["spec", "template", "spec", "bootstrap", "dataSecretName"],
            )
            .and_then(Value::as_str)
                == Some(name)
        })
        .map(owner_of)
        .collect()
}
