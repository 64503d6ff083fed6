//! Policy metadata as policy-evaluator models it (`policy_metadata.rs`): the same fields, the
//! same defaults, the same JSON (field order included) in the `io.kubewarden.metadata` custom
//! section, and the same validation rules.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use anyhow::{anyhow, Result};
use serde::{Deserialize, Serialize};

pub const METADATA_SECTION: &str = "io.kubewarden.metadata";
pub const USAGE_ANNOTATION: &str = "io.kubewarden.policy.usage";
/// The annotation kwctl's annotate sets on every module, to its own version (policy-evaluator
/// `KUBEWARDEN_ANNOTATION_KWCTL_VERSION`), replacing any value metadata.yml gives it.
pub const KWCTL_ANNOTATION: &str = "io.kubewarden.kwctl";
/// What policy-host's annotate writes there: its own name and version, not a kwctl version it
/// is not. Nothing in Kubewarden reads the value back; `kwctl inspect` lists it among the
/// annotations, and a push copies it to the OCI manifest.
pub const ANNOTATED_BY: &str = concat!(env!("CARGO_PKG_NAME"), " ", env!("CARGO_PKG_VERSION"));
/// The Kubewarden release whose kwctl policy-host follows (its `annotate` host-capability
/// check, its `run`), and so the version `run` compares a module's `minimumKubewardenVersion`
/// with, as kwctl compares it with its own.
pub const KUBEWARDEN_VERSION: semver::Version = semver::Version::new(1, 35, 0);

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProtocolVersion {
    #[serde(rename = "Unknown")]
    Unknown,
    #[serde(rename = "v1")]
    #[default]
    V1,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExecutionMode {
    #[serde(rename = "kubewarden-wapc")]
    #[default]
    KubewardenWapc,
    #[serde(rename = "opa")]
    Opa,
    #[serde(rename = "gatekeeper")]
    OpaGatekeeper,
    #[serde(rename = "wasi")]
    Wasi,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PolicyType {
    #[serde(rename = "kubernetes")]
    #[default]
    Kubernetes,
    #[serde(rename = "raw")]
    Raw,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Operation {
    #[serde(rename = "CREATE")]
    Create,
    #[serde(rename = "UPDATE")]
    Update,
    #[serde(rename = "DELETE")]
    Delete,
    #[serde(rename = "CONNECT")]
    Connect,
    #[serde(rename = "*")]
    All,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    pub api_groups: Vec<String>,
    pub api_versions: Vec<String>,
    pub resources: Vec<String>,
    pub operations: Vec<Operation>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextAwareResource {
    pub api_version: String,
    pub kind: String,
}

/// `contextAwareResources` as the host checks a request against them: (apiVersion, kind).
pub fn resource_keys(resources: &BTreeSet<ContextAwareResource>) -> BTreeSet<(String, String)> {
    let keys = resources
        .iter()
        .map(|r| (r.api_version.clone(), r.kind.clone()));
    keys.collect()
}

fn default_true() -> bool {
    true
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    pub protocol_version: Option<ProtocolVersion>,
    pub rules: Vec<Rule>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    pub mutating: bool,
    #[serde(default = "default_true")]
    pub background_audit: bool,
    #[serde(default)]
    pub execution_mode: ExecutionMode,
    #[serde(default)]
    pub policy_type: PolicyType,
    #[serde(default)]
    pub context_aware_resources: BTreeSet<ContextAwareResource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_capabilities: Option<BTreeSet<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minimum_kubewarden_version: Option<semver::Version>,
}

impl Metadata {
    /// The metadata stored in a module, `None` if it is not annotated.
    pub fn from_module(module: &[u8]) -> Result<Option<Metadata>> {
        let Some(data) = read_custom_section(module, METADATA_SECTION)? else {
            return Ok(None);
        };
        let metadata = serde_json::from_slice(&data).map_err(|e| {
            anyhow!("cannot deserialize custom section `{METADATA_SECTION}` of wasm module: {e}")
        })?;
        Ok(Some(metadata))
    }

    /// policy-evaluator's `Validate` derive, rule by rule. Every problem is listed, each
    /// named by its path in metadata.yml.
    pub fn validate(&self) -> std::result::Result<(), Vec<String>> {
        let mut problems = Vec::new();
        match self.protocol_version {
            None => problems.push("protocolVersion: must be set".to_string()),
            Some(ProtocolVersion::Unknown)
                if self.execution_mode == ExecutionMode::KubewardenWapc =>
            {
                problems.push("Must specify a valid protocol version".to_string())
            }
            Some(_) => {}
        }
        for (index, rule) in self.rules.iter().enumerate() {
            // A list must not be empty, nor hold `*` beside anything else.
            let list = |field: &str, len: usize, wildcard: bool| match len {
                0 => Some(format!(
                    "rules[{index}].{field}: must have at least one element"
                )),
                2.. if wildcard => Some(format!(
                    "rules[{index}].{field}: No other elements can be defined when '*' is used"
                )),
                _ => None,
            };
            let star = |values: &[String]| values.iter().any(|v| v == "*");
            let (groups, versions) = (&rule.api_groups, &rule.api_versions);
            problems.extend(list("apiGroups", groups.len(), star(groups)));
            problems.extend(list("apiVersions", versions.len(), star(versions)));
            let resources = list("resources", rule.resources.len(), false).or_else(|| {
                let problem = validate_resources(&rule.resources).err()?;
                Some(format!("rules[{index}].resources: {problem}"))
            });
            problems.extend(resources);
            let all = rule.operations.contains(&Operation::All);
            problems.extend(list("operations", rule.operations.len(), all));
        }
        for resource in &self.context_aware_resources {
            if resource.api_version.is_empty() || resource.kind.is_empty() {
                problems.push(format!(
                    "contextAwareResources: apiVersion and kind must not be empty (got apiVersion {:?}, kind {:?})",
                    resource.api_version, resource.kind
                ));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    /// The JSON stored in the custom section (policy-evaluator's serialization).
    pub fn to_json(&self) -> Result<Vec<u8>> {
        Ok(serde_json::to_vec(self)?)
    }
}

/// kwctl's `has_minimum_kubewarden_version` (`backend.rs`), which `kwctl run` and `bench`
/// apply to an annotated module: the host must be at least the minimum's major.minor (its
/// patch and pre-release ignored, "Kubewarden stack version ignore patch version number").
/// policy-server makes the same check when it loads a policy and, unless started with
/// `--continue-on-errors`, refuses to start. The version required when this host is older.
pub fn unmet_kubewarden_version(metadata: Option<&Metadata>) -> Option<semver::Version> {
    let minimum = metadata?.minimum_kubewarden_version.as_ref()?;
    let required = semver::Version::new(minimum.major, minimum.minor, 0);
    (KUBEWARDEN_VERSION < required).then_some(required)
}

/// Kubernetes' check of a rule's resources, as transposed by policy-evaluator.
fn validate_resources(data: &[String]) -> std::result::Result<(), String> {
    let mut resources_with_wildcard_subresources: HashSet<&str> = HashSet::new();
    let mut subresources_with_wildcard_resource: HashSet<&str> = HashSet::new();
    let mut has_double_wildcard = false;
    let mut has_single_wildcard = false;
    let mut has_resource_without_subresource = false;

    for resource in data {
        if resource.is_empty() {
            return Err("empty resource is not allowed".to_string());
        }
        match resource.as_str() {
            "*/*" => has_double_wildcard = true,
            "*" => has_single_wildcard = true,
            _ => {}
        }
        let Some((res, sub)) = resource.split_once('/') else {
            has_resource_without_subresource = resource != "*";
            continue;
        };
        if resources_with_wildcard_subresources.contains(res) {
            return Err(format!(
                "if '{resource}/*' is present, must not specify {res}"
            ));
        }
        if subresources_with_wildcard_resource.contains(sub) {
            return Err(format!(
                "if '*/{sub}' is present, must not specify {resource}"
            ));
        }
        if sub == "*" {
            resources_with_wildcard_subresources.insert(res);
        }
        if res == "*" {
            subresources_with_wildcard_resource.insert(sub);
        }
    }
    if data.len() > 1 && has_double_wildcard {
        return Err("if '*/*' is present, must not specify other resources".to_string());
    }
    if has_single_wildcard && has_resource_without_subresource {
        return Err(
            "if '*' is present, must not specify other resources without subresources".to_string(),
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Custom sections.

/// The data of the first custom section called `name`, as policy-evaluator reads it.
pub fn read_custom_section(module: &[u8], name: &str) -> Result<Option<Vec<u8>>> {
    for payload in wasmparser::Parser::new(0).parse_all(module) {
        let payload =
            payload.map_err(|e| anyhow!("cannot parse custom section of wasm module: {e}"))?;
        if let wasmparser::Payload::CustomSection(reader) = payload {
            if reader.name() == name {
                return Ok(Some(reader.data().to_vec()));
            }
        }
    }
    Ok(None)
}

/// The module with every custom section called `name` removed and one with `data` appended;
/// every other section is copied byte for byte.
pub fn set_custom_section(module: &[u8], name: &str, data: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(module.len() + name.len() + data.len() + 10);
    // Sections follow each other: each one's header starts where the one before it ends.
    let mut start = 0;
    for payload in wasmparser::Parser::new(0).parse_all(module) {
        let payload = payload.map_err(|e| anyhow!("cannot parse wasm module: {e}"))?;
        let end = match &payload {
            wasmparser::Payload::Version { range, .. } => range.end,
            wasmparser::Payload::CustomSection(section) if section.name() == name => {
                start = section.range().end;
                continue;
            }
            _ => match payload.as_section() {
                Some((_, range)) => range.end,
                None => continue,
            },
        };
        out.extend_from_slice(&module[start..end]);
        start = end;
    }
    let mut contents = Vec::with_capacity(name.len() + data.len() + 5);
    write_leb_u32(&mut contents, u32::try_from(name.len())?);
    contents.extend_from_slice(name.as_bytes());
    contents.extend_from_slice(data);
    out.push(0);
    write_leb_u32(&mut out, u32::try_from(contents.len())?);
    out.extend_from_slice(&contents);
    Ok(out)
}

fn write_leb_u32(out: &mut Vec<u8>, mut value: u32) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata(yaml: &str) -> Metadata {
        yaml_serde::from_str(yaml).unwrap()
    }

    const GOOD: &str = r#"
rules:
- apiGroups: ["cluster.x-k8s.io"]
  apiVersions: ["v1beta2"]
  resources: ["machinepools"]
  operations: ["CREATE", "UPDATE"]
mutating: false
contextAwareResources:
- apiVersion: v1
  kind: Secret
annotations:
  io.kubewarden.policy.title: t
"#;

    #[test]
    fn serializes_like_policy_evaluator() {
        let mut m = metadata(GOOD);
        m.protocol_version = Some(ProtocolVersion::V1);
        assert_eq!(m.validate(), Ok(()));
        assert_eq!(
            String::from_utf8(m.to_json().unwrap()).unwrap(),
            r#"{"protocolVersion":"v1","rules":[{"apiGroups":["cluster.x-k8s.io"],"apiVersions":["v1beta2"],"resources":["machinepools"],"operations":["CREATE","UPDATE"]}],"annotations":{"io.kubewarden.policy.title":"t"},"mutating":false,"backgroundAudit":true,"executionMode":"kubewarden-wapc","policyType":"kubernetes","contextAwareResources":[{"apiVersion":"v1","kind":"Secret"}]}"#
        );
    }

    #[test]
    fn rules_are_checked() {
        let mut m = metadata(GOOD);
        assert_eq!(
            m.validate(),
            Err(vec!["protocolVersion: must be set".to_string()])
        );
        m.protocol_version = Some(ProtocolVersion::Unknown);
        assert_eq!(
            m.validate(),
            Err(vec!["Must specify a valid protocol version".to_string()])
        );
        m.protocol_version = Some(ProtocolVersion::V1);
        m.rules[0].operations.clear();
        m.rules[0].api_groups = vec!["*".into(), "apps".into()];
        m.rules[0].resources = vec!["*".into(), "pods".into()];
        assert_eq!(
            m.validate(),
            Err(vec![
                "rules[0].apiGroups: No other elements can be defined when '*' is used".to_string(),
                "rules[0].resources: if '*' is present, must not specify other resources without subresources"
                    .to_string(),
                "rules[0].operations: must have at least one element".to_string(),
            ])
        );
        let unknown = yaml_serde::from_str::<Metadata>(&GOOD.replace("\"UPDATE\"", "\"PATCH\""));
        assert!(unknown
            .unwrap_err()
            .to_string()
            .contains("unknown variant `PATCH`"));
    }

    #[test]
    fn minimum_kubewarden_version_ignores_patch_and_pre_release() {
        let with = |minimum: Option<&str>| {
            let mut m = metadata(GOOD);
            m.minimum_kubewarden_version = minimum.map(|v| semver::Version::parse(v).unwrap());
            unmet_kubewarden_version(Some(&m)).map(|v| v.to_string())
        };
        assert_eq!(unmet_kubewarden_version(None), None);
        assert_eq!(with(None), None);
        assert_eq!(with(Some("1.33.0")), None);
        assert_eq!(with(Some(&KUBEWARDEN_VERSION.to_string())), None);
        // 1.35.7 and 1.35.1-rc1 ask for 1.35, which this host is.
        assert_eq!(with(Some("1.35.7")), None);
        assert_eq!(with(Some("1.35.1-rc1")), None);
        assert_eq!(with(Some("1.36.0-rc1")).as_deref(), Some("1.36.0"));
        assert_eq!(with(Some("2.0.3")).as_deref(), Some("2.0.0"));
    }

    #[test]
    fn resources_follow_kubernetes() {
        let ok =
            |r: &[&str]| validate_resources(&r.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert!(ok(&["pods", "pods/status"]).is_ok());
        assert!(ok(&["*/*"]).is_ok());
        assert!(ok(&["*", "pods/status"]).is_ok());
        assert!(ok(&["*/*", "pods"]).is_err());
        assert!(ok(&["pods/*", "pods/status"]).is_err());
        assert!(ok(&["*/status", "pods/status"]).is_err());
        assert!(ok(&[""]).is_err());
    }

    #[test]
    fn custom_section_is_replaced() {
        let module = wat::parse_str("(module (func (export \"f\")))").unwrap();
        assert_eq!(
            read_custom_section(&module, METADATA_SECTION).unwrap(),
            None
        );
        let once = set_custom_section(&module, METADATA_SECTION, b"{\"a\":1}").unwrap();
        let twice = set_custom_section(&once, METADATA_SECTION, b"{\"a\":2}").unwrap();
        assert_eq!(
            read_custom_section(&twice, METADATA_SECTION).unwrap(),
            Some(b"{\"a\":2}".to_vec())
        );
        assert_eq!(twice.len(), once.len());
        wasmparser::Validator::new().validate_all(&twice).unwrap();
        assert!(set_custom_section(b"nope", METADATA_SECTION, b"").is_err());
    }

    #[test]
    fn leb_round_trip() {
        for value in [0, 1, 127, 128, 300, 16_384, u32::MAX] {
            let mut bytes = Vec::new();
            write_leb_u32(&mut bytes, value);
            let mut reader = wasmparser::BinaryReader::new(&bytes, 0);
            assert_eq!(reader.read_var_u32().unwrap(), value);
            assert!(reader.eof());
        }
    }
}
