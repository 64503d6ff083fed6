//! Rule 3, CAPI's own machinery: requests from a `controllerUsers` identity (CAPI core and the
//! default providers' controllers, [`crate::capi::providers::DEFAULT_CONTROLLER_USERS`])
//! are never refused and never warned, since a refused token rotation or defaulting write
//! stops the reconcile; what the rules found goes into the audit log, the changed paths by
//! name. The engine applies it to every verdict ([`by_controller`]).
//!
//! ClusterClass: configs and templates of topology-managed objects are patched in place by
//! CAPI's topology controller (cluster-api #10496). Only that controller may do so, as one of
//! `controllerUsers`; the label alone ([`is_topology_owned`]), which any editor can set,
//! changes nothing. What the providers' defaulting webhooks write is no edit at all: rule 2's
//! comparison leaves it out ([`crate::capi::providers`], [`crate::capi::defaulters`]).

use crate::reader::object::Object;
use crate::reader::request::Requester;
use crate::settings::Settings;
use crate::verdict::{Verdict, CONTROLLER_WRITE_ANNOTATION};

pub const TOPOLOGY_OWNED_LABEL: &str = "topology.cluster.x-k8s.io/owned";

/// One of `controllerUsers`, matched exactly (no prefixes, no case folding).
pub fn is_controller(settings: &Settings, requester: &Requester) -> bool {
    settings
        .controller_users
        .iter()
        .any(|u| u == requester.username)
}

/// Whether the stored object carries the topology label (any value).
pub fn is_topology_owned(object: Option<&Object>) -> bool {
    object.is_some_and(|o| o.has_label(TOPOLOGY_OWNED_LABEL))
}

