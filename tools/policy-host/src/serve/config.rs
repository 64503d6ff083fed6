//! policies.yml, read as policy-server reads it (`config.rs`): a map from policy id to a
//! policy or a policy group, camelCase keys, unknown keys of a policy ignored.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use crate::metadata::ContextAwareResource;

/// `policyMode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicyMode {
    Monitor,
    #[default]
    Protect,
}

/// A member of a policy group (read so a file policy-server takes is not refused as
/// unreadable; policy-host serves no groups).
#[allow(dead_code)]
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PolicyGroupMember {
    module: String,
    settings: Option<Map<String, Value>>,
    #[serde(default)]
    context_aware_resources: BTreeSet<ContextAwareResource>,
    timeout_eval_seconds: Option<u64>,
    #[serde(default)]
    host_capabilities: Vec<String>,
}

/// One entry of policies.yml. The name is policy-server's: serde names it in the error of an
/// entry that is neither.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum PolicyOrPolicyGroup {
    Policy(PolicyConfig),
    #[allow(dead_code)]
    #[serde(rename_all = "camelCase")]
    PolicyGroup {
        #[serde(default)]
        policy_mode: PolicyMode,
        policies: HashMap<String, PolicyGroupMember>,
        expression: String,
        message: String,
    },
}

/// A policy entry of policies.yml, as policy-host serves it.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyConfig {
    /// `file:///abs/path.wasm` (policy-server also pulls `registry://`, `https://`).
    pub module: String,
    #[serde(default)]
    pub policy_mode: PolicyMode,
    #[serde(default, deserialize_with = "null_is_default")]
    pub allowed_to_mutate: bool,
    #[serde(default, deserialize_with = "null_is_default")]
    pub settings: Map<String, Value>,
    #[serde(default)]
    pub context_aware_resources: BTreeSet<ContextAwareResource>,
    /// Replaces the rejection message (the policy's goes to status.details.causes).
    pub message: Option<String>,
    pub timeout_eval_seconds: Option<u64>,
    #[serde(default)]
    pub host_capabilities: Vec<String>,
}

/// A key given as `null` counts as absent (policy-server reads these keys as `Option`s).
fn null_is_default<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(
    deserializer: D,
) -> std::result::Result<T, D::Error> {
    Option::<T>::deserialize(deserializer).map(Option::unwrap_or_default)
}

/// policy-server's `policies()`: read the file, refuse ids with a `/`. Policy groups are
/// refused here (policy-server evaluates them with Rhai expressions).
pub fn read_policies(path: &Path) -> Result<BTreeMap<String, PolicyConfig>> {
    let entries = read_policies_file(path)
        .map_err(|e| anyhow!("error while loading policies from {:?}: {}", path, e))?;
    let mut policies = BTreeMap::new();
    for (name, entry) in entries {
        if name.contains('/') {
            bail!("policy name '{}' contains a '/' character", name);
        }
        match entry {
            PolicyOrPolicyGroup::Policy(policy) => policies.insert(name, policy),
            PolicyOrPolicyGroup::PolicyGroup { .. } => bail!(
                "policy '{name}' is a policy group: policy-host serve runs single policies only (use policy-server for groups)"
            ),
        };
    }
    Ok(policies)
}

fn read_policies_file(path: &Path) -> Result<BTreeMap<String, PolicyOrPolicyGroup>> {
    let file = std::fs::File::open(path)?;
    Ok(yaml_serde::from_reader(file)?)
}

