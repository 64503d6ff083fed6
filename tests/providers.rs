//! Every file that lists the bootstrap providers is held to their records
//! (src/capi/providers.rs): metadata.yml's rules, contextAwareResources and Artifact Hub
//! resources, policy.yaml, artifacthub-pkg.yml, questions-ui.yml, and the tables of
//! docs/compared-fields.md, docs/settings.md and the README. A failure names the record and
//! the file, so adding a provider (docs/development.md) shows what is left to write.

use std::fs;
use std::path::Path;

use capi_bootstrap_rollout_policy::capi::kinds::BOOTSTRAP_GROUP;
use capi_bootstrap_rollout_policy::capi::providers::{
    Provider, DEFAULT_CONTROLLER_USERS, PROVIDERS,
};
use serde_json::Value;

fn read(file: &str) -> String {
    fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file))
        .unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn yaml(text: &str, what: &str) -> Value {
    let value: yaml_serde::Value =
        yaml_serde::from_str(text).unwrap_or_else(|e| panic!("{what}: {e}"));
    serde_json::to_value(value).unwrap()
}

/// The version a record's kind is looked up in with the default `capiVersion`.
fn lookup_api_version(p: &Provider) -> String {
    format!(
        "{BOOTSTRAP_GROUP}/{}",
        p.lookup_version.unwrap_or("v1beta2")
    )
}

fn plural(kind: &str) -> String {
    format!("{}s", kind.to_lowercase())
}

/// The problems of one file with one record, as `record: file: what`.
struct Problems(Vec<String>);

impl Problems {
    fn check(&mut self, p: &Provider, file: &str, ok: bool, what: impl std::fmt::Display) {
        if !ok {
            self.0.push(format!(
                "the record of {} ({}): {file}: {what}",
                p.config_kind, p.clusterctl
            ));
        }
    }
}

/// `contextAwareResources` lists the kind in the version lookups use.
fn lists_context_aware(resources: &Value, p: &Provider) -> bool {
    resources.as_array().into_iter().flatten().any(|r| {
        r["kind"] == p.config_kind
            && r["apiVersion"].as_str() == Some(lookup_api_version(p).as_str())
    })
}

/// Some rule names the config's and the template's resources in the bootstrap group.
fn rules_cover(rules: &Value, p: &Provider) -> bool {
    let template = format!("{}templates", p.config_kind.to_lowercase());
    rules.as_array().into_iter().flatten().any(|rule| {
        let has = |key: &str, value: &str| {
            rule[key]
                .as_array()
                .into_iter()
                .flatten()
                .any(|v| v == value)
        };
        has("apiGroups", BOOTSTRAP_GROUP)
            && has("resources", &plural(p.config_kind))
            && has("resources", &template)
    })
}

fn listed_in(text: &str, kind: &str) -> bool {
    text.split(',').any(|k| k.trim() == kind)
}

/// The files that list the providers, read once.
struct Files {
    metadata: Value,
    policy: Value,
    artifacthub: Value,
    hub_resources: Value,
    questions: String,
    compared: String,
    settings_doc: String,
}

impl Files {
    fn read() -> Files {
        let artifacthub = yaml(&read("artifacthub-pkg.yml"), "artifacthub-pkg.yml");
        let hub_resources = yaml(
            artifacthub["annotations"]["kubewarden/contextAwareResources"]
                .as_str()
                .unwrap_or("[]"),
            "artifacthub-pkg.yml kubewarden/contextAwareResources",
        );
        Files {
            metadata: yaml(&read("metadata.yml"), "metadata.yml"),
            policy: yaml(&read("policy.yaml"), "policy.yaml"),
            artifacthub,
            hub_resources,
            questions: read("questions-ui.yml"),
            compared: read("docs/compared-fields.md"),
            settings_doc: read("docs/settings.md"),
        }
    }
}

