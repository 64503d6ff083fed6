//! `policy-host scaffold artifacthub`: the artifacthub-pkg.yml that `kwctl scaffold artifacthub`
//! writes (kwctl 1.23 and later: `scaffold/artifacthub.rs`, and policy-evaluator's
//! `policy_artifacthub.rs`), byte for byte apart from `createdAt`, the time it is written.
//!
//! Everything comes from metadata.yml's annotations, the version included
//! (`io.kubewarden.policy.version`; kwctl ignores its deprecated `--version`), plus the
//! questions-ui file verbatim. The fields, their order, what is left out when absent, and the
//! YAML (yaml_serde, the continuation of the serde_yaml 0.9 kwctl uses, with the same emitter)
//! are kwctl's, so the same inputs give the same file.

use std::collections::BTreeMap;

use anyhow::{anyhow, bail, Result};
use serde::Serialize;

use crate::metadata::Metadata;

const TITLE: &str = "io.kubewarden.policy.title";
const VERSION: &str = "io.kubewarden.policy.version";
const DESCRIPTION: &str = "io.kubewarden.policy.description";
const AUTHOR: &str = "io.kubewarden.policy.author";
const URL: &str = "io.kubewarden.policy.url";
const OCI_URL: &str = "io.kubewarden.policy.ociUrl";
const SOURCE: &str = "io.kubewarden.policy.source";
const LICENSE: &str = "io.kubewarden.policy.license";
const DISPLAY_NAME: &str = "io.artifacthub.displayName";
const KEYWORDS: &str = "io.artifacthub.keywords";
const RESOURCES: &str = "io.artifacthub.resources";
const HIDDEN_UI: &str = "io.kubewarden.hidden-ui";
const GITHUB_RELEASE_TAG: &str = "com.github.release.tag";

/// The comment kwctl puts above the YAML (its last line ends with a space, as kwctl's does).
pub const HEADER: &str = "# Kubewarden Artifacthub Package config
#
# Use this config to submit the policy to https://artifacthub.io.
#
# This config can be saved to its default location with:
#   kwctl scaffold artifacthub > artifacthub-pkg.yml ";

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Package {
    version: String,
    name: String,
    display_name: String,
    created_at: String,
    description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    license: Option<String>,
    #[serde(rename = "homeURL", skip_serializing_if = "Option::is_none")]
    home_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    containers_images: Option<Vec<ContainerImage>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    keywords: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    links: Option<Vec<Link>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    install: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    maintainers: Option<Vec<Maintainer>>,
    provider: Provider,
    recommendations: Vec<Recommendation>,
    annotations: BTreeMap<String, String>,
}

#[derive(Serialize)]
struct ContainerImage {
    name: &'static str,
    image: String,
}

#[derive(Serialize)]
struct Link {
    name: &'static str,
    url: String,
}

#[derive(Serialize)]
struct Maintainer {
    name: String,
    email: String,
}

#[derive(Serialize)]
struct Provider {
    name: &'static str,
}

#[derive(Serialize)]
struct Recommendation {
    url: &'static str,
}

/// The whole file kwctl writes with `--output` (without it, kwctl prints this and a newline).
pub fn scaffold(metadata: &Metadata, questions: Option<&str>, created_at: &str) -> Result<String> {
    let package = package(metadata, questions, created_at)?;
    Ok(format!("{HEADER}\n{}", yaml_serde::to_string(&package)?))
}

/// metadata.yml as kwctl reads it for this command (no validation beyond parsing).
pub fn read_metadata(text: &str) -> Result<Metadata> {
    yaml_serde::from_str(text).map_err(|e| anyhow!("Error unmarshalling metadata {}", e))
}

