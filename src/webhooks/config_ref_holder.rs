//! What names a bootstrap object in `spec.template.spec.bootstrap.configRef`: a MachinePool (a
//! bootstrap config), a MachineDeployment or MachineSet (a bootstrap template): what a CREATE or
//! an UPDATE of the main resource is judged by. Only a changed ref is judged (an unchanged one,
//! an apiVersion bump included, is nothing this request decides); a DELETE, a status update or
//! a CONNECT is accepted.

use crate::capi::config_ref::{config_ref_in, RefIdentity};
use crate::capi::kinds::{is_machine_pool, GroupKind};
use crate::lookups::Lookups;
use crate::reader::request::{Operation, Request};
use crate::rules::contract::check_config_ref;
use crate::rules::rotation::{check_kind_listed, check_namespace, check_target};
use crate::settings::Settings;
use crate::verdict::Finding;

/// The findings on a request for a MachinePool, MachineDeployment or MachineSet; `Err`: a
/// configRef that is no object reference, a malformed request. Rotation targets are looked up
/// for MachinePools (configs) only.
pub fn judge(
    settings: &Settings,
    request: &Request,
    lookups: Option<&dyn Lookups>,
) -> Result<Vec<Finding>, String> {
    if !matches!(request.operation, Operation::Create | Operation::Update)
        || !request.sub_resource.is_empty()
    {
        return Ok(Vec::new());
    }
    let new_ref = config_ref_in(request.object.and_then(|o| o.spec.as_ref()))?;
    let old_ref = match request.operation {
        Operation::Update => {
            config_ref_in(request.old_object.and_then(|o| o.spec.as_ref())).unwrap_or(None)
        }
        _ => None,
    };
    let Some(new_ref) = new_ref else {
        // No ref (any more): the pool uses a hand-set dataSecretName. Allowed.
        return Ok(Vec::new());
    };
    let new_id = RefIdentity::of(new_ref);
    if request.operation == Operation::Update
        && old_ref.map(RefIdentity::of).as_ref() == Some(&new_id)
    {
        // Unchanged (an apiVersion bump included): nothing this request decides.
        return Ok(Vec::new());
    }
    let target = GroupKind::new(&new_id.group, &new_id.kind);
    let mut findings = Vec::new();
    findings.extend(check_namespace(request, &new_id));
    findings.extend(check_config_ref(settings, request.version, new_ref));
    findings.extend(check_kind_listed(settings, request, &target));
    // A ref without group or kind is already flagged by the contract check.
    let resolvable = !new_id.group.is_empty() && !new_id.kind.is_empty();
    let lookups =
        lookups.filter(|_| is_machine_pool(&request.group_kind.group, &request.group_kind.kind));
    if let (Some(lookups), Operation::Update, true) = (lookups, request.operation, resolvable) {
        if settings.is_bootstrap_config(&target.group, &target.kind) && !new_id.name.is_empty() {
            findings.extend(check_target(
                settings, request, lookups, &target, &new_id, old_ref,
            ));
        }
    }
    Ok(findings)
}

#[cfg(test)]
mod tests {
    use crate::verdict::Verdict;
    use crate::webhooks::fixtures::*;
    use rstest::rstest;
    use serde_json::{json, Value};

