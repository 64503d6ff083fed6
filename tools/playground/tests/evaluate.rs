//! The playground's function as the page calls it: pasted YAML in, the policy's answer out,
//! and a clear input error (never a panic) for anything that cannot be a request.

use capi_rollout_playground::{evaluate, evaluate_json, Answer, Context, Outcome, ViolationOut};
use rstest::rstest;
use serde_json::Value;

/// A KubeadmConfig a MachinePool controls, as `kubectl get -o yaml` shows it.
fn config(version: &str, content: &str, token: &str) -> String {
    format!(
        r#"apiVersion: bootstrap.cluster.x-k8s.io/{version}
kind: KubeadmConfig
metadata:
  name: worker-a-0123abcd
  namespace: default
  ownerReferences:
  - apiVersion: cluster.x-k8s.io/{version}
    kind: MachinePool
    name: worker-a
    uid: 6f1c2f7e-8a53-4c1b-9d8e-0b6f4a1e2c3d
    controller: true
spec:
  files:
  - path: /etc/sysctl.d/90-k8s.conf
    content: |
      {content}
  joinConfiguration:
    discovery:
      bootstrapToken:
        apiServerEndpoint: 10.0.0.1:6443
        token: {token}
"#
    )
}

fn update(old: &str, new: &str, settings: &str) -> Answer {
    evaluate(old, new, "UPDATE", settings, &Context::default())
}

fn verdict(answer: Answer) -> Outcome {
    match answer {
        Answer::Verdict(outcome) => outcome,
        other => panic!("expected a verdict, got {other:?}"),
    }
}

fn input_error(answer: Answer) -> (&'static str, String) {
    match answer {
        Answer::InputError { input, error } => (input, error),
        other => panic!("expected an input error, got {other:?}"),
    }
}

#[rstest]
fn token_rotation_is_allowed(#[values("v1beta1", "v1beta2")] version: &str) {
    let outcome = verdict(update(
        &config(version, "a=1", "abcdef.0123456789abcdef"),
        &config(version, "a=1", "ghijkl.0123456789abcdef"),
        "{}",
    ));
    assert!(outcome.allowed);
    assert_eq!((outcome.code, outcome.message), (None, None));
    assert!(outcome.violations.is_empty() && outcome.warnings.is_empty());
    assert_eq!(outcome.suggested_name, None);
    // The token changed, and the page says so, though the policy does not compare it.
    assert_eq!(
        outcome.changed_paths,
        ["spec.joinConfiguration.discovery.bootstrapToken.token"]
    );
}

#[rstest]
fn content_edit_is_rejected_with_path_and_name(#[values("v1beta1", "v1beta2")] version: &str) {
    let outcome = verdict(update(
        &config(version, "a=1", "abcdef.0123456789abcdef"),
        &config(version, "a=2", "abcdef.0123456789abcdef"),
        "{}",
    ));
    assert!(!outcome.allowed);
    assert_eq!(outcome.code, Some(403));
    assert_eq!(
        outcome.violations,
        [ViolationOut {
            path: "spec.files[0].content".into(),
            detail: "Forbidden: changed".into(),
            action: "reject",
        }]
    );
    assert_eq!(outcome.changed_paths, ["spec.files[0].content"]);
    let name = outcome.suggested_name.expect("a rotation name");
    let suffix = name.strip_prefix("worker-a-").expect("the pool's prefix");
    assert!(
        suffix.len() == 8 && suffix.bytes().all(|b| b.is_ascii_hexdigit()) && suffix != "0123abcd",
        "{name}"
    );
    let message = outcome.message.unwrap();
    assert!(message.starts_with("KubeadmConfig.bootstrap.cluster.x-k8s.io \"worker-a-0123abcd\" is invalid: [spec.files[0].content: Forbidden: changed]"), "{message}");
    assert!(
        message.contains(&format!("create a new KubeadmConfig {name:?}")),
        "{message}"
    );
}

