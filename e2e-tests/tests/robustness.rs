//! The annotated module under hostile input: every case gets a clear verdict or a clear error,
//! never a trap and never a 500. Guest-level cases call `validate` on the module directly with
//! the payload a host would send (so nothing in front of the guest filters them); host-level
//! cases run the `policy-host` binary as kwctl users would.

use std::path::PathBuf;
use std::process::Command;

use e2e_tests::annotated_policy;
use policy_host::callbacks::HostContext;
use policy_host::engine::{EngineOptions, Policy};
use serde_json::{json, Value};

fn module() -> PathBuf {
    annotated_policy()
}

/// Calls `validate` on a fresh instance; panics on a guest error (a trap would be a 500).
fn validate(policy: &Policy, payload: &[u8]) -> Value {
    let instance = policy.instantiate().unwrap();
    let response = instance
        .call("validate", payload)
        .unwrap_or_else(|e| panic!("guest error (would be a 500): {e}"));
    serde_json::from_slice(&response).expect("the guest answered with JSON")
}

fn config_update(spec_old: Value, spec_new: Value) -> Value {
    let object = |spec: Value| {
        json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
               "metadata": {"name": "workers-0123abcd", "namespace": "default", "ownerReferences": [
                   {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "name": "workers", "uid": "u", "controller": true}]},
               "spec": spec})
    };
    json!({"uid": "r", "operation": "UPDATE", "userInfo": {"username": "alice"},
           "kind": {"group": "bootstrap.cluster.x-k8s.io", "version": "v1beta2", "kind": "KubeadmConfig"},
           "resource": {"group": "bootstrap.cluster.x-k8s.io", "version": "v1beta2", "resource": "kubeadmconfigs"},
           "object": object(spec_new), "oldObject": object(spec_old)})
}

fn payload(request: &Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"request": request, "settings": {}})).unwrap()
}

#[test]
fn hostile_payloads_get_clear_verdicts_from_the_guest() {
    let policy = Policy::from_file(
        &module(),
        &EngineOptions::default(),
        HostContext::offline().into_callback(),
    )
    .unwrap();
    a_big_request_is_judged(&policy);
    nesting_too_deep_is_a_400(&policy);
    malformed_requests_are_400s(&policy);
    numbers_where_strings_belong_are_judged(&policy);

    // Not JSON at all.
    let answer = validate(&policy, b"\xff\xfe not json");
    assert_eq!(answer["code"], 400);
}

fn a_big_request_is_judged(policy: &Policy) {
    // 3 MiB request: 300 files of 10 KiB, one changed.
    let files = |last: &str| -> Value {
        (0..300)
            .map(|i| json!({"path": format!("/etc/f{i}"), "content": if i == 299 { last.to_string() } else { "x".repeat(10 * 1024) }}))
            .collect()
    };
    let big = payload(&config_update(
        json!({"files": files("a")}),
        json!({"files": files("b")}),
    ));
    assert!(big.len() > 3 * 1024 * 1024, "{}", big.len());
    let answer = validate(policy, &big);
    assert_eq!(answer["accepted"], false);
    assert!(answer["message"]
        .as_str()
        .unwrap()
        .contains("[spec.files[299].content: Forbidden: changed]"));
}

fn nesting_too_deep_is_a_400(policy: &Policy) {
    // Nesting deeper than serde_json's limit (128): a 400 saying so.
    let deep = format!(
        r#"{{"settings": {{}}, "request": {{"uid": "r", "operation": "CREATE", "kind": {{"group": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig"}}, "object": {{"spec": {}{}}}}}}}"#,
        "[".repeat(5000),
        "]".repeat(5000)
    );
    let answer = validate(policy, deep.as_bytes());
    assert_eq!(
        (answer["accepted"].clone(), answer["code"].clone()),
        (json!(false), json!(400))
    );
    assert!(answer["message"]
        .as_str()
        .unwrap()
        .contains("recursion limit exceeded"));
}

/// Requests missing a field, or with one of the wrong type: a 400 naming it.
fn malformed_requests_are_400s(policy: &Policy) {
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "missing kind",
            json!({"uid": "r", "operation": "UPDATE"}),
            "request.kind is missing",
        ),
        (
            "missing operation",
            json!({"uid": "r", "kind": {"group": "cluster.x-k8s.io", "kind": "MachinePool"}}),
            "request.operation is missing",
        ),
        (
            "object null on UPDATE",
            json!({"uid": "r", "operation": "UPDATE", "kind": {"group": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig"}, "object": null, "oldObject": {}}),
            "request.object is required for Update",
        ),
        (
            "kind a number",
            json!({"uid": "r", "operation": "CREATE", "kind": {"group": "cluster.x-k8s.io", "kind": 7}}),
            "request.kind.kind must be a string",
        ),
        (
            "operation a number",
            json!({"uid": "r", "operation": 1, "kind": {"group": "cluster.x-k8s.io", "kind": "MachinePool"}}),
            "request.operation is missing or not a string",
        ),
        (
            "object a number",
            json!({"uid": "r", "operation": "CREATE", "kind": {"group": "cluster.x-k8s.io", "kind": "MachinePool"}, "object": 42}),
            "request.object must be an object",
        ),
    ];
    for (name, request, fragment) in cases {
        let answer = validate(policy, &payload(&request));
        assert_eq!(answer["accepted"], false, "{name}: {answer}");
        assert_eq!(answer["code"], 400, "{name}: {answer}");
        assert!(
            answer["message"].as_str().unwrap().contains(fragment),
            "{name}: {answer}"
        );
    }
}

fn numbers_where_strings_belong_are_judged(policy: &Policy) {
    // Numbers where strings belong inside objects: judged, not crashed.
    let mut odd = config_update(
        json!({"files": [{"path": "/a", "content": "x"}]}),
        json!({"files": [{"path": 1, "content": 2}]}),
    );
    odd["userInfo"] = json!({"username": 5, "groups": [1, 2]});
    odd["object"]["metadata"]["name"] = json!(9);
    let answer = validate(policy, &payload(&odd));
    assert_eq!(answer["accepted"], false);
    assert!(
        answer["message"].as_str().unwrap().contains(
            "[spec.files[0].content: Forbidden: changed, spec.files[0].path: Forbidden: changed]"
        ),
        "{answer}"
    );
}

#[test]
fn the_host_refuses_what_kwctl_refuses_with_a_clear_error() {
    let dir = std::env::temp_dir().join(format!("robustness-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = [
        (
            "no-uid",
            json!({"kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "CREATE"}),
        ),
        (
            "no-operation",
            json!({"uid": "r", "kind": {"group": "", "version": "v1", "kind": "Pod"}}),
        ),
    ];
    for (name, request) in cases {
        let path = dir.join(format!("{name}.json"));
        std::fs::write(&path, request.to_string()).unwrap();
        let out = Command::new(e2e_tests::policy_host())
            .args(["run", "--request-path"])
            .arg(&path)
            .arg(module())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name}: accepted by the host");
        assert!(
            stderr.contains("cannot build AdmissionRequest object from given input"),
            "{name}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{name}: printed a response");
    }
    std::fs::remove_dir_all(&dir).ok();
}
