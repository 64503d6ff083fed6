//! capi-rollout-check end to end: the binary on manifest sets as users keep them in Git
//! (tests/fixtures: KubeadmConfig + MachinePool v1beta2, no status, no ownerReferences).
//!
//! tests/fixtures/base is the deployed state (a directory: YAML, a JSON List, a
//! kustomization.yaml); each file under heads/ is a change to it, most of them rendered the way
//! `helm template` renders (`---`, `# Source:` comments, an empty template).

mod common;

use capi_bootstrap_rollout_policy::fingerprint::{spec_fingerprint, suggested_name};
use capi_bootstrap_rollout_policy::settings::Settings;
use rstest::rstest;
use serde_json::Value;

const BASE: &str = "tests/fixtures/base";

use common::{run, Run};

impl Run {
    /// Every fragment is in stdout.
    fn assert_says(&self, expected: &[&str]) {
        for fragment in expected {
            assert!(
                self.stdout.contains(fragment),
                "missing {fragment:?} in\n{}",
                self.stdout
            );
        }
    }
}

/// A file under heads/, or a path from the crate's directory.
fn head(name: &str) -> String {
    if name.starts_with("tests/") {
        name.to_string()
    } else {
        format!("tests/fixtures/heads/{name}")
    }
}

fn check(head_path: &str, extra: &[&str]) -> Run {
    let mut args = vec!["--base", BASE, "--head", head_path];
    args.extend(extra);
    run(&args, None)
}

const EDITED_VALUE: &str = "spec.joinConfiguration.nodeRegistration.kubeletExtraArgs[0].value";

