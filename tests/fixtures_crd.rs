//! Every object in every e2e scenario is an object a cluster could store: it validates against
//! the real CRD (the openAPIV3Schema of its version, from tests/crds/), with unknown fields refused
//! as `kubectl apply --validate=strict` refuses them. Scenarios named `bad-input-*` carry
//! deliberately invalid objects and are skipped; kinds without a CRD in tests/crds/ are listed.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// Kinds that appear in scenarios but have no CRD in tests/crds/: a made-up provider's kind, and a
/// core kind (its schema is the API server's, not a CRD).
const KINDS_WITHOUT_CRD: [&str; 2] = ["ExampleConfig", "ConfigMap"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Makes the schema strict: an object schema listing properties refuses others, unless it says
/// `x-kubernetes-preserve-unknown-fields` (the API server prunes unknown fields; strict
/// validation reports them, and a typo in a fixture must not go unnoticed).
fn strict(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            let preserve = map
                .get("x-kubernetes-preserve-unknown-fields")
                .and_then(Value::as_bool)
                == Some(true);
            if map.contains_key("properties")
                && !map.contains_key("additionalProperties")
                && !preserve
            {
                map.insert("additionalProperties".into(), Value::Bool(false));
            }
            for value in map.values_mut() {
                strict(value);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strict),
        _ => {}
    }
}

/// (group, version, kind) -> validator, from every schema in tests/crds/: two kinds of the same
/// name in different groups are two schemas.
fn validators() -> BTreeMap<(String, String, String), jsonschema::Validator> {
    let mut out = BTreeMap::new();
    for (path, crd) in common::crd_schemas() {
        let mut schema = crd["openAPIV3Schema"].clone();
        strict(&mut schema);
        let validator = jsonschema::validator_for(&schema)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let key = (
            crd["group"].as_str().unwrap().to_string(),
            crd["version"].as_str().unwrap().to_string(),
            crd["kind"].as_str().unwrap().to_string(),
        );
        assert!(
            out.insert(key, validator).is_none(),
            "{}: a second schema for its group, version and kind",
            path.display()
        );
    }
    out
}

fn scenarios() -> Vec<PathBuf> {
    let dir = root().join("e2e-tests/scenarios");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("request.json").is_file())
        .collect();
    dirs.sort();
    dirs
}

fn name(dir: &Path) -> String {
    dir.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn every_scenario_object_validates_against_its_crd() {
    let validators = validators();
    let gvk = |g: &str, v: &str, k: &str| (g.to_string(), v.to_string(), k.to_string());
    assert!(validators.contains_key(&gvk("cluster.x-k8s.io", "v1beta1", "MachinePool")));
    assert!(validators.contains_key(&gvk(
        "bootstrap.cluster.x-k8s.io",
        "v1beta2",
        "KubeadmConfig"
    )));
    assert!(validators.contains_key(&gvk("bootstrap.cluster.x-k8s.io", "v1beta2", "EKSConfig")));
    for kind in KINDS_WITHOUT_CRD {
        assert!(
            !validators.keys().any(|(_, _, k)| k == kind),
            "{kind} has a CRD in tests/crds/ now: drop it from KINDS_WITHOUT_CRD"
        );
    }
    let mut failures = Vec::new();
    let mut validated = 0;
    for dir in scenarios() {
        if name(&dir).starts_with("bad-input-") {
            continue;
        }
        let request: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("request.json")).unwrap())
                .unwrap();
        for key in ["object", "oldObject"] {
            let object = &request[key];
            if object.is_null() {
                continue;
            }
            let kind = object["kind"].as_str().unwrap_or_default();
            let (group, version) = object["apiVersion"]
                .as_str()
                .unwrap_or_default()
                .rsplit_once('/')
                .unwrap_or(("", object["apiVersion"].as_str().unwrap_or_default()));
            match validators.get(&(group.to_string(), version.to_string(), kind.to_string())) {
                Some(validator) => {
                    validated += 1;
                    for error in validator.iter_errors(object) {
                        failures.push(format!(
                            "{}: {key}: {} at {}",
                            name(&dir),
                            error,
                            error.instance_path
                        ));
                    }
                }
                None if KINDS_WITHOUT_CRD.contains(&kind) => {}
                None => failures.push(format!(
                    "{}: {key}: no CRD for {kind} {group}/{version}",
                    name(&dir)
                )),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} problems:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(validated >= 60, "only {validated} objects validated");
}

#[test]
fn strict_validation_catches_a_typo() {
    let validators = validators();
    let validator = &validators[&(
        "bootstrap.cluster.x-k8s.io".to_string(),
        "v1beta2".to_string(),
        "KubeadmConfig".to_string(),
    )];
    let typo = serde_json::json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
        "metadata": {"name": "x"}, "spec": {"file": [{"path": "/a"}]}});
    assert!(!validator.is_valid(&typo));
    let v1beta1_shape = serde_json::json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
        "metadata": {"name": "x"}, "spec": {"joinConfiguration": {"nodeRegistration": {"kubeletExtraArgs": {"max-pods": "1"}}}}});
    assert!(!validator.is_valid(&v1beta1_shape));
}

/// Every scenario reads as the e2e runner and the playground read it (scenario-model):
/// unknown keys refused, expectations that hold together.
#[test]
fn every_scenario_has_its_expectations() {
    for dir in scenarios() {
        if let Err(e) = scenario_model::Scenario::load(&dir) {
            panic!("{}: {e:#}", name(&dir));
        }
    }
}
