//! Rule 7, DELETE and re-CREATE of a bootstrap config, and `clusterctl move`.
//!
//! Without lookups a DELETE is accepted: nothing tells a referenced config from a rotated-out
//! one. With lookups, deleting a config a live MachinePool references is refused
//! ([`check_delete`]), and creating one under a name whose data secret a pool already
//! consumed is flagged ([`check_recreate`]): the pool sees no new data secret name.
//!
//! `clusterctl move` (and restores of its backups) is CAPI's own machinery too. It creates every
//! object in the target cluster owners first, with their ownerReferences, then deletes them
//! from the source in the reverse order: a bootstrap config while the MachinePool that
//! references it still lives, a template while its MachineDeployments do. Right before each
//! DELETE it annotates the object `clusterctl.cluster.x-k8s.io/delete-for-move`, which CAPI
//! documents as there for "any validation webhook" to decide on
//! (cmd/clusterctl/api/v1alpha3/annotations.go). The user running clusterctl is a person.

use crate::capi::owners::{machine_pool_controllers, Owner};
use crate::reader::object::Object;
pub use crate::reader::object::DELETE_FOR_MOVE;
use crate::rules::in_place_edit::pools;
use crate::settings::{Action, Settings};
use crate::verdict::{Finding, Subject, Verdict, Violation};

/// The audit annotation of a DELETE the move annotation let through.
pub const DELETE_FOR_MOVE_ANNOTATION: &str = "delete-for-move";

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

/// The verdict on a DELETE [`is_delete_for_move`] lets through: allowed, audited.
pub fn allowed_for_move() -> Verdict {
    let mut verdict = Verdict::accept();
    verdict.audit_annotations.insert(
        DELETE_FOR_MOVE_ANNOTATION.to_string(),
        format!(
            "allowed: the stored object carries {DELETE_FOR_MOVE} (clusterctl move deletes it from the source cluster)"
        ),
    );
    verdict
}

/// With lookups: deleting a config a live MachinePool references stops the pool's reconcile,
/// and re-creating it under the same name is an in-place edit in disguise. What `inPlaceEdits`
/// says, as for rule 2.
pub fn check_delete(
    settings: &Settings,
    subject: &Subject,
    referencing: &[Owner],
) -> Option<Finding> {
    if referencing.is_empty() || settings.in_place_edits == Action::Allow {
        return None;
    }
    let pools = pools(subject, referencing);
    Some(Finding {
        action: settings.in_place_edits,
        violations: vec![Violation::new(
            "metadata.name",
            format!("Forbidden: referenced by the configRef of {pools}"),
        )],
        explanation: format!(
            "Deleting it stops {pools} from reconciling, and re-creating it under the same name \
             rolls nothing out. Point spec.template.spec.bootstrap.configRef of {pools} at \
             another {} first, or delete the MachinePool",
            subject.group_kind.kind
        ),
        warning: format!(
            "deleting {} breaks the reconcile of {pools}",
            subject.short()
        ),
        suggested_name: None,
    })
}

/// With lookups: a config created under a name whose data secret a MachinePool already consumed
/// will not roll out (the pool sees no new data secret name).
pub fn check_recreate(subject: &Subject, consumers: &[Owner]) -> Option<Finding> {
    if consumers.is_empty() {
        return None;
    }
    Some(Finding::warning(format!(
        "{} {}: MachinePool {} already consumed this data secret name: no roll-out",
        subject.group_kind.kind,
        subject.name,
        consumers
            .iter()
            .map(|o| o.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::{json, Value};

    #[test]
    fn its_audit_annotation_is_kept_by_the_api_server() {
        assert!(crate::verdict::is_bare_annotation_key(
            DELETE_FOR_MOVE_ANNOTATION
        ));
    }

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

    fn subject() -> Subject {
        Subject {
            group_kind: crate::capi::kinds::GroupKind::builtin(
                "bootstrap.cluster.x-k8s.io",
                "KubeadmConfig",
            ),
            namespace: "fleet".into(),
            name: "pool-1-a".into(),
        }
    }

    fn owners(names: &[&str]) -> Vec<Owner> {
        names
            .iter()
            .map(|name| Owner {
                name: name.to_string(),
                uid: format!("uid-{name}"),
            })
            .collect()
    }

    #[rstest]
    #[case::one_pool(Action::Reject, &["mp"], Some("Forbidden: referenced by the configRef of MachinePool fleet/mp"))]
    #[case::two_pools(Action::Warn, &["mp", "mp-b"], Some("Forbidden: referenced by the configRef of MachinePool fleet/mp and MachinePool fleet/mp-b"))]
    #[case::rotated_out(Action::Reject, &[], None)]
    #[case::allowed(Action::Allow, &["mp"], None)]
    fn deleting_a_referenced_config(
        #[case] mode: Action,
        #[case] referencing: &[&str],
        #[case] detail: Option<&str>,
    ) {
        let settings = Settings {
            in_place_edits: mode,
            ..Settings::default()
        };
        let finding = check_delete(&settings, &subject(), &owners(referencing));
        assert_eq!(
            finding.as_ref().map(|f| (f.action, f.violations.clone())),
            detail.map(|d| (mode, vec![Violation::new("metadata.name", d)]))
        );
        if let Some(finding) = finding {
            assert!(finding.warning.starts_with(
                "deleting KubeadmConfig fleet/pool-1-a breaks the reconcile of MachinePool fleet/mp"
            ));
            assert!(finding
                .explanation
                .ends_with("at another KubeadmConfig first, or delete the MachinePool"));
        }
    }

    #[rstest]
    #[case::consumed(&["mp"], Some("KubeadmConfig pool-1-a: MachinePool mp already consumed this data secret name: no roll-out"))]
    #[case::consumed_twice(&["mp", "mp-b"], Some("KubeadmConfig pool-1-a: MachinePool mp, mp-b already consumed this data secret name: no roll-out"))]
    #[case::fresh_name(&[], None)]
    fn creating_under_a_consumed_name(#[case] consumers: &[&str], #[case] warning: Option<&str>) {
        let finding = check_recreate(&subject(), &owners(consumers));
        assert_eq!(
            finding.map(|f| (f.action, f.warning)),
            warning.map(|w| (Action::Warn, w.to_string()))
        );
    }

    #[test]
    fn a_delete_for_move_is_allowed_and_audited() {
        let verdict = allowed_for_move();
        assert!(verdict.allowed && verdict.warnings.is_empty());
        assert_eq!(
            verdict.audit_annotations[DELETE_FOR_MOVE_ANNOTATION],
            "allowed: the stored object carries clusterctl.cluster.x-k8s.io/delete-for-move \
             (clusterctl move deletes it from the source cluster)"
        );
    }
}
