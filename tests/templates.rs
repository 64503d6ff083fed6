//! Bootstrap templates and the MachineDeployments / MachineSets that name them: in-place edits
//! of spec.template.spec are refused as CAPI's book says, ClusterClass-owned templates are
//! edited on purpose (warning), topology-owned copies belong to the topology controller.

use capi_bootstrap_rollout_policy::capi::kinds::BOOTSTRAP_GROUP;
use capi_bootstrap_rollout_policy::engine::evaluate;
use capi_bootstrap_rollout_policy::settings::Settings;
use capi_bootstrap_rollout_policy::verdict::{Verdict, CONTROLLER_WRITE_ANNOTATION};
use rstest::rstest;
use serde_json::{json, Value};

const CAPI_MANAGER: &str = "system:serviceaccount:capi-system:capi-manager";

/// A bootstrap template in its record's group (CAPI's for a kind without one).
fn template(kind: &str, version: &str, content: &str) -> Value {
    let group = capi_bootstrap_rollout_policy::capi::providers::provider_of_template(kind)
        .map_or(BOOTSTRAP_GROUP, |p| p.group);
    json!({"apiVersion": format!("{group}/{version}"), "kind": kind,
           "metadata": {"name": "md-0-0123abcd", "namespace": "default"},
           "spec": {"template": {"spec": {"files": [{"path": "/etc/a", "content": content}]}}}})
}

fn update(old: &Value, new: &Value, user: &str) -> Value {
    let (group, version) = new["apiVersion"].as_str().unwrap().split_once('/').unwrap();
    json!({"uid": "r", "operation": "UPDATE", "namespace": "default", "name": new["metadata"]["name"],
           "kind": {"group": group, "version": version, "kind": new["kind"]},
           "userInfo": {"username": user}, "object": new, "oldObject": old})
}

/// The verdict, a fragment of its message or warnings, and no finding at all when the fragment
/// is empty.
fn expect(verdict: &Verdict, allowed: bool, fragment: &str) {
    assert_eq!(verdict.allowed, allowed, "{verdict:?}");
    let said = verdict
        .message
        .iter()
        .chain(&verdict.warnings)
        .cloned()
        .collect::<Vec<_>>()
        .join("\n");
    assert!(said.contains(fragment), "{said}");
    if fragment.is_empty() {
        assert_eq!(verdict, &Verdict::accept());
    }
}

fn run(settings: Value, request: &Value) -> Verdict {
    let request = serde_json::to_vec(request).unwrap();
    evaluate(&Settings::from_value(&settings).unwrap(), &request)
}

/// The template kind of every provider record, in both versions.
#[rstest]
fn every_default_template_kind_rejects_a_spec_edit(#[values("v1beta1", "v1beta2")] version: &str) {
    for provider in capi_bootstrap_rollout_policy::capi::providers::PROVIDERS {
        let kind = format!("{}Template", provider.config_kind);
        template_spec_edit_is_refused(provider.group, &kind, version);
    }
}

fn template_spec_edit_is_refused(group: &str, kind: &str, version: &str) {
    let verdict = run(
        json!({}),
        &update(
            &template(kind, version, "a"),
            &template(kind, version, "b"),
            "alice",
        ),
    );
    assert!(!verdict.allowed, "{kind}.{group}");
    let message = verdict.message.unwrap();
    assert!(message.starts_with(&format!(
        "{kind}.{group} \"md-0-0123abcd\" is invalid: [spec.template.spec.files[0].content: Forbidden: changed]. \
         CAPI does not roll in-place bootstrap template edits out to existing Machines (cluster-api #4145)"
    )), "{message}");
    assert!(
        message.contains(&format!("create a new {kind} \"md-0-")),
        "{message}"
    );
    assert!(message.contains("with the desired spec.template.spec, then set spec.template.spec.bootstrap.configRef.name of the MachineDeployments and MachineSets that use it to \"md-0-"), "{message}");
}

#[rstest]
#[case::reject("reject", false, 0)]
#[case::warn("warn", true, 1)]
#[case::allow("allow", true, 0)]
fn template_edits_setting(#[case] mode: &str, #[case] allowed: bool, #[case] warnings: usize) {
    let (old, new) = (
        template("KubeadmConfigTemplate", "v1beta2", "a"),
        template("KubeadmConfigTemplate", "v1beta2", "b"),
    );
    let verdict = run(json!({"templateEdits": mode}), &update(&old, &new, "alice"));
    assert_eq!(
        (verdict.allowed, verdict.warnings.len()),
        (allowed, warnings)
    );
    if warnings == 1 {
        assert_eq!(verdict.warnings[0], "spec.template.spec.files[0].content edited in place: not rolled out to existing Machines; copy and rotate configRef");
    }
}

#[test]
fn metadata_and_template_metadata_edits_are_allowed() {
    let old = template("KubeadmConfigTemplate", "v1beta2", "a");
    let mut new = old.clone();
    new["metadata"]["labels"] = json!({"team": "payments"});
    new["spec"]["template"]["metadata"] = json!({"labels": {"x": "y"}});
    assert_eq!(
        run(json!({}), &update(&old, &new, "alice")),
        Verdict::accept()
    );
}

