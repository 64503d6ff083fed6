//! Rule 7, DELETE and re-CREATE of a bootstrap config, and `clusterctl move`.
//!
//! A DELETE followed by a CREATE under the same name with another spec (`kubectl replace
//! --force`, Argo CD's `Replace=true,Force=true`) is an in-place edit in two requests: CAPI
//! adopts the new object, the provider regenerates the same-named data secret from it, and the
//! pool's `dataSecretName` does not change: no rotation, nothing recorded in the pool.
//!
//! With lookups, deleting a config a live MachinePool references is refused ([`check_delete`]),
//! and creating one under a name whose data secret a pool already consumed is flagged
//! ([`check_recreate`]): the pool sees no new data secret name.
//!
//! Without lookups (or when they fail) only the stored object's ownerReferences tell, and they
//! cannot tell a config in use from one rotated out (CAPI never removes them): a person's DELETE
//! of an owned config or template gets what `deleteOwnedConfigs` says, a warning by default, so
//! that cleaning rotated-out configs up is never refused ([`check_owned_delete`]). The CREATE
//! that follows cannot be refused without lookups: it carries no owner (a new config, the first
//! step of every rotation, looks the same) or its old owner (as a moved or restored config does),
//! and the policy keeps no memory of the DELETE before it.
//!
//! `clusterctl move` (and restores of its backups) is CAPI's own machinery too. It creates every
//! object in the target cluster owners first, with their ownerReferences, then deletes them
//! from the source in the reverse order: a bootstrap config while the MachinePool that
//! references it still lives, a template while its MachineDeployments do. Right before each
//! DELETE it annotates the object `clusterctl.cluster.x-k8s.io/delete-for-move`, which CAPI
//! documents as there for "any validation webhook" to decide on
//! (cmd/clusterctl/api/v1alpha3/annotations.go). The user running clusterctl is a person.

use crate::capi::infrastructure::INFRASTRUCTURE_DOCS;
use crate::capi::kinds::{
    group_of_api_version, CAPI_GROUP, MACHINE_DEPLOYMENT, MACHINE_POOL, MACHINE_SET,
};
use crate::capi::owners::{machine_pool_controllers, Owner};
use crate::reader::object::Object;
pub use crate::reader::object::DELETE_FOR_MOVE;
use crate::reader::request::Requester;
use crate::rules::controller_writes::is_controller;
use crate::rules::in_place_edit::{pools, ONLY_A_ROTATION};
use crate::rules::ownership::GARBAGE_COLLECTOR;
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
             is no rotation. Point spec.template.spec.bootstrap.configRef of {pools} at \
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

/// The identity kube-controller-manager's namespace controller deletes a namespace's objects
/// with: cleanup, as the garbage collector's.
pub const NAMESPACE_CONTROLLER: &str = "system:serviceaccount:kube-system:namespace-controller";

/// The kind CAPI's MachineDeployment and MachineSet controllers name as the (non-controller)
/// owner of a bootstrap template their configRef names (CAPI's book, owner-references.md).
const CLUSTER: &str = "Cluster";

/// An owner of a stored config or template, as its ownerReferences name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedBy {
    pub kind: &'static str,
    pub name: String,
}

/// Who owns a stored config as far as rule 7 reads it: its MachinePool controller (set when a
/// pool's configRef names it, never removed after a rotation).
pub fn config_owners(old_object: Option<&Object>) -> Vec<OwnedBy> {
    machine_pool_controllers(old_object)
        .into_iter()
        .map(|o| OwnedBy {
            kind: MACHINE_POOL,
            name: o.name,
        })
        .collect()
}

