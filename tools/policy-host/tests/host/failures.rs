//! Guest failures: allowed false, code 500, exit 0.

use std::time::Duration;

use crate::common::{console_logs, line, run_guest, Guest, Step, Workdir};

// ---------------------------------------------------------------------------------------------
// Guest failures: allowed false, code 500, exit 0.

const TRAP_PREFIX: &str = r#"{"uid":"req-1","allowed":false,"status":{"message":"internal server error: Guest call failure: "#;
const ERROR_SUFFIX: &str = r#"","code":500},"auditAnnotations":null,"warnings":null}"#;

#[test]
fn trap_is_a_500_and_the_policy_log_is_shown() {
    let dir = Workdir::new("trap_is_a_500");
    let guest = Guest::validate(vec![
        Step::Log("policy panicked at src/engine.rs:10:5: index out of bounds"),
        Step::Trap,
    ]);
    let run = run_guest(&dir, &guest, &[]);
    let line = line(&run);
    assert!(line.starts_with(TRAP_PREFIX), "{line}");
    assert!(line.ends_with(ERROR_SUFFIX), "{line}");
    // wasmtime-provider keeps the top of the error only: the backtrace, not the trap kind
    // (as with kwctl). The policy's console_log says why.
    assert!(
        line.contains("error while executing at wasm backtrace:"),
        "{line}"
    );
    assert_eq!(
        console_logs(&run),
        vec!["policy panicked at src/engine.rs:10:5: index out of bounds".to_string()]
    );
}

#[test]
fn guest_error_is_a_500() {
    let dir = Workdir::new("guest_error_is_a_500");
    let run = run_guest(&dir, &Guest::validate(vec![Step::Error("boom")]), &[]);
    assert_eq!(line(&run), format!("{TRAP_PREFIX}boom{ERROR_SUFFIX}"));
}

#[test]
fn garbage_response_is_a_500() {
    let dir = Workdir::new("garbage_response_is_a_500");
    let run = run_guest(&dir, &Guest::validate(vec![Step::Respond("not json")]), &[]);
    assert_eq!(
        line(&run),
        r#"{"uid":"req-1","allowed":false,"status":{"message":"internal server error: invalid response from policy: expected ident at line 1 column 2","code":500},"auditAnnotations":null,"warnings":null}"#
    );
    let run = run_guest(
        &dir,
        &Guest::validate(vec![Step::Respond(r#"{"allowed":true}"#)]),
        &[],
    );
    assert_eq!(
        line(&run),
        r#"{"uid":"req-1","allowed":false,"status":{"message":"internal server error: invalid response from policy: missing field `accepted` at line 1 column 16","code":500},"auditAnnotations":null,"warnings":null}"#
    );
}

const TIMEOUT_LINE: &str = r#"{"uid":"req-1","allowed":false,"status":{"message":"Policy execution interrupted because it exceeded the allowed execution time","code":500},"auditAnnotations":null,"warnings":null}"#;

#[test]
fn endless_loop_times_out() {
    let dir = Workdir::new("endless_loop_times_out");
    let run = run_guest(
        &dir,
        &Guest::validate(vec![Step::Loop]),
        &["--timeout-ms", "300"],
    );
    assert_eq!(line(&run), TIMEOUT_LINE);
    assert!(run.elapsed < Duration::from_secs(10), "{:?}", run.elapsed);
}

#[test]
fn default_deadline_is_two_seconds() {
    let dir = Workdir::new("default_deadline_is_two_seconds");
    let run = run_guest(&dir, &Guest::validate(vec![Step::Loop]), &[]);
    assert_eq!(line(&run), TIMEOUT_LINE);
    assert!(
        run.elapsed >= Duration::from_millis(1900),
        "{:?}",
        run.elapsed
    );
    assert!(run.elapsed < Duration::from_secs(15), "{:?}", run.elapsed);
}

#[test]
fn endless_init_is_stopped() {
    let dir = Workdir::new("endless_init_is_stopped");
    let guest = Guest {
        init: vec![Step::Loop],
        ..Guest::default()
    };
    let run = run_guest(&dir, &guest, &["--timeout-ms", "300"]);
    assert_eq!(run.status, 1);
    assert!(
        run.stderr
            .contains("init interrupted, execution deadline exceeded"),
        "{}",
        run.stderr
    );
}