fn owned_by_class(mut t: Value) -> Value {
    t["metadata"]["ownerReferences"] = json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "ClusterClass", "name": "quick-start", "uid": "cc"}]);
    t
}

fn topology_copy(mut t: Value) -> Value {
    t["metadata"]["labels"] =
        json!({"topology.cluster.x-k8s.io/owned": "", "cluster.x-k8s.io/cluster-name": "prod"});
    t
}

#[rstest]
#[case::clusterclass_template_edit(owned_by_class as fn(Value) -> Value, "alice", true, "ClusterClass quick-start uses this template: MachineDeployments roll at next reconcile, MachinePools not rotated")]
#[case::topology_copy_by_controller(topology_copy as fn(Value) -> Value, CAPI_MANAGER, true, "")]
#[case::topology_copy_by_someone_else(topology_copy as fn(Value) -> Value, "alice", false, "Cluster's copy that CAPI's topology controller manages")]
fn clusterclass(
    #[case] shape: fn(Value) -> Value,
    #[case] user: &str,
    #[case] allowed: bool,
    #[case] fragment: &str,
) {
    let old = shape(template("KubeadmConfigTemplate", "v1beta2", "a"));
    let new = shape(template("KubeadmConfigTemplate", "v1beta2", "b"));
    let verdict = run(json!({}), &update(&old, &new, user));
    if user == CAPI_MANAGER {
        // The topology controller: allowed, never warned, its edit named in the audit log.
        assert!(
            verdict.allowed && verdict.warnings.is_empty(),
            "{verdict:?}"
        );
        assert_eq!(
            verdict.audit_annotations[CONTROLLER_WRITE_ANNOTATION],
            format!(
                "allowed because {CAPI_MANAGER:?} is in controllerUsers; would have rejected: \
                 [spec.template.spec.files[0].content: Forbidden: changed]"
            )
        );
        return;
    }
    expect(&verdict, allowed, fragment);
}

fn deployment(kind: &str, version: &str, config_ref: Value) -> Value {
    json!({"apiVersion": format!("cluster.x-k8s.io/{version}"), "kind": kind,
           "metadata": {"name": "md-0", "namespace": "default"},
           "spec": {"clusterName": "prod", "template": {"spec": {"clusterName": "prod", "bootstrap": {"configRef": config_ref}}}}})
}

#[rstest]
#[case::md_v1beta2_rotation("MachineDeployment", "v1beta2", json!({"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate", "name": "md-0-2"}), true, "")]
#[case::ms_v1beta1_rotation("MachineSet", "v1beta1", json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1", "kind": "KubeadmConfigTemplate", "name": "md-0-2"}), true, "")]
#[case::md_missing_kind("MachineDeployment", "v1beta1", json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1", "name": "md-0-2"}), true, "spec.template.spec.bootstrap.configRef.kind missing: CAPI cannot resolve the bootstrap config (contract)")]
#[case::md_other_namespace("MachineDeployment", "v1beta1", json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1", "kind": "KubeadmConfigTemplate", "name": "md-0-2", "namespace": "other"}), false, "must be the MachineDeployment's namespace \"default\"")]
fn machine_deployments_rotate_their_template_ref(
    #[case] kind: &str,
    #[case] version: &str,
    #[case] new_ref: Value,
    #[case] allowed: bool,
    #[case] fragment: &str,
) {
    let old_ref = if version == "v1beta1" {
        json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1", "kind": "KubeadmConfigTemplate", "name": "md-0-1"})
    } else {
        json!({"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate", "name": "md-0-1"})
    };
    let verdict = run(
        json!({}),
        &update(
            &deployment(kind, version, old_ref),
            &deployment(kind, version, new_ref),
            "alice",
        ),
    );
    expect(&verdict, allowed, fragment);
}

#[test]
fn a_template_kind_of_an_unlisted_config_is_untouched() {
    let settings = json!({"bootstrapConfigKinds": [{"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "EKSConfig"}]});
    let (old, new) = (
        template("KubeadmConfigTemplate", "v1beta2", "a"),
        template("KubeadmConfigTemplate", "v1beta2", "b"),
    );
    assert_eq!(
        run(settings, &update(&old, &new, "alice")),
        Verdict::accept()
    );
}

/// A template edit reports its path and the copy's name as data, the same name its message
/// proposes (the playground and tools read these instead of parsing the message).
#[test]
fn a_template_edit_reports_the_path_and_the_copy_name() {
    let verdict = run(
        json!({}),
        &update(
            &template("KubeadmConfigTemplate", "v1beta2", "a"),
            &template("KubeadmConfigTemplate", "v1beta2", "b"),
            "alice",
        ),
    );
    let fields: Vec<&str> = verdict
        .violations
        .iter()
        .map(|v| v.field.as_str())
        .collect();
    assert_eq!(fields, ["spec.template.spec.files[0].content"]);
    let name = verdict.suggested_name.clone().unwrap();
    assert!(
        name.starts_with("md-0-") && name.len() == "md-0-".len() + 8,
        "{name}"
    );
    assert_ne!(name, "md-0-0123abcd");
    let message = verdict.message.unwrap();
    assert!(
        message.contains(&format!("create a new KubeadmConfigTemplate {name:?}")),
        "{message}"
    );
}
