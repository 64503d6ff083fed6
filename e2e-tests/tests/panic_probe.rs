//! The release profile aborts on panic (a trap). This checks, on the real module built with the
//! real profile plus the test-only `panic-probe` feature, that the trap still reaches the host
//! as an error and that the panic message arrives first through waPC's console log, so a user
//! sees why their request got a 500.
//!
//! PANIC_PROBE_POLICY: the probe module (`make target/panic-probe.wasm`).

use std::path::PathBuf;

use policy_host::callbacks::HostContext;
use policy_host::engine::{take_guest_logs, EngineOptions, Policy};

#[test]
fn a_guest_panic_is_a_named_host_error() {
    let path = std::env::var_os("PANIC_PROBE_POLICY")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/panic-probe.wasm")
        });
    assert!(
        path.is_file(),
        "{} not found: run `make target/panic-probe.wasm`",
        path.display()
    );
    let policy = Policy::from_file(
        &path,
        &EngineOptions::default(),
        HostContext::offline().into_callback(),
    )
    .unwrap();
    let instance = policy.instantiate().unwrap();
    let result = instance.call("panic_probe", b"");
    assert!(
        result.is_err(),
        "the panic did not reach the host as an error"
    );
    let logs = take_guest_logs().join("\n");
    assert!(
        logs.contains("capi-bootstrap-rollout-policy panicked: ")
            && logs.contains("panic probe reached"),
        "the panic message was not logged: {logs:?}"
    );
    // The module still answers on a fresh instance, as policy-server uses one per request.
    let again = policy.instantiate().unwrap();
    assert!(again.call("protocol_version", b"").is_ok());
}
