//! Every file that lists the bootstrap providers is held to their records
//! (src/capi/providers.rs). The kind lists are generated (`make generate`, tests/generate/):
//! metadata.yml's rules, contextAwareResources and Artifact Hub resources, policy.yaml,
//! questions-ui.yml, artifacthub-pkg.yml, docs/settings.md's table of the default providers,
//! docs/compared-fields.md's two tables, docs/context-aware.md's chart values and the README's
//! lookup RBAC;
//! `the_generated_regions_are_what_the_records_make` fails naming `make generate` when one of
//! them differs, and `UPDATE_GENERATED=1` (what `make generate` sets) rewrites them. The checks
//! below then read what each file says and name the record and the file. The last test adds a
//! fake record and proves ARCHITECTURE.md's "To add a bootstrap provider" list.

#[path = "common/architecture_lists.rs"]
mod architecture_lists;
mod generate;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use capi_bootstrap_rollout_policy::capi::kinds::CAPI_GROUP;
use capi_bootstrap_rollout_policy::capi::providers::{
    Provider, DEFAULT_CONTROLLER_USERS, PROVIDERS,
};
use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(file: &str) -> String {
    fs::read_to_string(root().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn yaml(text: &str, what: &str) -> Value {
    let value: yaml_serde::Value =
        yaml_serde::from_str(text).unwrap_or_else(|e| panic!("{what}: {e}"));
    serde_json::to_value(value).unwrap()
}

/// The version a record's kind is looked up in with the default `capiVersion`.
fn lookup_api_version(p: &Provider) -> String {
    format!("{}/{}", p.group, generate::lookup_version(p))
}

use architecture_lists::{architecture_section, named_paths};
use generate::plural;

/// The problems found, each as the file it is in and `record: file: what`.
struct Problems(Vec<(String, String)>);

impl Problems {
    fn check(&mut self, p: &Provider, file: &str, ok: bool, what: impl std::fmt::Display) {
        if !ok {
            self.0.push((
                file.to_string(),
                format!(
                    "the record of {} ({}): {file}: {what}",
                    p.config_kind, p.clusterctl
                ),
            ));
        }
    }

    fn push(&mut self, file: &str, what: String) {
        self.0.push((file.to_string(), what));
    }
}

/// `contextAwareResources` lists the kind in the version lookups use.
fn lists_context_aware(resources: &Value, p: &Provider) -> bool {
    resources.as_array().into_iter().flatten().any(|r| {
        r["kind"] == p.config_kind
            && r["apiVersion"].as_str() == Some(lookup_api_version(p).as_str())
    })
}

/// Some rule names the config's and the template's resources in the record's group.
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
        has("apiGroups", p.group)
            && has("resources", &plural(p.config_kind))
            && has("resources", &template)
    })
}

fn listed_in(text: &str, kind: &str) -> bool {
    text.split(',').any(|k| k.trim() == kind)
}

/// The files that list the providers, each read once.
struct Listings {
    metadata: Value,
    policy: Value,
    artifacthub_text: String,
    artifacthub: Value,
    /// artifacthub-pkg.yml's `kubewarden/contextAwareResources`, a YAML string of its own.
    hub_resources: Value,
    questions: String,
    compared: String,
    settings_doc: String,
    readme: String,
    context_aware_doc: String,
}

impl Listings {
    fn read(read: &dyn Fn(&str) -> String) -> Listings {
        let metadata = yaml(&read("metadata.yml"), "metadata.yml");
        let policy = yaml(&read("policy.yaml"), "policy.yaml");
        let artifacthub_text = read("artifacthub-pkg.yml");
        let artifacthub = yaml(&artifacthub_text, "artifacthub-pkg.yml");
        let hub_resources = yaml(
            artifacthub["annotations"]["kubewarden/contextAwareResources"]
                .as_str()
                .unwrap_or("[]"),
            "artifacthub-pkg.yml kubewarden/contextAwareResources",
        );
        Listings {
            metadata,
            policy,
            artifacthub_text,
            artifacthub,
            hub_resources,
            questions: read("questions-ui.yml"),
            compared: read("docs/compared-fields.md"),
            settings_doc: read("docs/settings.md"),
            readme: read("README.md"),
            context_aware_doc: read("docs/context-aware.md"),
        }
    }
}