#[rstest]
#[case::warn(r#"{"inPlaceEdits": "warn"}"#, 1, "warn")]
#[case::yaml_settings("inPlaceEdits: warn", 1, "warn")]
fn settings_change_the_verdict(
    #[case] settings: &str,
    #[case] warnings: usize,
    #[case] action: &str,
) {
    let outcome = verdict(update(
        &config("v1beta2", "a=1", "t"),
        &config("v1beta2", "a=2", "t"),
        settings,
    ));
    assert!(outcome.allowed);
    assert_eq!(outcome.warnings.len(), warnings);
    assert_eq!(outcome.violations[0].action, action);
}

#[test]
fn delete_without_lookups_is_allowed_and_ignores_the_new_editor() {
    let outcome = verdict(evaluate(
        &config("v1beta2", "a=1", "t"),
        "this editor is not sent: [",
        "delete",
        "",
        &Context::default(),
    ));
    assert!(outcome.allowed);
    assert!(outcome.changed_paths.is_empty());
    // A person's DELETE of a config its MachinePool controls is warned (rule 7,
    // deleteOwnedConfigs: warn): re-creating it under the same name is no rotation.
    assert_eq!(outcome.violations.len(), 1, "{:?}", outcome.violations);
    assert_eq!(outcome.violations[0].action, "warn");
    assert_eq!(outcome.warnings.len(), 1);
    assert!(
        outcome.warnings[0].contains("a same-name re-create is no rotation"),
        "{:?}",
        outcome.warnings
    );
}

#[test]
fn an_exempt_user_is_allowed_with_the_audit_annotation() {
    let context = Context {
        username: "alice".into(),
        groups: vec!["system:authenticated".into()],
        sub_resource: String::new(),
    };
    let outcome = verdict(evaluate(
        &config("v1beta2", "a=1", "t"),
        &config("v1beta2", "a=2", "t"),
        "UPDATE",
        r#"{"exemptUsers": ["alice"]}"#,
        &context,
    ));
    assert!(outcome.allowed);
    let note = &outcome.audit_annotations["exemption"];
    assert!(
        note.starts_with("allowed because user \"alice\" is in exemptUsers; would have rejected"),
        "{note}"
    );
}

/// Settings are refused with the message the policy's validate_settings gives Kubewarden.
#[rstest]
#[case::typo(
    r#"{"inPlaceEdit": "allow"}"#,
    "inPlaceEdit: unknown setting (known: inPlaceEdits, templateEdits, contractViolations"
)]
#[case::bad_value(r#"{"inPlaceEdits": "deny"}"#, "inPlaceEdits")]
#[case::not_json(
    "{",
    "settings are not valid JSON: EOF while parsing an object at line 1 column 1"
)]
#[case::not_an_object("[1]", "settings must be an object, got a list")]
fn bad_settings_are_refused_as_kubewarden_refuses_them(
    #[case] settings: &str,
    #[case] expected: &str,
) {
    let (input, error) = input_error(update(
        &config("v1beta2", "a=1", "t"),
        &config("v1beta2", "a=2", "t"),
        settings,
    ));
    assert_eq!(input, "settings");
    assert!(error.starts_with(expected), "{error}");
}