/// The local path of a `file://` module; other schemes are policy-server's to pull.
pub fn module_path(module: &str) -> Result<std::path::PathBuf> {
    let url = url::Url::parse(module);
    match url {
        Ok(url) if url.scheme() == "file" => url
            .to_file_path()
            .map_err(|_| anyhow!("cannot retrieve path from uri: {url}")),
        _ => bail!(
            "policy-host serve loads local modules only (file:///absolute/path.wasm), not {module}: pull it first (`policy-host pull -o FILE {module}`)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(yaml: &str) -> Result<BTreeMap<String, PolicyConfig>> {
        let dir = std::env::temp_dir().join(format!(
            "policy-host-config-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("policies.yml");
        std::fs::write(&path, yaml).unwrap();
        let result = read_policies(&path);
        std::fs::remove_dir_all(&dir).unwrap();
        result
    }

    #[test]
    fn reads_policy_server_entries() {
        let policies = read(
            r#"
clusterwide-rollout:
  module: file:///tmp/policy.wasm
  policyMode: monitor
  allowedToMutate: false
  settings: {contextAware: true}
  contextAwareResources:
    - {apiVersion: cluster.x-k8s.io/v1beta2, kind: MachinePool}
  message: custom
  timeoutEvalSeconds: 3
  hostCapabilities: ["kubernetes/*"]
  someFieldPolicyServerIgnores: 1
plain:
  module: file:///tmp/policy.wasm
  settings: null
"#,
        )
        .unwrap();
        let rollout = &policies["clusterwide-rollout"];
        assert_eq!(rollout.policy_mode, PolicyMode::Monitor);
        assert_eq!(rollout.settings["contextAware"], Value::Bool(true));
        assert_eq!(rollout.context_aware_resources.len(), 1);
        assert_eq!(rollout.message.as_deref(), Some("custom"));
        assert_eq!(rollout.timeout_eval_seconds, Some(3));
        assert_eq!(rollout.host_capabilities, ["kubernetes/*"]);
        let plain = &policies["plain"];
        assert_eq!(plain.policy_mode, PolicyMode::Protect);
        assert!(!plain.allowed_to_mutate && plain.settings.is_empty());
        assert!(plain.host_capabilities.is_empty());
    }

    /// What kubewarden-controller writes into the policy server's ConfigMap for a
    /// ClusterAdmissionPolicy (`policyserver_controller_configmap.go`): JSON, a
    /// `namespacedName` policy-server ignores, every host capability.
    #[test]
    fn reads_what_the_controller_writes() {
        let policies = read(
            r#"{"clusterwide-capi-rollout":{"namespacedName":{"Namespace":"","Name":"capi-rollout"},"module":"file:///tmp/policy.wasm","policyMode":"protect","allowedToMutate":false,"contextAwareResources":[{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"MachinePool"}],"settings":null,"hostCapabilities":["*"]}}"#,
        )
        .unwrap();
        let policy = &policies["clusterwide-capi-rollout"];
        assert_eq!(policy.policy_mode, PolicyMode::Protect);
        assert!(policy.settings.is_empty() && !policy.allowed_to_mutate);
        assert_eq!(policy.host_capabilities, ["*"]);
        assert_eq!(policy.context_aware_resources.len(), 1);
    }

    #[test]
    fn refuses_what_policy_server_refuses() {
        let error = read("a/b:\n  module: file:///tmp/p.wasm\n").unwrap_err();
        assert_eq!(
            error.to_string(),
            "policy name 'a/b' contains a '/' character"
        );
        let error = read("p:\n  module: file:///tmp/p.wasm\n  policyMode: enforce\n")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("data did not match any variant of untagged enum PolicyOrPolicyGroup"),
            "{error}"
        );
        let error = read("g:\n  expression: 'true'\n  message: m\n  policies: {}\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("is a policy group"), "{error}");
        let missing = Path::new("/nonexistent/policies.yml");
        assert_eq!(
            read_policies(missing).unwrap_err().to_string(),
            "error while loading policies from \"/nonexistent/policies.yml\": No such file or directory (os error 2)"
        );
    }

    #[test]
    fn modules_are_local_files() {
        assert_eq!(
            module_path("file:///tmp/p.wasm").unwrap(),
            Path::new("/tmp/p.wasm")
        );
        assert!(module_path("registry://ghcr.io/x/y:v1")
            .unwrap_err()
            .to_string()
            .contains("local modules only"));
        assert!(module_path("/tmp/p.wasm").is_err());
    }
}