fn package(metadata: &Metadata, questions: Option<&str>, created_at: &str) -> Result<Package> {
    let annotations = metadata
        .annotations
        .as_ref()
        .filter(|a| !a.is_empty())
        .ok_or_else(|| {
            anyhow!("no annotations in policy metadata. policy metadata must specify annotations")
        })?;
    let required = |key: &str| {
        annotations
            .get(key)
            .cloned()
            .ok_or_else(|| anyhow!("policy metadata must specify \"{key}\" in annotations"))
    };
    let version = semver::Version::parse(&required(VERSION)?)
        .map_err(|e| anyhow!("policy version must be in semver: {e}"))?;
    if questions == Some("") {
        bail!("questions-ui content cannot be empty");
    }

    let name = required(TITLE)?;
    let display_name = required(DISPLAY_NAME)?;
    let description = required(DESCRIPTION)?;
    let home_url = annotations
        .get(URL)
        .map(|url| well_formed_url(URL, url))
        .transpose()?;
    let image = oci_reference(&required(OCI_URL)?, &version)?;
    let keywords = annotations
        .get(KEYWORDS)
        .map(|csv| keywords(csv))
        .transpose()?;
    let links = annotations
        .get(SOURCE)
        .map(|source| links(source, &version, annotations.get(GITHUB_RELEASE_TAG)))
        .transpose()?;
    let maintainers = annotations
        .get(AUTHOR)
        .map(|a| maintainers(a))
        .transpose()?;

    let mut package_annotations = BTreeMap::new();
    package_annotations.insert(
        "kubewarden/mutation".to_string(),
        metadata.mutating.to_string(),
    );
    if !metadata.context_aware_resources.is_empty() {
        package_annotations.insert(
            "kubewarden/contextAwareResources".to_string(),
            yaml_serde::to_string(&metadata.context_aware_resources)?,
        );
    }
    package_annotations.insert(
        "kubewarden/rules".to_string(),
        yaml_serde::to_string(&metadata.rules)?,
    );
    if let Some(questions) = questions {
        package_annotations.insert("kubewarden/questions-ui".to_string(), questions.to_string());
    }
    if let Some(hidden) = annotations.get(HIDDEN_UI) {
        package_annotations.insert("kubewarden/hidden-ui".to_string(), hidden.clone());
    }
    if let Some(resources) = annotations.get(RESOURCES) {
        package_annotations.insert("kubewarden/resources".to_string(), resources.clone());
    }

    Ok(Package {
        version: version.to_string(),
        name,
        display_name,
        created_at: created_at.to_string(),
        description,
        license: annotations.get(LICENSE).cloned(),
        home_url,
        install: Some(install(&image)),
        containers_images: Some(vec![ContainerImage {
            name: "policy",
            image,
        }]),
        keywords,
        links,
        maintainers,
        provider: Provider { name: "kubewarden" },
        recommendations: vec![Recommendation {
            url: "https://artifacthub.io/packages/helm/kubewarden/kubewarden-controller",
        }],
        annotations: package_annotations,
    })
}

fn malformed_url(annotation: &str, error: impl std::fmt::Display) -> anyhow::Error {
    anyhow!(
        "annotation \"{annotation:?}\" in policy metadata must be a well formed URL: {:?}",
        error.to_string()
    )
}

/// A URL as the `url` crate (kwctl's) parses and prints it.
fn well_formed_url(annotation: &str, text: &str) -> Result<String> {
    url::Url::parse(text)
        .map(String::from)
        .map_err(|e| malformed_url(annotation, e))
}

fn keywords(csv: &str) -> Result<Vec<String>> {
    let words: Vec<String> = csv
        .split(',')
        .map(|word| word.trim_matches(' ').to_string())
        .collect();
    if words.iter().any(String::is_empty) {
        bail!("annotation \"{KEYWORDS}\" in policy metadata is malformed, must be csv values");
    }
    Ok(words)
}

/// The policy's GitHub release asset when the source is on github.com, and the source itself.
fn links(
    source: &str,
    version: &semver::Version,
    release_tag: Option<&String>,
) -> Result<Vec<Link>> {
    let source_url = url::Url::parse(source).map_err(|e| malformed_url(SOURCE, e))?;
    let source = String::from(source_url.clone());
    if source_url.host_str() != Some("github.com") {
        return Ok(vec![Link {
            name: "source",
            url: source,
        }]);
    }
    let release = match release_tag {
        Some(tag) => url::form_urlencoded::byte_serialize(tag.as_bytes()).collect(),
        None => format!("v{version}"),
    };
    let policy = well_formed_url(
        SOURCE,
        &format!("{source}/releases/download/{release}/policy.wasm"),
    )?;
    Ok(vec![
        Link {
            name: "policy",
            url: policy,
        },
        Link {
            name: "source",
            url: source,
        },
    ])
}

fn install(image: &str) -> String {
    format!(
        "The policy can be obtained using [`kwctl`](https://github.com/kubewarden/kwctl):
```console
kwctl pull {image}
```
Then, generate the policy manifest and tune it to your liking. For example:
```console
kwctl scaffold manifest -t ClusterAdmissionPolicy registry://{image}
```
"
    )
}

