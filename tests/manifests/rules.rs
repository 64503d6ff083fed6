//! The rules, flags and context-aware resources: the same in metadata.yml and policy.yaml, and
//! the ones the policy's code and the CRDs call for; the minimum Kubewarden version.

use std::collections::BTreeSet;

use capi_bootstrap_rollout_policy::capi::kinds::{BOOTSTRAP_GROUP, CAPI_GROUP};
use capi_bootstrap_rollout_policy::capi::providers::{DEFAULT_BOOTSTRAP_CONFIG_KINDS, PROVIDERS};
use capi_bootstrap_rollout_policy::host_lookups::HOST_CAPABILITIES;
use capi_bootstrap_rollout_policy::lookups::{CONFIG_FIELDS, MACHINE_POOL_FIELDS};
use capi_bootstrap_rollout_policy::settings::Settings;
use serde_json::{json, Value};

use crate::files::{
    crd_field, crd_versions, find_rule, list, served_versions, text, yaml, yaml_string,
};

#[test]
fn rules_and_flags_agree_everywhere() {
    let metadata = yaml("metadata.yml");
    let spec = &yaml("policy.yaml")["spec"];
    let pkg_annotations = &yaml("artifacthub-pkg.yml")["annotations"];

    assert_eq!(
        spec["rules"], metadata["rules"],
        "policy.yaml: spec.rules != metadata.yml rules"
    );
    assert_eq!(
        yaml_string(
            &pkg_annotations["kubewarden/rules"],
            "artifacthub-pkg.yml kubewarden/rules"
        ),
        metadata["rules"],
        "artifacthub-pkg.yml: kubewarden/rules != metadata.yml rules"
    );

    assert_eq!(
        metadata["mutating"],
        json!(false),
        "metadata.yml: the policy never mutates"
    );
    assert_eq!(
        spec["mutating"], metadata["mutating"],
        "policy.yaml: spec.mutating"
    );
    assert_eq!(
        pkg_annotations["kubewarden/mutation"],
        json!(metadata["mutating"].to_string()),
        "artifacthub-pkg.yml: kubewarden/mutation"
    );

    let context_aware = &metadata["contextAwareResources"];
    assert!(
        context_aware.is_array(),
        "metadata.yml: contextAwareResources must be a list"
    );
    assert_eq!(
        &spec["contextAwareResources"], context_aware,
        "policy.yaml: spec.contextAwareResources"
    );
    // kwctl writes the annotation only when the list is not empty.
    match pkg_annotations.get("kubewarden/contextAwareResources") {
        None => assert_eq!(
            context_aware,
            &json!([]),
            "artifacthub-pkg.yml: kubewarden/contextAwareResources is missing"
        ),
        Some(resources) => assert_eq!(
            &yaml_string(
                resources,
                "artifacthub-pkg.yml kubewarden/contextAwareResources"
            ),
            context_aware,
            "artifacthub-pkg.yml: kubewarden/contextAwareResources"
        ),
    }

    assert!(
        metadata["backgroundAudit"].is_boolean(),
        "metadata.yml: backgroundAudit"
    );
    assert_eq!(
        spec["backgroundAudit"], metadata["backgroundAudit"],
        "policy.yaml: spec.backgroundAudit"
    );
    // Artifact Hub's Kubewarden annotations carry no backgroundAudit; none may contradict.
    let known: BTreeSet<&str> = [
        "kubewarden/mutation",
        "kubewarden/contextAwareResources",
        "kubewarden/questions-ui",
        "kubewarden/resources",
        "kubewarden/rules",
        "kubewarden/hidden-ui",
    ]
    .into();
    let pkg_keys = pkg_annotations
        .as_object()
        .expect("artifacthub-pkg.yml: annotations must be a map");
    for key in pkg_keys.keys() {
        assert!(
            known.contains(key.as_str()),
            "artifacthub-pkg.yml: unknown annotation {key}"
        );
    }

    assert_eq!(metadata["executionMode"], json!("kubewarden-wapc"));
}

