//! questions-ui.yml and artifacthub-pkg.yml: what Artifact Hub and kwctl derive from metadata.yml.

use std::collections::BTreeSet;

use capi_bootstrap_rollout_policy::capi::providers::DEFAULT_BOOTSTRAP_CONFIG_KINDS;
use capi_bootstrap_rollout_policy::settings::Settings;
use serde_json::{json, Value};

use crate::files::{
    annotation, documented_defaults, enum_values, list, oci_image, read, text, yaml, VERSION,
};

/// A question's type fits its setting: an enum's options are the setting's values, a list's
/// default holds strings, a sequence's items have its fields, a map has one list per kind.
fn check_type(question: &Value, variable: &str, default: &Value) {
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

/// What the UI writes before dropping empty values (the per-kind lists all present) is the
/// policy's defaults.
fn the_uis_defaults_are_the_policys(defaults: &serde_json::Map<String, Value>) {
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
        check_type(question, variable, default);
    }
    let settings: BTreeSet<&str> = defaults.keys().map(String::as_str).collect();
    assert_eq!(
        seen, settings,
        "questions-ui.yml must ask for every setting"
    );

    the_uis_defaults_are_the_policys(defaults);
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

/// The package's own fields, each from metadata.yml's annotations as kwctl writes it.
fn pkg_fields_from_metadata(pkg: &Value, metadata: &Value) {
    let image = oci_image(metadata);
    let source = annotation(metadata, "io.kubewarden.policy.source");

    let expect = |field: &str, value: Value| {
        assert_eq!(pkg[field], value, "artifacthub-pkg.yml: {field}");
    };
    expect(
        "name",
        json!(annotation(metadata, "io.kubewarden.policy.title")),
    );
    expect(
        "displayName",
        json!(annotation(metadata, "io.artifacthub.displayName")),
    );
    expect(
        "description",
        json!(annotation(metadata, "io.kubewarden.policy.description")),
    );
    expect(
        "license",
        json!(annotation(metadata, "io.kubewarden.policy.license")),
    );
    expect(
        "homeURL",
        json!(annotation(metadata, "io.kubewarden.policy.url")),
    );
    expect(
        "keywords",
        annotation(metadata, "io.artifacthub.keywords")
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
        maintainers(annotation(metadata, "io.kubewarden.policy.author")),
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
}

/// Its annotations (the resources, questions-ui.yml verbatim), and no field kwctl does not write.
fn pkg_annotations_and_nothing_else(pkg: &Value, metadata: &Value) {
    let annotations = &pkg["annotations"];
    assert_eq!(
        annotations["kubewarden/resources"],
        json!(annotation(metadata, "io.artifacthub.resources")),
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
}

#[test]
fn artifacthub_pkg_is_what_kwctl_derives_from_metadata() {
    let metadata = yaml("metadata.yml");
    let pkg = yaml("artifacthub-pkg.yml");
    pkg_fields_from_metadata(&pkg, &metadata);
    pkg_annotations_and_nothing_else(&pkg, &metadata);

    let repo = yaml("artifacthub-repo.yml");
    assert_eq!(
        repo["owners"], pkg["maintainers"],
        "artifacthub-repo.yml: owners must be artifacthub-pkg.yml's maintainers"
    );
}
