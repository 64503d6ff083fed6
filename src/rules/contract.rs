//! Rule 5, the bootstrap provider contract: a configRef CAPI can resolve, and a config that
//! names its data secret once it says it is initialised.

use crate::capi::config_ref::CONFIG_REF;
use crate::reader::node::Node;
use crate::settings::{Action, Settings};
use crate::verdict::{Finding, Violation};

fn finding(
    settings: &Settings,
    violations: Vec<Violation>,
    explanation: &str,
    warning: String,
) -> Option<Finding> {
    if violations.is_empty() || settings.contract_violations == Action::Allow {
        return None;
    }
    Some(Finding {
        action: settings.contract_violations,
        violations,
        explanation: explanation.to_string(),
        warning,
        suggested_name: None,
    })
}

fn missing(value: &Node, key: &str) -> bool {
    value
        .get(key)
        .and_then(Node::as_str)
        .is_none_or(|s| s.is_empty())
}

/// The fields a configRef must carry: v1beta1 `apiVersion`, v1beta2 `apiGroup`; `kind`, `name`.
pub fn check_config_ref(settings: &Settings, version: &str, config_ref: &Node) -> Option<Finding> {
    let group_field = if version == "v1beta1" {
        "apiVersion"
    } else {
        "apiGroup"
    };
    let absent: Vec<&str> = [group_field, "kind", "name"]
        .into_iter()
        .filter(|key| missing(config_ref, key))
        .collect();
    let violations = absent
        .iter()
        .map(|key| {
            Violation::new(
                format!("{CONFIG_REF}.{key}"),
                "Required: the bootstrap contract resolves the config by it",
            )
        })
        .collect();
    let warning = format!(
        "{CONFIG_REF}.{} missing: CAPI cannot resolve the bootstrap config (contract)",
        absent.join("/")
    );
    finding(
        settings,
        violations,
        &format!("The bootstrap provider contract needs {group_field}, kind and name in the configRef to find the config"),
        warning,
    )
}

/// A config whose status says it is initialised must name its data secret.
pub fn check_config_status(settings: &Settings, status: Option<&Node>) -> Option<Finding> {
    let status = status?;
    let ready = status.get("ready").and_then(Node::as_bool) == Some(true);
    let created = status
        .at(&["initialization", "dataSecretCreated"])
        .and_then(Node::as_bool)
        == Some(true);
    if !(ready || created) || !missing(status, "dataSecretName") {
        return None;
    }
    let flag = if created {
        "status.initialization.dataSecretCreated"
    } else {
        "status.ready"
    };
    finding(
        settings,
        vec![Violation::new(
            "status.dataSecretName",
            format!("Required: {flag} is true, and the bootstrap contract makes the data secret name mandatory then"),
        )],
        "Bootstrap providers must set status.dataSecretName when the config reports its data ready; CAPI copies it into the MachinePool",
        format!("status.dataSecretName missing while {flag} is true (bootstrap contract)"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::{json, Value};

    #[rstest]
    #[case::v1beta1_complete("v1beta1", json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1", "kind": "KubeadmConfig", "name": "a"}), &[])]
    #[case::v1beta1_no_api_version("v1beta1", json!({"kind": "KubeadmConfig", "name": "a"}), &["spec.template.spec.bootstrap.configRef.apiVersion"])]
    #[case::v1beta1_api_group_does_not_count("v1beta1", json!({"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": "a"}), &["spec.template.spec.bootstrap.configRef.apiVersion"])]
    #[case::v1beta2_complete("v1beta2", json!({"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": "a"}), &[])]
    #[case::v1beta2_nothing("v1beta2", json!({}), &["spec.template.spec.bootstrap.configRef.apiGroup", "spec.template.spec.bootstrap.configRef.kind", "spec.template.spec.bootstrap.configRef.name"])]
    #[case::empty_name("v1beta2", json!({"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": ""}), &["spec.template.spec.bootstrap.configRef.name"])]
    #[case::name_not_a_string("v1beta2", json!({"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": 7}), &["spec.template.spec.bootstrap.configRef.name"])]
    fn config_ref_fields(
        #[case] version: &str,
        #[case] config_ref: Value,
        #[case] expected: &[&str],
    ) {
        let config_ref = Node::from_value(&config_ref);
        let found: Vec<String> = check_config_ref(&Settings::default(), version, &config_ref)
            .map(|f| f.violations.into_iter().map(|v| v.field).collect())
            .unwrap_or_default();
        assert_eq!(found, expected);
    }

    #[rstest]
    #[case::v1beta1_ready_without_secret(json!({"status": {"ready": true}}), Some("status.ready"))]
    #[case::v1beta2_created_without_secret(json!({"status": {"initialization": {"dataSecretCreated": true}}}), Some("status.initialization.dataSecretCreated"))]
    #[case::empty_secret_name(json!({"status": {"ready": true, "dataSecretName": ""}}), Some("status.ready"))]
    #[case::ready_with_secret(json!({"status": {"ready": true, "dataSecretName": "worker-a"}}), None)]
    #[case::not_ready(json!({"status": {"ready": false}}), None)]
    #[case::ready_as_string(json!({"status": {"ready": "true"}}), None)]
    #[case::no_status(json!({}), None)]
    fn status_fields(#[case] object: Value, #[case] flag: Option<&str>) {
        let status = object.get("status").map(Node::from_value);
        let finding = check_config_status(&Settings::default(), status.as_ref());
        assert_eq!(finding.is_some(), flag.is_some());
        if let (Some(f), Some(flag)) = (finding, flag) {
            assert_eq!(f.action, Action::Warn);
            assert_eq!(f.violations[0].field, "status.dataSecretName");
            assert_eq!(
                f.warning,
                format!("status.dataSecretName missing while {flag} is true (bootstrap contract)")
            );
        }
    }

    #[rstest]
    #[case::reject(Action::Reject, true)]
    #[case::ignore(Action::Allow, false)]
    fn contract_violations_setting(#[case] action: Action, #[case] found: bool) {
        let settings = Settings {
            contract_violations: action,
            ..Settings::default()
        };
        let status = json!({"ready": true});
        let finding = check_config_status(&settings, Some(&Node::from_value(&status)));
        assert_eq!(finding.map(|f| f.action), found.then_some(action));
    }
}