/// What every file that lists the providers says of `providers`, each file read by `text`.
fn problems(providers: &[Provider], text: &dyn Fn(&str) -> String) -> Problems {
    let files = Listings::read(text);
    let mut problems = Problems(Vec::new());
    let controllers = generate::controller_users(providers);
    for p in providers {
        check_metadata_and_policy(&mut problems, &files, p);
        check_artifacthub_and_questions(&mut problems, &files, p);
        check_docs(&mut problems, &files, p);
    }
    // And the other way: nothing listed that no record stands for.
    unrecorded_in_manifests(&mut problems, &files, providers, &controllers);
    unrecorded_in_settings_doc(&mut problems, &files, providers);
    problems
}

/// metadata.yml and policy.yaml list the record's kind, its resources and (policy.yaml) its
/// controller.
fn check_metadata_and_policy(problems: &mut Problems, files: &Listings, p: &Provider) {
    let (metadata, policy) = (&files.metadata, &files.policy);
    problems.check(
        p,
        "metadata.yml",
        lists_context_aware(&metadata["contextAwareResources"], p),
        format!(
            "contextAwareResources lacks {} {}",
            lookup_api_version(p),
            p.config_kind
        ),
    );
    problems.check(
        p,
        "metadata.yml",
        rules_cover(&metadata["rules"], p),
        "no rule names its config and template resources",
    );
    problems.check(
        p,
        "metadata.yml",
        listed_in(
            metadata["annotations"]["io.artifacthub.resources"]
                .as_str()
                .unwrap_or(""),
            p.config_kind,
        ),
        "io.artifacthub.resources lacks the kind",
    );
    problems.check(
        p,
        "policy.yaml",
        lists_context_aware(&policy["spec"]["contextAwareResources"], p),
        format!(
            "contextAwareResources lacks {} {}",
            lookup_api_version(p),
            p.config_kind
        ),
    );
    problems.check(
        p,
        "policy.yaml",
        rules_cover(&policy["spec"]["rules"], p),
        "no rule names its config and template resources",
    );
    problems.check(
        p,
        "policy.yaml",
        policy["spec"]["settings"]["controllerUsers"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|u| u == p.controller),
        format!("controllerUsers lacks {}", p.controller),
    );
}

