//! Drift checks for the files that describe the policy to Kubewarden, Artifact Hub and users:
//! metadata.yml, policy.yaml, artifacthub-pkg.yml, artifacthub-repo.yml, questions-ui.yml, and
//! the metadata `make annotated-policy.wasm` embeds in the module. Every failure names the file
//! to fix. Cargo.toml is the source of the version, name, license and repository; the policy's
//! own settings code is the source of the defaults.

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;

use capi_bootstrap_rollout_policy::capi::kinds::{BOOTSTRAP_GROUP, CAPI_GROUP};
use capi_bootstrap_rollout_policy::capi::providers::{
    DEFAULT_BOOTSTRAP_CONFIG_KINDS, DEFAULT_CONTROLLER_USERS,
};
use capi_bootstrap_rollout_policy::host_lookups::HOST_CAPABILITIES;
use capi_bootstrap_rollout_policy::lookups::{CONFIG_FIELDS, MACHINE_POOL_FIELDS};
use capi_bootstrap_rollout_policy::settings::Settings;
use rstest::rstest;
use serde_json::{json, Value};

const VERSION: &str = env!("CARGO_PKG_VERSION");
const NAME: &str = env!("CARGO_PKG_NAME");
const LICENSE: &str = env!("CARGO_PKG_LICENSE");
const REPOSITORY: &str = env!("CARGO_PKG_REPOSITORY");

const METADATA_SECTION: &str = "io.kubewarden.metadata";
const USAGE_ANNOTATION: &str = "io.kubewarden.policy.usage";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    let path = root().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn yaml(rel: &str) -> Value {
    yaml_serde::from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel} is not valid YAML: {e}"))
}

fn text<'a>(value: &'a Value, what: &str) -> &'a str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("{what} must be a string, got {value}"))
}

fn list<'a>(value: &'a Value, what: &str) -> &'a Vec<Value> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("{what} must be a list, got {value}"))
}

fn annotation<'a>(metadata: &'a Value, key: &str) -> &'a str {
    text(
        &metadata["annotations"][key],
        &format!("metadata.yml annotations.{key}"),
    )
}

/// The settings defaults as README.md documents them, spelled out.
fn documented_defaults() -> Value {
    json!({
        "inPlaceEdits": "reject",
        "templateEdits": "reject",
        "contractViolations": "warn",
        "deleteOwnedConfigs": "warn",
        "exemptUsers": [],
        "exemptGroups": [],
        // From the provider records (src/capi/providers.rs), where every provider's facts live.
        "controllerUsers": DEFAULT_CONTROLLER_USERS,
        "bootstrapConfigKinds": DEFAULT_BOOTSTRAP_CONFIG_KINDS
            .map(|kind| json!({"apiGroup": BOOTSTRAP_GROUP, "kind": kind})),
        "ignoredPaths": {},
        "fillOncePaths": {},
        "contextAware": false,
        "capiVersion": "v1beta2",
    })
}

/// The values each enum setting takes.
fn enum_values(key: &str) -> Option<BTreeSet<&'static str>> {
    match key {
        "inPlaceEdits" | "templateEdits" => Some(["reject", "warn", "allow"].into()),
        "contractViolations" => Some(["warn", "reject", "ignore"].into()),
        "deleteOwnedConfigs" => Some(["warn", "reject", "allow"].into()),
        "capiVersion" => Some(["v1beta2", "v1beta1"].into()),
        _ => None,
    }
}

fn oci_image(metadata: &Value) -> String {
    format!(
        "{}:v{VERSION}",
        annotation(metadata, "io.kubewarden.policy.ociUrl")
    )
}

/// `kubewarden/rules` and `kubewarden/contextAwareResources` are YAML documents in strings.
fn yaml_string(value: &Value, what: &str) -> Value {
    yaml_serde::from_str(text(value, what))
        .unwrap_or_else(|e| panic!("{what} is not a YAML document: {e}"))
}

fn find_rule<'a>(rules: &'a [Value], resource: &str) -> &'a Value {
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
fn crd_versions(kind: &str) -> Vec<Value> {
    let versions: Vec<Value> = common::crd_schemas()
        .into_iter()
        .map(|(_, crd)| crd)
        .filter(|crd| crd["kind"] == json!(kind))
        .collect();
    assert!(!versions.is_empty(), "tests/crds/ has no schema of {kind}");
    versions
}