#[rstest]
#[case::helm_style_rotation("rotation.yaml", &[], 0, &[
    "allowed   CREATE KubeadmConfig team-payments/workers-spot-f442e1ec",
    "allowed   UPDATE MachinePool team-payments/workers-spot\n  at:      tests/fixtures/heads/rotation.yaml:29 (document 2)\n  changed: spec.template.spec.bootstrap.configRef.name (changed)",
    "allowed   DELETE KubeadmConfig team-payments/workers-spot-8d2f0a1c\n  at:      tests/fixtures/base/team-payments/workers-spot.yaml:2 (document 1)",
    // The AWSMachinePool's instance type changed too; the on-demand objects (JSON in base,
    // YAML in head) did not.
    "3 changes judged: 0 rejected, 0 allowed with warnings, 3 allowed; 1 changed object of other kinds accepted",
], &["warning:", "REJECTED", "workers-ondemand"])]
#[case::in_place_edit("in-place-edit.yaml", &[], 1, &[
    "REJECTED  UPDATE KubeadmConfig team-payments/workers-spot-8d2f0a1c\n  at:      tests/fixtures/heads/in-place-edit.yaml:3 (document 1)",
    "  changed: spec.joinConfiguration.nodeRegistration.kubeletExtraArgs[0].value (changed)\n",
    "  reason:  KubeadmConfig.bootstrap.cluster.x-k8s.io \"workers-spot-8d2f0a1c\" is invalid: [spec.joinConfiguration.nodeRegistration.kubeletExtraArgs[0].value: Forbidden: changed]. The config is in use by MachinePool team-payments/workers-spot",
    "  fix:     To rotate, create a new KubeadmConfig \"workers-spot-f442e1ec\" in namespace team-payments with the desired spec, then set spec.template.spec.bootstrap.configRef.name of MachinePool team-payments/workers-spot to \"workers-spot-f442e1ec\"",
    "1 change judged: 1 rejected, 0 allowed with warnings, 0 allowed",
], &[])]
#[case::in_place_edit_warn_mode("in-place-edit.yaml", &["--settings", "tests/fixtures/settings/warn.yaml"], 0, &[
    "WARNING   UPDATE KubeadmConfig team-payments/workers-spot-8d2f0a1c",
    "  warning: spec.joinConfiguration.nodeRegistration.kubeletExtraArgs[0].value edited in place, not recorded in MachinePool team",
], &["REJECTED"])]
// The repository's own policy.yaml as settings: its spec.settings are read.
#[case::policy_manifest_as_settings("in-place-edit.yaml", &["--settings", "../policy.yaml"], 1, &[
    "REJECTED  UPDATE KubeadmConfig team-payments/workers-spot-8d2f0a1c",
], &[])]
#[case::rotation_target_missing("target-missing.yaml", &[], 0, &[
    "WARNING   UPDATE MachinePool team-payments/workers-spot",
    "  warning: configRef target KubeadmConfig workers-spot-f442e1ec does not exist yet: the MachinePool waits for it",
], &["REJECTED"])]
#[case::rotation_same_content("same-content.yaml", &[], 0, &[
    "  warning: workers-spot-f442e1ec has the same content as workers-spot-8d2f0a1c: a rotation for nothing",
], &["REJECTED"])]
#[case::delete_referenced_config("delete-referenced.yaml", &[], 1, &[
    "REJECTED  DELETE KubeadmConfig team-payments/workers-ondemand-1a2b3c4d\n  at:      tests/fixtures/base/team-payments/workers-ondemand.json:1 (document 1)",
    "[metadata.name: Forbidden: referenced by the configRef of MachinePool team-payments/workers-ondemand]",
], &[])]
#[case::delete_referenced_config_head_a_directory("split", &[], 1, &[
    "REJECTED  DELETE KubeadmConfig team-payments/workers-ondemand-1a2b3c4d",
], &["MachinePool team-payments/workers-ondemand\n"])]
#[case::delete_config_with_its_pool("delete-pool-and-config.yaml", &[], 0, &[
    "allowed   DELETE KubeadmConfig team-payments/workers-ondemand-1a2b3c4d",
    "allowed   DELETE MachinePool team-payments/workers-ondemand",
], &["REJECTED"])]
// In use means referenced by a pool in base or head: the edit may land before the rotation.
#[case::edit_old_config_while_rotating("edit-old-while-rotating.yaml", &[], 1, &[
    "REJECTED  UPDATE KubeadmConfig team-payments/workers-spot-8d2f0a1c",
    "[spec.files[0].content: Forbidden: changed]",
    "allowed   UPDATE MachinePool team-payments/workers-spot",
], &[])]
// base's pools own the configs they reference, as CAPI made them.
#[case::rotation_to_another_pools_config("steal-config.yaml", &[], 1, &[
    "REJECTED  UPDATE MachinePool team-payments/workers-ondemand",
    "KubeadmConfig team-payments/workers-spot-8d2f0a1c is controlled by MachinePool team-payments/workers-spot",
], &[])]
#[case::no_change(BASE, &[], 0, &[
    "No MachinePool or bootstrap config changed.\n0 changes judged",
], &[])]
fn text_report(
    #[case] head_file: &str,
    #[case] extra: &[&str],
    #[case] code: i32,
    #[case] expected: &[&str],
    #[case] absent: &[&str],
) {
    let result = check(&head(head_file), extra);
    assert_eq!(result.code, code, "{}{}", result.stdout, result.stderr);
    assert!(result.stderr.is_empty(), "{}", result.stderr);
    result.assert_says(expected);
    for fragment in absent {
        assert!(
            !result.stdout.contains(fragment),
            "unexpected {fragment:?} in\n{}",
            result.stdout
        );
    }
}

/// The name the rejection suggests is the policy's own fingerprint name of the head spec, and
/// the Helm-style rotation fixture, which follows the suggestion, passes.
#[test]
fn the_suggested_name_is_the_policys_and_following_it_passes() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(head("in-place-edit.yaml")),
    )
    .unwrap();
    let config: Value = yaml_serde::from_str(text.split("---\n").nth(1).unwrap()).unwrap();
    let rules = Settings::default().field_rules("KubeadmConfig");
    let name = suggested_name(
        "workers-spot-8d2f0a1c",
        &spec_fingerprint(config.get("spec"), &rules),
    );
    assert_eq!(name, "workers-spot-f442e1ec");
    let rejected = check(&head("in-place-edit.yaml"), &[]);
    assert!(rejected
        .stdout
        .contains(&format!("create a new KubeadmConfig \"{name}\"")));
    let rotated = check(&head("rotation.yaml"), &[]);
    assert_eq!(rotated.code, 0);
    assert!(rotated
        .stdout
        .contains(&format!("CREATE KubeadmConfig team-payments/{name}")));
}