/// artifacthub-pkg.yml lists the record's kind; it and questions-ui.yml ask for the kind's
/// ignoredPaths and fillOncePaths.
fn check_artifacthub_and_questions(problems: &mut Problems, files: &Listings, p: &Provider) {
    problems.check(
        p,
        "artifacthub-pkg.yml",
        lists_context_aware(&files.hub_resources, p),
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
            files.artifacthub["annotations"]["kubewarden/resources"]
                .as_str()
                .unwrap_or(""),
            p.config_kind,
        ),
        "kubewarden/resources lacks the kind",
    );
    for file_text in [
        ("questions-ui.yml", files.questions.as_str()),
        ("artifacthub-pkg.yml", files.artifacthub_text.as_str()),
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

/// docs/compared-fields.md, docs/settings.md, the README's lookup RBAC and
/// docs/context-aware.md's chart values name the record's kind.
fn check_docs(problems: &mut Problems, files: &Listings, p: &Provider) {
    let compared = &files.compared;
    // docs/compared-fields.md: the controller's row names the kind and the identity; the
    // not-compared table has a row for every kind with built-in fields.
    let row = compared.lines().find(|l| {
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
            compared
                .lines()
                .any(|l| l.starts_with(&format!("| {} ", p.config_kind))),
            "no row of \"Fields not compared\" for the kind, which has built-in fields",
        );
    }
    // docs/settings.md: the table of the default providers has the record's row, with its
    // lookup version and controller.
    let version = p.lookup_version.map_or_else(
        || format!("`capiVersion` (`{}`)", generate::lookup_version(p)),
        |v| format!("`{v}`"),
    );
    problems.check(
        p,
        "docs/settings.md",
        files.settings_doc.lines().any(|l| {
            l.starts_with(&format!(
                "| {} | {} | {version} |",
                p.clusterctl,
                generate::kind_cell(p)
            )) && l.contains(&format!("`{}`", p.controller))
        }),
        format!(
            "the table of the default providers has no row `| {} | {} | {version} | `{}` |`",
            p.clusterctl,
            generate::kind_cell(p),
            p.controller
        ),
    );
    // The README's lookup RBAC and docs/context-aware.md's chart values grant the kind.
    for (file, text, quoted) in [
        (
            "README.md",
            &files.readme,
            format!("\"{}\"", plural(p.config_kind)),
        ),
        (
            "docs/context-aware.md",
            &files.context_aware_doc,
            plural(p.config_kind),
        ),
    ] {
        problems.check(
            p,
            file,
            text.lines().collect::<Vec<_>>().windows(2).any(|l| {
                l[0].contains(p.group)
                    && l[1].trim_start().starts_with("resources: [")
                    && l[1].split(['[', ',', ']']).any(|r| r.trim() == quoted)
            }),
            format!("no `resources: [...]` of {} grants {quoted}", p.group),
        );
    }
}

/// A bootstrap kind (of any group but CAPI's core), or a controller, that the manifests list
/// and no record stands for.
fn unrecorded_in_manifests(
    problems: &mut Problems,
    files: &Listings,
    providers: &[Provider],
    controllers: &[&str],
) {
    let (metadata, policy) = (&files.metadata, &files.policy);
    let known = |api_version: &str, kind: &str| {
        providers
            .iter()
            .any(|p| p.config_kind == kind && api_version.starts_with(&format!("{}/", p.group)))
    };
    let capi = format!("{CAPI_GROUP}/");
    for (file, resources) in [
        (
            "metadata.yml contextAwareResources",
            &metadata["contextAwareResources"],
        ),
        (
            "policy.yaml contextAwareResources",
            &policy["spec"]["contextAwareResources"],
        ),
        (
            "artifacthub-pkg.yml kubewarden/contextAwareResources",
            &files.hub_resources,
        ),
    ] {
        for r in resources.as_array().into_iter().flatten() {
            let (api_version, kind) = (
                r["apiVersion"].as_str().unwrap_or(""),
                r["kind"].as_str().unwrap_or(""),
            );
            if !api_version.starts_with(&capi) && !known(api_version, kind) {
                problems.push(
                    file.split(' ').next().unwrap(),
                    format!("{file}: {api_version} {kind} has no provider record"),
                );
            }
        }
    }
    for user in policy["spec"]["settings"]["controllerUsers"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if !controllers.iter().any(|u| user == u) {
            problems.push(
                "policy.yaml",
                format!("policy.yaml controllerUsers: {user} is no record's controller"),
            );
        }
    }
    for (file, list) in [
        (
            "metadata.yml io.artifacthub.resources",
            metadata["annotations"]["io.artifacthub.resources"]
                .as_str()
                .unwrap_or(""),
        ),
        (
            "artifacthub-pkg.yml kubewarden/resources",
            files.artifacthub["annotations"]["kubewarden/resources"]
                .as_str()
                .unwrap_or(""),
        ),
    ] {
        for kind in list
            .split(',')
            .map(str::trim)
            .filter(|k| k.ends_with("Config"))
        {
            if !providers.iter().any(|p| p.config_kind == kind) {
                problems.push(
                    file.split(' ').next().unwrap(),
                    format!("{file}: {kind} has no provider record"),
                );
            }
        }
    }
}

/// A row of docs/settings.md's table of the default providers that no record stands for.
fn unrecorded_in_settings_doc(problems: &mut Problems, files: &Listings, providers: &[Provider]) {
    let known = |kind: &str| providers.iter().any(|p| generate::kind_cell(p) == kind);
    for row in files
        .settings_doc
        .lines()
        .skip_while(|l| !l.starts_with("## The default providers"))
        .skip_while(|l| !l.starts_with("|---"))
        .skip(1)
        .take_while(|l| l.starts_with('|'))
    {
        let kind = row.split('|').nth(2).unwrap_or("").trim();
        if !known(kind) {
            problems.push(
                "docs/settings.md",
                format!("docs/settings.md: the default providers' row of {kind} has no record"),
            );
        }
    }
}

fn from_checkout(file: &str) -> String {
    read(file)
}

#[test]
fn every_file_that_lists_providers_agrees_with_the_records() {
    assert_eq!(
        generate::controller_users(PROVIDERS),
        DEFAULT_CONTROLLER_USERS,
        "the generator's controllerUsers are the policy's default"
    );
    let problems = problems(PROVIDERS, &from_checkout);
    let problems: Vec<&str> = problems.0.iter().map(|(_, p)| p.as_str()).collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
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

/// The files `make generate` writes, as they are in the checkout.
fn generated_files() -> BTreeMap<String, String> {
    generate::FILES
        .iter()
        .map(|f| (f.to_string(), read(f)))
        .collect()
}

/// Every generated region holds what the records make of it, and every file has its regions
/// (without its markers a file would not follow the records). `UPDATE_GENERATED=1`, which
/// `make generate` sets, writes what differs instead of failing.
#[test]
fn the_generated_regions_are_what_the_records_make() {
    let files = generated_files();
    for (file, names) in generate::REGIONS {
        let present = generate::region_names(file, &files[file]);
        for name in names {
            assert!(
                present.iter().any(|p| p == name),
                "{file} has no generated region {name:?}: put back its two marker lines \
                 (tests/generate/mod.rs says how they read), then run `{}`",
                generate::COMMAND
            );
        }
    }
    let regenerated = generate::regenerate_all(&files, PROVIDERS).unwrap_or_else(|e| panic!("{e}"));
    let mut stale = Vec::new();
    for (file, new) in &regenerated {
        let old = &files[file];
        if old == new {
            continue;
        }
        if std::env::var_os("UPDATE_GENERATED").is_some() {
            fs::write(root().join(file), new).unwrap_or_else(|e| panic!("{file}: {e}"));
            eprintln!("make generate: wrote {file}");
            continue;
        }
        let line = old
            .lines()
            .zip(new.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| old.lines().count().min(new.lines().count()));
        stale.push(format!(
            "{file}:{}: `{}`, the records make `{}`",
            line + 1,
            old.lines().nth(line).unwrap_or(""),
            new.lines().nth(line).unwrap_or("")
        ));
    }
    assert!(
        stale.is_empty(),
        "files differ from the provider records (src/capi/providers.rs): run `{}`\n{}",
        generate::COMMAND,
        stale.join("\n")
    );
}

/// What adding a bootstrap provider takes is what ARCHITECTURE.md's "To add a bootstrap
/// provider" says. With one more record, a provider no file knows yet:
/// - `make generate` (the generator run on the records and the fake) changes every file it
///   writes, and ARCHITECTURE.md's list names each of them (step 2);
/// - every check of tests/providers.rs passes on the generated files and the others, as they
///   are in the checkout: nothing these checks read needs a hand;
/// - every file or folder the list names exists.
///
/// It does not prove the steps no check reads (CRDs, scenarios, the prose of rule 8 and of the
/// release matrix, the cluster test, CHANGELOG.md): the list names them, and the existence of
/// what it names is checked.
#[test]
fn adding_a_provider_touches_what_architecture_md_lists() {
    use capi_bootstrap_rollout_policy::capi::providers::{Defaulter, Rendering};
    let list = architecture_section("To add a bootstrap provider");
    let named = named_paths(&list);
    let missing: Vec<&String> = named.iter().filter(|(_, e)| !**e).map(|(p, _)| p).collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's \"To add a bootstrap provider\" names what does not exist: {missing:?}"
    );
    assert!(list.contains(&format!("`{}`", generate::COMMAND)));

    let mut providers: Vec<Provider> = PROVIDERS.to_vec();
    providers.push(Provider {
        clusterctl: "example-added",
        group: "bootstrap.added.example.com",
        config_kind: "ExampleAddedConfig",
        lookup_version: Some("v1alpha1"),
        controller: "system:serviceaccount:example-added-system:example-added-manager",
        machine_only: &[],
        fill_once: &[],
        template_fill_once: &[],
        template_documented_edit: None,
        defaulter: Defaulter::None,
        rendering: Rendering::Once,
        spec_writes: "nothing",
    });
    let before = generated_files();
    let after = generate::regenerate_all(&before, &providers).unwrap_or_else(|e| panic!("{e}"));
    for file in generate::FILES {
        assert_ne!(
            before[file], after[file],
            "{file}: make generate wrote nothing for the new record"
        );
        assert!(
            named.contains_key(file),
            "{file} changes with a new record, and ARCHITECTURE.md's list does not name it"
        );
    }

    // Every check these files answer passes on what `make generate` wrote: nothing the checks
    // read is left to a hand.
    let text = |file: &str| after.get(file).cloned().unwrap_or_else(|| read(file));
    let problems = problems(&providers, &text);
    assert!(
        problems.0.is_empty(),
        "what a new record leaves to write by hand: {problems:#?}",
        problems = problems.0
    );
}