/// What every version of a kind says alike: its group or plural.
fn crd_field<'a>(versions: &'a [Value], field: &str) -> &'a str {
    let value = text(&versions[0][field], field);
    assert!(
        versions.iter().all(|v| v[field] == json!(value)),
        "tests/crds/: the versions of {} disagree on {field}",
        versions[0]["kind"]
    );
    value
}

fn served_versions(versions: &[Value]) -> BTreeSet<String> {
    versions
        .iter()
        .map(|v| text(&v["version"], "CRD version name").to_string())
        .collect()
}

#[test]
fn version_is_the_cargo_version_everywhere() {
    let metadata = yaml("metadata.yml");
    assert_eq!(
        annotation(&metadata, "io.kubewarden.policy.version"),
        VERSION,
        "metadata.yml: io.kubewarden.policy.version must be Cargo.toml's version"
    );
    let image = oci_image(&metadata);

    let policy = yaml("policy.yaml");
    assert_eq!(
        text(&policy["spec"]["module"], "policy.yaml spec.module"),
        format!("registry://{image}"),
        "policy.yaml: spec.module must be the ociUrl tagged v<Cargo version>"
    );

    let pkg = yaml("artifacthub-pkg.yml");
    assert_eq!(
        pkg["version"],
        json!(VERSION),
        "artifacthub-pkg.yml: version"
    );
    assert_eq!(
        pkg["containersImages"],
        json!([{"name": "policy", "image": image}]),
        "artifacthub-pkg.yml: containersImages"
    );
}

/// The version in the `[package]` table of a Cargo.toml.
fn package_version(rel: &str) -> String {
    read(rel)
        .lines()
        .skip_while(|line| line.trim() != "[package]")
        .skip(1)
        .take_while(|line| !line.starts_with('['))
        .find_map(|line| line.strip_prefix("version = \""))
        .and_then(|rest| rest.strip_suffix('"'))
        .unwrap_or_else(|| panic!("{rel}: no [package] version"))
        .to_string()
}

/// The version Cargo.lock records for a workspace package.
fn locked_version(name: &str) -> String {
    let lock = read("Cargo.lock");
    let entry = format!("name = \"{name}\"\nversion = \"");
    let start = lock
        .find(&entry)
        .unwrap_or_else(|| panic!("Cargo.lock: no entry for {name}"))
        + entry.len();
    lock[start..].split('"').next().unwrap().to_string()
}

const RELEASE: &str = "`make release VERSION=x.y.z` sets every version at once";

#[test]
fn capi_rollout_check_is_released_with_the_policy() {
    // The release attaches capi-rollout-check's binaries, which must report the release's
    // version (the preflight action checks it), to the policy's release.
    assert_eq!(
        package_version("capi-rollout-check/Cargo.toml"),
        VERSION,
        "capi-rollout-check/Cargo.toml: capi-rollout-check's version must be the policy's; {RELEASE}"
    );
    for name in [NAME, "capi-rollout-check"] {
        assert_eq!(
            locked_version(name),
            VERSION,
            "Cargo.lock: {name}'s version; {RELEASE}"
        );
    }
}

/// Each version named after `prefix` in `text`.
fn versions_after<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    text.match_indices(prefix)
        .map(|(at, _)| {
            let rest = &text[at + prefix.len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '-'))
                .unwrap_or(rest.len());
            rest[..end].trim_end_matches('.')
        })
        .collect()
}

/// README.md and the pages under docs/, each with its text.
fn user_docs() -> Vec<(String, String)> {
    let mut files = vec!["README.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ exists")
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
        .into_iter()
        .map(|file| {
            let text = read(&file);
            (file, text)
        })
        .collect()
}