/// Who owns a stored template as far as rule 7 reads it: the Cluster that CAPI's
/// MachineDeployment and MachineSet controllers add as owner of a template their configRef
/// names (never removed after a rotation, as a config's pool), and any MachineDeployment or
/// MachineSet, controller or not (CAPI sets neither; a tool may). A ClusterClass's own
/// template carries the ClusterClass instead: the topology controller rolls a replaced one out
/// (rule 8), so it counts for nothing here.
pub fn template_owners(old_object: Option<&Object>) -> Vec<OwnedBy> {
    let refs = old_object.map(|o| o.owner_references()).unwrap_or_default();
    refs.iter()
        .filter(|r| group_of_api_version(r.api_version.as_deref().unwrap_or("")) == CAPI_GROUP)
        .filter_map(|r| {
            let kind = [CLUSTER, MACHINE_DEPLOYMENT, MACHINE_SET]
                .into_iter()
                .find(|k| r.kind.as_deref() == Some(*k))?;
            Some(OwnedBy {
                kind,
                name: r.name.as_deref().unwrap_or("").to_string(),
            })
        })
        .collect()
}

/// Without lookups (or when they failed): a person's DELETE of a config or template whose
/// stored object names `owners` ([`config_owners`], [`template_owners`]). The ownerReference
/// cannot say whether the owner still uses it (a re-create under the same name is then an
/// in-place edit, no rotation) or it was rotated out (a cleanup): `deleteOwnedConfigs`
/// says what it gets, a warning by default. Never for the garbage collector, the namespace
/// controller or `controllerUsers`: they delete what an owner's deletion leaves.
pub fn check_owned_delete(
    settings: &Settings,
    requester: &Requester,
    subject: &Subject,
    owners: &[OwnedBy],
) -> Option<Finding> {
    if owners.is_empty()
        || settings.delete_owned_configs == Action::Allow
        || requester.username == GARBAGE_COLLECTOR
        || requester.username == NAMESPACE_CONTROLLER
        || is_controller(settings, requester)
    {
        return None;
    }
    let named = |o: &OwnedBy| format!("{} {}/{}", o.kind, subject.namespace, o.name);
    let all = owners.iter().map(named).collect::<Vec<_>>().join(" and ");
    let kind = &subject.group_kind.kind;
    let remedy = if owners.iter().any(|o| o.kind == MACHINE_POOL) {
        format!(
            "changes the bootstrap data without a rotation: {ONLY_A_ROTATION}, and whether \
             existing instances are then replaced is the infrastructure provider's choice \
             ({INFRASTRUCTURE_DOCS}). To rotate, create a new {kind} under another name and set \
             spec.template.spec.bootstrap.configRef.name of {all} to it"
        )
    } else {
        "changes the template without rolling it out to existing Machines (cluster-api #4145). \
         To roll a change out, copy it under another name and set \
         spec.template.spec.bootstrap.configRef.name of its MachineDeployments to the copy"
            .to_string()
    };
    Some(Finding {
        action: settings.delete_owned_configs,
        violations: owners
            .iter()
            .map(|o| {
                Violation::new(
                    "metadata.ownerReferences",
                    format!("Forbidden: owned by {}", named(o)),
                )
            })
            .collect(),
        explanation: format!(
            "Without lookups the policy cannot tell whether it is still in use or rotated out, \
             and deleting it to re-create it under the same name (kubectl replace --force) \
             {remedy}. A rotated-out {kind} is deleted with its owner, by an exemptUsers \
             identity, or with contextAware: true, which tells the two apart"
        ),
        warning: format!(
            "{} {} it: a same-name re-create is no rotation; rotate configRef (contextAware: true refuses)",
            owners
                .iter()
                .map(|o| format!("{} {}", o.kind, o.name))
                .collect::<Vec<_>>()
                .join(", "),
            if owners.len() == 1 { "owns" } else { "own" }
        ),
        suggested_name: None,
    })
}

