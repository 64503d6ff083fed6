//! `clusterctl move` (and restores of its backups) is CAPI's own machinery too. It creates every
//! object in the target cluster owners first, with their ownerReferences, then deletes them
//! from the source in the reverse order: a bootstrap config while the MachinePool that
//! references it still lives, a template while its MachineDeployments do. Right before each
//! DELETE it annotates the object `clusterctl.cluster.x-k8s.io/delete-for-move`, which CAPI
//! documents as there for "any validation webhook" to decide on
//! (cmd/clusterctl/api/v1alpha3/annotations.go). The user running clusterctl is a person.

use crate::reader::object::Object;
pub use crate::reader::object::DELETE_FOR_MOVE;
use crate::rules::ownership::machine_pool_controllers;

/// The audit annotation of a DELETE the move annotation let through.
pub const DELETE_FOR_MOVE_ANNOTATION: &str = "capi-bootstrap-rollout-policy/delete-for-move";

/// A DELETE whose stored object carries the move annotation: allowed in every mode. It is read
/// from the stored object (`oldObject`): the annotation must have been written before, by an
/// UPDATE of its own, as clusterctl does; adding it by hand is the same as deleting with
/// clusterctl, which anyone who may delete the config may run.
pub fn is_delete_for_move(old_object: Option<&Object>) -> bool {
    old_object.is_some_and(|o| o.delete_for_move)
}

/// A CREATE of a config that already has its MachinePool controller: the same config moved
/// (`clusterctl move` creates it after its pool, with the pool's ownerReference rewritten to the
/// new uid) or restored from a backup with its ownerReferences. A config a person creates has
/// no owner yet: CAPI adds it when a pool's configRef names the config.
pub fn is_moved_or_restored(object: Option<&Object>) -> bool {
    !machine_pool_controllers(object).is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::{json, Value};

    fn object(metadata: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"metadata": metadata, "spec": {}})).unwrap()
    }

    #[rstest]
    #[case::annotated(json!({"name": "a", "annotations": {"clusterctl.cluster.x-k8s.io/delete-for-move": ""}}), true)]
    #[case::annotated_among_others(json!({"annotations": {"x": "1", "clusterctl.cluster.x-k8s.io/delete-for-move": "true"}}), true)]
    #[case::other_annotation(json!({"annotations": {"clusterctl.cluster.x-k8s.io/move": ""}}), false)]
    #[case::prefix_is_not_enough(json!({"annotations": {"clusterctl.cluster.x-k8s.io/delete-for-move-x": ""}}), false)]
    #[case::no_annotations(json!({"name": "a"}), false)]
    #[case::annotations_not_an_object(json!({"annotations": "clusterctl.cluster.x-k8s.io/delete-for-move"}), false)]
    fn the_move_annotation_is_read_from_the_stored_object(
        #[case] metadata: Value,
        #[case] moving: bool,
    ) {
        let json = object(metadata);
        let stored = Object::from_json(&json).unwrap();
        assert_eq!(is_delete_for_move(Some(&stored)), moving);
        assert!(!is_delete_for_move(None));
    }

    #[rstest]
    #[case::moved_with_its_pool(json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "name": "p", "uid": "u", "controller": true}]), true)]
    #[case::owner_not_controller(json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "name": "p", "uid": "u"}]), false)]
    #[case::other_owner(json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "c", "uid": "u", "controller": true}]), false)]
    #[case::new_config(json!([]), false)]
    fn a_config_created_with_its_pool_is_moved_or_restored(
        #[case] owners: Value,
        #[case] moved: bool,
    ) {
        let json = object(json!({"name": "a", "ownerReferences": owners}));
        let created = Object::from_json(&json).unwrap();
        assert_eq!(is_moved_or_restored(Some(&created)), moved);
    }
}