/// metadata.yml, policy.yaml and artifacthub-pkg.yml list the provider's resources, kind and
/// controller.
fn check_manifests(problems: &mut Problems, f: &Files, p: &Provider) {
    problems.check(
        p,
        "metadata.yml",
        lists_context_aware(&f.metadata["contextAwareResources"], p),
        format!(
            "contextAwareResources lacks {} {}",
            lookup_api_version(p),
            p.config_kind
        ),
    );
    problems.check(
        p,
        "metadata.yml",
        rules_cover(&f.metadata["rules"], p),
        "no rule names its config and template resources",
    );
    problems.check(
        p,
        "metadata.yml",
        listed_in(
            f.metadata["annotations"]["io.artifacthub.resources"]
                .as_str()
                .unwrap_or(""),
            p.config_kind,
        ),
        "io.artifacthub.resources lacks the kind",
    );
    problems.check(
        p,
        "policy.yaml",
        lists_context_aware(&f.policy["spec"]["contextAwareResources"], p),
        format!(
            "contextAwareResources lacks {} {}",
            lookup_api_version(p),
            p.config_kind
        ),
    );
    problems.check(
        p,
        "policy.yaml",
        rules_cover(&f.policy["spec"]["rules"], p),
        "no rule names its config and template resources",
    );
    problems.check(
        p,
        "policy.yaml",
        f.policy["spec"]["settings"]["controllerUsers"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|u| u == p.controller),
        format!("controllerUsers lacks {}", p.controller),
    );
    problems.check(
        p,
        "artifacthub-pkg.yml",
        lists_context_aware(&f.hub_resources, p),
        format!(
            "kubewarden/contextAwareResources lacks {} {}",
            lookup_api_version(p),
            p.config_kind
        ),
    );
    problems.check(
        p,
        "artifacthub-pkg.yml",
        listed_in(
            f.artifacthub["annotations"]["kubewarden/resources"]
                .as_str()
                .unwrap_or(""),
            p.config_kind,
        ),
        "kubewarden/resources lacks the kind",
    );
}

/// questions-ui.yml and artifacthub-pkg.yml ask for its ignoredPaths and fillOncePaths.
fn check_questions(problems: &mut Problems, f: &Files, p: &Provider) {
    for file_text in [
        ("questions-ui.yml", f.questions.as_str()),
        ("artifacthub-pkg.yml", &read("artifacthub-pkg.yml")),
    ] {
        for setting in ["ignoredPaths", "fillOncePaths"] {
            problems.check(
                p,
                file_text.0,
                file_text
                    .1
                    .contains(&format!("variable: {setting}.{}\n", p.config_kind)),
                format!("no question {setting}.{}", p.config_kind),
            );
        }
    }
}

/// docs/compared-fields.md and docs/settings.md name it.
fn check_docs(problems: &mut Problems, f: &Files, p: &Provider) {
    // docs/compared-fields.md: the controller's row names the kind and the identity; the
    // not-compared table has a row for every kind with built-in fields.
    let row = f.compared.lines().find(|l| {
        l.starts_with('|')
            && l.contains(&format!("`{}`", p.controller))
            && l.contains(p.config_kind)
    });
    problems.check(
        p,
        "docs/compared-fields.md",
        row.is_some(),
        format!(
            "no row of \"What CAPI itself writes\" names {} and `{}`",
            p.config_kind, p.controller
        ),
    );
    if !p.machine_only.is_empty() || !p.fill_once.is_empty() {
        problems.check(
            p,
            "docs/compared-fields.md",
            f.compared
                .lines()
                .any(|l| l.starts_with(&format!("| {} ", p.config_kind))),
            "no row of \"Fields not f.compared\" for the kind, which has built-in fields",
        );
    }
    problems.check(
        p,
        "docs/settings.md",
        f.settings_doc.contains(&format!(" {},", p.config_kind))
            || f.settings_doc.contains(&format!(" {} in", p.config_kind)),
        "bootstrapConfigKinds' default does not name the kind",
    );
    if let Some(version) = p.lookup_version {
        let line = f
            .settings_doc
            .lines()
            .skip_while(|l| !l.starts_with("The defaults know the providers' versions"))
            .take(3)
            .collect::<Vec<_>>()
            .join(" ");
        problems.check(
            p,
            "docs/settings.md",
            line.contains(p.config_kind) && line.contains(version),
            format!(
                "\"The defaults know the providers' versions\" lacks {} {version}",
                p.config_kind
            ),
        );
    }
}