#[rstest]
#[case::bad_yaml(
    "UPDATE",
    "spec: [unclosed",
    "new",
    "the new object is not valid YAML: "
)]
#[case::not_a_mapping(
    "UPDATE",
    "- a\n- b",
    "new",
    "the new object must be a mapping (a Kubernetes object), got a list"
)]
#[case::empty_new(
    "UPDATE",
    "",
    "new",
    "the new object is empty: an UPDATE request needs it"
)]
#[case::no_api_version(
    "UPDATE",
    "kind: KubeadmConfig\nmetadata: {name: x}",
    "new",
    "the new object has no apiVersion"
)]
#[case::no_kind(
    "UPDATE",
    "apiVersion: v1\nmetadata: {name: x}",
    "new",
    "the new object has no kind"
)]
#[case::empty_new_create(
    "CREATE",
    "# only a comment",
    "new",
    "the new object is empty: a CREATE request needs it"
)]
#[case::kind_changed("UPDATE", "apiVersion: bootstrap.cluster.x-k8s.io/v1beta2\nkind: EKSConfig\nmetadata: {name: x}", "old", "the old object is a \"KubeadmConfig\" and the new one a \"EKSConfig\": an UPDATE keeps the kind")]
#[case::bad_operation(
    "PATCH",
    "kind: x",
    "operation",
    "the operation must be CREATE, UPDATE or DELETE, got \"PATCH\""
)]
#[case::deep_nesting("UPDATE", &"[".repeat(100_000), "new", "the new object is not valid YAML: ")]
#[case::duplicate_key(
    "UPDATE",
    "kind: a\nkind: b",
    "new",
    "the new object is not valid YAML: duplicate entry with key \"kind\""
)]
#[case::non_string_key(
    "UPDATE",
    "apiVersion: v1\n? [a]\n: b",
    "new",
    "the new object is not valid YAML: "
)]
fn bad_input_is_a_clear_error(
    #[case] operation: &str,
    #[case] new: &str,
    #[case] input: &str,
    #[case] expected: &str,
) {
    let answer = evaluate(
        &config("v1beta2", "a=1", "t"),
        new,
        operation,
        "{}",
        &Context::default(),
    );
    let (at, error) = input_error(answer);
    assert_eq!(at, input);
    assert!(error.starts_with(expected), "{error}");
}

#[test]
fn bad_yaml_names_the_line() {
    let (_, error) = input_error(update(
        "apiVersion: v1\nkind: A\nmetadata:\n  name: x\n   bad: indentation\n",
        &config("v1beta2", "a", "t"),
        "{}",
    ));
    assert!(
        error.starts_with("the old object is not valid YAML: ") && error.contains("line 5"),
        "{error}"
    );
}

#[test]
fn a_request_the_policy_cannot_read_is_its_400() {
    // configRef as a string: the policy itself refuses the request (not an input error).
    let pool = |name: &str| {
        format!("apiVersion: cluster.x-k8s.io/v1beta2\nkind: MachinePool\nmetadata: {{name: mp, namespace: default}}\nspec:\n  template:\n    spec:\n      bootstrap:\n        configRef: {name}\n")
    };
    let outcome = verdict(update(&pool("a"), &pool("b"), "{}"));
    assert_eq!((outcome.allowed, outcome.code), (false, Some(400)));
    assert!(outcome.message.unwrap().contains("configRef"));
}

/// The JSON the browser binding returns: what app.js reads.
#[test]
fn the_json_answer_has_the_fields_the_page_reads() {
    let json = evaluate_json(
        &config("v1beta2", "a=1", "t"),
        &config("v1beta2", "a=2", "t"),
        "UPDATE",
        "{}",
        r#"{"username": "bob", "groups": ["dev"], "subResource": ""}"#,
    );
    let answer: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(answer["kind"], "verdict");
    assert_eq!(answer["allowed"], false);
    assert_eq!(answer["code"], 403);
    assert_eq!(answer["violations"][0]["path"], "spec.files[0].content");
    assert_eq!(answer["changedPaths"][0], "spec.files[0].content");
    assert!(answer["suggestedName"]
        .as_str()
        .unwrap()
        .starts_with("worker-a-"));
    assert!(answer["auditAnnotations"].is_object() && answer["warnings"].is_array());

    let bad: Value =
        serde_json::from_str(&evaluate_json("", "", "UPDATE", "{}", r#"{"user": 1}"#)).unwrap();
    assert_eq!(bad["kind"], "inputError");
    assert_eq!(bad["input"], "context");
    assert!(bad["error"]
        .as_str()
        .unwrap()
        .starts_with("the request context is not valid: unknown field `user`"));
}
