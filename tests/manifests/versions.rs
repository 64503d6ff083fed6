//! The version, name, license and repository: Cargo.toml's, everywhere they are written.

use serde_json::json;

use crate::files::{
    annotation, oci_image, read, root, text, yaml, LICENSE, NAME, REPOSITORY, USAGE_ANNOTATION,
    VERSION,
};

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
