//! Ownership: a config is in use when a MachinePool controls it (the controller ownerReference
//! CAPI's MachinePool controller sets), and that reference may not be laundered away.

use crate::capi::kinds::{group_of_api_version, is_machine_pool};
use crate::reader::object::Object;
use crate::rules::exemptions::Requester;
use crate::settings::{Action, Settings};
use crate::verdict::{Finding, Violation};

/// A MachinePool that controls a config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    pub name: String,
    pub uid: String,
}

/// The MachinePool controller references of an object (any version, current or `exp` group).
pub fn machine_pool_controllers(object: Option<&Object>) -> Vec<Owner> {
    let Some(refs) = object.and_then(|o| o.owner_references.as_deref()) else {
        return Vec::new();
    };
    refs.iter()
        .filter(|r| r.controller == Some(true))
        .filter(|r| {
            is_machine_pool(
                group_of_api_version(r.api_version.as_deref().unwrap_or("")),
                r.kind.as_deref().unwrap_or(""),
            )
        })
        .map(|r| Owner {
            name: r.name.as_deref().unwrap_or("").to_string(),
            uid: r.uid.as_deref().unwrap_or("").to_string(),
        })
        .collect()
}

fn same_owner(a: &Owner, b: &Owner) -> bool {
    if a.uid.is_empty() || b.uid.is_empty() {
        a.name == b.name
    } else {
        a.uid == b.uid
    }
}

/// The MachinePool controller references of the stored object (`old_owners`) that
/// `new_object` lacks or demotes.
pub fn removed_controllers<'a>(
    old_owners: &'a [Owner],
    new_object: Option<&Object>,
) -> Vec<&'a Owner> {
    let remaining = machine_pool_controllers(new_object);
    old_owners
        .iter()
        .filter(|old| !remaining.iter().any(|new| same_owner(old, new)))
        .collect()
}

/// Rule 4: removing (or demoting) a MachinePool controller reference of an in-use config. Only
/// the garbage collector and the controller identities may; anyone else could strip it and
/// then edit the config unchecked. `removed`: [`removed_controllers`] of the request.
/// `remediation` gives the rotation text and the name it suggests.
pub fn check_removal(
    settings: &Settings,
    requester: &Requester,
    namespace: &str,
    removed: &[&Owner],
    remediation: impl FnOnce() -> (String, String),
) -> Option<Finding> {
    if removed.is_empty()
        || settings.in_place_edits == Action::Ignore
        || requester.is_garbage_collector()
        || requester.is_controller(settings)
    {
        return None;
    }
    let pools: Vec<String> = removed
        .iter()
        .map(|o| format!("MachinePool {namespace}/{}", o.name))
        .collect();
    let (remediation, name) = remediation();
    Some(Finding {
        action: settings.in_place_edits,
        violations: pools
            .iter()
            .map(|p| {
                Violation::new(
                    "metadata.ownerReferences",
                    format!("Forbidden: removes the controller reference to {p}"),
                )
            })
            .collect(),
        explanation: format!(
            "Only the garbage collector and CAPI's controllers (controllerUsers) may remove it: \
             without it, later in-place edits of this config would go unchecked. Keep \
             metadata.ownerReferences as CAPI set it. {remediation}"
        ),
        warning: format!(
            "removing the controller reference to {} hides later in-place edits from this policy",
            pools.join(", ")
        ),
        suggested_name: Some(name),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::{json, Value};

    fn with_refs(refs: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"metadata": {"ownerReferences": refs}})).unwrap()
    }

    #[rstest]
    #[case::v1beta2(json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "name": "mp", "uid": "u1", "controller": true}]), 1)]
    #[case::v1beta1(json!([{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachinePool", "name": "mp", "uid": "u1", "controller": true}]), 1)]
    #[case::exp_group(json!([{"apiVersion": "exp.cluster.x-k8s.io/v1beta1", "kind": "MachinePool", "name": "mp", "uid": "u1", "controller": true}]), 1)]
    #[case::not_controller(json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "name": "mp", "uid": "u1"}]), 0)]
    #[case::controller_false(json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "name": "mp", "uid": "u1", "controller": false}]), 0)]
    #[case::other_group(json!([{"apiVersion": "example.com/v1", "kind": "MachinePool", "name": "mp", "uid": "u1", "controller": true}]), 0)]
    #[case::cluster_owner(json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "c", "uid": "u2", "controller": true}]), 0)]
    #[case::not_a_list(json!("MachinePool/mp"), 0)]
    #[case::garbage_entries(json!([1, null, "x", {"controller": "true"}]), 0)]
    fn in_use_means_a_machine_pool_controller_reference(
        #[case] refs: Value,
        #[case] expected: usize,
    ) {
        let json = with_refs(refs);
        let object = Object::from_json(&json).unwrap();
        assert_eq!(machine_pool_controllers(Some(&object)).len(), expected);
    }
}