    #[rstest]
    #[case::v1beta2_rotation("v1beta2", Some(v1beta2_ref("KubeadmConfig", "a-1")), Some(v1beta2_ref("KubeadmConfig", "a-2")), true, &[])]
    #[case::v1beta1_rotation("v1beta1", Some(v1beta1_ref(B1, "KubeadmConfig", "a-1")), Some(v1beta1_ref(B1, "KubeadmConfig", "a-2")), true, &[])]
    #[case::to_another_provider("v1beta2", Some(v1beta2_ref("KubeadmConfig", "a-1")), Some(v1beta2_ref("EKSConfig", "a-1")), true, &[])]
    #[case::v1beta1_api_version_bump("v1beta1", Some(v1beta1_ref(B1, "KubeadmConfig", "a-1")), Some(v1beta1_ref(B2, "KubeadmConfig", "a-1")), true, &[])]
    #[case::dropped_for_data_secret_name("v1beta1", Some(v1beta1_ref(B1, "KubeadmConfig", "a-1")), None, true, &[])]
    #[case::other_namespace("v1beta1", Some(v1beta1_ref(B1, "KubeadmConfig", "a-1")), Some(json!({"apiVersion": B1, "kind": "KubeadmConfig", "name": "a-2", "namespace": "other"})), false, &["[spec.template.spec.bootstrap.configRef.namespace: Invalid value: \"other\": must be the MachinePool's namespace \"default\"]"])]
    #[case::missing_api_version("v1beta1", Some(v1beta1_ref(B1, "KubeadmConfig", "a-1")), Some(json!({"kind": "KubeadmConfig", "name": "a-2"})), true, &["spec.template.spec.bootstrap.configRef.apiVersion missing: CAPI cannot resolve the bootstrap config (contract)"])]
    // Regression: a ref without apiVersion also drew "kind KubeadmConfig is not in bootstrapConfigKinds".
    #[case::missing_api_version_one_warning_only("v1beta1", None, Some(json!({"kind": "KubeadmConfig", "name": "a-2"})), true, &["spec.template.spec.bootstrap.configRef.apiVersion missing"])]
    #[case::unlisted_kind("v1beta2", Some(v1beta2_ref("KubeadmConfig", "a-1")), Some(json!({"apiGroup": "bootstrap.example.com", "kind": "ExampleConfig", "name": "a-2"})), true, &["configRef kind ExampleConfig.bootstrap.example.com is not in bootstrapConfigKinds: its in-place edits are not checked"])]
    fn machine_pool_rotation(
        #[case] version: &str,
        #[case] old_ref: Option<Value>,
        #[case] new_ref: Option<Value>,
        #[case] allowed: bool,
        #[case] expected: &[&str],
    ) {
        let verdict = run(
            json!({}),
            &update(&pool(version, old_ref), &pool(version, new_ref), "alice"),
        );
        assert_eq!(verdict.allowed, allowed, "{verdict:?}");
        let said = verdict
            .message
            .clone()
            .into_iter()
            .chain(verdict.warnings.clone())
            .collect::<Vec<_>>()
            .join("\n");
        for fragment in expected {
            assert!(said.contains(fragment), "{said}");
        }
        assert!(verdict.warnings.len() <= 1, "{:?}", verdict.warnings);
        if expected.is_empty() {
            assert_eq!(verdict, Verdict::accept());
        }
    }

    #[test]
    fn unchanged_ref_is_never_rejudged() {
        // policy.yaml's matchCondition skips these updates; the verdict must not depend on it.
        let broken = json!({"kind": "KubeadmConfig"});
        let old = pool("v1beta1", Some(broken.clone()));
        let mut new = pool("v1beta1", Some(broken));
        new["spec"]["replicas"] = json!(5);
        assert_eq!(
            run(
                json!({"contractViolations": "reject"}),
                &update(&old, &new, "alice")
            ),
            Verdict::accept()
        );
    }

    #[test]
    fn machine_pool_create_is_checked() {
        let new = pool("v1beta1", Some(json!({"name": "a-1"})));
        let verdict = run(
            json!({"contractViolations": "reject"}),
            &request("CREATE", Some(&new), None, "alice"),
        );
        assert_eq!(verdict.message.unwrap(), "MachinePool.cluster.x-k8s.io \"worker-a\" is invalid: [spec.template.spec.bootstrap.configRef.apiVersion: Required: the bootstrap contract resolves the config by it, spec.template.spec.bootstrap.configRef.kind: Required: the bootstrap contract resolves the config by it]. The bootstrap provider contract needs apiVersion, kind and name in the configRef to find the config");
    }
}