fn json_report(head_file: &str) -> (i32, Vec<Value>) {
    let result = check(&head(head_file), &["--output", "json"]);
    let list: Value = serde_json::from_str(&result.stdout).expect("one JSON document");
    (result.code, list.as_array().expect("a list").clone())
}

#[test]
fn json_output_lists_each_judged_change() {
    let (code, list) = json_report("in-place-edit.yaml");
    assert_eq!(code, 1);
    assert_eq!(list.len(), 1);
    let entry = &list[0];
    assert_eq!(
        entry["object"],
        serde_json::json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
                           "namespace": "team-payments", "name": "workers-spot-8d2f0a1c"})
    );
    assert_eq!(entry["operation"], "UPDATE");
    assert_eq!(entry["allowed"], false);
    assert_eq!(entry["warnings"], serde_json::json!([]));
    assert_eq!(
        entry["changed"],
        serde_json::json!([format!("{EDITED_VALUE} (changed)")])
    );
    assert_eq!(entry["file"], "tests/fixtures/heads/in-place-edit.yaml");
    assert_eq!(
        (entry["line"].as_u64(), entry["document"].as_u64()),
        (Some(3), Some(1))
    );
    let message = entry["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("[{EDITED_VALUE}: Forbidden: changed]")),
        "{message}"
    );

    let (code, list) = json_report("rotation.yaml");
    assert_eq!(code, 0);
    let operations: Vec<(&str, &str, bool)> = list
        .iter()
        .map(|e| {
            (
                e["operation"].as_str().unwrap(),
                e["object"]["name"].as_str().unwrap(),
                e["allowed"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        operations,
        [
            ("CREATE", "workers-spot-f442e1ec", true),
            ("UPDATE", "workers-spot", true),
            ("DELETE", "workers-spot-8d2f0a1c", true),
        ]
    );
    assert!(list.iter().all(|e| e["message"].is_null()));

    let (code, list) = json_report("target-missing.yaml");
    assert_eq!(code, 0);
    assert_eq!(
        list[0]["warnings"],
        serde_json::json!(["configRef target KubeadmConfig workers-spot-f442e1ec does not exist yet: the MachinePool waits for it"])
    );
}

#[rstest]
#[case::rejection("in-place-edit.yaml", 1, &[
    "::error file=tests/fixtures/heads/in-place-edit.yaml,line=3,title=capi-rollout-check%3A UPDATE KubeadmConfig team-payments/workers-spot-8d2f0a1c::KubeadmConfig.bootstrap.cluster.x-k8s.io \"workers-spot-8d2f0a1c\" is invalid: [spec.joinConfiguration.nodeRegistration.kubeletExtraArgs[0].value: Forbidden: changed]. ",
])]
#[case::warning("target-missing.yaml", 0, &[
    "::warning file=tests/fixtures/heads/target-missing.yaml,line=29,title=capi-rollout-check%3A UPDATE MachinePool team-payments/workers-spot::configRef target KubeadmConfig workers-spot-f442e1ec does not exist yet: the MachinePool waits for it\n",
])]
// A DELETE has no head document: the base file when head is a file ...
#[case::delete_head_a_file("delete-referenced.yaml", 1, &[
    "::error file=tests/fixtures/base/team-payments/workers-ondemand.json,line=1,title=capi-rollout-check%3A DELETE KubeadmConfig team-payments/workers-ondemand-1a2b3c4d::",
])]
// ... the same path below head when both are directories (the file the change edits).
#[case::delete_both_directories("split", 1, &[
    "::error file=tests/fixtures/heads/split/team-payments/workers-ondemand.json,title=capi-rollout-check%3A DELETE KubeadmConfig team-payments/workers-ondemand-1a2b3c4d::",
])]
#[case::unreadable_input("tests/fixtures/bad/unparsable.yaml", 2, &[
    "::error file=tests/fixtures/bad/unparsable.yaml,line=37,title=capi-rollout-check::tests/fixtures/bad/unparsable.yaml:37 (document 2): not valid YAML",
])]
fn github_output(#[case] head_file: &str, #[case] code: i32, #[case] expected: &[&str]) {
    let result = check(&head(head_file), &["--output", "github"]);
    assert_eq!(result.code, code, "{}{}", result.stdout, result.stderr);
    result.assert_says(expected);
    // Every line is a workflow command but the closing summary.
    let lines: Vec<&str> = result.stdout.lines().collect();
    if code != 2 {
        assert!(lines.last().unwrap().starts_with("capi-rollout-check: "));
        assert!(lines[..lines.len() - 1]
            .iter()
            .all(|l| l.starts_with("::error ") || l.starts_with("::warning ")));
    }
}

