//! The listed objects, read and indexed: fields, labels, references, and each pool's instances.

use std::collections::HashMap;

use capi_bootstrap_rollout_policy::capi::config_ref::RefIdentity;
use serde_json::Value;

use super::{Inputs, Instance, POOL_NAME_LABEL};
use crate::drift::time;

pub(super) fn s<'v>(value: &'v Value, path: &[&str]) -> Option<&'v str> {
    path.iter().try_fold(value, |v, k| v.get(k))?.as_str()
}

pub(super) fn meta<'v>(object: &'v Value, key: &str) -> Option<&'v str> {
    s(object, &["metadata", key])
}

pub(super) fn label<'v>(object: &'v Value, key: &str) -> Option<&'v str> {
    object.get("metadata")?.get("labels")?.get(key)?.as_str()
}

pub(super) fn created(object: &Value) -> Option<i64> {
    meta(object, "creationTimestamp").and_then(time::parse)
}

/// `{apiGroup|apiVersion, kind, name}` of a reference, read as the policy reads one; `None`
/// when its kind or name is not a string.
pub(super) fn reference(r: &Value) -> Option<(String, String, String)> {
    r.get("kind")?.as_str()?;
    r.get("name")?.as_str()?;
    let RefIdentity {
        group, kind, name, ..
    } = RefIdentity::of_value(r);
    Some((group, kind, name))
}

pub(super) type Key = (String, String, String);

pub(super) fn key(kind: &str, ns: &str, name: &str) -> Key {
    (kind.to_string(), ns.to_string(), name.to_string())
}

pub(super) struct Index<'a> {
    pub(super) configs: HashMap<Key, &'a Value>,
    pub(super) secrets: HashMap<(String, String), &'a Value>,
    pub(super) infra_pools: HashMap<Key, &'a Value>,
    /// (namespace, pool name) -> instances.
    pub(super) machines: HashMap<(String, String), Vec<Instance>>,
    /// (namespace, pool name or infra pool name) -> instances, by label or owner.
    pub(super) infra_instances: HashMap<(String, String), Vec<Instance>>,
    pub(super) templates: HashMap<Key, &'a Value>,
    /// (namespace, MachineDeployment name) -> its MachineSets.
    pub(super) sets_of: HashMap<(String, String), Vec<&'a Value>>,
    /// (namespace, MachineSet name) -> its Machines not being deleted.
    pub(super) set_machines: HashMap<(String, String), Vec<&'a Value>>,
}

/// The name of `object`'s owner of `kind` (the MachineDeployment of a MachineSet, the
/// MachineSet of a Machine), by its owner references.
pub fn owner<'v>(object: &'v Value, kind: &str) -> Option<&'v str> {
    object
        .pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|o| o.get("kind").and_then(Value::as_str) == Some(kind))?
        .get("name")?
        .as_str()
}

fn namespaced(object: &Value, name: &str) -> (String, String) {
    (
        meta(object, "namespace").unwrap_or("").to_string(),
        name.to_string(),
    )
}

pub(super) fn instance_of(object: &Value) -> Option<Instance> {
    if object.pointer("/metadata/deletionTimestamp").is_some() {
        return None;
    }
    Some(Instance {
        name: meta(object, "name")?.to_string(),
        kind: object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("Machine")
            .to_string(),
        launched: created(object)?,
    })
}

impl<'a> Index<'a> {
    pub(super) fn new(inputs: &Inputs<'a>) -> Self {
        let by_kind = |objects: &'a [Value]| {
            objects
                .iter()
                .filter_map(|o| {
                    Some((
                        key(
                            o.get("kind")?.as_str()?,
                            meta(o, "namespace").unwrap_or(""),
                            meta(o, "name")?,
                        ),
                        o,
                    ))
                })
                .collect::<HashMap<_, _>>()
        };
        let mut machines: HashMap<(String, String), Vec<Instance>> = HashMap::new();
        for m in inputs.machines {
            if let (Some(pool), Some(i)) = (label(m, POOL_NAME_LABEL), instance_of(m)) {
                machines
                    .entry((meta(m, "namespace").unwrap_or("").into(), pool.into()))
                    .or_default()
                    .push(i);
            }
        }
        let mut infra_instances: HashMap<(String, String), Vec<Instance>> = HashMap::new();
        for m in inputs.infra_instances {
            let Some(i) = instance_of(m) else { continue };
            let ns = meta(m, "namespace").unwrap_or("").to_string();
            let mut owners: Vec<String> = label(m, POOL_NAME_LABEL)
                .map(str::to_string)
                .into_iter()
                .collect();
            for o in m
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(name) = o.get("name").and_then(Value::as_str) {
                    if o.get("kind")
                        .and_then(Value::as_str)
                        .is_some_and(|k| k.ends_with("MachinePool"))
                    {
                        owners.push(name.to_string());
                    }
                }
            }
            owners.dedup();
            for owner in owners {
                infra_instances
                    .entry((ns.clone(), owner))
                    .or_default()
                    .push(i.clone());
            }
        }
        let mut sets_of: HashMap<(String, String), Vec<&Value>> = HashMap::new();
        for set in inputs.machine_sets {
            if let Some(md) = owner(set, "MachineDeployment") {
                sets_of.entry(namespaced(set, md)).or_default().push(set);
            }
        }
        let mut set_machines: HashMap<(String, String), Vec<&Value>> = HashMap::new();
        for m in inputs.set_machines {
            if m.pointer("/metadata/deletionTimestamp").is_some() {
                continue;
            }
            if let Some(set) = owner(m, "MachineSet") {
                set_machines.entry(namespaced(m, set)).or_default().push(m);
            }
        }
        Index {
            templates: by_kind(inputs.templates),
            sets_of,
            set_machines,
            configs: by_kind(inputs.configs),
            secrets: inputs
                .secrets
                .iter()
                .filter_map(|o| {
                    Some((
                        (
                            meta(o, "namespace").unwrap_or("").to_string(),
                            meta(o, "name")?.to_string(),
                        ),
                        o,
                    ))
                })
                .collect(),
            infra_pools: by_kind(inputs.infra_pools),
            machines,
            infra_instances,
        }
    }
}
