//! policy.yaml: valid against Kubewarden's CRD, its matchConditions, its settings the
//! documented defaults, its difference from kwctl's scaffold.

use std::collections::BTreeSet;
use std::path::PathBuf;

use capi_bootstrap_rollout_policy::capi::providers::DEFAULT_CONTROLLER_USERS;
use capi_bootstrap_rollout_policy::settings::Settings;
use serde_json::{json, Value};

use crate::files::{crd_field, crd_versions, documented_defaults, list, read, text, yaml};

/// Closes every object schema that lists its properties, as the API server's pruning does:
/// a field it would silently drop (a typo such as `timeOutSeconds`) fails validation here.
fn close_objects(schema: &mut Value) {
    let Some(node) = schema.as_object_mut() else {
        return;
    };
    let preserves = node.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true));
    if node.contains_key("properties") && !node.contains_key("additionalProperties") && !preserves {
        node.insert("additionalProperties".into(), json!(false));
    }
    if let Some(Value::Object(properties)) = node.get_mut("properties") {
        properties.values_mut().for_each(close_objects);
    }
    if let Some(items) = node.get_mut("items") {
        close_objects(items);
    }
    if let Some(additional) = node.get_mut("additionalProperties") {
        close_objects(additional);
    }
}

#[test]
fn policy_yaml_validates_against_the_cluster_admission_policy_crd() {
    let policy = yaml("policy.yaml");
    let crd = crd_versions("ClusterAdmissionPolicy");
    let group = crd_field(&crd, "group");
    let api_version = text(&policy["apiVersion"], "policy.yaml apiVersion");
    let (policy_group, policy_version) = api_version
        .split_once('/')
        .expect("policy.yaml: apiVersion is group/version");
    assert_eq!(policy_group, group, "policy.yaml: apiVersion group");
    assert_eq!(policy_version, "v1", "policy.yaml: use the v1 API");
    assert_eq!(
        policy["kind"],
        json!("ClusterAdmissionPolicy"),
        "policy.yaml: kind"
    );
    let version = crd
        .iter()
        .find(|v| v["version"] == json!(policy_version))
        .expect("the CRD serves policy.yaml's version");

    let name = text(&policy["metadata"]["name"], "policy.yaml metadata.name");
    assert!(
        !name.is_empty()
            && name.len() <= 253
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
            && name.starts_with(|c: char| c.is_ascii_alphanumeric())
            && name.ends_with(|c: char| c.is_ascii_alphanumeric()),
        "policy.yaml: metadata.name {name:?} is not a DNS subdomain name"
    );

    let mut schema = version["openAPIV3Schema"].clone();
    close_objects(&mut schema);
    let validator = jsonschema::validator_for(&schema).expect("the CRD schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&policy)
        .map(|e| format!("{}: {e}", e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "policy.yaml does not validate against tests/crds/kubewarden/ClusterAdmissionPolicy.{policy_version}.json:\n{}",
        errors.join("\n")
    );
}

/// A Kubernetes qualified name: an optional DNS subdomain prefix and '/', then at most 63
/// characters of `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn is_qualified_name(name: &str) -> bool {
    let (prefix, local) = match name.split_once('/') {
        Some((prefix, local)) => (Some(prefix), local),
        None => (None, name),
    };
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|label| {
                !label.is_empty()
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            })
    });
    prefix_ok
        && !local.is_empty()
        && local.len() <= 63
        && local
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && local.starts_with(|c: char| c.is_ascii_alphanumeric())
        && local.ends_with(|c: char| c.is_ascii_alphanumeric())
}