/// With lookups: a config created under a name whose data secret a MachinePool already consumed
/// is no rotation (the pool sees no new data secret name).
pub fn check_recreate(subject: &Subject, consumers: &[Owner]) -> Option<Finding> {
    if consumers.is_empty() {
        return None;
    }
    Some(Finding::warning(format!(
        "{} {}: MachinePool {} already consumed this data secret name: no rotation",
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
    #[case::consumed(&["mp"], Some("KubeadmConfig pool-1-a: MachinePool mp already consumed this data secret name: no rotation"))]
    #[case::consumed_twice(&["mp", "mp-b"], Some("KubeadmConfig pool-1-a: MachinePool mp, mp-b already consumed this data secret name: no rotation"))]
    #[case::fresh_name(&[], None)]
    fn creating_under_a_consumed_name(#[case] consumers: &[&str], #[case] warning: Option<&str>) {
        let finding = check_recreate(&subject(), &owners(consumers));
        assert_eq!(
            finding.map(|f| (f.action, f.warning)),
            warning.map(|w| (Action::Warn, w.to_string()))
        );
    }

    #[rstest]
    #[case::v1beta2_pool(json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "name": "mp", "uid": "u", "controller": true}]), &["MachinePool mp"])]
    #[case::exp_group_pool(json!([{"apiVersion": "exp.cluster.x-k8s.io/v1beta1", "kind": "MachinePool", "name": "mp", "uid": "u", "controller": true}]), &["MachinePool mp"])]
    #[case::pool_not_controller(json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "name": "mp", "uid": "u"}]), &[])]
    #[case::machine_owner(json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "name": "m", "uid": "u", "controller": true}]), &[])]
    #[case::no_owner(json!([]), &[])]
    #[case::owners_not_a_list(json!({"kind": "MachinePool"}), &[])]
    fn the_owner_of_a_stored_config(#[case] owners: Value, #[case] expected: &[&str]) {
        let json = object(json!({"name": "a", "ownerReferences": owners}));
        let stored = Object::from_json(&json).unwrap();
        let found: Vec<String> = config_owners(Some(&stored))
            .iter()
            .map(|o| format!("{} {}", o.kind, o.name))
            .collect();
        assert_eq!(found, expected);
        assert!(config_owners(None).is_empty());
    }

    #[rstest]
    #[case::cluster_as_capi_sets_it(json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "prod", "uid": "u"}]), &["Cluster prod"])]
    #[case::cluster_v1beta1(json!([{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "name": "prod", "uid": "u"}]), &["Cluster prod"])]
    #[case::machine_deployment_controller(json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment", "name": "md", "uid": "u", "controller": true}]), &["MachineDeployment md"])]
    #[case::machine_set(json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet", "name": "ms", "uid": "u"}]), &["MachineSet ms"])]
    #[case::cluster_and_class(json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "ClusterClass", "name": "cc"}, {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "prod"}]), &["Cluster prod"])]
    #[case::class_only(json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "ClusterClass", "name": "cc"}]), &[])]
    #[case::other_group(json!([{"apiVersion": "example.com/v1", "kind": "Cluster", "name": "x"}]), &[])]
    #[case::garbage_entries(json!([1, null, "Cluster", {"kind": "Cluster"}]), &[])]
    fn the_owners_of_a_stored_template(#[case] owners: Value, #[case] expected: &[&str]) {
        let json = object(json!({"name": "t", "ownerReferences": owners}));
        let stored = Object::from_json(&json).unwrap();
        let found: Vec<String> = template_owners(Some(&stored))
            .iter()
            .map(|o| format!("{} {}", o.kind, o.name))
            .collect();
        assert_eq!(found, expected);
        assert!(template_owners(None).is_empty());
    }

    fn owned_by(owners: &[(&'static str, &str)]) -> Vec<OwnedBy> {
        owners
            .iter()
            .map(|(kind, name)| OwnedBy {
                kind,
                name: name.to_string(),
            })
            .collect()
    }

    fn requester(username: &str) -> Requester<'_> {
        Requester {
            username,
            groups: vec!["system:authenticated"],
        }
    }

    const POOL_WARNING: &str = "MachinePool workers-spot owns it: a same-name re-create is no \
        rotation; rotate configRef (contextAware: true refuses)";

    /// Who gets what on the DELETE of an owned config without lookups.
    #[rstest]
    #[case::person_warned("warn", "alice", &[("MachinePool", "workers-spot")], Some((Action::Warn, POOL_WARNING)))]
    #[case::person_refused("reject", "alice", &[("MachinePool", "workers-spot")], Some((Action::Reject, POOL_WARNING)))]
    #[case::allowed("allow", "alice", &[("MachinePool", "workers-spot")], None)]
    #[case::not_owned("reject", "alice", &[], None)]
    #[case::garbage_collector("reject", GARBAGE_COLLECTOR, &[("MachinePool", "workers-spot")], None)]
    #[case::namespace_controller("reject", NAMESPACE_CONTROLLER, &[("MachinePool", "workers-spot")], None)]
    #[case::capi_manager("reject", "system:serviceaccount:capi-system:capi-manager", &[("MachinePool", "workers-spot")], None)]
    #[case::kubeadm_bootstrap("reject", "system:serviceaccount:capi-kubeadm-bootstrap-system:capi-kubeadm-bootstrap-manager", &[("MachinePool", "workers-spot")], None)]
    #[case::gc_prefix_is_a_person("warn", "system:serviceaccount:kube-system:generic-garbage-collector2", &[("MachinePool", "workers-spot")], Some((Action::Warn, POOL_WARNING)))]
    #[case::template_of_a_cluster("warn", "alice", &[("Cluster", "prod-eu-1")], Some((Action::Warn, "Cluster prod-eu-1 owns it: a same-name re-create is no rotation; rotate configRef (contextAware: true refuses)")))]
    #[case::two_owners("warn", "alice", &[("Cluster", "prod"), ("MachineDeployment", "md")], Some((Action::Warn, "Cluster prod, MachineDeployment md own it: a same-name re-create is no rotation; rotate configRef (contextAware: true refuses)")))]
    fn deleting_an_owned_config_without_lookups(
        #[case] mode: &str,
        #[case] user: &str,
        #[case] owners: &[(&'static str, &str)],
        #[case] expected: Option<(Action, &str)>,
    ) {
        let settings = Settings::from_value(&json!({"deleteOwnedConfigs": mode})).unwrap();
        let finding =
            check_owned_delete(&settings, &requester(user), &subject(), &owned_by(owners));
        assert_eq!(
            finding.as_ref().map(|f| (f.action, f.warning.as_str())),
            expected
        );
        if let Some(finding) = finding {
            // One owner with a name as long as the scenarios' fits uncut; longer ones are cut
            // by the verdict, whole in the audit annotation `warnings`.
            if owners.len() == 1 {
                assert!(finding.warning.chars().count() <= crate::verdict::WARNING_LIMIT);
            }
            assert_eq!(finding.violations.len(), owners.len());
            assert_eq!(finding.violations[0].field, "metadata.ownerReferences");
            assert_eq!(
                finding.violations[0].detail,
                format!("Forbidden: owned by {} fleet/{}", owners[0].0, owners[0].1)
            );
        }
    }

    #[rstest]
    #[case::config(&[("MachinePool", "workers-spot")], "changes the bootstrap data without a rotation: CAPI takes a bootstrap change only from a configRef rotation (cluster-api #8858), and whether existing instances are then replaced is the infrastructure provider's choice (https://github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/blob/main/docs/infrastructure.md). To rotate, create a new KubeadmConfig under another name and set spec.template.spec.bootstrap.configRef.name of MachinePool fleet/workers-spot to it")]
    #[case::template(&[("Cluster", "prod")], "changes the template without rolling it out to existing Machines (cluster-api #4145). To roll a change out, copy it under another name and set spec.template.spec.bootstrap.configRef.name of its MachineDeployments to the copy")]
    fn a_refusal_says_why_and_what_to_do(
        #[case] owners: &[(&'static str, &str)],
        #[case] remedy: &str,
    ) {
        let settings = Settings {
            delete_owned_configs: Action::Reject,
            ..Settings::default()
        };
        let finding = check_owned_delete(
            &settings,
            &requester("alice"),
            &subject(),
            &owned_by(owners),
        )
        .unwrap();
        assert_eq!(
            finding.explanation,
            format!(
                "Without lookups the policy cannot tell whether it is still in use or rotated \
                 out, and deleting it to re-create it under the same name (kubectl replace \
                 --force) {remedy}. A rotated-out KubeadmConfig is deleted with its owner, by an \
                 exemptUsers identity, or with contextAware: true, which tells the two apart"
            )
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