/// And the other way: nothing listed that no record stands for.
fn check_nothing_without_a_record(problems: &mut Problems, f: &Files) {
    let known = |kind: &str| PROVIDERS.iter().any(|p| p.config_kind == kind);
    for (file, resources) in [
        (
            "metadata.yml contextAwareResources",
            &f.metadata["contextAwareResources"],
        ),
        (
            "policy.yaml contextAwareResources",
            &f.policy["spec"]["contextAwareResources"],
        ),
        (
            "artifacthub-pkg.yml kubewarden/contextAwareResources",
            &f.hub_resources,
        ),
    ] {
        for r in resources.as_array().into_iter().flatten() {
            let (api_version, kind) = (
                r["apiVersion"].as_str().unwrap_or(""),
                r["kind"].as_str().unwrap_or(""),
            );
            if api_version.starts_with(BOOTSTRAP_GROUP) && !known(kind) {
                problems.0.push(format!(
                    "{file}: {api_version} {kind} has no provider record"
                ));
            }
        }
    }
    for user in f.policy["spec"]["settings"]["controllerUsers"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if !DEFAULT_CONTROLLER_USERS.iter().any(|u| user == u) {
            problems.0.push(format!(
                "policy.yaml controllerUsers: {user} is no record's controller"
            ));
        }
    }
    for (file, list) in [
        (
            "metadata.yml io.artifacthub.resources",
            f.metadata["annotations"]["io.artifacthub.resources"]
                .as_str()
                .unwrap_or(""),
        ),
        (
            "artifacthub-pkg.yml kubewarden/resources",
            f.artifacthub["annotations"]["kubewarden/resources"]
                .as_str()
                .unwrap_or(""),
        ),
    ] {
        for kind in list
            .split(',')
            .map(str::trim)
            .filter(|k| k.ends_with("Config"))
        {
            if !known(kind) {
                problems
                    .0
                    .push(format!("{file}: {kind} has no provider record"));
            }
        }
    }
}

/// The README and docs/settings.md count the providers and kinds the records hold.
fn check_counts(problems: &mut Problems, f: &Files) {
    let providers = DEFAULT_CONTROLLER_USERS.len() - 1;
    for (file, text) in [
        ("README.md", read("README.md")),
        ("docs/settings.md", f.settings_doc.clone()),
    ] {
        if !text.contains(&format!("the {providers} default providers' controllers")) {
            problems.0.push(format!(
                "{file}: does not say \"the {providers} default providers' controllers\""
            ));
        }
    }
    if !f
        .settings_doc
        .contains(&format!("the {} kinds", PROVIDERS.len()))
    {
        problems.0.push(format!(
            "docs/settings.md: does not say \"the {} kinds\"",
            PROVIDERS.len()
        ));
    }
}

#[test]
fn every_file_that_lists_providers_agrees_with_the_records() {
    let mut problems = Problems(Vec::new());
    let files = Files::read();
    for p in &PROVIDERS {
        check_manifests(&mut problems, &files, p);
        check_questions(&mut problems, &files, p);
        check_docs(&mut problems, &files, p);
    }
    check_nothing_without_a_record(&mut problems, &files);
    check_counts(&mut problems, &files);
    assert!(problems.0.is_empty(), "{}", problems.0.join("\n"));
}

/// Lookups read a config in its record's version: where tests/crds holds the provider's CRD
/// (its newest release), that version must be one it serves, or every lookup of the kind
/// fails on those clusters. RKE2 stores v1beta2 and still serves v1beta1, the version older
/// releases serve too.
#[test]
fn the_lookup_version_is_served_by_the_newest_crd_of_the_provider() {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/crds/providers");
    let files: Vec<String> = fs::read_dir(&folder)
        .unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut checked = Vec::new();
    let mut problems = Vec::new();
    for p in PROVIDERS.iter().filter(|p| p.lookup_version.is_some()) {
        let prefix = format!("{}.", p.config_kind);
        let served: Vec<&str> = files
            .iter()
            .filter_map(|f| f.strip_prefix(&prefix)?.strip_suffix(".json"))
            .collect();
        if served.is_empty() {
            continue;
        }
        let version = p.lookup_version.unwrap();
        checked.push(p.config_kind);
        if !served.contains(&version) {
            problems.push(format!(
                "{}: looked up in {version}, its CRD serves {served:?}",
                p.config_kind
            ));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
    assert!(
        checked.contains(&"RKE2Config") && checked.contains(&"EKSConfig"),
        "the providers' CRDs were not found in {}: checked only {checked:?}",
        folder.display()
    );
}