#[test]
fn readme_and_docs_name_this_version_wherever_they_name_one() {
    let docs = user_docs();
    // The published images (`...:v<version>`) and the GitHub Action (`.../capi-rollout-check@v<version>`).
    for prefix in [format!("{NAME}:v"), format!("{NAME}/capi-rollout-check@v")] {
        let mut named = 0;
        for (file, text) in &docs {
            for version in versions_after(text, &prefix) {
                named += 1;
                assert_eq!(
                    version, VERSION,
                    "{file}: {prefix}{version} is not this version; {RELEASE}"
                );
            }
        }
        assert!(
            named > 0,
            "neither README.md nor docs/ names {prefix}<version>"
        );
    }
}

#[test]
fn changelog_is_unreleased_notes_then_releases_newest_first_the_newest_this_version() {
    let changelog = read("CHANGELOG.md");
    let headings: Vec<&str> = changelog
        .lines()
        .filter(|line| line.starts_with("## "))
        .collect();
    assert_eq!(
        headings.first().copied(),
        Some("## [Unreleased]"),
        "CHANGELOG.md: the first section is \"## [Unreleased]\", where changes are noted as they land"
    );
    let released: Vec<(&str, &str)> = headings[1..]
        .iter()
        .map(|heading| {
            heading
                .strip_prefix("## [")
                .and_then(|rest| rest.split_once("] - "))
                .filter(|(version, date)| {
                    version.split('-').next().unwrap().split('.').count() == 3
                        && date.len() == 10
                        && date.as_bytes()[4] == b'-'
                        && date.as_bytes()[7] == b'-'
                })
                .unwrap_or_else(|| {
                    panic!("CHANGELOG.md: {heading:?} is not \"## [x.y.z] - YYYY-MM-DD\"")
                })
        })
        .collect();
    if let Some((newest, _)) = released.first() {
        assert_eq!(
            *newest, VERSION,
            "CHANGELOG.md: the newest entry is not Cargo.toml's version; {RELEASE}"
        );
    }
    let mut dates: Vec<&str> = released.iter().map(|(_, date)| *date).collect();
    let newest_first = dates.clone();
    dates.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(newest_first, dates, "CHANGELOG.md: entries newest first");
}

#[test]
fn names_and_addresses_follow_cargo_toml() {
    let metadata = yaml("metadata.yml");
    assert_eq!(annotation(&metadata, "io.kubewarden.policy.title"), NAME);
    assert_eq!(
        annotation(&metadata, "io.kubewarden.policy.license"),
        LICENSE
    );
    assert_eq!(
        annotation(&metadata, "io.kubewarden.policy.url"),
        REPOSITORY
    );
    assert_eq!(
        annotation(&metadata, "io.kubewarden.policy.source"),
        REPOSITORY
    );
    let owner = REPOSITORY
        .strip_prefix("https://github.com/")
        .and_then(|rest| rest.split('/').next())
        .expect("Cargo.toml: repository is a https://github.com/<owner>/<repo> URL");
    assert_eq!(
        annotation(&metadata, "io.kubewarden.policy.ociUrl"),
        format!("ghcr.io/{owner}/policies/{NAME}"),
        "metadata.yml: ociUrl must be the GitHub owner's GHCR policies/ path"
    );
    for key in [
        "io.kubewarden.policy.description",
        "io.kubewarden.policy.author",
        "io.kubewarden.policy.severity",
        "io.kubewarden.policy.category",
        "io.artifacthub.displayName",
        "io.artifacthub.resources",
        "io.artifacthub.keywords",
    ] {
        assert!(
            !annotation(&metadata, key).trim().is_empty(),
            "metadata.yml: {key} is empty"
        );
    }
    assert!(
        ["low", "medium", "high"].contains(&annotation(&metadata, "io.kubewarden.policy.severity")),
        "metadata.yml: severity must be low, medium or high"
    );
    assert!(
        metadata["annotations"].get(USAGE_ANNOTATION).is_none(),
        "metadata.yml: {USAGE_ANNOTATION} is set by annotate from README.md; do not set it here"
    );
    assert!(
        metadata["annotations"].get("io.kubewarden.kwctl").is_none(),
        "metadata.yml: io.kubewarden.kwctl is set by annotate (to kwctl's version, or \
         policy-host's name and version), which replaces any value given here"
    );
}

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
    let configs = find_rule(rules, &resources[0]);
    assert_eq!(configs["apiGroups"], json!([BOOTSTRAP_GROUP]));
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
    assert_eq!(status["apiGroups"], json!([BOOTSTRAP_GROUP]));
    assert_eq!(status["apiVersions"], json!(["*"]));
    assert_eq!(status["resources"], json!(statuses));
    assert_eq!(status["operations"], json!(["UPDATE"]));
}

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