/// `<ociUrl>:v<version>` as an OCI reference prints itself: a name without a registry is on
/// docker.io, and a docker.io name of one component is under `library/`.
fn oci_reference(oci_url: &str, version: &semver::Version) -> Result<String> {
    let malformed = |why: &str| malformed_url(OCI_URL, why);
    if oci_url.contains(['@', ' ']) || oci_url.is_empty() {
        return Err(malformed("invalid reference format"));
    }
    let (mut domain, mut path) = match oci_url.split_once('/') {
        Some((first, rest))
            if first.contains('.') || first.contains(':') || first == "localhost" =>
        {
            (first.to_string(), rest.to_string())
        }
        _ => ("docker.io".to_string(), oci_url.to_string()),
    };
    // A tag in the URL itself (`name:tag`, not a registry port) makes `:v<version>` a second tag.
    if path.contains(':') {
        return Err(malformed("invalid reference format"));
    }
    if domain == "index.docker.io" {
        domain = "docker.io".to_string();
    }
    if domain == "docker.io" && !path.contains('/') {
        path = format!("library/{path}");
    }
    let component_ok = |c: &str| {
        !c.is_empty()
            && c.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
            && c.as_bytes()[0].is_ascii_alphanumeric()
            && c.as_bytes()[c.len() - 1].is_ascii_alphanumeric()
    };
    if !path.split('/').all(component_ok) {
        return Err(malformed("repository name must be lowercase"));
    }
    Ok(format!("{domain}/{path}:v{version}"))
}

/// `Name <email>, Name <email>` (RFC 5322 name-addr list) as name and address pairs.
fn maintainers(author: &str) -> Result<Vec<Maintainer>> {
    let malformed = || {
        anyhow!(
            "annotation \"{AUTHOR}\" in policy metadata is malformed, must be csv values of \"name <email>\""
        )
    };
    let mut entries = Vec::new();
    let (mut current, mut quoted, mut angle) = (String::new(), false, false);
    for c in author.chars() {
        match c {
            '"' if !angle => quoted = !quoted,
            '<' if !quoted => angle = true,
            '>' if !quoted => angle = false,
            ',' if !quoted && !angle => {
                entries.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if quoted || angle {
        return Err(malformed());
    }
    entries.push(current);

    let mut maintainers = Vec::new();
    for entry in entries.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
        let (name, email) = match entry.split_once('<') {
            Some((name, rest)) => {
                let email = rest.strip_suffix('>').ok_or_else(malformed)?;
                (
                    name.trim().trim_matches('"').trim().to_string(),
                    email.trim(),
                )
            }
            None => (String::new(), entry),
        };
        let well_formed = email.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty()
                && !domain.is_empty()
                && !domain.contains('@')
                && !email.contains(char::is_whitespace)
        });
        if !well_formed {
            bail!(
                "annotation \"{AUTHOR:?}\" in policy metadata must be a well formed email: {:?}",
                format!("invalid email address {email}")
            );
        }
        maintainers.push(Maintainer {
            name,
            email: email.to_string(),
        });
    }
    if maintainers.is_empty() {
        return Err(malformed());
    }
    Ok(maintainers)
}

/// A moment as kwctl's `createdAt` prints it: RFC 3339 in UTC with `Z`, and the fraction of a
/// second without trailing zeros (none at all on a whole second), as the `time` crate does.
pub fn rfc3339(unix_seconds: i64, nanos: u32) -> String {
    let days = unix_seconds.div_euclid(86_400);
    let second_of_day = unix_seconds.rem_euclid(86_400);
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let mut text = format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
        second_of_day / 3600,
        second_of_day % 3600 / 60,
        second_of_day % 60
    );
    if nanos != 0 {
        let fraction = format!("{nanos:09}");
        text.push('.');
        text.push_str(fraction.trim_end_matches('0'));
    }
    text.push('Z');
    text
}

/// Now, as `rfc3339` prints it.
pub fn now() -> String {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is after 1970");
    rfc3339(since_epoch.as_secs() as i64, since_epoch.subsec_nanos())
}

#[cfg(test)]
mod tests {
    use super::*;

    const METADATA: &str = r#"
rules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    resources: ["pods"]
    operations: ["CREATE"]
mutating: false
annotations:
  io.kubewarden.policy.title: demo
  io.kubewarden.policy.version: 1.2.3
  io.artifacthub.displayName: Demo
  io.kubewarden.policy.description: A demo
  io.kubewarden.policy.ociUrl: ghcr.io/demo/policies/demo
"#;

    #[test]
    fn the_minimal_metadata_gives_kwctls_minimal_file() {
        let metadata = read_metadata(METADATA).unwrap();
        let file = scaffold(&metadata, None, "2024-01-02T03:04:05Z").unwrap();
        let expected = format!(
            "{HEADER}\nversion: 1.2.3\nname: demo\ndisplayName: Demo\ncreatedAt: 2024-01-02T03:04:05Z\n\
             description: A demo\ncontainersImages:\n- name: policy\n  image: ghcr.io/demo/policies/demo:v1.2.3\n\
             install: |\n  The policy can be obtained using [`kwctl`](https://github.com/kubewarden/kwctl):\n  ```console\n  \
             kwctl pull ghcr.io/demo/policies/demo:v1.2.3\n  ```\n  Then, generate the policy manifest and tune it to your liking. For example:\n  \
             ```console\n  kwctl scaffold manifest -t ClusterAdmissionPolicy registry://ghcr.io/demo/policies/demo:v1.2.3\n  ```\n\
             provider:\n  name: kubewarden\nrecommendations:\n- url: https://artifacthub.io/packages/helm/kubewarden/kubewarden-controller\n\
             annotations:\n  kubewarden/mutation: 'false'\n  kubewarden/rules: |\n    - apiGroups:\n      - ''\n      apiVersions:\n      - v1\n      \
             resources:\n      - pods\n      operations:\n      - CREATE\n"
        );
        assert_eq!(file, expected);
    }

