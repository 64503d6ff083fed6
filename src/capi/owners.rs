//! Who owns a bootstrap object, as CAPI records it in `metadata.ownerReferences`: the
//! MachinePool that controls a config (the controller reference CAPI's MachinePool controller
//! sets once the pool has reconciled it), and the ClusterClasses that reference a template.

use crate::capi::kinds::{group_of_api_version, is_machine_pool, CAPI_GROUP, CLUSTER_CLASS};
use crate::reader::object::Object;

/// A MachinePool that controls (or references) a config.
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

/// Names of the ClusterClasses that reference this template (their ownerReferences).
pub fn cluster_classes(object: Option<&Object>) -> Vec<String> {
    object
        .map(|o| o.owner_references())
        .unwrap_or_default()
        .iter()
        .filter(|r| {
            r.kind.as_deref() == Some(CLUSTER_CLASS)
                && group_of_api_version(r.api_version.as_deref().unwrap_or("")) == CAPI_GROUP
        })
        .filter_map(|r| r.name.as_deref().map(str::to_string))
        .collect()
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
    #[case::v1beta2(json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "name": "mp", "uid": "u1", "controller": true}]), &["mp/u1"])]
    #[case::v1beta1(json!([{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachinePool", "name": "mp", "uid": "u1", "controller": true}]), &["mp/u1"])]
    #[case::exp_group(json!([{"apiVersion": "exp.cluster.x-k8s.io/v1beta1", "kind": "MachinePool", "name": "mp", "uid": "u1", "controller": true}]), &["mp/u1"])]
    #[case::not_controller(json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "name": "mp", "uid": "u1"}]), &[])]
    #[case::controller_false(json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "name": "mp", "uid": "u1", "controller": false}]), &[])]
    #[case::other_group(json!([{"apiVersion": "example.com/v1", "kind": "MachinePool", "name": "mp", "uid": "u1", "controller": true}]), &[])]
    #[case::cluster_owner(json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "c", "uid": "u2", "controller": true}]), &[])]
    #[case::not_a_list(json!("MachinePool/mp"), &[])]
    #[case::garbage_entries(json!([1, null, "x", {"controller": "true"}]), &[])]
    #[case::no_name_nor_uid(json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "controller": true}]), &["/"])]
    fn in_use_means_a_machine_pool_controller_reference(
        #[case] refs: Value,
        #[case] expected: &[&str],
    ) {
        let json = with_refs(refs);
        let object = Object::from_json(&json).unwrap();
        let found: Vec<String> = machine_pool_controllers(Some(&object))
            .into_iter()
            .map(|o| format!("{}/{}", o.name, o.uid))
            .collect();
        assert_eq!(found, expected);
    }

    #[rstest]
    #[case::class(json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "ClusterClass", "name": "quick-start", "uid": "u"}]), &["quick-start"])]
    #[case::controller_or_not(json!([{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "ClusterClass", "name": "a", "controller": true}, {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "ClusterClass", "name": "b"}]), &["a", "b"])]
    #[case::other_group(json!([{"apiVersion": "example.com/v1", "kind": "ClusterClass", "name": "x"}]), &[])]
    #[case::machine_deployment(json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment", "name": "md"}]), &[])]
    #[case::no_name(json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "ClusterClass"}]), &[])]
    fn the_cluster_classes_of_a_template(#[case] refs: Value, #[case] expected: &[&str]) {
        let json = with_refs(refs);
        let object = Object::from_json(&json).unwrap();
        assert_eq!(cluster_classes(Some(&object)), expected);
        assert!(cluster_classes(None).is_empty());
    }
}