#[test]
fn questions_ui_covers_every_setting_with_its_default() {
    let defaults = documented_defaults();
    let defaults = defaults.as_object().expect("defaults are a map");
    let questions_file = yaml("questions-ui.yml");
    let questions = list(&questions_file["questions"], "questions-ui.yml questions");

    let mut seen = BTreeSet::new();
    for question in questions {
        let variable = text(&question["variable"], "questions-ui.yml variable");
        assert!(
            seen.insert(variable),
            "questions-ui.yml: {variable} asked twice"
        );
        let default = defaults
            .get(variable)
            .unwrap_or_else(|| panic!("questions-ui.yml: {variable} is not a setting"));
        assert_eq!(
            &question["default"], default,
            "questions-ui.yml: default of {variable}"
        );
        for field in ["label", "description", "group"] {
            assert!(
                question[field]
                    .as_str()
                    .is_some_and(|s| !s.trim().is_empty()),
                "questions-ui.yml: {variable} has no {field}"
            );
        }
        let kind = text(&question["type"], "questions-ui.yml type");
        match kind {
            "enum" => {
                let options: BTreeSet<&str> = list(&question["options"], "options")
                    .iter()
                    .map(|o| text(o, "option"))
                    .collect();
                assert_eq!(
                    Some(options),
                    enum_values(variable),
                    "questions-ui.yml: options of {variable}"
                );
            }
            "array[" => assert!(
                default
                    .as_array()
                    .is_some_and(|a| a.iter().all(Value::is_string)),
                "questions-ui.yml: {variable} is a list of strings"
            ),
            "sequence[" => {
                let fields: BTreeSet<&str> =
                    list(&question["sequence_questions"], "sequence_questions")
                        .iter()
                        .map(|q| text(&q["variable"], "sequence_questions variable"))
                        .collect();
                for item in list(default, variable) {
                    let keys: BTreeSet<&str> = item
                        .as_object()
                        .expect("sequence items are maps")
                        .keys()
                        .map(String::as_str)
                        .collect();
                    assert_eq!(
                        keys, fields,
                        "questions-ui.yml: sequence_questions of {variable}"
                    );
                }
            }
            "map[" => {
                let subquestions = list(&question["subquestions"], "subquestions");
                let expected: Vec<String> = DEFAULT_BOOTSTRAP_CONFIG_KINDS
                    .iter()
                    .map(|kind| format!("{variable}.{kind}"))
                    .collect();
                let actual: Vec<&str> = subquestions
                    .iter()
                    .map(|q| text(&q["variable"], "subquestion variable"))
                    .collect();
                assert_eq!(
                    actual, expected,
                    "questions-ui.yml: one list per default kind"
                );
                for sub in subquestions {
                    assert_eq!(sub["type"], json!("array["));
                    assert_eq!(sub["default"], json!([]));
                }
            }
            "boolean" => assert!(
                default.is_boolean(),
                "questions-ui.yml: {variable} is a boolean"
            ),
            other => {
                panic!("questions-ui.yml: {variable} has type {other}, not one this file uses")
            }
        }
    }
    let settings: BTreeSet<&str> = defaults.keys().map(String::as_str).collect();
    assert_eq!(
        seen, settings,
        "questions-ui.yml must ask for every setting"
    );

    // What the UI writes before dropping empty values: the per-kind lists all present.
    let mut written = defaults.clone();
    for key in ["ignoredPaths", "fillOncePaths"] {
        written[key] = DEFAULT_BOOTSTRAP_CONFIG_KINDS
            .iter()
            .map(|kind| (kind.to_string(), json!([])))
            .collect();
    }
    let parsed = Settings::from_value(&Value::Object(written))
        .unwrap_or_else(|e| panic!("the policy refuses the questions' defaults: {e}"));
    assert!(
        parsed.ignored_paths.values().all(Vec::is_empty)
            && parsed.fill_once_paths.values().all(Vec::is_empty),
        "no extra paths by default"
    );
    assert_eq!(
        Settings {
            ignored_paths: Default::default(),
            fill_once_paths: Default::default(),
            ..parsed
        },
        Settings::default(),
        "the questions' defaults, as the UI writes them, must be the policy's defaults"
    );
}