#[rstest]
#[case::head_from_stdin(&["--base", BASE, "--head", "-"], "heads/in-place-edit.yaml", 1,
    "REJECTED  UPDATE KubeadmConfig team-payments/workers-spot-8d2f0a1c\n  at:      <stdin>:3 (document 1)")]
#[case::base_from_stdin(&["--base", "-", "--head", "tests/fixtures/heads/rotation.yaml"], "heads/in-place-edit.yaml", 0,
    "allowed   DELETE KubeadmConfig team-payments/workers-spot-8d2f0a1c\n  at:      <stdin>:3 (document 1)")]
#[case::json_on_stdin(&["--base", BASE, "--head", "-"], "base/team-payments/workers-ondemand.json", 0,
    "allowed   DELETE KubeadmConfig team-payments/workers-spot-8d2f0a1c")]
fn stdin(#[case] args: &[&str], #[case] input: &str, #[case] code: i32, #[case] expected: &str) {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(input),
    )
    .unwrap();
    let result = run(args, Some(&text));
    assert_eq!(result.code, code, "{}{}", result.stdout, result.stderr);
    assert!(result.stdout.contains(expected), "{}", result.stdout);
}

#[test]
fn stdin_has_no_file_to_annotate() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(head("in-place-edit.yaml")),
    )
    .unwrap();
    let result = run(
        &["--base", BASE, "--head", "-", "--output", "github"],
        Some(&text),
    );
    assert_eq!(result.code, 1);
    assert!(
        result.stdout.starts_with(
            "::error title=capi-rollout-check%3A UPDATE KubeadmConfig team-payments/workers-spot-8d2f0a1c::"
        ),
        "{}",
        result.stdout
    );
}

#[rstest]
#[case::unparsable_yaml(&["--head", "tests/fixtures/bad/unparsable.yaml"],
    "tests/fixtures/bad/unparsable.yaml:37 (document 2): not valid YAML: did not find expected ',' or ']' at line 37 column 11, while parsing a flow sequence at line 36 column 13")]
#[case::unparsable_yaml_in_base(&["--head", "tests/fixtures/heads/rotation.yaml", "--base", "tests/fixtures/bad/unparsable.yaml"],
    "tests/fixtures/bad/unparsable.yaml:37 (document 2): not valid YAML")]
#[case::missing_kind(&["--head", "tests/fixtures/bad/no-kind.yaml"],
    "tests/fixtures/bad/no-kind.yaml:26 (document 2): the object has no kind")]
#[case::missing_name_in_a_list(&["--head", "tests/fixtures/bad/no-name.json"],
    "tests/fixtures/bad/no-name.json:1 (document 1): items[1]: the MachinePool has no metadata.name")]
#[case::duplicate(&["--head", "tests/fixtures/bad/duplicate"],
    "tests/fixtures/bad/duplicate/b.yaml:24 (document 2): duplicate object KubeadmConfig team-payments/workers-spot-8d2f0a1c (bootstrap.cluster.x-k8s.io), first defined at tests/fixtures/bad/duplicate/a.yaml:1 (document 1)")]
#[case::invalid_settings(&["--head", "tests/fixtures/heads/rotation.yaml", "--settings", "tests/fixtures/settings/typo.json"],
    "tests/fixtures/settings/typo.json: invalid settings: inPlaceEdit: unknown setting (known: inPlaceEdits")]
