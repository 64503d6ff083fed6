//! Guests that trap, fail or loop: 500 answers, the server keeps serving.

use std::path::Path;
use std::time::{Duration, Instant};

use policy_host::engine::EngineOptions;
use policy_host::metadata::{set_custom_section, METADATA_SECTION};
use policy_host::run::{run, RunOptions, RunReport};
use serde_json::json;

use crate::common::{module_url, scenarios, Start, TempDir};

/// An annotated waPC guest whose settings are valid and whose `validate` runs `body`.
fn failing_guest(body: &str) -> Vec<u8> {
    let wat = format!(
        r#"(module
  (import "wapc" "__guest_response" (func $respond (param i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "{{\"valid\":true}}")
  (func (export "wapc_init"))
  (func (export "__guest_call") (param $op_len i32) (param $len i32) (result i32)
    (if (i32.eq (local.get $op_len) (i32.const 17))
      (then (call $respond (i32.const 16) (i32.const 14)) (return (i32.const 1))))
    {body}
    (i32.const 0)))"#
    );
    let module = wat::parse_str(&wat).unwrap();
    let metadata = json!({"protocolVersion": "v1", "rules": [], "mutating": false});
    set_custom_section(&module, METADATA_SECTION, metadata.to_string().as_bytes()).unwrap()
}

/// A trap and a deadline hit are answers (allowed: false, code 500), the same as `run`'s; in
/// monitor mode they are allowed, as policy-server allows them.
#[test]
fn guest_failures_and_timeouts_are_500_answers() {
    let dir = TempDir::new("guests");
    let looping = dir.path().join("loop.wasm");
    let trapping = dir.path().join("trap.wasm");
    std::fs::write(&looping, failing_guest("(loop $forever (br $forever))")).unwrap();
    std::fs::write(&trapping, failing_guest("unreachable")).unwrap();
    let scenario = scenarios()
        .into_iter()
        .find(|s| !s.spec.context_aware)
        .unwrap();
    let request = scenario.request().unwrap();
    let expected = |module: &Path| {
        let options = RunOptions {
            module: module.to_path_buf(),
            request_path: scenario.request_path().display().to_string(),
            engine: EngineOptions {
                timeout: Some(Duration::from_secs(1)),
                cache: true,
            },
            ..RunOptions::default()
        };
        run(&options, &mut RunReport::default()).unwrap()
    };
    let server = Start::new(json!({
        "loop": {"module": module_url(&looping), "timeoutEvalSeconds": 1},
        "trap": {"module": module_url(&trapping)},
        "loop-monitored": {"module": module_url(&looping), "timeoutEvalSeconds": 1, "policyMode": "monitor"},
    }))
    .arg("--ignore-kubernetes-connection-failure")
    .arg("--policy-timeout")
    .arg("30")
    .run();

    let started = Instant::now();
    let timed_out = server.review("validate", "loop", &request);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "timeoutEvalSeconds: 1 ignored"
    );
    assert_eq!(timed_out, expected(&looping));
    assert_eq!(timed_out.code(), Some(500));
    assert_eq!(
        timed_out.message(),
        Some("Policy execution interrupted because it exceeded the allowed execution time")
    );
    let trapped = server.review("validate", "trap", &request);
    assert_eq!(trapped, expected(&trapping));
    assert_eq!(trapped.code(), Some(500));
    assert!(trapped
        .message()
        .unwrap()
        .starts_with("internal server error: "));
    let monitored = server.review("validate", "loop-monitored", &request);
    assert!(
        monitored.allowed && monitored.status.is_none(),
        "{}",
        monitored.to_line()
    );
}