/// The `Name <email>` entries of an author annotation, in order.
fn maintainers(author: &str) -> Value {
    author
        .split(", ")
        .map(|entry| {
            let (name, email) = entry
                .trim_end_matches('>')
                .split_once(" <")
                .unwrap_or_else(|| panic!("metadata.yml: author {entry:?} is not `Name <email>`"));
            assert!(email.contains('@'), "metadata.yml: author email {email:?}");
            json!({"name": name, "email": email})
        })
        .collect()
}

fn is_rfc3339(timestamp: &str) -> bool {
    let b = timestamp.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        b.get(range)
            .is_some_and(|s| s.iter().all(u8::is_ascii_digit))
    };
    let fixed = b.len() >= 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19);
    if !fixed {
        return false;
    }
    let mut rest = &timestamp[19..];
    if let Some(fraction) = rest.strip_prefix('.') {
        let n = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        rest = &fraction[n..];
    }
    rest == "Z"
        || (rest.len() == 6
            && (rest.starts_with('+') || rest.starts_with('-'))
            && rest.as_bytes()[3] == b':'
            && rest[1..3]
                .bytes()
                .chain(rest[4..].bytes())
                .all(|c| c.is_ascii_digit()))
}

#[test]
fn artifacthub_pkg_is_what_kwctl_derives_from_metadata() {
    let metadata = yaml("metadata.yml");
    let pkg = yaml("artifacthub-pkg.yml");
    let image = oci_image(&metadata);
    let source = annotation(&metadata, "io.kubewarden.policy.source");

    let expect = |field: &str, value: Value| {
        assert_eq!(pkg[field], value, "artifacthub-pkg.yml: {field}");
    };
    expect(
        "name",
        json!(annotation(&metadata, "io.kubewarden.policy.title")),
    );
    expect(
        "displayName",
        json!(annotation(&metadata, "io.artifacthub.displayName")),
    );
    expect(
        "description",
        json!(annotation(&metadata, "io.kubewarden.policy.description")),
    );
    expect(
        "license",
        json!(annotation(&metadata, "io.kubewarden.policy.license")),
    );
    expect(
        "homeURL",
        json!(annotation(&metadata, "io.kubewarden.policy.url")),
    );
    expect(
        "keywords",
        annotation(&metadata, "io.artifacthub.keywords")
            .split(',')
            .map(|k| json!(k.trim()))
            .collect(),
    );
    assert!(source.starts_with("https://github.com/"));
    expect(
        "links",
        json!([
            {"name": "policy", "url": format!("{source}/releases/download/v{VERSION}/policy.wasm")},
            {"name": "source", "url": source},
        ]),
    );
    expect(
        "maintainers",
        maintainers(annotation(&metadata, "io.kubewarden.policy.author")),
    );
    expect("provider", json!({"name": "kubewarden"}));
    expect(
        "recommendations",
        json!([{"url": "https://artifacthub.io/packages/helm/kubewarden/kubewarden-controller"}]),
    );
    let install = text(&pkg["install"], "artifacthub-pkg.yml install");
    assert!(
        install.contains(&format!("kwctl pull {image}\n"))
            && install.contains(&format!("registry://{image}\n")),
        "artifacthub-pkg.yml: install must pull {image}"
    );
    let created = text(&pkg["createdAt"], "artifacthub-pkg.yml createdAt");
    assert!(
        is_rfc3339(created),
        "artifacthub-pkg.yml: createdAt {created:?} is not RFC 3339"
    );

    let annotations = &pkg["annotations"];
    assert_eq!(
        annotations["kubewarden/resources"],
        json!(annotation(&metadata, "io.artifacthub.resources")),
        "artifacthub-pkg.yml: kubewarden/resources"
    );
    assert_eq!(
        text(
            &annotations["kubewarden/questions-ui"],
            "kubewarden/questions-ui"
        ),
        read("questions-ui.yml"),
        "artifacthub-pkg.yml: kubewarden/questions-ui must be questions-ui.yml verbatim"
    );

    let fields: BTreeSet<&str> = pkg
        .as_object()
        .expect("artifacthub-pkg.yml is a map")
        .keys()
        .map(String::as_str)
        .collect();
    let known: BTreeSet<&str> = [
        "version",
        "name",
        "displayName",
        "createdAt",
        "description",
        "license",
        "homeURL",
        "containersImages",
        "keywords",
        "links",
        "install",
        "maintainers",
        "provider",
        "recommendations",
        "annotations",
    ]
    .into();
    assert_eq!(fields, known, "artifacthub-pkg.yml: fields");

    let repo = yaml("artifacthub-repo.yml");
    assert_eq!(
        repo["owners"], pkg["maintainers"],
        "artifacthub-repo.yml: owners must be artifacthub-pkg.yml's maintainers"
    );
}