#[test]
fn match_conditions_are_well_formed() {
    let policy = yaml("policy.yaml");
    let conditions = list(
        &policy["spec"]["matchConditions"],
        "policy.yaml matchConditions",
    );
    assert!(
        conditions.len() <= 64,
        "policy.yaml: at most 64 matchConditions"
    );
    let mut names = BTreeSet::new();
    for condition in conditions {
        let name = text(&condition["name"], "matchConditions[].name");
        assert!(
            is_qualified_name(name),
            "policy.yaml: matchCondition name {name:?}"
        );
        assert!(
            names.insert(name),
            "policy.yaml: matchCondition {name:?} twice"
        );
        let expression = text(&condition["expression"], "matchConditions[].expression");
        let mut depth = 0i32;
        for c in expression.chars() {
            depth += match c {
                '(' => 1,
                ')' => -1,
                _ => 0,
            };
            assert!(depth >= 0, "policy.yaml: {name}: unbalanced parentheses");
        }
        assert_eq!(depth, 0, "policy.yaml: {name}: unbalanced parentheses");
        // Every condition must let bootstrap config requests through before it reads a field:
        // the policy judges all of them. The first test of each expression says so.
        assert!(
            expression.starts_with(
                "!(request.resource.resource in ['machinepools', 'machinedeployments', 'machinesets']) ||"
            ),
            "policy.yaml: {name} must start by passing every request that is not a MachinePool, \
             MachineDeployment or MachineSet"
        );
    }
}

#[test]
fn policy_settings_are_the_documented_defaults() {
    let settings = &yaml("policy.yaml")["spec"]["settings"];
    assert_eq!(
        settings,
        &documented_defaults(),
        "policy.yaml: spec.settings must spell out every default"
    );
    assert_eq!(
        Settings::from_value(settings),
        Ok(Settings::default()),
        "policy.yaml: the policy must read spec.settings as its built-in defaults"
    );
    assert_eq!(
        documented_defaults()["controllerUsers"],
        json!(DEFAULT_CONTROLLER_USERS)
    );
}

/// docs/operations.md's word on `kwctl scaffold manifest`: what it writes from the annotated
/// module differs from policy.yaml in its name and in exactly the fields that page lists (the module
/// and the settings aside: its `{}` are the defaults policy.yaml spells out; an absent
/// `backgroundAudit` is Kubewarden's default, true). With KWCTL and ANNOTATED_POLICY (as
/// `.ci/run` gives them); without kwctl there is no scaffold to compare.
#[test]
fn kwctl_scaffold_manifest_differs_from_policy_yaml_as_docs_operations_says() {
    let (Some(kwctl), Some(module)) = (
        std::env::var_os("KWCTL").filter(|k| !k.is_empty()),
        std::env::var_os("ANNOTATED_POLICY").filter(|m| !m.is_empty()),
    ) else {
        eprintln!("KWCTL or ANNOTATED_POLICY not set: kwctl scaffold manifest not compared");
        return;
    };
    let module = PathBuf::from(module);
    let output = std::process::Command::new(kwctl)
        .args(["scaffold", "manifest", "--type", "ClusterAdmissionPolicy"])
        .arg(format!("file://{}", module.display()))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let scaffold: Value = yaml_serde::from_slice(&output.stdout).unwrap();
    let policy = yaml("policy.yaml");
    let (theirs, ours) = (&scaffold["spec"], &policy["spec"]);
    let keys: BTreeSet<&str> = [theirs, ours]
        .iter()
        .filter_map(|spec| spec.as_object())
        .flat_map(|o| o.keys().map(String::as_str))
        .collect();
    let differs: Vec<&str> = keys
        .into_iter()
        .filter(|k| !["module", "settings"].contains(k))
        .filter(|k| {
            let default = if *k == "backgroundAudit" {
                json!(true)
            } else {
                Value::Null
            };
            theirs.get(*k).cloned().unwrap_or(default) != ours[*k]
        })
        .collect();
    assert_eq!(
        differs,
        [
            "contextAwareResources",
            "failurePolicy",
            "matchConditions",
            "mode",
            "timeoutSeconds"
        ],
        "docs/operations.md lists what kwctl scaffold manifest lacks: fix it"
    );
    assert_eq!(
        scaffold["metadata"]["name"],
        "capi-bootstrap-rollout-policy"
    );
    assert_ne!(scaffold["metadata"]["name"], policy["metadata"]["name"]);
    assert!(read("docs/operations.md").contains(
        "`capi-bootstrap-rollout-policy` and lacks policy.yaml's `failurePolicy: Ignore`, `timeoutSeconds`,\n\
         `matchConditions`, `mode: monitor` and `contextAwareResources`"
    ));
}