#[case::missing_path(&["--head", "tests/fixtures/heads/nothing-here.yaml"],
    "tests/fixtures/heads/nothing-here.yaml: cannot read")]
#[case::both_stdin(&["--head", "-", "--base", "-"], "only one of --base and --head may be - (stdin)")]
fn unreadable_input_exits_2(#[case] args: &[&str], #[case] message: &str) {
    let mut all = args.to_vec();
    if !args.contains(&"--base") {
        all.extend(["--base", BASE]);
    }
    let result = run(&all, Some(""));
    assert_eq!(result.code, 2, "{}{}", result.stdout, result.stderr);
    assert!(
        result.stderr.contains(message),
        "missing {message:?} in {}",
        result.stderr
    );
    assert!(result.stdout.is_empty(), "{}", result.stdout);
}

#[rstest]
#[case::json_stream("{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"a\"}}\n{\"kind\": \"ConfigMap\",\n \"apiVersion\": 5}", "<stdin>:2 (document 2): the object has no apiVersion")]
#[case::json_syntax(
    "{\"apiVersion\": \"v1\",\n\n \"kind\" \"ConfigMap\"}",
    "<stdin>:3 (document 1): not valid JSON: expected `:` at line 3 column 9"
)]
#[case::not_an_object(
    "---\n# Source: x\n---\n- a\n- b\n",
    "<stdin>:4 (document 1): a manifest must be an object, got a list"
)]
#[case::comment_only_documents_take_no_number(
    "---\n# Source: a\n---\n# Source: b\napiVersion: v1\nkind: ConfigMap\n",
    "<stdin>:5 (document 1): the ConfigMap has no metadata.name"
)]
fn malformed_stdin(#[case] input: &str, #[case] message: &str) {
    let result = run(&["--base", "-", "--head", BASE], Some(input));
    assert_eq!(result.code, 2, "{}{}", result.stdout, result.stderr);
    assert!(result.stderr.contains(message), "{}", result.stderr);
}

#[test]
fn usage_errors_exit_2() {
    let result = run(&["--base", BASE], None);
    assert_eq!(result.code, 2);
    assert!(result.stderr.contains("--head <PATH>"), "{}", result.stderr);
    let result = run(&["--base", BASE, "--head", BASE, "--output", "xml"], None);
    assert_eq!(result.code, 2);
}

/// Bootstrap templates and their MachineDeployments, judged by the same engine.
#[rstest]
#[case::in_place_edit("in-place-edit.yaml", 1, &[
    "REJECTED  UPDATE KubeadmConfigTemplate team-payments/workers-md-3c9d1e7a",
    "  changed: spec.template.spec.joinConfiguration.nodeRegistration.kubeletExtraArgs[0].value (changed)\n",
    "  fix:     To roll a change out, create a new KubeadmConfigTemplate \"workers-md-cd1977e4\"",
])]
#[case::rotation("rotation.yaml", 0, &[
    "allowed   UPDATE MachineDeployment team-payments/workers-md\n  at:      tests/fixtures/templates/rotation.yaml:15 (document 2)\n  changed: spec.template.spec.bootstrap.configRef.name (changed)",
    "allowed   DELETE KubeadmConfigTemplate team-payments/workers-md-3c9d1e7a",
    "3 changes judged: 0 rejected, 0 allowed with warnings, 3 allowed",
])]
#[case::delete_referenced("delete-referenced.yaml", 1, &[
    "[metadata.name: Forbidden: referenced by the configRef of MachineDeployment team-payments/workers-md]",
])]
fn bootstrap_templates(#[case] head_file: &str, #[case] code: i32, #[case] expected: &[&str]) {
    let result = run(
        &[
            "--base",
            "tests/fixtures/templates/base.yaml",
            "--head",
            &format!("tests/fixtures/templates/{head_file}"),
        ],
        None,
    );
    assert_eq!(result.code, code, "{}{}", result.stdout, result.stderr);
    result.assert_says(expected);
}