fn leb128_u32(bytes: &[u8], pos: &mut usize) -> Result<u32, String> {
    let mut value = 0u32;
    for i in 0..5 {
        let byte = *bytes.get(*pos).ok_or("truncated LEB128 number")?;
        *pos += 1;
        if i == 4 && byte > 0x0f {
            return Err("LEB128 number does not fit in 32 bits".into());
        }
        value |= u32::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("LEB128 number longer than 5 bytes".into())
}

/// The custom sections of a wasm module, `(name, payload)` in order. The binary format's
/// framing (magic, version, then `id, size, payload` per section) is all this needs, so the
/// test carries no wasm parser dependency.
fn custom_sections(module: &[u8]) -> Result<Vec<(String, &[u8])>, String> {
    let body = module
        .strip_prefix(b"\0asm\x01\0\0\0")
        .ok_or("no wasm magic number and version 1 header")?;
    let mut sections = Vec::new();
    let mut pos = 0;
    while pos < body.len() {
        let id = body[pos];
        pos += 1;
        let size = leb128_u32(body, &mut pos)? as usize;
        let end = pos
            .checked_add(size)
            .filter(|&end| end <= body.len())
            .ok_or_else(|| format!("section {id} runs past the end of the module"))?;
        if id == 0 {
            let payload = &body[..end];
            let mut at = pos;
            let name_len = leb128_u32(payload, &mut at)? as usize;
            let name_end = at
                .checked_add(name_len)
                .filter(|&e| e <= end)
                .ok_or("custom section name runs past its section")?;
            let name = std::str::from_utf8(&payload[at..name_end])
                .map_err(|e| format!("custom section name is not UTF-8: {e}"))?;
            sections.push((name.to_string(), &payload[name_end..]));
        }
        pos = end;
    }
    Ok(sections)
}

fn section(id: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![id];
    let mut size = payload.len();
    loop {
        let byte = (size & 0x7f) as u8;
        size >>= 7;
        out.push(if size == 0 { byte } else { byte | 0x80 });
        if size == 0 {
            break;
        }
    }
    out.extend_from_slice(payload);
    out
}

#[test]
fn custom_section_reader_reads_what_it_should() {
    let mut custom = vec![22u8];
    custom.extend_from_slice(METADATA_SECTION.as_bytes());
    custom.extend_from_slice(&[b'x'; 200]); // 200 bytes: a two-byte section size
    let mut module = b"\0asm\x01\0\0\0".to_vec();
    module.extend(section(1, &[1, 0x60, 0, 0])); // a type section: skipped
    module.extend(section(0, &custom));
    module.extend(section(0, b"\x04name"));
    let sections = custom_sections(&module).expect("valid module");
    assert_eq!(sections.len(), 2);
    assert_eq!(sections[0].0, METADATA_SECTION);
    assert_eq!(sections[0].1, &[b'x'; 200][..]);
    assert_eq!(sections[1], ("name".to_string(), &b""[..]));

    assert!(
        custom_sections(b"\0asm\x02\0\0\0").is_err(),
        "wrong version"
    );
    assert!(
        custom_sections(&module[..module.len() - 1]).is_err(),
        "truncated"
    );
}

#[rstest]
#[case::one_byte(&[0x05], Ok(5))]
#[case::two_bytes(&[0xc8, 0x01], Ok(200))]
#[case::max(&[0xff, 0xff, 0xff, 0xff, 0x0f], Ok(u32::MAX))]
#[case::too_big(&[0xff, 0xff, 0xff, 0xff, 0x1f], Err(()))]
#[case::truncated(&[0x80], Err(()))]
fn leb128_decoding(#[case] bytes: &[u8], #[case] expected: Result<u32, ()>) {
    let mut pos = 0;
    assert_eq!(leb128_u32(bytes, &mut pos).map_err(|_| ()), expected);
}

fn annotated_module_path() -> PathBuf {
    std::env::var_os("ANNOTATED_POLICY")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("annotated-policy.wasm"))
}

