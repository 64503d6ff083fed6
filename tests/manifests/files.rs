//! The files' reader and what the checks share: the crate's name, version, license and
//! repository, metadata.yml's annotations, the documented defaults, the CRDs' versions.

use std::collections::BTreeSet;
use std::path::PathBuf;

use capi_bootstrap_rollout_policy::capi::providers::{DEFAULT_CONTROLLER_USERS, PROVIDERS};
use serde_json::{json, Value};

pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub const NAME: &str = env!("CARGO_PKG_NAME");
pub const LICENSE: &str = env!("CARGO_PKG_LICENSE");
pub const REPOSITORY: &str = env!("CARGO_PKG_REPOSITORY");

pub const METADATA_SECTION: &str = "io.kubewarden.metadata";
pub const USAGE_ANNOTATION: &str = "io.kubewarden.policy.usage";

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn read(rel: &str) -> String {
    let path = root().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

pub fn yaml(rel: &str) -> Value {
    yaml_serde::from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel} is not valid YAML: {e}"))
}

pub fn text<'a>(value: &'a Value, what: &str) -> &'a str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("{what} must be a string, got {value}"))
}

pub fn list<'a>(value: &'a Value, what: &str) -> &'a Vec<Value> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("{what} must be a list, got {value}"))
}

pub fn annotation<'a>(metadata: &'a Value, key: &str) -> &'a str {
    text(
        &metadata["annotations"][key],
        &format!("metadata.yml annotations.{key}"),
    )
}

/// The settings defaults as README.md documents them, spelled out.
pub fn documented_defaults() -> Value {
    json!({
        "inPlaceEdits": "reject",
        "templateEdits": "reject",
        "contractViolations": "warn",
        "deleteOwnedConfigs": "warn",
        "exemptUsers": [],
        "exemptGroups": [],
        // From the provider records (src/capi/providers.rs), where every provider's facts live.
        "controllerUsers": DEFAULT_CONTROLLER_USERS,
        "bootstrapConfigKinds": PROVIDERS
            .iter()
            .map(|p| json!({"apiGroup": p.group, "kind": p.config_kind}))
            .collect::<Vec<_>>(),
        "ignoredPaths": {},
        "fillOncePaths": {},
        "contextAware": false,
        "capiVersion": "v1beta2",
    })
}

/// The values each enum setting takes.
pub fn enum_values(key: &str) -> Option<BTreeSet<&'static str>> {
    match key {
        "inPlaceEdits" | "templateEdits" => Some(["reject", "warn", "allow"].into()),
        "contractViolations" => Some(["warn", "reject", "ignore"].into()),
        "deleteOwnedConfigs" => Some(["warn", "reject", "allow"].into()),
        "capiVersion" => Some(["v1beta2", "v1beta1"].into()),
        _ => None,
    }
}

pub fn oci_image(metadata: &Value) -> String {
    format!(
        "{}:v{VERSION}",
        annotation(metadata, "io.kubewarden.policy.ociUrl")
    )
}

/// `kubewarden/rules` and `kubewarden/contextAwareResources` are YAML documents in strings.
pub fn yaml_string(value: &Value, what: &str) -> Value {
    yaml_serde::from_str(text(value, what))
        .unwrap_or_else(|e| panic!("{what} is not a YAML document: {e}"))
}

pub fn find_rule<'a>(rules: &'a [Value], resource: &str) -> &'a Value {
    let found: Vec<&Value> = rules
        .iter()
        .filter(|r| {
            r["resources"]
                .as_array()
                .is_some_and(|rs| rs.contains(&json!(resource)))
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "metadata.yml: exactly one rule must list {resource}, found {found:?}"
    );
    found[0]
}

/// The served versions of a CRD kind, from tests/crds/ (one file per served version; each repeats
/// the CRD's group and plural).
pub fn crd_versions(kind: &str) -> Vec<Value> {
    let versions: Vec<Value> = crate::common::crd_schemas()
        .into_iter()
        .map(|(_, crd)| crd)
        .filter(|crd| crd["kind"] == json!(kind))
        .collect();
    assert!(!versions.is_empty(), "tests/crds/ has no schema of {kind}");
    versions
}

/// What every version of a kind says alike: its group or plural.
pub fn crd_field<'a>(versions: &'a [Value], field: &str) -> &'a str {
    let value = text(&versions[0][field], field);
    assert!(
        versions.iter().all(|v| v[field] == json!(value)),
        "tests/crds/: the versions of {} disagree on {field}",
        versions[0]["kind"]
    );
    value
}

pub fn served_versions(versions: &[Value]) -> BTreeSet<String> {
    versions
        .iter()
        .map(|v| text(&v["version"], "CRD version name").to_string())
        .collect()
}