#[test]
fn rules_cover_the_default_kinds_and_every_served_version() {
    let metadata = yaml("metadata.yml");
    let rules = list(&metadata["rules"], "metadata.yml rules");
    assert_eq!(
        rules.len(),
        3,
        "metadata.yml: MachinePools, configs, configs/status"
    );

    let machine_pool_crd = crd_versions("MachinePool");
    let plural = crd_field(&machine_pool_crd, "plural");
    let pools = find_rule(rules, plural);
    assert_eq!(pools["apiGroups"], json!([CAPI_GROUP]));
    assert_eq!(crd_field(&machine_pool_crd, "group"), CAPI_GROUP);
    let listed: BTreeSet<String> = list(&pools["apiVersions"], "apiVersions")
        .iter()
        .map(|v| text(v, "apiVersion").to_string())
        .collect();
    let served = served_versions(&machine_pool_crd);
    assert!(
        served.is_subset(&listed),
        "metadata.yml: MachinePool versions {listed:?} miss served versions {served:?}"
    );
    // MachineDeployments and MachineSets name bootstrap templates in the same configRef.
    assert_eq!(
        pools["resources"],
        json!([plural, "machinedeployments", "machinesets"])
    );
    assert_eq!(pools["operations"], json!(["CREATE", "UPDATE"]));

    // Plurals of the default kinds, in their order: kubebuilder's lower-case kind + "s".
    let resources: Vec<String> = DEFAULT_BOOTSTRAP_CONFIG_KINDS
        .iter()
        .map(|kind| format!("{}s", kind.to_lowercase()))
        .collect();
    let kubeadm_crd = crd_versions("KubeadmConfig");
    assert_eq!(crd_field(&kubeadm_crd, "group"), BOOTSTRAP_GROUP);
    let kubeadm_plural = crd_field(&kubeadm_crd, "plural");
    assert!(resources.contains(&kubeadm_plural.to_string()));

    // Then their templates: kind + "Template", as Settings::is_bootstrap_template derives them.
    let templates: Vec<String> = DEFAULT_BOOTSTRAP_CONFIG_KINDS
        .iter()
        .map(|kind| format!("{}templates", kind.to_lowercase()))
        .collect();
    // The records' groups, each once, in their order.
    let mut groups: Vec<&str> = Vec::new();
    for p in PROVIDERS {
        if !groups.contains(&p.group) {
            groups.push(p.group);
        }
    }
    assert!(groups.contains(&BOOTSTRAP_GROUP));
    let configs = find_rule(rules, &resources[0]);
    assert_eq!(configs["apiGroups"], json!(groups));
    assert_eq!(configs["apiVersions"], json!(["*"]));
    let configs_and_templates: Vec<&String> = resources.iter().chain(&templates).collect();
    assert_eq!(configs["resources"], json!(configs_and_templates));
    assert_eq!(configs["operations"], json!(["CREATE", "UPDATE", "DELETE"]));

    let statuses: Vec<String> = resources.iter().map(|r| format!("{r}/status")).collect();
    for version in &kubeadm_crd {
        assert!(
            version["subresources"].get("status").is_some(),
            "KubeadmConfig serves /status in every version"
        );
    }
    let status = find_rule(rules, &statuses[0]);
    assert_eq!(status["apiGroups"], json!(groups));
    assert_eq!(status["apiVersions"], json!(["*"]));
    assert_eq!(status["resources"], json!(statuses));
    assert_eq!(status["operations"], json!(["UPDATE"]));
}

/// metadata.yml declares the host capabilities the policy calls, no more and no fewer: those
/// of `host_lookups`, the only code that calls the host. (e2e-tests/tests/annotate_shipped.rs
/// checks the module itself, as kwctl's annotate scans it.)
#[test]
fn host_capabilities_are_the_ones_the_policy_calls() {
    assert_eq!(
        yaml("metadata.yml")["hostCapabilities"],
        json!(HOST_CAPABILITIES),
        "metadata.yml: hostCapabilities must list the policy's host calls; kwctl annotate \
         warns about every difference"
    );
    // A ClusterAdmissionPolicy has no such field: Kubewarden grants it every capability.
    assert_eq!(yaml("policy.yaml")["spec"].get("hostCapabilities"), None);
}

