//! The scenario runner, on a WAT guest.

use scenario_model::runner::{render_table, run_all, Evaluator, Verdict};

use crate::common::{request, Guest, Step, Workdir, HOST, SETTINGS_VALID};

// ---------------------------------------------------------------------------------------------
// The scenario runner, on a WAT guest.

#[test]
fn scenario_runner_reports_each_scenario() {
    let dir = Workdir::new("scenario_runner");
    // Rejects every request; settings other than `{}` are refused.
    let guest = Guest {
        validate: vec![Step::Respond(
            r#"{"accepted":false,"message":"in-place edit of the bootstrap config","code":403,"warnings":["rotate configRef instead"]}"#,
        )],
        validate_settings: vec![
            Step::WhenPayloadLen(2, vec![Step::Respond(SETTINGS_VALID)]),
            Step::Respond(r#"{"valid":false,"message":"unknown key noSuchKey"}"#),
        ],
        ..Guest::default()
    };
    let module = dir.guest("policy.wasm", &guest);
    let scenario = |name: &str, spec: &str| {
        dir.write(&format!("scenarios/{name}/scenario.yaml"), spec);
        dir.write(
            &format!("scenarios/{name}/request.json"),
            request().to_string(),
        );
    };
    scenario(
        "a-rejected",
        "description: in-place edits are rejected\nexpect:\n  allowed: false\n  code: 403\n  messageContains: [in-place]\n  warningsContain: [rotate]\n  warnings: 1\n",
    );
    scenario(
        "b-wrong",
        "description: expects the wrong thing\nexpect:\n  allowed: true\n",
    );
    scenario(
        "c-settings",
        "description: bad settings\nsettings: {noSuchKey: 1}\nexpect:\n  settingsError: noSuchKey\n",
    );
    scenario(
        "d-typo",
        "description: typo\nexpect:\n  allowed: false\n  mesageContains: [x]\n",
    );
    let results = run_all(
        &Evaluator::policy_host(HOST),
        &dir.0.join("scenarios"),
        &module,
        2,
    )
    .unwrap();
    let names: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["a-rejected", "b-wrong", "c-settings", "d-typo"]);
    let passed: Vec<bool> = results.iter().map(|r| r.passed()).collect();
    assert_eq!(passed, [true, false, true, false]);
    assert_eq!(results[0].verdict, Verdict::Reject);
    assert_eq!(results[0].summary, "in-place edit of the bootstrap config");
    assert_eq!(
        results[1].failures,
        vec![
            r#"expected allowed: true, got allowed: false (message: "in-place edit of the bootstrap config")"#
        ]
    );
    assert_eq!(results[2].verdict, Verdict::Error);
    assert_eq!(
        results[2].summary,
        "Provided settings are not valid: unknown key noSuchKey"
    );
    assert!(
        results[3].failures[0].contains("unknown field `mesageContains`"),
        "{:?}",
        results[3].failures
    );
    let table = render_table(&results, 120);
    assert!(
        table.contains("✓ a-rejected  REJECT  in-place edit of the bootstrap config\n"),
        "{table}"
    );
    assert!(table.contains("✗ b-wrong     REJECT"), "{table}");
    assert!(table.contains("    rerun: "), "{table}");
    assert!(table.ends_with("\n2 passed, 2 failed\n"), "{table}");
}
