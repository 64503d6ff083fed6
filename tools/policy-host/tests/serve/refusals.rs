//! Settings and modules refused at start.

use e2e_tests::annotated_policy;
use scenario_model::Scenario;
use serde_json::json;

use crate::common::{module_url, scenarios, settings_of, Refused, Start, TempDir};

fn refused(start: Start) -> Refused {
    match start.try_run() {
        Ok(server) => panic!("the server started:\n{}", server.stderr()),
        Err(refused) => refused,
    }
}

fn assert_refused(refused: &Refused, error: &str) {
    assert_eq!(
        refused.status.and_then(|s| s.code()),
        Some(1),
        "{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains(&format!("Error: {error}")),
        "expected Error: {error}\nstderr:\n{}",
        refused.stderr
    );
}

/// Settings the policy refuses end the start with policy-server's message, as `run` refuses
/// them; so do modules policy-server would not load, and flags and files it refuses.
#[test]
fn refusals_at_start() {
    let module = annotated_policy();
    let url = module_url(&module);
    let refusing: Vec<Scenario> = scenarios()
        .into_iter()
        .filter(|s| s.spec.expect.settings_error.is_some())
        .collect();
    assert!(!refusing.is_empty(), "no scenario with settingsError");
    for scenario in &refusing {
        let fragment = scenario.spec.expect.settings_error.as_deref().unwrap();
        let outcome = refused(
            Start::new(json!({"p": {"module": url, "settings": settings_of(scenario)}}))
                .arg("--ignore-kubernetes-connection-failure"),
        );
        assert_refused(&outcome, "Policy settings are invalid: ");
        assert!(
            outcome.stderr.contains(fragment),
            "{}: {}",
            scenario.name,
            outcome.stderr
        );
    }

    let dir = TempDir::new("refusals");
    let unannotated = dir.path().join("unannotated.wasm");
    std::fs::write(&unannotated, wat::parse_str("(module)").unwrap()).unwrap();
    let ignore = "--ignore-kubernetes-connection-failure";
    assert_refused(
        &refused(Start::new(json!({"p": {"module": module_url(&unannotated)}})).arg(ignore)),
        "Policy is missing protocol version, which is required for KubewardenWapc execution mode",
    );
    assert_refused(
        &refused(
            Start::new(json!({"p": {"module": "registry://ghcr.io/example/policy:v1"}}))
                .arg(ignore),
        ),
        "policy-host serve loads local modules only",
    );
    assert_refused(
        &refused(Start::new(json!({"a/b": {"module": url}})).arg(ignore)),
        "policy name 'a/b' contains a '/' character",
    );
    assert_refused(
        &refused(Start::new(json!({"p": {"module": url, "policyMode": "enforce"}})).arg(ignore)),
        "error while loading policies from",
    );
    assert_refused(
        &refused(
            Start::new(json!({"p": {"module": url, "hostCapabilities": ["kubernetes"]}})).arg(ignore),
        ),
        "bootstrap failure: invalid hostCapabilities pattern for policy p: invalid pattern \"kubernetes\": not a complete capability path",
    );
    // Without --ignore-kubernetes-connection-failure, no cluster is an error, as in
    // policy-server, whatever the policies.
    let outcome = refused(Start::new(json!({"p": {"module": url}})));
    assert_refused(
        &outcome,
        "Cannot connect to Kubernetes, context aware policies would not work properly",
    );
    assert!(
        outcome
            .stderr
            .contains("Cannot connect to Kubernetes cluster: "),
        "{}",
        outcome.stderr
    );
}