/// "x.y.z" as numbers, for ordering releases.
fn release(version: &str) -> (u64, u64, u64) {
    let parts: Vec<u64> = version
        .split('.')
        .map(|p| {
            p.parse()
                .unwrap_or_else(|_| panic!("{version:?} is not x.y.z"))
        })
        .collect();
    assert_eq!(parts.len(), 3, "{version:?} is not x.y.z");
    (parts[0], parts[1], parts[2])
}

/// minimumKubewardenVersion is the oldest Kubewarden on which everything the policy uses
/// works: the release of the newest feature in use. Each release is the first tag of
/// kubewarden/kubewarden-controller (now kubewarden/adm-controller) holding the feature's
/// commit.
#[test]
fn minimum_kubewarden_version_is_the_release_of_the_newest_feature_used() {
    let metadata = yaml("metadata.yml");
    let spec = &yaml("policy.yaml")["spec"];
    let features = [
        // policy-evaluator bfef645c, "support field masks when querying k8s": older hosts
        // ignore the masks and send whole objects.
        (
            "field masks on list_resources_by_namespace",
            !MACHINE_POOL_FIELDS.is_empty() || !CONFIG_FIELDS.is_empty(),
            "1.33.0",
        ),
        // 905354c2, "Add spec.matchConditions to (Cluster)AdmissionPolicies types".
        (
            "policy.yaml's matchConditions",
            spec.get("matchConditions").is_some(),
            "1.15.0",
        ),
        // d3f2b888, "Add new `spec.backgroundAudit` to v1 policies" (the audit scanner).
        (
            "backgroundAudit",
            metadata["backgroundAudit"] == json!(true),
            "1.7.0",
        ),
        // ddcbc201, "introduce `contextAwareResources` attribute".
        (
            "contextAwareResources",
            !list(&metadata["contextAwareResources"], "contextAwareResources").is_empty(),
            "1.6.0",
        ),
    ];
    let (feature, _, newest) = features
        .iter()
        .filter(|(_, used, _)| *used)
        .max_by_key(|(_, _, version)| release(version))
        .expect("the policy uses some feature");
    let minimum = text(
        &metadata["minimumKubewardenVersion"],
        "metadata.yml minimumKubewardenVersion",
    );
    assert_eq!(
        release(minimum),
        release(newest),
        "metadata.yml: minimumKubewardenVersion {minimum}, but {feature} needs Kubewarden \
         {newest} and nothing newer is used"
    );
    // kwctl and policy-server compare major.minor only: a patch would only mislead.
    assert_eq!(
        release(minimum).2,
        0,
        "metadata.yml: minimumKubewardenVersion ends in .0"
    );
}

/// The context-aware mode asks for MachinePools in the default CAPI version and each default
/// bootstrap config kind in the version its lookups use: metadata.yml declares exactly those.
#[test]
fn context_aware_resources_are_what_the_lookups_ask_for() {
    let settings = Settings::default();
    let mut expected: Vec<Value> = ["MachinePool", "MachineDeployment", "MachineSet"]
        .iter()
        .map(|kind| json!({"apiVersion": format!("{CAPI_GROUP}/{}", settings.capi_version), "kind": kind}))
        .collect();
    for gk in &settings.bootstrap_config_kinds {
        expected.push(json!({
            "apiVersion": settings.lookup_api_version(gk).expect("a default kind has a lookup version"),
            "kind": gk.kind
        }));
    }
    // kwctl annotate stores them as a set: sorted by apiVersion, then kind.
    expected.sort_by_key(|r| (r["apiVersion"].to_string(), r["kind"].to_string()));
    assert_eq!(
        yaml("metadata.yml")["contextAwareResources"],
        json!(expected)
    );
}
