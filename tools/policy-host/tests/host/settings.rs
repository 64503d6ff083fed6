//! Settings: refused settings end the run, valid ones reach both calls.

use serde_json::{json, Value};

use crate::common::{
    console_logs, line, request, run_guest, Guest, Step, Workdir, ACCEPT, SETTINGS_VALID,
};

// ---------------------------------------------------------------------------------------------
// Settings.

#[test]
fn rejected_settings_end_the_run() {
    let dir = Workdir::new("rejected_settings_end_the_run");
    let guest = Guest {
        validate_settings: vec![Step::Respond(
            r#"{"valid":false,"message":"inPlaceEdits: must be one of reject, warn, allow"}"#,
        )],
        ..Guest::default()
    };
    let run = run_guest(
        &dir,
        &guest,
        &["--settings-json", r#"{"inPlaceEdits":"explode"}"#],
    );
    assert_eq!(run.status, 1);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr
            .contains("Error: Provided settings are not valid: inPlaceEdits: must be one of reject, warn, allow"),
        "{}",
        run.stderr
    );
    // A settings call that traps is an invalid-settings error too.
    let guest = Guest {
        validate_settings: vec![Step::Trap],
        ..Guest::default()
    };
    let run = run_guest(&dir, &guest, &[]);
    assert_eq!(run.status, 1);
    assert!(
        run.stderr
            .contains("Error invoking settings validation callback"),
        "{}",
        run.stderr
    );
}

#[test]
fn settings_reach_both_calls() {
    let dir = Workdir::new("settings_reach_both_calls");
    let guest = Guest {
        validate: vec![Step::LogPayload, Step::Respond(ACCEPT)],
        validate_settings: vec![Step::LogPayload, Step::Respond(SETTINGS_VALID)],
        ..Guest::default()
    };
    let settings = json!({"exemptUsers": ["bob"], "inPlaceEdits": "warn"});
    let run = run_guest(&dir, &guest, &["--settings-json", &settings.to_string()]);
    line(&run);
    let logs = console_logs(&run);
    assert_eq!(logs.len(), 2, "{logs:?}");
    assert_eq!(serde_json::from_str::<Value>(&logs[0]).unwrap(), settings);
    let payload: Value = serde_json::from_str(&logs[1]).unwrap();
    assert_eq!(payload.as_object().unwrap().len(), 2);
    assert_eq!(payload["settings"], settings);
    // Re-serialized like policy-evaluator's AdmissionRequest: every known field kept.
    assert_eq!(payload["request"], request());

    // No settings: `{}` for both; --settings-path (YAML) works too.
    let run = run_guest(&dir, &guest, &[]);
    let logs = console_logs(&run);
    assert_eq!(logs[0], "{}");
    assert_eq!(
        serde_json::from_str::<Value>(&logs[1]).unwrap()["settings"],
        json!({})
    );
    let path = dir.write("settings.yaml", "inPlaceEdits: warn\nexemptUsers: [bob]\n");
    let run = run_guest(&dir, &guest, &["--settings-path", path.to_str().unwrap()]);
    assert_eq!(
        serde_json::from_str::<Value>(&console_logs(&run)[0]).unwrap(),
        settings
    );

    // Settings must be an object.
    let run = run_guest(&dir, &guest, &["--settings-json", "[1]"]);
    assert_eq!(run.status, 1);
    assert!(
        run.stderr
            .contains("Invalid settings in CRD, not an object"),
        "{}",
        run.stderr
    );
}
