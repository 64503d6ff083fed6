//! `capi-rollout-check settings`: the settings of Kubewarden policy manifests checked by the
//! policy's own validate_settings before `kubectl apply`, as a person and a workflow see them
//! (tests/fixtures/policies: a misspelt key, a bad value, a malformed path, a file holding
//! several policies, a policy group), and the shipped policy.yaml passing.

mod common;

use capi_bootstrap_rollout_policy::validate_settings_payload;

const DIR: &str = "tests/fixtures/policies";

use common::Run;

/// `capi-rollout-check settings ARGS`.
fn run(args: &[&str], stdin: Option<&str>) -> Run {
    common::run(&[&["settings"], args].concat(), stdin)
}

/// The policy's own message for a settings object: what the lines below quote whole.
fn policy_says(settings: &str) -> String {
    let response = validate_settings_payload(settings.as_bytes());
    assert!(!response.valid, "{settings} is valid");
    response.message.unwrap()
}

/// `(known: ...)` of an unknown key, as the policy lists the keys.
fn known() -> String {
    let message = policy_says(r#"{"x": 1}"#);
    message
        .strip_prefix("x: unknown setting ")
        .unwrap_or_else(|| panic!("{message}"))
        .to_string()
}

fn assert_lines(run: &Run, code: i32, lines: &[String]) {
    let expected: String = lines.iter().map(|l| format!("{l}\n")).collect();
    assert_eq!(run.stdout, expected, "stderr: {}", run.stderr);
    assert_eq!(run.code, code, "{}", run.stdout);
}

#[test]
fn a_misspelt_key_is_named_on_its_line_with_the_key_meant() {
    let run = run(&[&format!("{DIR}/typo.yaml")], None);
    assert_lines(
        &run,
        1,
        &[
            format!("{DIR}/typo.yaml:11 (document 1, ClusterAdmissionPolicy capi-bootstrap-rollout): inPlaceEdit: unknown setting {}", known()),
            "  inPlaceEdit: did you mean \"inPlaceEdits\"?".into(),
            "capi-rollout-check settings: 1 policy checked: 1 with invalid settings, 0 valid; 0 documents skipped".into(),
        ],
    );
    // The whole message is the policy's, as the PolicyServer's log would print it.
    assert!(run.stdout.contains(&policy_says(
        r#"{"inPlaceEdit": "reject", "contractViolations": "warn"}"#
    )));
}

#[test]
fn a_bad_value_is_named_on_its_line() {
    let run = run(&[&format!("{DIR}/bad-value.yaml")], None);
    assert_lines(
        &run,
        1,
        &[
            format!("{DIR}/bad-value.yaml:10 (document 1, ClusterAdmissionPolicy capi-bootstrap-rollout): contractViolations: unknown value \"allow\" (expected one of reject, warn, ignore)"),
            "capi-rollout-check settings: 1 policy checked: 1 with invalid settings, 0 valid; 0 documents skipped".into(),
        ],
    );
}

#[test]
fn a_misspelt_value_gets_the_value_meant() {
    let manifest = "apiVersion: policies.kubewarden.io/v1\nkind: AdmissionPolicy\nmetadata:\n  name: p\n  namespace: fleet\nspec:\n  module: registry://ghcr.io/capi-bootstrap-rollout-policy/policies/capi-bootstrap-rollout-policy:v0.1.0\n  settings:\n    templateEdits: rejct\n";
    let run = run(&["-"], Some(manifest));
    assert_lines(
        &run,
        1,
        &[
            "<stdin>:9 (document 1, AdmissionPolicy p): templateEdits: unknown value \"rejct\" (expected one of reject, warn, allow)".into(),
            "  templateEdits: did you mean \"reject\"?".into(),
            "capi-rollout-check settings: 1 policy checked: 1 with invalid settings, 0 valid; 0 documents skipped".into(),
        ],
    );
}

#[test]
fn a_malformed_path_is_named_on_the_line_of_the_item() {
    let run = run(&[&format!("{DIR}/malformed-path.yaml")], None);
    assert_lines(
        &run,
        1,
        &[
            format!("{DIR}/malformed-path.yaml:12 (document 1, ClusterAdmissionPolicy capi-bootstrap-rollout): ignoredPaths.KubeadmConfig[1]: \"spec.files[*.content\": unclosed '['"),
            "capi-rollout-check settings: 1 policy checked: 1 with invalid settings, 0 valid; 0 documents skipped".into(),
        ],
    );
}

#[test]
fn a_file_of_several_documents_checks_each_policy_and_says_what_it_skipped() {
    let file = format!("{DIR}/several.yaml");
    let run = run(&[&file], None);
    assert_lines(
        &run,
        1,
        &[
            format!("{file}:3 (document 1, Namespace fleet): skipped, not a Kubewarden policy"),
            format!("{file}:9 (document 2, ClusterAdmissionPolicy capi-bootstrap-rollout): settings valid"),
            format!("{file}:30 (document 3, AdmissionPolicy capi-bootstrap-rollout-fleet): exemptUser: unknown setting {}", known()),
            "  exemptUser: did you mean \"exemptUsers\"?".into(),
            format!("{file}:34 (document 4, ClusterAdmissionPolicy safe-labels): skipped, spec.module registry://ghcr.io/kubewarden/policies/safe-labels:v1.0.0 does not contain \"capi-bootstrap-rollout-policy\" (--module names another)"),
            "capi-rollout-check settings: 2 policies checked: 1 with invalid settings, 1 valid; 2 documents skipped".into(),
        ],
    );
}

#[test]
fn the_policy_of_a_policy_group_is_checked() {
    let file = format!("{DIR}/group.yaml");
    let run = run(&[&file], None);
    assert_lines(
        &run,
        1,
        &[
            format!("{file}:20 (document 1, ClusterAdmissionPolicyGroup capi-guardrails, policy capi): bootstrapConfigKinds[1].version: contextAware needs the version to look ExampleConfig.bootstrap.example.com up in"),
            "capi-rollout-check settings: 1 policy checked: 1 with invalid settings, 0 valid; 0 documents skipped".into(),
        ],
    );
}

#[test]
fn the_shipped_policy_yaml_passes() {
    let run = run(&["../policy.yaml"], None);
    assert_lines(
        &run,
        0,
        &[
            "../policy.yaml:8 (document 1, ClusterAdmissionPolicy capi-bootstrap-rollout): settings valid".into(),
            "capi-rollout-check settings: 1 policy checked: 0 with invalid settings, 1 valid; 0 documents skipped".into(),
        ],
    );
}

#[test]
fn github_output_annotates_the_line_with_the_message_and_the_suggestion() {
    let file = format!("{DIR}/several.yaml");
    let run = run(
        &["--output", "github", &format!("{DIR}/typo.yaml"), &file],
        None,
    );
    assert_lines(
        &run,
        1,
        &[
            format!("::error file={DIR}/typo.yaml,line=11,title=capi-rollout-check settings%3A ClusterAdmissionPolicy capi-bootstrap-rollout (document 1)::inPlaceEdit: unknown setting {}%0AinPlaceEdit: did you mean \"inPlaceEdits\"?", known()),
            format!("::error file={file},line=30,title=capi-rollout-check settings%3A AdmissionPolicy capi-bootstrap-rollout-fleet (document 3)::exemptUser: unknown setting {}%0AexemptUser: did you mean \"exemptUsers\"?", known()),
            "capi-rollout-check settings: 3 policies checked: 2 with invalid settings, 1 valid; 2 documents skipped".into(),
        ],
    );
}

#[test]
fn module_picks_a_policy_run_from_a_local_module() {
    let manifest = "apiVersion: policies.kubewarden.io/v1\nkind: ClusterAdmissionPolicy\nmetadata:\n  name: local\nspec:\n  module: file:///policies/annotated-policy.wasm\n  settings:\n    inPlaceEdits: warn\n";
    let skipped = run(&["-"], Some(manifest));
    assert_eq!(skipped.code, 2, "{}", skipped.stdout);
    assert_eq!(
        skipped.stderr,
        "capi-rollout-check settings: no Kubewarden policy whose spec.module contains \"capi-bootstrap-rollout-policy\" in <stdin> (1 document skipped); --module names another module reference\n"
    );
    let checked = run(&["--module", "annotated-policy.wasm", "-"], Some(manifest));
    assert_lines(
        &checked,
        0,
        &[
            "<stdin>:1 (document 1, ClusterAdmissionPolicy local): settings valid".into(),
            "capi-rollout-check settings: 1 policy checked: 0 with invalid settings, 1 valid; 0 documents skipped".into(),
        ],
    );
}

#[test]
fn unreadable_input_exits_2_naming_the_file_and_line() {
    let cases = [
        (vec!["tests/fixtures/policies/missing.yaml"], None, "capi-rollout-check settings: tests/fixtures/policies/missing.yaml: cannot read: No such file or directory (os error 2)\n"),
        (vec!["tests/fixtures/policies"], None, "capi-rollout-check settings: tests/fixtures/policies: is a directory: name the policy manifests (a shell glob does: dir/*.yaml)\n"),
        (vec!["-"], Some("kind: ClusterAdmissionPolicy\nspec: [\n"), "capi-rollout-check settings: <stdin>:3 (document 1): not valid YAML: did not find expected node content at line 3 column 1, while parsing a flow node\n"),
    ];
    for (args, stdin, stderr) in cases {
        let run = run(&args, stdin);
        assert_eq!((run.code, run.stderr.as_str()), (2, stderr), "{args:?}");
        assert_eq!(run.stdout, "");
    }
}

#[test]
fn json_output_lists_every_document_with_its_state() {
    let file = format!("{DIR}/several.yaml");
    let run = run(&["--output", "json", &file], None);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let list: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let states: Vec<(&str, u64, &str)> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["object"].as_str().unwrap(),
                e["line"].as_u64().unwrap(),
                e["state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("Namespace fleet", 3, "skipped"),
            ("ClusterAdmissionPolicy capi-bootstrap-rollout", 9, "valid"),
            (
                "AdmissionPolicy capi-bootstrap-rollout-fleet",
                30,
                "invalid"
            ),
            ("ClusterAdmissionPolicy safe-labels", 34, "skipped"),
        ]
    );
    assert_eq!(
        list[2]["suggestions"],
        serde_json::json!(["exemptUser: did you mean \"exemptUsers\"?"])
    );
}
