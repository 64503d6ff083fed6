//! Rule 4, ownership laundering: a config is in use when a MachinePool controls it (the
//! controller ownerReference CAPI's MachinePool controller sets, [`machine_pool_controllers`]),
//! and that reference may not be laundered away: removing it, then editing the config, would
//! bypass rule 2 in two steps.

use crate::capi::owners::{machine_pool_controllers, Owner};
use crate::reader::object::Object;
use crate::reader::request::Requester;
use crate::rules::controller_writes::is_controller;
use crate::settings::{Action, Settings};
use crate::verdict::{Finding, Violation};

/// The identity kube-controller-manager's garbage collector uses when it drops ownerReferences.
pub const GARBAGE_COLLECTOR: &str = "system:serviceaccount:kube-system:generic-garbage-collector";

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
        || settings.in_place_edits == Action::Allow
        || requester.username == GARBAGE_COLLECTOR
        || is_controller(settings, requester)
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
    use crate::capi::providers::DEFAULT_CONTROLLER_USERS;
    use rstest::rstest;
    use serde_json::json;

    fn owner(name: &str, uid: &str) -> Owner {
        Owner {
            name: name.into(),
            uid: uid.into(),
        }
    }

    #[rstest]
    #[case::kept(json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "name": "mp", "uid": "u1", "controller": true}]), &[])]
    #[case::stripped(json!([]), &["mp"])]
    #[case::demoted(json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "name": "mp", "uid": "u1", "controller": false}]), &["mp"])]
    #[case::moved_to_another_pool(json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "name": "mp-b", "uid": "u2", "controller": true}]), &["mp"])]
    #[case::same_uid_renamed(json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "name": "renamed", "uid": "u1", "controller": true}]), &[])]
    #[case::no_uid_same_name(json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "name": "mp", "controller": true}]), &[])]
    fn removed_controllers_compare_by_uid_else_name(
        #[case] new_refs: serde_json::Value,
        #[case] removed: &[&str],
    ) {
        let json = serde_json::to_vec(&json!({"metadata": {"ownerReferences": new_refs}})).unwrap();
        let new = Object::from_json(&json).unwrap();
        let old = [owner("mp", "u1")];
        let found: Vec<&str> = removed_controllers(&old, Some(&new))
            .into_iter()
            .map(|o| o.name.as_str())
            .collect();
        assert_eq!(found, removed);
    }

    fn remediation() -> (String, String) {
        ("Rotate.".to_string(), "worker-a-5e6f7a8b".to_string())
    }

    #[rstest]
    #[case::a_person("alice", Action::Reject, true)]
    #[case::warned("alice", Action::Warn, true)]
    #[case::allowed("alice", Action::Allow, false)]
    #[case::garbage_collector(GARBAGE_COLLECTOR, Action::Reject, false)]
    #[case::capi_manager(DEFAULT_CONTROLLER_USERS[0], Action::Reject, false)]
    #[case::gc_prefix_is_a_person(
        "system:serviceaccount:kube-system:generic-garbage",
        Action::Reject,
        true
    )]
    fn only_the_garbage_collector_and_controllers_may_remove_it(
        #[case] username: &str,
        #[case] mode: Action,
        #[case] found: bool,
    ) {
        let settings = Settings {
            in_place_edits: mode,
            ..Settings::default()
        };
        let requester = Requester {
            username,
            groups: vec![],
        };
        let (a, b) = (owner("mp", "u1"), owner("mp-b", "u2"));
        let finding = check_removal(&settings, &requester, "fleet", &[&a, &b], remediation);
        assert_eq!(finding.is_some(), found);
        let Some(finding) = finding else { return };
        assert_eq!(finding.action, mode);
        assert_eq!(
            finding.violations,
            [
                Violation::new(
                    "metadata.ownerReferences",
                    "Forbidden: removes the controller reference to MachinePool fleet/mp"
                ),
                Violation::new(
                    "metadata.ownerReferences",
                    "Forbidden: removes the controller reference to MachinePool fleet/mp-b"
                ),
            ]
        );
        assert!(finding
            .explanation
            .ends_with("Keep metadata.ownerReferences as CAPI set it. Rotate."));
        assert_eq!(
            finding.warning,
            "removing the controller reference to MachinePool fleet/mp, MachinePool fleet/mp-b \
             hides later in-place edits from this policy"
        );
        assert_eq!(finding.suggested_name.as_deref(), Some("worker-a-5e6f7a8b"));
    }

    #[test]
    fn nothing_removed_is_nothing_found() {
        let requester = Requester::default();
        assert_eq!(
            check_removal(&Settings::default(), &requester, "fleet", &[], || {
                unreachable!("no remediation without a removal")
            }),
            None
        );
    }
}