    #[test]
    fn missing_and_malformed_annotations_are_named() {
        let without = |key: &str| {
            let text: String = METADATA
                .lines()
                .filter(|l| !l.contains(key))
                .map(|l| format!("{l}\n"))
                .collect();
            let metadata = read_metadata(&text).unwrap();
            scaffold(&metadata, None, "2024-01-02T03:04:05Z")
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            without("ociUrl"),
            "policy metadata must specify \"io.kubewarden.policy.ociUrl\" in annotations"
        );
        assert_eq!(
            without("displayName"),
            "policy metadata must specify \"io.artifacthub.displayName\" in annotations"
        );
        let bad_version = read_metadata(&METADATA.replace("1.2.3", "1.2")).unwrap();
        assert!(scaffold(&bad_version, None, "x")
            .unwrap_err()
            .to_string()
            .starts_with("policy version must be in semver"));
        let metadata = read_metadata(METADATA).unwrap();
        assert_eq!(
            scaffold(&metadata, Some(""), "x").unwrap_err().to_string(),
            "questions-ui content cannot be empty"
        );
    }

    #[test]
    fn oci_references_are_normalised_as_docker_does() {
        let v = semver::Version::parse("0.1.0").unwrap();
        assert_eq!(
            oci_reference("ghcr.io/a/b", &v).unwrap(),
            "ghcr.io/a/b:v0.1.0"
        );
        assert_eq!(
            oci_reference("localhost:5000/a", &v).unwrap(),
            "localhost:5000/a:v0.1.0"
        );
        assert_eq!(
            oci_reference("busybox", &v).unwrap(),
            "docker.io/library/busybox:v0.1.0"
        );
        assert_eq!(
            oci_reference("kw/policy", &v).unwrap(),
            "docker.io/kw/policy:v0.1.0"
        );
        assert!(oci_reference("ghcr.io/A/b", &v).is_err());
        assert!(oci_reference("ghcr.io/a/b:v1", &v).is_err());
    }

    #[test]
    fn maintainers_are_name_addr_lists() {
        let list =
            maintainers(r#"Ann <ann@example.com>, "Doe, Jo" <jo@example.com>, x@example.com"#)
                .unwrap();
        let pairs: Vec<(&str, &str)> = list
            .iter()
            .map(|m| (m.name.as_str(), m.email.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("Ann", "ann@example.com"),
                ("Doe, Jo", "jo@example.com"),
                ("", "x@example.com")
            ]
        );
        assert!(maintainers("Ann <ann>").is_err());
        assert!(maintainers("Ann <ann@example.com").is_err());
    }

    #[test]
    fn links_point_at_the_github_release_or_only_at_the_source() {
        let v = semver::Version::parse("0.1.0").unwrap();
        let urls = |source: &str, tag: Option<&String>| -> Vec<String> {
            links(source, &v, tag)
                .unwrap()
                .into_iter()
                .map(|l| l.url)
                .collect()
        };
        assert_eq!(
            urls("https://github.com/o/r", None),
            [
                "https://github.com/o/r/releases/download/v0.1.0/policy.wasm",
                "https://github.com/o/r"
            ]
        );
        assert_eq!(
            urls("https://github.com/o/r", Some(&"pol/v0.1.0".to_string()))[0],
            "https://github.com/o/r/releases/download/pol%2Fv0.1.0/policy.wasm"
        );
        assert_eq!(
            urls("https://gitlab.com/o/r", None),
            ["https://gitlab.com/o/r"]
        );
        assert_eq!(urls("HTTPS://GitHub.com", None)[1], "https://github.com/");
    }

    #[test]
    fn created_at_is_printed_as_the_time_crate_prints_rfc3339() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(482_196_050, 520_000_000), "1985-04-12T23:20:50.52Z");
        assert_eq!(rfc3339(951_782_400, 1), "2000-02-29T00:00:00.000000001Z");
        assert_eq!(
            rfc3339(1_767_225_599, 999_999_999),
            "2025-12-31T23:59:59.999999999Z"
        );
        assert_eq!(rfc3339(-1, 0), "1969-12-31T23:59:59Z");
    }
}