/// Keys whose values differ between two JSON maps, one level deep into `annotations`.
fn differing_keys(actual: &Value, expected: &Value) -> Vec<String> {
    let empty = serde_json::Map::new();
    let keys = |v: &Value| -> BTreeSet<String> {
        v.as_object().unwrap_or(&empty).keys().cloned().collect()
    };
    let mut out = Vec::new();
    for key in keys(actual).union(&keys(expected)) {
        if actual.get(key) == expected.get(key) {
            continue;
        }
        if key == "annotations" {
            for inner in differing_keys(&actual[key], &expected[key]) {
                out.push(format!("annotations.{inner}"));
            }
        } else {
            out.push(key.clone());
        }
    }
    out
}

#[test]
fn annotated_module_embeds_metadata_yml_and_readme() {
    let path = annotated_module_path();
    let module = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read the annotated module {}: {e}\n\
             Run `make annotated-policy.wasm` first (`make test` builds it before the tests), \
             or set ANNOTATED_POLICY to an annotated module.",
            path.display()
        )
    });
    let sections = custom_sections(&module)
        .unwrap_or_else(|e| panic!("{} is not a wasm module: {e}", path.display()));
    let found: Vec<&[u8]> = sections
        .iter()
        .filter(|(name, _)| name == METADATA_SECTION)
        .map(|(_, payload)| *payload)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{} must carry exactly one {METADATA_SECTION} section (is it annotated?)",
        path.display()
    );
    let mut actual: Value = serde_json::from_slice(found[0])
        .unwrap_or_else(|e| panic!("{METADATA_SECTION} is not JSON: {e}"));

    let mut expected = yaml("metadata.yml");
    expected["protocolVersion"] = json!("v1");
    expected["annotations"][USAGE_ANNOTATION] = json!(read("README.md"));

    // What annotate adds beyond that: io.kubewarden.kwctl, which kwctl sets to its version and
    // policy-host to its name and version, and the policy type both default to.
    let stamp = actual["annotations"]
        .as_object_mut()
        .and_then(|annotations| annotations.remove("io.kubewarden.kwctl"))
        .unwrap_or_else(|| {
            panic!(
                "{}: no io.kubewarden.kwctl annotation: it was not annotated by kwctl or by \
                 this policy-host; rebuild it with `make annotated-policy.wasm`",
                path.display()
            )
        });
    let stamp = stamp.as_str().expect("io.kubewarden.kwctl is a string");
    let version = stamp.strip_prefix("policy-host ").unwrap_or(stamp);
    let release_part = version.split(['-', '+']).next().unwrap_or_default();
    assert!(
        release_part.split('.').count() == 3
            && release_part
                .split('.')
                .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())),
        "io.kubewarden.kwctl {stamp:?}: neither a kwctl version nor `policy-host <version>`"
    );
    if expected.get("policyType").is_none() {
        if let Some(policy_type) = actual.as_object_mut().and_then(|o| o.remove("policyType")) {
            assert_eq!(
                policy_type,
                json!("kubernetes"),
                "{METADATA_SECTION}: policyType"
            );
        }
    }

    let differences = differing_keys(&actual, &expected);
    assert!(
        differences.is_empty(),
        "{} embeds metadata that differs from metadata.yml + protocolVersion v1 + README.md \
         as {USAGE_ANNOTATION} in: {}\nIf metadata.yml or README.md changed, rebuild it with \
         `make annotated-policy.wasm`.",
        path.display(),
        differences.join(", ")
    );
    assert_eq!(actual, expected);
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