/// The verdict for a `controllerUsers` identity: allowed, no warning; what the rules found is
/// in the audit annotation [`CONTROLLER_WRITE_ANNOTATION`].
pub fn by_controller(verdict: Verdict, username: &str) -> Verdict {
    if verdict.allowed && verdict.warnings.is_empty() && verdict.violations.is_empty() {
        return verdict;
    }
    // The field violations name the paths; findings without any (a rotated-out edit, a
    // failed lookup) are told by their warnings.
    let found: Vec<String> = verdict
        .violations
        .iter()
        .map(|v| match v.field.as_str() {
            "" => v.detail.clone(),
            field => format!("{field}: {}", v.detail),
        })
        .collect();
    let told = if found.is_empty() {
        verdict.warnings.join(" | ")
    } else {
        format!("[{}]", found.join(", "))
    };
    let outcome = format!(
        "allowed because {username:?} is in controllerUsers; would have {}: {told}",
        if verdict.allowed {
            "warned"
        } else {
            "rejected"
        }
    );
    verdict.allowed_with_note(CONTROLLER_WRITE_ANNOTATION, outcome, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capi::kinds::GroupKind;
    use crate::settings::Action;
    use crate::verdict::{Finding, Subject, Violation};
    use rstest::rstest;
    use serde_json::json;

    #[rstest]
    #[case::capi_manager("system:serviceaccount:capi-system:capi-manager", true)]
    #[case::other_namespace("system:serviceaccount:other:capi-manager", false)]
    #[case::kubeadm_bootstrap(
        "system:serviceaccount:capi-kubeadm-bootstrap-system:capi-kubeadm-bootstrap-manager",
        true
    )]
    #[case::rke2_bootstrap(
        "system:serviceaccount:rke2-bootstrap-system:rke2-bootstrap-manager",
        true
    )]
    #[case::k3s_default_service_account(
        "system:serviceaccount:capi-k3s-bootstrap-system:default",
        true
    )]
    #[case::default_service_account_elsewhere("system:serviceaccount:capi-system:default", false)]
    #[case::prefix_only(
        "system:serviceaccount:capi-kubeadm-bootstrap-system:capi-kubeadm-bootstrap",
        false
    )]
    #[case::case_changed("system:serviceaccount:capi-system:CAPI-manager", false)]
    fn controller_identity(#[case] username: &str, #[case] expected: bool) {
        let requester = Requester {
            username,
            groups: vec![],
        };
        assert_eq!(is_controller(&Settings::default(), &requester), expected);
    }

    #[rstest]
    #[case::labelled(json!({"metadata": {"labels": {"topology.cluster.x-k8s.io/owned": ""}}}), true)]
    #[case::any_value(json!({"metadata": {"labels": {"topology.cluster.x-k8s.io/owned": "false"}}}), true)]
    #[case::other_label(json!({"metadata": {"labels": {"topology.cluster.x-k8s.io/owned-x": ""}}}), false)]
    #[case::annotation_is_not_a_label(json!({"metadata": {"annotations": {"topology.cluster.x-k8s.io/owned": ""}}}), false)]
    #[case::no_labels(json!({"metadata": {}}), false)]
    fn the_topology_label_is_read_from_the_object(
        #[case] object: serde_json::Value,
        #[case] owned: bool,
    ) {
        let json = serde_json::to_vec(&object).unwrap();
        let object = Object::from_json(&json).unwrap();
        assert_eq!(is_topology_owned(Some(&object)), owned);
        assert!(!is_topology_owned(None));
    }

    fn subject() -> Subject {
        Subject {
            group_kind: GroupKind::builtin("bootstrap.cluster.x-k8s.io", "KubeadmConfig"),
            namespace: "fleet".into(),
            name: "pool-1-a".into(),
        }
    }

    fn edit(action: Action) -> Finding {
        Finding {
            action,
            violations: vec![
                Violation::new("spec.files[0].content", "Forbidden: changed"),
                Violation::new("", "and 3 more changed fields"),
            ],
            explanation: "The config is in use".into(),
            warning: "spec.files[0].content edited in place".into(),
            suggested_name: Some("pool-1-5e6f7a8b".into()),
        }
    }

    const CABPK: &str =
        "system:serviceaccount:capi-kubeadm-bootstrap-system:capi-kubeadm-bootstrap-manager";

    #[rstest]
    #[case::nothing_found(vec![], None)]
    #[case::rejected_edit(vec![edit(Action::Reject)], Some("would have rejected: [spec.files[0].content: Forbidden: changed, and 3 more changed fields]"))]
    #[case::warned_edit(vec![edit(Action::Warn)], Some("would have warned: [spec.files[0].content: Forbidden: changed, and 3 more changed fields]"))]
    #[case::a_warning_without_paths(vec![Finding::warning("KubeadmConfig pool-1-a is rotated out"), Finding::warning("lookup failed")], Some("would have warned: KubeadmConfig pool-1-a is rotated out | lookup failed"))]
    fn a_controller_is_allowed_and_audited(
        #[case] findings: Vec<Finding>,
        #[case] audited: Option<&str>,
    ) {
        let verdict = by_controller(Verdict::from_findings(&subject(), &findings), CABPK);
        assert!(verdict.allowed);
        assert_eq!((verdict.message.as_deref(), verdict.code), (None, None));
        assert!(verdict.warnings.is_empty(), "{:?}", verdict.warnings);
        let annotation = verdict.audit_annotations.get(CONTROLLER_WRITE_ANNOTATION);
        match audited {
            None => assert_eq!(verdict, Verdict::accept()),
            Some(outcome) => assert_eq!(
                annotation.map(String::as_str),
                Some(
                    format!("allowed because {CABPK:?} is in controllerUsers; {outcome}").as_str()
                )
            ),
        }
        // The violations and the suggested name stay as data.
        if findings.iter().any(|f| !f.violations.is_empty()) {
            assert_eq!(verdict.violations.len(), 2);
            assert_eq!(verdict.suggested_name.as_deref(), Some("pool-1-5e6f7a8b"));
        }
    }
}
